//! `tributary replay`: re-drive a dataset's raw archived pages through
//! Persist (Kappa-style reprocessing).
//!
//! Persist archives every page it receives as the `PersistMessage` itself at
//! `raw/<dataset>/dt=<run date>/<pipeline>-<run_id>-<page>.json` before
//! converting it. Replay lists those envelopes (optionally only the `dt=`
//! folders from `--from` to `--to`, inclusive), and hands each one, as it
//! is, to [`persist::persist_page`] — the same code, so the same keys: data,
//! quarantine, raw page and receipt are overwritten with what the current
//! Persist makes of them, and a second replay changes nothing. Replay
//! announces no run events and writes no metrics (both would differ per
//! replay); runs already complete stay complete.
//!
//! A page that fails is reported with its key and reason; the others go on.
//!
//! A page of a stream window that a Kappa replay (`tributary run
//! --from-trim-horizon`) superseded, and did not write again, is left as
//! history and counted: its records are in the dataset as the replay read
//! them (the topic may even have been recreated since).

use std::fmt;

use chrono::NaiveDate;
use contracts::spec::{SpecError, check_dataset};
use contracts::{PersistMessage, RunId};
use tributary_core::keys;
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::tables::{RunFiles, RunWrite, TableCommitter};

/// The `dt=` dates to replay, both ends inclusive; `None` is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DateRange {
    /// First date replayed.
    pub from: Option<NaiveDate>,
    /// Last date replayed.
    pub to: Option<NaiveDate>,
}

impl DateRange {
    /// Whether `date` is in the range.
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.from.is_none_or(|from| date >= from) && self.to.is_none_or(|to| date <= to)
    }
}

impl fmt::Display for DateRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.from, self.to) {
            (None, None) => f.write_str("all dates"),
            (Some(from), None) => write!(f, "from {from}"),
            (None, Some(to)) => write!(f, "up to {to}"),
            (Some(from), Some(to)) => write!(f, "{from} to {to}"),
        }
    }
}

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The dataset name is not one Persist writes: the value and why
    /// (the option's, not a spec's: a trial read "invalid pipeline spec"
    /// about a command-line flag).
    #[error("--dataset {value}: {reason}")]
    Dataset {
        /// The value given, as JSON text.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// `--from` is after `--to`.
    #[error("--from {from} is after --to {to}")]
    Range {
        /// First date.
        from: NaiveDate,
        /// Last date.
        to: NaiveDate,
    },
    /// The lake directory does not exist, or is a file.
    #[error(transparent)]
    NoLake(#[from] crate::location::LocationError),
    /// The raw archive could not be listed.
    #[error("listing the raw pages: {0}")]
    List(#[source] PortError),
    /// A completed run could not be reopened for the replay.
    #[error("reopening a completed run: {0}")]
    Store(#[source] PortError),
    /// The dataset is kept as an Iceberg table.
    #[error(
        "--dataset {0} is kept as an Iceberg table (target.table_format: iceberg): replaying it needs its \
         table's committer (a replayed run is committed as one overwrite snapshot: `tributary replay --lake DIR` \
         with the lake's local catalog, or `--stack`); nothing was replayed (docs/persist.md, \"Replay\")"
    )]
    Iceberg(String),
}

/// A raw page that could not be replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayFailure {
    /// Key of the raw page.
    pub key: String,
    /// Why.
    pub reason: String,
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Dataset replayed.
    pub dataset: String,
    /// Dates replayed.
    pub range: DateRange,
    /// Raw pages found in the range.
    pub pages: u64,
    /// Pages persisted again.
    pub pages_persisted: u64,
    /// Records persisted, over all pages.
    pub records_persisted: u64,
    /// Records quarantined, over all pages.
    pub records_quarantined: u64,
    /// Pages that failed, with the reason.
    pub failures: Vec<ReplayFailure>,
    /// Pages left as history: of stream windows a Kappa replay superseded
    /// and did not write again
    /// ([`persist::stream_replay::superseded_runs`]).
    pub superseded: u64,
    /// An Iceberg dataset's runs committed again: the run and its new
    /// snapshot's id.
    pub snapshots: Vec<(String, i64)>,
    /// The table notes of those commits, per run (a `replace` run the
    /// table no longer holds gained nothing, and says so).
    pub table_notes: Vec<(String, String)>,
}

