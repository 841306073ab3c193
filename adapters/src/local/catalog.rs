//! [`Catalog`] of the local runtime: each table's Glue `TableInput` as a
//! JSON file in the lake, so `tributary schema` and its users see what the
//! AWS Glue catalog would get.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;

use super::DirStore;
use tributary_core::catalog::{Catalog, TableDef, VERSION_PARAMETER};
use tributary_core::keys::catalog_key;
use tributary_core::ports::{ObjectStore, PortError};

/// The bucket name the local entries' locations use: `s3://local/<prefix>`.
pub const LOCAL_BUCKET: &str = "local";

/// Tables as files `<lake>/_catalog/<table>.glue.json`
/// ([`catalog_key`]): [`TableDef::glue_table_input`] for bucket
/// [`LOCAL_BUCKET`], pretty-printed, written only when it changed and
/// never over an entry of a higher `tributary.schema_version`
/// ([`TableDef::yields_to`]), by compare-and-swap on the file's version
/// ([`ObjectStore::put_if`]): of two writers racing, the loser reads again.
#[derive(Debug)]
pub struct DirCatalog {
    lake: DirStore,
}

impl DirCatalog {
    /// A catalog in lake folder `lake` (`_catalog/` is created on first
    /// write).
    pub fn new(lake: impl Into<PathBuf>) -> Self {
        Self { lake: DirStore::new(lake) }
    }

    /// The lake folder.
    pub fn lake(&self) -> &Path {
        self.lake.root()
    }

    /// The file of table `table`.
    ///
    /// # Errors
    /// [`PortError::Permanent`] for a name that is no file name (empty,
    /// `..`, with `/` or control characters: [`DirStore::path_of`]).
    pub fn path_of(&self, table: &str) -> Result<PathBuf, PortError> {
        self.lake.path_of(&catalog_key(table))
    }

    /// The JSON written for `table`: its Glue `TableInput`, pretty, with a
    /// final newline.
    pub fn entry(table: &TableDef) -> String {
        // `{:#}` is serde_json's pretty form of a `Value`.
        format!("{:#}\n", table.glue_table_input(LOCAL_BUCKET))
    }
}

#[async_trait]
impl Catalog for DirCatalog {
    /// # Errors
    /// [`PortError::Permanent`] for a table name that is no file name;
    /// [`PortError::Transient`] when the file cannot be read or written.
    async fn upsert_table(&self, table: &TableDef) -> Result<(), PortError> {
        let key = catalog_key(table.name.as_str());
        let entry = Bytes::from(Self::entry(table));
        loop {
            let current = self.lake.get_versioned(&key).await?;
            let version = match &current {
                Some((old, _)) if *old == entry => return Ok(()),
                Some((old, version)) => {
                    let stored: Option<serde_json::Value> = serde_json::from_slice(old).ok();
                    let stored = stored.as_ref().and_then(|json| json["Parameters"][VERSION_PARAMETER].as_str());
                    if table.yields_to(stored) {
                        return Ok(());
                    }
                    Some(version.as_str())
                }
                None => None,
            };
            if self.lake.put_if(&key, entry.clone(), version).await? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tributary_core::catalog::{ColumnDef, PartitionKey, Projection};

    use super::*;

    fn table(columns: &[&str]) -> TableDef {
        versioned(columns, 1)
    }

    fn versioned(columns: &[&str], version: u64) -> TableDef {
        TableDef {
            name: "web_events".into(),
            prefix: "web-events/".into(),
            columns: columns
                .iter()
                .map(|name| ColumnDef { name: (*name).into(), hive_type: "string".into(), comment: String::new() })
                .collect(),
            partition_keys: vec![PartitionKey {
                name: "dt".into(),
                projection: Projection::Date { first: "2026-01-01".into(), last: None },
            }],
            description: "web events".into(),
            version,
        }
    }

    fn read_entry(path: &Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).expect("entry")).expect("JSON")
    }

    #[tokio::test]
    async fn an_entry_of_a_higher_schema_version_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = DirCatalog::new(dir.path());
        catalog.upsert_table(&versioned(&["id", "email"], 2)).await.expect("version 2");
        catalog.upsert_table(&versioned(&["id"], 1)).await.expect("a slow writer of version 1");
        let path = catalog.path_of("web_events").expect("valid name");
        let json = read_entry(&path);
        assert_eq!(json["Parameters"][VERSION_PARAMETER], "2");
        assert_eq!(json["StorageDescriptor"]["Columns"][1]["Name"], "email", "version 2 is kept");
        catalog.upsert_table(&versioned(&["id", "email", "phone"], 3)).await.expect("version 3");
        let json = read_entry(&path);
        assert_eq!(json["StorageDescriptor"]["Columns"][2]["Name"], "phone");
    }

    #[tokio::test]
    async fn writes_the_glue_table_input_and_rewrites_it_on_change_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = DirCatalog::new(dir.path());
        catalog.upsert_table(&table(&["id"])).await.expect("create");
        let path = dir.path().join("_catalog/web_events.glue.json");
        assert_eq!(catalog.path_of("web_events").expect("valid name"), path);
        let text = std::fs::read_to_string(&path).expect("entry written");
        let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(json, table(&["id"]).glue_table_input(LOCAL_BUCKET));
        assert_eq!(json["StorageDescriptor"]["Location"], "s3://local/web-events/");
        assert!(text.contains("\n  \"Name\""), "pretty-printed: {text}");

        let written = std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime");
        std::thread::sleep(std::time::Duration::from_millis(20));
        catalog.upsert_table(&table(&["id"])).await.expect("unchanged");
        assert_eq!(std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime"), written, "not rewritten");

        catalog.upsert_table(&table(&["id", "email"])).await.expect("update");
        let json = read_entry(&path);
        assert_eq!(json["StorageDescriptor"]["Columns"][1]["Name"], "email");
    }

    #[tokio::test]
    async fn a_table_name_that_is_no_file_name_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = DirCatalog::new(dir.path());
        let mut bad = table(&["id"]);
        bad.name = "../escape".into();
        let err = catalog.upsert_table(&bad).await.expect_err("refused");
        assert!(!err.is_retryable(), "{err}");
    }
}
