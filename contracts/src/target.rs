//! `PersistTarget`: where and how Persist writes a page.
//!
//! ```yaml
//! target:
//!   dataset: transactions
//!   schema:                       # optional: declared columns, enforced
//!     - { name: id, type: int64, required: true }
//!     - { name: created_at, type: "timestamp(ms, UTC)" }
//!     - { name: amount, type: "decimal(12, 2)" }
//!   partition: { by: field, field: /created_at, granularity: day }
//!   files: { max_rows: 1000000, row_group_rows: 131072, compression: zstd }
//! ```

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::SpecError;

/// Where Persist writes a page: the dataset (a folder of the lake), with
/// optional declared columns, partitioning and file settings.
///
/// Objects land at `<dataset>/<partition>/<pipeline>-<run_id>-<page>-<part>.parquet`
/// (see `tributary_core::keys`). Unknown fields are refused (a misspelt option must
/// not be dropped silently).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersistTarget {
    /// Dataset name: 1–64 characters of `a-z 0-9 _ -`, starting with a letter
    /// or digit, and not one of the lake's own folders (`raw`, `quarantine`).
    /// It is the top folder of the dataset in the lake and the table name
    /// Athena/Glue see.
    pub dataset: String,
    /// Declared columns. A record whose value does not fit its column's type
    /// is quarantined with the field path, the expected and the found type;
    /// fields not declared are inferred like any other (added as nullable
    /// columns). Empty: every column is inferred.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema: Vec<DeclaredField>,
    /// How files are partitioned (default: by run date, `dt=YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Partitioning::is_default")]
    pub partition: Partitioning,
    /// File rotation, row groups and compression.
    #[serde(default, skip_serializing_if = "FileSettings::is_default")]
    pub files: FileSettings,
    /// How record keys become column names (default `snake_case`).
    #[serde(default, skip_serializing_if = "NamePolicy::is_default")]
    pub names: NamePolicy,
    /// How the dataset is kept: `parquet` (default), Hive-style Parquet
    /// folders whose pages readers see as they land; or `iceberg`, an
    /// Apache Iceberg table to which each run's files are committed in one
    /// snapshot when the run completes, so readers see a run whole or not
    /// at all (docs/persist.md, "Iceberg tables").
    #[serde(default, skip_serializing_if = "TableFormat::is_default")]
    pub table_format: TableFormat,
    /// How a completed run changes the table (default `append`): `merge`
    /// keeps one row per [`PersistTarget::primary_key`], the latest;
    /// `replace` makes each completed run the whole table. `merge` and
    /// `replace` need `table_format: iceberg` (docs/persist.md, "Write
    /// dispositions").
    #[serde(default, skip_serializing_if = "WriteDisposition::is_default")]
    pub write: WriteDisposition,
    /// `write: merge`: the record's key, one or more RFC 6901 pointers
    /// (`[/id]`, `[/account/id, /line]`). A record without a value (or
    /// null) at one of them has no key: it is added as it is, never
    /// matched, and counted as `unkeyed` in the commit's log line
    /// (docs/persist.md, "Write dispositions"). A value of another type
    /// than its column's (`"A-17"` beside integers) is a key too: it
    /// matches the same value sent the same way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub primary_key: Vec<String>,
    /// `write: merge`: the pointer whose greatest value wins among the
    /// versions of a key, in the table and in the run (e.g. `/updated_at`;
    /// ties: the one fetched last wins; a record without it, or null, is
    /// the oldest version; beside timestamps, epoch numbers and text like
    /// `2026-12-01 10:00:00` (UTC) compare as instants; another value of
    /// another type than the column's cannot be ranked and ties with every
    /// version). Absent: the run's version always wins, the last fetched
    /// within a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_by: Option<String>,
    /// `write: merge`: a record whose value at this pointer is `true`, a
    /// number other than 0, a timestamp, or text saying so (`true`, `yes`,
    /// `y`, `t` in any case, a non-zero number, a date or time: a deletion
    /// time) removes its key from the table (e.g. `/deleted` or
    /// `/archived_at`), whatever the column's type; `false`, `no`, `n`,
    /// `0`, `null` and other text keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_delete: Option<String>,
    /// Whether a new field whose values are RFC 3339 UTC timestamps (text
    /// like `2026-11-29T06:00:00Z` or `…T06:00:00.123456Z`) becomes a
    /// `timestamp(us, UTC)` column (`detect`, the default) or stays text
    /// (`text`). A field's column type is decided once; values that are
    /// not such timestamps go to its `__string` variant, as sent.
    #[serde(default, skip_serializing_if = "Timestamps::is_default")]
    pub timestamps: Timestamps,
    /// What a page that would change the dataset's columns does (a new
    /// field, or a variant column for values of another type, such as
    /// `contact_id__string` when `contact_id` turns from integers to text):
    /// `alert` (the default) evolves the table and alerts once per run,
    /// `evolve` evolves it and only says so (the run's summary, its
    /// run-completed event, a log line), `freeze` quarantines the records
    /// that would change it, with the reason, and alerts. Every mode names
    /// the changes in the run-completed event's `schema_changes`.
    #[serde(default, skip_serializing_if = "SchemaChange::is_default")]
    pub on_schema_change: SchemaChange,
    /// Iceberg partition transforms of the table's own timestamp columns,
    /// after the Hive partition columns of [`PersistTarget::partition`]:
    /// `day(/created_at)` or `hour(/created_at)`, a pointer to a top-level
    /// field whose column is a timestamp (detected, or declared in
    /// `schema`). Readers prune on the column itself (`WHERE created_at >=
    /// ...`), no extra column. `table_format: iceberg` only; fixed by the
    /// dataset's first page (docs/persist.md, "Partition transforms").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
}

