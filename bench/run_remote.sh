#!/usr/bin/env bash
# Issue 20's benchmarks in one command (docs/REMOTE.md, "Measuring"):
#
#   1. Throughput: one SIZE_MIB object up to and down from a loopback s3rver,
#      by neffd's S3 client (bench/s3_transfer: libcurl, streamed, multipart
#      above 32 MiB) and by curl --aws-sigv4 moving the same bytes to and
#      from the same server, REPS times each, alternating; medians and the
#      ratio neffd/curl (target >= 0.8). neffd's put runs twice: as the
#      daemon uploads a NEFF this big (multipart) and as one PUT, like curl.
#   2. Cold-cluster storm (bench/storm, RANKS x GRAPHS, BYTES per NEFF) on a
#      new shared store with the S3 tier cold (an empty prefix: every graph
#      compiles and is uploaded) and then warm (another new shared store,
#      the same prefix: every graph is fetched, none compiles).
#
# Writes the table to OUT (docs/bench/remote.md) and the raw lines beside it.
#
#   bench/run_remote.sh                         # the issue's sizes
#   SIZE_MIB=8 REPS=1 RANKS=4 GRAPHS=2 OUT=/tmp/remote.md bench/run_remote.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${SIZE_MIB:-1024}
REPS=${REPS:-5}
RANKS=${RANKS:-32}
GRAPHS=${GRAPHS:-16}
BYTES=${BYTES:-8388608}
WORK=${WORK:-/tmp/neffd-remote-bench}
OUT=${OUT:-docs/bench/remote.md}
BUCKET=neffd-bench

bazel build -c opt //bench:s3_transfer //bench/storm:storm //daemon:neffd \
  //client:neffctl
rm -rf "$WORK"
mkdir -p "$WORK/s3" "$(dirname "$OUT")"
RAW="$WORK/raw"
: >"$RAW"

node --openssl-legacy-provider tests/harness/s3_server.js "$WORK/s3" "$BUCKET" \
  >"$WORK/s3.log" 2>"$WORK/s3.err" &
S3_PID=$!
trap 'kill $S3_PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  grep -q '^listening ' "$WORK/s3.log" 2>/dev/null && break
  sleep 0.1
done
PORT=$(awk '/^listening /{print $2; exit}' "$WORK/s3.log")
[[ -n "$PORT" ]] || { echo "s3rver did not start: $(cat "$WORK/s3.err")" >&2; exit 1; }
ENDPOINT="http://127.0.0.1:$PORT"
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_EC2_METADATA_DISABLED=true

# Random bytes: nothing on the way can make them smaller.
head -c "$((SIZE_MIB << 20))" /dev/urandom >"$WORK/object"
S3T=(bazel-bin/bench/s3_transfer --endpoint="$ENDPOINT" --bucket="$BUCKET"
  --sign_payload=false)
CURL=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
mibs() {  # mibs SECONDS: MiB/s of the object
  awk -v s="$1" -v m="$SIZE_MIB" 'BEGIN { printf "%.1f", m / s }'
}
for rep in $(seq "$REPS"); do
  echo "throughput $rep/$REPS: $(uptime)" >&2
  line=$("${S3T[@]}" put "neffd-$rep" "$WORK/object")
  echo "neffd put $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  # The same client with one PUT (multipart threshold above the object), as
  # curl sends it: s3rver assembles multipart uploads by copying the parts.
  line=$("${S3T[@]}" --part_size_mib="$SIZE_MIB" put "neffd1-$rep" "$WORK/object")
  echo "neffd put1 $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  t=$( { /usr/bin/time -f %e "${CURL[@]}" -T "$WORK/object" \
    "$ENDPOINT/$BUCKET/curl-$rep" >/dev/null; } 2>&1 | tail -1)
  echo "curl put $(mibs "$t") ${t}s" >>"$RAW"
  line=$("${S3T[@]}" get "curl-$rep" "$WORK/got")
  echo "neffd get $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  cmp -s "$WORK/object" "$WORK/got" || { echo "neffd get: bytes differ" >&2; exit 1; }
  t=$( { /usr/bin/time -f %e "${CURL[@]}" -o "$WORK/got" \
    "$ENDPOINT/$BUCKET/neffd-$rep"; } 2>&1 | tail -1)
  echo "curl get $(mibs "$t") ${t}s" >>"$RAW"
  cmp -s "$WORK/object" "$WORK/got" || { echo "curl get: bytes differ" >&2; exit 1; }
done

STORM=(bazel-bin/bench/storm/storm --modes=daemon --ranks="$RANKS"
  --graphs="$GRAPHS" --neff_bytes="$BYTES" --compile_ms=200)
for rep in $(seq "$REPS"); do
  echo "storm $rep/$REPS: $(uptime)" >&2
  FLAGS="--poll_interval=0.1 --remote=s3://$BUCKET/storm-$rep --s3_endpoint=$ENDPOINT"
  "${STORM[@]}" --workdir="$WORK/cold-$rep" --daemon_flags="$FLAGS" \
    --wait_uploads | grep '^| daemon' | sed 's/^/storm cold /' >>"$RAW"
  "${STORM[@]}" --workdir="$WORK/warm-$rep" --daemon_flags="$FLAGS" \
    --expect_compiles=0 | grep '^| daemon' | sed 's/^/storm warm /' >>"$RAW"
done

median() {  # median of the numbers on stdin
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a";
    else if (NR % 2) print v[(NR + 1) / 2];
    else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
col() { awk -v a="$1" -v b="$2" -v c="$3" '$1 == a && $2 == b { print $c }' "$RAW" | median; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (y > 0) printf "%.2f", x / y; else print "n/a" }'; }
{
  echo "# Remote (S3) tier benchmarks"
  echo
  echo "Written by \`bench/run_remote.sh\` ($(date -u '+%Y-%m-%d %H:%M UTC')," \
    "commit $(git rev-parse --short HEAD), $(nproc) cores, load" \
    "$(cut -d' ' -f1-3 /proc/loadavg) at the end; SIZE_MIB=$SIZE_MIB REPS=$REPS" \
    "RANKS=$RANKS GRAPHS=$GRAPHS BYTES=$BYTES). Medians of $REPS."
  echo
  echo "| transfer | neffd MiB/s | curl MiB/s | neffd / curl (target ≥ 0.8) |"
  echo "|---|---|---|---|"
  for op in put put1 get; do
    n=$(col neffd "$op" 3)
    c=$(col curl "${op%1}" 3)
    case $op in
      put) what="put ${SIZE_MIB} MiB, multipart (16 MiB parts)" ;;
      put1) what="put ${SIZE_MIB} MiB, one PUT" ;;
      get) what="get ${SIZE_MIB} MiB" ;;
    esac
    echo "| $what | $n | $c | $(ratio "$n" "$c") |"
  done
  echo
  echo "| cold cluster, storm $RANKS x $GRAPHS | wall s | compiles |"
  echo "|---|---|---|"
  for s in cold warm; do
    # storm row: "storm S | daemon | R x K | wall | ideal | ... | compiles |"
    w=$(awk -v s="$s" '$1 == "storm" && $2 == s { split($0, f, "|"); print f[4] }' "$RAW" | median)
    k=$(awk -v s="$s" '$1 == "storm" && $2 == s { split($0, f, "|"); print f[7] }' "$RAW" | median)
    echo "| S3 tier $s | $w | $k |"
  done
  echo
  echo "Raw lines: \`$RAW\`."
} >"$OUT"
cat "$OUT"
