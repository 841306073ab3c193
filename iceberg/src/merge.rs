//! Merge by primary key, copy-on-write: which of the run's rows go in, and
//! which rows of which table files come out.
//!
//! A run of a `write: merge` dataset ([`RunWrite::Merge`](tributary_core::tables::RunWrite::Merge)) commits one
//! snapshot in which the table holds one row per key, the latest version:
//!
//! 1. The run's rows, in fetch order (page by page), each keyed by its
//!    primary-key columns (arrow's row format, so any column types and
//!    several columns compare as bytes). Per key one *winner*: the row
//!    with the greatest `order_by` value (nulls lowest), ties and rows
//!    without an `order_by` going to the row fetched last. A row with a
//!    null in a key column has no key: it is added as it is (counted as
//!    `unkeyed` in the log).
//! 2. The table's live data files whose key bounds (the manifests'
//!    `lower_bounds`/`upper_bounds` of the first key column, integers and
//!    short strings) can hold a run key are the *candidates*; the others
//!    are never read. With `order_by`, the candidates are read once to
//!    find, per run key, the table's greatest version: when it is greater
//!    than the run's winner, the table's row stays and the run's is
//!    dropped (an older record sent again must not win).
//! 3. Each candidate holding a row to remove (a key the run wins or
//!    deletes, or a version older than the table's greatest) is rewritten
//!    without those rows, in its partition folder; the others stay as
//!    they are.
//! 4. One snapshot removes the rewritten files and adds their rewrites
//!    and the run's rows (`overwrite`; `append` when nothing was removed),
//!    valid only on the snapshot read in step 2: a commit in between makes
//!    the committer read the table and plan again.
//!
//! Memory: the run's rows (as Arrow) and one table file at a time; the
//! table's other files are neither read nor held. Cost: docs/persist.md,
//! "Write dispositions".

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StructArray};
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{DataType, Schema as ArrowSchema};
use iceberg::spec::{DataFile, PrimitiveLiteral};
use lake_format::meta::META_SOURCE;

/// A column of the table, as the path of names from the top-level column
/// down through struct fields (`["customer", "id"]`).
pub type ColumnPath = Vec<String>;

/// The merge keys of a run, resolved to columns of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeColumns {
    /// The primary-key columns, in `target.primary_key` order.
    pub key: Vec<ColumnPath>,
    /// The `order_by` column.
    pub order_by: Option<ColumnPath>,
    /// The `hard_delete` column.
    pub hard_delete: Option<ColumnPath>,
}

impl MergeColumns {
    /// Resolves the spec's pointers against the dataset's published schema
    /// (the record key each column came from is its `tributary.source`
    /// metadata; a column without one is matched by name).
    ///
    /// # Errors
    /// The pointer and why when a pointer names no column (no record of
    /// the dataset has had that field yet, or it is spelt otherwise).
    pub fn resolve(
        published: &ArrowSchema,
        primary_key: &[String],
        order_by: Option<&str>,
        hard_delete: Option<&str>,
    ) -> Result<Self, String> {
        let key = primary_key.iter().map(|p| column_for(published, p)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            key,
            order_by: order_by.map(|p| column_for(published, p)).transpose()?,
            hard_delete: hard_delete.map(|p| column_for(published, p)).transpose()?,
        })
    }
}

/// The column path a record pointer (`/customer/id`) lands in.
fn column_for(published: &ArrowSchema, pointer: &str) -> Result<ColumnPath, String> {
    let tokens: Vec<String> =
        pointer.split('/').skip(1).map(|token| token.replace("~1", "/").replace("~0", "~")).collect();
    let mut fields = published.fields().clone();
    let mut path = Vec::new();
    for (depth, token) in tokens.iter().enumerate() {
        let field = fields
            .iter()
            .find(|f| f.metadata().get(META_SOURCE) == Some(token))
            .or_else(|| fields.iter().find(|f| f.name() == token && !f.metadata().contains_key(META_SOURCE)))
            .ok_or_else(|| {
                format!(
                    "{pointer} names no column of the table: no record of the dataset has had the field {token:?} \
                     (as a value of one type: a field whose values conflict lands in variant columns)"
                )
            })?;
        path.push(field.name().clone());
        if depth + 1 < tokens.len() {
            match field.data_type() {
                DataType::Struct(children) => fields = children.clone(),
                other => return Err(format!("{pointer}: {} is a {other}, not an object", field.name())),
            }
        }
    }
    if path.is_empty() {
        return Err(format!("{pointer:?} names no field"));
    }
    Ok(path)
}

