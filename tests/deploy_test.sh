#!/usr/bin/env bash
# deploy/: the unit passes `systemd-analyze verify` with no warning (with
# ExecStart pointed at the built neffd), install.sh and the env file are
# valid shell, and the tmpfiles.d lines have six fields.
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
echo PASS
