#!/usr/bin/env bash
# The release's acceptance test (issue 31), run by tests/run_all.sh's release
# stage after deploy/package.sh: the tarball's binaries run where only glibc
# and the allowed sonames exist.
#   1. every ELF's NEEDED sonames are in the allow-list: glibc's, libgcc_s.so.1
#      (glibc itself loads it), libssl.so.3, libcrypto.so.3, libcurl.so.4,
#      libz.so.1 (libneffclient.so also the libstdc++ of the process that
#      loads it, and its bundled lib/neffd/ libraries, which it finds through
#      its rpath); its newest GLIBC_ version is at most 2.34;
#   2. `--version` of neffd, neffctl and `neffcc --neffcc-version` print the
#      VERSION file's version, inside a chroot holding only the release,
#      those libraries (libcurl.so.4 with its own dependencies, which every
#      distro's libcurl package brings), /dev/null, /tmp and /proc;
#   3. in that chroot neffd serves, `neffctl put` publishes a file and
#      `neffctl get` returns the same bytes;
#   4. the .deb holds what install.sh installs, and
#      `install.sh --from TARBALL --client-only` installs from the tarball.
# Prints one line per case and ends with "release: N passed, N failed,
# N skipped". The chroot needs root; without it those cases are skipped.
#   tests/release_test.sh dist/neffd-VERSION-linux-x86_64.tar.gz \
#                         dist/neffd_VERSION_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# != 2)) || [[ ! -f "$1" || ! -f "$2" ]]; then
  echo "release_test.sh: usage: release_test.sh TARBALL DEB (both must exist)" >&2
  exit 2