/// The column at `path` of `batch`, with the nulls of the structs above it.
///
/// # Errors
/// The path when a column is missing or not a struct.
pub fn column(batch: &RecordBatch, path: &[String]) -> Result<ArrayRef, String> {
    let (first, rest) = path.split_first().ok_or("an empty column path")?;
    let mut array = batch.column_by_name(first).cloned().ok_or_else(|| format!("no column {first}"))?;
    for name in rest {
        let parent = array
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| format!("{} is not a struct", path.join(".")))?;
        let child = parent.column_by_name(name).cloned().ok_or_else(|| format!("no column {}", path.join(".")))?;
        let nulls = arrow_buffer::NullBuffer::union(parent.nulls(), child.logical_nulls().as_ref());
        let data = child.to_data().into_builder().nulls(nulls).build().map_err(|e| e.to_string())?;
        array = arrow_array::make_array(data);
    }
    Ok(array)
}

/// Keys, versions and deletions of a batch's rows, encoded to compare.
pub struct Keyed {
    /// The key of each row (arrow row format), `None` with a null in a key column.
    keys: Vec<Option<Box<[u8]>>>,
    /// The `order_by` value of each row (row format: bytes compare as the
    /// values do, null lowest).
    orders: Option<Rows>,
    /// Whether each row deletes its key.
    deletes: Vec<bool>,
}

/// Encodes the merge columns of batches (of one table schema) as bytes.
pub struct KeyEncoder {
    columns: MergeColumns,
    keys: RowConverter,
    order: Option<RowConverter>,
}

impl KeyEncoder {
    /// An encoder for `columns` of batches of `schema` (the table's).
    ///
    /// # Errors
    /// A column missing from `schema`, or of a type arrow cannot order.
    pub fn new(columns: MergeColumns, schema: &ArrowSchema) -> Result<Self, String> {
        let empty = RecordBatch::new_empty(Arc::new(schema.clone()));
        let field = |path: &ColumnPath| -> Result<SortField, String> {
            Ok(SortField::new(column(&empty, path)?.data_type().clone()))
        };
        let keys = RowConverter::new(columns.key.iter().map(field).collect::<Result<_, _>>()?)
            .map_err(|e| format!("the primary key's columns cannot be compared: {e}"))?;
        let order = match &columns.order_by {
            Some(path) => Some(
                RowConverter::new(vec![field(path)?])
                    .map_err(|e| format!("the order_by column cannot be compared: {e}"))?,
            ),
            None => None,
        };
        Ok(Self { columns, keys, order })
    }

    /// The keys, versions and deletions of `batch`'s rows.
    ///
    /// # Errors
    /// A merge column missing from `batch`.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Keyed, String> {
        let key_columns =
            self.columns.key.iter().map(|path| column(batch, path)).collect::<Result<Vec<_>, String>>()?;
        let rows = self.keys.convert_columns(&key_columns).map_err(|e| e.to_string())?;
        let keys = (0..batch.num_rows())
            .map(|i| key_columns.iter().all(|c| c.is_valid(i)).then(|| Box::from(rows.row(i).as_ref())))
            .collect();
        let orders = match (&self.order, &self.columns.order_by) {
            (Some(converter), Some(path)) => {
                Some(converter.convert_columns(&[column(batch, path)?]).map_err(|e| e.to_string())?)
            }
            _ => None,
        };
        let deletes = match &self.columns.hard_delete {
            Some(path) => {
                let flags = column(batch, path)?;
                (0..batch.num_rows()).map(|i| deletes(&flags, i)).collect()
            }
            None => vec![false; batch.num_rows()],
        };
        Ok(Keyed { keys, orders, deletes })
    }
}

/// Whether the `hard_delete` value at row `i` removes the key: `true`; a
/// timestamp or date; text other than empty, `false` or `0` (a deletion
/// time sent as text). Null, `false` and other types: no.
fn deletes(column: &ArrayRef, i: usize) -> bool {
    if column.is_null(i) {
        return false;
    }
    match column.data_type() {
        DataType::Boolean => column.as_any().downcast_ref::<BooleanArray>().is_some_and(|b| b.value(i)),
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => true,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let text = arrow_cast::display::ArrayFormatter::try_new(column.as_ref(), &Default::default())
                .map(|f| f.value(i).to_string())
                .unwrap_or_default();
            !matches!(text.trim(), "" | "false" | "0")
        }
        _ => false,
    }
}

