#!/usr/bin/env bash
# The local runtime's benchmark (docs/benchmarks.md, "Local runtime"):
# `tributary run` of a count-first paged pipeline against the demo vendor,
# next to what the vendor and Persist need on their own.
#
#   scripts/bench-run.sh          # 5 runs of each measurement
#   scripts/bench-run.sh 9        # 9 runs
#
# Starts `tributary vendor --customers $RECORDS` on a free port, then, RUNS
# times each, with the median reported:
#   (a) vendor: the pages fetched one after another by one curl (one
#       connection): the vendor's serving time;
#   (b) run: `tributary run` of a spec paging /customers $PAGE_SIZE per page,
#       count-first, into a fresh lake: wall time of the process, records/s;
#   (c) persist: `tributary replay` of that lake's raw pages: Persist alone
#       over the same pages, one after another (no HTTP, no queues).
# The target is run <= 2 x (vendor + persist).
#
# Environment: TRIBUTARY (a built binary: skips the build, e.g. to compare
# two builds), PROFILE (cargo profile, default release), RECORDS (100000),
# PAGE_SIZE (1000), CONCURRENCY (`run --concurrency`, default 4).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
records=${RECORDS:-100000}
page_size=${PAGE_SIZE:-1000}
concurrency=${CONCURRENCY:-4}
profile=${PROFILE:-release}

if [[ -z "${TRIBUTARY:-}" ]]; then
    cargo build -p tributary-cli --profile "$profile"
    TRIBUTARY="${CARGO_TARGET_DIR:-target}/$profile/tributary"
fi

work=$(mktemp -d)
vendor_pid=
cleanup() {
    [[ -n $vendor_pid ]] && kill "$vendor_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

"$TRIBUTARY" vendor --addr 127.0.0.1:0 --customers "$records" >"$work/vendor.out" 2>&1 &
vendor_pid=$!
addr=
for _ in $(seq 100); do
    addr=$(grep -o 'http://[0-9.]*:[0-9]*' "$work/vendor.out" || true)
    [[ -n $addr ]] && break
    sleep 0.1
done
[[ -n $addr ]] || { cat "$work/vendor.out" >&2; echo "the vendor did not start" >&2; exit 1; }

pages=$(((records + page_size - 1) / page_size))
urls="$addr/customers?offset=[0-$(((pages - 1) * page_size)):$page_size]&limit=$page_size"

cat >"$work/spec.yaml" <<EOF
version: 1
pipeline: bench_customers
description: scripts/bench-run.sh - customers, count-first, $page_size per page.
strategy: { kind: paged, page_size: $page_size, total_pointer: /total, params: { style: offset_limit } }
request: { url: "$addr/customers", records_pointer: /items, allow: { loopback: true } }
target: { dataset: bench_customers }
EOF

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

vendor_times=() run_times=() persist_times=()
for i in $(seq "$runs"); do
    start=$(now)
    statuses=$(curl -sS -o /dev/null -w '%{http_code}\n' "$urls" | sort | uniq -c | tr -s ' ')
    vendor_times+=("$(elapsed "$start" "$(now)")")
    [[ $statuses == " $pages 200" ]] || { echo "curl: unexpected statuses: $statuses" >&2; exit 1; }

    lake="$work/lake"
    rm -rf "$lake"
    start=$(now)
    "$TRIBUTARY" run "$work/spec.yaml" --lake "$lake" --concurrency "$concurrency" \
        --scheduled-at 2026-11-29T06:00:00Z >"$work/run.out" 2>"$work/run.err" ||
        { cat "$work/run.out" "$work/run.err" >&2; exit 1; }
    run_times+=("$(elapsed "$start" "$(now)")")
    grep -q "records persisted    $records\$" "$work/run.out" || { cat "$work/run.out" >&2; exit 1; }

    start=$(now)
    "$TRIBUTARY" replay --lake "$lake" --dataset bench_customers >"$work/replay.out" 2>&1 ||
        { cat "$work/replay.out" >&2; exit 1; }
    persist_times+=("$(elapsed "$start" "$(now)")")
    grep -q "$pages raw pages, $pages persisted" "$work/replay.out" || { cat "$work/replay.out" >&2; exit 1; }
    echo "run $i/$runs: vendor ${vendor_times[-1]} s, tributary run ${run_times[-1]} s, persist ${persist_times[-1]} s" >&2
done

vendor=$(printf '%s\n' "${vendor_times[@]}" | median)
run=$(printf '%s\n' "${run_times[@]}" | median)
persist=$(printf '%s\n' "${persist_times[@]}" | median)
rate() { awk -v n="$records" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }
echo
echo "$records records, $pages pages of $page_size, --concurrency $concurrency, median of $runs runs, $(nproc) cores, $(date -u +%F)"
echo
echo "| measurement | wall time (s) | records/s |"
echo "|---|---:|---:|"
echo "| (a) vendor serving the $pages pages one after another (curl) | $vendor | $(rate "$vendor") |"
echo "| (b) \`tributary run\` (probe + $pages pages, Request + Persist) | $run | $(rate "$run") |"
echo "| (c) Persist alone on the same pages, one after another (\`tributary replay\`) | $persist | $(rate "$persist") |"
echo
awk -v r="$run" -v v="$vendor" -v p="$persist" 'BEGIN { printf "run / (vendor + persist) = %.2f (target: <= 2)\n", r / (v + p) }'
