//! Which columns of a Parquet file get a dictionary: decided per file from
//! its first batch, so the writer does not intern values it will throw
//! away.
//!
//! arrow-rs dictionary-encodes every column until the dictionary outgrows
//! [`crate::convert::DICTIONARY_PAGE_BYTES`] in a row group, then falls
//! back to plain for the rest of it. For a column of ids, timestamps,
//! amounts or SKUs that fallback is certain, and every value interned
//! before it is wasted work: on the 500k bench pages, `line_items` alone
//! took 0.214 s to write with its dictionary and 0.185 s without
//! (docs/persist-bench.md, "Where the Parquet writer's time goes").
//!
//! For each leaf column, up to [`SAMPLE_VALUES`] non-null values of the
//! file's first batch are counted, and the column's distinct values in a
//! row group are estimated with Chao's estimator (`d + f1(f1-1)/(2(f2+1))`,
//! `f1` and `f2` the values seen once and twice; Chao 1984, bias-corrected).
//! When that many values would fill a dictionary larger than the limit
//! (at the sample's mean encoded size), the column is written plain from
//! its first value. A column sampled from fewer than [`MIN_SAMPLE`] values,
//! or of a type arrow-rs writes no dictionary for (booleans), keeps the
//! default. The choice changes encodings only: every reader reads PLAIN,
//! and the values are the same.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use parquet::arrow::ArrowSchemaConverter;
use parquet::file::properties::WriterProperties;

/// Non-null values of a leaf column looked at, at most.
pub const SAMPLE_VALUES: usize = 4_096;

/// Non-null values a leaf column needs in the first batch for its
/// dictionary to be decided; with fewer it keeps the default.
pub const MIN_SAMPLE: usize = 1_024;

/// Dictionary bytes a file's leaf columns may hold together in a row
/// group: with more leaves than this allows at the per-column limit, each
/// column's limit is this divided among them (a page of 300 text columns
/// gets about 55 KiB each), so a wide page's dictionaries stay within
/// Persist's memory budget whatever its width.
pub const FILE_DICTIONARY_BYTES: usize = 16 * 1024 * 1024;

/// `base` with the dictionary off for each leaf column of `batch` whose
/// estimated distinct values in a row group would fill more than
/// `dictionary_bytes` (see the module docs), or than its share of
/// [`FILE_DICTIONARY_BYTES`] when that is less (then every column's
/// dictionary limit is that share). `base` unchanged when neither applies,
/// or when `batch`'s leaves cannot be matched to the Parquet schema's.
pub fn for_first_batch(base: &WriterProperties, batch: &RecordBatch, dictionary_bytes: usize) -> WriterProperties {
    let Ok(descriptor) = ArrowSchemaConverter::new().convert(&batch.schema()) else { return base.clone() };
    let mut leaves = Vec::new();
    for column in batch.columns() {
        collect_leaves(column, &mut leaves);
    }
    if leaves.len() != descriptor.num_columns() {
        return base.clone();
    }
    let rows = base.max_row_group_row_count().unwrap_or(usize::MAX);
    let share = FILE_DICTIONARY_BYTES / leaves.len().max(1);
    let mut builder = None;
    let dictionary_bytes = if share < dictionary_bytes {
        builder = Some(base.clone().into_builder().set_dictionary_page_size_limit(share));
        share
    } else {
        dictionary_bytes
    };
    for (index, leaf) in leaves.iter().enumerate() {
        if leaf.as_ref().is_some_and(|leaf| dictionary_overflows(leaf.as_ref(), rows, dictionary_bytes)) {
            let path = descriptor.column(index).path().clone();
            builder =
                Some(builder.unwrap_or_else(|| base.clone().into_builder()).set_column_dictionary_enabled(path, false));
        }
    }
    builder.map_or_else(|| base.clone(), |builder| builder.build())
}

/// The leaf arrays of `array` in the Parquet schema's depth-first order
/// (a struct's children, a list's items, a map's keys and values); `None`
/// for a leaf whose dictionary is not decided here.
fn collect_leaves(array: &ArrayRef, out: &mut Vec<Option<ArrayRef>>) {
    match array.data_type() {
        DataType::Struct(_) => {
            for child in array.as_struct().columns() {
                collect_leaves(child, out);
            }
        }
        DataType::List(_) => collect_leaves(array.as_list::<i32>().values(), out),
        DataType::LargeList(_) => collect_leaves(array.as_list::<i64>().values(), out),
        DataType::Map(..) => {
            let entries = array.as_map();
            collect_leaves(entries.keys(), out);
            collect_leaves(entries.values(), out);
        }
        DataType::Utf8
        | DataType::Int64
        | DataType::Int32
        | DataType::Float64
        | DataType::Float32
        | DataType::Date32
        | DataType::Decimal128(..)
        | DataType::Timestamp(..) => out.push(Some(array.clone())),
        _ => out.push(None),
    }
}

