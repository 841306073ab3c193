//! tributary's local SQL engine: [`LakeEngine`], the [`QueryEngine`] port
//! over a lake folder, run by DataFusion.
//!
//! It is what `AthenaEngine` is on AWS, for the CLI's local runtime: the
//! same `?` parameters, the same three calls (start, wait, page) and the
//! same JSON typing of result values. DataFusion is a large dependency, so
//! this crate is linked by the CLI only, never by a Lambda function.
//!
//! # Tables
//!
//! Each query sees every dataset folder directly under the lake root (the
//! layout of `tributary_core::keys`: `<dataset>/dt=<YYYY-MM-DD>/<file>.parquet`) as
//! a table named like the folder, read whole with the dataset's published
//! schema (`_schema/<dataset>.arrow`) and its partition columns as `Utf8`
//! columns. Folders that are not datasets are not tables: `raw/`,
//! `quarantine/`, `athena-results/` (`contracts::spec::RESERVED_DATASETS`)
//! and any name starting with `_` or `.`
//! (`_runs/`, `_claims/`, …). A dataset folder holding no Parquet file yet
//! is not a table either. Names are taken as they are: a dataset called
//! `web-events` is `"web-events"` in SQL. `information_schema` is on, so
//! `SHOW TABLES` lists them.
//!
//! An Iceberg dataset (`target.table_format: iceberg`), a table of the
//! lake's local catalog (`_iceberg/catalog.sqlite`, namespace `tributary`),
//! is the table's current snapshot instead of its folder (which holds only
//! the staged pages of runs not committed yet): exactly the committed data
//! files, so whole runs only, read with the table's current schema (a
//! column or struct field a file predates reads as null). Its partition
//! columns read as the Parquet form's do: text (`dt` `2026-11-29`, `hour`
//! `07`, a value column as the value), after the other columns. A lake
//! without `_iceberg/catalog.sqlite` has no Iceberg datasets and gets none
//! (no catalog is created by a query).
//!
//! Queries are read-only: DDL (`CREATE …`), DML (`INSERT`, `COPY … TO`) and
//! other statements (`SET`) are refused, so a query cannot write to the
//! disk.

mod iceberg;
mod placeholders;
mod rows;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::RecordBatch;
use async_trait::async_trait;
use contracts::spec::RESERVED_DATASETS;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{ParamValues, TableReference};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::ListingOptions;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::scalar::ScalarValue;
use lake_format::partition::PartitionKind;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tributary_core::ports::{PortError, Query, QueryEngine, QueryState, ResultPage};

pub use placeholders::numbered_placeholders;

/// Rows per [`QueryEngine::page`]: 1,000, as `GetQueryResults` gives at most.
pub const PAGE_ROWS: usize = 1000;

/// The Hive partition column every dataset has (`dt=<YYYY-MM-DD>` folders),
/// typed `Utf8`.
pub const PARTITION_COLUMN: &str = "dt";

/// Runs SQL over a lake folder with DataFusion.
///
/// [`QueryEngine::start`] runs the query to the end and keeps its rows in
/// memory, under an execution id `local-query-<n>` (`n` counting from 1 per
/// engine); [`QueryEngine::wait`] then answers at once and
/// [`QueryEngine::page`] reads the kept rows, [`PAGE_ROWS`] at a time. Rows
/// are kept until the engine is dropped: this is for the CLI's short-lived
/// runs and modest results, not a server.
///
/// `Query::database`, `workgroup` and `output_location` are accepted and
/// ignored: one lake folder is one database, and results stay in memory.
pub struct LakeEngine {
    lake_root: PathBuf,
    /// Lists and structs as JSON values (`tributary query`), not as
    /// JSON text in a string (the rows Athena's adapter gives, which the
    /// Athena strategy binds).
    nested_values: bool,
    next_id: AtomicU64,
    executions: Mutex<HashMap<String, Execution>>,
}

/// The outcome of one started query.
enum Execution {
    Succeeded { columns: Arc<[String]>, rows: Arc<[Map<String, Value>]> },
    Failed { reason: String },
}

/// A dataset to register as a table.
struct Dataset {
    name: String,
    source: Source,
}

/// Where a dataset's rows are.
enum Source {
    /// A folder of Hive-partitioned Parquet files.
    Folder(PathBuf),
    /// An Iceberg table's current snapshot, or why it cannot be read.
    Iceberg(Result<iceberg::Snapshot, String>),
}

