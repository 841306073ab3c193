"""The benchmark's exactness check: does each tool's Parquet file hold the page it was given?

    python bench/check.py PAGE.ndjson OUT.parquet [OUT.parquet ...]

Reads the page once, then each Parquet file with pyarrow, and prints one JSON line per file:

    {"path": ..., "rows": N, "records": M, "sampled": S,
     "dropped": [...], "no_column": [...], "changed": [...], "json_text": [...],
     "examples": {"field": "record i: sent ... , read ..."}, "error": null}

- rows: the file's rows; records: the page's. A file with other than M rows is not exact.
- dropped: top-level fields of the page (any record) that have no column, though some record
  gives them a value other than null, {} or [].
- no_column: fields without a column whose every value in the page is null, {} or [] (nothing
  but the emptiness is lost; Persist makes no column until a value decides its type).
- changed: fields where a sampled record's value does not read back as sent, each with what
  happened: `(text)` when a number, boolean, object, array or string came back as its JSON text
  (a peer's JSON or text column), `({}/[] as null)` when an empty object or array came back null.
- json_text: fields whose values sat in one of Persist's JSON text columns (a `<field>__json`
  variant, field metadata `tributary.variant_of`; or field metadata `tributary.json`) and parsed
  back to the value sent: counted exact, as Persist's documented column for a value of no other
  column's type (docs/persist.md, "Variant columns").
- error: the first line of the error when the file cannot be read.

The sample: every record of a page of up to 1,000 records; else about 1,000 records at a prime
stride (53 for 50k, 503 for 500k), so the messy pages' every-7th to every-31st-record values are
hit at every residue, plus the last record (where the late fields are).

How values are compared: numbers as numbers (an integer read back as an equal float, or an equal
decimal, is exact; 2^53 + 1 read back as 2^53 is not), booleans as booleans (never as 0/1), text
as text, an RFC 3339 text read back as a timestamp of the same instant (a timestamp without time
zone read as UTC), objects key by key (a key absent on one side is null), arrays item by item. A
field's value may be in its column or in one of Persist's variant columns beside it
(`<field>__string`, `__int64`, ... : field metadata `tributary.variant_of`); exactly one holds it,
the others are null. Columns named `_tributary_*` (lineage) are not page fields.
"""

import datetime
import decimal
import json
import sys

SAMPLE = 1000
EXACT, EMPTY_NULL, TEXT, CHANGED = 0, 1, 2, 3
LINEAGE_PREFIX = "_tributary_"


class Json(str):
    """A value read from a column that holds JSON text; `ours` when it is Persist's own."""

    def __new__(cls, text, ours):
        value = super().__new__(cls, text)
        value.ours = ours
        return value


class Struct(dict):
    """An object read back: each key of the page -> the values of its column and variants."""