impl ReplaySummary {
    /// Whether every raw page was persisted again, and there was at least
    /// one (a misspelt dataset or an empty date range is not a success).
    pub fn succeeded(&self) -> bool {
        self.failures.is_empty() && self.pages > 0
    }
}

impl fmt::Display for ReplaySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replay of dataset {} ({}): {} raw pages, {} persisted, {} failed; records persisted {}, quarantined {}",
            self.dataset,
            self.range,
            self.pages,
            self.pages_persisted,
            self.failures.len(),
            self.records_persisted,
            self.records_quarantined
        )?;
        for failure in &self.failures {
            writeln!(f, "  FAILED {}: {}", failure.key, failure.reason)?;
        }
        if self.superseded > 0 {
            writeln!(f, "  {}", superseded_line(self.superseded))?;
        }
        for (run, snapshot) in &self.snapshots {
            let notes: Vec<&str> =
                self.table_notes.iter().filter(|(of, _)| of == run).map(|(_, note)| note.as_str()).collect();
            writeln!(f, "  run {run}: committed again in snapshot {snapshot}")?;
            for note in notes {
                writeln!(f, "    note: {note}")?;
            }
        }
        if self.pages == 0 {
            writeln!(
                f,
                "  no raw pages under raw/{}/ for these dates: check the dataset name and --from/--to",
                self.dataset
            )?;
        }
        Ok(())
    }
}

/// The summary line of `pages` raw pages left as history.
fn superseded_line(pages: u64) -> String {
    format!(
        "{pages} raw page(s) left as they are: their stream windows were superseded by a Kappa replay \
         (--from-trim-horizon), which holds their records as it read them; the pages stay in raw/ as history"
    )
}

/// Which raw pages are of stream windows a Kappa replay superseded
/// ([`persist::stream_replay::superseded_runs`]) and not written again by
/// it: persisting one again would add its records beside the replay's, or,
/// for an Iceberg dataset, leave a run the ledger never completes (a trial
/// found a recreated topic's old windows as an interrupted run, with 8 rows
/// that finishing it would have added twice). Read once per pipeline and
/// run.
#[derive(Default)]
struct Superseded {
    /// Per pipeline, its superseded runs.
    runs: std::collections::HashMap<String, std::collections::BTreeSet<RunId>>,
    /// Per superseded run, the pages its ledger holds now.
    pages: std::collections::HashMap<(String, RunId), std::collections::BTreeSet<u32>>,
}

impl Superseded {
    /// Whether `message`'s page is history only: its run was superseded and
    /// the ledger holds no page of that run and number.
    ///
    /// # Errors
    /// [`PortError`] when the record or the run's receipts cannot be read.
    async fn holds(&mut self, store: &dyn ObjectStore, message: &PersistMessage) -> Result<bool, PortError> {
        if !self.runs.contains_key(&message.pipeline) {
            let runs = persist::stream_replay::superseded_runs(&message.pipeline, store).await?;
            self.runs.insert(message.pipeline.clone(), runs.into_iter().collect());
        }
        if !self.runs.get(&message.pipeline).is_some_and(|runs| runs.contains(&message.run_id)) {
            return Ok(false);
        }
        let run = (message.pipeline.clone(), message.run_id.clone());
        if !self.pages.contains_key(&run) {
            let receipts = tributary_core::ledger::run_receipts(store, &message.pipeline, &message.run_id).await?;
            self.pages.insert(run.clone(), receipts.into_iter().map(|receipt| receipt.page).collect());
        }
        Ok(!self.pages.get(&run).is_some_and(|pages| pages.contains(&message.page.index)))
    }
}

