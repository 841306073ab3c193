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
//!
//!    A merge column is read with its variant columns (its *family*,
//!    `lake_format::variant`): a key sent once as `17` and once as
//!    `"A-17"` is a key either way (the value and the member holding it
//!    make the key), a `hard_delete` value in a variant column deletes by
//!    the same rule, and beside a timestamp `order_by` a version in a
//!    variant is read as an instant when it is one (epoch numbers,
//!    `2026-12-01 10:00:00`: `as_instants`). A version that reads as
//!    none (`"soon"`) is *unranked*: it ties with every version, so the
//!    row fetched last wins (the run's over the table's), and is counted
//!    as `unranked` in the run's table notes.
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
use lake_format::lineage::LINEAGE_COLUMNS;
use lake_format::meta::{META_LINEAGE, META_PARTITION, META_SOURCE, META_VARIANT_OF};

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
    /// An `order_by` or `hard_delete` pointer that names no column yet (no
    /// record of the dataset has had a value there: a version field null
    /// until a record is first updated, a soft-delete field absent or null
    /// on every live record) resolves to `None` for this run: no version
    /// is ranked by it (as if all were null, the lowest: the row fetched
    /// last wins) and nothing is deleted by it. The returned notes (the
    /// run's table notes: its summary, manifest and run-completed event)
    /// say so, naming the fields the records do have there, so that a
    /// misspelt pointer is seen.
    ///
    /// # Errors
    /// The pointer and why when a `primary_key` pointer names no column,
    /// when an `order_by` or `hard_delete` pointer names none but a field
    /// spelt the same but for case or `_`/`-` does (`/updated_at` for
    /// `updatedAt`: a misspelt pointer, which would rank or delete
    /// nothing), or when a pointer steps into a value that is not an
    /// object.
    pub fn resolve(
        published: &ArrowSchema,
        primary_key: &[String],
        order_by: Option<&str>,
        hard_delete: Option<&str>,
    ) -> Result<(Self, Vec<String>), String> {
        let required = |field: &str, pointer: &str| -> Result<ColumnPath, String> {
            column_for(published, pointer)?.map_err(|missing| format!("target.{field}: {}", missing.why(pointer)))
        };
        let key = primary_key.iter().map(|pointer| required("primary_key", pointer)).collect::<Result<Vec<_>, _>>()?;
        let mut notes = Vec::new();
        let mut optional = |field: &str, pointer: Option<&str>, without: &str| -> Result<Option<ColumnPath>, String> {
            let Some(pointer) = pointer else { return Ok(None) };
            match column_for(published, pointer)? {
                Ok(path) => Ok(Some(path)),
                Err(missing) if missing.near().is_some() => Err(format!("target.{field}: {}", missing.why(pointer))),
                Err(missing) => {
                    let note = format!(
                        "merge: target.{field} {pointer}: no record of the dataset has had a value there yet, so \
                         {without} ({}; keys are case-sensitive: check the pointer)",
                        missing.present()
                    );
                    tracing::warn!(pointer, "{note}");
                    notes.push(note);
                    Ok(None)
                }
            }
        };
        let order_by =
            optional("order_by", order_by, "this run's versions were not ranked by it (the row fetched last won)")?;
        let hard_delete = optional("hard_delete", hard_delete, "this run deleted nothing by it")?;
        Ok((Self { key, order_by, hard_delete }, notes))
    }
}

/// A pointer's field that has no column: its name, and the record keys
/// that do have one where it was looked for.
#[derive(Debug)]
struct Missing {
    token: String,
    present: Vec<String>,
}

impl Missing {
    /// The field there spelt as `token` but for case, `_` and `-`
    /// (`updatedAt` for `updated_at`).
    fn near(&self) -> Option<&str> {
        let fold = |name: &str| -> String {
            name.chars().filter(|c| !matches!(c, '_' | '-')).flat_map(char::to_lowercase).collect()
        };
        let token = fold(&self.token);
        self.present.iter().find(|p| fold(p) == token).map(String::as_str)
    }

    /// The fields there, named for an error (the first 12).
    fn present(&self) -> String {
        if self.present.is_empty() {
            return "the object there has no field with a column".into();
        }
        let mut names: Vec<String> = self.present.iter().take(12).map(|p| format!("{p:?}")).collect();
        if self.present.len() > 12 {
            names.push(format!("and {} more", self.present.len() - 12));
        }
        format!("the records' fields there: {}", names.join(", "))
    }

