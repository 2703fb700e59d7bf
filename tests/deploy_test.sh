#!/usr/bin/env bash
# deploy/: the unit passes `systemd-analyze verify` with no warning (with
# ExecStart pointed at the built neffd), install.sh and the env file are
# valid shell, the tmpfiles.d lines have six fields, and
# `install.sh --client-only` into a scratch prefix lays out what a job needs
# (neffcc and its masquerade directory, libneffclient.so + neffclient.h, the
# Python module, the PATH line), or refuses in one line when a built file is
# missing; `install.sh --from` installs a release tarball's client files and
# refuses a file that is not one.
set -euo pipefail
runfiles="${TEST_SRCDIR}/${TEST_WORKSPACE}"
tmp="${TEST_TMPDIR}/deploy"
mkdir -p "$tmp"

sed "s|/usr/local/bin/neffd|$runfiles/daemon/neffd|" \
  "$runfiles/deploy/neffd.service" >"$tmp/neffd.service"
if ! out=$(systemd-analyze verify --man=no "$tmp/neffd.service" 2>&1); then
  echo "systemd-analyze verify failed: $out"; exit 1
fi
if [[ -n "$out" ]]; then
  echo "systemd-analyze verify warned: $out"; exit 1
fi
for key in Type=notify WatchdogSec= Restart=on-failure RuntimeDirectory=neffd \
    StateDirectory=neffd EnvironmentFile=-/etc/neffd/neffd.env \
    NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths= ProtectHome=yes \
    PrivateDevices=yes "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" \
    LimitNOFILE=; do
  grep -q "^$key" "$tmp/neffd.service" || { echo "unit lacks $key"; exit 1; }
done

bash -n "$runfiles/deploy/install.sh"
bash -n "$runfiles/deploy/install-deps.sh"
bash -n "$runfiles/deploy/package.sh"
bash -n "$runfiles/deploy/service-setup.sh"
# systemd's EnvironmentFile syntax is a subset of shell assignments.
( set -a; . "$runfiles/deploy/neffd.env"; [[ -n "$NEFFD_FLAGS" ]] )

