//! JSON objects -> Arrow -> Parquet bytes.
//!
//! The schema is inferred over every record of the page (arrow-json's
//! inference: an integer and a float in one field widen to Float64; a field
//! that is a string in some records and a number in others becomes Utf8 with
//! the numbers kept as text, by `coerce_primitive`). The richer coercion
//! rules, declared schemas and schema evolution come with the
//! "Persist, production grade" work.

use std::sync::Arc;

use arrow_json::ReaderBuilder;
use arrow_json::reader::infer_json_schema_from_iterator;
use arrow_schema::ArrowError;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

/// Parquet writer settings.
#[derive(Clone, Debug, PartialEq)]
pub struct WriterConfig {
    /// zstd level, 1..=22 (default 1: fast, and most of the size gain).
    pub zstd_level: i32,
    /// Rows per Arrow batch decoded at a time (default 8192).
    pub batch_rows: usize,
    /// Rows per Parquet row group at most (default 131072).
    pub row_group_rows: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self { zstd_level: 1, batch_rows: 8192, row_group_rows: 131_072 }
    }
}

/// A page that could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// Arrow could not infer a schema or decode a record.
    #[error("JSON to Arrow: {0}")]
    Arrow(#[from] ArrowError),
    /// The Parquet writer refused the data or its settings.
    #[error("Arrow to Parquet: {0}")]
    Parquet(#[from] ParquetError),
}

/// Converts JSON objects to one Parquet file (bytes), zstd-compressed.
///
/// # Errors
/// [`ConvertError`] when the records cannot be represented (for example a
/// field that is an empty object in every record) or the settings are
/// invalid (zstd level outside 1..=22).
pub fn records_to_parquet(records: &[Value], config: &WriterConfig) -> Result<Vec<u8>, ConvertError> {
    records_to_parquet_with_schema(records, config).map(|(bytes, _)| bytes)
}

/// As [`records_to_parquet`], also returning the Arrow schema inferred.
///
/// # Errors
/// As [`records_to_parquet`].
pub fn records_to_parquet_with_schema(
    records: &[Value],
    config: &WriterConfig,
) -> Result<(Vec<u8>, arrow_schema::SchemaRef), ConvertError> {
    let schema = Arc::new(infer_json_schema_from_iterator(records.iter().map(Ok::<_, ArrowError>))?);
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(config.zstd_level)?))
        .set_max_row_group_row_count(Some(config.row_group_rows.max(1)))
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties))?;
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_batch_size(config.batch_rows.max(1))
        .with_coerce_primitive(true)
        .build_decoder()?;
    for chunk in records.chunks(config.batch_rows.max(1)) {
        decoder.serialize(chunk)?;
        while let Some(batch) = decoder.flush()? {
            writer.write(&batch)?;
        }
    }
    Ok((writer.into_inner()?, schema))
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use serde_json::json;

    use super::*;

    fn read_back(bytes: Vec<u8>) -> arrow_array::RecordBatch {
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).expect("parquet").build().expect("reader");
        let batches: Vec<_> = reader.collect::<Result<_, _>>().expect("batches");
        arrow_select_concat(&batches)
    }

    fn arrow_select_concat(batches: &[arrow_array::RecordBatch]) -> arrow_array::RecordBatch {
        assert_eq!(batches.len(), 1, "small pages fit one batch");
        batches[0].clone()
    }

    #[test]
    fn mixed_numbers_nested_objects_and_late_keys_round_trip() {
        let records = vec![
            json!({"id": 1, "amount": 10, "address": {"city": "Recife"}, "tags": ["a"]}),
            json!({"id": 2, "amount": 10.5, "address": {"city": "Natal"}, "tags": []}),
            json!({"id": 3, "amount": null, "address": null, "tags": ["b", "c"], "late": "x"}),
        ];
        let batch = read_back(records_to_parquet(&records, &WriterConfig::default()).expect("convert"));
        assert_eq!(batch.num_rows(), 3);
        let ids = batch.column_by_name("id").expect("id").as_primitive::<Int64Type>();
        assert_eq!(ids.values(), &[1, 2, 3]);
        let amounts = batch.column_by_name("amount").expect("amount").as_primitive::<Float64Type>();
        assert_eq!((amounts.value(0), amounts.value(1), amounts.is_null(2)), (10.0, 10.5, true));
        let late = batch.column_by_name("late").expect("late key inferred from the last record").as_string::<i32>();
        assert!(late.is_null(0) && late.value(2) == "x");
    }

    #[test]
    fn bad_zstd_level_is_an_error_not_a_panic() {
        let config = WriterConfig { zstd_level: 99, ..WriterConfig::default() };
        assert!(records_to_parquet(&[json!({"a": 1})], &config).is_err());
    }
}