    /// Why `pointer` names no column.
    fn why(&self, pointer: &str) -> String {
        let token = &self.token;
        match self.near() {
            Some(other) => format!(
                "{pointer} names no column of the table: no record has the field {token:?}, but records have \
                 {other:?} (keys are case-sensitive and spelt as sent)"
            ),
            None => format!(
                "{pointer} names no column of the table: no record of the dataset has had a value in the field \
                 {token:?} ({}; a field null on every record has no column, and one whose values conflict lands \
                 in variant columns)",
                self.present()
            ),
        }
    }
}

/// The column path a record pointer (`/customer/id`) lands in; `Ok(Err(missing))`
/// when one of its fields has no column (yet).
///
/// # Errors
/// A pointer of no field, or stepping into a column that is not a struct.
fn column_for(published: &ArrowSchema, pointer: &str) -> Result<Result<ColumnPath, Missing>, String> {
    let tokens: Vec<String> =
        pointer.split('/').skip(1).map(|token| token.replace("~1", "/").replace("~0", "~")).collect();
    let mut fields = published.fields().clone();
    let mut path = Vec::new();
    for (depth, token) in tokens.iter().enumerate() {
        let found = fields
            .iter()
            .find(|f| f.metadata().get(META_SOURCE) == Some(token))
            .or_else(|| fields.iter().find(|f| f.name() == token && !f.metadata().contains_key(META_SOURCE)));
        let Some(field) = found else {
            let present = fields
                .iter()
                .filter(|f| {
                    let meta = f.metadata();
                    !LINEAGE_COLUMNS.contains(&f.name().as_str())
                        && !meta.contains_key(META_VARIANT_OF)
                        && !meta.contains_key(META_LINEAGE)
                        && !meta.contains_key(META_PARTITION)
                })
                .map(|f| f.metadata().get(META_SOURCE).unwrap_or(f.name()).clone())
                .collect();
            return Ok(Err(Missing { token: token.clone(), present }));
        };
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
    Ok(Ok(path))
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
    /// The key of each row (arrow row format), `None` when a key column
    /// and its variants are all null.
    keys: Vec<Option<Box<[u8]>>>,
    /// The `order_by` value of each row (row format: bytes compare as the
    /// values do, null lowest).
    orders: Option<Rows>,
    /// Whether each row's `order_by` value is in a variant column (the
    /// column itself null): a version that cannot be ranked.
    unranked: Vec<bool>,
    /// Whether each row deletes its key.
    deletes: Vec<bool>,
    /// Rows whose `hard_delete` text said neither yes nor no ([`Deletion::Unclear`]).
    unclear: usize,
    /// Whether a row's key is held by a variant column only (the first
    /// key column null): the first column's bounds cannot prune files.
    variant_keys: bool,
    /// Rows with a key value in a variant column of any key column (the
    /// column itself null): a value of another kind than its column's.
    variant_keyed: usize,
}

impl Keyed {
    /// Takes the rows marked in `rows` out of the merge: no key, so they
    /// neither weigh nor are matched (a replaced run's rows, removed by
    /// the caller).
    pub fn forget(&mut self, rows: &[bool]) {
        for (key, forget) in self.keys.iter_mut().zip(rows) {
            if *forget {
                *key = None;
            }
        }
    }
}

/// Encodes the merge columns of batches (of one table schema) as bytes.
pub struct KeyEncoder {
    columns: MergeColumns,
    /// Per key column, its family: the column, then its variants.
    key_families: Vec<Vec<ColumnPath>>,
    keys: RowConverter,
    order: Option<RowConverter>,
    /// The `order_by` column's variants.
    order_variants: Vec<ColumnPath>,
    /// The `hard_delete` column and its variants.
    delete_family: Vec<ColumnPath>,
}

/// The variant columns of the column at `path` in `schema`: its siblings
/// named `<name>__<suffix>` (`lake_format::variant::SUFFIXES`), but the
/// `__text` companion, which repeats the column's own value as text.
fn variants_of(schema: &ArrowSchema, path: &ColumnPath) -> Vec<ColumnPath> {
    let Some((name, parent)) = path.split_last() else { return Vec::new() };
    let mut fields = schema.fields().clone();
    for step in parent {
        match fields.iter().find(|f| f.name() == step).map(|f| f.data_type()) {
            Some(DataType::Struct(children)) => fields = children.clone(),
            _ => return Vec::new(),
        }
    }
    fields
        .iter()
        .filter(|f| {
            f.name() != name
                && lake_format::variant::family_of_name(f.name()) == name
                && !f.name().ends_with(&format!("__{}", lake_format::variant::TEXT))
        })
        .map(|f| parent.iter().cloned().chain([f.name().clone()]).collect())
        .collect()
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
        let family = |path: &ColumnPath| -> Vec<ColumnPath> {
            std::iter::once(path.clone()).chain(variants_of(schema, path)).collect()
        };
        let key_families: Vec<Vec<ColumnPath>> = columns.key.iter().map(family).collect();
        let keys = RowConverter::new(key_families.iter().flatten().map(field).collect::<Result<_, _>>()?)
            .map_err(|e| format!("the primary key's columns cannot be compared: {e}"))?;
        let order_variants = columns.order_by.as_ref().map(|path| variants_of(schema, path)).unwrap_or_default();
        let delete_family = columns.hard_delete.as_ref().map(family).unwrap_or_default();
        let order = match &columns.order_by {
            Some(path) => Some(
                RowConverter::new(vec![field(path)?])
                    .map_err(|e| format!("the order_by column cannot be compared: {e}"))?,
            ),
            None => None,
        };
        Ok(Self { columns, key_families, keys, order, order_variants, delete_family })
    }

    /// The keys, versions and deletions of `batch`'s rows.
    ///
    /// # Errors
    /// A merge column missing from `batch`.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Keyed, String> {
        let columns =
            |paths: &[ColumnPath]| paths.iter().map(|path| column(batch, path)).collect::<Result<Vec<_>, _>>();
        let families = self.key_families.iter().map(|family| columns(family)).collect::<Result<Vec<_>, _>>()?;
        let rows = self.keys.convert_columns(&families.concat()).map_err(|e| e.to_string())?;
        let keys = (0..batch.num_rows())
            .map(|i| {
                families
                    .iter()
                    .all(|family| family.iter().any(|c| c.is_valid(i)))
                    .then(|| Box::from(rows.row(i).as_ref()))
            })
            .collect();
        let in_variant =
            |family: &[ArrayRef], i: usize| family[0].is_null(i) && family[1..].iter().any(|c| c.is_valid(i));
        let variant_keys = families.first().is_some_and(|family| (0..batch.num_rows()).any(|i| in_variant(family, i)));
        let variant_keyed =
            (0..batch.num_rows()).filter(|&i| families.iter().any(|family| in_variant(family, i))).count();
        let (orders, unranked) = match (&self.order, &self.columns.order_by) {
            (Some(converter), Some(path)) => {
                let variants = columns(&self.order_variants)?;
                let order = as_instants(column(batch, path)?, &variants);
                let unranked =
                    (0..batch.num_rows()).map(|i| order.is_null(i) && variants.iter().any(|v| v.is_valid(i))).collect();
                (Some(converter.convert_columns(&[order]).map_err(|e| e.to_string())?), unranked)
            }
            _ => (None, vec![false; batch.num_rows()]),
        };
        let flags = columns(&self.delete_family)?;
        let mut unclear = 0;
        let deletes = (0..batch.num_rows())
            .map(|i| {
                let said: Vec<Deletion> = flags.iter().map(|flag| deletion(flag, i)).collect();
                unclear += usize::from(said.contains(&Deletion::Unclear));
                said.contains(&Deletion::Delete)
            })
            .collect();
        Ok(Keyed { keys, orders, unranked, deletes, unclear, variant_keys, variant_keyed })
    }
}

