//! Persist's converter: one test per coercion rule, declared schemas, schema
//! evolution, partitions, rotation and bad payloads. Files are read back
//! with the parquet crate's reader and compared as JSON rows.

use std::io::Write;
use std::path::Path;

use arrow_schema::DataType;
use bytes::Bytes;
use chrono::NaiveDate;
use contracts::{FileSettings, Granularity, Partitioning, PayloadFormat, PersistTarget};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use persist::{ConvertError, PageLimits, PageOutput, PageSettings, PageSource, Ty, WriterConfig, convert_page};
use serde_json::{Value, json};

fn date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 29).expect("date")
}

fn convert(text: &str, target: &PersistTarget, lake: Option<&Ty>) -> Result<PageOutput, ConvertError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WriterConfig { batch_rows: 3, ..WriterConfig::default() };
    let settings = PageSettings {
        target,
        lineage: None,
        lake_schema: lake,
        run_date: date(),
        writer: &config,
        limits: PageLimits::default(),
        temp_dir: dir.path(),
    };
    let output = convert_page(&PageSource::Bytes(Bytes::from(text.to_string())), &PayloadFormat::default(), settings)?;
    // Keep the files past the temp dir's life: they are TempPaths inside it.
    std::mem::forget(dir);
    Ok(output)
}

/// Settings for a page of `target` with no dataset schema yet, written to `dir`.
fn settings<'a>(target: &'a PersistTarget, config: &'a WriterConfig, dir: &'a Path) -> PageSettings<'a> {
    PageSettings {
        target,
        lineage: None,
        lake_schema: None,
        run_date: date(),
        writer: config,
        limits: PageLimits::default(),
        temp_dir: dir,
    }
}

fn rows_of(path: &Path) -> (Vec<Value>, arrow_schema::SchemaRef, usize) {
    let file = std::fs::File::open(path).expect("parquet file");
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet");
    let row_groups = builder.metadata().num_row_groups();
    let schema = builder.schema().clone();
    let batches: Vec<_> = builder.build().expect("reader").collect::<Result<_, _>>().expect("batches");
    let rows = batches.iter().flat_map(test_support::lake::batch_rows).collect();
    (rows, schema, row_groups)
}

fn single(output: &PageOutput) -> (Vec<Value>, arrow_schema::SchemaRef) {
    assert_eq!(output.files.len(), 1, "{:?}", output.files);
    let (rows, schema, _) = rows_of(&output.files[0].path);
    (rows, schema)
}

fn target() -> PersistTarget {
    PersistTarget::new("t")
}

fn field_type(schema: &arrow_schema::Schema, name: &str) -> DataType {
    schema.field_with_name(name).unwrap_or_else(|_| panic!("no column {name}")).data_type().clone()
}

#[test]
fn integer_and_float_in_one_field_become_float64() {
    let out = convert(r#"[{"n": 1}, {"n": 2.5}, {"n": null}]"#, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "n"), DataType::Float64);
    assert_eq!(rows, [json!({"n": 1.0}), json!({"n": 2.5}), json!({})]);
}

#[test]
fn integers_beyond_i64_are_exact_decimals_or_variants() {
    let text = r#"[{"big": 18446744073709551616, "huge": 1234567890123456789012345678901234567890, "mixed": 1.5},
                   {"big": -5, "huge": 1, "mixed": 99999999999999999999, "near": 2.5},
                   {"near": 9007199254740993}]"#;
    let out = convert(text, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "big"), DataType::Decimal128(38, 0));
    assert_eq!(field_type(&schema, "huge"), DataType::Int64);
    assert_eq!(field_type(&schema, "huge__json"), DataType::Utf8, "beyond 38 digits: the number's JSON text");
    assert_eq!(field_type(&schema, "mixed"), DataType::Float64);
    assert_eq!(field_type(&schema, "mixed__decimal"), DataType::Decimal128(38, 0), "never rounded into a float");
    assert_eq!(field_type(&schema, "near__int64"), DataType::Int64, "beyond 2^53 beside floats: exact");
    let file = std::fs::File::open(&out.files[0].path).expect("file");
    let batch = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet").build().expect("reader").next();
    let batch = batch.expect("a batch").expect("read");
    let big = batch.column_by_name("big").expect("big");
    let big = big.as_any().downcast_ref::<arrow_array::Decimal128Array>().expect("decimal");
    assert_eq!((big.value(0), big.value(1)), (18_446_744_073_709_551_616, -5), "exact, not through f64");
    let mixed = batch.column_by_name("mixed__decimal").expect("variant");
    let mixed = mixed.as_any().downcast_ref::<arrow_array::Decimal128Array>().expect("decimal");
    assert_eq!(mixed.value(1), 99_999_999_999_999_999_999);
    assert_eq!(rows[0]["huge__json"], "1234567890123456789012345678901234567890");
    assert_eq!(rows[1]["huge"], 1);
    assert_eq!(rows[0]["mixed"], 1.5);
    assert_eq!(rows[2]["near__int64"], 9_007_199_254_740_993_i64);
    assert_eq!(rows[1]["near"], 2.5);
}

