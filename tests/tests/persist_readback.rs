//! Persist's Parquet read back by two independent readers, pyarrow and
//! DuckDB (both installed, pinned, by `scripts/python-tools.sh install`;
//! `.ci/run` does it), and compared value by value with the input records:
//! clean pages, messy pages under the documented coercion rules, and a
//! Hive-partitioned dataset read as one table with its `dt` column.
//!
//! The coercion rules checked (README, "What lands in the lake"):
//! int + float -> float64; mixed scalar kinds -> string holding each value's
//! JSON text; a scalar beside lists -> list with the scalar wrapped; an
//! always-null field -> a nullable string column; `{}` and `[]` -> written
//! (read back as themselves, as null, or as their JSON text); integers
//! beyond i64 -> decimal(38,0) or their text, never rounded; keys that only
//! late records carry -> nullable columns; the same rules inside structs and
//! lists of structs.
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
    };
    let config = persist::PersistConfig::default();
    let deps = persist::Deps { store: &store, queue: &Broker::new(), run_events: None, config: &config };
    let receipt = persist::persist_page(message, deps).await.unwrap_or_else(|err| panic!("{dataset}: {err}"));
    assert_eq!(receipt.records_quarantined, 0, "{dataset}: nothing is quarantined: {receipt:?}");
    assert_eq!(receipt.records_persisted, records.len() as u64, "{dataset}: every record is persisted");
    receipt
}

/// Persists `records` as one page of `dataset` by claim check and reads the
/// dataset back with both readers.
async fn persist_and_read(dataset: &str, records: &[String]) -> [Table; 2] {
    let lake = tempfile::tempdir().expect("tempdir");
    persist(lake.path(), dataset, date(RUN_DATE), 0, records, Delivery::ClaimCheck).await;
    let tables = read_back(&lake.path().join(dataset));
    for table in &tables {
        assert_eq!(table.rows.len(), records.len(), "{}: every row is read back", table.reader);
    }
    tables
}