impl LakeEngine {
    /// An engine over the lake whose root folder is `lake_root` (the folder
    /// the local object store writes to). The folder is read at each
    /// [`QueryEngine::start`], so data written between queries is seen.
    pub fn new(lake_root: impl Into<PathBuf>) -> Self {
        Self {
            lake_root: lake_root.into(),
            nested_values: false,
            next_id: AtomicU64::new(1),
            executions: Mutex::new(HashMap::new()),
        }
    }

    /// The same engine, giving lists and structs as JSON arrays and
    /// objects (`tributary query` prints them so); by default they are
    /// JSON text in a string, as the Athena adapter gives every value.
    #[must_use]
    pub fn with_nested_values(mut self) -> Self {
        self.nested_values = true;
        self
    }

    /// The lake root given to [`LakeEngine::new`].
    pub fn lake_root(&self) -> &Path {
        &self.lake_root
    }

    fn executions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Execution>> {
        // The map is only inserted into and read: a panic elsewhere cannot
        // leave it half-updated.
        self.executions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for LakeEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LakeEngine")
            .field("lake_root", &self.lake_root)
            .field("executions", &self.executions().len())
            .finish()
    }
}

#[async_trait]
impl QueryEngine for LakeEngine {
    /// Registers the lake's datasets in a fresh DataFusion session, binds
    /// `query.parameters` to the `?` placeholders (as `Utf8` values, like
    /// Athena's `varchar` parameters: compare with other types through
    /// `CAST(? AS …)`), runs the query and keeps its rows.
    ///
    /// A query that fails to plan or run (unknown table, bad SQL, as many
    /// parameters as placeholders not given) still gets an id: its failure
    /// is reported by [`QueryEngine::wait`], as Athena reports it. A dataset
    /// whose files cannot be read together (say a column `Int64` in one
    /// file and `Utf8` in another) is left out with a warning, and named in
    /// the reason if the query then fails; so is an Iceberg table that
    /// cannot be loaded (its folder is not read instead). A lake whose
    /// Iceberg catalog exists but cannot be read fails every query, naming
    /// the catalog: which datasets are tables is then unknown.
    ///
    /// # Errors
    /// [`PortError::Permanent`] when the lake root cannot be read (missing,
    /// not a folder, no permission).
    async fn start(&self, query: &Query) -> Result<String, PortError> {
        let unusable = |err: std::io::Error| {
            let message = format!("cannot read the lake folder: {err}");
            PortError::permanent("StartQueryExecution", self.lake_root.display().to_string(), err).with_message(message)
        };
        let root = tokio::fs::canonicalize(&self.lake_root).await.map_err(unusable)?;
        let mut datasets = find_datasets(&root).await.map_err(unusable)?;
        let id = format!("local-query-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let outcome = match iceberg::find_tables(&root).await {
            Ok(tables) => {
                // An Iceberg dataset's folder holds only staged pages of runs
                // not committed yet: the table wins, and before its first
                // commit (no table yet) the folder is not a table either.
                let mut uncommitted = Vec::new();
                datasets.retain(|dataset| {
                    if tables.iter().any(|(name, _)| *name == dataset.name) {
                        false
                    } else if kept_as_iceberg(&root, &dataset.name) {
                        uncommitted.push(dataset.name.clone());
                        false
                    } else {
                        true
                    }
                });
                datasets
                    .extend(tables.into_iter().map(|(name, table)| Dataset { name, source: Source::Iceberg(table) }));
                datasets.sort_by(|a, b| a.name.cmp(&b.name));
                run(&datasets, query, self.nested_values).await.map_err(|reason| not_committed(reason, &uncommitted))
            }
            Err(reason) => Err(reason),
        };
        let execution = match outcome {
            Ok((columns, rows)) => {
                tracing::info!(query_execution_id = %id, tables = datasets.len(), rows = rows.len(), "query succeeded");
                Execution::Succeeded { columns: columns.into(), rows: rows.into() }
            }
            Err(reason) => {
                tracing::warn!(query_execution_id = %id, tables = datasets.len(), %reason, "query failed");
                Execution::Failed { reason }
            }
        };
        self.executions().insert(id.clone(), execution);
        Ok(id)
    }