fi
tarball=$(realpath "$1") deb=$(realpath "$2")
version=$(tr -d '[:space:]' <VERSION)
work=$(mktemp -d)
root="$work/root"
daemon_pid=
cleanup() {
  [[ -z "$daemon_pid" ]] || kill "$daemon_pid" 2>/dev/null || true
  mountpoint -q "$root/proc" 2>/dev/null && umount "$root/proc"
  rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0 skipped=0
pass() { echo "release: PASS $1"; passed=$((passed + 1)); }
fail() { echo "release: FAIL $1: $2"; failed=$((failed + 1)); }
skip() { echo "release: SKIP $1: $2"; skipped=$((skipped + 1)); }

tar -xzf "$tarball" -C "$work"
release="$work/neffd-$version"
[[ -d "$release" ]] || { echo "release_test.sh: no neffd-$version/ in $1" >&2; exit 1; }

# 1. Linkage.
ALLOWED=(ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2
  librt.so.1 libgcc_s.so.1 libssl.so.3 libcrypto.so.3 libcurl.so.4 libz.so.1)
CLIENT_ALLOWED=(libstdc++.so.6)
# elf_report ELF...: one line per ELF, "PATH|NEEDED...|GLIBC|GLIBCXX": its
# NEEDED sonames and the newest GLIBC_ and GLIBCXX_ versions it needs
# (objdump's "Version References", not the versions a library defines). One
# objdump for all: the bundle is 60-odd libraries.
elf_report() {
  objdump -p "$@" | awk '
    function newer(a, b,  x, y, n, m, i) {
      n = split(a, x, "."); m = split(b, y, ".")
      for (i = 1; i <= (n > m ? n : m); i++)
        if (x[i] + 0 != y[i] + 0) return x[i] + 0 > y[i] + 0
      return 0
    }
    function flush() { if (file != "") print file "|" needed "|" glibc "|" glibcxx }
    /file format/ {
      flush(); file = $1; sub(/:$/, "", file)
      needed = ""; glibc = "2.0"; glibcxx = "3.4"; refs = 0
    }
    $1 == "NEEDED" { needed = needed " " $2 }
    /^Version References/ { refs = 1 }
    refs && $NF ~ /^GLIBC_[0-9]/ {
      v = substr($NF, 7); if (newer(v, glibc)) glibc = v
    }
    refs && $NF ~ /^GLIBCXX_[0-9]/ {
      v = substr($NF, 9); if (newer(v, glibcxx)) glibcxx = v
    }
    END { flush() }'
}
# newer A B: true if version A is newer than B.
newer() {
  local i a b
  IFS=. read -ra a <<<"$1"
  IFS=. read -ra b <<<"$2"
  for ((i = 0; i < ${#a[@]} || i < ${#b[@]}; i++)); do
    if ((${a[i]:-0} != ${b[i]:-0})); then ((${a[i]:-0} > ${b[i]:-0})); return; fi
  done
  return 1
}
# linkage_problems ALLOWED... < elf_report: for each ELF, its NEEDED sonames
# outside ALLOWED, a GLIBC_ newer than 2.34, a GLIBCXX_ newer than 3.4.29
# (GCC 11's, Amazon Linux 2023); nothing if none. Prints what each ELF but a
# bundled library needs.
linkage_problems() {
  local allowed=" $* " path needed glibc glibcxx name soname
  while IFS='|' read -r path needed glibc glibcxx; do
    name=${path#"$release"/}
    [[ "$name" == lib/neffd/* ]] ||
      echo "release: $name needs:$needed (GLIBC_$glibc, GLIBCXX_$glibcxx)" >&2
    for soname in $needed; do
      [[ "$allowed" == *" $soname "* ]] || echo -n "$name needs $soname; "
    done
    if newer "$glibc" 2.34; then echo -n "$name needs GLIBC_$glibc; "; fi
    if newer "$glibcxx" 3.4.29; then echo -n "$name needs GLIBCXX_$glibcxx; "; fi
    echo "$glibc" >>"$work/glibc_versions"
  done
}
# One case per binary, one for libneffclient.so with its bundle.
bundle=()
for lib in "$release"/lib/neffd/*.so*; do
  [[ -f "$lib" ]] && bundle+=("$lib")
done
for elf in "$release"/bin/*; do
  problems=$(elf_report "$elf" | linkage_problems "${ALLOWED[@]}")
  if [[ -z "$problems" ]]; then pass "linkage_${elf##*/}"; else
    fail "linkage_${elf##*/}" "$problems"; fi
done
problems=$(elf_report "$release/lib/libneffclient.so" "${bundle[@]}" |
  linkage_problems "${ALLOWED[@]}" "${CLIENT_ALLOWED[@]}" \
    "${bundle[@]##*/}")
if [[ -z "$problems" ]]; then pass linkage_libneffclient; else
  fail linkage_libneffclient "$problems"; fi
newest_glibc=$(sort -V "$work/glibc_versions" | tail -1)
echo "release: newest GLIBC_ version needed: $newest_glibc"
# libneffclient.so finds each bundled library through its rpath, not the
# host's copy.
client_ldd=$(ldd "$release/lib/libneffclient.so" 2>&1)
stray=
for lib in "$release"/lib/neffd/*.so*; do
  [[ -f "$lib" ]] || continue
  grep -q "=> $lib " <<<"$client_ldd" || stray+=" ${lib##*/}"
done
if grep -q "not found" <<<"$client_ldd"; then
  fail client_bundle "$(grep "not found" <<<"$client_ldd" | tr -s ' \n' ' ')"
elif [[ -n "$stray" ]]; then
  fail client_bundle "not loaded from lib/neffd:$stray"
else
  pass client_bundle
fi

# 2 and 3. In a chroot of the release and the allowed libraries.
in_root() { chroot "$root" "$@"; }
if ((EUID != 0)); then
  skip chroot_version "needs root (chroot, mount)"
  skip chroot_serve_put_get "needs root (chroot, mount)"
else
  mkdir -p "$root"/{bin,tmp,proc,dev,lib64,lib/x86_64-linux-gnu}
  chmod 1777 "$root/tmp"
  cp "$release"/bin/* "$root/bin/"
  # Read whole, not piped into an awk that stops at its match: under
  # pipefail the writer's SIGPIPE would fail the pipeline.
  cache=$(ldconfig -p)
  where() { awk -v s="$1" '!found && $1 == s && /x86-64/ {print $NF; found = 1}' <<<"$cache"; }
  libs=$(for s in "${ALLOWED[@]}"; do where "$s"; done)
  curl=$(where libcurl.so.4)
  libs+=" $(ldd "$curl" | awk '$3 ~ /^\// {print $3}')"
  for lib in $libs; do cp -L "$lib" "$root/lib/x86_64-linux-gnu/"; done
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
  mknod -m 0666 "$root/dev/null" c 1 3
  mount -t proc proc "$root/proc"
  echo "release: chroot holds $(ls "$root/lib/x86_64-linux-gnu" | tr '\n' ' ')"

  out=$(in_root /bin/neffd --version 2>&1; in_root /bin/neffctl --version 2>&1;
    in_root /bin/neffcc --neffcc-version 2>&1) || true
  want=$(printf 'neffd %s\nneffctl %s\nneffcc %s' "$version" "$version" "$version")
  if [[ "$out" == "$want" ]]; then pass chroot_version; else
    fail chroot_version "printed '$out'"; fi

  mkdir -p "$root/tmp/c"
  head -c 100000 /dev/urandom >"$root/tmp/model.neff"
  in_root /bin/neffd --address=unix:/tmp/neffd.sock \
    --admin_address=unix:/tmp/admin.sock --cache_dir=/tmp/c/neff \
    --hlo_cache_dir=/tmp/c/hlo --local_dir=/tmp/c/local \
    >"$work/neffd.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do
    [[ -S "$root/tmp/neffd.sock" ]] && break
    sleep 0.1
  done
  ctl() { in_root /bin/neffctl --address=unix:/tmp/neffd.sock "$@" 2>&1; }
  if put=$(ctl put neff k1 /tmp/model.neff --compiler_version=2.19.1) &&
      get=$(ctl get neff k1 /tmp/out.neff --compiler_version=2.19.1) &&
      cmp -s "$root/tmp/model.neff" "$root/tmp/out.neff"; then
    pass chroot_serve_put_get
  else
    fail chroot_serve_put_get "put: ${put:-} get: ${get:-}; neffd: $(tail -3 "$work/neffd.log")"
  fi
  kill "$daemon_pid" 2>/dev/null || true
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=
fi

# 4. The .deb and install.sh --from.
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
missing=
for path in ./usr/local/bin/neffd ./usr/local/bin/neffctl \
    ./usr/local/bin/neffcc ./usr/local/lib/neffd/bin/neuronx-cc \
    ./usr/local/lib/libneffclient.so ./usr/local/include/neffclient.h \
    ./usr/local/lib/python/neffclient.py \
    ./lib/systemd/system/neffd.service ./usr/lib/tmpfiles.d/neffd.conf \
    ./etc/neffd/neffd.env ./usr/local/share/neffd/service-setup.sh \
    "${bundle[@]/#"$release"/./usr/local}"; do
  grep -qx -- "$path" <<<"$contents" || missing+=" $path"
done
deb_version=$(dpkg-deb -f "$deb" Version)
postinst=$(dpkg-deb -I "$deb" postinst)
if [[ -z "$missing" && "$deb_version" == "$version" &&
      "$postinst" == *service-setup.sh* ]]; then
  pass deb_contents
else
  fail deb_contents "lacks${missing:- nothing}; Version $deb_version"
fi
prefix="$work/prefix"
if out=$(bash deploy/install.sh --from "$tarball" --client-only \
      --prefix "$prefix" 2>&1) &&
    [[ -x "$prefix/bin/neffcc" && -f "$prefix/lib/libneffclient.so" &&
       "$(readlink "$prefix/lib/neffd/bin/neuronx-cc")" == "$prefix/bin/neffcc" &&
       "$("$prefix/bin/neffctl" --version)" == "neffctl $version" ]]; then
  pass install_from_tarball
else
  fail install_from_tarball "$out"
fi
rc=0
out=$(bash deploy/install.sh --from "$deb" --client-only --prefix "$prefix" \
  2>&1) || rc=$?
if ((rc != 2)) || [[ $(wc -l <<<"$out") -ne 1 ]]; then
  fail install_from_not_a_tarball "exit $rc (want 2, one line): $out"
else
  pass install_from_not_a_tarball
fi

# 5. The release's Python module under every interpreter here: CPython and
# PyPy load the release's libneffclient.so (and its bundle) through ctypes.
for python in python3 pypy3; do
  if ! command -v "$python" >/dev/null; then
    skip "python_module_$python" "no $python (deploy/install-deps.sh)"
    continue
  fi
  if out=$(PYTHONPATH="$prefix/lib/python" TORCH_NEURONX_NEFF_CACHE_DIR="$work/py/neff" \
        TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR="$work/py/local" \
        NEFFD_ADDRESS="unix:$work/py/none.sock" "$python" -c '
import neffclient
assert neffclient.torchneuron_key(b"basekey", b"HloModule m\n") == "c496e666b3b31b0b526f14746a3df645"
c = neffclient.Client()
k = c.derive_key(b"HloModule m", "-O1", "2.19.1")
p = c.get_or_compile("neff", "2.19.1", k, lambda path: open(path, "wb").write(b"neff"))
assert c.lookup("neff", "2.19.1", k) == p and open(p, "rb").read() == b"neff"
print(neffclient.__file__)' 2>"$work/python.err") &&
      [[ "$out" == "$prefix/lib/python/neffclient.py" ]]; then
    pass "python_module_$python"
  else
    fail "python_module_$python" "${out:-} $(tail -3 "$work/python.err")"
  fi
done

echo "release: took $SECONDS s"
echo "release: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
