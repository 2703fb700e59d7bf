#!/usr/bin/env bash
# Installs the Debian 12 packages neffd builds, runs and tests with, skipping
# the ones already installed. Needs root (apt-get). Offline-safe: nothing is
# downloaded except Debian packages.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  grpc-proto libabsl-dev librocksdb-dev libssl-dev libsystemd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-dev pybind11-dev
  clang-format faketime
  systemd prometheus python3-grpcio python3-grpc-tools
  clang-14 libclang-rt-14-dev openssl
  gnuplot-nox strace
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
