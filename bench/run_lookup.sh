#!/usr/bin/env bash
# bench/run_lookup.sh: "Lookup vs. bare gRPC echo" of docs/BENCHMARKS.md in
# one command. Builds //bench:lookup_bench (with neffd and echo_server) with
# -c opt, runs Lookup and echo alternately at 1, 8, 32 and 128 clients,
# 5 runs each, and writes docs/bench/lookup.md (medians and ratios) and
# docs/bench/lookup.svg (throughput and p50/p99 against clients).
#
#   bench/run_lookup.sh [lookup_bench flags, e.g. --runs=5 --seconds=3]
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--clients=1,8,32,128 --runs=5 --seconds=3 "$@")

bazel build -c opt //bench:lookup_bench
bin="$(bazel info -c opt bazel-bin)/bench/lookup_bench"
out=docs/bench
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"
"$bin" "${args[@]}" --data="$tmp/lookup.dat" >"$tmp/table.md"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
finished="$(date -u '+%H:%M UTC')"

{
  echo "Command: \`bench/run_lookup.sh\` (\`lookup_bench ${args[*]}\`)."
  echo "Machine: nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"\
       "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo),"\
       "$(. /etc/os-release && echo "$PRETTY_NAME"); run $started–$finished,"\
       "load average $load_before before, $load_after after."
  echo "Medians over runs; ratios are medians of each Lookup run over the echo run next to it."
  echo
  cat "$tmp/table.md"
} >"$out/lookup.md"
cat "$out/lookup.md"

gnuplot <<GP
set terminal svg size 960,420 dynamic font "sans,12"
set output "$out/lookup.svg"
set multiplot layout 1,2 title "neffd Lookup hit vs. bare gRPC echo, unix socket (medians)"
set logscale x 2
set xlabel "concurrent clients"
set xtics (1, 8, 32, 128)
set grid
set key top left
set title "throughput"
set ylabel "calls/s"
set yrange [0:*]
plot "$tmp/lookup.dat" using 1:5 with linespoints lw 2 title "Lookup", \
     "" using 1:9 with linespoints lw 2 title "echo"
set title "latency"
set ylabel "us (log)"
set logscale y
set yrange [*:*]
plot "$tmp/lookup.dat" using 1:2 with linespoints lw 2 title "Lookup p50", \
     "" using 1:3 with linespoints lw 2 dt 2 title "Lookup p99", \
     "" using 1:6 with linespoints lw 2 title "echo p50", \
     "" using 1:7 with linespoints lw 2 dt 2 title "echo p99"
unset multiplot
GP
echo "wrote $out/lookup.md and $out/lookup.svg"