/// A timestamp `order_by` column with the instants its variants hold
/// filled in where it is null: epoch numbers (`__int64`, `__float64`:
/// seconds, or milliseconds when beyond 1e11, as a time partition reads
/// them) and text in another common form (`__string`: `2026-12-01
/// 10:00:00`, `2026-12-01`, taken as UTC). Another column type, or a
/// value none of these reads, stays as it is (null: unranked).
fn as_instants(order: ArrayRef, variants: &[ArrayRef]) -> ArrayRef {
    use arrow_array::TimestampMicrosecondArray;
    let Some(base) = order.as_any().downcast_ref::<TimestampMicrosecondArray>() else { return order };
    if variants.is_empty() || base.null_count() == 0 {
        return order;
    }
    let filled: TimestampMicrosecondArray = (0..base.len())
        .map(|i| {
            if base.is_valid(i) {
                return Some(base.value(i));
            }
            variants.iter().find_map(|variant| instant_micros(variant, i))
        })
        .collect();
    Arc::new(filled.with_timezone_opt(base.timezone()))
}

/// The instant (µs since the epoch, UTC) that row `i` of a variant column
/// holds, when it reads as one ([`as_instants`]).
fn instant_micros(variant: &ArrayRef, i: usize) -> Option<i64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    if variant.is_null(i) {
        return None;
    }
    let epoch = |n: f64| -> Option<i64> {
        let millis = if n.abs() < 1e11 { n * 1000.0 } else { n };
        chrono::DateTime::from_timestamp_millis(millis as i64).map(|t| t.timestamp_micros())
    };
    match variant.data_type() {
        DataType::Int64 => epoch(variant.as_primitive::<Int64Type>().value(i) as f64),
        DataType::Float64 => epoch(variant.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => {
            let text = variant.as_string::<i32>().value(i).trim();
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
                return Some(t.timestamp_micros());
            }
            ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M"]
                .iter()
                .find_map(|format| chrono::NaiveDateTime::parse_from_str(text, format).ok())
                .or_else(|| chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc().timestamp_micros())
        }
        _ => None,
    }
}

