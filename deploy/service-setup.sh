#!/usr/bin/env bash
# The system state neffd's service needs beyond its files, shared by
# deploy/install.sh and the .deb's postinst (deploy/package.sh): the `neuron`
# group (who may use the socket), the `neffd` system user (primary group
# `neuron`), the unit's drop-in /etc/systemd/system/neffd.service.d/paths.conf
# that makes the cache dirs named in /etc/neffd/neffd.env writable under
# ProtectSystem=strict (creating them group `neuron`, mode 2775: ranks
# without the daemon write there too), and the tmpfiles.d directories.
# Needs root; idempotent.
#   deploy/service-setup.sh
set -euo pipefail

getent group neuron >/dev/null || groupadd --system neuron
getent passwd neffd >/dev/null ||
  useradd --system --gid neuron --home-dir /var/lib/neffd \
    --shell /usr/sbin/nologin --comment "neffd compile cache" neffd

dropin=/etc/systemd/system/neffd.service.d
install -d -m 0755 "$dropin"
{
  echo "# Written by deploy/service-setup.sh from /etc/neffd/neffd.env."
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
