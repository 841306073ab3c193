#!/usr/bin/env bash
# Persist's benchmark (docs/persist-bench.md): JSON -> Parquet throughput and
# peak RSS of Persist's converter against pyarrow (`pyarrow.json.read_json`,
# and `json` + `Table.from_pylist`), on the same generated pages, same run.
#
#   scripts/bench.sh            # 1k, 50k and 500k records (several minutes)
#   scripts/bench.sh --quick    # 1k and 50k only
#
# Builds `persist-bench` (release), installs the pinned Python tools into
# .venv, runs every case in its own process, prints the Markdown table and
# writes it with the raw JSON to target/bench/persist.{md,json}. Any further
# option goes to `persist-bench run` (see `persist-bench run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p persist-bench
scripts/python-tools.sh install
exec "${CARGO_TARGET_DIR:-target}/release/persist-bench" run \
    --python "$PWD/.venv/bin/python" --peer bench/peer.py --out target/bench "$@"
