#!/usr/bin/env bash
# The security boundary with real users (issue 19; docs/SECURITY.md names
# the check of each line). Creates, and always removes, the system users
# neffd-test (the service user, primary group neuron-test), rank-a and
# rank-b (own groups, members of neuron-test) and outsider (in no group of
# neffd's), runs a real neffd as neffd-test and real ranks (neffcc in front
# of tests/fake_neuronx_cc, which counts compiles) and neffctl as the others,
# each through `setpriv --reuid --regid --init-groups` (no PAM) with umask
# 022. Needs root and fails without it (CI runs as root).
#
# Everything lives under a fresh mode-0755 directory in /tmp: Bazel's
# TEST_TMPDIR and runfiles are under /root, which the other users cannot
# enter, so the binaries are copied there too.
set -uo pipefail
export PATH="/usr/sbin:/sbin:$PATH"

fail() { echo "FAIL: $*"; exit 1; }
[[ "$(id -u)" == 0 ]] || fail "needs root to create users (CI runs as root)"

runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
GROUP=neuron-test
USERS=(neffd-test rank-a rank-b outsider)
S=""
DAEMON_PID=""

remove_users() {
  for u in "${USERS[@]}"; do
    if id "$u" >/dev/null 2>&1; then userdel "$u" >/dev/null 2>&1; fi
    if getent group "$u" >/dev/null; then groupdel "$u" >/dev/null 2>&1; fi
  done
  if getent group "$GROUP" >/dev/null; then groupdel "$GROUP"; fi
}
cleanup() {
  if [[ -n "$DAEMON_PID" ]]; then kill "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; fi
  remove_users
  if [[ -n "$S" ]]; then rm -rf "$S"; fi
}
trap cleanup EXIT
remove_users  # a run that was killed may have left them

groupadd --system "$GROUP" || fail "groupadd"
useradd --system --no-create-home --shell /usr/sbin/nologin \
  --gid "$GROUP" neffd-test || fail "useradd neffd-test"
for u in rank-a rank-b; do
  useradd --system --no-create-home --shell /usr/sbin/nologin --user-group \
    --groups "$GROUP" "$u" || fail "useradd $u"
done
useradd --system --no-create-home --shell /usr/sbin/nologin --user-group \
  outsider || fail "useradd outsider"

S=$(mktemp -d /tmp/neffd-security.XXXXXX)
chmod 0755 "$S"
mkdir -p "$S/bin" "$S/mask" "$S/real" "$S/cache" "$S/local" "$S/run"
for b in daemon/neffd client/neffctl client/neffcc tests/fake_neuronx_cc; do
  install -m 0755 "$runfiles/$b" "$S/bin/" || fail "copy $b"
done
ln -s "$S/bin/neffcc" "$S/mask/neuronx-cc"
ln -s "$S/bin/fake_neuronx_cc" "$S/real/neuronx-cc"
# What deploy/ sets up: the shared store's root for the group (on FSx, the
# site's job), the local dir and the socket dir for the service user.
chgrp "$GROUP" "$S/cache" && chmod 2775 "$S/cache"
chown neffd-test:"$GROUP" "$S/local" && chmod 2770 "$S/local"
chown neffd-test:"$GROUP" "$S/run" && chmod 0750 "$S/run"
RUNS="$S/runs"
: >"$RUNS" && chmod 0666 "$RUNS"
for u in rank-a rank-b outsider; do
  install -d -o "$u" -g "$u" -m 0700 "$S/work-$u"
done

ADDRESS="unix:$S/run/neffd.sock"
ADMIN="unix:$S/run/admin.sock"

# as USER CMD...: CMD as USER (primary group: neuron-test for the service
# user, else the user's own), with a rank's environment.
as() {
  local user=$1; shift
  local group=$user
  [[ "$user" == neffd-test ]] && group=$GROUP
  setpriv --reuid="$user" --regid="$group" --init-groups \
    env -i PATH="$S/mask:$S/real:/usr/bin:/bin" \
    NEFFD_ADDRESS="$ADDRESS" NEFFD_ADMIN_ADDRESS="$ADMIN" \
    TORCH_NEURONX_NEFF_CACHE_DIR="$S/cache/neff" \
    TORCH_NEURONX_HLO_CACHE_DIR="$S/cache/hlo" \
    TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR="$S/local" \
    TORCH_NEURONX_DEBUG_DIR="$S/work-$user" \
    TORCH_NEURONX_METRICS_DIR="$S/work-$user" \
    FAKE_NEURONX_CC_RUNS="$RUNS" ${EXTRA_ENV:-} \
    bash -c 'umask 022; exec "$@"' - "$@"
}

# wait_for SECONDS CMD...: polls CMD until it succeeds or the deadline.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

