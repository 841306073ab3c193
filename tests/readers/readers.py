#!/usr/bin/env python3
"""Independent readers of one lake dataset: pyspark, DuckDB and pyarrow.

Each reader reads the dataset folder (`<lake>/<dataset>/`, Hive-partitioned:
`dt=YYYY-MM-DD/`, `country=BR/`, `dt=.../hour=07/`), each row is rebuilt into
the source JSON record and, with `--expected`, the rows are compared with the
records the vendor served, as multisets.

    python tests/readers/readers.py --dataset DIR [--schema FILE.arrow]
        [--glue FILE.json] [--expected FILE.jsonl] [--readers LIST]

Prints one JSON object on stdout (everything else goes to stderr):

    {"<reader>": {"rows": N | null, "ok": bool, "error": str | null,
                  "skipped": str | null, "mismatches": [...], "missing": N,
                  "unexpected": N, "notes": [...], "columns": {name: type},
                  "seconds": S, "startup_seconds": S (Spark readers)}}

Readers: `spark_merge` (mergeSchema, Hive partitions discovered),
`spark_schema` (the published schema as a Spark DDL string; skipped without
one), `duckdb` (read_parquet with hive_partitioning), `duckdb_union` (the same
with union_by_name), `pyarrow` (pyarrow.dataset, with the published schema
when given). A skipped reader has `ok` false and `skipped` saying why; it is
not a failure.

`ok`: with `--expected`, the reader read as many rows as expected and every
row matches a record; without it, the read succeeded.

The published schema (`<lake>/_schema/<dataset>.arrow`, an Arrow IPC stream
holding only a schema: data columns, then the Hive partition columns) drives
the reconstruction through field metadata, nested struct fields included:
  tributary.source      the record's JSON key (default: the column name);
  tributary.variant_of  the base column (same level) this variant belongs to:
                        a value of another kind than the base column's lands
                        in a variant (`amount__float64`, `meta__json`); a
                        `__json` variant (and any column with
                        `tributary.json` = "true") holds the value's JSON text;
  tributary.partition   "true" on Hive partition columns (not in records);
  tributary.lineage     "true" on lineage columns (`_tributary_*`, not in
                        records).
A record field is its base column's value when not null, else the first
non-null of its variants. Without a schema every column is its own field;
partition columns (from the folder names) and `_tributary_*` are left out.

Equivalence: a key absent, null, {}, [] and a struct of nulls are the same
(dropped on both sides); integers compare exactly (a float equals an integer
only when it is that exact integer); a float equals a source number that
parses to that float; a decimal equals the source number's text exactly;
timestamps and dates equal a source text that parses to the same instant
(a source value that does not parse is not compared, and a note says so).
"""

import argparse
import datetime
import decimal
import json
import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa

READERS = ("spark_merge", "spark_schema", "duckdb", "duckdb_union", "pyarrow")
SPARK_READERS = ("spark_merge", "spark_schema")
MAX_MISMATCHES = 5
MAX_NOTES = 5
# Rows left unmatched by the canonical pass above which the pairwise pass is
# skipped (it is quadratic).
MAX_PAIRWISE = 2000
ERROR_LINES = 4
ERROR_CHARS = 800
LINEAGE_PREFIX = "_tributary_"

# Spark's own logging at ERROR only, on stderr: the JVM's defaults print
# INFO lines at startup.
LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


# --- the published schema ---------------------------------------------------


def load_arrow_schema(path):
    """The schema of an Arrow IPC stream that holds only a schema."""
    with open(path, "rb") as f:
        return pa.ipc.open_stream(f).schema


def load_glue_columns(path):
    """`[(name, hive_type)]`: data columns then partition keys of a Glue table.

    Accepts `aws glue get-table` output (`{"Table": {...}}`), a `TableInput`
    or `Table` object (`StorageDescriptor.Columns`, `PartitionKeys`), or a
    plain list of `{"Name", "Type"}`.
    """
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, dict):
        doc = doc.get("Table") or doc.get("TableInput") or doc
        columns = doc.get("StorageDescriptor", {}).get("Columns", []) + doc.get("PartitionKeys", [])
    else:
        columns = doc
    return [(c["Name"], c["Type"]) for c in columns]