/// A value of a text `order_by` column in `batches` that does not sort as
/// text the way it reads (anything but a date or time written
/// `YYYY-MM-DD…`: `"9"` sorts after `"10"`, `"12/31/2025"` after
/// `"01/02/2026"`), to warn with; `None` for a column of another type or
/// when every value starts with a date.
pub fn text_order_hazard(batches: &[RecordBatch], columns: &MergeColumns) -> Option<String> {
    use arrow_array::cast::AsArray;
    let path = columns.order_by.as_ref()?;
    batches.iter().find_map(|batch| {
        let values = column(batch, path).ok()?;
        let texts = values.as_string_opt::<i32>()?;
        texts
            .iter()
            .flatten()
            .find(|text| {
                text.trim().get(..10).is_none_or(|date| chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_err())
            })
            .map(|text| text.chars().take(40).collect())
    })
}

/// What a `hard_delete` value says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deletion {
    /// Removes the key.
    Delete,
    /// Keeps it: null, `false`, `0`, or a "no" word.
    Keep,
    /// Text that is neither a yes/no word, a number nor a time
    /// (`"active"`): kept, and counted for a warning.
    Unclear,
}

/// What the `hard_delete` value at row `i` (of the column or one of its
/// variants) says: `true`, a number other than 0, a timestamp or date
/// delete; text deletes when it is `true`, `t`, `yes`, `y` (any case), a
/// number other than 0, or a date or time (`2026-12-01…`, a deletion time
/// sent as text); `false`, `f`, `no`, `n`, `null`, `none`, empty text and
/// `0` keep the key; other text keeps it too, as [`Deletion::Unclear`].
fn deletion(column: &ArrayRef, i: usize) -> Deletion {
    let says = |yes: bool| if yes { Deletion::Delete } else { Deletion::Keep };
    if column.is_null(i) {
        return Deletion::Keep;
    }
    let text = || {
        arrow_cast::display::ArrayFormatter::try_new(column.as_ref(), &Default::default())
            .map(|f| f.value(i).to_string())
            .unwrap_or_default()
    };
    match column.data_type() {
        DataType::Boolean => says(column.as_any().downcast_ref::<BooleanArray>().is_some_and(|b| b.value(i))),
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 => Deletion::Delete,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => text_deletion(&text()),
        data_type if data_type.is_numeric() => says(text().parse::<f64>().is_ok_and(|n| n != 0.0)),
        _ => Deletion::Keep,
    }
}

