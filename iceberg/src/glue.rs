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
//! - **Upkeep.** [`GlueOptimizers`]: Glue's table optimizers (compaction,
//!   snapshot retention, orphan-file deletion) turned on for each table
//!   Persist commits to, once per table per Lambda container, when the
//!   stack asks for them (`TABLE_OPTIMIZERS`). They run as Glue's own jobs
//!   under a role the stack gives them; their commits race Persist's like
//!   any other writer's, and Persist's commit re-plans on the conflict
//!   (`PLAN_ATTEMPTS`) or the page is retried.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_glue::types::{
    IcebergOrphanFileDeletionConfiguration, IcebergRetentionConfiguration, OrphanFileDeletionConfiguration,
    RetentionConfiguration, TableOptimizerConfiguration, TableOptimizerType,
};
use iceberg::io::{S3_PATH_STYLE_ACCESS, S3_REGION};
use iceberg::{CatalogBuilder, Error, ErrorKind};
use iceberg_catalog_glue::{GLUE_CATALOG_PROP_URI, GLUE_CATALOG_PROP_WAREHOUSE, GlueCatalog, GlueCatalogBuilder};
use tributary_core::ports::ObjectStore;

use tributary_core::keys;

use crate::commit::TableHousekeeping;
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

/// The table optimizers to turn on for every Iceberg table, and their
/// settings (AWS Glue API, `CreateTableOptimizer`; "Optimizing Iceberg
/// tables" in the AWS Glue developer guide).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptimizerSettings {
    /// `compaction`, `retention`, `orphan_file_deletion` (Glue's
    /// `TableOptimizerType` values), each at most once.
    pub kinds: Vec<String>,
    /// The role Glue runs the optimizers as (`RoleArn`): it reads and
    /// writes the table's files and updates its Glue table. Its account is
    /// the catalog's (`CatalogId`).
    pub role_arn: String,
    /// `retention`: snapshots older than this many days are expired
    /// (`SnapshotRetentionPeriodInDays`, Glue's default 5).
    pub snapshot_retention_days: i32,
    /// `retention`: at least this many snapshots are kept
    /// (`NumberOfSnapshotsToRetain`, Glue's default 1).
    pub snapshots_to_retain: i32,
    /// `orphan_file_deletion`: files no snapshot references, older than
    /// this many days, are deleted (`OrphanFileRetentionPeriodInDays`,
    /// Glue's default 3). A run's files are referenced within minutes of
    /// being written, so anything below a day is never needed.
    pub orphan_file_retention_days: i32,
}

/// Glue's table optimizers for the tables the committer writes
/// ([`TableHousekeeping`] for [`IcebergCommitter::with_housekeeping`]).
pub struct GlueOptimizers {
    client: aws_sdk_glue::Client,
    settings: OptimizerSettings,
}

impl GlueOptimizers {
    /// The optimizers of `settings`, created through `client`.
    pub fn new(client: aws_sdk_glue::Client, settings: OptimizerSettings) -> Self {
        Self { client, settings }
    }

    /// The optimizer configuration of `kind`.
    fn configuration(&self, kind: &TableOptimizerType) -> TableOptimizerConfiguration {
        let s = &self.settings;
        let mut configuration = TableOptimizerConfiguration::builder().role_arn(&s.role_arn).enabled(true);
        match kind {
            TableOptimizerType::Retention => {
                let iceberg = IcebergRetentionConfiguration::builder()
                    .snapshot_retention_period_in_days(s.snapshot_retention_days)
                    .number_of_snapshots_to_retain(s.snapshots_to_retain)
                    .clean_expired_files(true)
                    .build();
                configuration = configuration
                    .retention_configuration(RetentionConfiguration::builder().iceberg_configuration(iceberg).build());
            }
            TableOptimizerType::OrphanFileDeletion => {
                let iceberg = IcebergOrphanFileDeletionConfiguration::builder()
                    .orphan_file_retention_period_in_days(s.orphan_file_retention_days)
                    .build();
                configuration = configuration.orphan_file_deletion_configuration(
                    OrphanFileDeletionConfiguration::builder().iceberg_configuration(iceberg).build(),
                );
            }
            _ => {}
        }
        configuration.build()
    }
}

/// The account of an IAM role ARN (`arn:<partition>:iam::<account>:role/...`).
fn account_of(role_arn: &str) -> Option<&str> {
    let mut parts = role_arn.split(':');
    match (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("arn"), Some(_), Some("iam"), Some(""), Some(account)) if !account.is_empty() => Some(account),
        _ => None,
    }
}

#[async_trait::async_trait]
impl TableHousekeeping for GlueOptimizers {
    async fn ensure(&self, table: &iceberg::TableIdent) -> Result<(), String> {
        let account = account_of(&self.settings.role_arn)
            .ok_or_else(|| format!("the optimizer role {:?} is not an IAM role ARN", self.settings.role_arn))?;
        let database = table.namespace().iter().map(String::as_str).collect::<Vec<_>>().join(".");
        for kind in &self.settings.kinds {
            let kind = TableOptimizerType::from(kind.as_str());
            let created = self
                .client
                .create_table_optimizer()
                .catalog_id(account)
                .database_name(&database)
                .table_name(table.name())
                .r#type(kind.clone())
                .table_optimizer_configuration(self.configuration(&kind))
                .send()
                .await;
            match created {
                Ok(_) => tracing::info!(table = %table, optimizer = kind.as_str(), "table optimizer turned on"),
                Err(err) if err.as_service_error().is_some_and(|e| e.is_already_exists_exception()) => {}
                Err(err) => {
                    return Err(format!(
                        "CreateTableOptimizer {} for {table}: {}",
                        kind.as_str(),
                        aws_sdk_glue::error::DisplayErrorContext(&err)
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_the_roles_account() {
        assert_eq!(account_of("arn:aws:iam::123456789012:role/optimizer"), Some("123456789012"));
        assert_eq!(account_of("arn:aws-cn:iam::210987654321:role/a/b"), Some("210987654321"));
        assert_eq!(account_of("arn:aws:s3:::bucket"), None);
        assert_eq!(account_of("optimizer"), None);
    }
}