/// The raw pages of `dataset` in `range`, sorted, with the keys that are
/// not under a `dt=YYYY-MM-DD` folder as failures. Only `*.json` objects
/// directly in a `dt=` folder are pages (anything else there, such as a
/// payload copy, is not an envelope).
async fn raw_pages(
    store: &dyn ObjectStore,
    dataset: &str,
    range: DateRange,
) -> Result<(Vec<String>, Vec<ReplayFailure>), ReplayError> {
    let prefix = keys::raw_prefix(dataset);
    let mut pages = Vec::new();
    let mut misplaced = Vec::new();
    for key in store.list(&prefix).await.map_err(ReplayError::List)? {
        let Some(rest) = key.strip_prefix(&prefix) else { continue };
        let (folder, file) = rest.split_once('/').unwrap_or(("", rest));
        if !file.ends_with(".json") || file.contains('/') {
            continue;
        }
        match folder.strip_prefix("dt=").and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok()) {
            Some(date) if range.contains(date) => pages.push(key),
            Some(_) => {}
            None => misplaced.push(ReplayFailure { key, reason: "not under a dt=YYYY-MM-DD folder".into() }),
        }
    }
    Ok((pages, misplaced))
}

/// Re-drives every raw page of `dataset` in `range` through
/// [`persist::persist_page`] with `store` as the lake; a schema change is
/// registered in `catalog` (the lake's Glue database; `None`: none). An
/// Iceberg dataset needs `tables`: each completed run whose pages were all
/// replayed is committed again in one snapshot that replaces its rows
/// ([`TableCommitter::replay_run`]).
///
/// # Errors
/// [`ReplayError`] when the dataset name or range is invalid or the raw
/// archive cannot be listed. Pages that fail are in
/// [`ReplaySummary::failures`], not errors.
pub async fn replay(
    store: &dyn ObjectStore,
    catalog: Option<&dyn tributary_core::catalog::Catalog>,
    tables: Option<&dyn TableCommitter>,
    dataset: &str,
    range: DateRange,
    config: &persist::PersistConfig,
) -> Result<ReplaySummary, ReplayError> {
    check_arguments(dataset, range)?;
    if tables.is_none() {
        refuse_iceberg(store, dataset).await?;
    }
    let (keys, failures) = raw_pages(store, dataset, range).await?;
    let mut summary = ReplaySummary { dataset: dataset.to_string(), range, failures, ..ReplaySummary::default() };
    summary.pages = keys.len() as u64 + summary.failures.len() as u64;
    // Nothing is sent: Persist only queues dead letters, and replay sets no DLQ.
    let queue = adapters::local::Broker::new();
    // A completed run's pages are written again, then the run's files are
    // coalesced again (see persist::coalesce).
    let config = persist::PersistConfig { rewrite_completed_runs: true, ..config.clone() };
    // Without a table committer an Iceberg dataset was refused above (and a
    // page of one, in a lake whose schema predates `table_format`, fails
    // naming target.table_format). A completed Iceberg run's pages stay
    // staged until `replay_run` below.
    let deps = persist::Deps { store, queue: &queue, run_events: None, catalog, tables, config: &config };
    let mut runs: std::collections::BTreeMap<(String, RunId), ReplayedRun> = Default::default();
    let mut superseded = Superseded::default();
    // Per run: `Some(reason)` when it held every page but had not
    // completed, and finishing it failed (its pages are not replayed).
    let mut unfinished: std::collections::HashMap<(String, RunId), Option<String>> = Default::default();
    for key in keys {
        let message = match read_envelope(store, &key, dataset).await {
            Ok(message) => message,
            Err(reason) => {
                tracing::info!(key, reason, "raw page not replayed");
                summary.failures.push(ReplayFailure { key, reason });
                continue;
            }
        };
        if superseded.holds(store, &message).await.map_err(ReplayError::Store)? {
            summary.superseded += 1;
            continue;
        }
        let run = (message.pipeline.clone(), message.run_id.clone());
        if !unfinished.contains_key(&run) {
            let finished = finish_first(&message, deps).await.map_err(ReplayError::Store)?;
            unfinished.insert(run.clone(), finished);
        }
        if let Some(Some(reason)) = unfinished.get(&run) {
            summary.failures.push(ReplayFailure { key, reason: reason.clone() });
            continue;
        }
        match replay_page(message, deps).await {
            Ok((receipt, write)) => {
                summary.pages_persisted += 1;
                summary.records_persisted += receipt.records_persisted;
                summary.records_quarantined += receipt.records_quarantined;
                let run = runs.entry((receipt.pipeline.clone(), receipt.run_id.clone())).or_default();
                run.pages += 1;
                run.table_commit |= receipt.table_commit;
                run.write = write;
                run.written.extend(receipt.data_keys);
            }
            Err(reason) => {
                tracing::info!(key, reason, "raw page not replayed");
                summary.failures.push(ReplayFailure { key, reason });
            }
        }
    }
    for ((pipeline, run_id), run) in runs {
        if store.get(&tributary_core::keys::success_key(&pipeline, &run_id)).await.is_err() {
            continue;
        }
        let pages =
            tributary_core::ledger::run_receipts(store, &pipeline, &run_id).await.map_err(ReplayError::Store)?;
        let (replayed, written) = (run.pages, run.written);
        if run.table_commit {
            if let (Some(tables), true) = (tables, replayed == pages.len()) {
                let files = RunFiles::new(dataset, &pipeline, &run_id, &written).with_write(run.write);
                let committed = tables.replay_run(&files).await.map_err(ReplayError::Store)?;
                summary.snapshots.push((run_id.to_string(), committed.snapshot_id));
                summary.table_notes.extend(committed.notes.into_iter().map(|note| (run_id.to_string(), note)));
            } else {
                // Some pages failed: the table keeps the run as it was;
                // the pages staged now would never be committed.
                for key in &written {
                    store.delete(key).await.map_err(ReplayError::Store)?;
                }
            }
            continue;
        }
        if replayed == pages.len() {
            persist::coalesce::recoalesce_run(store, &pipeline, &run_id).await.map_err(ReplayError::Store)?;
        } else {
            // The run's coalesced files still hold every row; the pages
            // written now that the manifest does not list (their rows are
            // in a coalesced file) would duplicate them. A page file the
            // manifest lists (kept, alone in its bin) was rewritten in place.
            let listed: std::collections::BTreeSet<String> =
                tributary_core::ledger::run_totals(store, &pipeline, &run_id)
                    .await
                    .map_err(ReplayError::Store)?
                    .data_keys
                    .into_iter()
                    .collect();
            for key in written.iter().filter(|k| !listed.contains(*k)) {
                store.delete(key).await.map_err(ReplayError::Store)?;
            }
        }
    }
    Ok(summary)
}

