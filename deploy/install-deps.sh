#!/usr/bin/env bash
# Installs the Debian 12 packages neffd builds, runs and tests with, skipping
# the ones already installed, and the npm packages of the S3 test server
# (s3rver, aws4) into /opt/neffd-test. Needs root (apt-get). Nothing is
# downloaded except Debian and npm packages.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap g++ pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  grpc-proto libabsl-dev librocksdb-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-dev pybind11-dev
  clang-format faketime
  systemd prometheus python3-grpcio python3-grpc-tools
  clang-14 libclang-rt-14-dev openssl
  gnuplot-nox strace etcd-server
  libcurl4-openssl-dev libexpat1-dev libinih-dev
  libgflags-dev libsnappy-dev liblz4-dev libzstd-dev libbz2-dev patchelf
  libxxhash-dev xxhash pypy3
  curl time
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

# The S3 test server (tests/harness/s3_server.h): s3rver, plus aws4 to check
# the SigV4 signatures s3rver itself does not verify. Tests look for them at
# this fixed path and fail naming this script when they are missing.
S3_TEST_PREFIX=/opt/neffd-test
S3_TEST_PACKAGES=(s3rver@3.7.1 aws4@1.13.2)
if [[ ! -f "$S3_TEST_PREFIX/node_modules/s3rver/package.json" ||
      ! -f "$S3_TEST_PREFIX/node_modules/aws4/package.json" ]]; then
  if ! command -v npm >/dev/null; then
    echo "install-deps: installing nodejs npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  echo "install-deps: installing ${S3_TEST_PACKAGES[*]} into $S3_TEST_PREFIX"
  npm install --silent --no-audit --no-fund --prefix "$S3_TEST_PREFIX" \
    "${S3_TEST_PACKAGES[@]}" >/dev/null
fi