    /// The query's final state, at once ([`QueryEngine::start`] ran it to
    /// the end; `deadline` is not needed): [`QueryState::Succeeded`], or
    /// [`QueryState::Failed`] with state `FAILED` and DataFusion's message.
    ///
    /// # Errors
    /// [`PortError::NotFound`] (`what: "query"`) for an id this engine did
    /// not give.
    async fn wait(&self, execution_id: &str, _deadline: Instant) -> Result<QueryState, PortError> {
        match self.executions().get(execution_id) {
            Some(Execution::Succeeded { .. }) => Ok(QueryState::Succeeded),
            Some(Execution::Failed { reason }) => {
                Ok(QueryState::Failed { state: "FAILED".to_string(), reason: reason.clone() })
            }
            None => Err(PortError::NotFound { what: "query", target: execution_id.to_string() }),
        }
    }

    /// Up to [`PAGE_ROWS`] rows starting at the row offset `token` names
    /// (`None`: the first page). `next_token` is the decimal offset of the
    /// next page's first row, `None` on the last page. A query with no rows
    /// has one page with its columns and no rows.
    ///
    /// # Errors
    /// [`PortError::NotFound`] (`what: "query"`) for an unknown id;
    /// [`PortError::Permanent`] for a failed query, or a token that is not
    /// a decimal row offset inside the results (naming the token).
    async fn page(&self, execution_id: &str, token: Option<&str>) -> Result<ResultPage, PortError> {
        let (columns, rows) = match self.executions().get(execution_id) {
            Some(Execution::Succeeded { columns, rows }) => (columns.clone(), rows.clone()),
            Some(Execution::Failed { reason }) => {
                return Err(PortError::permanent_msg(
                    "GetQueryResults",
                    execution_id.to_string(),
                    format!("the query failed, it has no results: {reason}"),
                ));
            }
            None => return Err(PortError::NotFound { what: "query", target: execution_id.to_string() }),
        };
        let start = match token {
            None => 0,
            Some(token) => token.parse::<usize>().ok().filter(|&offset| offset < rows.len()).ok_or_else(|| {
                PortError::permanent_msg(
                    "GetQueryResults",
                    execution_id.to_string(),
                    format!("page token {token:?} is not a row offset below {}", rows.len()),
                )
            })?,
        };
        let end = rows.len().min(start + PAGE_ROWS);
        Ok(ResultPage {
            columns: columns.to_vec(),
            rows: rows[start..end].to_vec(),
            next_token: (end < rows.len()).then(|| end.to_string()),
        })
    }
}

/// The dataset folders directly under `root`, sorted by name: every folder
/// but [`RESERVED_DATASETS`] (raw pages, quarantined records, Athena's result
/// files: the names no spec may give a dataset), names starting with `_` or `.`, names that are not
/// UTF-8, and folders holding no `.parquet` file.
///
/// # Errors
/// The I/O error of reading `root` itself; unreadable dataset folders are
/// skipped with a warning.
async fn find_datasets(root: &Path) -> std::io::Result<Vec<Dataset>> {
    let mut datasets = Vec::new();
    let mut entries = tokio::fs::read_dir(root).await?;
    while let Some(entry) = entries.next_entry().await? {
        let Ok(name) = entry.file_name().into_string() else { continue };
        if RESERVED_DATASETS.contains(&name.as_str()) || name.starts_with(['_', '.']) {
            continue;
        }
        let path = entry.path();
        if !tokio::fs::metadata(&path).await.is_ok_and(|meta| meta.is_dir()) {
            continue;
        }
        match holds_parquet(&path).await {
            Ok(true) => datasets.push(Dataset { name, source: Source::Folder(path) }),
            Ok(false) => tracing::debug!(dataset = %name, "no Parquet file yet; not a table"),
            Err(err) => tracing::warn!(dataset = %name, error = %err, "dataset folder unreadable; not a table"),
        }
    }
    datasets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(datasets)
}

