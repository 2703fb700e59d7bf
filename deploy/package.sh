#!/usr/bin/env bash
# Builds the release and packs it (docs/OPERATIONS.md, "Install a release"):
#   dist/neffd-VERSION-linux-x86_64.tar.gz  neffd-VERSION/{bin,lib,include}
#       plus the deploy/ and docs/ files deploy/install.sh --from reads
#   dist/neffd_VERSION_amd64.deb            the files install.sh installs;
#       its postinst runs deploy/service-setup.sh and starts the service
# VERSION is the file at the repo root. The build is --config=release
# (.bazelrc): optimised, stripped, every library static but glibc and the
# sonames the README lists; libneffclient.so is --config=release_client,
# with the Debian shared libraries it needs bundled in lib/neffd/ (their
# rpath $ORIGIN; .bazelrc says why). Both run in an output base of its own
# ($NEFFD_RELEASE_OUTPUT_BASE, default /tmp/neffd-release/base-CHECKOUT),
# since its toolchain differs from the developer build's; the developer's
# bazel-* links and cache stay as they were.
#   deploy/package.sh [--no-build] [--out DIR (default dist)]
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 out=dist
while (($#)); do
  case "$1" in
    --no-build) build=0 ;;
    --out)
      (($# >= 2)) || { echo "package.sh: --out needs a directory" >&2; exit 2; }
      out=$2
      shift ;;
    *) echo "package.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
version=$(tr -d '[:space:]' <VERSION)
tree=$(pwd | md5sum | cut -c1-8)  # one checkout's builds never meet another's
base=${NEFFD_RELEASE_OUTPUT_BASE:-/tmp/neffd-release/base-$tree}
release_bazel() {  # COMMAND CONFIG ARGS...
  bazel --output_base="$base" "$1" --config="$2" "${@:3}"
}
if ((build)); then
  since=$SECONDS
  # --symlink_prefix=/: no bazel-* links; the workspace's stay the
  # developer build's.
  release_bazel build release --symlink_prefix=/ //daemon:neffd \
    //client:neffctl //client:neffcc
  release_bazel build release_client --symlink_prefix=/ \
    //client/shared:libneffclient.so
  echo "package.sh: release build took $((SECONDS - since)) s"
fi
bin=$(release_bazel info release bazel-bin 2>/dev/null)
# Its server's memory is the test stages'; the next run restarts it.
bazel --output_base="$base" shutdown

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/neffd-$version"
install -D -m 0755 "$bin/daemon/neffd" "$root/bin/neffd"
install -D -m 0755 "$bin/client/neffctl" "$root/bin/neffctl"
install -D -m 0755 "$bin/client/neffcc" "$root/bin/neffcc"
install -D -m 0755 "$bin/client/shared/libneffclient.so" \
  "$root/lib/libneffclient.so"
install -D -m 0644 client/neffclient.h "$root/include/neffclient.h"
# The portable Python module (ctypes over ../libneffclient.so), for whatever
# interpreter a job's virtualenv has (docs/CLIENT.md).
install -D -m 0644 client/python/portable/neffclient.py \
  "$root/lib/python/neffclient.py"
# libneffclient.so's shared libraries but glibc's, the allowed sonames and
# the C++ runtime: gRPC, protobuf, absl, re2 and theirs.
install -d -m 0755 "$root/lib/neffd"
ldd "$root/lib/libneffclient.so" | awk '$3 ~ /^\// {print $1, $3}' |
  while read -r soname path; do
    case "$soname" in
      ld-linux* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
        librt.so.* | libssl.so.3 | libcrypto.so.3 | libz.so.1 | \
        libstdc++.so.6 | libgcc_s.so.1) ;;
      *)
        install -m 0644 "$path" "$root/lib/neffd/$soname"
        # shellcheck disable=SC2016  # $ORIGIN is the loader's, not ours
        patchelf --set-rpath '$ORIGIN' "$root/lib/neffd/$soname"
        strip --strip-unneeded "$root/lib/neffd/$soname"
        ;;
    esac
  done
