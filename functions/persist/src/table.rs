//! The dataset's table schema in the lake (`_schema/<dataset>.json`):
//! read with its version, converted against, written back when a page
//! widened it (a conditional write), and published
//! (`_schema/<dataset>.arrow`, the catalog).

use std::path::Path;

use bytes::Bytes;
use contracts::{PersistMessage, TableFormat};

use tributary_core::keys;
use tributary_core::ports::{ObjectStore, PortError};

use crate::convert::{PageOutput, PageSettings, convert_page};
use crate::deps::Deps;
use crate::error::{PersistError, encode_error, local_error};
use crate::handler::KeptPage;
use crate::infer::Ty;
use crate::publish::TableSchema;

/// Conversions of one page against a dataset schema that other pages keep
/// changing before it is written back; then the message is retried later.
pub const SCHEMA_WRITE_ATTEMPTS: u32 = 4;

/// The dataset's table schema from the lake with its object version (for
/// the conditional write back), `None` before its first page.
///
/// # Errors
/// [`PersistError::Store`] when it cannot be read, or is not a schema
/// (permanent: someone wrote it by hand; fix or delete the object).
pub async fn read_schema(store: &dyn ObjectStore, key: &str) -> Result<Option<(TableSchema, String)>, PersistError> {
    match store.get_versioned(key).await? {
        Some((bytes, version)) => serde_json::from_slice(&bytes)
            .map(|schema| Some((schema, version)))
            .map_err(|err| encode_error("read dataset schema", key, err)),
        None => Ok(None),
    }
}

/// Publishes the table schema: the Arrow schema at
/// `_schema/<dataset>.arrow`, and, for a Parquet dataset, the Hive table
/// definition to the catalog. An Iceberg dataset's table is the
/// committer's (`deps.tables`): a Hive definition of the same name in the
/// same Glue database would replace it.
///
/// Only ever forward: the Arrow schema is written with a conditional put
/// on the object read, and only when the published one is of a lower
/// version (or missing), the catalog's table first (it never takes a
/// lower version either); when it is current, nothing is written.
/// Pages converted against an older version publish it too (to mend a
/// missing or stale object), and one of them that published after a page
/// that widened the schema put the older schema back: a trial's run
/// coalesced its files onto it and lost a column that appeared mid-run (7
/// runs of 12).
///
/// # Errors
/// Store and catalog failures; the object changing under every one of
/// [`SCHEMA_WRITE_ATTEMPTS`] writes (transient).
async fn publish(dataset: &str, table: &TableSchema, format: TableFormat, deps: Deps<'_>) -> Result<(), PersistError> {
    let key = keys::arrow_schema_key(dataset);
    let mut catalog = deps.catalog.filter(|_| format == TableFormat::Parquet);
    let bytes = Bytes::from(
        lake_format::codec::encode_arrow_schema(&table.arrow_schema())
            .map_err(|err| PersistError::Store(PortError::permanent("encode the Arrow schema", key.clone(), err)))?,
    );
    for _ in 0..SCHEMA_WRITE_ATTEMPTS {
        let (published, tag) = match deps.store.get_versioned(&key).await? {
            Some((old, tag)) => (published_version(&old), Some(tag)),
            None => (None, None),
        };
        if published.is_some_and(|version| version >= table.version) {
            return Ok(());
        }
        // The catalog first, once, as before the Arrow schema: a page that
        // finds the published schema current makes no catalog call.
        if let Some(catalog) = catalog.take() {
            catalog.upsert_table(&table.table_def(dataset)).await?;
        }
        if deps.store.put_if(&key, bytes.clone(), tag.as_deref()).await? {
            return Ok(());
        }
    }
    Err(PersistError::Store(PortError::transient_msg(
        "publish the Arrow schema",
        key,
        format!("other pages changed it during each of {SCHEMA_WRITE_ATTEMPTS} writes"),
    )))
}

/// The table version a published Arrow schema carries
/// (`lake_format::meta::META_VERSION`); `None` when it has none or cannot
/// be read (then it is replaced).
fn published_version(bytes: &[u8]) -> Option<u64> {
    let schema = lake_format::codec::decode_arrow_schema(bytes).ok()?;
    schema.metadata().get(lake_format::meta::META_VERSION).and_then(|v| v.parse::<u64>().ok())
}