/// Whether any file under `folder`, at any depth, ends in `.parquet`.
async fn holds_parquet(folder: &Path) -> std::io::Result<bool> {
    let mut pending = vec![folder.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let mut entries = tokio::fs::read_dir(&dir).await?;
        while let Some(entry) = entries.next_entry().await? {
            let kind = entry.file_type().await?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if entry.file_name().to_string_lossy().ends_with(".parquet") {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Plans and runs `query` over `datasets`: the result's column names and
/// rows, or the reason it failed (DataFusion's message).
async fn run(
    datasets: &[Dataset],
    query: &Query,
    nested_values: bool,
) -> Result<(Vec<String>, Vec<Map<String, Value>>), String> {
    let config = SessionConfig::new().with_information_schema(true);
    let ctx = SessionContext::new_with_config(config);
    let mut left_out = Vec::new();
    for dataset in datasets {
        let registered = match &dataset.source {
            Source::Folder(path) => register(&ctx, &dataset.name, path).await.map_err(|err| err.strip_backtrace()),
            Source::Iceberg(Ok(snapshot)) => {
                register_iceberg(&ctx, &dataset.name, snapshot).await.map_err(|err| err.strip_backtrace())
            }
            Source::Iceberg(Err(reason)) => Err(reason.clone()),
        };
        if let Err(err) = registered {
            tracing::warn!(dataset = %dataset.name, error = %err, "dataset cannot be read as one table; left out");
            left_out.push(format!("{}: {err}", dataset.name));
        }
    }
    let explain = |reason: String| {
        if left_out.is_empty() {
            reason
        } else {
            format!(
                "{reason} (datasets left out because their files cannot be read as one table: {})",
                left_out.join("; ")
            )
        }
    };

    let (sql, placeholders) = numbered_placeholders(&query.sql);
    if placeholders != query.parameters.len() {
        return Err(format!(
            "the query has {placeholders} `?` placeholder(s) but {} parameter(s) were given",
            query.parameters.len()
        ));
    }
    let read_only = SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false);
    let outcome: Result<(Vec<String>, Vec<RecordBatch>), DataFusionError> = async {
        let mut frame = ctx.sql_with_options(&sql, read_only).await?;
        if placeholders > 0 {
            let values = parameter_values(frame.logical_plan(), &query.parameters)?;
            frame = frame.with_param_values(ParamValues::from(values))?;
        }
        let columns = frame.schema().fields().iter().map(|field| field.name().clone()).collect();
        Ok((columns, frame.collect().await?))
    }
    .await;
    let (columns, batches) = outcome.map_err(|err| explain(err.strip_backtrace()))?;
    let rows = rows::to_rows(&batches, nested_values).map_err(|err| format!("encoding the results as JSON: {err}"))?;
    Ok((columns, rows))
}

/// `parameters` (`$1..$n`, given as text) as values of the types DataFusion
/// infers for their placeholders in `plan`: `id = ?` with `"2"` binds
/// `Int64(2)`, and `"two"` fails naming the value. A placeholder whose type
/// is not inferred (`SELECT ?`) stays `Utf8`.
///
/// DataFusion 55 did this itself by comparing a number with a string as
/// numbers; DataFusion 53 (the version iceberg-datafusion 0.10 uses) compares
/// them as strings, so `id > '10'` would be true for 9 and `id = 'two'`
/// would match nothing instead of failing.
///
/// # Errors
/// A parameter that does not convert to its placeholder's type.
fn parameter_values(plan: &LogicalPlan, parameters: &[String]) -> Result<Vec<ScalarValue>, DataFusionError> {
    let types = plan.get_parameter_types()?;
    parameters
        .iter()
        .enumerate()
        .map(|(index, value)| {
            let text = ScalarValue::Utf8(Some(value.clone()));
            match types.get(&format!("${}", index + 1)) {
                Some(Some(data_type)) if data_type != &DataType::Utf8 => text.cast_to(data_type).map_err(|err| {
                    DataFusionError::Plan(format!(
                        "parameter {} ({value:?}) is not a {data_type}: {}",
                        index + 1,
                        err.strip_backtrace()
                    ))
                }),
                _ => Ok(text),
            }
        })
        .collect()
}

/// Registers the dataset folder `path` in `ctx` as the Parquet listing
/// table `name`.
///
/// With the dataset's published schema (`_schema/<dataset>.arrow`, written
/// by Persist), the table has exactly that schema: its data and lineage
/// columns, and its Hive partition columns (`dt`, `hour`, a value column)
/// as `Utf8`; a file written before a column existed reads it as null.
/// Without one (a lake written before schemas were published), the schema
/// is merged over the files and [`PARTITION_COLUMN`] is the partition.
async fn register(ctx: &SessionContext, name: &str, path: &Path) -> Result<(), DataFusionError> {
    // A `file://` URL, not a path: DataFusion reads glob characters in a
    // path (`*`, `?`, `[`) as a pattern.
    let url = url::Url::from_directory_path(path)
        .map_err(|()| DataFusionError::Plan(format!("{} is not an absolute folder path", path.display())))?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let published = path.parent().map(|root| root.join(tributary_core::keys::arrow_schema_key(name)));
    let published = match published {
        Some(path) => match tokio::fs::read(&path).await {
            Ok(bytes) => Some(
                lake_format::codec::decode_arrow_schema(&bytes)
                    .map_err(|err| DataFusionError::Plan(format!("{}: {err}", path.display())))?,
            ),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(DataFusionError::IoError(err)),
        },
        None => None,
    };
    let Some(published) = published else {
        let options = options.with_table_partition_cols(vec![(PARTITION_COLUMN.to_string(), DataType::Utf8)]);
        return ctx.register_listing_table(TableReference::bare(name), url.as_str(), options, None, None).await;
    };
    let (partitions, data): (Vec<_>, Vec<_>) =
        published.fields().iter().cloned().partition(|f| f.metadata().contains_key(lake_format::meta::META_PARTITION));
    let options = options
        .with_table_partition_cols(partitions.iter().map(|f| (f.name().clone(), f.data_type().clone())).collect());
    let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(data));
    let values: Vec<&String> = partitions
        .iter()
        .filter(|f| {
            f.metadata().get(lake_format::meta::META_PARTITION_KIND).and_then(|kind| PartitionKind::parse(kind))
                == Some(PartitionKind::Value)
        })
        .map(|f| f.name())
        .collect();
    if values.is_empty() {
        return ctx.register_listing_table(TableReference::bare(name), url.as_str(), options, Some(schema), None).await;
    }
    // Value partitions read as the other readers show them: Hive's escapes
    // undone, the default partition null. The files are a hidden table and
    // the dataset a view over it (date partitions stay plain columns, so a
    // filter on them still prunes folders).
    let files = format!("{HIDDEN_PREFIX}{name}");
    ctx.register_listing_table(TableReference::bare(files.as_str()), url.as_str(), options, Some(schema), None).await?;
    let frame = ctx.table(TableReference::bare(files.as_str())).await?;
    let udf = Arc::new(partition_value_udf());
    let columns: Vec<datafusion::prelude::Expr> = frame
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let column = datafusion::prelude::ident(f.name());
            if values.contains(&f.name()) { udf.call(vec![column]).alias(f.name()) } else { column }
        })
        .collect();
    let view = frame.select(columns)?.into_view();
    ctx.register_table(TableReference::bare(name), view)?;
    Ok(())
}

