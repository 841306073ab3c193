//! A dataset's table definition for a Hive-style catalog (the AWS Glue Data
//! Catalog on AWS), and the [`Catalog`] port that registers it.
//!
//! Persist derives a [`TableDef`] from the dataset's table schema and
//! hands it to the catalog whenever the schema changes, so Athena (and the
//! Athena-driven strategy) query the dataset without hand-written DDL.
//! Partitions are found by **partition projection** (Athena computes them
//! from the table's properties): no crawler, no `MSCK REPAIR TABLE`, no
//! `ALTER TABLE ADD PARTITION` per day.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::ports::PortError;

/// Hive input format of Parquet files (the table's
/// `StorageDescriptor.InputFormat`).
pub const PARQUET_INPUT_FORMAT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat";

/// Hive output format of Parquet files (`StorageDescriptor.OutputFormat`).
pub const PARQUET_OUTPUT_FORMAT: &str = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat";

/// Hive SerDe of Parquet files (`StorageDescriptor.SerdeInfo.SerializationLibrary`).
pub const PARQUET_SERDE: &str = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe";

/// Glue `TableType` of a table over files that Glue does not own: dropping
/// the table leaves the files.
pub const EXTERNAL_TABLE: &str = "EXTERNAL_TABLE";

/// Hive type of every partition key: Athena's partition projection takes
/// `string` keys for `date`, `integer` and `enum` projections alike.
pub const PARTITION_KEY_TYPE: &str = "string";

/// Longest column `Comment` Glue takes: 255 (AWS Glue API, `Column`
/// structure, "Length Constraints: Maximum length of 255"; the Glue
/// Developer Guide's Table API page says 255 bytes). Counted in bytes here,
/// which satisfies either reading.
pub const MAX_COMMENT_BYTES: usize = 255;

/// A table: its columns in file order, its Hive partition keys and where
/// its files are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableDef {
    /// Table name: the dataset's name with `-` as `_` (Glue and Athena
    /// table names take `a-z 0-9 _`).
    pub name: String,
    /// Key prefix of the dataset's files in the lake bucket, ending in `/`
    /// (e.g. `orders/`).
    pub prefix: String,
    /// Data columns, then the lineage columns, in the files' order.
    pub columns: Vec<ColumnDef>,
    /// Hive partition keys, outermost first; all `string`.
    pub partition_keys: Vec<PartitionKey>,
    /// A short description (Glue's `Description`).
    pub description: String,
}

/// One column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    /// Column name as in the files.
    pub name: String,
    /// Hive type, e.g. `bigint`, `decimal(38,0)`, `array<string>`,
    /// `struct<login:string,id:bigint>`, `timestamp`.
    #[serde(rename = "type")]
    pub hive_type: String,
    /// Where the column comes from (the record key; for a variant column,
    /// which values it holds), as Glue's column `Comment` (at most 255
    /// characters: AWS Glue API, `Column` structure; see
    /// [`ColumnDef::glue_comment`]).
    pub comment: String,
}

impl ColumnDef {
    /// The comment as Glue gets it: cut to at most [`MAX_COMMENT_BYTES`]
    /// bytes, at a character boundary, so a long description never makes
    /// Glue refuse the whole table (`InvalidInputException`).
    pub fn glue_comment(&self) -> &str {
        let mut end = self.comment.len().min(MAX_COMMENT_BYTES);
        while !self.comment.is_char_boundary(end) {
            end -= 1;
        }
        &self.comment[..end]
    }
}

/// A Hive partition key and how Athena projects its values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionKey {
    /// Name (the folder's `name=`).
    pub name: String,
    /// How Athena enumerates its values.
    pub projection: Projection,
}

/// Athena partition projection of one key (Athena User Guide, "Supported
/// types for partition projection").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Projection {
    /// `yyyy-MM-dd` days from `first` to today (`NOW`).
    Date {
        /// The first day, `YYYY-MM-DD`.
        first: String,
    },
    /// Two-digit hours `00`..`23`.
    Hour,
    /// The values seen so far (the folder names), kept up to date by
    /// Persist as new values appear.
    Enum {
        /// Folder values, sorted.
        values: Vec<String>,
    },
}