def quote_name(name):
    """A Spark SQL identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def spark_type(t):
    """The Spark SQL type of an Arrow type (raises ValueError when none fits)."""
    simple = [
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_int8, "TINYINT"),
        (pa.types.is_int16, "SMALLINT"),
        (pa.types.is_int32, "INT"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_uint8, "SMALLINT"),
        (pa.types.is_uint16, "INT"),
        (pa.types.is_uint32, "BIGINT"),
        (pa.types.is_uint64, "DECIMAL(20,0)"),
        (pa.types.is_float16, "FLOAT"),
        (pa.types.is_float32, "FLOAT"),
        (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_string, "STRING"),
        (pa.types.is_large_string, "STRING"),
        (pa.types.is_string_view, "STRING"),
        (pa.types.is_binary, "BINARY"),
        (pa.types.is_large_binary, "BINARY"),
        (pa.types.is_fixed_size_binary, "BINARY"),
        (pa.types.is_date, "DATE"),
        # Persist writes an always-null field as a nullable string column;
        # Spark cannot read a VOID column from Parquet.
        (pa.types.is_null, "STRING"),
    ]
    for test, name in simple:
        if test(t):
            return name
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz else "TIMESTAMP_NTZ"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"ARRAY<{spark_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "STRUCT<" + ", ".join(f"{quote_name(f.name)}: {spark_type(f.type)}" for f in t) + ">"
    if pa.types.is_map(t):
        return f"MAP<{spark_type(t.key_type)}, {spark_type(t.item_type)}>"
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    raise ValueError(f"no Spark type for Arrow type {t}")


def spark_ddl(schema=None, glue=None):
    """The Spark DDL string of the published schema: Glue columns when given,
    else the Arrow schema's fields; None without either."""
    if glue:
        return ", ".join(f"{quote_name(name)} {kind}" for name, kind in glue)
    if schema is not None:
        return ", ".join(f"{quote_name(f.name)} {spark_type(f.type)}" for f in schema)
    return None


# --- the dataset's layout ---------------------------------------------------


def partition_names(dataset_dir):
    """Names of the Hive partition keys (`key=value` folders) under the dataset."""
    names = []
    for root, dirs, _files in os.walk(dataset_dir):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for d in dirs:
            key = d.split("=", 1)[0]
            if "=" in d and key not in names:
                names.append(key)
    return names


# --- row -> record ----------------------------------------------------------


def meta(f, key):
    """A field's metadata value as text, or None."""
    value = (f.metadata or {}).get(key.encode())
    return value.decode() if value is not None else None


@dataclass
class Field:
    """How one record field is rebuilt from columns.

    `name` is the physical column (None for a base column the schema lacks
    but variants name), `source` the JSON key, `arrow` the Arrow type,
    `variants` the columns that hold its values of other kinds, in order.
    """

    name: str
    source: str
    arrow: object = None
    json_text: bool = False
    children: list = field(default_factory=list)
    item: object = None
    variants: list = field(default_factory=list)


def plan_field(f):
    """The Field of an Arrow field, its struct children and list items planned too."""
    planned = Field(name=f.name, source=meta(f, "tributary.source") or f.name, arrow=f.type)
    planned.json_text = meta(f, "tributary.json") == "true" or (
        f.name.endswith("__json") and meta(f, "tributary.variant_of") is not None
    )
    t = f.type
    if pa.types.is_struct(t):
        planned.children = plan_fields(list(t))
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        planned.item = plan_field(t.value_field)
    return planned


def plan_fields(fields, skip=()):
    """Base Fields of one level (columns, or a struct's fields), variants
    attached to their base; partition and lineage columns left out, and the
    names in `skip` (the partition folders' keys, lower-case)."""
    bases, variants = {}, []
    for f in fields:
        if meta(f, "tributary.partition") == "true" or meta(f, "tributary.lineage") == "true":
            continue
        if f.name.startswith(LINEAGE_PREFIX) or f.name.lower() in skip:
            continue
        if meta(f, "tributary.variant_of") is not None:
            variants.append(f)
        else:
            bases[f.name] = plan_field(f)
    for f in variants:
        base_name = meta(f, "tributary.variant_of")
        if base_name not in bases:
            source = meta(f, "tributary.source") or base_name
            bases[base_name] = Field(name=None, source=source)
        bases[base_name].variants.append(plan_field(f))
    return list(bases.values())