def stride(records):
    if records <= SAMPLE:
        return 1
    candidate = max(2, records // SAMPLE)
    while any(candidate % d == 0 for d in range(2, int(candidate**0.5) + 1)):
        candidate += 1
    return candidate


def is_empty(value):
    return value is None or value == {} or value == []


def read_page(path):
    """The page's record count, its top-level fields (in first-seen order, each with whether any
    record gives it a non-empty value), and the sampled records by index."""
    with open(path, "rb") as page:
        records = sum(1 for line in page if line.strip())
    step = stride(records)
    wanted = set(range(0, records, step)) | {records - 1}
    fields, samples, index = {}, {}, 0
    with open(path, "rb") as page:
        for line in page:
            if not line.strip():
                continue
            record = json.loads(line)
            for key, value in record.items():
                fields[key] = fields.get(key, False) or not is_empty(value)
            if index in wanted:
                samples[index] = record
            index += 1
    return records, fields, samples


def key_of(field):
    """The page key a column holds: Persist's `tributary.source`, else the column's name."""
    metadata = field.metadata or {}
    source = metadata.get(b"tributary.source") or metadata.get(b"tributary.variant_of")
    return source.decode() if source else field.name


def from_arrow(value, field):
    """A pyarrow Python value, with its column's meaning: JSON text marked, structs and maps
    as Struct (variant fields grouped under their key)."""
    import pyarrow as pa

    if value is None:
        return None
    kind = field.type
    if getattr(kind, "extension_name", None) == "arrow.json":
        return Json(value, ours=False)
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and persist_json(field):
        return Json(value, ours=True)
    if pa.types.is_struct(kind):
        return grouped(((value.get(child.name), child) for child in kind), Struct())
    if pa.types.is_map(kind):
        out = Struct()
        for key, item in value:
            out.setdefault(key, []).append(from_arrow(item, kind.item_field))
        return out
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [from_arrow(item, kind.value_field) for item in value]
    return value


def persist_json(field):
    """Persist's JSON text columns: `tributary.json` in the field metadata, or a `__json` variant
    (the files carry `tributary.variant_of` on it, not `tributary.json`)."""
    metadata = field.metadata or {}
    return b"tributary.json" in metadata or (b"tributary.variant_of" in metadata and field.name.endswith("__json"))


def grouped(values_and_fields, out):
    for value, field in values_and_fields:
        out.setdefault(key_of(field), []).append(from_arrow(value, field))
    return out


def same_json(a, b):
    """JSON equality with booleans kept apart from numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return a == b


def instant(text):
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def compare(sent, read, notes):
    """How `read` (one non-null value read back) stands for `sent` (the page's value)."""
    if isinstance(read, Json):
        try:
            parsed = json.loads(read)
        except ValueError:
            return CHANGED
        if not same_json(sent, parsed):
            return CHANGED
        if read.ours:
            notes.add("json")
            return EXACT
        return TEXT
    if isinstance(sent, bool):
        return EXACT if isinstance(read, bool) and read == sent else as_text(sent, read)
    if isinstance(sent, (int, float)):
        if isinstance(read, (int, float, decimal.Decimal)) and not isinstance(read, bool):
            return EXACT if read == sent else CHANGED
        return as_text(sent, read)
    if isinstance(sent, str):
        if isinstance(read, str):
            return EXACT if read == sent else as_text(sent, read)
        if isinstance(read, datetime.datetime):
            moment = instant(sent)
            read = read if read.tzinfo else read.replace(tzinfo=datetime.timezone.utc)
            return EXACT if moment is not None and moment == read else CHANGED
        return CHANGED
    if isinstance(sent, dict):
        if isinstance(read, Struct):
            return worst(candidates(sent.get(key), read.get(key), notes) for key in set(sent) | set(read))
        return as_text(sent, read)
    if isinstance(sent, list):
        if isinstance(read, list):
            if len(read) != len(sent):
                return CHANGED
            return worst(candidates(s, [r], notes) for s, r in zip(sent, read))
        return as_text(sent, read)
    return CHANGED


def as_text(sent, read):
    """TEXT when `read` is the JSON text (or, for a string, the bare text) of `sent`."""
    if not isinstance(read, str):
        return CHANGED
    try:
        return TEXT if same_json(sent, json.loads(read)) else CHANGED
    except ValueError:
        return CHANGED


def candidates(sent, reads, notes):
    """How a key's column and its variants (`reads`; None: no column) stand for `sent`."""
    present = [read for read in (reads or []) if read is not None]
    if reads is None and sent is not None:
        return CHANGED
    if sent is None:
        return EXACT if not present else CHANGED
    if not present:
        return EMPTY_NULL if is_empty(sent) else CHANGED
    return min(compare(sent, read, notes) for read in present)


def worst(verdicts):
    return max(verdicts, default=EXACT)


def short(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check(path, page):
    import pyarrow.parquet as pq

    records, fields, samples = page
    verdict = {"path": path, "records": records, "sampled": 0, "dropped": [], "no_column": [], "changed": [],
               "json_text": [], "examples": {}, "error": None}
    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
        columns = [field for field in schema if not field.name.startswith(LINEAGE_PREFIX)]
        keys = {key_of(field) for field in columns}
        verdict["rows"] = parquet.metadata.num_rows
        for key, has_value in fields.items():
            if key not in keys:
                verdict["dropped" if has_value else "no_column"].append(key)
        kinds, notes = {}, {}
        start = 0
        for group in range(parquet.num_row_groups):
            size = parquet.metadata.row_group(group).num_rows
            local = [i - start for i in sorted(samples) if start <= i < start + size]
            if local:
                table = parquet.read_row_group(group, columns=[field.name for field in columns]).take(local)
                for offset, row in zip(local, table.to_pylist()):
                    index = start + offset
                    read = grouped(((row[field.name], field) for field in columns), Struct())
                    compare_record(index, samples[index], read, fields, kinds, notes, verdict)
            start += size
        verdict["changed"] = [describe(key, found) for key, found in kinds.items() if found - {EXACT}]
        verdict["json_text"] = sorted(key for key, found in notes.items() if "json" in found)
    except Exception as err:  # an unreadable file is a verdict, not a crash of the check
        lines = str(err).strip().splitlines() or [""]
        verdict["error"] = f"{type(err).__name__}: {lines[0]}"
    return verdict


def compare_record(index, sent, read, fields, kinds, notes, verdict):
    verdict["sampled"] += 1
    for key in fields:
        if key not in read:
            continue  # reported as dropped or no_column
        found = set()
        kind = candidates(sent.get(key), read[key], found)
        kinds.setdefault(key, set()).add(kind)
        notes.setdefault(key, set()).update(found)
        if kind != EXACT and key not in verdict["examples"]:
            shown = [value for value in read[key] if value is not None]
            verdict["examples"][key] = f"record {index}: sent {short(sent.get(key))}, read {short(shown)}"


def describe(key, found):
    labels = []
    if TEXT in found:
        labels.append("text")
    if EMPTY_NULL in found:
        labels.append("{}/[] as null")
    if CHANGED in found and labels:
        labels.append("other values changed")
    return f"{key} ({', '.join(labels)})" if labels else key


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    page = read_page(argv[1])
    for path in argv[2:]:
        print(json.dumps(check(path, page)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
