//! The lineage columns: every row of the lake ends with the run, the page
//! and the load time it came from, so a reader can tell runs apart and a
//! replay can be checked row by row.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, TimeUnit};

use crate::meta::META_LINEAGE;

/// Name of the lineage column holding the run id (`utf8`).
pub const LINEAGE_RUN_ID: &str = "_tributary_run_id";
/// Name of the lineage column holding the page index (`int64`).
pub const LINEAGE_PAGE: &str = "_tributary_page";
/// Name of the lineage column holding the load time (`timestamp(ms, UTC)`).
pub const LINEAGE_LOADED_AT: &str = "_tributary_loaded_at";

/// The lineage column names, in the order they end every file.
pub const LINEAGE_COLUMNS: [&str; 3] = [LINEAGE_RUN_ID, LINEAGE_PAGE, LINEAGE_LOADED_AT];

/// The lineage columns' Arrow fields, in the order they end every file;
/// each carries [`META_LINEAGE`] = `true`.
pub fn lineage_fields() -> Vec<Field> {
    let meta = || HashMap::from([(META_LINEAGE.to_string(), "true".to_string())]);
    vec![
        Field::new(LINEAGE_RUN_ID, DataType::Utf8, false).with_metadata(meta()),
        Field::new(LINEAGE_PAGE, DataType::Int64, false).with_metadata(meta()),
        Field::new(LINEAGE_LOADED_AT, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false)
            .with_metadata(meta()),
    ]
}

/// The lineage columns' values for one page: the same on every row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lineage {
    /// `_tributary_run_id`: the run the page belongs to.
    pub run_id: String,
    /// `_tributary_page`: the page's index in the run, from 0.
    pub page: u32,
    /// `_tributary_loaded_at`: when Request fetched the page (or Persist
    /// received it, for messages without `fetched_at`), milliseconds since
    /// the epoch, UTC.
    pub loaded_at_ms: i64,
}

impl Lineage {
    /// The three constant columns for `rows` rows, typed as
    /// [`lineage_fields`].
    pub fn columns(&self, rows: usize) -> Vec<ArrayRef> {
        vec![
            Arc::new(StringArray::from_iter_values(std::iter::repeat_n(self.run_id.as_str(), rows))),
            Arc::new(Int64Array::from_value(i64::from(self.page), rows)),
            Arc::new(TimestampMillisecondArray::from_value(self.loaded_at_ms, rows).with_timezone("UTC")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_have_the_fields_types() {
        let lineage = Lineage { run_id: "r1".into(), page: 3, loaded_at_ms: 1 };
        let columns = lineage.columns(2);
        let fields = lineage_fields();
        assert_eq!(fields.iter().map(|f| f.name().as_str()).collect::<Vec<_>>(), LINEAGE_COLUMNS);
        for (column, field) in columns.iter().zip(&fields) {
            assert_eq!(column.data_type(), field.data_type(), "{}", field.name());
            assert_eq!(column.len(), 2);
        }
    }
}