/// Whether the dataset's table schema (`_schema/<dataset>.json`, Persist's)
/// says it is kept as an Iceberg table (`"table_format": "iceberg"`, set
/// from its first page on): its folder then holds staged pages only.
fn kept_as_iceberg(root: &std::path::Path, dataset: &str) -> bool {
    let path = root.join(tributary_core::keys::schema_key(dataset));
    let Ok(bytes) = std::fs::read(&path) else { return false };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .is_ok_and(|schema| schema.get("table_format").and_then(|f| f.as_str()) == Some("iceberg"))
}

/// A failed query's `reason`, with why the tables it does not find among
/// `uncommitted` are missing: Iceberg datasets whose first run has not
/// committed (their folders hold staged pages only, which no reader
/// sees until the run completes). DataFusion names a missing table
/// `'<catalog>.<schema>.<name>'`.
fn not_committed(reason: String, uncommitted: &[String]) -> String {
    let lower = reason.to_ascii_lowercase();
    if !lower.contains("not found") {
        return reason;
    }
    let named: Vec<&str> = uncommitted
        .iter()
        .map(String::as_str)
        .filter(|name| {
            let name = name.to_ascii_lowercase();
            lower.contains(&format!("'{name}'")) || lower.contains(&format!(".{name}'"))
        })
        .collect();
    if named.is_empty() {
        return reason;
    }
    format!(
        "{reason} ({} kept as an Iceberg table with no commit yet: records staged by a run are read once that run \
         completes; tributary status lists the run and what finishes it)",
        named.join(", ")
    )
}

