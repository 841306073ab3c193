//! Apache Iceberg tables for the lake: the groundwork of issue 15.
//!
//! For now only the local catalog: a SQL catalog (iceberg-catalog-sql) on a
//! SQLite file in the lake directory, whose tables pyiceberg's `SqlCatalog`
//! and DuckDB's iceberg extension read too. Table creation, writing data
//! files with Iceberg field ids, fast-append commits and schema updates go
//! through Apache's `iceberg` crate directly; `tests/spike.rs` shows them.
//!
//! Everything lives under [`ICEBERG_DIR`] (`_iceberg/`), which lakequery
//! does not read as a dataset (names starting with `_` are not tables):
//! `_iceberg/catalog.sqlite` and the warehouse `_iceberg/warehouse/`, one
//! folder per namespace and table (`<namespace>/<table>/{metadata,data}/`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use iceberg::io::LocalFsStorageFactory;
use iceberg::{CatalogBuilder, Error, ErrorKind};
use iceberg_catalog_sql::{
    SQL_CATALOG_PROP_BIND_STYLE, SQL_CATALOG_PROP_URI, SQL_CATALOG_PROP_WAREHOUSE, SqlBindStyle, SqlCatalog,
    SqlCatalogBuilder,
};

/// The lake folder holding the catalog file and the warehouse.
pub const ICEBERG_DIR: &str = "_iceberg";

/// The SQLite file of the catalog, under [`ICEBERG_DIR`].
pub const CATALOG_FILE: &str = "catalog.sqlite";

/// The warehouse folder (table locations), under [`ICEBERG_DIR`].
pub const WAREHOUSE_DIR: &str = "warehouse";

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
    let dir = lake_root.join(ICEBERG_DIR);
    std::fs::create_dir_all(dir.join(WAREHOUSE_DIR))
        .map_err(|err| Error::new(ErrorKind::Unexpected, format!("creating {}", dir.display())).with_source(err))?;
    if !dir.is_absolute() {
        return Err(Error::new(ErrorKind::DataInvalid, format!("{} is not an absolute path", dir.display())));
    }
    let utf8 = |path: &Path| {
        path.to_str()
            .map(str::to_string)
            .ok_or_else(|| Error::new(ErrorKind::DataInvalid, format!("{} is not UTF-8", path.display())))
    };
    let database = utf8(&dir.join(CATALOG_FILE))?;
    // `file://` and the path as it is: iceberg's local FileIO strips the
    // scheme and does not percent-decode (a `url::Url` would encode spaces).
    let warehouse = format!("file://{}", utf8(&dir.join(WAREHOUSE_DIR))?);
    let props = HashMap::from([
        // `mode=rwc`: create the file when it is not there.
        (SQL_CATALOG_PROP_URI.to_string(), format!("sqlite://{database}?mode=rwc")),
        // Table locations are `<warehouse>/<ns>/<table>`.
        (SQL_CATALOG_PROP_WAREHOUSE.to_string(), warehouse),
        (SQL_CATALOG_PROP_BIND_STYLE.to_string(), SqlBindStyle::QMark.to_string()),
    ]);
    SqlCatalogBuilder::default().with_storage_factory(Arc::new(LocalFsStorageFactory)).load(CATALOG_NAME, props).await
}
