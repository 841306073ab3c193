//! The dataset's table schema as kept in the lake ([`TableSchema`]), and
//! published in standard forms: an Arrow schema (`_schema/<dataset>.arrow`,
//! an Arrow IPC stream that pyarrow reads with `pyarrow.ipc.open_stream`)
//! and a Hive/Glue table definition ([`TableDef`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use contracts::PersistTarget;
use serde::{Deserialize, Serialize};
use tributary_core::catalog::{ColumnDef, PartitionKey, Projection, TableDef};

use lake_format::lineage::lineage_fields;
use lake_format::meta::{
    META_LINEAGE, META_PARTITION, META_PARTITION_BY, META_PARTITION_KIND, META_SOURCE, META_VARIANT_OF, META_VERSION,
};
use lake_format::partition::PartitionKind;
use lake_format::partition::{DEFAULT_PARTITION, layout};

use crate::build::Col;
use crate::infer::{Ty, empty_table};

/// Partition values an `enum` projection lists at most; past it the
/// values are still written, and the table's projection lists the first
/// ones (Athena then needs `WHERE` on the key for the others). Glue keeps a
/// table parameter value up to 512 KB (AWS Glue API, `TableInput.Parameters`).
pub const MAX_ENUM_VALUES: usize = 10_000;

/// `_schema/<dataset>.json`: the table schema, its version (one more at
/// every change) and the partition columns with the values seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    /// 1 for the first schema, one more at every change.
    #[serde(default)]
    pub version: u64,
    /// The record's struct: every column, variant columns included.
    #[serde(flatten)]
    pub table: Ty,
    /// Hive partition columns, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PartitionColumn>,
    /// How the dataset is kept (`target.table_format`), fixed by its first
    /// page: Hive folders of Parquet or an Iceberg table. `None` in a
    /// schema written before the field existed (the next page sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_format: Option<contracts::TableFormat>,
    /// An Iceberg dataset's partition transforms (`target.partition_by`,
    /// as written), fixed by its first page like the partition columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
}

/// A Hive partition column and the folder values written so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionColumn {
    /// Column (folder) name.
    pub name: String,
    /// How its values are made.
    pub kind: PartitionKind,
    /// For days: the earliest day written (`YYYY-MM-DD`); for values: every
    /// value written, sorted (at most [`MAX_ENUM_VALUES`]).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub values: BTreeSet<String>,
}

impl Default for TableSchema {
    fn default() -> Self {
        TableSchema {
            version: 0,
            table: empty_table(),
            partitions: Vec::new(),
            table_format: None,
            partition_by: Vec::new(),
        }
    }
}

fn describe(layout: impl IntoIterator<Item = (String, PartitionKind)>) -> String {
    let parts: Vec<String> = layout.into_iter().map(|(name, kind)| format!("{name} ({})", kind.as_str())).collect();
    parts.join(", ")
}

/// `parquet` or `iceberg`, as a spec writes it.
fn format_name(format: contracts::TableFormat) -> &'static str {
    match format {
        contracts::TableFormat::Parquet => "parquet",
        contracts::TableFormat::Iceberg => "iceberg",
    }
}

impl TableSchema {
    /// Why `target` cannot write into this dataset: it asks for other
    /// partition columns than the dataset's files have. One dataset is one
    /// table with one folder layout; a second layout beside the first
    /// splits it (Athena's projection and DuckDB's hive partitioning see
    /// only one). `None` when the layouts agree or the dataset has none yet.
    pub fn layout_conflict(&self, target: &PersistTarget) -> Option<String> {
        if let Some(have) = self.table_format.filter(|have| *have != target.table_format) {
            // Switching would leave the rows of one form unread by the
            // other's readers (an Iceberg table's readers never see the
            // Hive folders, and the reverse).
            return Some(format!(
                "target.table_format is {}, but dataset {} is kept as {}; a dataset keeps one table format (write the \
                 other format to a new dataset)",
                format_name(target.table_format),
                target.dataset,
                format_name(have)
            ));
        }
        let wanted = layout(&target.partition);
        let have: Vec<(String, PartitionKind)> = self.partitions.iter().map(|c| (c.name.clone(), c.kind)).collect();
        if !have.is_empty() && self.partition_by != target.partition_by {
            // The table's partition spec is made at its first commit;
            // another spec would need partition evolution.
            let show = |list: &[String]| if list.is_empty() { "nothing".to_string() } else { list.join(", ") };
            return Some(format!(
                "target.partition_by asks for {}, but dataset {} is partitioned by {}; a dataset keeps its partition \
                 transforms (write the new layout to a new dataset)",
                show(&target.partition_by),
                target.dataset,
                show(&self.partition_by)
            ));
        }
        if have.is_empty() || have == wanted {
            return None;
        }
        Some(format!(
            "target.partition asks for partition columns {}, but dataset {} is partitioned by {}; a dataset keeps one layout (write the new layout to a new dataset)",
            describe(wanted),
            target.dataset,
            describe(have)
        ))
    }

    /// The partition columns of `target` (values kept from `self` when the
    /// layout is the same).
    pub fn with_layout(mut self, target: &PersistTarget) -> TableSchema {
        self.table_format = Some(target.table_format);
        self.partition_by.clone_from(&target.partition_by);
        let wanted = layout(&target.partition);
        let same = self.partitions.len() == wanted.len()
            && self.partitions.iter().zip(&wanted).all(|(have, (name, kind))| have.name == *name && have.kind == *kind);
        if !same {
            self.partitions = wanted
                .into_iter()
                .map(|(name, kind)| PartitionColumn { name, kind, values: BTreeSet::new() })
                .collect();
        }
        self
    }

