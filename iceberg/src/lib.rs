//! Apache Iceberg tables for the lake (`target.table_format: iceberg`).
//!
//! [`commit`]: [`IcebergCommitter`], the `tributary_core::tables::TableCommitter`
//! that commits a completed run's staged Parquet files to the dataset's
//! table in one fast-append snapshot, over any iceberg catalog; and
//! [`local_committer`], it over the local catalog: a SQL catalog
//! (iceberg-catalog-sql) on a SQLite file in the lake directory, whose
//! tables pyiceberg's `SqlCatalog` and DuckDB's iceberg extension read too;
//! and, with the `glue` feature, [`glue`]: it over the AWS Glue Data
//! Catalog with an `s3://` FileIO, for the Persist Lambda. [`compact`]:
//! compaction of a table's small files in one `replace` snapshot, and
//! snapshot expiry deleting the files only expired snapshots needed
//! (`tributary compact`).
//! `tests/it/spike.rs` shows the iceberg API underneath.
//!
//! Everything lives under [`keys::ICEBERG_DIR`] (`_iceberg/`), which lakequery
//! does not read as a dataset (names starting with `_` are not tables):
//! `_iceberg/catalog.sqlite` and the warehouse `_iceberg/warehouse/`, one
//! folder per namespace and table (`<namespace>/<table>/{metadata,data}/`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub mod commit;
pub mod compact;
mod files;
#[cfg(feature = "glue")]
pub mod glue;
pub mod merge;

pub use commit::{IcebergCommitter, NAMESPACE, PIPELINE_PROPERTY, RUN_ID_PROPERTY, TableHousekeeping, table_ident};

use iceberg::io::LocalFsStorageFactory;
use iceberg::{CatalogBuilder, Error, ErrorKind};
use iceberg_catalog_sql::{
    SQL_CATALOG_PROP_BIND_STYLE, SQL_CATALOG_PROP_URI, SQL_CATALOG_PROP_WAREHOUSE, SqlBindStyle, SqlCatalog,
    SqlCatalogBuilder,
};
use tributary_core::keys;

/// The catalog's name: the `catalog_name` column of its rows, so a reader
/// (pyiceberg's `SqlCatalog("tributary", …)`) must use the same name.
pub const CATALOG_NAME: &str = "tributary";

/// Opens (creating if needed) the SQL catalog of the lake at `lake_root`:
/// SQLite at `<lake_root>/_iceberg/catalog.sqlite`, warehouse
/// `file://<lake_root>/_iceberg/warehouse`, local-filesystem FileIO.
///
/// Must run inside a tokio runtime (the catalog takes the current one).
///
/// # Errors
/// `lake_root` not absolute or not UTF-8 ([`ErrorKind::DataInvalid`]), the
/// folders cannot be created, or SQLite cannot open the file.
pub async fn local_catalog(lake_root: &Path) -> iceberg::Result<SqlCatalog> {
    let dir = lake_root.join(keys::ICEBERG_DIR);
    std::fs::create_dir_all(dir.join(keys::ICEBERG_WAREHOUSE_DIR))
        .map_err(|err| Error::new(ErrorKind::Unexpected, format!("creating {}", dir.display())).with_source(err))?;
    if !dir.is_absolute() {
        return Err(Error::new(ErrorKind::DataInvalid, format!("{} is not an absolute path", dir.display())));
    }
    let utf8 = |path: &Path| {
        path.to_str()
            .map(str::to_string)
            .ok_or_else(|| Error::new(ErrorKind::DataInvalid, format!("{} is not UTF-8", path.display())))
    };
    let database = utf8(&dir.join(keys::ICEBERG_CATALOG_FILE))?;
    // `file://` and the path as it is: iceberg's local FileIO strips the
    // scheme and does not percent-decode (a `url::Url` would encode spaces).
    let warehouse = format!("file://{}", utf8(&dir.join(keys::ICEBERG_WAREHOUSE_DIR))?);
    let props = HashMap::from([
        // `mode=rwc`: create the file when it is not there.
        (SQL_CATALOG_PROP_URI.to_string(), format!("sqlite://{database}?mode=rwc")),
        // Table locations are `<warehouse>/<ns>/<table>`.
        (SQL_CATALOG_PROP_WAREHOUSE.to_string(), warehouse),
        (SQL_CATALOG_PROP_BIND_STYLE.to_string(), SqlBindStyle::QMark.to_string()),
    ]);
    SqlCatalogBuilder::default().with_storage_factory(Arc::new(LocalFsStorageFactory)).load(CATALOG_NAME, props).await
}

/// The local runtime's committer: an [`IcebergCommitter`] over the local
/// catalog of the lake at `lake_root`, opened on the first commit (so a
/// lake without Iceberg datasets gets no `_iceberg/` folder, and building
/// it needs no async runtime).
pub struct LocalCommitter {
    lake_root: std::path::PathBuf,
    store: Arc<dyn tributary_core::ports::ObjectStore>,
    committer: tokio::sync::OnceCell<IcebergCommitter>,
}

impl LocalCommitter {
    /// A committer for the lake at `lake_root` (absolute), reading staged
    /// files from `store` (the same lake).
    pub fn new(lake_root: impl Into<std::path::PathBuf>, store: Arc<dyn tributary_core::ports::ObjectStore>) -> Self {
        Self { lake_root: lake_root.into(), store, committer: tokio::sync::OnceCell::new() }
    }

    /// The committer, the catalog opened on first use.
    ///
    /// # Errors
    /// As [`local_catalog`], as a transient [`tributary_core::ports::PortError`].
    pub async fn committer(&self) -> Result<&IcebergCommitter, tributary_core::ports::PortError> {
        self.committer.get_or_try_init(|| local_committer(&self.lake_root, self.store.clone())).await.map_err(|err| {
            let message = format!("{err:#}");
            let target = self.lake_root.join(keys::iceberg_catalog_key()).display().to_string();
            tributary_core::ports::PortError::transient("open the local Iceberg catalog", target, err)
                .with_message(message)
        })
    }
}

#[async_trait::async_trait]
impl tributary_core::tables::TableCommitter for LocalCommitter {
    async fn commit_run(
        &self,
        run: &tributary_core::tables::RunFiles,
    ) -> Result<tributary_core::tables::CommittedRun, tributary_core::ports::PortError> {
        self.committer().await?.commit_run(run).await
    }

    async fn replay_run(
        &self,
        run: &tributary_core::tables::RunFiles,
    ) -> Result<tributary_core::tables::CommittedRun, tributary_core::ports::PortError> {
        self.committer().await?.replay_run(run).await
    }
}

/// An [`IcebergCommitter`] over the local catalog of the lake at
/// `lake_root` ([`local_catalog`]), reading staged files and published
/// schemas from `store` (the same lake).
///
/// # Errors
/// As [`local_catalog`].
pub async fn local_committer(
    lake_root: &Path,
    store: Arc<dyn tributary_core::ports::ObjectStore>,
) -> iceberg::Result<IcebergCommitter> {
    Ok(IcebergCommitter::new(Arc::new(local_catalog(lake_root).await?), store))
}