/// An Iceberg partition transform of `target.partition_by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeTransform {
    /// `day(...)`: days since 1970-01-01 of the UTC instant.
    Day,
    /// `hour(...)`: hours since 1970-01-01T00:00Z.
    Hour,
}

impl TimeTransform {
    /// `day` or `hour`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeTransform::Day => "day",
            TimeTransform::Hour => "hour",
        }
    }

    /// `day(/ptr)` or `hour(/ptr)` as (transform, pointer); the pointer one
    /// RFC 6901 segment (a top-level field), `None` for anything else.
    pub fn parse(text: &str) -> Option<(TimeTransform, &str)> {
        let (name, rest) = text.trim().split_once('(')?;
        let pointer = rest.strip_suffix(')')?.trim();
        let transform = match name.trim() {
            "day" => TimeTransform::Day,
            "hour" => TimeTransform::Hour,
            _ => return None,
        };
        let segment = pointer.strip_prefix('/')?;
        (!segment.is_empty() && !segment.contains('/')).then_some((transform, pointer))
    }
}

/// What a change of the dataset's columns does (`target.on_schema_change`),
/// as dlt's schema contracts do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SchemaChange {
    /// The table evolves; the change is announced and alerted once per run.
    #[default]
    Alert,
    /// The table evolves; the change is announced (summary, event, log), not alerted.
    Evolve,
    /// Records that would change the table are quarantined with the reason;
    /// the run is alerted. A dataset's first page still makes its table.
    Freeze,
}

impl SchemaChange {
    /// Whether this is the default (`alert`).
    pub fn is_default(&self) -> bool {
        *self == SchemaChange::Alert
    }

    /// The spec's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChange::Alert => "alert",
            SchemaChange::Evolve => "evolve",
            SchemaChange::Freeze => "freeze",
        }
    }
}

/// How inferred columns treat timestamp text (`target.timestamps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Timestamps {
    /// RFC 3339 UTC text makes a `timestamp(us, UTC)` column.
    #[default]
    Detect,
    /// Timestamps stay text (declare a column's type to type it).
    Text,
}

impl Timestamps {
    /// Whether this is the default (`detect`).
    pub fn is_default(&self) -> bool {
        *self == Timestamps::Detect
    }
}

/// How a completed run changes its dataset's table (`target.write`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteDisposition {
    /// The run's rows are added to the table (one `append` snapshot on
    /// Iceberg; new files in the partition folders on Parquet).
    #[default]
    Append,
    /// The table keeps one row per primary key: the run's rows replace the
    /// table's rows of the same key when newer (`order_by`), keys marked by
    /// `hard_delete` are removed; one `overwrite` snapshot, copy-on-write.
    Merge,
    /// The run's rows become the whole table (a full-refresh endpoint):
    /// one `overwrite` snapshot that removes every file the table had.
    Replace,
}

