//! A file's record batch read as the table's schema: columns by name, a
//! column or struct field the file predates null, nested fields (and their
//! metadata, such as Iceberg field ids) taken from the table.
//!
//! One function serves both places that read older files into a newer
//! schema: Persist's coalescer (pages of one run into one file; types must
//! match, [`Cast::Exact`]) and the Iceberg committer (staged files into
//! the table's types, [`Cast::Lossless`]: timestamps to microseconds,
//! narrower numbers to wider ones, never a cast that loses a value).

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, ListArray, RecordBatch, StructArray, new_null_array};
use arrow_schema::{ArrowError, DataType, Field, SchemaRef, TimeUnit};

/// Which type differences [`align`] bridges besides the nested ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
    /// None: a column's type must be the table's (a struct or list of
    /// structs may have fewer fields).
    Exact,
    /// Casts that keep every value ([`lossless`]); anything else fails.
    Lossless,
}

/// Why a file's column cannot be read as the table's.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    /// Another type, with [`Cast::Exact`].
    #[error("column {column} is {found} in a page file but {wanted} in the table")]
    Mismatch {
        /// The column (or nested field) name.
        column: String,
        /// Its type in the file.
        found: DataType,
        /// Its type in the table.
        wanted: DataType,
    },
    /// A type the table's column cannot hold without loss (a column the
    /// dataset widened from int64 to double, say), with [`Cast::Lossless`]:
    /// never truncated.
    #[error(
        "column {column} is {found} in the file but {wanted} in the table, which cannot hold it without loss (the \
         table's column types do not change)"
    )]
    Lossy {
        /// The column (or nested field) name.
        column: String,
        /// Its type in the file.
        found: DataType,
        /// Its type in the table.
        wanted: DataType,
    },
    /// A lossless cast that Arrow refused.
    #[error("column {column} is {found} in the file, {wanted} in the table: {source}")]
    Cast {
        /// The column (or nested field) name.
        column: String,
        /// Its type in the file.
        found: DataType,
        /// Its type in the table.
        wanted: DataType,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
    /// An array whose data type says struct or list but that is not one.
    #[error("column {column}: not a {expected} array")]
    Downcast {
        /// The column (or nested field) name.
        column: String,
        /// `struct` or `list`.
        expected: &'static str,
    },
    /// Arrow refused the aligned arrays (lengths or nullability).
    #[error("column {column}: {source}")]
    Arrow {
        /// The column (or nested field) name.
        column: String,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
    /// Arrow refused the aligned batch.
    #[error(transparent)]
    Batch(ArrowError),
}

/// `array` as `field`'s type: the same type as it is; a struct (or a list
/// of structs) with the table's fields, those the file lacks null; other
/// types as `cast` allows.
///
/// # Errors
/// [`AlignError`] naming the column, the file's and the table's types.
pub fn align(array: &ArrayRef, field: &Field, cast: Cast) -> Result<ArrayRef, AlignError> {
    let column = || field.name().clone();
    match (array.data_type(), field.data_type()) {
        (found, wanted) if found == wanted => Ok(array.clone()),
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let source = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or_else(|| AlignError::Downcast { column: column(), expected: "struct" })?;
            let children = fields
                .iter()
                .map(|child| match source.column_by_name(child.name()) {
                    Some(values) => align(values, child, cast),
                    None => Ok(new_null_array(child.data_type(), source.len())),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let aligned = StructArray::try_new(fields.clone(), children, source.nulls().cloned())
                .map_err(|source| AlignError::Arrow { column: column(), source })?;
            Ok(Arc::new(aligned))
        }
        (DataType::List(_), DataType::List(item)) => {
            let source = array
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or_else(|| AlignError::Downcast { column: column(), expected: "list" })?;
            let values = align(source.values(), item, cast)?;
            let aligned = ListArray::try_new(item.clone(), source.offsets().clone(), values, source.nulls().cloned())
                .map_err(|source| AlignError::Arrow { column: column(), source })?;
            Ok(Arc::new(aligned))
        }
        (found, wanted) => match cast {
            Cast::Exact => Err(AlignError::Mismatch { column: column(), found: found.clone(), wanted: wanted.clone() }),
            Cast::Lossless if lossless(found, wanted) => arrow_cast::cast(array, wanted).map_err(|source| {
                AlignError::Cast { column: column(), found: found.clone(), wanted: wanted.clone(), source }
            }),
            Cast::Lossless => Err(AlignError::Lossy { column: column(), found: found.clone(), wanted: wanted.clone() }),
        },
    }
}

/// `batch` with `target`'s columns, each [`align`]ed by name; a column the
/// batch lacks is null.
///
/// # Errors
/// [`AlignError`] of the first column that does not align, or Arrow's
/// refusal of the batch.
pub fn align_batch(batch: &RecordBatch, target: &SchemaRef, cast: Cast) -> Result<RecordBatch, AlignError> {
    let columns = target
        .fields()
        .iter()
        .map(|field| match batch.column_by_name(field.name()) {
            Some(column) => align(column, field, cast),
            None => Ok(new_null_array(field.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(target.clone(), columns).map_err(AlignError::Batch)
}

/// Whether every `found` value has the same value as `wanted`: timestamps
/// to microseconds in the same zone (or both none; `UTC` and `+00:00` are
/// one zone: Iceberg's Arrow schema spells it `+00:00`, Persist `UTC`),
/// narrower integers and floats to wider ones.
pub fn lossless(found: &DataType, wanted: &DataType) -> bool {
    use DataType::{Float16, Float32, Float64, Int8, Int16, Int32, Int64, Timestamp};
    match (found, wanted) {
        (Timestamp(_, from), Timestamp(TimeUnit::Microsecond, to)) => {
            let utc = |zone: &Option<Arc<str>>| {
                zone.as_deref().map(|z| if z.eq_ignore_ascii_case("utc") { "+00:00" } else { z }).map(str::to_string)
            };
            utc(from) == utc(to)
        }
        (Int8 | Int16, Int32 | Int64) | (Int32, Int64) => true,
        (Float16, Float32 | Float64) | (Float32, Float64) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int32Array, Int64Array, StringArray};
    use arrow_schema::{Fields, Schema};

    use super::*;

    #[test]
    fn a_struct_gains_the_tables_new_fields_as_null() {
        let old = Fields::from(vec![Field::new("a", DataType::Int64, true)]);
        let new = Fields::from(vec![Field::new("a", DataType::Int64, true), Field::new("b", DataType::Utf8, true)]);
        let array: ArrayRef =
            Arc::new(StructArray::try_new(old, vec![Arc::new(Int64Array::from(vec![1, 2]))], None).expect("struct"));
        let aligned = align(&array, &Field::new("s", DataType::Struct(new.clone()), true), Cast::Exact).expect("align");
        assert_eq!(aligned.data_type(), &DataType::Struct(new));
        let b = aligned.as_any().downcast_ref::<StructArray>().expect("struct").column_by_name("b").expect("b");
        assert_eq!(b.null_count(), 2);
    }

    #[test]
    fn casts_are_the_policys() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let wide = Field::new("n", DataType::Int64, true);
        let exact = align(&ints, &wide, Cast::Exact).expect_err("exact refuses int32 -> int64");
        assert_eq!(exact.to_string(), "column n is Int32 in a page file but Int64 in the table");
        assert_eq!(align(&ints, &wide, Cast::Lossless).expect("widen").data_type(), &DataType::Int64);
        let narrow = Field::new("n", DataType::Int32, true);
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        assert!(matches!(align(&longs, &narrow, Cast::Lossless), Err(AlignError::Lossy { .. })));
    }

    #[test]
    fn a_batch_takes_the_targets_columns_by_name() {
        let batch =
            RecordBatch::try_from_iter([("b", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)]).expect("batch");
        let target =
            Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true), Field::new("b", DataType::Utf8, true)]));
        let aligned = align_batch(&batch, &target, Cast::Exact).expect("align");
        assert_eq!(aligned.schema(), target);
        assert_eq!(aligned.column(0).null_count(), 1);
    }
}