/// Refuses a dataset name Persist does not write and a range that ends
/// before it starts.
fn check_arguments(dataset: &str, range: DateRange) -> Result<(), ReplayError> {
    check_dataset("dataset", dataset).map_err(|err| match err {
        SpecError::Invalid { value, reason, .. } => ReplayError::Dataset { value, reason },
        other => ReplayError::Dataset { value: format!("{dataset:?}"), reason: other.to_string() },
    })?;
    match (range.from, range.to) {
        (Some(from), Some(to)) if from > to => Err(ReplayError::Range { from, to }),
        _ => Ok(()),
    }
}

/// Refuses a dataset its table schema says is kept as an Iceberg table
/// (replaying it would need an overwrite snapshot).
///
/// # Errors
/// [`ReplayError::Iceberg`]; [`ReplayError::Store`] when the schema
/// cannot be read.
async fn refuse_iceberg(store: &dyn ObjectStore, dataset: &str) -> Result<(), ReplayError> {
    if is_iceberg(store, dataset).await? {
        return Err(ReplayError::Iceberg(dataset.to_string()));
    }
    Ok(())
}

/// Whether the dataset's table schema says it is kept as an Iceberg table.
async fn is_iceberg(store: &dyn ObjectStore, dataset: &str) -> Result<bool, ReplayError> {
    let key = tributary_core::keys::schema_key(dataset);
    let schema = persist::read_schema(store, &key)
        .await
        .map_err(|err| ReplayError::Store(PortError::permanent("read the dataset's schema", key.clone(), err)))?;
    Ok(schema.is_some_and(|(schema, _)| schema.table_format == Some(contracts::TableFormat::Iceberg)))
}

/// What a replay did to one run.
#[derive(Default)]
struct ReplayedRun {
    /// Pages persisted again.
    pages: usize,
    /// The data keys they wrote (staged, for an Iceberg dataset).
    written: Vec<String>,
    /// Whether the run's dataset is an Iceberg table.
    table_commit: bool,
    /// How the run changes its table (its pages' `target.write`).
    write: RunWrite,
}