/// [`deletion`] of a text value.
fn text_deletion(text: &str) -> Deletion {
    let word = text.trim().to_ascii_lowercase();
    match word.as_str() {
        "true" | "t" | "yes" | "y" => return Deletion::Delete,
        "" | "false" | "f" | "no" | "n" | "null" | "none" => return Deletion::Keep,
        _ => {}
    }
    if let Ok(number) = word.parse::<f64>() {
        return if number != 0.0 { Deletion::Delete } else { Deletion::Keep };
    }
    // A date, or a time after it (`2026-12-01`, `2026-12-01T10:00:00+02:00`, `2026-12-01 10:00`).
    if word.get(..10).is_some_and(|date| chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok()) {
        return Deletion::Delete;
    }
    Deletion::Unclear
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
    /// Its `order_by` value is in a variant column: it ties with every version.
    unranked: bool,
    delete: bool,
    /// A table row is newer: the run's row is not added.
    superseded: bool,
    /// A table file holds a row of this key ([`Plan::note_table_keys`]).
    in_table: bool,
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
    /// Rows of the run and the table whose version could not be ranked.
    unranked: usize,
    /// Rows of the run whose `hard_delete` text said neither yes nor no.
    unclear: usize,
    /// Whether a run key is held by a variant column only.
    variant_keys: bool,
    /// Rows of the run with a key value in a variant column.
    variant_keyed: usize,
    /// Rows of the run that lost to another version of their key in the
    /// same run.
    repeated: usize,
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
        let mut unranked = 0;
        let mut repeated = 0;
        let ordered = keyed.iter().any(|k| k.orders.is_some());
        for (batch, rows) in keyed.iter().enumerate() {
            for (row, key) in rows.keys.iter().enumerate() {
                let at = RowAt { batch, row };
                let Some(key) = key else {
                    unkeyed.push(at);
                    continue;
                };
                let order = rows.orders.as_ref().map(|o| Box::from(o.row(row).as_ref()));
                unranked += usize::from(rows.unranked[row]);
                let candidate = Winner {
                    at,
                    order,
                    unranked: rows.unranked[row],
                    delete: rows.deletes[row],
                    superseded: false,
                    in_table: false,
                };
                match winners.get_mut(key) {
                    // Ties go to the row fetched last; an unranked version ties with every one.
                    Some(current) if candidate.unranked || current.unranked || candidate.order >= current.order => {
                        repeated += 1;
                        *current = candidate
                    }
                    Some(_) => repeated += 1,
                    None => {
                        winners.insert(key.clone(), candidate);
                    }
                }
            }
        }
        let variant_keys = keyed.iter().any(|k| k.variant_keys);
        let variant_keyed = keyed.iter().map(|k| k.variant_keyed).sum();
        let unclear = keyed.iter().map(|k| k.unclear).sum();
        Self {
            winners,
            unkeyed,
            unranked,
            unclear,
            variant_keys,
            variant_keyed,
            repeated,
            table_keeps: HashMap::new(),
            ordered,
        }
    }

    /// How many of the run's rows lost to another version of their key in
    /// the same run (the newer by `order_by`, or the one fetched last): a
    /// page or run that holds a key twice adds one row for it.
    pub fn repeated(&self) -> usize {
        self.repeated
    }

    /// Records which of the run's keys a table file holds (its rows'
    /// keys, `keyed`), so that [`Plan::outcome`] counts as deleted only
    /// the keys the table held.
    pub fn note_table_keys(&mut self, keyed: &Keyed) {
        for key in keyed.keys.iter().flatten() {
            if let Some(winner) = self.winners.get_mut(key) {
                winner.in_table = true;
            }
        }
    }

    /// How many of the run's rows held a key value of another kind than
    /// its column's (in a variant column: `"4"` in `id__string` beside an
    /// `int64` `id`). A key's value and its kind make the key, so such a
    /// row never matches a row keyed by the column's own kind.
    pub fn variant_keyed(&self) -> usize {
        self.variant_keyed
    }

    /// How many keys the run has, how many rows had none.
    pub fn counts(&self) -> (usize, usize) {
        (self.winners.len(), self.unkeyed.len())
    }

    /// How many versions (of the run, and of the table files weighed so
    /// far) had their `order_by` value in a variant column, so the row
    /// fetched last won.
    pub fn unranked(&self) -> usize {
        self.unranked
    }

    /// How many of the run's rows had a `hard_delete` text that said
    /// neither yes nor no (`"active"`): their keys were kept.
    pub fn unclear_deletions(&self) -> usize {
        self.unclear
    }

    /// Whether a key of the run is held by a variant column only, so the
    /// first key column's file bounds cannot rule a file out
    /// ([`KeyRange::of`] is then to be opened).
    pub fn has_variant_keys(&self) -> bool {
        self.variant_keys
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
            // An unranked version, the table's or the run's, ties: the
            // run's row, fetched last, wins.
            if keyed.unranked[row] || winner.unranked {
                self.unranked += usize::from(keyed.unranked[row]);
                continue;
            }
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

    /// How many keys the run deletes from the table, how many it asks to
    /// delete that no table file held ([`Plan::note_table_keys`]: deleted
    /// before, or never added), and how many of its versions lost to a
    /// newer table row.
    pub fn outcome(&self) -> Outcome {
        let asked = self.winners.values().filter(|w| w.delete && !w.superseded);
        let (deleted, absent) = asked.fold((0, 0), |(d, a), w| if w.in_table { (d + 1, a) } else { (d, a + 1) });
        let stale = self.winners.values().filter(|w| w.superseded).count();
        Outcome { deleted, absent, stale }
    }
}

