//! Persist's Parquet read back by independent readers and compared value
//! by value with the input records: clean pages and a Hive-partitioned
//! dataset in pyarrow and DuckDB (with their lineage columns), and messy
//! pages in every reader of `tests/readers/readers.py` (pyspark with
//! mergeSchema and with the published schema, DuckDB with and without
//! union_by_name, pyarrow with the published schema), each row rebuilt from
//! its base and variant columns.
//!
//! The rules checked (docs/persist.md, "Types: one table per dataset"):
//! int + float -> float64; integers beyond 2^53 beside floats, beyond i64
//! and beyond 38 digits -> exact, in variant columns when the column has
//! another type; other kinds -> variant columns (`__bool`, `__int64`,
//! `__float64`, `__string`, `__json`); null, `{}` and `[]` alone -> no
//! column; keys that only late records carry -> nullable columns; the same
//! rules inside structs and lists of structs.
//!
//! Messy pages travel as claim checks (the JSON text as sent), because an
//! inline `serde_json::Value` cannot carry an integer beyond u64 exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use adapters::local::{Broker, DirStore};
use bytes::Bytes;
use chrono::NaiveDate;
use contracts::{PageRef, Payload, PayloadFormat, PersistMessage, PersistTarget, RunId, V1};
use serde_json::{Value, json};
use tributary_core::ledger::PageReceipt;
use tributary_core::ports::ObjectStore;
use tributary_e2e::readers::read_with_every_reader_lines;

fn python() -> PathBuf {
    std::env::var_os("TRIBUTARY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"))
}

/// Reads a Parquet folder (Hive partitions as columns) with pyarrow and with
/// DuckDB; prints `{"pyarrow": {"schema", "rows"}, "duckdb": {...}}`, rows
/// sorted by `id`. Decimals, dates and times print as their text.
const READERS: &str = r#"
import json, sys
import duckdb
import pyarrow.dataset as ds

root = sys.argv[1]
table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
arrow = {"schema": {f.name: str(f.type) for f in table.schema}, "rows": table.to_pylist()}
glob = (root + "/**/*.parquet").replace("'", "''")
relation = duckdb.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true, union_by_name = true)")
columns = relation.columns
duck = {
    "schema": dict(zip(columns, (str(t) for t in relation.types))),
    "rows": [dict(zip(columns, row)) for row in relation.fetchall()],
}
for reader in (arrow, duck):
    reader["rows"].sort(key=lambda row: row["id"])
print(json.dumps({"pyarrow": arrow, "duckdb": duck}, default=str))
"#;

/// One reader's view of a dataset.
#[derive(Debug)]
struct Table {
    reader: &'static str,
    schema: BTreeMap<String, String>,
    rows: Vec<serde_json::Map<String, Value>>,
}

/// The dataset folder as pyarrow and DuckDB read it.
fn read_back(dir: &Path) -> [Table; 2] {
    let python = python();
    let output = Command::new(&python).arg("-c").arg(READERS).arg(dir).output().unwrap_or_else(|err| {
        panic!(
            "cannot run {} ({err}): run `scripts/python-tools.sh install` or set TRIBUTARY_PYTHON to a python with \
             pyarrow and duckdb",
            python.display()
        )
    });
    assert!(
        output.status.success(),
        "the readers failed (install pyarrow and duckdb with `scripts/python-tools.sh install`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Value = serde_json::from_slice(&output.stdout).expect("the readers print JSON");
    ["pyarrow", "duckdb"].map(|reader| {
        let schema = read[reader]["schema"]
            .as_object()
            .expect("schema")
            .iter()
            .map(|(name, kind)| (name.clone(), kind.as_str().unwrap_or_default().to_string()))
            .collect();
        let rows = read[reader]["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|row| row.as_object().expect("a row is an object").clone())
            .collect();
        Table { reader, schema, rows }
    })
}

const RUN_DATE: (i32, u32, u32) = (2026, 11, 29);

fn date((y, m, d): (i32, u32, u32)) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).expect("a valid date")
}

/// How a page reaches Persist.
enum Delivery {
    /// Records inside the message.
    Inline,
    /// A JSON array stored in the lake, the message carrying its key.
    ClaimCheck,
}