/// Completes `message`'s run first when it holds every page but did not
/// complete ([`tributary_core::ledger::is_stuck`]: a `tributary run`
/// killed after its last page, or in the middle of its completion), so
/// the replay sees it as a completed run: replaying the pages of a run
/// caught half-way through replacing its page files by a coalesced one
/// failed on a page file that replacement had deleted, and left the
/// coalesced file beside the pages written again (a trial: 399,500 rows
/// for 200,000, until a second replay). `Some(reason)` when completing it
/// fails.
///
/// # Errors
/// [`PortError`] when the ledger cannot be read.
async fn finish_first(message: &PersistMessage, deps: persist::Deps<'_>) -> Result<Option<String>, PortError> {
    if !tributary_core::ledger::is_stuck(deps.store, &message.pipeline, &message.run_id).await? {
        return Ok(None);
    }
    Ok(persist::finish_run(&message.target, &message.pipeline, &message.run_id, deps).await.err().map(|err| {
        format!(
            "run {} holds every page but had not completed, and completing it before the replay failed: {err}",
            message.run_id
        )
    }))
}

/// The envelope at `key`, a page of `dataset`; the reason it is not.
async fn read_envelope(store: &dyn ObjectStore, key: &str, dataset: &str) -> Result<PersistMessage, String> {
    let bytes = store.get(key).await.map_err(|err| err.to_string())?;
    let message: PersistMessage =
        serde_json::from_slice(&bytes).map_err(|err| format!("not a persist message: {err}"))?;
    if message.target.dataset != dataset {
        return Err(format!("the envelope's target.dataset is {:?}, not {dataset:?}", message.target.dataset));
    }
    Ok(message)
}

/// Persists `message` again; with the page's write disposition.
async fn replay_page(
    message: PersistMessage,
    deps: persist::Deps<'_>,
) -> Result<(tributary_core::ledger::PageReceipt, RunWrite), String> {
    let write = RunWrite::of(&message.target);
    persist::persist_page(message, deps).await.map(|receipt| (receipt, write)).map_err(|err| err.to_string())
}

/// Replays `dataset` in the lake directory `lake` with Persist's default
/// settings (metrics off, no dead-letter queue).
///
/// # Errors
/// [`ReplayError`], [`ReplayError::NoLake`] when `lake` is not a directory.
pub async fn replay_lake(
    lake: &std::path::Path,
    dataset: &str,
    range: DateRange,
) -> Result<ReplaySummary, ReplayError> {
    crate::location::require_dir(lake)?;
    let store = adapters::local::DirStore::new(lake);
    let catalog = adapters::local::DirCatalog::new(lake);
    let root = lake.canonicalize().map_err(|_| crate::location::LocationError::NoDir(lake.to_path_buf()))?;
    let tables = tributary_iceberg::LocalCommitter::new(
        root.clone(),
        std::sync::Arc::new(adapters::local::DirStore::new(&root)),
    );
    replay(&store, Some(&catalog), Some(&tables), dataset, range, &persist::PersistConfig::default()).await
}

/// What a replay through a stack's persist queue did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResendSummary {
    /// Dataset replayed.
    pub dataset: String,
    /// Dates replayed.
    pub range: DateRange,
    /// Raw pages sent to the persist queue.
    pub pages_sent: u64,
    /// Completed runs reopened (marker, manifest and page receipts removed) so their
    /// pages complete them again.
    pub runs_reopened: Vec<String>,
    /// Pages that could not be sent, with the reason.
    pub failures: Vec<ReplayFailure>,
    /// Pages left as history: of stream windows a Kappa replay superseded.
    pub superseded: u64,
}

