#!/usr/bin/env bash
# Builds neffd, neffctl and the job-side client and installs them:
#   {prefix}/bin/{neffctl,neffcc}; the masquerade directory
#   {prefix}/lib/neffd/bin with neuronx-cc -> neffcc (jobs put it first on
#   PATH; docs/INTEGRATION.md); {prefix}/lib/libneffclient.so and
#   {prefix}/include/neffclient.h (the C ABI); the Python module `neffclient`
#   in the system python3's platlib (or --python-dir);
# and, unless --client-only, neffd as a systemd service:
#   {prefix}/bin/neffd, /etc/systemd/system/neffd.service,
#   /usr/lib/tmpfiles.d/neffd.conf, /etc/neffd/neffd.env (kept if present),
#   the `neuron` group (socket access) and the `neffd` system user; then
#   `systemctl enable --now neffd`.
# Ends by printing the line a job's environment needs. The service needs
# root; --client-only needs only a writable prefix. Idempotent. Checks that
# every built file is there before installing any.
# --from installs a release (deploy/package.sh's tarball) instead of
# building: no Bazel, no compiler, and no Python module (the release has
# none); the unit, env file and docs are the release's own.
#   deploy/install.sh [--no-build] [--no-start] [--client-only] [--prefix DIR]
#                     [--python-dir DIR] [--bin-dir DIR (default bazel-bin)]
#                     [--from neffd-VERSION-linux-x86_64.tar.gz]
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 start=1 service=1 prefix=/usr/local bin=bazel-bin python_dir= from=
while (($#)); do
  case "$1" in
    --from)
      (($# >= 2)) || { echo "install.sh: --from needs a tarball" >&2; exit 2; }
      from=$(realpath -m -- "$2") build=0
      shift ;;
    --no-build) build=0 ;;
    --no-start) start=0 ;;
    --client-only) service=0 ;;
    --prefix) prefix="$2"; shift ;;
    --python-dir) python_dir="$2"; shift ;;
    --bin-dir) bin="$2"; shift ;;
    *) echo "install.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if ((service && EUID != 0)); then
  echo "install.sh: run as root (it installs a systemd unit and a group)" >&2
  exit 2
fi
module=neffclient.cpython-311-x86_64-linux-gnu.so
# Where each file comes from: bazel-bin and this checkout, or the release.
neffd_bin=$bin/daemon/neffd neffctl_bin=$bin/client/neffctl
neffcc_bin=$bin/client/neffcc lib=$bin/client/shared/libneffclient.so
header=client/neffclient.h module_file=$bin/client/python/$module
if [[ -n "$from" ]]; then
  if [[ ! -f "$from" ]]; then
    echo "install.sh: --from $from: no such file" >&2
    exit 2
  fi
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  if ! tar -xzf "$from" -C "$unpacked" 2>/dev/null ||
      [[ ! -f $(echo "$unpacked"/neffd-*/VERSION) ]]; then
    echo "install.sh: $from is not a neffd release tarball" >&2
    exit 2
  fi
  cd "$unpacked"/neffd-*
  neffd_bin=bin/neffd neffctl_bin=bin/neffctl neffcc_bin=bin/neffcc
  lib=lib/libneffclient.so header=include/neffclient.h module_file=
  portable_module=lib/python/neffclient.py
fi
# The module is built for Debian's python3.11; install it where that
# interpreter looks (/usr/local/lib/python3.11/dist-packages), whatever
# python3 comes first on PATH.
if [[ -z "$python_dir" && -n "$module_file" ]]; then
  python_dir=$(/usr/bin/python3 -c \
    'import sysconfig; print(sysconfig.get_paths()["platlib"])')
fi

targets=(//client:neffctl //client:neffcc //client/shared:libneffclient.so
  //client/python:neffclient)
((service)) && targets+=(//daemon:neffd)
if ((build)); then
  bash deploy/install-deps.sh
  bazel build -c opt "${targets[@]}"
fi
files=("$neffctl_bin" "$neffcc_bin" "$lib" ${module_file:+"$module_file"})
((service)) && files+=("$neffd_bin")
for f in "${files[@]}"; do
  if [[ ! -f "$f" ]]; then
    if [[ -n "$from" ]]; then
      echo "install.sh: the release $from lacks $f" >&2
    else
      echo "install.sh: $f is missing; build it (bazel build -c opt" \
        "${targets[*]}) or drop --no-build" >&2
    fi
    exit 1
  fi
done

install -D -m 0755 "$neffctl_bin" "$prefix/bin/neffctl"
install -D -m 0755 "$neffcc_bin" "$prefix/bin/neffcc"
install -d -m 0755 "$prefix/lib/neffd/bin"
ln -sfn "$prefix/bin/neffcc" "$prefix/lib/neffd/bin/neuronx-cc"
install -D -m 0755 "$lib" "$prefix/lib/libneffclient.so"
# A release's libneffclient.so finds its bundled libraries through its rpath,
# $ORIGIN/neffd (deploy/package.sh).
if [[ -n "$from" ]] && compgen -G "lib/neffd/*.so*" >/dev/null; then
  install -m 0644 lib/neffd/*.so* "$prefix/lib/neffd/"
fi
install -D -m 0644 "$header" "$prefix/include/neffclient.h"
if [[ -n "$module_file" ]]; then
  install -D -m 0644 "$module_file" "$python_dir/$module"
fi
# A release's Python module is the portable one, beside the library it
# loads (../libneffclient.so): jobs add {prefix}/lib/python to PYTHONPATH.
if [[ -n "${portable_module:-}" ]]; then
  install -D -m 0644 "$portable_module" "$prefix/lib/python/neffclient.py"
fi
install -D -m 0644 docs/INTEGRATION.md "$prefix/share/doc/neffd/INTEGRATION.md"
if [[ "$prefix" == /usr/local ]] && command -v ldconfig >/dev/null; then
  ldconfig
fi
path_line="export PATH=$prefix/lib/neffd/bin:\$PATH"
if ((!service)); then
  echo "install.sh: client installed; add to each job's environment:"
  echo "$path_line"
  exit 0
fi

install -D -m 0755 "$neffd_bin" "$prefix/bin/neffd"
install -D -m 0644 docs/OPERATIONS.md "$prefix/share/doc/neffd/OPERATIONS.md"

install -D -m 0644 deploy/tmpfiles.d/neffd.conf /usr/lib/tmpfiles.d/neffd.conf
install -d -m 0755 /etc/neffd
[[ -e /etc/neffd/neffd.env ]] || install -m 0644 deploy/neffd.env /etc/neffd/neffd.env
sed "s|/usr/local/bin/neffd|$prefix/bin/neffd|" deploy/neffd.service \
  >/etc/systemd/system/neffd.service

# The group, the user, the cache dirs' drop-in, the tmpfiles.d directories.
bash deploy/service-setup.sh
systemd-analyze verify /etc/systemd/system/neffd.service
if ((start)); then
  systemctl daemon-reload
  systemctl enable --now neffd
  systemctl --no-pager status neffd | head -5
fi
echo "install.sh: installed; add users who run ranks or neffctl to the 'neuron' group"
echo "install.sh: evict, gc, import, drain go to /run/neffd/admin.sock: run them as 'sudo -u neffd neffctl ...' (or give neffd --admin_group)"
echo "install.sh: add to each job's environment:"
echo "$path_line"