/// A row of the run: which batch, which row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowAt {
    /// Batch index (fetch order).
    pub batch: usize,
    /// Row in the batch.
    pub row: usize,
}

/// The run's winning version of one key.
#[derive(Clone, Debug)]
struct Winner {
    at: RowAt,
    order: Option<Box<[u8]>>,
    delete: bool,
    /// A table row is newer: the run's row is not added.
    superseded: bool,
}

/// A table row that stays: its data file, its row in the file, its
/// `order_by` value (row format).
#[derive(Clone, Debug)]
struct TableRow {
    file: String,
    row: usize,
    order: Box<[u8]>,
}

/// The merge plan of a run: its winners per key, and what the table's
/// versions decided.
pub struct Plan {
    winners: HashMap<Box<[u8]>, Winner>,
    unkeyed: Vec<RowAt>,
    /// Per key the run lost, the table's row that stays.
    table_keeps: HashMap<Box<[u8]>, TableRow>,
    /// Whether `order_by` decides (else the run always wins).
    ordered: bool,
}

impl Plan {
    /// Step 1: the winner per key among the run's rows (`keyed`, one per
    /// batch, in fetch order).
    pub fn of_run(keyed: &[Keyed]) -> Self {
        let mut winners: HashMap<Box<[u8]>, Winner> = HashMap::new();
        let mut unkeyed = Vec::new();
        let ordered = keyed.iter().any(|k| k.orders.is_some());
        for (batch, rows) in keyed.iter().enumerate() {
            for (row, key) in rows.keys.iter().enumerate() {
                let at = RowAt { batch, row };
                let Some(key) = key else {
                    unkeyed.push(at);
                    continue;
                };
                let order = rows.orders.as_ref().map(|o| Box::from(o.row(row).as_ref()));
                let candidate = Winner { at, order, delete: rows.deletes[row], superseded: false };
                match winners.get_mut(key) {
                    // Ties go to the row fetched last.
                    Some(current) if candidate.order >= current.order => *current = candidate,
                    Some(_) => {}
                    None => {
                        winners.insert(key.clone(), candidate);
                    }
                }
            }
        }
        Self { winners, unkeyed, table_keeps: HashMap::new(), ordered }
    }

    /// How many keys the run has, how many rows had none.
    pub fn counts(&self) -> (usize, usize) {
        (self.winners.len(), self.unkeyed.len())
    }

    /// Whether `order_by` decides, so the table's versions must be read
    /// first ([`Plan::weigh_table_rows`]).
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    /// Whether a table file with these key rows holds a key of the run.
    pub fn touches(&self, keyed: &Keyed) -> bool {
        keyed.keys.iter().flatten().any(|key| self.winners.contains_key(key))
    }

    /// Step 2, with `order_by`: the rows of table file `path` weighed
    /// against the run's winners; a table version greater than the run's
    /// (and than every table version seen before) is the one that stays.
    pub fn weigh_table_rows(&mut self, path: &str, keyed: &Keyed) {
        let Some(orders) = &keyed.orders else { return };
        for (row, key) in keyed.keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let Some(winner) = self.winners.get_mut(key) else { continue };
            let order: Box<[u8]> = Box::from(orders.row(row).as_ref());
            let beats_run = winner.order.as_ref().is_none_or(|run| order.as_ref() > run.as_ref());
            let beats_table = self.table_keeps.get(key).is_none_or(|best| order.as_ref() > best.order.as_ref());
            if beats_run && beats_table {
                winner.superseded = true;
                self.table_keeps.insert(key.clone(), TableRow { file: path.to_string(), row, order });
            }
        }
    }

    /// Step 3: which rows of table file `path` stay (`None`: all of them,
    /// the file is not rewritten).
    pub fn kept_rows(&self, path: &str, keyed: &Keyed) -> Option<BooleanArray> {
        let keep: Vec<bool> = keyed
            .keys
            .iter()
            .enumerate()
            .map(|(row, key)| match key {
                None => true,
                Some(key) if !self.winners.contains_key(key) => true,
                Some(key) => self.table_keeps.get(key).is_some_and(|kept| kept.file == path && kept.row == row),
            })
            .collect();
        (!keep.iter().all(|k| *k)).then(|| BooleanArray::from(keep))
    }

    /// The run's rows to add: per batch, a mask of the rows (the winners
    /// that delete nothing and were not superseded, and the unkeyed rows).
    pub fn run_rows(&self, batches: &[usize]) -> Vec<BooleanArray> {
        let mut masks: Vec<Vec<bool>> = batches.iter().map(|rows| vec![false; *rows]).collect();
        let added = self.winners.values().filter(|w| !w.delete && !w.superseded).map(|w| w.at);
        for at in added.chain(self.unkeyed.iter().copied()) {
            masks[at.batch][at.row] = true;
        }
        masks.into_iter().map(BooleanArray::from).collect()
    }

    /// How many keys the run deletes, and how many of its versions lost to
    /// a newer table row.
    pub fn outcome(&self) -> (usize, usize) {
        let deleted = self.winners.values().filter(|w| w.delete && !w.superseded).count();
        let stale = self.winners.values().filter(|w| w.superseded).count();
        (deleted, stale)
    }
}

