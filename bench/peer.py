"""The benchmark's Python peers: JSON -> Parquet with pyarrow, one case per process.

    python bench/peer.py from_pylist PAGE.json OUT.parquet ROW_GROUP_ROWS ZSTD_LEVEL
    python bench/peer.py read_json PAGE.ndjson OUT.parquet ROW_GROUP_ROWS ZSTD_LEVEL

from_pylist: `json.load` of the JSON array + `pyarrow.Table.from_pylist` + `pyarrow.parquet.write_table`.
read_json:   `pyarrow.json.read_json` of the NDJSON page + `pyarrow.parquet.write_table`.

Prints one JSON line: {"ok": true, "rows": N, "seconds": S, "peak_rss_kb": K} or
{"ok": false, "error": "<first line of the error>", ...}. `seconds` covers reading the input
through writing the Parquet file (not the interpreter start or the imports); `peak_rss_kb` is the
process's VmHWM read from /proc/self/status at the end, as the Rust side does.
"""

import json
import sys
import time


def peak_rss_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def from_pylist(source, target, row_group_rows, zstd_level):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(source, "rb") as f:
        records = json.load(f)
    table = pa.Table.from_pylist(records)
    pq.write_table(table, target, compression="zstd", compression_level=zstd_level, row_group_size=row_group_rows)
    return table.num_rows


def read_json(source, target, row_group_rows, zstd_level):
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    table = pj.read_json(source)
    pq.write_table(table, target, compression="zstd", compression_level=zstd_level, row_group_size=row_group_rows)
    return table.num_rows


PEERS = {"from_pylist": from_pylist, "read_json": read_json}


def main(argv):
    if len(argv) != 6 or argv[1] not in PEERS:
        print(__doc__, file=sys.stderr)
        return 2
    peer, source, target = argv[1], argv[2], argv[3]
    row_group_rows, zstd_level = int(argv[4]), int(argv[5])
    # Import outside the timed part: a Lambda pays it once per cold start.
    import pyarrow.parquet  # noqa: F401
    import pyarrow.json  # noqa: F401

    started = time.perf_counter()
    try:
        rows = PEERS[peer](source, target, row_group_rows, zstd_level)
    except BaseException as err:  # MemoryError and friends are results too
        lines = str(err).strip().splitlines() or [""]
        first = f"{type(err).__name__}: {lines[0]}"
        print(json.dumps({"ok": False, "error": first, "peak_rss_kb": peak_rss_kb()}))
        return 1
    seconds = time.perf_counter() - started
    print(json.dumps({"ok": True, "rows": rows, "seconds": seconds, "peak_rss_kb": peak_rss_kb()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
