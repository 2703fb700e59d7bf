#!/usr/bin/env bash
# Builds neffd and neffctl and installs them as a systemd service:
#   /usr/local/bin/{neffd,neffctl}, /etc/systemd/system/neffd.service,
#   /usr/lib/tmpfiles.d/neffd.conf, /etc/neffd/neffd.env (kept if present),
#   the `neuron` group (socket access) and the `neffd` system user.
# Then `systemctl enable --now neffd`. Needs root. Idempotent.
#   deploy/install.sh [--no-build] [--no-start] [--prefix DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 start=1 prefix=/usr/local
while (($#)); do
  case "$1" in
    --no-build) build=0 ;;
    --no-start) start=0 ;;
    --prefix) prefix="$2"; shift ;;
    *) echo "install.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if ((EUID != 0)); then
  echo "install.sh: run as root (it installs a systemd unit and a group)" >&2
  exit 2
fi

if ((build)); then
  bash deploy/install-deps.sh
  bazel build -c opt //daemon:neffd //client:neffctl
fi
install -D -m 0755 bazel-bin/daemon/neffd "$prefix/bin/neffd"
install -D -m 0755 bazel-bin/client/neffctl "$prefix/bin/neffctl"
install -D -m 0644 docs/OPERATIONS.md "$prefix/share/doc/neffd/OPERATIONS.md"

getent group neuron >/dev/null || groupadd --system neuron
getent passwd neffd >/dev/null ||
  useradd --system --gid neuron --home-dir /var/lib/neffd \
    --shell /usr/sbin/nologin --comment "neffd compile cache" neffd

install -D -m 0644 deploy/tmpfiles.d/neffd.conf /usr/lib/tmpfiles.d/neffd.conf
install -d -m 0755 /etc/neffd
[[ -e /etc/neffd/neffd.env ]] || install -m 0644 deploy/neffd.env /etc/neffd/neffd.env
sed "s|/usr/local/bin/neffd|$prefix/bin/neffd|" deploy/neffd.service \
  >/etc/systemd/system/neffd.service

# ProtectSystem=strict: the cache dirs named in neffd.env must be writable.
dropin=/etc/systemd/system/neffd.service.d
install -d -m 0755 "$dropin"
{
  echo "# Written by deploy/install.sh from /etc/neffd/neffd.env."
  echo "[Service]"
  for var in TORCH_NEURONX_NEFF_CACHE_DIR TORCH_NEURONX_HLO_CACHE_DIR; do
    dir=$(sed -n "s/^$var=//p" /etc/neffd/neffd.env | tail -1 | tr -d '"')
    if [[ -n "$dir" ]]; then
      mkdir -p "$dir" && chgrp neuron "$dir" && chmod 2775 "$dir"
      echo "ReadWritePaths=-$dir"
    fi
  done
} >"$dropin/paths.conf"

if command -v systemd-tmpfiles >/dev/null; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/neffd.conf
fi
systemd-analyze verify /etc/systemd/system/neffd.service
if ((start)); then
  systemctl daemon-reload
  systemctl enable --now neffd
  systemctl --no-pager status neffd | head -5
fi
echo "install.sh: installed; add users who run ranks or neffctl to the 'neuron' group"