    /// Notes the partitions of written files (`dt=2026-11-01/hour=07`):
    /// for days the earliest day and, when one lies after `today`, the
    /// latest (a date projection ends at `NOW` otherwise); every value of a
    /// value partition, Hive's default partition included (it is a folder
    /// readers must reach too).
    pub fn note_partitions<'a>(&mut self, paths: impl IntoIterator<Item = &'a str>, today: chrono::NaiveDate) {
        let today = today.format("%Y-%m-%d").to_string();
        for path in paths {
            for (column, segment) in self.partitions.iter_mut().zip(path.split('/')) {
                let Some(value) = segment.strip_prefix(&format!("{}=", column.name)) else { continue };
                match column.kind {
                    // Day partitions never hold the default partition
                    // (such records are quarantined, see `partition_of`).
                    PartitionKind::Day if value == DEFAULT_PARTITION => {}
                    PartitionKind::Day => {
                        let first = column.values.first().cloned();
                        let last = column.values.last().filter(|last| **last > today).cloned();
                        let first = first.filter(|first| first.as_str() <= value).unwrap_or_else(|| value.to_string());
                        let last = match last {
                            Some(last) if last.as_str() >= value => Some(last),
                            _ => (value > today.as_str()).then(|| value.to_string()),
                        };
                        column.values = BTreeSet::from_iter([Some(first), last].into_iter().flatten());
                    }
                    PartitionKind::Hour => {}
                    PartitionKind::Value => {
                        if column.values.len() < MAX_ENUM_VALUES {
                            column.values.insert(value.to_string());
                        }
                    }
                }
            }
        }
    }

    /// The published Arrow schema: data columns, the lineage columns, then
    /// the partition columns (`utf8`, metadata `tributary.partition` and
    /// [`META_PARTITION_KIND`]), with the version in the schema metadata.
    pub fn arrow_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = Col::new(&self.table).arrow_fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(lineage_fields());
        for column in &self.partitions {
            let kind = column.kind.as_str();
            let meta = HashMap::from([
                (META_PARTITION.to_string(), "true".to_string()),
                (META_PARTITION_KIND.to_string(), kind.to_string()),
            ]);
            fields.push(Field::new(&column.name, DataType::Utf8, true).with_metadata(meta));
        }
        let mut metadata = HashMap::from([(META_VERSION.to_string(), self.version.to_string())]);
        if !self.partition_by.is_empty() {
            metadata.insert(META_PARTITION_BY.to_string(), self.partition_by.join(","));
        }
        Arc::new(Schema::new_with_metadata(fields, metadata))
    }

    /// The table for a Hive/Glue catalog: columns with Hive types in file
    /// order, partition keys with their projection.
    pub fn table_def(&self, dataset: &str) -> TableDef {
        let today = chrono::Utc::now().date_naive().format("%Y-%m-%d").to_string();
        let schema = self.arrow_schema();
        let columns = schema
            .fields()
            .iter()
            .filter(|f| !f.metadata().contains_key(META_PARTITION))
            .map(|f| ColumnDef { name: f.name().clone(), hive_type: hive_type(f.data_type()), comment: comment(f) })
            .collect();
        let partition_keys = self
            .partitions
            .iter()
            .map(|column| PartitionKey {
                name: column.name.clone(),
                projection: match column.kind {
                    PartitionKind::Day => Projection::Date {
                        first: column.values.first().cloned().unwrap_or_else(|| "2000-01-01".into()),
                        last: column.values.last().filter(|last| **last > today).cloned(),
                    },
                    PartitionKind::Hour => Projection::Hour,
                    PartitionKind::Value => Projection::Enum { values: column.values.iter().cloned().collect() },
                },
            })
            .collect();
        TableDef {
            name: dataset.replace('-', "_"),
            prefix: format!("{dataset}/"),
            columns,
            partition_keys,
            description: format!("tributary dataset {dataset} (table schema version {})", self.version),
            version: self.version,
        }
    }
}

/// The Hive type of an Arrow type, as Glue and Athena write it.
pub fn hive_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int32 => "int".into(),
        DataType::Int64 => "bigint".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Decimal128(p, s) => format!("decimal({p},{s})"),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(..) => "timestamp".into(),
        DataType::List(item) => format!("array<{}>", hive_type(item.data_type())),
        DataType::Struct(fields) => {
            let inner: Vec<String> =
                fields.iter().map(|f| format!("{}:{}", f.name(), hive_type(f.data_type()))).collect();
            format!("struct<{}>", inner.join(","))
        }
        _ => "string".into(),
    }
}

/// A column's comment: its record key, and for a variant column which
/// values it holds; at most 255 characters (Glue's `Column.Comment`).
/// `key` in JSON string form (`"café"`, `"a\"b"`): readable as sent,
/// unlike Rust's debug form, which spells combining marks `\u{301}`.
fn quoted(key: &str) -> String {
    serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""))
}

fn comment(field: &Field) -> String {
    let meta = field.metadata();
    let text = match (meta.get(META_SOURCE), meta.get(META_VARIANT_OF)) {
        (Some(source), Some(base)) if field.name().ends_with(&format!("__{}", lake_format::variant::TEXT)) => {
            format!("key {} as sent, for the values of column {base} sent with an offset", quoted(source))
        }
        (Some(source), Some(base)) => format!("values of key {} that column {base} cannot hold", quoted(source)),
        (Some(source), None) => format!("key {}", quoted(source)),
        _ if meta.contains_key(META_LINEAGE) => "lineage, written by tributary".into(),
        _ => String::new(),
    };
    text.chars().take(255).collect()
}