impl fmt::Display for ResendSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replay of dataset {} ({}) through the persist queue: {} raw pages sent, {} failed, {} completed runs reopened",
            self.dataset,
            self.range,
            self.pages_sent,
            self.failures.len(),
            self.runs_reopened.len()
        )?;
        for run in &self.runs_reopened {
            writeln!(f, "  reopened {run}")?;
        }
        for failure in &self.failures {
            writeln!(f, "  FAILED {}: {}", failure.key, failure.reason)?;
        }
        if self.superseded > 0 {
            writeln!(f, "  {}", superseded_line(self.superseded))?;
        }
        if self.pages_sent == 0 && self.failures.is_empty() && self.superseded == 0 {
            writeln!(f, "  no raw pages under raw/{}/ for these dates", self.dataset)?;
        }
        writeln!(f, "  Persist converts them as they arrive: `tributary status` shows each run complete again")
    }
}

/// Replays `dataset` on a deployed stack: every raw page in `range` is sent,
/// as the `PersistMessage` it was archived as, to `persist_queue` through
/// `queue`, so Persist's Lambda converts it again with its current code.
/// Each completed run among them is reopened first (its `_SUCCESS` marker,
/// manifest and page receipts deleted, see
/// [`tributary_core::ledger::reopen_run`]): its pages are then processed as
/// in the first run,
/// and the last one completes the run again (coalescing, manifest,
/// run-completed event). Until then a reader of a Parquet dataset may see a
/// replayed run's rows twice (the old coalesced file beside the new page
/// files). An Iceberg dataset's runs are reopened as re-runs
/// ([`tributary_core::rerun::reopen_for_replay`]): their pages are staged,
/// and the last one's completion swaps the run's rows in one `overwrite`
/// snapshot; readers see the old rows until then.
///
/// # Errors
/// [`ReplayError`] for a bad dataset or range, a raw archive that cannot be
/// listed, or a run that cannot be reopened. Pages that cannot be read or
/// sent (a raw envelope over the queue's size limit) are failures in the
/// summary.
pub async fn resend(
    store: &dyn ObjectStore,
    queue: &dyn tributary_core::ports::QueueSender,
    persist_queue: &str,
    dataset: &str,
    range: DateRange,
) -> Result<ResendSummary, ReplayError> {
    check_arguments(dataset, range)?;
    let iceberg = is_iceberg(store, dataset).await?;
    let (keys, failures) = raw_pages(store, dataset, range).await?;
    let mut summary = ResendSummary { dataset: dataset.to_string(), range, failures, ..ResendSummary::default() };
    let mut pages: Vec<(String, String)> = Vec::new();
    let mut runs = std::collections::BTreeSet::new();
    let mut superseded = Superseded::default();
    for key in keys {
        let text = match store.get(&key).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(err) => {
                summary.failures.push(ReplayFailure { key, reason: err.to_string() });
                continue;
            }
        };
        match serde_json::from_str::<PersistMessage>(&text) {
            Ok(message) if message.target.dataset == dataset => {
                // Before any run is reopened (its receipts deleted).
                if superseded.holds(store, &message).await.map_err(ReplayError::Store)? {
                    summary.superseded += 1;
                    continue;
                }
                runs.insert((message.pipeline.clone(), message.run_id.clone()));
                pages.push((key, text));
            }
            Ok(message) => summary.failures.push(ReplayFailure {
                key,
                reason: format!("the envelope's target.dataset is {:?}, not {dataset:?}", message.target.dataset),
            }),
            Err(err) => summary.failures.push(ReplayFailure { key, reason: format!("not a persist message: {err}") }),
        }
    }
    // An Iceberg run's replayed pages must replace its rows in one
    // snapshot: it is reopened as a re-run (tributary_core::rerun), which
    // Persist's completion commits as an overwrite of the run's rows.
    let token = format!("replay-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"));
    for (pipeline, run_id) in runs {
        let reopened = if iceberg {
            tributary_core::rerun::reopen_for_replay(store, &pipeline, &run_id, &token, chrono::Utc::now()).await
        } else {
            tributary_core::ledger::reopen_run(store, &pipeline, &run_id).await
        };
        if reopened.map_err(ReplayError::Store)? {
            summary.runs_reopened.push(format!("run {run_id} of pipeline {pipeline}"));
        }
    }
    for (key, body) in pages {
        match queue.send(persist_queue, vec![body]).await {
            Ok(()) => summary.pages_sent += 1,
            Err(err) => summary.failures.push(ReplayFailure { key, reason: err.to_string() }),
        }
    }
    Ok(summary)
}
