//! The AWS side: an [`IcebergCommitter`] over the AWS Glue Data Catalog
//! (iceberg-catalog-glue), for the Persist Lambda.
//!
//! - **Catalog.** The stack's Glue database (`GLUE_DATABASE`, the
//!   template's `LakeDatabase`) is the namespace: each Iceberg dataset is a
//!   Glue table with `table_type=ICEBERG` and `metadata_location`, which
//!   Athena (engine 3), Spark's `GlueCatalog` and pyiceberg read. A commit
//!   is Glue's `UpdateTable` with the table's `VersionId` (optimistic
//!   locking: a concurrent commit fails it and Persist retries the page)
//!   and `SkipArchive` (no table version per commit: Glue keeps at most
//!   100,000 table versions per account, "AWS Glue endpoints and quotas").
//! - **Files.** Tables live at `s3://<lake>/_iceberg/warehouse/<database>/<table>/`
//!   ([`keys::iceberg_warehouse_prefix`]), never under the database's `LocationUri` (the
//!   bucket's root, where the Hive datasets are). Metadata, manifests and
//!   data files go through iceberg's `s3://` FileIO (OpenDAL's S3 service),
//!   signed with the credentials of the environment (the Lambda's role).
//! - **Endpoint.** `AWS_ENDPOINT_URL` (moto in the tests) redirects both
//!   Glue and the FileIO; `TRIBUTARY_S3_FORCE_PATH_STYLE=true` makes the
//!   FileIO path-style, as the lake's own S3 client.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::{S3_PATH_STYLE_ACCESS, S3_REGION};
use iceberg::{CatalogBuilder, Error, ErrorKind};
use iceberg_catalog_glue::{GLUE_CATALOG_PROP_URI, GLUE_CATALOG_PROP_WAREHOUSE, GlueCatalog, GlueCatalogBuilder};
use tributary_core::ports::ObjectStore;

use tributary_core::keys;

use crate::{CATALOG_NAME, IcebergCommitter};

/// Where the Glue committer writes and which endpoint it talks to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlueSettings {
    /// The Glue database holding the tables (1 to 255 characters; it must
    /// exist: the stack creates it).
    pub database: String,
    /// The lake bucket: tables go under `s3://<bucket>/_iceberg/warehouse/`.
    pub bucket: String,
    /// The AWS region (`AWS_REGION`), for S3 request signing.
    pub region: Option<String>,
    /// An endpoint for Glue and S3 (`AWS_ENDPOINT_URL`); `None`: AWS's.
    pub endpoint: Option<String>,
    /// Path-style S3 addressing (`TRIBUTARY_S3_FORCE_PATH_STYLE`), which
    /// emulators need.
    pub path_style: bool,
}

impl GlueSettings {
    /// `s3://<bucket>/_iceberg/warehouse`.
    pub fn warehouse(&self) -> String {
        format!("s3://{}/{}", self.bucket, keys::iceberg_warehouse_prefix())
    }
}

/// Opens the Glue catalog of `settings`; credentials and region for Glue
/// come from the environment (aws-config's default chain).
///
/// Must run inside a tokio runtime.
///
/// # Errors
/// An empty database or bucket ([`ErrorKind::DataInvalid`]).
pub async fn glue_catalog(settings: &GlueSettings) -> iceberg::Result<GlueCatalog> {
    if settings.database.is_empty() || settings.bucket.is_empty() {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("Glue committer without a database or bucket: {settings:?}"),
        ));
    }
    let mut props = HashMap::from([(GLUE_CATALOG_PROP_WAREHOUSE.to_string(), settings.warehouse())]);
    if let Some(endpoint) = &settings.endpoint {
        // Also the FileIO's `s3.endpoint` (iceberg-catalog-glue copies it).
        props.insert(GLUE_CATALOG_PROP_URI.to_string(), endpoint.clone());
    }
    if let Some(region) = &settings.region {
        props.insert(S3_REGION.to_string(), region.clone());
    }
    // iceberg's FileIO defaults to virtual-hosted style; say it either way.
    props.insert(S3_PATH_STYLE_ACCESS.to_string(), settings.path_style.to_string());
    GlueCatalogBuilder::default().load(CATALOG_NAME, props).await
}

/// An [`IcebergCommitter`] over the Glue catalog of `settings`: tables in
/// the database `settings.database`, at
/// `s3://<bucket>/_iceberg/warehouse/<database>/<table>`; staged files and
/// published schemas read from `store` (the lake bucket).
///
/// # Errors
/// As [`glue_catalog`].
pub async fn glue_committer(settings: &GlueSettings, store: Arc<dyn ObjectStore>) -> iceberg::Result<IcebergCommitter> {
    let catalog = glue_catalog(settings).await?;
    Ok(IcebergCommitter::new(Arc::new(catalog), store)
        .with_namespace(settings.database.clone())
        .with_location_root(settings.warehouse()))
}