impl WriteDisposition {
    /// Whether this is the default (`append`).
    pub fn is_default(&self) -> bool {
        *self == WriteDisposition::Append
    }

    /// As a spec writes it: `append`, `merge` or `replace`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WriteDisposition::Append => "append",
            WriteDisposition::Merge => "merge",
            WriteDisposition::Replace => "replace",
        }
    }
}

impl std::fmt::Display for WriteDisposition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The table format of a dataset (`target.table_format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TableFormat {
    /// Hive-style partition folders of Parquet files, with the table
    /// published for Glue/Athena; a run's pages are readable as they land.
    #[default]
    Parquet,
    /// An Apache Iceberg table (`tributary.<dataset>` in the catalog): the
    /// pages are staged as Parquet and the run's completion commits them
    /// in one fast-append snapshot carrying the run id.
    Iceberg,
}

impl TableFormat {
    /// Whether this is the default (`parquet`).
    pub fn is_default(&self) -> bool {
        *self == TableFormat::Parquet
    }
}

/// How Persist names a dataset's columns after the records' keys. The key
/// is kept beside the column either way (the table schema's `source`, and
/// the Parquet field metadata `tributary.source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NamePolicy {
    /// Lowercase snake_case (`createdAt` -> `created_at`, `ID` -> `id`,
    /// `preço` -> `preco`); two keys that end as one name get `_2`, `_3`,
    /// … in the order the dataset met them. Athena/Glue, Spark and DuckDB
    /// take these names without quoting.
    #[default]
    SnakeCase,
    /// The keys as sent. Athena folds names to lowercase and Spark compares
    /// them case-insensitively by default, so `id` and `ID` then break
    /// those readers.
    Verbatim,
}

impl NamePolicy {
    /// Whether this is the default (`snake_case`).
    pub fn is_default(&self) -> bool {
        *self == NamePolicy::SnakeCase
    }
}

impl PersistTarget {
    /// Checks what serde cannot: the dataset name, unique declared column
    /// names, the partition pointer and column, the file settings.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming the field under `path` (e.g.
    /// `target.schema[2].name`) and its value.
    pub fn validate(&self, path: &str) -> Result<(), SpecError> {
        let invalid = |field: String, value: String, reason: &str| SpecError::Invalid {
            field,
            value,
            reason: reason.to_string(),
        };
        crate::spec::check_dataset(&format!("{path}.dataset"), &self.dataset)?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, field) in self.schema.iter().enumerate() {
            if field.name.is_empty() {
                return Err(invalid(format!("{path}.schema[{i}].name"), "\"\"".into(), "must not be empty"));
            }
            if !seen.insert(field.name.as_str()) {
                return Err(invalid(
                    format!("{path}.schema[{i}].name"),
                    format!("{:?}", field.name),
                    "is declared twice",
                ));
            }
            if field.data_type.has_nanoseconds() {
                return Err(invalid(
                    format!("{path}.schema[{i}].type"),
                    field.data_type.to_string(),
                    "nanosecond timestamps are refused: Spark reads them only with \
                     spark.sql.legacy.parquet.nanosAsLong, and Athena truncates them; declare timestamp(us) \
                     (microseconds, what Spark and Athena read) or timestamp(ms)",
                ));
            }
        }
        if let Partitioning::Field { field, granularity: _, column } = &self.partition {
            if !field.starts_with('/') {
                return Err(invalid(
                    format!("{path}.partition.field"),
                    format!("{field:?}"),
                    "must be an RFC 6901 JSON pointer into a record, e.g. /created_at",
                ));
            }
            crate::spec::check_name(&format!("{path}.partition.column"), column)?;
        }
        if self.files.row_group_rows == 0 || self.files.row_group_rows > MAX_ROW_GROUP_ROWS {
            return Err(invalid(
                format!("{path}.files.row_group_rows"),
                self.files.row_group_rows.to_string(),
                &format!("must be between 1 and {MAX_ROW_GROUP_ROWS}"),
            ));
        }
        self.check_write(path)?;
        let mut sources = std::collections::BTreeSet::new();
        for (i, text) in self.partition_by.iter().enumerate() {
            let field = format!("{path}.partition_by[{i}]");
            let Some((_, pointer)) = TimeTransform::parse(text) else {
                return Err(invalid(
                    field,
                    format!("{text:?}"),
                    "must be day(/field) or hour(/field): a transform of a top-level field's timestamp column",
                ));
            };
            if self.table_format != TableFormat::Iceberg {
                return Err(invalid(
                    field,
                    format!("{text:?}"),
                    "needs table_format: iceberg: a Parquet dataset's partitions are folders (use partition: { by: \
                     field, field: /created_at, granularity: day })",
                ));
            }
            if !sources.insert(pointer) {
                return Err(invalid(field, format!("{text:?}"), "partitions the same field twice"));
            }
        }
        for (name, value) in [("max_rows", self.files.max_rows), ("max_bytes", self.files.max_bytes)] {
            if value == Some(0) {
                return Err(invalid(
                    format!("{path}.files.{name}"),
                    "0".into(),
                    "must be at least 1 (or absent: no limit)",
                ));
            }
        }
        Ok(())
    }

    /// `write` and its keys: `merge`/`replace` on Iceberg only; `merge`
    /// with a primary key of pointers; the merge keys only with `merge`.
    fn check_write(&self, path: &str) -> Result<(), SpecError> {
        let invalid = |field: &str, value: String, reason: &str| SpecError::Invalid {
            field: format!("{path}.{field}"),
            value,
            reason: reason.to_string(),
        };
        let write = self.write.as_str();
        if self.write != WriteDisposition::Append && self.table_format != TableFormat::Iceberg {
            return Err(invalid(
                "write",
                write.into(),
                "needs table_format: iceberg: a merge or replace must swap files in one atomic commit, which a \
                 folder of Parquet files (table_format: parquet) cannot do; readers would see rows twice or none \
                 while the files change",
            ));
        }
        if self.write != WriteDisposition::Merge {
            let key = (!self.primary_key.is_empty()).then(|| format!("{:?}", self.primary_key));
            for (field, value) in [
                ("primary_key", key),
                ("order_by", self.order_by.as_ref().map(|p| format!("{p:?}"))),
                ("hard_delete", self.hard_delete.as_ref().map(|p| format!("{p:?}"))),
            ] {
                if let Some(value) = value {
                    let reason = format!("is only read with write: merge (this target's write is {write})");
                    return Err(invalid(field, value, &reason));
                }
            }
            return Ok(());
        }
        if self.primary_key.is_empty() {
            return Err(invalid(
                "primary_key",
                "absent (or [])".into(),
                "write: merge needs the record's key: one or more JSON pointers, e.g. primary_key: [/id]",
            ));
        }
        let pointer = |field: String, value: &str| -> Result<(), SpecError> {
            if value.len() < 2 || !value.starts_with('/') {
                return Err(SpecError::Invalid {
                    field: format!("{path}.{field}"),
                    value: format!("{value:?}"),
                    reason: "must be an RFC 6901 JSON pointer to a field of the record, e.g. /id".into(),
                });
            }
            // RFC 6901 §3: `~` is only `~0` or `~1`; §4: `-` names the
            // item after an array's last, which never holds a value.
            let refuse = |reason: &str| SpecError::Invalid {
                field: format!("{path}.{field}"),
                value: format!("{value:?}"),
                reason: reason.into(),
            };
            if value.split('/').any(|token| token == "-") {
                return Err(refuse(
                    "names `-`, the position after an array's last item, which holds no value: a merge column is a field of the record (a key inside an array is not one)",
                ));
            }
            if value.match_indices('~').any(|(at, _)| !matches!(value.as_bytes().get(at + 1), Some(b'0' | b'1'))) {
                return Err(refuse("has a `~` that is not `~0` (for ~) or `~1` (for /), as RFC 6901 escapes them"));
            }
            Ok(())
        };
        let mut seen = std::collections::BTreeSet::new();
        for (i, key) in self.primary_key.iter().enumerate() {
            pointer(format!("primary_key[{i}]"), key)?;
            if !seen.insert(key) {
                return Err(invalid(&format!("primary_key[{i}]"), format!("{key:?}"), "is named twice"));
            }
        }
        if let Some(order_by) = &self.order_by {
            pointer("order_by".into(), order_by)?;
        }
        if let Some(hard_delete) = &self.hard_delete {
            pointer("hard_delete".into(), hard_delete)?;
            if self.primary_key.contains(hard_delete) {
                return Err(invalid("hard_delete", format!("{hard_delete:?}"), "is part of the primary key"));
            }
        }
        Ok(())
    }

    /// A target with every setting at its default.
    pub fn new(dataset: impl Into<String>) -> Self {
        Self {
            dataset: dataset.into(),
            schema: Vec::new(),
            partition: Partitioning::default(),
            files: FileSettings::default(),
            names: NamePolicy::default(),
            table_format: TableFormat::default(),
            write: WriteDisposition::default(),
            primary_key: Vec::new(),
            order_by: None,
            hard_delete: None,
            timestamps: Timestamps::default(),
            on_schema_change: SchemaChange::default(),
            partition_by: Vec::new(),
        }
    }
}