def lookup(row, name):
    """A column's key in a row (a dict): its exact name, or None. No case
    folding: `id` and `ID` may both be columns, and a file without `ID` must
    not lend it `id`'s values."""
    return name if name is not None and name in row else None


def decode(planned, value, notes):
    """A column value (as a reader returned it) as a JSON value."""
    if value is None:
        return None
    if planned.json_text and isinstance(value, str):
        try:
            return json.loads(value, parse_float=Decimal)
        except ValueError:
            note(notes, f"column {planned.name!r} holds text that is not JSON: {short(value, 60)}")
            return value
    if planned.children and isinstance(value, dict):
        return rebuild(value, planned.children, notes)
    if planned.item is not None and isinstance(value, (list, tuple)):
        return [decode(planned.item, v, notes) for v in value]
    return plain(value)


def rebuild(row, planned_fields, notes, skip=()):
    """The record of one row (or struct value) under a plan: each field the
    first of its base and variant columns that holds a value. Keys the plan
    does not know are kept under their own names (nothing read is hidden),
    but for `skip` (lower-case) and lineage columns."""
    record, used = {}, set()
    for planned in planned_fields:
        value = None
        for column in [planned, *planned.variants]:
            key = lookup(row, column.name)
            if key is not None:
                used.add(key)
                # A struct of nulls is no value either (DuckDB casts '{}' to one).
                if value is None and row[key] is not None:
                    value = prune(decode(column, row[key], notes))
        if record.get(planned.source) is not None:
            note(notes, f"two fields rebuild key {planned.source!r}; the first non-null is kept")
            continue
        record[planned.source] = value
    for key, value in row.items():
        if key in used or key.lower() in skip or key.startswith(LINEAGE_PREFIX):
            continue
        note(notes, f"column {key!r} is not in the published schema")
        if record.get(key) is None:
            record[key] = plain(value)
    return record


def plain(value):
    """A reader's value as a JSON-like value: structs -> dicts, lists,
    decimals of scale 0 -> int; datetimes, dates, decimals, floats kept (the
    comparison needs their type); bytes -> text."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Decimal) and value.is_finite() and value.as_tuple().exponent == 0:
        return int(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.hex()
    return value


def row_to_record(row, plan, partitions, notes):
    """One row (a dict of columns) as the source record, without its
    partition and lineage columns: with a plan (from the published schema)
    fields rebuilt from their base and variant columns, else every column
    by its name."""
    skip = {p.lower() for p in partitions}
    if plan is not None:
        return rebuild(row, plan, notes, skip)
    return {k: plain(v) for k, v in row.items() if k.lower() not in skip and not k.startswith(LINEAGE_PREFIX)}


# --- comparison -------------------------------------------------------------


def note(notes, text):
    """Adds a note once, MAX_NOTES at the most."""
    if text not in notes and len(notes) < MAX_NOTES:
        notes.append(text)


def prune(value):
    """The value with absent ≡ null ≡ {} ≡ [] ≡ struct of nulls: empties
    dropped recursively, None when nothing is left (list items keep their
    places)."""
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            v = prune(v)
            if v is not None:
                kept[k] = v
        return kept or None
    if isinstance(value, list):
        return [prune(v) for v in value] or None
    return value


def number_text(value):
    """Exact canonical text of a number: an integral value as an integer
    (9007199254740992.0 -> "9007199254740992"), else the shortest decimal
    (a float through its shortest round-trip text, a Decimal normalised)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return json.dumps(repr(value))
        value = Decimal(repr(value))
    if not value.is_finite():
        return json.dumps(str(value))
    if value == value.to_integral_value():
        try:
            return str(int(value))
        except ValueError:  # beyond Python's int-to-text digit limit
            return str(value)
    return format(value.normalize(), "f")


