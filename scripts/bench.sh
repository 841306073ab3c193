#!/usr/bin/env bash
# Persist's benchmark (docs/persist-bench.md): JSON -> Parquet throughput, peak
# RSS and exactness of Persist's converter against pyarrow (`read_json`, and
# `json` + `Table.from_pylist`), DuckDB (`read_json_auto` + `COPY ... TO`
# Parquet, 1 thread and all threads) and Polars (`read_ndjson` +
# `write_parquet`), on the same generated pages, same run, on all cores and
# pinned to one core.
#
#   scripts/bench.sh                  # 1k, 50k and 500k records, all cores and 1 core
#   scripts/bench.sh --quick          # 1k and 50k only
#   scripts/bench.sh --cores all      # all cores only (--cores 1: one core only)
#
# Builds `persist-bench` (release), installs the pinned Python tools into
# .venv, runs every case in its own process, checks every Parquet file
# written against its page (bench/check.py), prints the Markdown tables and
# writes them with the raw JSON to target/bench/persist.{md,json}. Any
# further option goes to `persist-bench run` (see `persist-bench run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p persist-bench
scripts/python-tools.sh install
exec "${CARGO_TARGET_DIR:-target}/release/persist-bench" run \
    --python "$PWD/.venv/bin/python" --peer bench/peer.py --check bench/check.py --out target/bench "$@"