start_daemon() {
  setpriv --reuid=neffd-test --regid="$GROUP" --init-groups \
    bash -c 'umask 022; exec "$@"' - "$S/bin/neffd" --address="$ADDRESS" \
    --admin_address="$ADMIN" --cache_dir="$S/cache/neff" \
    --hlo_cache_dir="$S/cache/hlo" --local_dir="$S/local" \
    --socket_group="$GROUP" --env_file=/dev/null --v=2 \
    >>"$S/neffd.out" 2>>"$S/neffd.err" &
  DAEMON_PID=$!
  wait_for 60 test -S "$S/run/admin.sock" ||
    fail "neffd did not start: $(cat "$S/neffd.err")"
  wait_for 10 as neffd-test "$S/bin/neffctl" health >/dev/null ||
    fail "neffd does not answer: $(cat "$S/neffd.err")"
}

stop_daemon() {
  kill -TERM "$DAEMON_PID"
  wait "$DAEMON_PID" || fail "neffd exited $? on SIGTERM"
  DAEMON_PID=""
}

runs() { wc -l <"$RUNS"; }

# compile USER GRAPH: neffcc compiles GRAPH the way libneuronxla calls
# neuronx-cc, in a fresh work directory of USER's; prints the NEFF's path.
compile() {
  local user=$1 graph=$2
  local dir
  dir=$(as "$user" mktemp -d "$S/work-$user/call.XXXXXX") || return 1
  local input="$dir/model.MODULE_$graph+4fd1c.hlo_module.pb"
  as "$user" bash -c "echo 'HloModule $graph' >'$input'" || return 1
  as "$user" neuronx-cc compile --target=trn1 --framework=XLA "$input" \
    --output "$dir/model.neff" --verbose=35 >"$dir.out" 2>"$dir.err" ||
    { cat "$dir.err" >&2; return 1; }
  echo "$dir/model.neff"
}

expect_exit() {  # CODE WHAT CMD...
  local want=$1 what=$2; shift 2
  local out
  out=$("$@" 2>&1)
  local got=$?
  [[ "$got" == "$want" ]] || fail "$what: exit $got, want $want: $out"
  LAST_OUT=$out
}

start_daemon

echo "== rank-a and rank-b compile through the daemon and read each other's entries"
a1=$(compile rank-a g1) || fail "rank-a compile g1"
[[ "$(runs)" == 1 ]] || fail "g1 compiled $(runs) times"
b1=$(compile rank-b g1) || fail "rank-b compile g1"
[[ "$(runs)" == 1 ]] || fail "rank-b recompiled g1 instead of reading rank-a's"
cmp -s "$a1" "$b1" || fail "rank-b got other bytes for g1"
b2=$(compile rank-b g2) || fail "rank-b compile g2"
a2=$(compile rank-a g2) || fail "rank-a compile g2"
[[ "$(runs)" == 2 ]] || fail "g1+g2 compiled $(runs) times, want 2"
cmp -s "$a2" "$b2" || fail "rank-a got other bytes for g2"
# Through the daemon, not around it: it published both and served the hits.
stats=$(as rank-a "$S/bin/neffctl" --json stats) || fail "stats: $stats"
[[ "$stats" == *'"publishes":"2"'* && "$stats" == *'"hits":"2"'* ]] ||
  fail "the daemon did not serve the ranks: $stats"