def dumps(value, canonical):
    """JSON text of a value with sorted keys. `canonical`: numbers as
    number_text (for matching); else as read (floats as repr: 2.0, not 2)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (float, Decimal)):
        if canonical:
            return number_text(value)
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return json.dumps(value.isoformat())
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dumps(v, canonical)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v, canonical) for v in value) + "]"
    return json.dumps(str(value))


def parse_instant(text):
    """A datetime (UTC when the text has no offset) or date from ISO text, or None."""
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def numbers_equal(actual, expected):
    """Exact for integers and decimals; a float equals an integer only when
    it is that integer, and a source decimal text when that text parses to
    the float."""
    if isinstance(actual, float):
        if isinstance(expected, int):
            return actual.is_integer() and int(actual) == expected
        return actual == float(expected)
    return Decimal(actual) == Decimal(expected)


def values_equal(actual, expected, notes):
    """Whether a value read equals the source value (both pruned)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        return all(values_equal(actual.get(k), expected.get(k), notes) for k in actual.keys() | expected.keys())
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(values_equal(a, e, notes) for a, e in zip(actual, expected))
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, (datetime.datetime, datetime.date)):
        return instants_equal(actual, expected, notes)
    numbers = (int, float, Decimal)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return numbers_equal(actual, expected)
    return type(actual) is type(expected) and actual == expected


def instants_equal(actual, expected, notes):
    """A timestamp or date read against the source value: equal when the
    source text parses to the same instant (naive timestamps are UTC) or
    day; a source that does not parse is not compared (noted)."""
    parsed = parse_instant(expected) if isinstance(expected, str) else None
    if parsed is None:
        note(notes, f"{type(actual).__name__} {actual.isoformat()} not compared with source {dumps(expected, False)}")
        return True
    if isinstance(actual, datetime.datetime):
        if actual.tzinfo is None:
            actual = actual.replace(tzinfo=datetime.timezone.utc)
        return actual == parsed
    return actual == parsed.date()


def differences(actual, expected, path, notes):
    """`[(path, read, expected)]` where a row and a record differ, deepest first."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        out = []
        for k in sorted(actual.keys() | expected.keys()):
            out += differences(actual.get(k), expected.get(k), f"{path}.{k}" if path else k, notes)
        return out
    if isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        out = []
        for i, (a, e) in enumerate(zip(actual, expected)):
            out += differences(a, e, f"{path}[{i}]", notes)
        return out
    return [] if values_equal(actual, expected, notes) else [(path or "(record)", actual, expected)]


def short(value, limit=160):
    """A value's JSON text cut to `limit` characters."""
    text = dumps(value, canonical=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def label(record):
    """How a record is named in a mismatch: its id when it has one."""
    for key in ("id", "ID", "Id"):
        if isinstance(record, dict) and key in record:
            return f"{key}={short(record[key], 40)}"
    return short(record, 60)


def compare(records, expected, notes):
    """Rows against expected records as multisets; (mismatches, missing,
    unexpected). A canonical pass pairs identical ones, a pairwise pass pairs
    those equal under the lenient rules (float text, timestamps)."""
    rows = [prune(r) or {} for r in records]
    wanted = [prune(e) or {} for e in expected]
    by_text = defaultdict(list)
    for j, e in enumerate(wanted):
        by_text[dumps(e, canonical=True)].append(j)
    left_rows = []
    for i, r in enumerate(rows):
        matches = by_text.get(dumps(r, canonical=True))
        if matches:
            matches.pop()
        else:
            left_rows.append(i)
    left_wanted = sorted(j for js in by_text.values() for j in js)
    if len(left_rows) * len(left_wanted) <= MAX_PAIRWISE * MAX_PAIRWISE:
        for i in list(left_rows):
            for j in left_wanted:
                if values_equal(rows[i], wanted[j], notes):
                    left_rows.remove(i)
                    left_wanted.remove(j)
                    break
    else:
        note(notes, f"{len(left_rows)} rows left after the exact pass: lenient pairing skipped")
    mismatches = []
    if len(rows) != len(wanted):
        mismatches.append(f"read {len(rows)} rows, expected {len(wanted)}")
    free = list(left_rows)
    for j in left_wanted:
        if len(mismatches) >= MAX_MISMATCHES:
            break
        candidates = [(len(differences(rows[i], wanted[j], "", [])), i) for i in free]
        if not candidates:
            mismatches.append(f"record {label(wanted[j])} not read: {short(wanted[j])}")
            continue
        _, i = min(candidates)
        free.remove(i)
        diffs = differences(rows[i], wanted[j], "", [])
        text = "; ".join(f"{p}: read {short(a, 60)}, expected {short(e, 60)}" for p, a, e in diffs[:4])
        more = f" (+{len(diffs) - 4} more)" if len(diffs) > 4 else ""
        mismatches.append(f"record {label(wanted[j])}: {text}{more}")
    for i in free[: max(0, MAX_MISMATCHES - len(mismatches))]:
        mismatches.append(f"unexpected row {short(rows[i])}")
    return mismatches, len(left_wanted), len(left_rows)


# --- the readers --------------------------------------------------------------


@dataclass
class Context:
    """What every reader gets: the dataset, the published schema (Arrow
    and/or Glue), the reconstruction plan and the partition names."""

    dataset: str
    schema: object
    glue: list
    plan: list
    partitions: list
    work_dir: str
    spark: object = None
    spark_error: str = None
    spark_startup_seconds: float = None


def start_spark(ctx):
    """Starts the process's one Spark session (local[1], small, quiet) on first use."""
    if ctx.spark is not None or ctx.spark_error is not None:
        return
    started = time.monotonic()
    try:
        from pyspark.sql import SparkSession

        log4j = os.path.join(ctx.work_dir, "log4j2.properties")
        with open(log4j, "w", encoding="utf-8") as f:
            f.write(LOG4J2)
        # C1 only and the serial GC: the JVM starts faster on a small machine.
        java_options = f"-Dlog4j2.configurationFile=file:{log4j} -Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        ctx.spark = (
            SparkSession.builder.master("local[1]")
            .appName("tributary-readers")
            .config("spark.driver.memory", "512m")
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.default.parallelism", "1")
            .config("spark.sql.adaptive.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.local.dir", ctx.work_dir)
            .config("spark.sql.warehouse.dir", os.path.join(ctx.work_dir, "warehouse"))
            .getOrCreate()
        )
        ctx.spark.sparkContext.setLogLevel("ERROR")
    except Exception as exc:  # no Java, no pyspark: the Spark readers say so
        ctx.spark_error = "cannot start Spark: " + short_error(exc)
    ctx.spark_startup_seconds = round(time.monotonic() - started, 2)
    print(f"readers.py: Spark session started in {ctx.spark_startup_seconds} s", file=sys.stderr)


