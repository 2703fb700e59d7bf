#!/usr/bin/env bash
# Issue #8 benchmarks 1 (SPMD compile storm) and 2 (warm start), measured as
# issue #21 asks: one command that builds what it needs (-c opt), runs REPS
# repetitions of every variant, writes docs/bench/storm.md (medians, the
# protocol cost per step against the floor and ratios against the legacy
# protocol, all measured in the same run, targets met or missed) and
# regenerates docs/bench/storm_wall.svg and docs/bench/storm_handoff.svg.
#
#   bench/run_storm.sh              # everything at the issue's size (hours on 2 cores)
#   REPS=1 GRAPHS=16 bench/run_storm.sh   # a quick look
#   VARIANTS="same" OUT=/tmp/x bench/run_storm.sh   # one variant, elsewhere
#
# Per repetition: R x K at C = 200 ms (jittered ±20 % per graph), S = 8 MiB in
# the same order for daemon, fallback, legacy@0.1s, legacy@1s and the floor
# (bench/storm/floor_protocol.h: no protocol at all, the best any daemon could
# do on this machine); the random-order variant (daemon, legacy@0.1s); C = 2 s
# with K2 graphs (daemon, legacy@0.1s, legacy@1s); warm start (daemon,
# legacy@0.1s); the same-order storm with small NEFFs (SMALL_BYTES, 64 KiB;
# daemon, legacy@0.1s, legacy@1s, floor); WIDE_RANKS x WIDE_GRAPHS (128 x 8:
# the notification with 127 waiters; daemon, legacy@0.1s, floor). The order
# of the modes in each storm rotates by one every repetition, so no mode
# always runs first or after the same one. Then, once and not timed, the same
# storm (R x STRACE_GRAPHS) under `strace -f` to count the system calls on
# paths inside the shared directory, daemon vs legacy.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-5}
RANKS=${RANKS:-128}
GRAPHS=${GRAPHS:-64}
GRAPHS_2S=${GRAPHS_2S:-8}
STRACE_GRAPHS=${STRACE_GRAPHS:-16}
BYTES=${BYTES:-8388608}
WORK=${WORK:-/tmp/neffd-storm-bench}
OUT=${OUT:-docs/bench}
VARIANTS=${VARIANTS:-same random c2s warm small wide}
SMALL_BYTES=${SMALL_BYTES:-65536}
WIDE_RANKS=${WIDE_RANKS:-128}
WIDE_GRAPHS=${WIDE_GRAPHS:-8}
mkdir -p "$OUT"

bazel build -c opt //bench/storm:storm
STORM=(bazel-bin/bench/storm/storm --neff_bytes="$BYTES" --workdir="$WORK")
RAW=$(mktemp -d /tmp/storm-raw.XXXXXX)
echo "raw results in $RAW" >&2
{
  echo "started $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //');" \
    "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
  echo "commit $(git rev-parse --short HEAD)"
} >"$RAW/machine"

rotate() {  # rotate A,B,C N: the list rotated left by N
  local -a m
  IFS=, read -ra m <<<"$1"
  local n=${#m[@]} k=$(($2 % ${#m[@]})) out=()
  for ((i = 0; i < n; i++)); do out+=("${m[$(((i + k) % n))]}"); done
  (IFS=,; echo "${out[*]}")
}

run() {  # run VARIANT MODES ARGS...: appends the rows, tagged, to $RAW/rows
  local variant=$1 modes
  modes=$(rotate "$2" $((REP - 1)))
  shift 2
  [[ " $VARIANTS " == *" $variant "* ]] || return 0
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "  $variant ($modes), load $load" >&2
  "${STORM[@]}" --modes="$modes" "$@" | grep '^| [a-z]' | grep -v '^| mode' |
    sed "s/^/$variant $REP [$load] /" >>"$RAW/rows"
}

for rep in $(seq "$REPS"); do
  REP=$rep
  echo "repetition $rep/$REPS: $(uptime)" >&2
  run same daemon,fallback,legacy:100,legacy:1000,floor \
    --ranks="$RANKS" --graphs="$GRAPHS" --compile_ms=200
  run random daemon,legacy:100 \
    --ranks="$RANKS" --graphs="$GRAPHS" --compile_ms=200 --order=random
  run c2s daemon,legacy:100,legacy:1000 \
    --ranks="$RANKS" --graphs="$GRAPHS_2S" --compile_ms=2000
  run warm daemon,legacy:100 \
    --ranks="$RANKS" --graphs="$GRAPHS" --compile_ms=200 --warm
  run small daemon,legacy:100,legacy:1000,floor \
    --ranks="$RANKS" --graphs="$GRAPHS" --compile_ms=200 \
    --neff_bytes="$SMALL_BYTES"
  # One read buffer per rank (the bytes are read again after the clock):
  # 128 ranks keeping 8 x 8 MiB each would take 8 GiB.
  run wide daemon,legacy:100,floor \
    --ranks="$WIDE_RANKS" --graphs="$WIDE_GRAPHS" --compile_ms=200 \
    --keep_bytes_per_rank=0
done
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime)" >>"$RAW/machine"

# System calls on the shared directory ({WORK}/{mode}/neff/...), counted by
# strace over the whole process tree (driver, ranks, daemon).
for mode in daemon legacy:100; do
  dir=${mode%%:*}
  strace -f -qq -e trace=%file,%desc -o "$RAW/strace.$dir" \
    "${STORM[@]}" --ranks="$RANKS" --graphs="$STRACE_GRAPHS" \
    --compile_ms=200 --modes="$mode" >/dev/null
  # (not the ranks' connecting Lookup of the key stormready, made before the
  # clock starts)
  grep -v 'resumed>' "$RAW/strace.$dir" | grep -F "$WORK/$dir/neff" |
    grep -v stormready |
    sed -E 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/' | sort | uniq -c |
    sort -rn >"$RAW/syscalls.$dir"
  rm -f "$RAW/strace.$dir"
done

python3 bench/storm_report.py "$RAW" "$OUT" "$RANKS" "$GRAPHS" "$GRAPHS_2S" \
  "$STRACE_GRAPHS" "$BYTES" "$SMALL_BYTES" "$WIDE_RANKS" "$WIDE_GRAPHS"
gnuplot -e "dir='$OUT'" bench/storm_plots.gp
cat "$OUT/storm.md"