impl TableDef {
    /// The Glue `TableInput` of this table for the lake bucket `bucket`,
    /// as JSON (the shape of the Glue `CreateTable`/`UpdateTable` API):
    /// an external Parquet table at `s3://<bucket>/<prefix>` with
    /// partition projection parameters.
    pub fn glue_table_input(&self, bucket: &str) -> serde_json::Value {
        let location = self.location(bucket);
        let column =
            |c: &ColumnDef| serde_json::json!({"Name": c.name, "Type": c.hive_type, "Comment": c.glue_comment()});
        serde_json::json!({
            "Name": self.name,
            "Description": self.description,
            "TableType": EXTERNAL_TABLE,
            "Parameters": self.parameters(&location),
            "PartitionKeys": self.partition_keys.iter()
                .map(|k| serde_json::json!({"Name": k.name, "Type": PARTITION_KEY_TYPE}))
                .collect::<Vec<_>>(),
            "StorageDescriptor": {
                "Columns": self.columns.iter().map(column).collect::<Vec<_>>(),
                "Location": location,
                "InputFormat": PARQUET_INPUT_FORMAT,
                "OutputFormat": PARQUET_OUTPUT_FORMAT,
                "SerdeInfo": {"SerializationLibrary": PARQUET_SERDE},
            },
        })
    }

    /// Where the table's files are in lake bucket `bucket`:
    /// `s3://<bucket>/<prefix>`.
    pub fn location(&self, bucket: &str) -> String {
        format!("s3://{bucket}/{}", self.prefix)
    }

    /// The table parameters: Parquet classification and the partition
    /// projection of every key (`projection.<key>.*` and
    /// `storage.location.template`), under the table's `location`.
    pub fn parameters(&self, location: &str) -> BTreeMap<String, String> {
        let mut parameters = BTreeMap::from([
            ("classification".to_string(), "parquet".to_string()),
            ("EXTERNAL".to_string(), "TRUE".to_string()),
        ]);
        if self.partition_keys.is_empty() {
            return parameters;
        }
        parameters.insert("projection.enabled".into(), "true".into());
        let mut template = location.trim_end_matches('/').to_string();
        for key in &self.partition_keys {
            let name = &key.name;
            template.push_str(&format!("/{name}=${{{name}}}"));
            let mut set = |what: &str, value: String| {
                parameters.insert(format!("projection.{name}.{what}"), value);
            };
            match &key.projection {
                Projection::Date { first } => {
                    set("type", "date".into());
                    set("format", "yyyy-MM-dd".into());
                    set("range", format!("{first},NOW"));
                    set("interval", "1".into());
                    set("interval.unit", "DAYS".into());
                }
                Projection::Hour => {
                    set("type", "integer".into());
                    set("range", "0,23".into());
                    set("digits", "2".into());
                }
                Projection::Enum { values } => {
                    set("type", "enum".into());
                    set("values", values.join(","));
                }
            }
        }
        parameters.insert("storage.location.template".into(), template);
        parameters
    }
}

/// Registers tables (the AWS Glue Data Catalog on AWS).
#[async_trait]
pub trait Catalog: Send + Sync {
    /// Creates the table, or updates its columns, partition keys and
    /// parameters when it exists (same name).
    ///
    /// # Errors
    /// [`PortError`]: throttling and service errors are transient; a
    /// refused definition (Glue's `InvalidInputException`) is permanent.
    async fn upsert_table(&self, table: &TableDef) -> Result<(), PortError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_parameters_cover_every_partition_key() {
        let table = TableDef {
            name: "web_events".into(),
            prefix: "web-events/".into(),
            columns: vec![ColumnDef { name: "id".into(), hive_type: "bigint".into(), comment: "id".into() }],
            partition_keys: vec![
                PartitionKey { name: "dt".into(), projection: Projection::Date { first: "2026-01-01".into() } },
                PartitionKey { name: "hour".into(), projection: Projection::Hour },
            ],
            description: "test".into(),
        };
        let input = table.glue_table_input("lake");
        let parameters = &input["Parameters"];
        assert_eq!(parameters["projection.enabled"], "true");
        assert_eq!(parameters["projection.dt.range"], "2026-01-01,NOW");
        assert_eq!(parameters["projection.hour.digits"], "2");
        assert_eq!(parameters["storage.location.template"], "s3://lake/web-events/dt=${dt}/hour=${hour}");
        assert_eq!(input["StorageDescriptor"]["Location"], "s3://lake/web-events/");
        assert_eq!(input["PartitionKeys"][1]["Name"], "hour");
    }

    #[test]
    fn comments_are_cut_to_glues_limit_at_a_character_boundary() {
        let column = |comment: String| ColumnDef { name: "c".into(), hive_type: "string".into(), comment };
        assert_eq!(column("from `id`".into()).glue_comment(), "from `id`");
        let ascii = column("x".repeat(300));
        assert_eq!(ascii.glue_comment().len(), MAX_COMMENT_BYTES);
        // 'é' is two bytes: 127 of them end at byte 254, the 128th would end at 256.
        let accented = column("é".repeat(200));
        assert_eq!(accented.glue_comment(), "é".repeat(127));
    }
}