def spark_rows(frame):
    """(columns, rows as dicts) of a Spark DataFrame."""
    columns = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    return columns, [row.asDict(recursive=True) for row in frame.collect()]


def read_spark_merge(ctx):
    """Spark with mergeSchema: every file's schema merged, Hive partitions discovered."""
    return spark_rows(ctx.spark.read.option("mergeSchema", "true").parquet(ctx.dataset))


def read_spark_schema(ctx):
    """Spark with the published schema as a DDL string (Glue columns preferred)."""
    return spark_rows(ctx.spark.read.schema(spark_ddl(ctx.schema, ctx.glue)).parquet(ctx.dataset))


def duckdb_rows(ctx, union_by_name):
    """(columns, rows as dicts) of DuckDB's read_parquet over the dataset."""
    import duckdb

    glob = os.path.join(ctx.dataset, "**", "*.parquet").replace("'", "''")
    options = "hive_partitioning = true" + (", union_by_name = true" if union_by_name else "")
    connection = duckdb.connect()
    # A query slower than 2 s would print a progress bar on stdout (the JSON).
    connection.execute("SET enable_progress_bar = false")
    connection.execute("SET TimeZone = 'UTC'")
    relation = connection.sql(f"SELECT * FROM read_parquet('{glob}', {options})")
    names = relation.columns
    columns = dict(zip(names, (str(t) for t in relation.types)))
    return columns, [dict(zip(names, row)) for row in relation.fetchall()]


def read_duckdb(ctx):
    """DuckDB read_parquet with Hive partitioning, without union_by_name."""
    return duckdb_rows(ctx, union_by_name=False)


def read_duckdb_union(ctx):
    """DuckDB read_parquet with Hive partitioning and union_by_name."""
    return duckdb_rows(ctx, union_by_name=True)


def read_pyarrow(ctx):
    """pyarrow.dataset with Hive partitioning and the published schema (if any)."""
    import pyarrow.dataset as ds

    options = {"schema": ctx.schema} if ctx.schema is not None else {}
    dataset = ds.dataset(ctx.dataset, format="parquet", partitioning="hive", **options)
    table = dataset.to_table()
    return {f.name: str(f.type) for f in table.schema}, table.to_pylist()


