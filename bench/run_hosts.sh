#!/bin/bash
# Shared-store metadata cost of N neffd "hosts" on one store (issue 22,
# docs/SCALE.md). For each N in $HOSTS: N daemons with --host_id share one
# store; host 0 holds K keys (K ranks compiling for a long time), each other
# host has R ranks waiting on each of those K keys, so its daemon polls the
# store for K keys every --poll_interval P. Every daemon also runs cluster gc
# (the gc lease and the access journal). After a settling second the script
# reads every daemon's store_metadata_ops (neffctl --json stats) twice, T
# seconds apart, and prints one line per N:
#   N K R P T  ops/s(all hosts)  ops/s(host 0)  ops/s(per waiting host)
# Usage: HOSTS="1 2 4 8 16" K=4 R=1 P=1 T=20 bench/run_hosts.sh
set -eu
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-"1 2 4 8 16"}
K=${K:-4}
R=${R:-1}
P=${P:-1}
T=${T:-20}
[ -n "${NOBUILD:-}" ] || bazel build //daemon:neffd //client:neffctl //examples:rank_sim >/dev/null 2>&1
BIN=${BIN:-$(pwd)/bazel-bin}
ROOT=$(mktemp -d /tmp/run_hosts.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'cleanup; rm -rf "$ROOT"' EXIT

ops() {  # store_metadata_ops of host $1
  "$BIN/client/neffctl" --address="unix:$ROOT/h$1.sock" --json stats |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(int(v) for k,v in d.items() if k.lower().replace("_","")=="storemetadataops"))'
}

rank() {  # rank on host $1 for key version $2
  env NEFFD_ADDRESS="unix:$ROOT/h$1.sock" \
    TORCH_NEURONX_NEFF_CACHE_DIR="$ROOT/shared/neff" \
    TORCH_NEURONX_HLO_CACHE_DIR="$ROOT/shared/hlo" \
    TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR="$ROOT/local$1" \
    TORCH_NEURONX_DEBUG_DIR="$ROOT/debug$1" RANK="$3" \
    "$BIN/examples/rank_sim" --graphs=1 --compile_ms=3600000 \
    --neff_bytes=4096 --compiler_version="$2" >/dev/null 2>&1 &
  PIDS+=($!)
}

echo "N K R P T ops_per_s_all ops_per_s_host0 ops_per_s_per_waiting_host"
for N in $HOSTS; do
  rm -rf "${ROOT:?}"/*
  PIDS=()
  for ((h = 0; h < N; h++)); do
    "$BIN/daemon/neffd" --host_id="h$h" --address="unix:$ROOT/h$h.sock" \
      --admin_address="unix:$ROOT/h$h.admin.sock" \
      --cache_dir="$ROOT/shared/neff" --hlo_cache_dir="$ROOT/shared/hlo" \
      --local_dir="$ROOT/local$h" --poll_interval="$P" --lease_ttl=30 \
      --max_cache_size=1099511627776 --gc_interval=600 --v=1 \
      >/dev/null 2>"$ROOT/h$h.log" &
    PIDS+=($!)
  done
  for ((h = 0; h < N; h++)); do
    for i in $(seq 100); do [ -S "$ROOT/h$h.sock" ] && break; sleep 0.1; done
  done
  for ((k = 0; k < K; k++)); do rank 0 "k$k" 0; done
  sleep 2  # host 0 holds every key before the others ask
  for ((h = 1; h < N; h++)); do
    for ((k = 0; k < K; k++)); do
      for ((r = 0; r < R; r++)); do rank "$h" "k$k" "$r"; done
    done
  done
  sleep 2
  declare -a before after
  for ((h = 0; h < N; h++)); do before[$h]=$(ops "$h"); done
  sleep "$T"
  for ((h = 0; h < N; h++)); do after[$h]=$(ops "$h"); done
  python3 - "$N" "$K" "$R" "$P" "$T" "${before[*]}" "${after[*]}" <<'PY'
import sys
n, k, r, p, t = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
b = [int(x) for x in sys.argv[6].split()]
a = [int(x) for x in sys.argv[7].split()]
d = [(y - x) / t for x, y in zip(b, a)]
waiting = sum(d[1:]) / (n - 1) if n > 1 else 0.0
print(n, k, r, p, int(t), f"{sum(d):.1f}", f"{d[0]:.2f}", f"{waiting:.2f}")
PY
  cleanup
  PIDS=()
done