#[test]
fn values_of_other_kinds_go_to_variant_columns_typed_once() {
    let out = convert(r#"[{"v": "a"}, {"v": 12.50}, {"v": true}, {"v": null}]"#, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "v"), DataType::Utf8, "strings come first");
    assert_eq!(field_type(&schema, "v__float64"), DataType::Float64);
    assert_eq!(field_type(&schema, "v__bool"), DataType::Boolean);
    let base = schema.field_with_name("v__bool").expect("variant");
    assert_eq!(base.metadata().get(lake_format::meta::META_VARIANT_OF).map(String::as_str), Some("v"));
    assert_eq!(rows, [json!({"v": "a"}), json!({"v__float64": 12.5}), json!({"v__bool": true}), json!({})]);
}

#[test]
fn a_scalar_among_lists_goes_to_its_variant_and_lists_of_other_items_to_json() {
    let text = r#"[{"tags": "one"}, {"tags": ["a", "b"]}, {"tags": null}, {"tags": []}, {"tags": ["c", 1]}]"#;
    let out = convert(text, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert!(matches!(field_type(&schema, "tags"), DataType::List(_)));
    assert_eq!(
        rows,
        [
            json!({"tags__string": "one"}),
            json!({"tags": ["a", "b"]}),
            json!({}),
            json!({"tags": []}),
            json!({"tags__json": "[\"c\", 1]"}),
        ]
    );
}

#[test]
fn an_always_null_field_has_no_column_until_a_value_decides_it() {
    let out = convert(r#"[{"id": 1, "gone": null}, {"id": 2, "gone": null}]"#, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert!(schema.field_with_name("gone").is_err(), "no column without a value");
    assert_eq!(rows, [json!({"id": 1}), json!({"id": 2})]);
}

#[test]
fn empty_objects_and_arrays_have_no_column_alone_and_stay_empty_in_typed_columns() {
    let text = r#"[{"e": {}, "l": [], "s": {"a": 1}, "k": [1]}, {"e": {}, "l": [], "s": {}, "k": []}]"#;
    let out = convert(text, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert!(schema.field_with_name("e").is_err(), "{{}} only: no column");
    assert!(schema.field_with_name("l").is_err(), "[] only: no column");
    assert_eq!(rows[0], json!({"s": {"a": 1}, "k": [1]}));
    assert_eq!(rows[1], json!({"s": {}, "k": []}), "an empty object in a struct column is a struct of nulls");
}

#[test]
fn records_with_no_value_for_a_dataset_with_no_column_are_quarantined_with_the_reason() {
    // A first page of records that hold no value at any depth: no column,
    // so no row a reader could see; set aside with the reason, not
    // counted as written.
    let text = r#"[{}, {"a": null}, {"l": [], "o": {"p": {}}}]"#;
    let out = convert(text, &target(), None).expect("convert");
    assert_eq!((out.rows_written, out.quarantined()), (0, 3));
    assert!(out.files.is_empty(), "no file of no column");
    let quarantine = std::fs::read_to_string(&out.quarantine.as_ref().expect("quarantine file").path).expect("read");
    let lines: Vec<Value> = quarantine.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(lines.len(), 3);
    for line in &lines {
        let reason = line.to_string();
        assert!(reason.contains(persist::NO_COLUMN_YET), "{reason}");
    }
    // With one value among them, the page makes its column and the
    // others are rows of nulls in it.
    let out = convert(r#"[{}, {"a": null}, {"a": 7}]"#, &target(), None).expect("convert");
    assert_eq!((out.rows_written, out.quarantined()), (3, 0));
    let (rows, _) = single(&out);
    assert_eq!(rows, [json!({}), json!({}), json!({"a": 7})]);
}

#[test]
fn nested_objects_and_lists_of_objects_keep_their_shape_and_names_become_snake_case() {
    let text = r#"[{"First Name": "Ana", "address": {"city": "Recife", "geoPoint": {"lat": -8.05}},
                    "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2, "note": "x"}]},
                   {"First Name": "Bia", "address": {"city": "Natal"}, "items": [], "a.b": 1}]"#;
    let out = convert(text, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert!(matches!(field_type(&schema, "address"), DataType::Struct(_)));
    let DataType::List(item) = field_type(&schema, "items") else { panic!("list") };
    assert!(matches!(item.data_type(), DataType::Struct(_)));
    assert_eq!(rows[0]["first_name"], "Ana", "names are snake_case");
    let source =
        schema.field_with_name("first_name").expect("column").metadata().get(lake_format::meta::META_SOURCE).cloned();
    assert_eq!(source.as_deref(), Some("First Name"), "the key is kept in the field metadata");
    assert_eq!(rows[0]["address"], json!({"city": "Recife", "geo_point": {"lat": -8.05}}));
    assert_eq!(rows[0]["items"], json!([{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2, "note": "x"}]));
    assert_eq!(rows[1]["a_b"], 1);
    let mut verbatim = target();
    verbatim.names = contracts::NamePolicy::Verbatim;
    let out = convert(text, &verbatim, None).expect("convert");
    let (rows, _) = single(&out);
    assert_eq!(rows[0]["First Name"], "Ana", "verbatim keeps the keys");
}

#[test]
fn a_string_among_objects_goes_to_its_variant() {
    let out = convert(r#"[{"v": {"a": [1, 2]}}, {"v": "plain"}]"#, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert!(matches!(field_type(&schema, "v"), DataType::Struct(_)));
    assert_eq!(rows, [json!({"v": {"a": [1, 2]}}), json!({"v__string": "plain"})]);
}

#[test]
fn late_keys_are_seen_because_every_record_is_inferred() {
    let mut records: Vec<Value> = (0..10_000).map(|i| json!({"id": i})).collect();
    records.push(json!({"id": 10_000, "late": "only here"}));
    let out = convert(&serde_json::to_string(&records).expect("json"), &target(), None).expect("convert");
    let (rows, _) = single(&out);
    assert_eq!(rows.len(), 10_001);
    assert_eq!(rows[10_000]["late"], "only here");
}

#[test]
fn epochs_and_dates_outside_the_years_readers_show_are_quarantined() {
    let mut target = target();
    target.schema = serde_json::from_value(json!([
        {"name": "t", "type": "timestamp(s)"},
        {"name": "ms", "type": "timestamp(ms)"},
    ]))
    .expect("declared");
    let text = r#"[{"t": 253402300799, "ms": -62135596800000},
                   {"t": 99999999999999999},
                   {"ms": 253402300800000},
                   {"t": "0000-12-31T00:00:00Z"}]"#;
    let out = convert(text, &target, None).expect("convert");
    assert_eq!(out.rows_written, 1, "9999-12-31T23:59:59Z and 0001-01-01 are the edges, kept");
    let reasons = &out.quarantine.as_ref().expect("quarantine").sample_reasons;
    assert_eq!(
        reasons,
        &[
            "record 1: field /t: expected timestamp(s), found an integer 99999999999999999, outside the years 1 to 9999 that readers can show",
            "record 2: field /ms: expected timestamp(ms), found an integer 253402300800000, outside the years 1 to 9999 that readers can show",
            "record 3: field /t: expected timestamp(s), found a string \"0000-12-31T00:00:00Z\"",
        ]
    );
}

fn declared_target() -> PersistTarget {
    let mut target = target();
    target.schema = serde_json::from_value(json!([
        {"name": "id", "type": "int64", "required": true},
        {"name": "at", "type": "timestamp(ms, +00:00)"},
        {"name": "day", "type": "date"},
        {"name": "amount", "type": "decimal(10, 2)"},
        {"name": "raw", "type": "json"},
    ]))
    .expect("declared");
    target
}

#[test]
fn declared_columns_are_enforced_and_violations_quarantined_with_the_reason() {
    let text = r#"[{"id": 1, "at": "2026-11-29T06:00:00+02:00", "day": "2026-11-29", "amount": "12.5", "raw": {"x": 1}, "extra": "kept"},
                   {"id": "two", "amount": 1},
                   {"at": 1764388800000},
                   {"id": 4, "amount": 1.234},
                   {"id": 5, "day": "29/11/2026"},
                   {"id": 6, "at": 1764388800000, "amount": 3}]"#;
    let out = convert(text, &declared_target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(
        field_type(&schema, "at"),
        DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, Some("+00:00".into()))
    );
    assert_eq!(field_type(&schema, "day"), DataType::Date32);
    assert_eq!(field_type(&schema, "amount"), DataType::Decimal128(10, 2));
    assert_eq!(field_type(&schema, "extra"), DataType::Utf8, "undeclared fields are inferred, not dropped");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["at"], "2026-11-29T04:00:00Z");
    assert_eq!(rows[0]["raw"], "{\"x\": 1}");
    assert_eq!(rows[0]["amount"].as_f64(), Some(12.5));
    assert_eq!(rows[1]["id"], 6);

    let quarantine = out.quarantine.as_ref().expect("quarantine");
    assert_eq!(quarantine.records, 4);
    let lines: Vec<Value> = std::fs::read_to_string(&quarantine.path)
        .expect("read")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let reasons: Vec<&str> = lines.iter().map(|l| l["reason"].as_str().expect("reason")).collect();
    assert_eq!(
        reasons,
        [
            "record 1: field /id: expected int64, found a string \"two\"",
            "record 2: field /id: expected int64 (required), found no value",
            "record 3: field /amount: expected decimal(10, 2), found 1.234 with 3 fraction digits (it would be rounded)",
            "record 4: field /day: expected date, found a string \"29/11/2026\"",
        ]
    );
    assert_eq!(lines[0]["record"], json!({"id": "two", "amount": 1}), "the record is kept as received");
}

#[test]
fn across_pages_a_column_keeps_its_type_and_other_kinds_get_variant_columns() {
    let first = convert(r#"[{"n": 1, "addr": {"city": "Recife"}}]"#, &target(), None).expect("first page");
    let lake = first.schema.clone();
    let second = convert(
        r#"[{"n": 2.5, "addr": {"city": "Natal", "zip": "59000"}, "new": true}, {"n": 3, "addr": "unknown"}]"#,
        &target(),
        Some(&lake),
    )
    .expect("second page");
    let (rows, schema) = single(&second);
    assert_eq!(field_type(&schema, "n"), DataType::Int64, "the column keeps its type");
    assert_eq!(field_type(&schema, "n__float64"), DataType::Float64);
    assert_eq!(field_type(&schema, "new"), DataType::Boolean, "a new field is added");
    assert_eq!(field_type(&schema, "addr__string"), DataType::Utf8);
    assert_eq!(
        rows,
        [
            json!({"n__float64": 2.5, "addr": {"city": "Natal", "zip": "59000"}, "new": true}),
            json!({"n": 3, "addr__string": "unknown"}),
        ]
    );
    assert!(second.conflicts.is_empty(), "{:?}", second.conflicts);
    assert_eq!(second.quarantined(), 0);
}

#[test]
fn records_are_partitioned_by_a_field_with_safe_values() {
    let mut target = target();
    target.partition = Partitioning::Field { field: "/at".into(), granularity: Granularity::Hour, column: "dt".into() };
    let text = r#"[{"at": "2026-11-01T07:30:00Z"}, {"at": "2026-11-01T07:59:59Z"}, {"at": "2026-11-02T00:00:00+01:00"},
                   {"at": 1764388800}, {"at": "not a time"}, {}]"#;
    let out = convert(text, &target, None).expect("convert");
    let parts: Vec<(&str, u64)> = out.files.iter().map(|f| (f.partition.as_str(), f.rows)).collect();
    assert_eq!(parts, [("dt=2025-11-29/hour=04", 1), ("dt=2026-11-01/hour=07", 2), ("dt=2026-11-01/hour=23", 1),]);
    // No usable time: quarantined with the reason, not a default-partition
    // folder among the days that Athena's date projection cannot reach.
    assert_eq!(out.quarantined(), 2);
    let quarantine = std::fs::read_to_string(&out.quarantine.as_ref().expect("quarantine file").path).expect("read");
    assert!(quarantine.contains(r#"partition field /at is \"not a time\", not a date or time"#), "{quarantine}");
    assert!(quarantine.contains("partition field /at is absent or null"), "{quarantine}");
    target.partition =
        Partitioning::Field { field: "/c".into(), granularity: Granularity::Value, column: "country".into() };
    let out = convert(r#"[{"c": "BR/../SP"}, {"c": ".."}, {"c": "São Paulo"}, {"c": "007"}]"#, &target, None)
        .expect("convert");
    let parts: Vec<&str> = out.files.iter().map(|f| f.partition.as_str()).collect();
    assert_eq!(parts, ["country=%2E%2E", "country=007", "country=BR%2F..%2FSP", "country=São Paulo"]);
    let (rows, _, _) = rows_of(&out.files[1].path);
    assert_eq!(rows, [json!({"c": "007"})], "the field stays in the file as sent");
}

#[test]
fn files_rotate_by_rows_and_row_groups_follow_the_setting() {
    let mut target = target();
    target.files = FileSettings { max_rows: Some(5), row_group_rows: 2, ..FileSettings::default() };
    let records: Vec<Value> = (0..12).map(|i| json!({"i": i})).collect();
    let out = convert(&serde_json::to_string(&records).expect("json"), &target, None).expect("convert");
    let parts: Vec<(u32, u64)> = out.files.iter().map(|f| (f.part, f.rows)).collect();
    assert_eq!(parts, [(0, 5), (1, 5), (2, 2)]);
    let (rows, _, row_groups) = rows_of(&out.files[1].path);
    assert_eq!(rows.first(), Some(&json!({"i": 5})));
    assert_eq!(row_groups, 3, "5 rows in row groups of 2");
}

#[test]
fn snappy_is_available() {
    let mut target = target();
    target.files.compression = contracts::Compression::Snappy;
    let out = convert(r#"[{"a": "x"}]"#, &target, None).expect("convert");
    let file = std::fs::File::open(&out.files[0].path).expect("file");
    let meta = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet").metadata().clone();
    assert_eq!(meta.row_group(0).column(0).compression(), parquet::basic::Compression::SNAPPY);
}

#[test]
fn non_objects_and_too_deep_records_are_quarantined() {
    let deep = format!("{}1{}", "{\"x\":".repeat(40), "}".repeat(40));
    let text = format!("[{{\"a\": 1}}, 42, \"s\", [1], {deep}]");
    let out = convert(&text, &target(), None).expect("convert");
    let quarantine = out.quarantine.as_ref().expect("quarantine");
    assert_eq!(quarantine.records, 4);
    assert_eq!(out.rows_written, 1);
    assert_eq!(quarantine.sample_reasons[3], "record 4 is nested 40 levels deep, more than 32");
}

/// A trial finding: an NDJSON page with one line that is not JSON was
/// dead-lettered whole. Its lines are records of their own: the bad one
/// is quarantined with its reason and text, the others written, with the
/// schema known or not. (In a JSON array a syntax error still fails the
/// page: the document is unreadable.)
#[test]
fn an_ndjson_line_that_is_not_json_is_quarantined_alone() {
    let text = "{\"a\": 1}\n{\"a\": tru}\n{\"a\": NaN}\n{\"a\": 4}\n";
    let first = convert(text, &target(), None).expect("convert");
    let known = convert(text, &target(), Some(&first.schema)).expect("convert with the schema known");
    for (label, out) in [("first page", &first), ("schema known", &known)] {
        assert_eq!((out.records_in, out.rows_written), (4, 2), "{label}");
        let quarantine = out.quarantine.as_ref().expect("quarantine");
        assert_eq!(quarantine.records, 2, "{label}");
        assert!(
            quarantine.sample_reasons[0].starts_with("record 1 is not valid JSON: ")
                && quarantine.sample_reasons[0].contains("the page's other lines are kept"),
            "{label}: {:?}",
            quarantine.sample_reasons
        );
        assert!(quarantine.sample_reasons[1].starts_with("record 2 is not valid JSON"), "{label}");
    }
}

#[test]
fn bad_payloads_fail_with_a_clear_error() {
    let err = convert(r#"[{"a": 1}, {"a": tru}]"#, &target(), None).expect_err("invalid JSON").to_string();
    assert!(err.contains("record 1") && err.contains("invalid JSON"), "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WriterConfig::default();
    let target = target();
    let settings = settings(&target, &config, dir.path());
    let format = PayloadFormat { records_pointer: Some("/data".into()), ..PayloadFormat::default() };
    let err = convert_page(&PageSource::Bytes(Bytes::from_static(br#"{"data": {"a": 1}}"#)), &format, settings)
        .expect_err("not an array")
        .to_string();
    assert!(err.contains("records_pointer \"/data\" leads to an object, not an array"), "{err}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(serde_json::to_string(&vec![json!({"a": "x".repeat(1000)}); 50]).expect("json").as_bytes())
        .expect("gz");
    let mut bytes = gz.finish().expect("gz");
    bytes.truncate(bytes.len() / 2);
    let err = convert_page(&PageSource::Bytes(Bytes::from(bytes)), &PayloadFormat::default(), settings)
        .expect_err("cut gzip")
        .to_string();
    assert!(err.contains("gzip stream is cut short"), "{err}");
}

#[test]
fn ndjson_gzip_and_bom_payloads_convert_like_arrays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WriterConfig::default();
    let target = target();
    let settings = settings(&target, &config, dir.path());
    let mut text = vec![0xEF, 0xBB, 0xBF];
    text.extend_from_slice(b"{\"a\": 1}\n{\"a\": 2.5, \"b\": [1]}\n");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&text).expect("gz");
    let path = dir.path().join("payload.ndjson.gz");
    std::fs::write(&path, gz.finish().expect("gz")).expect("write");
    let out = convert_page(&PageSource::File(path), &PayloadFormat::default(), settings).expect("convert");
    let (rows, _) = single(&out);
    assert_eq!(rows, [json!({"a": 1.0}), json!({"a": 2.5, "b": [1]})]);
}

#[test]
fn inference_across_chunks_keeps_first_seen_order_and_the_rules() {
    // About 4 MB: several inference chunks of 1 MB, handed to two threads.
    let pad = "x".repeat(200);
    let mut records: Vec<Value> = (0..20_000).map(|i| json!({"a": i, "pad": pad})).collect();
    records[9_000]["b"] = json!(1);
    records[14_000]["c"] = json!({"k": 1});
    records[19_999]["b"] = json!(2.5);
    records[19_999]["c"] = json!([{"j": true}]);
    records[5_000]["a"] = json!("five thousand");
    let out = convert(&serde_json::to_string(&records).expect("json"), &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["a", "a__string", "pad", "b", "c", "c__json"], "the majority (integers) takes the column");
    assert_eq!(field_type(&schema, "a"), DataType::Int64);
    assert_eq!(field_type(&schema, "b"), DataType::Float64);
    let DataType::Struct(fields) = field_type(&schema, "c") else {
        panic!("one object, one array: objects win the tie")
    };
    let item_names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(item_names, ["k"]);
    assert_eq!(rows[14_000]["c"], json!({"k": 1}));
    assert_eq!(rows[19_999]["c__json"], "[{\"j\":true}]");
    assert_eq!(rows[5_000]["a__string"], "five thousand");
    assert_eq!(rows[4_999]["a"], 4999);
}

#[test]
fn values_that_cannot_be_stored_faithfully_are_quarantined_not_altered() {
    let mut target = target();
    target.schema = serde_json::from_value(json!([{"name": "f32", "type": "float32"}])).expect("declared");
    // A trial finding: 1e-400 (below the smallest subnormal) was stored as
    // 0.0 while 1e400 was quarantined; a zero written with an exponent
    // and the smallest subnormal are kept.
    let text = r#"[{"f32": 1.5, "s": "ok"}, {"f32": 1e39}, {"s": "\ud800 lone"}, {"f64": 1e400}, {"f64": 2.5},
        {"f64": 1e-400}, {"f32": 1e-50}, {"f64": 0.0e-400}, {"f64": 4.9e-324}]"#;
    let out = convert(text, &target, None).expect("convert");
    let reasons = &out.quarantine.as_ref().expect("quarantine").sample_reasons;
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(reasons[0].contains("/f32: expected float32, found a number 1e39"), "{reasons:?}");
    assert!(reasons[1].contains("/s: expected string, found a string that is not valid Unicode"), "{reasons:?}");
    assert!(reasons[2].contains("/f64: expected float64, found a number 1e400"), "{reasons:?}");
    assert!(reasons[3].contains("/f64: expected float64, found a number 1e-400"), "{reasons:?}");
    assert!(reasons[4].contains("/f32: expected float32, found a number 1e-50"), "{reasons:?}");
    assert_eq!(out.rows_written, 4);
    let (rows, _) = single(&out);
    let kept: Vec<&Value> = rows.iter().map(|row| &row["f64"]).filter(|v| !v.is_null()).collect();
    assert_eq!(kept, [&json!(2.5), &json!(0.0), &json!(4.9e-324)], "{rows:?}");
}

#[test]
fn a_page_that_fits_the_dataset_schema_is_written_the_same_in_one_pass() {
    let page = |start: i64| {
        let records: Vec<Value> = (start..start + 5000)
            .map(|i| json!({"id": i, "amount": i as f64 + 0.25, "tags": ["a"], "addr": {"city": "Recife"}}))
            .collect();
        serde_json::to_string(&records).expect("json")
    };
    let first = convert(&page(0), &target(), None).expect("first page");
    // The second page fits the dataset's schema: one pass, same bytes as
    // inferring it alone (which finds the same schema).
    let known = convert(&page(5000), &target(), Some(&first.schema)).expect("known schema");
    let alone = convert(&page(5000), &target(), None).expect("inferred alone");
    assert_eq!(known.schema, first.schema);
    let bytes = |out: &PageOutput| std::fs::read(&out.files[0].path).expect("read");
    assert_eq!(bytes(&known), bytes(&alone));
    // A page that needs more falls back to inference and adds a variant.
    let wider = convert(r#"[{"id": 1.5}]"#, &target(), Some(&first.schema)).expect("wider");
    let (rows, schema) = single(&wider);
    assert_eq!(field_type(&schema, "id"), DataType::Int64);
    assert_eq!(rows, [json!({"id__float64": 1.5})]);
}

#[test]
fn a_column_null_so_far_sends_its_first_value_through_inference() {
    let first = convert(r#"[{"id": 1, "later": null}]"#, &target(), None).expect("first page");
    let out = convert(r#"[{"id": 2, "later": null}, {"id": 3, "later": 7}]"#, &target(), Some(&first.schema))
        .expect("second page");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "later"), DataType::Int64, "the column learns its type");
    assert_eq!(rows, [json!({"id": 2}), json!({"id": 3, "later": 7})]);
    assert_eq!(out.quarantined(), 0);
}

#[test]
fn an_object_empty_so_far_sends_its_first_fields_through_inference() {
    let first = convert(r#"[{"id": 1, "meta": {}}]"#, &target(), None).expect("first page");
    let out = convert(r#"[{"id": 2, "meta": {}}, {"id": 3, "meta": {"k": "v"}}]"#, &target(), Some(&first.schema))
        .expect("second page");
    let (rows, schema) = single(&out);
    assert!(matches!(field_type(&schema, "meta"), DataType::Struct(_)), "the object gains its field");
    assert_eq!(rows[1]["meta"], json!({"k": "v"}));
}

#[test]
fn a_record_with_a_repeated_key_is_quarantined_whole_with_the_key_named() {
    // Readers disagree on `{"a": 1, "a": 2}` (first or last wins); one
    // column cannot hold both values, so nothing is silently dropped.
    let wide: String = (0..70).map(|i| format!("\"k{i}\": {i}, ")).collect();
    let text = format!(
        r#"[{{"id": 1, "dup": 1, "dup": 2}}, {{"id": 2, "dup": 3}}, {{"id": 3, "o": {{"x": 1, "x": 1}}}}, {{{wide}"k69": 0}}]"#
    );
    let out = convert(&text, &target(), None).expect("convert");
    assert_eq!(out.quarantined(), 3, "the repeated `dup`, the nested `x`, and `k69` past the 64th column");
    let quarantine = std::fs::read_to_string(&out.quarantine.as_ref().expect("quarantine file").path).expect("read");
    for key in ["/dup", "/o/x", "/k69"] {
        assert!(
            quarantine.contains(&format!("{key}: expected one value per key, found the key repeated")),
            "{key}: {quarantine}"
        );
    }
    let (rows, _) = single(&out);
    assert_eq!(rows, [json!({"id": 2, "dup": 3})]);
}

#[test]
fn rfc3339_timestamps_become_a_timestamp_column_offsets_keep_their_text_and_other_text_its_string_variant() {
    // One field with UTC timestamps (with and without a fraction), an
    // offset, a date alone, a naive date-time, garbage, a number and nulls.
    let text = r#"[{"ts": "2026-11-29T06:00:00Z"}, {"ts": "2026-11-29T06:00:00.123456Z"},
                   {"ts": "2026-11-29T08:00:00+02:00"}, {"ts": "2026-11-29"}, {"ts": "2026-11-29T06:00:00"},
                   {"ts": "soon"}, {"ts": 1764396000}, {"ts": null}, {},
                   {"ts": "2026-11-30T00:00:00.5Z"}, {"ts": "2026-12-01T00:00:00Z"}, {"ts": "2026-12-02T00:00:00Z"}]"#;
    let out = convert(text, &target(), None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(
        field_type(&schema, "ts"),
        DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("+00:00".into())),
        "6 timestamps against 3 other texts: the timestamps take the column"
    );
    assert_eq!(field_type(&schema, "ts__string"), DataType::Utf8);
    assert_eq!(field_type(&schema, "ts__text"), DataType::Utf8);
    assert_eq!(field_type(&schema, "ts__int64"), DataType::Int64);
    let file = std::fs::File::open(&out.files[0].path).expect("file");
    let batches: Vec<_> = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader")
        .collect::<Result<_, _>>()
        .expect("batches");
    let mut micros = Vec::new();
    for batch in &batches {
        let ts = batch.column_by_name("ts").expect("ts");
        let ts = ts.as_any().downcast_ref::<arrow_array::TimestampMicrosecondArray>().expect("timestamp(us)");
        micros.extend(ts.iter());
    }
    let at = |text: &str| Some(chrono::DateTime::parse_from_rfc3339(text).expect("time").timestamp_micros());
    assert_eq!(
        micros,
        [
            at("2026-11-29T06:00:00Z"),
            at("2026-11-29T06:00:00.123456Z"),
            at("2026-11-29T06:00:00Z"),
            None,
            None,
            None,
            None,
            None,
            None,
            at("2026-11-30T00:00:00.5Z"),
            at("2026-12-01T00:00:00Z"),
            at("2026-12-02T00:00:00Z"),
        ],
        "each timestamp's instant exact to the microsecond, the offset's too"
    );
    let texts: Vec<&Value> = rows.iter().map(|row| &row["ts__string"]).collect();
    assert_eq!(
        texts[2..6],
        [&Value::Null, &json!("2026-11-29"), &json!("2026-11-29T06:00:00"), &json!("soon")],
        "a date, a naive date-time and garbage kept as the text sent"
    );
    let zoned: Vec<&Value> = rows.iter().map(|row| &row["ts__text"]).collect();
    assert_eq!(zoned[2], &json!("2026-11-29T08:00:00+02:00"), "the offset's text beside its instant");
    assert!(
        zoned.iter().enumerate().all(|(i, v)| i == 2 || v.is_null()),
        "only the offset has text beside the column: {zoned:?}"
    );
    assert_eq!(rows[6]["ts__int64"], 1_764_396_000_i64, "a number is not taken for a time");

    // `timestamps: text` keeps them text, as before.
    let text_target = PersistTarget { timestamps: contracts::Timestamps::Text, ..target() };
    let out = convert(text, &text_target, None).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "ts"), DataType::Utf8);
    assert_eq!(rows[0]["ts"], "2026-11-29T06:00:00Z");

    // A dataset whose column is text keeps taking timestamps as text.
    let lake = convert(r#"[{"ts": "not a time"}]"#, &target(), None).expect("convert").schema;
    let out = convert(r#"[{"ts": "2026-11-29T06:00:00Z"}]"#, &target(), Some(&lake)).expect("convert");
    let (rows, schema) = single(&out);
    assert_eq!(field_type(&schema, "ts"), DataType::Utf8, "the column's type is decided once");
    assert_eq!(rows[0], json!({"ts": "2026-11-29T06:00:00Z"}));
}

/// A trial read "added variant column ts__text (string): /ts held values
/// that are not timestamp" as timestamps lost: the companion's line says
/// what it holds.
#[test]
fn a_timestamp_columns_text_companion_is_announced_as_such() {
    let first = convert(r#"[{"updated_at": "2026-01-01T00:00:00Z"}]"#, &target(), None).expect("first page");
    assert!(matches!(field_type(&first.arrow_schema, "updated_at"), DataType::Timestamp(..)));
    let zoned = convert(r#"[{"updated_at": "2026-01-01T02:00:00+02:00"}]"#, &target(), Some(&first.schema))
        .expect("second page");
    assert_eq!(zoned.rows_written, 1);
    // A trial finding behind the message: with the table known, the
    // offset's text was dropped (the instant kept, `__text` never made).
    let (rows, _) = single(&zoned);
    assert_eq!(rows[0]["updated_at__text"], "2026-01-01T02:00:00+02:00", "{rows:?}");
    assert_eq!(
        zoned.schema_changes,
        ["added column updated_at__text (string): the text of /updated_at's timestamps sent with an offset other \
             than Z, whose instants are in its timestamp column"],
    );
}