while read -r type path mode user group age rest; do
  [[ -z "$type" || "$type" == \#* ]] && continue
  [[ -n "$age" && "$type" == d && "$mode" =~ ^[0-7]{4}$ ]] ||
    { echo "bad tmpfiles line: $type $path $mode $user $group $age"; exit 1; }
done <"$runfiles/deploy/tmpfiles.d/neffd.conf"

# The packages these tests need are in the CI install list.
for p in systemd prometheus python3-grpcio python3-grpc-tools; do
  grep -qw "$p" "$runfiles/deploy/install-deps.sh" ||
    { echo "install-deps.sh lacks $p"; exit 1; }
done
# install.sh reads built files from --bin-dir in bazel-bin's layout.
module=neffclient.cpython-311-x86_64-linux-gnu.so
bin="$tmp/bin"
mkdir -p "$bin/client/shared" "$bin/client/python"
cp "$runfiles/client/neffctl" "$bin/client/"
cp "$runfiles/client/shared/libneffclient.so" "$bin/client/shared/"
cp "$runfiles/client/python/$module" "$bin/client/python/"
install_client() {  # PREFIX: install there, the Python module in PREFIX/py
  bash "$runfiles/deploy/install.sh" --no-build --client-only \
    --prefix "$1" --python-dir "$1/py" --bin-dir "$bin"
}

if out=$(install_client "$tmp/none" 2>&1); then
  echo "install.sh succeeded without neffcc: $out"; exit 1
fi
[[ "$out" == *"$bin/client/neffcc is missing"* && "$out" != *$'\n'* ]] ||
  { echo "install.sh without neffcc said: $out"; exit 1; }
[[ ! -e "$tmp/none" ]] || { echo "install.sh without neffcc installed files"; exit 1; }

cp "$runfiles/client/neffcc" "$bin/client/"
prefix="$tmp/prefix"
out=$(install_client "$prefix")
for f in bin/neffcc bin/neffctl lib/libneffclient.so include/neffclient.h \
    "py/$module" share/doc/neffd/INTEGRATION.md; do
  [[ -f "$prefix/$f" ]] || { echo "install.sh did not install $f"; exit 1; }
done
cmp -s "$prefix/include/neffclient.h" "$runfiles/client/neffclient.h" ||
  { echo "installed neffclient.h differs"; exit 1; }
[[ "$(tail -1 <<<"$out")" == "export PATH=$prefix/lib/neffd/bin:\$PATH" ]] ||
  { echo "install.sh did not end with the PATH line: $out"; exit 1; }
# A job that adds the line runs neffcc as neuronx-cc.
found=$(eval "$(tail -1 <<<"$out")"; command -v neuronx-cc)
[[ "$found" == "$prefix/lib/neffd/bin/neuronx-cc" && -L "$found" &&
  "$(readlink -f "$found")" == "$(readlink -f "$prefix/bin/neffcc")" ]] ||
  { echo "neuronx-cc on the job's PATH is $found, not neffcc"; exit 1; }
# nm's output is read whole: `nm | grep -q` under pipefail fails whenever grep
# exits at its match before nm has written everything (SIGPIPE).
exported=$(nm -D --defined-only "$prefix/lib/libneffclient.so")
for symbol in neff_client_new neff_client_new_tls neff_get_or_compile neff_lookup \
  neff_free; do
  grep -qw "$symbol" <<<"$exported" ||
    { echo "libneffclient.so does not export $symbol"; exit 1; }
done
# The system python3 (uninstrumented) imports the module from where it was
# installed; a sanitizer build needs its runtimes preloaded.
preload=$(ldd "$prefix/py/$module" | awk '/lib(a|ub)san/ {print $3}' |
  paste -sd: -)
where=$(env ${preload:+LD_PRELOAD=$preload} \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  PYTHONPATH="$prefix/py" /usr/bin/python3 -c \
  'import neffclient; print(neffclient.__file__)')
[[ "$where" == "$prefix/py/$module" ]] ||
  { echo "import neffclient found '$where'"; exit 1; }
# Idempotent: a second run over the first succeeds.
install_client "$prefix" >/dev/null

# --from installs a release tarball's files (deploy/package.sh's layout; the
# release itself is tests/release_test.sh's), and refuses anything else in
# one line with exit 2.
release="$tmp/release/neffd-9.9"
mkdir -p "$release"/{bin,lib/python,include,docs}
echo 9.9 >"$release/VERSION"
cp "$runfiles/client/neffctl" "$runfiles/client/neffcc" "$release/bin/"
cp "$runfiles/client/shared/libneffclient.so" "$release/lib/"
cp "$runfiles/client/neffclient.h" "$release/include/"
cp "$runfiles/client/python/portable/neffclient.py" "$release/lib/python/"
cp "$runfiles/docs/INTEGRATION.md" "$release/docs/"
tar -czf "$tmp/release.tar.gz" -C "$tmp/release" neffd-9.9
from_prefix="$tmp/from"
bash "$runfiles/deploy/install.sh" --from "$tmp/release.tar.gz" \
  --client-only --prefix "$from_prefix" >/dev/null
for f in bin/neffcc bin/neffctl lib/libneffclient.so include/neffclient.h \
    lib/python/neffclient.py share/doc/neffd/INTEGRATION.md; do
  [[ -f "$from_prefix/$f" ]] || { echo "install.sh --from did not install $f"; exit 1; }
done
# The release's module is the portable one: no pybind11 module.
[[ ! -e "$from_prefix/py" ]] || { echo "install.sh --from installed a module"; exit 1; }
for bad in "$tmp/no-such.tar.gz" "$runfiles/deploy/neffd.env"; do
  rc=0
  out=$(bash "$runfiles/deploy/install.sh" --from "$bad" --client-only \
    --prefix "$tmp/bad" 2>&1) || rc=$?
  [[ $rc -eq 2 && "$out" != *$'\n'* && ! -e "$tmp/bad" ]] ||
    { echo "install.sh --from $bad: exit $rc, said: $out"; exit 1; }
done
echo PASS