/// Whether `array`'s sampled values say a row group of `rows` rows would
/// hold more distinct values than a dictionary of `limit` bytes.
fn dictionary_overflows(array: &dyn Array, rows: usize, limit: usize) -> bool {
    let Some(sample) = sample(array) else { return false };
    if sample.values < MIN_SAMPLE {
        return false;
    }
    let (mut once, mut twice) = (0u64, 0u64);
    for count in sample.counts.values() {
        match count {
            1 => once += 1,
            2 => twice += 1,
            _ => {}
        }
    }
    let distinct = sample.counts.len() as f64 + (once * once.saturating_sub(1)) as f64 / (2 * (twice + 1)) as f64;
    // A row group holds at most `rows` values of a top-level column; a
    // list's leaf may hold more, so the bound is the estimate's alone then.
    let distinct = if array.len() <= rows { distinct.min(rows as f64) } else { distinct };
    distinct * sample.bytes as f64 / sample.values as f64 > limit as f64
}

/// Up to [`SAMPLE_VALUES`] non-null values of a leaf: how often each value
/// (by its hash) occurs, how many were taken, and their encoded bytes.
struct Sample {
    counts: HashMap<u64, u32, rustc_hash::FxBuildHasher>,
    values: usize,
    bytes: usize,
}

fn sample(array: &dyn Array) -> Option<Sample> {
    // FxHash, not the standard library's SipHash: the sample's hashing
    // was about 3 % of a page's conversion (callgrind, docs/persist-bench.md),
    // and it needs no defence against chosen keys, only a spread. Fixed,
    // so a page's decisions are the same on every run.
    let hasher = rustc_hash::FxBuildHasher;
    let capacity = array.len().min(SAMPLE_VALUES);
    let mut sample =
        Sample { counts: HashMap::with_capacity_and_hasher(capacity, rustc_hash::FxBuildHasher), values: 0, bytes: 0 };
    let valid = (0..array.len()).filter(|&i| array.is_valid(i)).take(SAMPLE_VALUES);
    match array.data_type() {
        DataType::Utf8 => {
            let strings = array.as_string::<i32>();
            for i in valid {
                let value = strings.value(i);
                sample.add(hasher.hash_one(value), value.len() + 4);
            }
        }
        DataType::Int64 => primitive::<Int64Type>(array, valid, &hasher, &mut sample),
        DataType::Int32 => primitive::<Int32Type>(array, valid, &hasher, &mut sample),
        DataType::Date32 => primitive::<Date32Type>(array, valid, &hasher, &mut sample),
        DataType::Decimal128(..) => primitive::<Decimal128Type>(array, valid, &hasher, &mut sample),
        DataType::Float64 => {
            let floats = array.as_primitive::<Float64Type>();
            for i in valid {
                sample.add(hasher.hash_one(floats.value(i).to_bits()), 8);
            }
        }
        DataType::Float32 => {
            let floats = array.as_primitive::<Float32Type>();
            for i in valid {
                sample.add(hasher.hash_one(floats.value(i).to_bits()), 4);
            }
        }
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => primitive::<TimestampSecondType>(array, valid, &hasher, &mut sample),
            TimeUnit::Millisecond => primitive::<TimestampMillisecondType>(array, valid, &hasher, &mut sample),
            TimeUnit::Microsecond => primitive::<TimestampMicrosecondType>(array, valid, &hasher, &mut sample),
            TimeUnit::Nanosecond => primitive::<TimestampNanosecondType>(array, valid, &hasher, &mut sample),
        },
        _ => return None,
    }
    Some(sample)
}

fn primitive<T>(array: &dyn Array, valid: impl Iterator<Item = usize>, hasher: &impl BuildHasher, sample: &mut Sample)
where
    T: ArrowPrimitiveType,
    T::Native: Hash,
{
    let values = array.as_primitive::<T>();
    for i in valid {
        sample.add(hasher.hash_one(values.value(i)), std::mem::size_of::<T::Native>());
    }
}

