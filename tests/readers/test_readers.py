"""Checks of readers.py itself: the comparison rules, and the
reconstruction from the published schema's metadata on a dataset written
here with pyarrow in the shape the "one dataset, one table" Persist will
write (variant columns, `__json`, normalised names, partition and lineage
columns, a variant inside a struct).

    .venv/bin/python -m unittest discover -s tests/readers -v

`TRIBUTARY_READERS=pyarrow,duckdb_union` limits the readers of the dataset
test (the Spark ones take ~15 s on a small machine).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readers  # noqa: E402

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "readers.py")


def compare(rows, expected_lines):
    """readers.compare on rows and JSONL-parsed expected records."""
    expected = [json.loads(line, parse_float=Decimal) for line in expected_lines]
    return readers.compare(rows, expected, [])


class Comparison(unittest.TestCase):
    """The equivalence rules."""

    def test_a_big_integer_never_equals_its_rounded_float(self):
        mismatches, missing, unexpected = compare([{"big": 9007199254740992.0}], ['{"big": 9007199254740993}'])
        self.assertEqual((missing, unexpected), (1, 1))
        self.assertIn("big: read 9007199254740992.0, expected 9007199254740993", mismatches[0])
        self.assertEqual(compare([{"big": 9007199254740993}], ['{"big": 9007199254740993}'])[0], [])

    def test_an_integral_float_equals_its_integer_and_a_float_its_text(self):
        self.assertEqual(compare([{"a": 7.0, "b": 0.1, "c": 12.5}], ['{"a": 7, "b": 0.1, "c": 12.50}'])[0], [])
        self.assertNotEqual(compare([{"a": 7.5}], ['{"a": 7}'])[0], [])

    def test_a_decimal_equals_the_source_text_exactly(self):
        self.assertEqual(compare([{"a": Decimal("12.30")}], ['{"a": 12.3}'])[0], [])
        self.assertNotEqual(compare([{"a": Decimal("0.1")}], ['{"a": 0.10000000000000001}'])[0], [])

    def test_a_float_equals_a_long_source_text_that_parses_to_it(self):
        self.assertEqual(compare([{"a": 0.1}], ['{"a": 0.10000000000000001}'])[0], [])

    def test_absent_null_empty_and_struct_of_nulls_are_the_same(self):
        rows = [{"a": None, "b": {}, "c": [], "d": {"x": None, "y": {"z": None}}}]
        self.assertEqual(compare(rows, ['{}'])[0], [])
        self.assertEqual(compare([{}], ['{"a": null, "b": {}, "c": [], "d": {"x": null}}'])[0], [])

    def test_booleans_are_not_numbers_and_strings_are_not_numbers(self):
        self.assertNotEqual(compare([{"a": 1}], ['{"a": true}'])[0], [])
        self.assertNotEqual(compare([{"a": "42"}], ['{"a": 42}'])[0], [])

    def test_rows_match_as_a_multiset(self):
        rows = [{"id": 1}, {"id": 1}, {"id": 2}]
        mismatches, missing, unexpected = compare(rows, ['{"id": 1}', '{"id": 2}', '{"id": 2}'])
        self.assertEqual((missing, unexpected), (1, 1))
        self.assertEqual(mismatches[0], "record id=2: id: read 1, expected 2")

    def test_timestamps_equal_the_same_instant_and_unparsable_sources_are_noted(self):
        import datetime

        read = datetime.datetime(2026, 11, 2, 10, 0)
        self.assertEqual(compare([{"t": read}], ['{"t": "2026-11-02T10:00:00Z"}'])[0], [])
        self.assertNotEqual(compare([{"t": read}], ['{"t": "2026-11-02T11:00:00Z"}'])[0], [])
        notes = []
        readers.compare([{"t": read}], [{"t": "yesterday"}], notes)
        self.assertIn("not compared", notes[0])


def field(name, kind, **metadata):
    """An Arrow field with tributary metadata (keyword `variant_of=`, ...)."""
    return pa.field(name, kind, metadata={f"tributary.{k}": v for k, v in metadata.items()} or None)


SCORE = pa.struct([field("score", pa.int64()), field("score__float64", pa.float64(), variant_of="score")])
META = pa.struct([field("source", pa.string()), field("score_info", SCORE, source="scoreInfo")])
PUBLISHED = pa.schema(
    [
        field("id", pa.int64()),
        field("id_2", pa.string(), source="ID"),
        field("user_id", pa.int64(), source="userId"),
        field("amount", pa.int64()),
        field("amount__float64", pa.float64(), variant_of="amount"),
        field("amount__string", pa.string(), variant_of="amount"),
        field("meta", META),
        field("meta__json", pa.string(), variant_of="meta"),
        field("tags", pa.list_(pa.string())),
        field("price", pa.decimal128(12, 2)),
        field("_tributary_run_id", pa.string(), lineage="true"),
        field("dt", pa.string(), partition="true"),
    ]
)

# Each run's file holds the columns its records needed, named and typed as
# the published schema says.
RUNS = {
    "2026-11-01": (
        [
            {"id": 1, "userId": 10, "amount": 5, "meta": {"source": "web", "scoreInfo": {"score": 3}}, "price": 1.5},
            {"id": 2, "userId": None, "amount": None, "meta": None, "tags": [], "price": 2},
        ],
        {
            "id": [1, 2],
            "user_id": [10, None],
            "amount": [5, None],
            "meta": [{"source": "web", "score_info": {"score": 3, "score__float64": None}}, None],
            "tags": [None, []],
            "price": [Decimal("1.50"), Decimal("2.00")],
            "_tributary_run_id": ["r1", "r1"],
        },
    ),
    "2026-11-02": (
        [
            {"id": 3, "ID": "X-3", "amount": 2.5, "meta": {"source": "app", "scoreInfo": {"score": 4.5}}},
            {"id": 4, "ID": "X-4", "amount": "n/a", "meta": "gone", "tags": ["a"]},
            {"id": 9007199254740993, "amount": 9007199254740993, "meta": {"source": [1, {"x": 0.1}]}},
        ],
        {
            "id": [3, 4, 9007199254740993],
            "id_2": ["X-3", "X-4", None],
            "amount": [None, None, 9007199254740993],
            "amount__float64": [2.5, None, None],
            "amount__string": [None, "n/a", None],
            "meta": [{"source": "app", "score_info": {"score": None, "score__float64": 4.5}}, None, None],
            "meta__json": [None, '"gone"', '{"source": [1, {"x": 0.1}]}'],
            "tags": [None, ["a"], None],
            "_tributary_run_id": ["r2", "r2", "r2"],
        },
    ),
}


def write_contract_dataset(lake):
    """Writes `<lake>/contract/dt=.../*.parquet` and `<lake>/_schema/contract.arrow`;
    returns the expected records."""
    expected = []
    for dt, (records, columns) in RUNS.items():
        folder = os.path.join(lake, "contract", f"dt={dt}")
        os.makedirs(folder)
        schema = pa.schema([PUBLISHED.field(name) for name in columns])
        pq.write_table(pa.table(columns, schema=schema), os.path.join(folder, f"contract-{dt}-00000.parquet"))
        expected += records
    os.makedirs(os.path.join(lake, "_schema"))
    with open(os.path.join(lake, "_schema", "contract.arrow"), "wb") as f:
        with pa.ipc.new_stream(f, PUBLISHED):
            pass
    return expected


class ContractDataset(unittest.TestCase):
    """The harness on a dataset with the contract's metadata."""

    def test_every_reader_rebuilds_the_records_from_the_published_schema(self):
        with tempfile.TemporaryDirectory() as lake:
            expected = write_contract_dataset(lake)
            lines = os.path.join(lake, "expected.jsonl")
            with open(lines, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in expected)
            command = [sys.executable, HARNESS, "--dataset", os.path.join(lake, "contract"),
                       "--schema", os.path.join(lake, "_schema", "contract.arrow"), "--expected", lines]
            if os.environ.get("TRIBUTARY_READERS"):
                command += ["--readers", os.environ["TRIBUTARY_READERS"]]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            report = json.loads(done.stdout)
            print(json.dumps(report, indent=1), file=sys.stderr)
            for name in ("pyarrow", "duckdb_union", "spark_schema"):
                if name in report:
                    self.assertTrue(report[name]["ok"], f"{name}: {report[name]}")
                    self.assertEqual(report[name]["rows"], 5)


if __name__ == "__main__":
    unittest.main()
