#!/usr/bin/env bash
# Issue 20's benchmarks in one command (docs/REMOTE.md, "Measuring"):
#
#   1. Throughput: one SIZE_MIB object up to and down from a loopback s3rver,
#      by neffd's S3 client (bench/s3_transfer: libcurl, streamed) and by
#      curl --aws-sigv4 moving the same bytes to and from the same server,
#      REPS times each, alternating; medians and the ratio neffd/curl
#      (target >= 0.8). Each put is measured both ways, by both clients: as
#      one PUT, and as the daemon uploads a NEFF this big (a multipart
#      upload of PART_MIB parts, CONCURRENCY at once; curl sends the same
#      parts with xargs -P).
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
PART_MIB=${PART_MIB:-16}     # the daemon's --s3_part_size
CONCURRENCY=${CONCURRENCY:-4}  # the daemon's --s3_upload_concurrency
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
  --sign_payload=false --part_size_mib="$PART_MIB"
  --upload_concurrency="$CONCURRENCY")
CURL=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
mibs() {  # mibs SECONDS: MiB/s of the object
  awk -v s="$1" -v m="$SIZE_MIB" 'BEGIN { printf "%.1f", m / s }'
}
now() { date +%s.%N; }
# curl's multipart upload reads the parts from files cut before the clock
# starts (neffd reads them from the one file with pread).
mkdir -p "$WORK/parts"
split -b "${PART_MIB}M" -d -a 5 "$WORK/object" "$WORK/parts/p."
put_part() {  # put_part URL UPLOAD_ID FILE: prints "NUMBER ETAG"
  local number=$((10#${3##*.} + 1))
  curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user S3RVER:S3RVER \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$3" -D - -o /dev/null \
    "$1?partNumber=$number&uploadId=$2" |
    tr -d '\r' | awk -v n="$number" 'tolower($1) == "etag:" { print n, $2 }'
}
export -f put_part
curl_multipart() {  # curl_multipart KEY: create, the parts, complete
  local url="$ENDPOINT/$BUCKET/$1" id
  id=$("${CURL[@]}" -X POST "$url?uploads=" | grep -o '<UploadId>[^<]*' | cut -d'>' -f2)
  find "$WORK/parts" -name 'p.*' -print0 |
    xargs -0 -P "$CONCURRENCY" -I{} bash -c 'put_part "$@"' _ "$url" "$id" {} |
    sort -n | awk 'BEGIN { print "<CompleteMultipartUpload>" }
      { printf "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>\n", $1, $2 }
      END { print "</CompleteMultipartUpload>" }' >"$WORK/complete.xml"
  "${CURL[@]}" -X POST --data-binary @"$WORK/complete.xml" \
    "$url?uploadId=$id" | { ! grep -q '<Error>'; }
}
for rep in $(seq "$REPS"); do
  echo "throughput $rep/$REPS: $(uptime)" >&2
  line=$("${S3T[@]}" put "neffd-$rep" "$WORK/object")
  echo "neffd put $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  start=$(now)
  curl_multipart "curlmp-$rep"
  t=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
  echo "curl put $(mibs "$t") ${t}s" >>"$RAW"
  # One PUT (multipart threshold above the object), by both.
  line=$("${S3T[@]}" --part_size_mib="$SIZE_MIB" put "neffd1-$rep" "$WORK/object")
  echo "neffd put1 $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  t=$( { /usr/bin/time -f %e "${CURL[@]}" -T "$WORK/object" \
    "$ENDPOINT/$BUCKET/curl-$rep" >/dev/null; } 2>&1 | tail -1)
  echo "curl put1 $(mibs "$t") ${t}s" >>"$RAW"
  "${CURL[@]}" -o "$WORK/got" "$ENDPOINT/$BUCKET/curlmp-$rep"
  cmp -s "$WORK/object" "$WORK/got" || { echo "curl multipart: bytes differ" >&2; exit 1; }
  line=$("${S3T[@]}" get "curl-$rep" "$WORK/got")
  echo "neffd get $(sed 's/.*= \([0-9.]*\) MiB.*/\1/' <<<"$line") $line" >>"$RAW"
  cmp -s "$WORK/object" "$WORK/got" || { echo "neffd get: bytes differ" >&2; exit 1; }
  t=$( { /usr/bin/time -f %e "${CURL[@]}" -o "$WORK/got" \
    "$ENDPOINT/$BUCKET/neffd-$rep"; } 2>&1 | tail -1)
  echo "curl get $(mibs "$t") ${t}s" >>"$RAW"
  cmp -s "$WORK/object" "$WORK/got" || { echo "curl get: bytes differ" >&2; exit 1; }
  for key in neffd neffd1 curl curlmp; do  # bounds s3rver's disk use
    "${CURL[@]}" -X DELETE "$ENDPOINT/$BUCKET/$key-$rep"
  done
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
  row() {  # row WHAT NEFFD_OP CURL_OP
    local n c
    n=$(col neffd "$2" 3)
    c=$(col curl "$3" 3)
    echo "| $1 | $n | $c | $(ratio "$n" "$c") |"
  }
  parts="multipart, $PART_MIB MiB parts, $CONCURRENCY at once"
  row "put ${SIZE_MIB} MiB, $parts (the daemon's way), both" put put
  row "put ${SIZE_MIB} MiB, one PUT, both" put1 put1
  row "put ${SIZE_MIB} MiB: neffd $parts; curl one PUT" put put1
  row "get ${SIZE_MIB} MiB" get get
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