/// One declared column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeclaredField {
    /// Top-level field name, as the vendor sends it.
    pub name: String,
    /// Type, by name: see [`FieldType`].
    #[serde(rename = "type")]
    pub data_type: FieldType,
    /// When true, a record without the field (or with `null`) is
    /// quarantined (default false: the column is nullable).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// A column type by name, written as text:
///
/// | text | Arrow type |
/// |---|---|
/// | `bool` | Boolean |
/// | `int32`, `int64` | Int32, Int64 |
/// | `float32`, `float64` | Float32, Float64 |
/// | `string` | Utf8 |
/// | `date` | Date32 (from `YYYY-MM-DD`) |
/// | `timestamp(s\|ms\|us\|ns)`, `timestamp(ms, UTC)` | Timestamp with unit, optional time zone (from RFC 3339 text or epoch numbers in the unit) |
/// | `decimal(p, s)` | Decimal128, 1 ≤ p ≤ 38, 0 ≤ s ≤ p (from numbers or numeric text, never rounded: more fraction digits than `s` is a violation) |
/// | `list<T>` | List of T |
/// | `json` | Utf8 holding the value's JSON text (any shape) |
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`.
    String,
    /// `date`.
    Date,
    /// `timestamp(unit[, tz])`.
    Timestamp {
        /// `s`, `ms`, `us` or `ns`.
        unit: TimeUnit,
        /// Time zone name, e.g. `UTC` or `+02:00`; `None` for local-less timestamps.
        tz: Option<String>,
    },
    /// `decimal(p, s)`.
    Decimal {
        /// Precision: total digits, 1..=38.
        precision: u8,
        /// Scale: digits after the point, 0..=precision.
        scale: u8,
    },
    /// `list<T>`.
    List(Box<FieldType>),
    /// `json`: the value's JSON text.
    Json,
}

impl FieldType {
    /// Whether the type is, or holds, a nanosecond timestamp.
    pub fn has_nanoseconds(&self) -> bool {
        match self {
            FieldType::Timestamp { unit, .. } => *unit == TimeUnit::Nanosecond,
            FieldType::List(item) => item.has_nanoseconds(),
            _ => false,
        }
    }
}

/// Timestamp resolution. Seconds are stored as milliseconds (Parquet has no
/// seconds unit; readers then see a timestamp, not a number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Seconds.
    Second,
    /// Milliseconds.
    Millisecond,
    /// Microseconds.
    Microsecond,
    /// Nanoseconds.
    Nanosecond,
}

impl TimeUnit {
    fn name(self) -> &'static str {
        match self {
            TimeUnit::Second => "s",
            TimeUnit::Millisecond => "ms",
            TimeUnit::Microsecond => "us",
            TimeUnit::Nanosecond => "ns",
        }
    }
}

/// A type text that is not one of [`FieldType`]'s forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid column type {text:?}: {reason}")]
pub struct FieldTypeError {
    /// The text given.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

impl FromStr for FieldType {
    type Err = FieldTypeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| FieldTypeError { text: text.to_string(), reason: reason.to_string() };
        let t = text.trim();
        let args = |prefix: &str| -> Option<Vec<String>> {
            let inner = t.strip_prefix(prefix)?.trim_start().strip_prefix('(')?.strip_suffix(')')?;
            Some(inner.split(',').map(|s| s.trim().to_string()).collect())
        };
        Ok(match t {
            "bool" | "boolean" => FieldType::Bool,
            "int32" => FieldType::Int32,
            "int64" => FieldType::Int64,
            "float32" => FieldType::Float32,
            "float64" | "double" => FieldType::Float64,
            "string" | "utf8" => FieldType::String,
            "date" | "date32" => FieldType::Date,
            "json" => FieldType::Json,
            _ if t.starts_with("list<") && t.ends_with('>') => FieldType::List(Box::new(
                t["list<".len()..t.len() - 1].parse().map_err(|e: FieldTypeError| fail(&e.reason))?,
            )),
            _ if t.starts_with("timestamp") => {
                let args = args("timestamp").ok_or_else(|| fail("write timestamp(unit) or timestamp(unit, tz)"))?;
                let unit = match args.first().map(String::as_str) {
                    Some("s") => TimeUnit::Second,
                    Some("ms") => TimeUnit::Millisecond,
                    Some("us") => TimeUnit::Microsecond,
                    Some("ns") => TimeUnit::Nanosecond,
                    _ => return Err(fail("the unit must be s, ms, us or ns")),
                };
                let tz = match args.get(1) {
                    Some(tz) if !is_fixed_zone(tz) => {
                        return Err(fail(
                            "the time zone must be UTC or a fixed offset like +02:00 (readers need no zone database for those)",
                        ));
                    }
                    tz => tz.cloned(),
                };
                if args.len() > 2 {
                    return Err(fail("timestamp takes a unit and an optional time zone"));
                }
                FieldType::Timestamp { unit, tz }
            }
            _ if t.starts_with("decimal") => {
                let args = args("decimal").ok_or_else(|| fail("write decimal(precision, scale)"))?;
                let [p, s] = args.as_slice() else { return Err(fail("write decimal(precision, scale)")) };
                let precision: u8 = p.parse().map_err(|_| fail("precision must be 1..=38"))?;
                let scale: u8 = s.parse().map_err(|_| fail("scale must be 0..=precision"))?;
                if !(1..=38).contains(&precision) {
                    return Err(fail("precision must be 1..=38 (Decimal128)"));
                }
                if scale > precision {
                    return Err(fail("scale must be 0..=precision"));
                }
                FieldType::Decimal { precision, scale }
            }
            _ => {
                return Err(fail(
                    "expected bool, int32, int64, float32, float64, string, date, timestamp(unit[, tz]), \
                     decimal(p, s), list<T> or json",
                ));
            }
        })
    }
}

/// `UTC` or a `±HH:MM` offset within ±23:59.
fn is_fixed_zone(tz: &str) -> bool {
    if tz == "UTC" {
        return true;
    }
    let b = tz.as_bytes();
    b.len() == 6
        && matches!(b[0], b'+' | b'-')
        && b[3] == b':'
        && tz[1..3].parse::<u8>().is_ok_and(|h| h < 24)
        && tz[4..6].parse::<u8>().is_ok_and(|m| m < 60)
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Bool => f.write_str("bool"),
            FieldType::Int32 => f.write_str("int32"),
            FieldType::Int64 => f.write_str("int64"),
            FieldType::Float32 => f.write_str("float32"),
            FieldType::Float64 => f.write_str("float64"),
            FieldType::String => f.write_str("string"),
            FieldType::Date => f.write_str("date"),
            FieldType::Json => f.write_str("json"),
            FieldType::Timestamp { unit, tz: None } => write!(f, "timestamp({})", unit.name()),
            FieldType::Timestamp { unit, tz: Some(tz) } => write!(f, "timestamp({}, {tz})", unit.name()),
            FieldType::Decimal { precision, scale } => write!(f, "decimal({precision}, {scale})"),
            FieldType::List(item) => write!(f, "list<{item}>"),
        }
    }
}

impl Serialize for FieldType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FieldType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for FieldType {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FieldType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Column type: bool, int32, int64, float32, float64, string, date, \
                timestamp(s|ms|us[, tz]), decimal(p, s), list<T> or json. Nanosecond timestamps are \
                refused (Spark and Athena do not read them as timestamps).",
            "pattern": "^(?!.*timestamp\\(\\s*ns)",
            "examples": ["int64", "timestamp(ms, UTC)", "decimal(12, 2)", "list<string>"]
        })
    }
}

/// How a dataset's files are partitioned (Hive style, `name=value` folders).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "by", rename_all = "snake_case", deny_unknown_fields)]
pub enum Partitioning {
    /// `dt=<run date>` (the default).
    #[default]
    RunDate,
    /// By a value of each record.
    Field {
        /// RFC 6901 JSON pointer to the value in a record, e.g. `/created_at`.
        field: String,
        /// How the value becomes a folder (default `day`).
        #[serde(default)]
        granularity: Granularity,
        /// Partition column name (default `dt`; with `hour`, the folders are
        /// `dt=YYYY-MM-DD/hour=HH`).
        #[serde(default = "default_partition_column")]
        column: String,
    },
}

impl Partitioning {
    /// Whether this is the default (run date).
    pub fn is_default(&self) -> bool {
        *self == Partitioning::RunDate
    }
}

fn default_partition_column() -> String {
    "dt".into()
}

/// How a record's partition value is cut.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// A timestamp (RFC 3339 text, or epoch seconds/milliseconds) truncated
    /// to its UTC day: `dt=YYYY-MM-DD`.
    #[default]
    Day,
    /// Truncated to the UTC hour: `dt=YYYY-MM-DD/hour=HH`.
    Hour,
    /// The value itself, as text, sanitised for an S3 key.
    Value,
}

/// Parquet compression codec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// zstd (the default).
    #[default]
    Zstd,
    /// Snappy.
    Snappy,
}

/// Largest row group accepted, in rows.
pub const MAX_ROW_GROUP_ROWS: u32 = 1_048_576;

/// File rotation, row groups and compression.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    /// Start a new file (part) after this many rows (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rows: Option<u64>,
    /// Start a new file (part) once the file reaches about this many bytes,
    /// checked at each row group (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Rows per Parquet row group, 1..=1048576 (default 131072).
    #[serde(default = "default_row_group_rows")]
    pub row_group_rows: u32,
    /// Codec (default zstd).
    #[serde(default)]
    pub compression: Compression,
}

fn default_row_group_rows() -> u32 {
    131_072
}

impl Default for FileSettings {
    fn default() -> Self {
        Self {
            max_rows: None,
            max_bytes: None,
            row_group_rows: default_row_group_rows(),
            compression: Compression::Zstd,
        }
    }
}

impl FileSettings {
    /// Whether every setting is its default.
    pub fn is_default(&self) -> bool {
        *self == FileSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_types_parse_and_print_back() {
        for text in [
            "bool",
            "int64",
            "float64",
            "string",
            "date",
            "json",
            "timestamp(ms)",
            "timestamp(us, UTC)",
            "decimal(12, 2)",
            "list<string>",
            "list<list<int64>>",
            "list<timestamp(ms, +02:00)>",
        ] {
            let parsed: FieldType = text.parse().expect(text);
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(
            "decimal(38,0)".parse::<FieldType>().expect("valid"),
            FieldType::Decimal { precision: 38, scale: 0 }
        );
    }

    #[test]
    fn bad_field_types_say_why() {
        for (text, reason) in [
            ("integer", "expected bool"),
            ("timestamp(h)", "unit must be s, ms, us or ns"),
            ("decimal(40, 2)", "precision must be 1..=38"),
            ("decimal(4, 5)", "scale must be 0..=precision"),
            ("decimal(4)", "decimal(precision, scale)"),
            ("list<>", "expected bool"),
            ("timestamp(ms, Mars/Olympus)", "UTC or a fixed offset"),
            ("timestamp(ms, +25:00)", "UTC or a fixed offset"),
        ] {
            let err = text.parse::<FieldType>().expect_err(text);
            assert!(err.to_string().contains(reason) && err.to_string().contains(text), "{text}: {err}");
        }
    }

    fn target(yaml: &str) -> PersistTarget {
        serde_norway::from_str(yaml).expect(yaml)
    }

    #[test]
    fn partition_transforms_are_day_or_hour_of_a_top_level_field_on_iceberg() {
        let ok = target("{dataset: c, table_format: iceberg, partition_by: [day(/created_at), 'hour( /seen )']}");
        ok.validate("target").expect("valid transforms");
        assert_eq!(TimeTransform::parse(&ok.partition_by[0]), Some((TimeTransform::Day, "/created_at")));
        assert_eq!(TimeTransform::parse(&ok.partition_by[1]), Some((TimeTransform::Hour, "/seen")));
        for (yaml, says) in [
            ("{dataset: c, partition_by: [day(/created_at)]}", "table_format: iceberg"),
            ("{dataset: c, table_format: iceberg, partition_by: [month(/created_at)]}", "day(/field) or hour(/field)"),
            ("{dataset: c, table_format: iceberg, partition_by: [day(created_at)]}", "day(/field)"),
            ("{dataset: c, table_format: iceberg, partition_by: [day(/a/b)]}", "top-level"),
            ("{dataset: c, table_format: iceberg, partition_by: [day(/a), hour(/a)]}", "twice"),
        ] {
            let err = target(yaml).validate("target").expect_err(yaml).to_string();
            assert!(err.contains("target.partition_by[") && err.contains(says), "{yaml}: {err}");
        }
    }

    #[test]
    fn merge_and_replace_need_iceberg_and_merge_needs_a_key_of_pointers() {
        let ok = target(
            "{dataset: c, table_format: iceberg, write: merge, primary_key: [/id, /account/id], order_by: /updatedAt, hard_delete: /deleted}",
        );
        ok.validate("target").expect("a valid merge");
        assert_eq!(ok.write, WriteDisposition::Merge);
        target("{dataset: c, table_format: iceberg, write: replace}").validate("target").expect("a valid replace");
        for (yaml, field, says) in [
            ("{dataset: c, write: merge, primary_key: [/id]}", "target.write", "table_format: iceberg"),
            ("{dataset: c, write: replace}", "target.write", "atomic"),
            ("{dataset: c, table_format: iceberg, write: merge}", "target.primary_key", "one or more JSON pointers"),
            (
                "{dataset: c, table_format: iceberg, write: merge, primary_key: [id]}",
                "target.primary_key[0]",
                "RFC 6901",
            ),
            (
                "{dataset: c, table_format: iceberg, write: merge, primary_key: [/id, /id]}",
                "target.primary_key[1]",
                "twice",
            ),
            (
                "{dataset: c, table_format: iceberg, write: merge, primary_key: [/id], order_by: updated}",
                "target.order_by",
                "RFC 6901",
            ),
            (
                "{dataset: c, table_format: iceberg, write: merge, primary_key: [/id], hard_delete: /id}",
                "target.hard_delete",
                "primary key",
            ),
            (
                "{dataset: c, table_format: iceberg, write: merge, primary_key: [/tags/-]}",
                "target.primary_key[0]",
                "the position after an array's last item",
            ),
            ("{dataset: c, table_format: iceberg, write: merge, primary_key: [/a~2b]}", "target.primary_key[0]", "~1"),
            (
                "{dataset: c, table_format: iceberg, primary_key: [/id]}",
                "target.primary_key",
                "[\"/id\"]: is only read with write: merge (this target's write is append)",
            ),
            (
                "{dataset: c, table_format: iceberg, write: replace, order_by: /at}",
                "target.order_by",
                "\"/at\": is only read with write: merge (this target's write is replace)",
            ),
        ] {
            let err = target(yaml).validate("target").expect_err(yaml).to_string();
            assert!(err.contains(field) && err.contains(says), "{yaml}: {err}");
        }
    }

    #[test]
    fn an_append_target_serialises_without_the_write_keys() {
        let text = serde_json::to_string(&PersistTarget::new("c")).expect("json");
        assert!(!text.contains("write") && !text.contains("primary_key"), "{text}");
    }
}