/// What a run's merge did to its keys ([`Plan::outcome`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Keys deleted from the table by `target.hard_delete`.
    pub deleted: usize,
    /// Keys the run marked deleted that no table row held.
    pub absent: usize,
    /// Versions of the run left out as older than the table's row.
    pub stale: usize,
}

impl Outcome {
    /// Nothing to report: no deletion asked, no version left out.
    pub fn is_empty(&self) -> bool {
        *self == Outcome::default()
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
    /// A range that rules out no file.
    pub fn all() -> Self {
        Self { open: true, ..Self::default() }
    }

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
        // Keys 1 and 2 came twice: one version of each left out.
        assert_eq!(plan.repeated(), 2);
        // Key 3's deletion finds no table row until a table file holds one.
        let mut plan = plan;
        assert_eq!(plan.outcome(), Outcome { deleted: 0, absent: 1, stale: 0 });
        let table = batch(&[Some(3), Some(7)], &["2026-01-01", "2026-01-01"], &[false, false]);
        plan.note_table_keys(&encoder.encode(&table).expect("keys"));
        assert_eq!(plan.outcome(), Outcome { deleted: 1, absent: 0, stale: 0 });
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
        assert_eq!(plan.outcome(), Outcome { deleted: 0, absent: 0, stale: 1 });
        assert_eq!(plan.repeated(), 0);
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
        let (resolved, notes) =
            MergeColumns::resolve(&published, &["/account/accountId".into()], Some("/updatedAt"), None)
                .expect("resolved");
        assert_eq!(resolved.key, vec![vec!["account".to_string(), "account_id".to_string()]]);
        assert_eq!(resolved.order_by, Some(vec!["updated_at".to_string()]));
        assert!(notes.is_empty(), "{notes:?}");
        let err = MergeColumns::resolve(&published, &["/id".into()], None, None).expect_err("no id");
        assert!(err.contains("target.primary_key: /id") && err.contains("no column"), "{err}");
        assert!(err.contains(r#""updatedAt", "account""#), "the fields there are named: {err}");
        // A version or deletion field no record has had a value in yet
        // (null until a record is updated, absent on every live record):
        // the run merges without it, and its table notes say so, naming
        // the fields there.
        let (resolved, notes) =
            MergeColumns::resolve(&published, &["/account/accountId".into()], Some("/version"), Some("/deletedAt"))
                .expect("resolved without them");
        assert_eq!((resolved.order_by, resolved.hard_delete), (None, None));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("target.order_by /version") && notes[0].contains("not ranked"), "{notes:?}");
        assert!(
            notes[1].contains("target.hard_delete /deletedAt") && notes[1].contains("deleted nothing"),
            "{notes:?}"
        );
        assert!(notes[0].contains(r#""updatedAt", "account""#), "{notes:?}");
        // Spelt as a field is but for case, `_` or `-`: a misspelt
        // pointer, which would rank or delete nothing; the commit fails.
        let err = MergeColumns::resolve(&published, &["/account/accountId".into()], Some("/updated_at"), None)
            .expect_err("snake case");
        assert!(
            err.contains("target.order_by: /updated_at names no column")
                && err.contains(r#"but records have "updatedAt""#),
            "{err}"
        );
        let err = MergeColumns::resolve(&published, &["/account/accountId".into()], Some("/account/AccountID"), None)
            .expect_err("case");
        assert!(err.contains(r#"but records have "accountId""#), "{err}");
        let err = MergeColumns::resolve(&published, &["/account/accountId".into()], None, Some("/UpdatedAt"))
            .expect_err("case");
        assert!(err.contains("target.hard_delete: /UpdatedAt") && err.contains(r#""updatedAt""#), "{err}");
        let err = MergeColumns::resolve(&published, &["/updatedAt/x".into()], None, None).expect_err("not an object");
        assert!(err.contains("not an object"), "{err}");
    }

    /// Rows of `id`, `id__string`, `updated_at`, `updated_at__int64`,
    /// `updated_at__text` (the companion, no member), `deleted`,
    /// `deleted__int64`, `deleted__string`.
    #[allow(clippy::type_complexity)]
    fn family_batch(
        rows: &[(Option<i64>, Option<&str>, Option<&str>, Option<i64>, Option<bool>, Option<i64>, Option<&str>)],
    ) -> RecordBatch {
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("id__string", DataType::Utf8, true),
            Field::new("updated_at", DataType::Utf8, true),
            Field::new("updated_at__int64", DataType::Int64, true),
            Field::new("updated_at__text", DataType::Utf8, true),
            Field::new("deleted", DataType::Boolean, true),
            Field::new("deleted__int64", DataType::Int64, true),
            Field::new("deleted__string", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
                // The companion repeats the column's value: never a version of its own.
                Arc::new(StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
                Arc::new(BooleanArray::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.5).collect::<Vec<_>>())),
                Arc::new(StringArray::from(rows.iter().map(|r| r.6).collect::<Vec<_>>())),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn a_version_whose_order_by_is_in_a_variant_ties_so_the_row_fetched_last_wins() {
        // The table's version of key 1 is dated; the run's came as an
        // epoch number (`updated_at__int64`): it cannot be ranked, and the
        // run's row, fetched last, replaces the table's. Key 2's run row
        // is dated and older than the table's: the table's stays.
        let table = family_batch(&[
            (Some(1), None, Some("2026-01-09"), None, None, None, None),
            (Some(2), None, Some("2026-01-09"), None, None, None, None),
        ]);
        let run = family_batch(&[
            (Some(1), None, None, Some(1_767_225_600), None, None, None),
            (Some(2), None, Some("2026-01-01"), None, None, None, None),
        ]);
        let encoder = KeyEncoder::new(columns(true), run.schema().as_ref()).expect("encoder");
        let mut plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        let table_keys = encoder.encode(&table).expect("keys");
        plan.weigh_table_rows("f", &table_keys);
        assert_eq!(plan.kept_rows("f", &table_keys), Some(BooleanArray::from(vec![false, true])));
        assert_eq!(plan.run_rows(&[2])[0], BooleanArray::from(vec![true, false]));
        assert_eq!(plan.unranked(), 1);
        assert_eq!(plan.outcome(), Outcome { deleted: 0, absent: 0, stale: 1 });

        // Within a run, an unranked version ties too: the one fetched last wins.
        let run = family_batch(&[
            (Some(1), None, None, Some(1_767_225_600), None, None, None),
            (Some(1), None, Some("2026-01-01"), None, None, None, None),
            (Some(2), None, Some("2026-01-09"), None, None, None, None),
            (Some(2), None, None, Some(5), None, None, None),
        ]);
        let plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        assert_eq!(plan.run_rows(&[4])[0], BooleanArray::from(vec![false, true, false, true]));
        assert_eq!(plan.unranked(), 2);
    }

    #[test]
    fn a_key_held_by_a_variant_column_is_a_key_and_matches_the_same_value_only() {
        // `"A-17"` in `id__string` is a key (it was added again on every
        // run as unkeyed); `17` and `"17"` are different keys.
        let table = family_batch(&[
            (None, Some("A-17"), Some("2026-01-01"), None, None, None, None),
            (Some(17), None, Some("2026-01-01"), None, None, None, None),
        ]);
        let run = family_batch(&[
            (None, Some("A-17"), Some("2026-01-02"), None, None, None, None),
            (None, Some("17"), Some("2026-01-02"), None, None, None, None),
        ]);
        let encoder = KeyEncoder::new(columns(true), run.schema().as_ref()).expect("encoder");
        let keyed = encoder.encode(&run).expect("keys");
        assert!(keyed.variant_keys);
        let mut plan = Plan::of_run(&[keyed]);
        assert_eq!(plan.counts(), (2, 0));
        // Both run rows' keys are in the variant: the table notes count them.
        assert_eq!(plan.variant_keyed(), 2);
        assert!(plan.has_variant_keys());
        let table_keys = encoder.encode(&table).expect("keys");
        plan.weigh_table_rows("f", &table_keys);
        assert_eq!(plan.kept_rows("f", &table_keys), Some(BooleanArray::from(vec![false, true])));
        assert_eq!(plan.run_rows(&[2])[0], BooleanArray::from(vec![true, true]));
    }

    #[test]
    fn a_hard_delete_value_in_a_variant_column_deletes_by_the_same_rule() {
        // A deletion time sent as text beside booleans (`deleted__string`)
        // and a 1 (`deleted__int64`) delete; a 0, "false" and null do not.
        let run = family_batch(&[
            (Some(1), None, Some("2026-01-02"), None, None, None, Some("2026-12-01T10:00:00+02:00")),
            (Some(2), None, Some("2026-01-02"), None, None, Some(1), None),
            (Some(3), None, Some("2026-01-02"), None, None, Some(0), None),
            (Some(4), None, Some("2026-01-02"), None, None, None, Some("false")),
            (Some(5), None, Some("2026-01-02"), None, Some(true), None, None),
            (Some(6), None, Some("2026-01-02"), None, None, None, None),
        ]);
        let encoder = KeyEncoder::new(columns(true), run.schema().as_ref()).expect("encoder");
        let plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        assert_eq!(plan.run_rows(&[6])[0], BooleanArray::from(vec![false, false, true, true, false, true]));
        // No table file holds them: asked, not deleted.
        assert_eq!(plan.outcome(), Outcome { deleted: 0, absent: 3, stale: 0 });
    }

    #[test]
    fn epoch_numbers_and_other_time_text_beside_a_timestamp_order_by_rank_as_instants() {
        use arrow_array::{Float64Array, TimestampMicrosecondArray};
        let micros = |text: &str| chrono::DateTime::parse_from_rfc3339(text).expect("time").timestamp_micros();
        let base =
            TimestampMicrosecondArray::from(vec![Some(micros("2026-01-09T00:00:00Z")), None, None, None, None, None])
                .with_timezone("+00:00");
        let ints = Int64Array::from(vec![None, Some(1_700_000_000), Some(1_700_000_000_000), None, None, None]);
        let floats = Float64Array::from(vec![None, None, None, Some(1_700_000_000.5), None, None]);
        let texts = StringArray::from(vec![None, None, None, None, Some("2025-06-01 10:00:00"), Some("soon")]);
        let filled = as_instants(Arc::new(base), &[Arc::new(ints), Arc::new(floats), Arc::new(texts)]);
        let filled = filled.as_any().downcast_ref::<TimestampMicrosecondArray>().expect("timestamps");
        assert_eq!(filled.timezone(), Some("+00:00"));
        let got: Vec<Option<i64>> = filled.iter().collect();
        assert_eq!(
            got,
            [
                Some(micros("2026-01-09T00:00:00Z")),
                Some(1_700_000_000_000_000),
                Some(1_700_000_000_000_000),
                Some(1_700_000_000_500_000),
                Some(micros("2025-06-01T10:00:00Z")),
                // No instant: the row stays unranked.
                None,
            ]
        );
    }

    #[test]
    fn hard_delete_text_deletes_on_yes_words_numbers_and_times_only() {
        // A trial's vendor sent "False" (Python, .NET) and "N": every
        // active record was deleted by the rule "text other than false or 0".
        for keep in ["False", "FALSE", "no", "N", "null", "None", "0.0", "0", "", " ", "f"] {
            assert_eq!(text_deletion(keep), Deletion::Keep, "{keep:?}");
        }
        for delete in ["true", "True", "YES", "y", "1", "2", "2026-01-02", "2026-01-02 10:00", "2026-01-02T10:00:00Z"] {
            assert_eq!(text_deletion(delete), Deletion::Delete, "{delete:?}");
        }
        for unclear in ["active", "deleted", "2026-13-45"] {
            assert_eq!(text_deletion(unclear), Deletion::Unclear, "{unclear:?}");
        }
        let run = family_batch(&[
            (Some(1), None, Some("2026-01-02"), None, None, None, Some("active")),
            (Some(2), None, Some("2026-01-02"), None, None, None, Some("False")),
            (Some(3), None, Some("2026-01-02"), None, None, None, Some("yes")),
        ]);
        let encoder = KeyEncoder::new(columns(true), run.schema().as_ref()).expect("encoder");
        let plan = Plan::of_run(&[encoder.encode(&run).expect("keys")]);
        assert_eq!(plan.run_rows(&[3])[0], BooleanArray::from(vec![true, true, false]));
        assert_eq!(plan.unclear_deletions(), 1);
    }

    #[test]
    fn a_text_order_by_that_does_not_sort_as_it_reads_is_named() {
        let dated = batch(&[Some(1)], &["2026-01-02T00:00:00+02:00"], &[false]);
        assert_eq!(text_order_hazard(std::slice::from_ref(&dated), &columns(true)), None);
        let slashed = batch(&[Some(1), Some(2)], &["2026-01-02", "12/31/2025"], &[false, false]);
        assert_eq!(text_order_hazard(&[dated, slashed], &columns(true)), Some("12/31/2025".to_string()));
        assert_eq!(text_order_hazard(&[batch(&[Some(1)], &["9"], &[false])], &columns(false)), None, "no order_by");
    }

    #[test]
    fn key_ranges_skip_files_whose_bounds_hold_no_run_key() {
        assert!(any_between(&[1_i64, 5, 9], &4, &6));
        assert!(!any_between(&[1_i64, 5, 9], &6, &8));
        assert!(!any_between(&[1_i64, 5, 9], &10, &20));
        assert!(any_between(&["a".to_string(), "m".to_string()], "l", "n"));
    }
}
