#!/usr/bin/env bash
# bench/run_allocator.sh: the allocator benchmarks of docs/BENCHMARKS.md
# ("## Allocator") in one command. Builds //bench:allocator_bench with -c opt,
# runs it with 5 repetitions twice (absl's deadlock detector off, as a release
# absl would have it, and on, as Debian's debug absl does by default), and
# writes docs/bench/allocator.md (medians) and docs/bench/allocator.svg
# (warm allocate+free pair, ns by size: pool vs glibc vs no caching).
#
#   bench/run_allocator.sh [--repetitions=N]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=5
for arg in "$@"; do
  case "$arg" in
    --repetitions=*) reps="${arg#*=}" ;;
    *) echo "usage: $0 [--repetitions=N]" >&2; exit 2 ;;
  esac
done

bazel build -c opt //bench:allocator_bench
bin="$(bazel info -c opt bazel-bin)/bench/allocator_bench"
out=docs/bench
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
common=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
        --benchmark_format=json)
NEFFD_TRACE_DIR=bench/traces "$bin" "${common[@]}" --benchmark_out="$tmp/off.json" >/dev/null
NEFFD_TRACE_DIR=bench/traces NEFFD_BENCH_DEADLOCK_DETECTION=1 \
  "$bin" "${common[@]}" --benchmark_filter='Pool' --benchmark_out="$tmp/on.json" >/dev/null
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
finished="$(date -u '+%H:%M UTC')"

machine="nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), \
$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), \
$(. /etc/os-release && echo "$PRETTY_NAME")"

python3 - "$tmp/off.json" "$tmp/on.json" "$out/allocator.md" "$tmp/pairs.dat" \
  "$reps" "$machine" "$started–$finished" "$load_before" "$load_after" <<'PY'
import json, sys
off_path, on_path, md_path, dat_path, reps, machine, when, la0, la1 = sys.argv[1:]

def medians(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        # Threaded runs are timed on the wall clock (UseRealTime).
        t = b["real_time"] if "/real_time" in name else b["cpu_time"]
        unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        out[name] = {"ns": t * unit, "frag": b.get("frag"),
                     "per_op": b.get("time_per_op")}
    return out

off, on = medians(off_path), medians(on_path)

def ns(d, name):
    return d[name]["ns"] if name in d else float("nan")

def fmt(x):
    if x != x:
        return "–"
    return f"{x:,.0f}" if x >= 1000 else (f"{x:.0f}" if x >= 100 else f"{x:.1f}")

sizes = [(512, "512 B"), (64 << 10, "64 KiB"), (4 << 20, "4 MiB"), (32 << 20, "32 MiB")]
lines = []
lines.append(f"Machine: {machine}; run {when}, load average {la0} before, {la1} after.")
lines.append(f"Medians of {reps} repetitions (CPU time; the 8-thread rows wall time per pair).")
lines.append("")
lines.append("Warm allocate+free pair (ns per pair):")
lines.append("")
lines.append("| size | pool | pool, deadlock detection on | glibc malloc | no caching | pool / glibc |")
lines.append("|---:|---:|---:|---:|---:|---:|")
with open(dat_path, "w") as dat:
    dat.write("# bytes pool pool_detection glibc no_caching (ns per pair)\n")
    for size, label in sizes:
        p = ns(off, f"BM_WarmPair<PoolBackend>/{size}")
        pd = ns(on, f"BM_WarmPair<PoolBackend>/{size}")
        g = ns(off, f"BM_WarmPair<MallocBackend>/{size}")
        n = ns(off, f"BM_WarmPair<NoCacheBackend>/{size}")
        lines.append(f"| {label} | **{fmt(p)}** | {fmt(pd)} | {fmt(g)} | {fmt(n)} | {p / g:.2f} |")
        dat.write(f'"{label}" {p:.2f} {pd:.2f} {g:.2f} {n:.2f}\n')
lines.append("")
lines.append("8 threads on one pool (wall time per pair, ns):")
lines.append("")
lines.append("| size | pool | pool, deadlock detection on | glibc malloc |")
lines.append("|---:|---:|---:|---:|")
for size, label in [(512, "512 B"), (4 << 20, "4 MiB")]:
    key = f"/{size}/real_time/threads:8"
    lines.append(f"| {label} | {fmt(ns(off, 'BM_WarmPairShared_Pool' + key))} | "
                 f"{fmt(ns(on, 'BM_WarmPairShared_Pool' + key))} | "
                 f"{fmt(ns(off, 'BM_WarmPairShared_Malloc' + key))} |")
lines.append("")
lines.append("Mixed sizes (ns per iteration): "
             f"pool {fmt(ns(off, 'BM_MixedSizes<PoolBackend>'))}, "
             f"pool with detection {fmt(ns(on, 'BM_MixedSizes<PoolBackend>'))}, "
             f"glibc {fmt(ns(off, 'BM_MixedSizes<MallocBackend>'))}, "
             f"no caching {fmt(ns(off, 'BM_MixedSizes<NoCacheBackend>'))}.")
lines.append("")
lines.append("Trace replays (ns per operation; fragmentation = peak reserved / peak requested):")
lines.append("")
lines.append("| trace | pool ns/op | fragmentation | pool ns/op, detection on | glibc ns/op | no caching ns/op | no caching fragmentation |")
lines.append("|---|---:|---:|---:|---:|---:|---:|")
for i, trace in enumerate(["steady_transformer", "varlen", "moe"]):
    def per_op(d, backend):
        b = d.get(f"BM_Trace<{backend}>/{i}")
        return b["per_op"] * 1e9 if b and b["per_op"] else float("nan")
    def frag(d, backend):
        b = d.get(f"BM_Trace<{backend}>/{i}")
        return b["frag"] if b and b["frag"] else float("nan")
    lines.append(f"| {trace} | **{fmt(per_op(off, 'PoolBackend'))}** | {frag(off, 'PoolBackend'):.3f} | "
                 f"{fmt(per_op(on, 'PoolBackend'))} | {fmt(per_op(off, 'MallocBackend'))} | "
                 f"{fmt(per_op(off, 'NoCacheBackend'))} | {frag(off, 'NoCacheBackend'):.3f} |")
open(md_path, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

gnuplot <<GP
set terminal svg size 720,420 dynamic font "sans,12"
set output "$out/allocator.svg"
set title "Warm allocate+free pair, median of $reps (lower is better)"
set ylabel "ns per pair (log)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
plot "$tmp/pairs.dat" using 2:xtic(1) title "pool", \
     "" using 3 title "pool, deadlock detection on", \
     "" using 4 title "glibc malloc", \
     "" using 5 title "no caching (mmap per allocation)"
GP
echo "wrote $out/allocator.md and $out/allocator.svg"