READ = {
    "spark_merge": read_spark_merge,
    "spark_schema": read_spark_schema,
    "duckdb": read_duckdb,
    "duckdb_union": read_duckdb_union,
    "pyarrow": read_pyarrow,
}


def short_error(exc):
    """The first lines of an exception's message, cut to ERROR_CHARS; for a
    Java exception from Spark, the first line of each in its cause chain
    (the root cause says what failed); DuckDB's stack traces left out."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        chain = []
        while java is not None and len(chain) < 6:
            message = str(java.getMessage() or "").strip().splitlines()
            chain.append(f"{java.getClass().getSimpleName()}: {message[0] if message else ''}")
            java = java.getCause()
        text = " <- caused by ".join(chain)
    else:
        lines = []
        for line in f"{type(exc).__name__}: {exc}".splitlines():
            if line.strip() == "Stack Trace:":
                break
            if line.strip():
                lines.append(line)
        text = "\n".join(lines[:ERROR_LINES])
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def run_reader(name, ctx, expected):
    """One reader's report; its failure is caught and reported, not raised."""
    report = {"rows": None, "ok": False, "error": None, "skipped": None, "mismatches": [], "missing": 0,
              "unexpected": 0, "notes": [], "columns": {}}
    if name == "spark_schema" and ctx.schema is None and not ctx.glue:
        report["skipped"] = "no published schema"
        return report
    if name in SPARK_READERS:
        start_spark(ctx)
        report["startup_seconds"] = ctx.spark_startup_seconds
        if ctx.spark_error:
            report["error"] = ctx.spark_error
            return report
    started = time.monotonic()
    try:
        columns, rows = READ[name](ctx)
        report["columns"] = columns
        report["rows"] = len(rows)
        records = [row_to_record(row, ctx.plan, ctx.partitions, report["notes"]) for row in rows]
        if expected is None:
            report["ok"] = True
        else:
            mismatches, missing, unexpected = compare(records, expected, report["notes"])
            report.update(mismatches=mismatches, missing=missing, unexpected=unexpected)
            report["ok"] = len(rows) == len(expected) and not mismatches
    except Exception as exc:  # one reader's failure must not hide the others
        report["error"] = short_error(exc)
    report["seconds"] = round(time.monotonic() - started, 2)
    return report


def load_expected(path):
    """Records of a JSONL file; floats as Decimal (their exact text), ints as int."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def parse_args(argv):
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="the dataset folder, <lake>/<dataset>")
    parser.add_argument("--schema", help="the published Arrow schema (IPC stream), <lake>/_schema/<dataset>.arrow")
    parser.add_argument("--glue", help="a Glue table (get-table output) or its columns, as JSON")
    parser.add_argument("--expected", help="the expected records, one JSON object a line")
    parser.add_argument("--readers", default=",".join(READERS), help=f"comma-separated, of {','.join(READERS)}")
    args = parser.parse_args(argv)
    args.readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    unknown = [r for r in args.readers if r not in READ]
    if unknown:
        parser.error(f"unknown readers {unknown}; known: {', '.join(READERS)}")
    return args


def main(argv=None):
    """Runs the readers and prints the report; exit code 0 when it is printed."""
    # The JVM inherits fd 1: point it at stderr, keep stdout for the report.
    report_fd = os.dup(1)
    os.dup2(2, 1)
    os.environ["TZ"] = "UTC"
    time.tzset()
    decimal.getcontext().prec = 100
    args = parse_args(argv)
    schema = load_arrow_schema(args.schema) if args.schema else None
    expected = load_expected(args.expected) if args.expected else None
    with tempfile.TemporaryDirectory(prefix="tributary-readers-") as work_dir:
        partitions = partition_names(args.dataset) + [
            f.name for f in schema or [] if meta(f, "tributary.partition") == "true"
        ]
        skip = {p.lower() for p in partitions}
        ctx = Context(
            dataset=os.path.abspath(args.dataset),
            schema=schema,
            glue=load_glue_columns(args.glue) if args.glue else None,
            plan=plan_fields(list(schema), skip) if schema is not None else None,
            partitions=partitions,
            work_dir=work_dir,
        )
        report = {name: run_reader(name, ctx, expected) for name in args.readers}
        if ctx.spark is not None:
            ctx.spark.stop()
    os.write(report_fd, (json.dumps(report, indent=1) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
