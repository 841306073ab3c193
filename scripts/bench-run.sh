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
#       count-first, into a fresh lake: wall time of the process, records/s,
#       peak RSS (GNU time's %M, when /usr/bin/time is GNU time);
#   (c) persist: `tributary replay` of that lake's raw pages: Persist alone
#       over the same pages, one after another (no HTTP, no queues);
#   (d) dlt: dlt's rest_api source over the same vendor, offset paging,
#       loaded as Parquet by its filesystem destination into a fresh folder
#       (bench/dlt_run.py, which checks every id landed once): the tool a
#       team would otherwise run, in the same run. DLT=0 leaves it out;
#       scripts/python-tools.sh dlt installs it (pinned, in .tools/dlt).
# The target is run <= 2 x (vendor + persist), and the run's peak RSS flat
# whatever RECORDS (about 200 MB at most; docs/benchmarks.md).
#
# Environment: TRIBUTARY (a built binary: skips the build, e.g. to compare
# two builds), PROFILE (cargo profile, default release), RECORDS (100000),
# PAGE_SIZE (1000), CONCURRENCY (`run --concurrency`, default 4), DLT (1).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
records=${RECORDS:-100000}
page_size=${PAGE_SIZE:-1000}
concurrency=${CONCURRENCY:-4}
profile=${PROFILE:-release}
with_dlt=${DLT:-1}
[[ $with_dlt == 1 ]] && scripts/python-tools.sh dlt

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
# Peak RSS of a command in KiB into $work/rss, with GNU time if there is one.
peak=()
/usr/bin/time -f %M -o /dev/null true 2>/dev/null && peak=(/usr/bin/time -f %M -o "$work/rss")
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

vendor_times=() run_times=() persist_times=() run_rss=() persist_rss=() dlt_times=() dlt_rss=()
for i in $(seq "$runs"); do
    start=$(now)
    statuses=$(curl -sS -o /dev/null -w '%{http_code}\n' "$urls" | sort | uniq -c | tr -s ' ')
    vendor_times+=("$(elapsed "$start" "$(now)")")
    [[ $statuses == " $pages 200" ]] || { echo "curl: unexpected statuses: $statuses" >&2; exit 1; }

    lake="$work/lake"
    rm -rf "$lake"
    start=$(now)
    "${peak[@]}" "$TRIBUTARY" run "$work/spec.yaml" --lake "$lake" --concurrency "$concurrency" \
        --scheduled-at 2026-11-29T06:00:00Z >"$work/run.out" 2>"$work/run.err" ||
        { cat "$work/run.out" "$work/run.err" >&2; exit 1; }
    run_times+=("$(elapsed "$start" "$(now)")")
    [[ ${#peak[@]} -gt 0 ]] && run_rss+=("$(tail -n 1 "$work/rss")")
    grep -q "records persisted    $records\$" "$work/run.out" || { cat "$work/run.out" >&2; exit 1; }

    start=$(now)
    "${peak[@]}" "$TRIBUTARY" replay --lake "$lake" --dataset bench_customers >"$work/replay.out" 2>&1 ||
        { cat "$work/replay.out" >&2; exit 1; }
    persist_times+=("$(elapsed "$start" "$(now)")")
    [[ ${#peak[@]} -gt 0 ]] && persist_rss+=("$(tail -n 1 "$work/rss")")
    grep -q "$pages raw pages, $pages persisted" "$work/replay.out" || { cat "$work/replay.out" >&2; exit 1; }
    echo "run $i/$runs: vendor ${vendor_times[-1]} s, tributary run ${run_times[-1]} s, persist ${persist_times[-1]} s" >&2

    if [[ $with_dlt == 1 ]]; then
        rm -rf "$work/dlt"
        start=$(now)
        "${peak[@]}" .tools/dlt/bin/python bench/dlt_run.py "$addr" "$page_size" "$records" "$work/dlt" \
            >"$work/dlt.out" 2>&1 || { cat "$work/dlt.out" >&2; exit 1; }
        dlt_times+=("$(elapsed "$start" "$(now)")")
        [[ ${#peak[@]} -gt 0 ]] && dlt_rss+=("$(tail -n 1 "$work/rss")")
        echo "run $i/$runs: $(tail -n 1 "$work/dlt.out") in ${dlt_times[-1]} s" >&2
    fi
done

vendor=$(printf '%s\n' "${vendor_times[@]}" | median)
run=$(printf '%s\n' "${run_times[@]}" | median)
persist=$(printf '%s\n' "${persist_times[@]}" | median)
rate() { awk -v n="$records" -v s="$1" 'BEGIN { printf "%.0f", n / s }'; }
# Median peak RSS in MB of the KiB figures given, "-" without GNU time.
mb() { [[ $# -gt 0 ]] && printf '%s\n' "$@" | median | awk '{ printf "%.0f", $1 / 1024 }' || echo -; }
echo
echo "$records records, $pages pages of $page_size, --concurrency $concurrency, median of $runs runs, $(nproc) cores, $(date -u +%F)"
echo
echo "| measurement | wall time (s) | records/s | peak RSS (MB) |"
echo "|---|---:|---:|---:|"
echo "| (a) vendor serving the $pages pages one after another (curl) | $vendor | $(rate "$vendor") | - |"
echo "| (b) \`tributary run\` (probe + $pages pages, Request + Persist) | $run | $(rate "$run") | $(mb "${run_rss[@]}") |"
echo "| (c) Persist alone on the same pages, one after another (\`tributary replay\`) | $persist | $(rate "$persist") | $(mb "${persist_rss[@]}") |"
if [[ $with_dlt == 1 ]]; then
    dlt=$(printf '%s\n' "${dlt_times[@]}" | median)
    echo "| (d) dlt $(.tools/dlt/bin/python -c 'import dlt; print(dlt.__version__)') rest_api source, filesystem destination, Parquet | $dlt | $(rate "$dlt") | $(mb "${dlt_rss[@]}") |"
fi
echo
awk -v r="$run" -v v="$vendor" -v p="$persist" 'BEGIN { printf "run / (vendor + persist) = %.2f (target: <= 2)\n", r / (v + p) }'
[[ $with_dlt == 1 ]] && awk -v r="$run" -v d="$dlt" 'BEGIN { printf "dlt / run = %.1f\n", d / r }'
exit 0