/// Step 4 of [`crate::persist_page`]: the page converted against the
/// dataset's table schema, and the schema widened by this page written
/// back only if no other page changed it meanwhile (a conditional write on
/// the version read). When one did, the page is converted again against
/// what that page left, as if the two had run one after the other: a
/// change that conflicts with it is quarantined, never written beside it.
/// At most [`SCHEMA_WRITE_ATTEMPTS`] conversions.
///
/// # Errors
/// [`PersistError::Layout`] (another partition layout than the dataset's)
/// and [`PersistError::Convert`] (permanent); the schema still changing
/// after every attempt, and store failures (transient).
pub(crate) async fn convert_against_table_schema(
    message: &PersistMessage,
    kept: &KeptPage,
    temp_dir: &Path,
    deps: Deps<'_>,
) -> Result<PageOutput, PersistError> {
    let dataset = &message.target.dataset;
    let schema_key = keys::schema_key(dataset);
    for attempt in 1..=SCHEMA_WRITE_ATTEMPTS {
        let (lake_table, version) = match read_schema(deps.store, &schema_key).await? {
            Some((schema, version)) => (Some(schema), Some(version)),
            None => (None, None),
        };
        if let Some(conflict) = lake_table.as_ref().and_then(|t| t.layout_conflict(&message.target)) {
            return Err(PersistError::Layout { dataset: dataset.clone(), problem: conflict });
        }
        let lake_schema = lake_table.as_ref().map(|t| t.table.clone());
        let output =
            convert_once(message, kept, lake_schema, &temp_dir.join(format!("attempt-{attempt}")), deps).await?;
        if output.rows_written == 0 {
            // No file holds its schema, so the page neither makes the
            // dataset's table nor changes it: an empty (or wholly
            // quarantined) page that landed first would otherwise make a
            // table of no columns, and the first page with records would
            // then report every column as added (a schema-change alert on
            // the dataset's first run).
            return Ok(output);
        }
        let lake = lake_table.clone().unwrap_or_default();
        let mut table = TableSchema { table: output.schema.clone(), ..lake.clone() }.with_layout(&message.target);
        table.note_partitions(output.files.iter().map(|f| f.partition.as_str()), chrono::Utc::now().date_naive());
        if lake_table.as_ref() == Some(&table) {
            // Mends a missing or older published schema; never a newer one.
            publish(dataset, &table, message.target.table_format, deps).await?;
            return Ok(output);
        }
        table.version = lake.version + 1;
        let bytes =
            serde_json::to_vec_pretty(&table).map_err(|err| encode_error("encode dataset schema", &schema_key, err))?;
        if deps.store.put_if(&schema_key, Bytes::from(bytes), version.as_deref()).await? {
            publish(dataset, &table, message.target.table_format, deps).await?;
            return Ok(output);
        }
        if attempt < SCHEMA_WRITE_ATTEMPTS {
            tracing::info!(key = %schema_key, attempt, "the dataset's schema changed during the conversion; converting again");
        }
    }
    Err(PersistError::Store(PortError::transient_msg(
        "update dataset schema",
        schema_key,
        format!("other pages changed it during each of {SCHEMA_WRITE_ATTEMPTS} conversions"),
    )))
}

/// One conversion of the kept page against `lake_schema` (the dataset's
/// table, `None` before its first page), on a blocking thread, its files
/// in `dir`.
async fn convert_once(
    message: &PersistMessage,
    kept: &KeptPage,
    lake_schema: Option<Ty>,
    dir: &Path,
    deps: Deps<'_>,
) -> Result<PageOutput, PersistError> {
    std::fs::create_dir_all(dir).map_err(|err| local_error("create temporary folder", err))?;
    let (source, format, target) = (kept.source.clone(), kept.format.clone(), message.target.clone());
    let (writer, limits, lineage) = (deps.config.writer.clone(), deps.config.limits, kept.lineage.clone());
    let (dir, run_date) = (dir.to_path_buf(), message.run_date);
    let converted = tokio::task::spawn_blocking(move || {
        let settings = PageSettings {
            target: &target,
            lineage: Some(&lineage),
            lake_schema: lake_schema.as_ref(),
            run_date,
            writer: &writer,
            limits,
            temp_dir: &dir,
        };
        convert_page(&source, &format, settings)
    })
    .await
    .map_err(|err| PersistError::Claim {
        key: kept.raw_key.clone(),
        problem: format!("conversion panicked: {err}"),
        source: Some(err),
    })?;
    converted.map_err(|source| PersistError::Convert {
        dataset: message.target.dataset.clone(),
        page: message.page.index,
        source,
    })
}