/// The run's values of the first key column, when integers or strings,
/// sorted: to skip table files whose bounds hold none of them.
#[derive(Clone, Debug, Default)]
pub struct KeyRange {
    ints: Vec<i64>,
    texts: Vec<String>,
    /// Neither (another type): every file is a candidate.
    open: bool,
}

impl KeyRange {
    /// A range of these text values (e.g. one run id).
    pub fn of_texts(mut texts: Vec<String>) -> Self {
        texts.sort_unstable();
        Self { texts, ..Self::default() }
    }

    /// The first key column's values of the run's batches.
    pub fn of(batches: &[RecordBatch], columns: &MergeColumns) -> Self {
        let mut range = KeyRange::default();
        let Some(path) = columns.key.first() else { return Self { open: true, ..range } };
        for batch in batches {
            let Ok(values) = column(batch, path) else { return Self { open: true, ..KeyRange::default() } };
            match values.data_type() {
                DataType::Int64 | DataType::Int32 => {
                    let cast = arrow_cast::cast(&values, &DataType::Int64).ok();
                    let Some(ints) = cast.as_ref().and_then(|c| c.as_any().downcast_ref::<arrow_array::Int64Array>())
                    else {
                        return Self { open: true, ..KeyRange::default() };
                    };
                    range.ints.extend(ints.iter().flatten());
                }
                DataType::Utf8 => {
                    let Some(texts) = values.as_any().downcast_ref::<arrow_array::StringArray>() else {
                        return Self { open: true, ..KeyRange::default() };
                    };
                    range.texts.extend(texts.iter().flatten().map(str::to_string));
                }
                _ => return Self { open: true, ..KeyRange::default() },
            }
        }
        range.ints.sort_unstable();
        range.texts.sort_unstable();
        range
    }

    /// Whether `file` (whose first key column has field id `field_id`) may
    /// hold a run key: its bounds are missing, not exact, or some run key
    /// lies between them. Strings of 64 bytes or more may be truncated
    /// bounds, so they prune nothing.
    pub fn may_hold(&self, file: &DataFile, field_id: Option<i32>) -> bool {
        if self.open {
            return true;
        }
        let Some(id) = field_id else { return true };
        let (Some(lower), Some(upper)) = (file.lower_bounds().get(&id), file.upper_bounds().get(&id)) else {
            return true;
        };
        match (lower.literal(), upper.literal()) {
            (PrimitiveLiteral::Long(lo), PrimitiveLiteral::Long(hi)) => any_between(&self.ints, lo, hi),
            (PrimitiveLiteral::Int(lo), PrimitiveLiteral::Int(hi)) => {
                any_between(&self.ints, &i64::from(*lo), &i64::from(*hi))
            }
            (PrimitiveLiteral::String(lo), PrimitiveLiteral::String(hi)) if lo.len() < 64 && hi.len() < 64 => {
                any_between(&self.texts, lo, hi)
            }
            _ => true,
        }
    }
}