/// Persists one page of `records` (JSON text each) to `dataset` in `lake`.
async fn persist(
    lake: &Path,
    dataset: &str,
    run_date: NaiveDate,
    page: u32,
    records: &[String],
    delivery: Delivery,
) -> PageReceipt {
    let store = DirStore::new(lake);
    let run_id = RunId::new(format!("{}T060000Z", run_date.format("%Y%m%d"))).expect("run id");
    let array = format!("[{}]", records.join(",\n"));
    let payload = match delivery {
        Delivery::Inline => Payload::Inline {
            records: contracts::RawRecords::from_text(array.clone()).expect("inline records are a JSON array"),
        },
        Delivery::ClaimCheck => {
            let key = tributary_core::keys::claim_key(dataset, &run_id, page);
            store.put(&key, Bytes::from(array)).await.expect("store the claim check");
            Payload::Object { key, format: PayloadFormat::default() }
        }
    };
    let message = PersistMessage {
        version: V1,
        pipeline: dataset.to_string(),
        run_id,
        run_date,
        page: PageRef { index: page, count: 0 },
        target: PersistTarget::new(dataset),
        payload,
        fetched_at: None,
    };
    let config = persist::PersistConfig::default();
    let deps = persist::Deps {
        store: &store,
        queue: &Broker::new(),
        run_events: None,
        catalog: None,
        tables: None,
        config: &config,
    };
    let receipt = persist::persist_page(message, deps).await.unwrap_or_else(|err| panic!("{dataset}: {err}"));
    assert_eq!(receipt.records_quarantined, 0, "{dataset}: nothing is quarantined: {receipt:?}");
    assert_eq!(receipt.records_persisted, records.len() as u64, "{dataset}: every record is persisted");
    receipt
}

/// Column types, as each reader names them.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Int64,
    Float64,
    String,
    /// A list of anything.
    List,
    /// A struct of anything.
    Struct,
    /// A timestamp adjusted to UTC.
    Timestamp,
}

impl Kind {
    fn matches(self, reader: &str, found: &str) -> bool {
        let string = |t: &str| matches!(t, "string" | "large_string" | "string_view" | "VARCHAR");
        match (self, reader) {
            (Kind::Int64, _) => matches!(found, "int64" | "BIGINT"),
            (Kind::Float64, _) => matches!(found, "double" | "DOUBLE"),
            (Kind::String, _) => string(found),
            (Kind::List, "duckdb") => found.ends_with("[]"),
            (Kind::List, _) => ["list<", "large_list<", "list_view<"].iter().any(|p| found.starts_with(p)),
            (Kind::Struct, _) => found.starts_with("struct<") || found.starts_with("STRUCT("),
            (Kind::Timestamp, _) => found.starts_with("timestamp[us, tz=") || found == "TIMESTAMP WITH TIME ZONE",
        }
    }
}

/// A clean customer record, as a vendor would send it.
fn customer(i: u32) -> Value {
    let cities = ["São Paulo", "Lisbon", "London"];
    json!({
        "id": i,
        "name": format!("Customer \"{i}\" Müller"),
        "email": format!("customer{i}@example.com"),
        "address": {"street": format!("{} Main St", i + 1), "city": cities[i as usize % 3], "zip": format!("{:05}", i * 7), "country": "BR"},
        "tags": (0..=(i % 3)).map(|t| format!("tag{t}")).collect::<Vec<_>>(),
        "created_at": format!("2026-11-{:02}T06:{:02}:00Z", 1 + i % 28, i % 60),
        "score": f64::from(i) * 1.25 + 0.5,
        "active": !i.is_multiple_of(4),
    })
}

/// Checks that every reader read `records` back exactly, plus `dt`.
fn assert_rows_equal(tables: &[Table; 2], records: &[Value], dt_of: impl Fn(usize) -> String) {
    for table in tables {
        assert_eq!(table.rows.len(), records.len(), "{}: rows", table.reader);
        for (i, (row, record)) in table.rows.iter().zip(records).enumerate() {
            let mut row = row.clone();
            let run_id = row.remove("_tributary_run_id");
            assert!(run_id.as_ref().is_some_and(Value::is_string), "{}: row {i}: the run id", table.reader);
            assert!(row.remove("_tributary_page").is_some(), "{}: row {i}: the page", table.reader);
            assert!(row.remove("_tributary_loaded_at").is_some(), "{}: row {i}: the load time", table.reader);
            assert_eq!(row.remove("dt"), Some(Value::String(dt_of(i))), "{}: row {i}: dt", table.reader);
            // `created_at`, sent as RFC 3339 UTC text, is a timestamp
            // column: the reader's instant, written back as RFC 3339 with
            // `Z`, must be the text sent.
            if let Some(Value::String(read)) = row.get_mut("created_at") {
                let instant = chrono::DateTime::parse_from_rfc3339(&read.replacen(' ', "T", 1)).unwrap_or_else(|err| {
                    panic!("{}: row {i}: created_at {read:?} is not a timestamp: {err}", table.reader)
                });
                *read = instant.to_utc().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            }
            assert_eq!(&Value::Object(row), record, "{}: row {i}", table.reader);
        }
    }
}

