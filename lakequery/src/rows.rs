//! Result batches as JSON rows, typed the way the Athena adapter types
//! Athena's results (see `adapters::aws::AthenaEngine`).
//!
//! | Arrow type | JSON |
//! |---|---|
//! | `Int*`, `UInt*` | integer |
//! | `Float*` | number (`NaN` and infinities, which JSON cannot hold, as `null`) |
//! | `Boolean` | `true` / `false` |
//! | `Utf8` and its views and dictionaries | string |
//! | `Date*`, `Timestamp*`, `Time*`, `Duration`, `Interval` | string (ISO 8601, e.g. `2026-11-29`, `2026-11-29T06:00:00`) |
//! | `Decimal*` | string keeping its scale (`"1.10"`), as Athena gives decimals |
//! | `List`, `Struct`, `Map` | string holding the value as JSON text (Athena's own text form, `{a=1}`, is not JSON); with `nested_values` (`tributary query`), the JSON array or object itself |
//! | any value that is SQL `NULL` | `null` |
//!
//! The encoding itself is arrow-json's, with explicit nulls, so every column
//! is a key of every row.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_json::{ArrayWriter, WriterBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::error::ArrowError;
use serde_json::{Map, Value};

/// The rows of `batches` as JSON objects keyed by column name, in order;
/// lists and structs as JSON values when `nested_values`, else as their
/// JSON text.
///
/// # Errors
/// [`ArrowError`] when a column cannot be encoded (a type arrow-json does
/// not write).
pub(crate) fn to_rows(batches: &[RecordBatch], nested_values: bool) -> Result<Vec<Map<String, Value>>, ArrowError> {
    let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches.iter().filter(|batch| batch.num_rows() > 0) {
        let batch = decimals_as_text(batch)?;
        let mut writer: ArrayWriter<Vec<u8>> = WriterBuilder::new().with_explicit_nulls(true).build(Vec::new());
        writer.write(&batch)?;
        writer.finish()?;
        let encoded: Vec<Map<String, Value>> = serde_json::from_slice(&writer.into_inner())
            .map_err(|err| ArrowError::JsonError(format!("re-reading arrow-json's output: {err}")))?;
        rows.extend(encoded.into_iter().map(|mut row| {
            for value in row.values_mut().filter(|_| !nested_values) {
                if value.is_object() || value.is_array() {
                    *value = Value::String(value.to_string());
                }
            }
            row
        }));
    }
    Ok(rows)
}

/// `batch` with its decimal columns cast to text: arrow-json writes
/// decimals as JSON numbers, which would lose the scale (`1.10` -> `1.1`)
/// and, past 2^53, the digits.
fn decimals_as_text(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let is_decimal = |data_type: &DataType| {
        matches!(
            data_type,
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..)
        )
    };
    let schema = batch.schema();
    if !schema.fields().iter().any(|field| is_decimal(field.data_type())) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if is_decimal(field.data_type()) {
            fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, field.is_nullable())));
            columns.push(cast(column, &DataType::Utf8)?);
        } else {
            fields.push(field.clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array, ListArray, RecordBatch, StringArray,
    };
    use datafusion::arrow::datatypes::Int64Type;
    use serde_json::json;

    use super::to_rows;

    #[test]
    fn values_are_typed_like_athenas_and_nulls_are_explicit() {
        let decimals = Decimal128Array::from(vec![Some(110), None]).with_precision_and_scale(10, 2).expect("valid");
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1), Some(2)]), None]);
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from(vec![Some(9_007_199_254_740_993), None])) as _),
            ("score", Arc::new(Float64Array::from(vec![Some(1.5), Some(f64::NAN)])) as _),
            ("active", Arc::new(BooleanArray::from(vec![Some(true), None])) as _),
            ("name", Arc::new(StringArray::from(vec![Some("a"), None])) as _),
            ("day", Arc::new(Date32Array::from(vec![Some(20_786), None])) as _),
            ("price", Arc::new(decimals) as _),
            ("tags", Arc::new(list) as _),
        ])
        .expect("batch");
        let rows = to_rows(&[batch], false).expect("rows");
        assert_eq!(
            serde_json::Value::Array(rows.into_iter().map(serde_json::Value::Object).collect()),
            json!([
                {"id": 9_007_199_254_740_993_i64, "score": 1.5, "active": true, "name": "a", "day": "2026-11-29",
                 "price": "1.10", "tags": "[1,2]"},
                {"id": null, "score": null, "active": null, "name": null, "day": null, "price": null, "tags": null},
            ])
        );
    }

    #[test]
    fn doubles_come_back_as_the_same_number_and_print_shortest() {
        // 20,000 doubles spread over the whole range (a xorshift of their
        // bits; finite ones only), and the issue's own example.
        let mut bits: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![0.424_519_189_142_513_96_f64];
        while values.len() < 20_000 {
            bits ^= bits << 13;
            bits ^= bits >> 7;
            bits ^= bits << 17;
            let value = f64::from_bits(bits);
            if value.is_finite() {
                values.push(value);
            }
        }
        let batch =
            RecordBatch::try_from_iter([("x", Arc::new(Float64Array::from(values.clone())) as _)]).expect("batch");
        let rows = to_rows(&[batch], false).expect("rows");
        let mut wrong = Vec::new();
        for (row, value) in rows.iter().zip(&values) {
            let read = row["x"].as_f64().expect("a number");
            let printed = serde_json::to_string(&row["x"]).expect("print");
            if read.to_bits() != value.to_bits() || printed.parse::<f64>().map(f64::to_bits) != Ok(value.to_bits()) {
                wrong.push((*value, printed));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {} doubles changed, e.g. {:?}",
            wrong.len(),
            values.len(),
            &wrong[..wrong.len().min(3)]
        );
    }
}
