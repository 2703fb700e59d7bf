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
#   deploy/install.sh [--no-build] [--no-start] [--client-only] [--prefix DIR]
#                     [--python-dir DIR] [--bin-dir DIR (default bazel-bin)]
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 start=1 service=1 prefix=/usr/local bin=bazel-bin python_dir=
while (($#)); do
  case "$1" in
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
# The module is built for Debian's python3.11; install it where that
# interpreter looks (/usr/local/lib/python3.11/dist-packages), whatever
# python3 comes first on PATH.
if [[ -z "$python_dir" ]]; then
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
module=neffclient.cpython-311-x86_64-linux-gnu.so
files=(client/neffctl client/neffcc client/shared/libneffclient.so
  "client/python/$module")
((service)) && files+=(daemon/neffd)
for f in "${files[@]}"; do
  if [[ ! -f "$bin/$f" ]]; then
    echo "install.sh: $bin/$f is missing; build it (bazel build -c opt" \
      "${targets[*]}) or drop --no-build" >&2
    exit 1
  fi
done

install -D -m 0755 "$bin/client/neffctl" "$prefix/bin/neffctl"
install -D -m 0755 "$bin/client/neffcc" "$prefix/bin/neffcc"
install -d -m 0755 "$prefix/lib/neffd/bin"
ln -sfn "$prefix/bin/neffcc" "$prefix/lib/neffd/bin/neuronx-cc"
install -D -m 0755 "$bin/client/shared/libneffclient.so" \
  "$prefix/lib/libneffclient.so"
install -D -m 0644 client/neffclient.h "$prefix/include/neffclient.h"
install -D -m 0644 "$bin/client/python/$module" "$python_dir/$module"
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

install -D -m 0755 "$bin/daemon/neffd" "$prefix/bin/neffd"
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