/// What a reader must give back for one input value.
#[derive(Clone, Debug)]
enum Expect {
    /// Exactly this value.
    Value(Value),
    /// An empty object or list: itself, null, or its JSON text.
    Empty(Value),
    /// An integer's exact digits: a decimal (printed as its text) or a string.
    Digits(&'static str),
}

impl Expect {
    fn check(&self, found: Option<&Value>) -> Result<(), String> {
        let found = found.unwrap_or(&Value::Null);
        let ok = match self {
            Expect::Value(value) => found == value,
            Expect::Empty(value) => {
                found == value || found.is_null() || found.as_str() == Some(value.to_string().as_str())
                    // An empty object read as a struct whose fields are all null.
                    || (value == &json!({}) && found.as_object().is_some_and(|o| o.values().all(Value::is_null)))
            }
            Expect::Digits(digits) => {
                found.as_str() == Some(digits) || (found.is_number() && found.to_string().as_str() == *digits)
            }
        };
        if ok { Ok(()) } else { Err(format!("expected {self:?}, read {found}")) }
    }
}

/// Checks `column` of every reader: its type by `kind`, row `i` by
/// `expected[i]`.
fn check_column(tables: &[Table; 2], column: &str, kind: Kind, expected: &[Expect]) {
    for table in tables {
        let found = table
            .schema
            .get(column)
            .unwrap_or_else(|| panic!("{}: column {column} is missing; columns: {:?}", table.reader, table.schema));
        assert!(kind.matches(table.reader, found), "{}: column {column} is {found}, expected {kind:?}", table.reader);
        assert_eq!(table.rows.len(), expected.len(), "{}: rows", table.reader);
        for (i, (row, expect)) in table.rows.iter().zip(expected).enumerate() {
            assert_eq!(row.get("id"), Some(&json!(i)), "{}: rows sorted by id", table.reader);
            if let Err(problem) = expect.check(row.get(column)) {
                panic!("{}: row {i} column {column}: {problem}", table.reader);
            }
        }
    }
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
    /// decimal(38,0), or a string holding the digits.
    BigInteger,
    /// Any type: only the values are checked (`{}` and `[]` columns, whose
    /// representation is Persist's choice).
    Any,
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
            (Kind::BigInteger, _) => string(found) || matches!(found, "decimal128(38, 0)" | "DECIMAL(38,0)"),
            (Kind::Any, _) => true,
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
            assert_eq!(row.remove("dt"), Some(Value::String(dt_of(i))), "{}: row {i}: dt", table.reader);
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
        for (column, kind) in
            [("id", Kind::Int64), ("score", Kind::Float64), ("tags", Kind::List), ("address", Kind::Struct)]
        {
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
/// (`None`: the record lacks the key) and what both readers must give back.
/// Records past the end of `cells` lack the key too (read back as null).
struct Field {
    name: &'static str,
    kind: Kind,
    cells: Vec<(Option<&'static str>, Expect)>,
}

fn field(name: &'static str, kind: Kind, cells: Vec<(&'static str, Expect)>) -> Field {
    Field { name, kind, cells: cells.into_iter().map(|(text, expect)| (Some(text), expect)).collect() }
}

fn exact(value: Value) -> Expect {
    Expect::Value(value)
}

/// The records of a page holding `fields`, with `id` = the record's index.
fn records_of(fields: &[Field]) -> Vec<String> {
    let rows = fields.iter().map(|f| f.cells.len()).max().unwrap_or(0);
    (0..rows)
        .map(|i| {
            let mut text = format!("{{\"id\":{i}");
            for f in fields {
                if let Some((Some(value), _)) = f.cells.get(i) {
                    text.push_str(&format!(",\"{}\":{value}", f.name));
                }
            }
            text.push('}');
            text
        })
        .collect()
}

/// Persists a page of `fields` by claim check and checks every field in
/// both readers.
async fn check_fields(dataset: &str, fields: &[Field]) {
    let records = records_of(fields);
    let tables = persist_and_read(dataset, &records).await;
    for f in fields {
        let expected: Vec<Expect> = (0..records.len())
            .map(|i| f.cells.get(i).map_or(Expect::Value(Value::Null), |(_, expect)| expect.clone()))
            .collect();
        check_column(&tables, f.name, f.kind, &expected);
    }
}

/// int + float -> float64.
fn int_and_float() -> Vec<Field> {
    vec![field(
        "amount",
        Kind::Float64,
        vec![
            ("1", exact(json!(1.0))),
            ("2.5", exact(json!(2.5))),
            ("3", exact(json!(3.0))),
            ("-4.25", exact(json!(-4.25))),
            ("0", exact(json!(0.0))),
            ("null", exact(Value::Null)),
        ],
    )]
}

/// Mixed scalar kinds -> string, each value's JSON text (strings as they are).
fn mixed_scalars() -> Vec<Field> {
    vec![field(
        "code",
        Kind::String,
        vec![
            ("7", exact(json!("7"))),
            ("\"A7\"", exact(json!("A7"))),
            ("true", exact(json!("true"))),
            ("2.5", exact(json!("2.5"))),
            ("false", exact(json!("false"))),
            ("null", exact(Value::Null)),
            ("-12345678901234", exact(json!("-12345678901234"))),
            ("\"\"", exact(json!(""))),
        ],
    )]
}

/// A scalar beside lists -> a list, the scalar wrapped.
fn scalar_and_list() -> Vec<Field> {
    vec![
        field(
            "tags",
            Kind::List,
            vec![
                ("\"vip\"", exact(json!(["vip"]))),
                ("[\"a\",\"b\"]", exact(json!(["a", "b"]))),
                ("[]", exact(json!([]))),
                ("\"x\"", exact(json!(["x"]))),
                ("null", exact(Value::Null)),
            ],
        ),
        field(
            "scores",
            Kind::List,
            vec![
                ("1", exact(json!([1]))),
                ("[2,3]", exact(json!([2, 3]))),
                ("[]", exact(json!([]))),
                ("4", exact(json!([4]))),
                ("null", exact(Value::Null)),
            ],
        ),
    ]
}

/// Always null (or absent) -> a nullable string column.
fn always_null() -> Vec<Field> {
    let cells = [Some("null"), Some("null"), None, Some("null"), Some("null")];
    vec![Field {
        name: "legacy",
        kind: Kind::String,
        cells: cells.into_iter().map(|text| (text, exact(Value::Null))).collect(),
    }]
}

/// `{}` and `[]`: written; read back as themselves, null or their JSON text.
fn empty_objects_and_lists() -> Vec<Field> {
    let (object, list) = (Expect::Empty(json!({})), Expect::Empty(json!([])));
    vec![
        field("prefs", Kind::Any, vec![("{}", object.clone()), ("{}", object.clone()), ("{}", object.clone())]),
        field("aliases", Kind::Any, vec![("[]", list.clone()), ("[]", list.clone()), ("[]", list.clone())]),
        field(
            "settings",
            Kind::Struct,
            vec![("{}", object.clone()), ("{\"theme\":\"dark\"}", exact(json!({"theme": "dark"}))), ("{}", object)],
        ),
        field("notes", Kind::List, vec![("[]", list.clone()), ("[\"n1\"]", exact(json!(["n1"]))), ("[]", list)]),
    ]
}

/// Integers beyond i64 -> decimal(38,0) or text, never rounded.
fn big_integers() -> Vec<Field> {
    let digits = [
        "42",
        "18446744073709551616",
        "123456789012345678901234567890",
        "-99999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-7",
    ];
    vec![field("external_ref", Kind::BigInteger, digits.into_iter().map(|d| (d, Expect::Digits(d))).collect())]
}

/// The same rules inside structs and lists of structs; a key only some
/// items carry is a nullable struct field.
fn nested() -> Vec<Field> {
    vec![
        field(
            "address",
            Kind::Struct,
            vec![
                (r#"{"city":"A","zip":12345}"#, exact(json!({"city": "A", "zip": "12345"}))),
                (r#"{"city":"B","zip":"01234"}"#, exact(json!({"city": "B", "zip": "01234"}))),
                (r#"{"city":"C","zip":true}"#, exact(json!({"city": "C", "zip": "true"}))),
            ],
        ),
        field(
            "line_items",
            Kind::List,
            vec![
                (
                    r#"[{"sku":"a","qty":1},{"sku":"b","qty":2.5}]"#,
                    exact(json!([{"sku": "a", "qty": 1.0, "price": null}, {"sku": "b", "qty": 2.5, "price": null}])),
                ),
                ("[]", Expect::Empty(json!([]))),
                (r#"[{"sku":"c","qty":3,"price":10}]"#, exact(json!([{"sku": "c", "qty": 3.0, "price": 10}]))),
            ],
        ),
    ]
}

#[tokio::test]
async fn messy_int_and_float_in_one_field_become_float64() {
    check_fields("messy_numbers", &int_and_float()).await;
}

#[tokio::test]
async fn messy_mixed_scalar_kinds_become_strings_holding_their_json_text() {
    check_fields("messy_scalars", &mixed_scalars()).await;
}

#[tokio::test]
async fn messy_scalar_in_some_records_and_list_in_others_becomes_a_list_with_the_scalar_wrapped() {
    check_fields("messy_lists", &scalar_and_list()).await;
}

#[tokio::test]
async fn messy_always_null_field_is_kept_as_a_nullable_string_column() {
    check_fields("messy_nulls", &always_null()).await;
}

#[tokio::test]
async fn messy_empty_objects_and_lists_are_written_and_read_back() {
    check_fields("messy_empty", &empty_objects_and_lists()).await;
}

#[tokio::test]
async fn messy_integers_beyond_i64_are_decimal_or_text_never_rounded() {
    check_fields("messy_big", &big_integers()).await;
}

#[tokio::test]
async fn messy_nested_structs_and_lists_of_structs_follow_the_same_rules() {
    check_fields("messy_nested", &nested()).await;
}

#[tokio::test]
async fn messy_page_with_every_mess_at_once_reads_back_under_every_rule() {
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
    check_fields("messy_all", &fields).await;
}

#[tokio::test]
async fn messy_keys_only_late_records_carry_become_nullable_columns() {
    // Far more records than one decoding batch, so a sample would miss them.
    let n = 20_000;
    let records: Vec<String> = (0..n)
        .map(|i| match n - i {
            1 => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\",\"apartment\":\"12B\"}},\"late\":\"y\"}}"),
            2 => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\"}},\"late\":\"x\"}}"),
            _ => format!("{{\"id\":{i},\"address\":{{\"city\":\"c\"}}}}"),
        })
        .collect();
    let tables = persist_and_read("messy_late", &records).await;
    let mut late = vec![exact(Value::Null); n - 2];
    late.extend([exact(json!("x")), exact(json!("y"))]);
    check_column(&tables, "late", Kind::String, &late);
    let mut address = vec![exact(json!({"city": "c", "apartment": null})); n - 1];
    address.push(exact(json!({"city": "c", "apartment": "12B"})));
    check_column(&tables, "address", Kind::Struct, &address);
}