async fn clean_page_reads_back(delivery: Delivery, dataset: &str) {
    let records: Vec<Value> = (0..300).map(customer).collect();
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    let lake = tempfile::tempdir().expect("tempdir");
    persist(lake.path(), dataset, date(RUN_DATE), 0, &lines, delivery).await;
    let tables = read_back(&lake.path().join(dataset));
    for table in &tables {
        for (column, kind) in [
            ("id", Kind::Int64),
            ("name", Kind::String),
            ("score", Kind::Float64),
            ("tags", Kind::List),
            ("address", Kind::Struct),
            ("created_at", Kind::Timestamp),
        ] {
            let found = &table.schema[column];
            assert!(kind.matches(table.reader, found), "{}: {column} is {found}", table.reader);
        }
    }
    assert_rows_equal(&tables, &records, |_| date(RUN_DATE).to_string());
}

#[tokio::test]
async fn clean_inline_page_reads_back_identically_in_pyarrow_and_duckdb() {
    clean_page_reads_back(Delivery::Inline, "clean_inline").await;
}

#[tokio::test]
async fn clean_claim_check_page_reads_back_identically_in_pyarrow_and_duckdb() {
    clean_page_reads_back(Delivery::ClaimCheck, "clean_claim").await;
}

#[tokio::test]
async fn hive_partitioned_dataset_reads_as_one_table_with_its_dt_column_in_both_readers() {
    let lake = tempfile::tempdir().expect("tempdir");
    let days = [(2026, 11, 27), (2026, 11, 28), (2026, 11, 29)];
    let mut records = Vec::new();
    let mut dt = Vec::new();
    for (d, day) in days.into_iter().enumerate() {
        for page in 0..2u32 {
            let first = u32::try_from(d).expect("small") * 100 + page * 50;
            let page_records: Vec<Value> = (first..first + 50).map(customer).collect();
            let lines: Vec<String> = page_records.iter().map(Value::to_string).collect();
            persist(lake.path(), "hive", date(day), page, &lines, Delivery::Inline).await;
            records.extend(page_records);
            dt.extend(std::iter::repeat_n(date(day).to_string(), 50));
        }
    }
    let folders: Vec<String> = std::fs::read_dir(lake.path().join("hive"))
        .expect("dataset folder")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(folders, ["dt=2026-11-27", "dt=2026-11-28", "dt=2026-11-29"]);
    let tables = read_back(&lake.path().join("hive"));
    for table in &tables {
        let kind = &table.schema["dt"];
        // DuckDB reads a dt=YYYY-MM-DD folder as a DATE, pyarrow as a string: both print the date.
        assert!(
            matches!(kind.as_str(), "string" | "DATE" | "VARCHAR" | "date32[day]"),
            "{}: dt is {kind}",
            table.reader
        );
    }
    assert_rows_equal(&tables, &records, |i| dt[i].clone());
}

/// One field of a messy page: the JSON text of its value in record 0, 1, …
/// (`None`: the record lacks the key). Records past the end of `cells`
/// lack the key too.
struct Field {
    name: &'static str,
    cells: Vec<Option<&'static str>>,
}

fn field(name: &'static str, cells: &[&'static str]) -> Field {
    Field { name, cells: cells.iter().copied().map(Some).collect() }
}

/// The records of a page holding `fields`, with `id` = the record's index.
fn records_of(fields: &[Field]) -> Vec<String> {
    let rows = fields.iter().map(|f| f.cells.len()).max().unwrap_or(0);
    (0..rows)
        .map(|i| {
            let mut text = format!("{{\"id\":{i}");
            for f in fields {
                if let Some(Some(value)) = f.cells.get(i) {
                    text.push_str(&format!(",\"{}\":{value}", f.name));
                }
            }
            text.push('}');
            text
        })
        .collect()
}

/// Persists `records` as one page of `dataset` by claim check; every reader
/// (pyspark with mergeSchema and with the published schema, DuckDB with and
/// without union_by_name, pyarrow with the published schema) must read
/// every record back with every value as sent. Returns the published Arrow
/// schema's `(name, type)` pairs.
async fn persist_and_read_whole(dataset: &str, records: &[String]) -> Vec<(String, String)> {
    let lake = tempfile::tempdir().expect("tempdir");
    persist(lake.path(), dataset, date(RUN_DATE), 0, records, Delivery::ClaimCheck).await;
    let published = lake.path().join(format!("_schema/{dataset}.arrow"));
    let report = read_with_every_reader_lines(&lake.path().join(dataset), Some(&published), records);
    report.assert_all_read(records.len() as u64);
    let schema = lake_format::codec::decode_arrow_schema(&std::fs::read(&published).expect("published schema"))
        .expect("an Arrow IPC schema");
    schema.fields().iter().map(|f| (f.name().clone(), f.data_type().to_string())).collect()
}