/// Registers an Iceberg table's current snapshot in `ctx` as the table
/// `name`: exactly its data files, read with the table's current schema
/// (a column or struct field a file predates reads as null), through a
/// view that shows the partition columns as the Parquet form of the same
/// dataset shows them: text, `dt` as `YYYY-MM-DD`, `hour` as `07`, after
/// the data and lineage columns (the Parquet form's order). A table
/// without a snapshot is an empty table.
async fn register_iceberg(
    ctx: &SessionContext,
    name: &str,
    snapshot: &iceberg::Snapshot,
) -> Result<(), DataFusionError> {
    use datafusion::catalog::TableProvider;
    use datafusion::datasource::listing::{ListingTable, ListingTableConfig, ListingTableUrl};
    use datafusion::prelude::{Expr, cast, ident, lit};

    // The `iceberg` crate only listed the snapshot's data files and gave the
    // table's schema in Arrow; DataFusion's own Parquet reader reads them.
    // Not iceberg-datafusion: it needs DataFusion's default features (a
    // large build on top of ours), and it reads through iceberg-rust
    // 0.10.1's Arrow reader, which cannot read a data file written before a
    // struct column gained a field (a vendor adding a nested field does
    // that). DataFusion matches a file's columns and struct fields to the
    // table schema by name and reads what a file lacks as null; by name
    // rather than by Iceberg field id is exact here, as the committer never
    // renames or drops a column.
    let schema = snapshot.schema.clone();
    let provider: Arc<dyn TableProvider> = if snapshot.files.is_empty() {
        Arc::new(datafusion::datasource::MemTable::try_new(schema, vec![Vec::new()])?)
    } else {
        let urls = snapshot
            .files
            .iter()
            .map(|path| {
                // A URL, not a path: a path's glob characters would be a pattern.
                let url = url::Url::from_file_path(path)
                    .map_err(|()| DataFusionError::Plan(format!("{} is not an absolute path", path.display())))?;
                ListingTableUrl::try_new(url, None)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let config = ListingTableConfig::new_with_multi_paths(urls).with_listing_options(options).with_schema(schema);
        Arc::new(ListingTable::try_new(config)?)
    };
    let frame = ctx.read_table(provider)?;
    // The Parquet form's order: data columns, lineage columns, partition
    // columns (the table appends a column added later after them all).
    let lineage = lake_format::lineage::LINEAGE_COLUMNS;
    let is_partition = |field: &str| snapshot.partitions.iter().any(|(name, _)| name == field);
    let names: Vec<&str> = frame.schema().fields().iter().map(|f| f.name().as_str()).collect();
    let data = names.iter().copied().filter(|name| !is_partition(name) && !lineage.iter().any(|l| l == name));
    let lineage = lineage.iter().copied().filter(|name| names.contains(name));
    let mut columns: Vec<Expr> = data.chain(lineage).map(ident).collect();
    // Shown as the folder text of the same dataset kept as Parquet: a day
    // as `YYYY-MM-DD`, an hour as two digits (`07`), a value as it is.
    columns.extend(snapshot.partitions.iter().map(|(column, kind)| {
        let text = cast(ident(column), DataType::Utf8);
        let shown = match kind {
            PartitionKind::Hour => datafusion::functions::unicode::expr_fn::lpad(vec![text, lit(2i64), lit("0")]),
            PartitionKind::Day | PartitionKind::Value => text,
        };
        shown.alias(column)
    }));
    let view = frame.select(columns)?.into_view();
    ctx.register_table(TableReference::bare(name), view)?;
    Ok(())
}

/// Tables of the files of datasets shown through a view start with this.
const HIDDEN_PREFIX: &str = "__tributary_files_";

/// `tributary_partition_value(folder value)`: the value a value partition's
/// folder stands for, as Spark, DuckDB and pyarrow read it: Hive's `%XX`
/// escapes undone, `__HIVE_DEFAULT_PARTITION__` null.
fn partition_value_udf() -> datafusion::logical_expr::ScalarUDF {
    use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
    let fun = Arc::new(|args: &[ColumnarValue]| -> Result<ColumnarValue, DataFusionError> {
        let arrays = ColumnarValue::values_to_arrays(args)?;
        let input = arrays
            .first()
            .and_then(|a| a.as_any().downcast_ref::<arrow_array::StringArray>())
            .ok_or_else(|| DataFusionError::Internal("partition values are not Utf8".into()))?;
        let out: arrow_array::StringArray =
            input.iter().map(|v| v.and_then(lake_format::partition::value_of)).collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    });
    create_udf("tributary_partition_value", vec![DataType::Utf8], DataType::Utf8, Volatility::Immutable, fun)
}
