"""The benchmark's peers: JSON -> Parquet with pyarrow, DuckDB and Polars, one case per process.

    python bench/peer.py PEER PAGE OUT.parquet ROW_GROUP_ROWS ZSTD_LEVEL
    python bench/peer.py versions

from_pylist: `json.load` of the JSON array + `pyarrow.Table.from_pylist` + `pyarrow.parquet.write_table`.
read_json:   `pyarrow.json.read_json` of the NDJSON page + `pyarrow.parquet.write_table`.
duckdb_1:    DuckDB, `SET threads=1`, `COPY (SELECT * FROM read_json_auto(PAGE, format='newline_delimited'))
             TO OUT (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL z, ROW_GROUP_SIZE r)`.
duckdb_all:  the same with DuckDB's default threads (every core it sees).
polars:      `polars.read_ndjson(PAGE).write_parquet(OUT, compression='zstd', compression_level=z,
             row_group_size=r)`.

Every peer keeps its tool's defaults otherwise (DuckDB's schema sampling, Polars' inference length).

Prints one JSON line: {"ok": true, "rows": N, "seconds": S, "peak_rss_kb": K} or
{"ok": false, "error": "<first line of the error>", ...}. `seconds` covers reading the input
through the Parquet file written and closed (not the interpreter start, the imports or opening a
DuckDB connection: a Lambda pays those once per cold start); `peak_rss_kb` is the process's VmHWM
read from /proc/self/status at the end, as the Rust side does. `versions` prints the tools'
versions as one JSON object.
"""

import json
import os
import re
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


def duckdb_copy(connection, source, target, row_group_rows, zstd_level):
    # COPY returns the rows it wrote. The paths are SQL string literals: DuckDB 1.5 binds a COPY's
    # prepared parameters out of order (it read the target as the JSON input).
    (rows,) = connection.execute(
        f"COPY (SELECT * FROM read_json_auto({sql_text(source)}, format = 'newline_delimited')) "
        f"TO {sql_text(target)} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL {int(zstd_level)}, "
        f"ROW_GROUP_SIZE {int(row_group_rows)})"
    ).fetchone()
    return rows


def sql_text(text):
    """`text` as an SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def polars_ndjson(source, target, row_group_rows, zstd_level):
    import polars as pl

    frame = pl.read_ndjson(source)
    frame.write_parquet(target, compression="zstd", compression_level=zstd_level, row_group_size=row_group_rows)
    return frame.height


def duckdb_connection(threads):
    import duckdb

    connection = duckdb.connect()
    if threads is not None:
        connection.execute(f"SET threads = {int(threads)}")
    return connection


def prepare(peer):
    """Imports the peer's module (and opens DuckDB), untimed; returns the timed conversion."""
    if peer == "read_json":
        import pyarrow.json  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        return read_json
    if peer == "from_pylist":
        import pyarrow.parquet  # noqa: F401

        return from_pylist
    if peer in ("duckdb_1", "duckdb_all"):
        connection = duckdb_connection(1 if peer == "duckdb_1" else None)
        return lambda *args: duckdb_copy(connection, *args)
    if peer == "polars":
        import polars  # noqa: F401

        return polars_ndjson
    return None


def first_line(err, source):
    """The error's first line, short enough for a table cell: the page named by its file name, and
    the record DuckDB quotes (`Object {"id":...} has unknown key`) left out."""
    lines = str(err).strip().splitlines() or [""]
    line = lines[0].replace(os.path.dirname(os.path.abspath(source)) + os.sep, "")
    line = re.sub(r"Object \{.*?\.\.\. has", "a record has", line)
    return f"{type(err).__name__}: {line}"


def versions():
    found = {"python": sys.version.split()[0]}
    for module in ("pyarrow", "duckdb", "polars"):
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            found[module] = None
    return found


def main(argv):
    if len(argv) == 2 and argv[1] == "versions":
        print(json.dumps(versions()))
        return 0
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    source, target = argv[2], argv[3]
    row_group_rows, zstd_level = int(argv[4]), int(argv[5])
    try:
        convert = prepare(argv[1])
        if convert is None:
            print(__doc__, file=sys.stderr)
            return 2
        started = time.perf_counter()
        rows = convert(source, target, row_group_rows, zstd_level)
        seconds = time.perf_counter() - started
    except BaseException as err:  # MemoryError and friends are results too (an ImportError as well)
        print(json.dumps({"ok": False, "error": first_line(err, source), "peak_rss_kb": peak_rss_kb()}))
        return 1
    print(json.dumps({"ok": True, "rows": rows, "seconds": seconds, "peak_rss_kb": peak_rss_kb()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