/// int + float -> float64.
fn int_and_float() -> Vec<Field> {
    vec![field("amount", &["1", "2.5", "3", "-4.25", "0", "null"])]
}

/// Mixed scalar kinds -> the majority's column (numbers) and variant columns.
fn mixed_scalars() -> Vec<Field> {
    vec![field("code", &["7", "\"A7\"", "true", "2.5", "false", "null", "-12345678901234", "\"\""])]
}

/// A scalar beside lists -> a list column and the scalar's variant.
fn scalar_and_list() -> Vec<Field> {
    vec![
        field("tags", &["\"vip\"", "[\"a\",\"b\"]", "[]", "\"x\"", "null"]),
        field("scores", &["1", "[2,3]", "[]", "4", "null", "[5,\"six\"]"]),
    ]
}

/// Always null (or absent) -> no column.
fn always_null() -> Vec<Field> {
    vec![Field { name: "legacy", cells: vec![Some("null"), Some("null"), None, Some("null"), Some("null")] }]
}

/// `{}` and `[]` alone -> no column; beside values -> empty structs, lists.
fn empty_objects_and_lists() -> Vec<Field> {
    vec![
        field("prefs", &["{}", "{}", "{}"]),
        field("aliases", &["[]", "[]", "[]"]),
        field("settings", &["{}", "{\"theme\":\"dark\"}", "{}"]),
        field("notes", &["[]", "[\"n1\"]", "[]"]),
    ]
}

/// Integers beyond i64 and beyond 2^53 beside floats: never rounded.
fn big_integers() -> Vec<Field> {
    vec![
        field(
            "external_ref",
            &[
                "42",
                "18446744073709551616",
                "123456789012345678901234567890",
                "1234567890123456789012345678901234567890",
                "-99999999999999999999",
                "9223372036854775807",
                "9223372036854775808",
                "-9223372036854775808",
                "-7",
            ],
        ),
        field("ratio", &["0.5", "9007199254740993", "1.25"]),
    ]
}

/// The same rules inside structs and lists of structs; a key only some
/// items carry is a nullable struct field.
fn nested() -> Vec<Field> {
    vec![
        field(
            "address",
            &[r#"{"city":"A","zip":12345}"#, r#"{"city":"B","zip":"01234"}"#, r#"{"city":"C","zip":true}"#],
        ),
        field(
            "line_items",
            &[r#"[{"sku":"a","qty":1},{"sku":"b","qty":2.5}]"#, "[]", r#"[{"sku":"c","qty":3,"price":10}]"#],
        ),
    ]
}

fn pair(name: &str, data_type: &str) -> (String, String) {
    (name.to_string(), data_type.to_string())
}

#[tokio::test]
async fn a_messy_page_reads_back_whole_in_every_reader_with_variant_columns() {
    let fields: Vec<Field> = [
        int_and_float(),
        mixed_scalars(),
        scalar_and_list(),
        always_null(),
        empty_objects_and_lists(),
        big_integers(),
        nested(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let columns = persist_and_read_whole("messy_all", &records_of(&fields)).await;
    for expected in [
        pair("amount", "Float64"),
        // Three numbers, two strings, two booleans: numbers hold the most
        // values, and a float among them makes the column float64.
        pair("code", "Float64"),
        pair("code__string", "Utf8"),
        pair("code__bool", "Boolean"),
        pair("tags__string", "Utf8"),
        pair("scores__int64", "Int64"),
        pair("scores__json", "Utf8"),
        pair("external_ref", "Decimal128(38, 0)"),
        pair("external_ref__json", "Utf8"),
        pair("ratio", "Float64"),
        pair("ratio__int64", "Int64"),
        pair("_tributary_run_id", "Utf8"),
        pair("dt", "Utf8"),
    ] {
        assert!(columns.contains(&expected), "{expected:?} missing from {columns:?}");
    }
    for absent in ["legacy", "prefs", "aliases"] {
        assert!(!columns.iter().any(|(name, _)| name == absent), "{absent}: no column without a value");
    }
}

#[tokio::test]
async fn keys_only_late_records_carry_become_nullable_columns() {
    // Far more records than one decoding batch, so a sample would miss them.
    let n = 20_000;
    let records: Vec<String> = (0..n)
        .map(|i| match n - i {
            1 => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\",\"apartment\":\"12B\"}},\"late\":\"y\"}}"),
            2 => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\"}},\"late\":\"x\"}}"),
            _ => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\"}}}}"),
        })
        .collect();
    let columns = persist_and_read_whole("messy_late", &records).await;
    assert!(columns.contains(&pair("late", "Utf8")), "{columns:?}");
}