impl Sample {
    fn add(&mut self, hash: u64, bytes: usize) {
        *self.counts.entry(hash).or_insert(0) += 1;
        self.values += 1;
        self.bytes += bytes;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{Int64Builder, ListBuilder, StringBuilder, StructBuilder};
    use arrow_array::{BooleanArray, Int64Array, StringArray};
    use arrow_schema::{Field, Fields, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::Encoding;
    use parquet::schema::types::ColumnPath;

    use super::*;

    /// `rows` records: a unique id, one of 5 currencies, a unique name, a
    /// list of 3 items of one of 20,000 SKUs and a quantity of 1 to 9, a
    /// flag.
    fn batch(rows: usize) -> RecordBatch {
        let item_fields =
            Fields::from(vec![Field::new("sku", DataType::Utf8, true), Field::new("qty", DataType::Int64, true)]);
        let mut items = ListBuilder::new(StructBuilder::from_fields(item_fields.clone(), rows * 3))
            .with_field(Arc::new(Field::new("item", DataType::Struct(item_fields.clone()), true)));
        for row in 0..rows {
            for k in 0..3 {
                let entry = items.values();
                let n = row * 3 + k;
                entry
                    .field_builder::<StringBuilder>(0)
                    .expect("sku")
                    .append_value(format!("SKU-{:05}", (n * 7_919) % 20_000));
                entry.field_builder::<Int64Builder>(1).expect("qty").append_value((n % 9 + 1) as i64);
                entry.append(true);
            }
            items.append(true);
        }
        let items = items.finish();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("currency", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("items", items.data_type().clone(), true),
            Field::new("active", DataType::Boolean, true),
        ]));
        let ids = Int64Array::from_iter_values((0..rows as i64).map(|i| 1_000_000 + i));
        let currencies = StringArray::from_iter_values((0..rows).map(|i| ["USD", "EUR", "BRL", "JPY", "GBP"][i % 5]));
        let names = StringArray::from_iter_values((0..rows).map(|i| format!("Customer {i}")));
        let active = BooleanArray::from_iter((0..rows).map(|i| Some(i % 2 == 0)));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(ids), Arc::new(currencies), Arc::new(names), Arc::new(items), Arc::new(active)],
        )
        .expect("batch")
    }

    /// Each leaf column's path and whether its chunk is dictionary-encoded,
    /// after writing `batch` with [`for_first_batch`]; the file reads back
    /// as `batch`.
    fn written(batch: &RecordBatch) -> Vec<(String, bool)> {
        let base = WriterProperties::builder().set_dictionary_page_size_limit(128 * 1024).build();
        let properties = for_first_batch(&base, batch, 128 * 1024);
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).expect("writer");
        writer.write(batch).expect("write");
        writer.close().expect("close");
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).expect("reader");
        let chunks = reader.metadata().row_group(0).columns().to_vec();
        let back: Vec<RecordBatch> =
            reader.with_batch_size(usize::MAX).build().expect("read").map(|b| b.expect("batch")).collect();
        assert_eq!(back, std::slice::from_ref(batch), "the same values");
        chunks
            .iter()
            .map(|c| (c.column_path().string(), c.encodings().any(|e| e == Encoding::RLE_DICTIONARY)))
            .collect()
    }

    #[test]
    fn columns_whose_dictionary_would_overflow_are_written_plain_from_the_start() {
        let chosen = written(&batch(4_096));
        assert_eq!(
            chosen,
            [
                ("id".to_string(), false),
                ("currency".to_string(), true),
                ("name".to_string(), false),
                ("items.list.item.sku".to_string(), false),
                ("items.list.item.qty".to_string(), true),
                ("active".to_string(), false),
            ]
        );
    }

    #[test]
    fn a_wide_file_shares_the_dictionary_budget_among_its_columns() {
        // 400 text columns of 4,096 rows, each of 3,000 distinct values of
        // 19 bytes encoded (57 KiB of dictionary a column, estimated at
        // 88 KiB from the sample): under the per-column limit, over a
        // 400th of the file's budget (41 KiB).
        let rows = 4_096;
        let fields: Vec<Field> = (0..400).map(|c| Field::new(format!("c{c}"), DataType::Utf8, true)).collect();
        let columns: Vec<ArrayRef> = (0..400)
            .map(|c| {
                let values = (0..rows).map(|i| format!("value-{c:03}-{:05}", (i * 7_919) % 3_000));
                Arc::new(StringArray::from_iter_values(values)) as ArrayRef
            })
            .collect();
        let wide = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("batch");
        let base = WriterProperties::builder().set_dictionary_page_size_limit(512 * 1024).build();
        let properties = for_first_batch(&base, &wide, 512 * 1024);
        let share = FILE_DICTIONARY_BYTES / 400;
        let column = ColumnPath::from("c7");
        assert_eq!(properties.column_dictionary_page_size_limit(&column), share);
        assert!(!properties.dictionary_enabled(&column), "3,000 values of 19 bytes outgrow {share} bytes");
        // Five columns of the same values keep their dictionaries.
        let narrow = wide.project(&[0, 1, 2, 3, 4]).expect("projection");
        let properties = for_first_batch(&base, &narrow, 512 * 1024);
        assert_eq!(properties.column_dictionary_page_size_limit(&column), 512 * 1024);
        assert!(properties.dictionary_enabled(&ColumnPath::from("c3")));
    }

    #[test]
    fn a_first_batch_too_small_to_tell_keeps_every_dictionary() {
        let chosen = written(&batch(400));
        let dictionaries: Vec<&str> = chosen.iter().filter(|(_, d)| *d).map(|(p, _)| p.as_str()).collect();
        // 1,200 SKUs are enough to tell (at least MIN_SAMPLE), 400 ids and
        // names not.
        assert_eq!(dictionaries, ["id", "currency", "name", "items.list.item.qty"], "{chosen:?}");
    }
}