for f in VERSION deploy/install.sh deploy/service-setup.sh deploy/neffd.env \
    deploy/neffd.service deploy/tmpfiles.d/neffd.conf docs/OPERATIONS.md \
    docs/INTEGRATION.md; do
  install -D -m 0644 "$f" "$root/$f"
done
mkdir -p "$out"
tarball="$out/neffd-$version-linux-x86_64.tar.gz"
# Owned by root and dated by the last commit, so two packings of one
# version are the same bytes.
when=$(git log -1 --format=@%ct 2>/dev/null || echo @0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$when" \
  -C "$stage" -cf - "neffd-$version" | gzip -9n >"$tarball"
echo "package.sh: wrote $tarball"

# The .deb: install.sh's layout under /usr/local (the unit's ExecStart and
# the PATH line jobs use), the unit in /lib/systemd/system.
deb="$stage/deb"
install -D -m 0755 "$root/bin/neffd" "$deb/usr/local/bin/neffd"
install -D -m 0755 "$root/bin/neffctl" "$deb/usr/local/bin/neffctl"
install -D -m 0755 "$root/bin/neffcc" "$deb/usr/local/bin/neffcc"
install -d -m 0755 "$deb/usr/local/lib/neffd/bin"
ln -s /usr/local/bin/neffcc "$deb/usr/local/lib/neffd/bin/neuronx-cc"
install -D -m 0644 "$root/lib/libneffclient.so" \
  "$deb/usr/local/lib/libneffclient.so"
cp -a "$root"/lib/neffd/. "$deb/usr/local/lib/neffd/"
install -D -m 0644 client/neffclient.h "$deb/usr/local/include/neffclient.h"
install -D -m 0644 "$root/lib/python/neffclient.py" \
  "$deb/usr/local/lib/python/neffclient.py"
install -D -m 0644 docs/OPERATIONS.md \
  "$deb/usr/local/share/doc/neffd/OPERATIONS.md"
install -D -m 0644 docs/INTEGRATION.md \
  "$deb/usr/local/share/doc/neffd/INTEGRATION.md"
install -D -m 0755 deploy/service-setup.sh \
  "$deb/usr/local/share/neffd/service-setup.sh"
install -D -m 0644 deploy/neffd.service "$deb/lib/systemd/system/neffd.service"
install -D -m 0644 deploy/tmpfiles.d/neffd.conf \
  "$deb/usr/lib/tmpfiles.d/neffd.conf"
install -D -m 0644 deploy/neffd.env "$deb/etc/neffd/neffd.env"
install -d -m 0755 "$deb/DEBIAN"
echo /etc/neffd/neffd.env >"$deb/DEBIAN/conffiles"
cat >"$deb/DEBIAN/control" <<CONTROL
Package: neffd
Version: $version
Architecture: amd64
Maintainer: neffd maintainers <neffd@localhost>
Depends: libc6 (>= 2.34), libssl3 | libssl3t64, libcurl4 | libcurl4t64, zlib1g
Section: devel
Priority: optional
Description: per-host NEFF compile cache for AWS Trainium
 neffd serves the compiled NEFFs of a host's ranks from a shared cache:
 one compile per key, no torn files, no stale locks. Includes neffctl,
 neffcc (a neuronx-cc that asks neffd first) and libneffclient.so.
CONTROL
cat >"$deb/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
# neffd's group, user, cache dirs and tmpfiles (deploy/service-setup.sh),
# then the service, when systemd runs this host.
set -e
if [ "$1" = configure ]; then
  bash /usr/local/share/neffd/service-setup.sh
  ldconfig
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now neffd
  fi
fi
POSTINST
cat >"$deb/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl disable --now neffd || true
fi
PRERM
chmod 0755 "$deb/DEBIAN/postinst" "$deb/DEBIAN/prerm"
debfile="$out/neffd_${version}_amd64.deb"
SOURCE_DATE_EPOCH=${when#@} dpkg-deb --root-owner-group -Zgzip \
  --build "$deb" "$debfile" >/dev/null
echo "package.sh: wrote $debfile"
