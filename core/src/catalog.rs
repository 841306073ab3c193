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
    /// The table schema's version (table parameter
    /// `tributary.schema_version`): a catalog never replaces a definition
    /// by one of a lower version, so a slow writer cannot undo a newer one.
    pub version: u64,
}

/// The table parameter holding [`TableDef::version`].
pub const VERSION_PARAMETER: &str = "tributary.schema_version";

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
    /// `yyyy-MM-dd` days from `first` to today (`NOW`), or to `last` when
    /// files of later days exist (a record dated in the future).
    Date {
        /// The first day, `YYYY-MM-DD`.
        first: String,
        /// The last day, `YYYY-MM-DD`, when it is after today.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<String>,
    },
    /// Two-digit hours `00`..`23`.
    Hour,
    /// The values seen so far (the folder names), kept up to date by
    /// Persist as new values appear. Registered as Athena's `enum`
    /// projection while that can list them: at least one value, none with
    /// a comma (the list is comma-separated), at most [`MAX_ENUM_VALUES`];
    /// otherwise as the `injected` projection (see [`Projection::Injected`]).
    Enum {
        /// Folder values, sorted.
        values: Vec<String>,
    },
    /// Athena's `injected` projection: a query must name the key's values
    /// (`WHERE key = 'v'` or `IN (...)`); Athena then reads only those
    /// folders. For value partitions that cannot be an enum.
    Injected,
}

/// Most values an `enum` projection lists: 1,000. Athena's partition
/// projection guide ("Supported types for partition projection") sets no
/// limit but recommends "a few dozen or less" and bounds the whole table's
/// metadata by the Glue limit of about 1 MB gzip-compressed; 1,000 short
/// values stay far below it. More values make the key `injected`.
pub const MAX_ENUM_VALUES: usize = 1_000;

impl Projection {
    /// The projection as registered: an [`Projection::Enum`] that Athena
    /// cannot take (no values, a value with a comma, more than
    /// [`MAX_ENUM_VALUES`]) is [`Projection::Injected`].
    pub fn registrable(&self) -> &Projection {
        match self {
            Projection::Enum { values }
                if values.is_empty() || values.len() > MAX_ENUM_VALUES || values.iter().any(|v| v.contains(',')) =>
            {
                &Projection::Injected
            }
            other => other,
        }
    }
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

    /// Whether a catalog that holds a definition of version `stored` (the
    /// value of its [`VERSION_PARAMETER`], if any) keeps it rather than
    /// take this one: only a strictly higher stored version does, so a
    /// writer that read an older schema never undoes a newer one. A
    /// missing or unreadable parameter (a table made by hand) is replaced.
    pub fn yields_to(&self, stored: Option<&str>) -> bool {
        stored.and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|stored| stored > self.version)
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
            (VERSION_PARAMETER.to_string(), self.version.to_string()),
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
            match key.projection.registrable() {
                Projection::Date { first, last } => {
                    set("type", "date".into());
                    set("format", "yyyy-MM-dd".into());
                    set("range", format!("{first},{}", last.as_deref().unwrap_or("NOW")));
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
                Projection::Injected => set("type", "injected".into()),
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
                PartitionKey {
                    name: "dt".into(),
                    projection: Projection::Date { first: "2026-01-01".into(), last: None },
                },
                PartitionKey { name: "hour".into(), projection: Projection::Hour },
            ],
            description: "test".into(),
            version: 3,
        };
        let input = table.glue_table_input("lake");
        let parameters = &input["Parameters"];
        assert_eq!(parameters["projection.enabled"], "true");
        assert_eq!(parameters[VERSION_PARAMETER], "3");
        assert_eq!(parameters["projection.dt.range"], "2026-01-01,NOW");
        assert_eq!(parameters["projection.hour.digits"], "2");
        assert_eq!(parameters["storage.location.template"], "s3://lake/web-events/dt=${dt}/hour=${hour}");
        assert_eq!(input["StorageDescriptor"]["Location"], "s3://lake/web-events/");
        assert_eq!(input["PartitionKeys"][1]["Name"], "hour");
    }

    #[test]
    fn a_value_key_athena_cannot_enumerate_is_injected() {
        let table = |values: Vec<String>| TableDef {
            name: "t".into(),
            prefix: "t/".into(),
            columns: Vec::new(),
            partition_keys: vec![PartitionKey { name: "country".into(), projection: Projection::Enum { values } }],
            description: String::new(),
            version: 1,
        };
        let parameters = table(vec!["BR".into(), "São Paulo".into()]).parameters("s3://lake/t/");
        assert_eq!(parameters["projection.country.type"], "enum");
        assert_eq!(parameters["projection.country.values"], "BR,São Paulo");
        let many = (0..=MAX_ENUM_VALUES).map(|i| format!("v{i}")).collect();
        for values in [Vec::new(), vec!["a,b".to_string()], many] {
            let parameters = table(values).parameters("s3://lake/t/");
            assert_eq!(parameters["projection.country.type"], "injected");
            assert!(!parameters.contains_key("projection.country.values"));
            assert_eq!(parameters["storage.location.template"], "s3://lake/t/country=${country}");
        }
    }

    #[test]
    fn a_date_key_with_days_after_today_ends_at_the_last_one() {
        let mut table = TableDef {
            name: "t".into(),
            prefix: "t/".into(),
            columns: Vec::new(),
            partition_keys: vec![PartitionKey {
                name: "dt".into(),
                projection: Projection::Date { first: "2026-01-01".into(), last: None },
            }],
            description: String::new(),
            version: 1,
        };
        assert_eq!(table.parameters("s3://lake/t/")["projection.dt.range"], "2026-01-01,NOW");
        table.partition_keys[0].projection =
            Projection::Date { first: "2026-01-01".into(), last: Some("2030-01-01".into()) };
        assert_eq!(table.parameters("s3://lake/t/")["projection.dt.range"], "2026-01-01,2030-01-01");
    }

    #[test]
    fn only_a_higher_stored_version_is_kept() {
        let table = |version| TableDef {
            name: "t".into(),
            prefix: "t/".into(),
            columns: Vec::new(),
            partition_keys: Vec::new(),
            description: String::new(),
            version,
        };
        assert!(table(3).yields_to(Some("4")));
        assert!(!table(3).yields_to(Some("3")), "the same version is rewritten (a repair)");
        assert!(!table(3).yields_to(Some("2")));
        assert!(!table(3).yields_to(None), "a table without the parameter");
        assert!(!table(3).yields_to(Some("v9")), "an unreadable parameter");
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