/// Whether a value of `sorted` lies in `[lo, hi]`.
fn any_between<T: Ord + ?Sized, U: std::borrow::Borrow<T> + Ord>(sorted: &[U], lo: &T, hi: &T) -> bool {
    let first = sorted.partition_point(|v| v.borrow() < lo);
    sorted.get(first).is_some_and(|v| v.borrow() <= hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::Field;

    fn batch(ids: &[Option<i64>], updated: &[&str], deleted: &[bool]) -> RecordBatch {
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("updated_at", DataType::Utf8, true),
            Field::new("deleted", DataType::Boolean, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(updated.to_vec())),
                Arc::new(BooleanArray::from(deleted.to_vec())),
            ],
        )
        .expect("batch")
    }

    fn columns(order: bool) -> MergeColumns {
        MergeColumns {
            key: vec![vec!["id".into()]],
            order_by: order.then(|| vec!["updated_at".into()]),
            hard_delete: Some(vec!["deleted".into()]),
        }
    }

    #[test]
    fn the_greatest_version_wins_ties_to_the_last_fetched_and_unkeyed_rows_stay() {
        let one = batch(&[Some(1), Some(2), None], &["2026-01-02", "2026-01-01", "x"], &[false, false, false]);
        let two =
            batch(&[Some(1), Some(2), Some(3)], &["2026-01-01", "2026-01-01", "2026-01-01"], &[false, false, true]);
        let encoder = KeyEncoder::new(columns(true), one.schema().as_ref()).expect("encoder");
        let keyed = vec![encoder.encode(&one).expect("keys"), encoder.encode(&two).expect("keys")];
        let plan = Plan::of_run(&keyed);
        assert_eq!(plan.counts(), (3, 1));
        let masks = plan.run_rows(&[3, 3]);
        // Key 1: the first page's newer row; key 2: a tie, the last
        // fetched; key 3 deletes; the unkeyed row is added.
        assert_eq!(masks[0], BooleanArray::from(vec![true, false, true]));
        assert_eq!(masks[1], BooleanArray::from(vec![false, true, false]));
        assert_eq!(plan.outcome(), (1, 0));
    }

    #[test]
    fn a_newer_table_row_stays_and_an_older_one_is_removed() {
        let run = batch(&[Some(1), Some(2)], &["2026-01-05", "2026-01-05"], &[false, false]);
        let table =
            batch(&[Some(1), Some(2), Some(9)], &["2026-01-09", "2026-01-01", "2026-01-01"], &[false, false, false]);
        let encoder = KeyEncoder::new(columns(true), run.schema().as_ref()).expect("encoder");
        let mut plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        let table_keys = encoder.encode(&table).expect("keys");
        assert!(plan.touches(&table_keys));
        plan.weigh_table_rows("f1", &table_keys);
        assert_eq!(plan.kept_rows("f1", &table_keys), Some(BooleanArray::from(vec![true, false, true])));
        assert_eq!(plan.run_rows(&[2])[0], BooleanArray::from(vec![false, true]));
        assert_eq!(plan.outcome(), (0, 1));
    }

    #[test]
    fn without_order_by_the_run_always_wins() {
        let run = batch(&[Some(1)], &["2020-01-01"], &[false]);
        let table = batch(&[Some(1)], &["2030-01-01"], &[false]);
        let encoder = KeyEncoder::new(columns(false), run.schema().as_ref()).expect("encoder");
        let mut plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        let table_keys = encoder.encode(&table).expect("keys");
        plan.weigh_table_rows("f", &table_keys);
        assert_eq!(plan.kept_rows("f", &table_keys), Some(BooleanArray::from(vec![false])));
        assert_eq!(plan.run_rows(&[1])[0], BooleanArray::from(vec![true]));
    }

    #[test]
    fn pointers_resolve_through_the_source_names_of_the_published_schema() {
        let source = |name: &str, key: &str, ty: DataType| {
            Field::new(name, ty, true).with_metadata([(META_SOURCE.to_string(), key.to_string())].into())
        };
        let published = ArrowSchema::new(vec![
            source("updated_at", "updatedAt", DataType::Utf8),
            source(
                "account",
                "account",
                DataType::Struct(vec![source("account_id", "accountId", DataType::Int64)].into()),
            ),
        ]);
        let resolved = MergeColumns::resolve(&published, &["/account/accountId".into()], Some("/updatedAt"), None)
            .expect("resolved");
        assert_eq!(resolved.key, vec![vec!["account".to_string(), "account_id".to_string()]]);
        assert_eq!(resolved.order_by, Some(vec!["updated_at".to_string()]));
        let err = MergeColumns::resolve(&published, &["/id".into()], None, None).expect_err("no id");
        assert!(err.contains("/id") && err.contains("no column"), "{err}");
    }

    #[test]
    fn key_ranges_skip_files_whose_bounds_hold_no_run_key() {
        assert!(any_between(&[1_i64, 5, 9], &4, &6));
        assert!(!any_between(&[1_i64, 5, 9], &6, &8));
        assert!(!any_between(&[1_i64, 5, 9], &10, &20));
        assert!(any_between(&["a".to_string(), "m".to_string()], "l", "n"));
    }
}
