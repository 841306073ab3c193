"""dlt's rest_api source over the demo vendor: the peer of `tributary run`
in scripts/bench-run.sh (issue 28, item 5).

    python bench/dlt_run.py URL PAGE_SIZE RECORDS OUT_DIR

Pages GET URL/customers?offset=N&limit=PAGE_SIZE (the body's `items` are
the records, `total` the count, as the count-first spec of bench-run.sh
reads them) with dlt's offset paginator, and loads them with the
filesystem destination as Parquet into OUT_DIR (dlt's defaults otherwise:
its extract, normalize and load steps, one process). Then counts the rows
of the Parquet files it wrote and the distinct ids among them, and exits 1
unless both are RECORDS: a peer that loses or repeats records is not
timed as if it had not.

Prints one line: `dlt <version>: <rows> rows, <distinct> distinct ids,
<files> files`.
"""

import os
import pathlib
import sys

os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")

import dlt  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from dlt.sources.rest_api import rest_api_source  # noqa: E402


def main() -> int:
    url, page_size, records, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), pathlib.Path(sys.argv[4])
    source = rest_api_source(
        {
            "client": {
                "base_url": url,
                "paginator": {
                    "type": "offset",
                    "limit": page_size,
                    "offset_param": "offset",
                    "limit_param": "limit",
                    "total_path": "total",
                },
            },
            "resources": [{"name": "customers", "endpoint": {"path": "customers", "data_selector": "items"}}],
        }
    )
    pipeline = dlt.pipeline(
        pipeline_name="bench_customers",
        pipelines_dir=str(out / "pipelines"),
        destination=dlt.destinations.filesystem(bucket_url=(out / "lake").as_uri()),
        dataset_name="bench",
    )
    pipeline.run(source, loader_file_format="parquet")

    files = sorted((out / "lake" / "bench" / "customers").rglob("*.parquet"))
    ids = [pq.read_table(f, columns=["id"]).column("id") for f in files]
    rows = sum(len(c) for c in ids)
    distinct = len(pc.unique(pa.chunked_array([c for col in ids for c in col.chunks]))) if rows else 0
    print(f"dlt {dlt.__version__}: {rows} rows, {distinct} distinct ids, {len(files)} files")
    if (rows, distinct) != (records, records):
        print(f"dlt_run.py: expected {records} rows and distinct ids", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