echo "== after rank-a publishes, it cannot modify the tier copy rank-b is handed"
tier_files=("$S"/local/tier/neff/*/*)
[[ ${#tier_files[@]} == 2 ]] || fail "tier holds ${tier_files[*]}"
for f in "${tier_files[@]}"; do
  [[ "$(stat -c '%U %a' "$f")" == "neffd-test 440" ]] ||
    fail "tier file $f is $(stat -c '%U %a' "$f"), want neffd-test 440"
  as rank-a bash -c "echo forged >>'$f'" 2>/dev/null && fail "rank-a wrote $f"
  as rank-a chmod 0666 "$f" 2>/dev/null && fail "rank-a chmod'ed $f"
  as rank-a rm -f "$f" 2>/dev/null
  [[ -f "$f" ]] || fail "rank-a removed $f"
done
b1again=$(compile rank-b g1) || fail "rank-b compile g1 again"
cmp -s "$a1" "$b1again" || fail "rank-b was handed other bytes"

echo "== outsider: no socket, no lock file, no staging, no tier"
expect_exit 3 "outsider neffctl stats" as outsider "$S/bin/neffctl" stats
expect_exit 3 "outsider neffctl drain" as outsider "$S/bin/neffctl" drain
lock=$(find "$S/local/locks" -name '*.lock' | head -1)
[[ -n "$lock" ]] || fail "no lock file under $S/local/locks"
as outsider flock -n "$lock" true 2>/dev/null && fail "outsider flocked $lock"
as outsider cat "$lock" 2>/dev/null && fail "outsider opened $lock"
as outsider touch "$S/local/staging/squat" 2>/dev/null &&
  fail "outsider wrote to staging"
as outsider cat "${tier_files[0]}" >/dev/null 2>&1 &&
  fail "outsider read the tier"
as outsider ls "$S/local/tier" >/dev/null 2>&1 && fail "outsider listed the tier"
# What a member of the group may do with the same files.
as rank-b flock -n "$lock" true || fail "rank-b cannot flock $lock"

echo "== rank-a's mutating neffctl commands on the ranks' socket are refused"
for cmd in "evict neff g1 --compiler_version=2.19.8089.0" "gc --max-size=1" \
    drain "import $S/cache/neff"; do
  # shellcheck disable=SC2086
  expect_exit 4 "rank-a $cmd" as rank-a "$S/bin/neffctl" \
    --admin_address="$ADDRESS" $cmd
  [[ "$LAST_OUT" == *"admin socket $ADMIN"* ]] ||
    fail "rank-a $cmd: message does not name the admin socket: $LAST_OUT"
done
# The admin socket itself is closed to ranks (0600, the service user's).
expect_exit 3 "rank-a drain on the admin socket" as rank-a "$S/bin/neffctl" drain
expect_exit 0 "rank-a health" as rank-a "$S/bin/neffctl" health
# The service user, through the admin socket.
expect_exit 0 "neffd-test drain" as neffd-test "$S/bin/neffctl" drain
expect_exit 1 "health while drained" as rank-a "$S/bin/neffctl" health
expect_exit 0 "neffd-test undrain" as neffd-test "$S/bin/neffctl" undrain
expect_exit 0 "neffd-test gc --dry-run" as neffd-test "$S/bin/neffctl" gc \
  --max-size=1 --dry-run
expect_exit 0 "neffd-test import" as neffd-test "$S/bin/neffctl" import \
  "$S/cache/neff"
# Who did it, in the kernel's word (SO_PEERCRED), is in the daemon's log.
grep -q "admin_call.*Drain.*uid=$(id -u neffd-test) " "$S/neffd.err" ||
  fail "no admin_call log line naming neffd-test's uid: $(grep admin "$S/neffd.err")"

echo "== an inline publish from a uid outside the group is refused"
echo "HloModule inline" >"$S/inline.hlo" && chmod 0644 "$S/inline.hlo"
expect_exit 0 "rank-a inline put" as rank-a "$S/bin/neffctl" put hlo inl-a \
  "$S/inline.hlo" --compiler_version=1
# A socket opened up by mistake lets the outsider connect; the daemon still
# knows who it is.
chmod 0666 "$S/run/neffd.sock" && chmod 0755 "$S/run"
expect_exit 4 "outsider inline put" as outsider "$S/bin/neffctl" put hlo \
  inl-o "$S/inline.hlo" --compiler_version=1
[[ "$LAST_OUT" == *"not in the ranks' group"* ]] ||
  fail "outsider's inline publish: $LAST_OUT"
chmod 0660 "$S/run/neffd.sock" && chmod 0750 "$S/run"

echo "== daemon stopped: each key compiles once between the ranks (fallback)"
stop_daemon
before=$(runs)
pids=()
for u in rank-a rank-b rank-a rank-b; do
  for g in g3 g4; do
    EXTRA_ENV=FAKE_NEURONX_CC_SLEEP_MS=500 compile "$u" "$g" \
      >"$S/fallback.$u.$g.$RANDOM" &
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait "$p" || fail "a fallback compile failed"; done
[[ $(($(runs) - before)) == 2 ]] ||
  fail "g3+g4 compiled $(($(runs) - before)) times without the daemon, want 2"

echo "== the restarted daemon serves what they published"
start_daemon
before=$(runs)
c3=$(compile rank-b g3) || fail "rank-b compile g3 after restart"
c4=$(compile rank-a g4) || fail "rank-a compile g4 after restart"
[[ "$(runs)" == "$before" ]] || fail "the restarted daemon recompiled g3/g4"
[[ -s "$c3" && -s "$c4" ]] || fail "empty NEFFs after restart"

echo "== neffd on 0.0.0.0 without TLS refuses to start (mTLS: //tests:tls_test)"
expect_exit 2 "neffd on 0.0.0.0" as neffd-test "$S/bin/neffd" \
  --address=0.0.0.0:7979 --admin_address=127.0.0.1:0 \
  --cache_dir="$S/cache/neff" --hlo_cache_dir="$S/cache/hlo" \
  --local_dir="$S/local"
[[ "$LAST_OUT" == *"mutual TLS"* ]] || fail "refusal does not say why: $LAST_OUT"

stop_daemon
echo "PASS"
