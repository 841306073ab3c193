//! Run bookkeeping kept in the lake (S3 objects on AWS, files locally — no
//! database to run): what a run expects, what it did, and when it is done.
//!
//! | object | written by | key |
//! |---|---|---|
//! | page receipt ([`PageReceipt`]) | Persist, after the page's objects ([`record_page`]) | `_runs/<pipeline>/<run_id>/receipts-<s:05>/page-<page:05>.json` (`s`: the page's shard, page ÷ 1,000) |
//! | expected pages ([`Expected`]) | whoever learns the count: Orchestrator (simple: 1; paged: at the probe reply), Request (cursor: at the last page), Athena (at the end of the query) | `_runs/<pipeline>/<run_id>/expected.json` |
//! | shard summary: the receipts of pages `1000·s .. 1000·s+999` | the first to see the shard whole | `_runs/<pipeline>/<run_id>/shard-<s:05>.json` |
//! | manifest ([`Manifest`]) and `_SUCCESS` marker | the first to see every shard summarised | `_manifests/<pipeline>/<run_id>.json`, `_runs/<pipeline>/<run_id>/_SUCCESS` |
//! | replacement record and staged coalesced files (Persist's [`Compactor`], before the manifest) | the completion that coalesces the run (`persist::coalesce`); every retry finishes the record | `_runs/<pipeline>/<run_id>/replacement.json`, `_runs/<pipeline>/<run_id>/coalesced/<n>.parquet` |
//!
//! Every key is deterministic, so redelivered messages rewrite instead of
//! counting twice. Completion is checked both after each receipt
//! ([`record_page`]) and after the expected count is written
//! ([`record_expected`]), so whichever comes last completes the run; two
//! writers finishing at once write the same manifest, and the completion
//! event may then be published twice (at-least-once, like everything else).
//! A completion killed at any step is resumed by the retry of its message:
//! the compactor finishes its own record, the manifest and cursor are
//! rewritten the same, the event is published before `_SUCCESS` (so a
//! retry announces again rather than never), and `_SUCCESS` comes last.
//!
//! # Cost: a constant number of store calls per page
//!
//! Counting receipts by listing the run and reading every receipt after
//! each page costs O(pages²) calls (a 10,000-page run: 50 million GETs).
//! Instead the receipts are grouped in shards of 1,000 pages by page index
//! ([`keys::RECEIPT_SHARD_PAGES`]), each shard in its own folder
//! ([`keys::receipt_shard_prefix`]), listed in one S3 LIST call (and, in a
//! local lake, by reading a folder of at most 1,000 names, whatever the
//! run's size). After writing its receipt, a page:
//!
//! 1. GETs `expected.json` and LISTs its own shard (at most 1,000 keys).
//!    The shard is whole when it holds all its pages: 1,000, or for the
//!    last shard the remainder once the count is known. Not whole: done
//!    (3 calls with the receipt's PUT).
//! 2. Whole: makes sure the shard's summary holds every receipt of the
//!    shard (one GET). The first to find none builds it from the shard's
//!    receipts (1,000 GETs, once per shard: one per page amortised) and
//!    PUTs it; a later page whose receipt differs from its entry (a
//!    redelivered page that wrote other files) replaces its entry. Every
//!    write is a compare-and-swap ([`ObjectStore::put_if`]: S3 `If-Match`
//!    / `If-None-Match`), so two writers never undo each other's entries
//!    and a page appears in its summary once, as last written.
//! 3. With the count known, LISTs the summaries (at most 100 for the
//!    100,000-page maximum); when every shard has one, completes the run
//!    from them: one GET per 1,000 pages, the [`Compactor`] given every
//!    receipt, the manifest, then `_SUCCESS`.
//!
//! Steps 2 and 3 run only for the pages that find their shard whole (about
//! one per shard, plus the pages finishing beside it), so a run of `n`
//! pages costs about `4n` calls in all (measured with the receipts' PUTs,
//! LISTs billed per 1,000 keys: 4,015 calls for 1,000 pages and 8,019 for
//! 2,000, 4.0 per page, against 503,509 and 2,008,010 before;
//! `core/tests/it/ledger.rs`).
//!
//! Why it is correct under at-least-once delivery and concurrency: each
//! writer reads after its own write, so of two writers the later sees the
//! other's object (S3 is strongly consistent for reads and lists after
//! writes). The page whose receipt lands last in a shard sees the shard
//! whole; the writer whose summary lands last sees every summary; between a
//! cursor run's last page and its count ([`record_expected`], which
//! summarises every whole shard without a summary, one LIST per shard, once
//! per run), whichever writes last sees the other. A run of 0 pages has no
//! shard and completes at [`record_expected`].
//!
//! # Lakes written by earlier versions
//!
//! Before 2026-12-06 every receipt was in the run's folder itself
//! ([`keys::legacy_receipt_key`]: `page-<page:05>.json`, a shard being the
//! keys that begin with its number). Those are still read:
//! - Readers of every receipt ([`run_receipts`], [`run_totals`],
//!   `tributary status`) list the run's folder, which holds both layouts;
//!   a page with a receipt in both (delivered before and after the
//!   upgrade) counts once, as its shard folder's receipt says
//!   ([`keys::receipts_by_page`]).
//! - A run in flight across the upgrade completes. [`record_expected`]
//!   notes in `expected.json` whether the run's folder held an
//!   earlier-layout receipt when the count was written (one LIST, once per
//!   run): when it did not, pages list only their shard's folder; when it
//!   did, or the count was written by an earlier version (no note), each
//!   page also lists its shard's earlier-layout receipts; and completing
//!   at the count ([`record_expected`], [`complete_if_done`]) always lists
//!   both.
//! - Persist finds a redelivered page's earlier receipt in either layout
//!   ([`read_receipt`]).
//!
//! The one case left: an earlier version's Persist still running (a
//! deployment's last invocations) after this version wrote the run's count
//! with no earlier-layout receipt in the folder. Its receipt is in the
//! earlier layout, which that run's pages no longer list, so the run waits
//! at that page; sending the page again (its raw envelope, `tributary
//! replay --stack`) completes it.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::ports::{ObjectStore, PortError};
use contracts::{RunCompleted, RunId};

/// What Persist did with one page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageReceipt {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Dataset written.
    pub dataset: String,
    /// Page index.
    pub page: u32,
    /// Pages planned for the run.
    pub page_count: u32,
    /// Records received.
    pub records_in: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records written to quarantine with a reason.
    pub records_quarantined: u64,
    /// Parquet object keys: one per partition and part (empty when the
    /// page has no rows).
    #[serde(default)]
    pub data_keys: Vec<String>,
    /// Bytes of the Parquet files at `data_keys`, summed (absent in
    /// receipts written before it was recorded: 0). A stream shard's
    /// window closes on it (`persist::stream`).
    #[serde(default)]
    pub data_bytes: u64,
    /// Quarantine object key (absent when nothing was quarantined).
    pub quarantine_key: Option<String>,
    /// Raw payload key.
    pub raw_key: String,
    /// The page's Arrow schema as text (absent for an empty page), for the
    /// manifest's schema hash.
    #[serde(default)]
    pub schema: Option<String>,
    /// The page's files are staged for its table's commit (a dataset with
    /// `target.table_format: iceberg`): only a completion with a
    /// [`Compactor`] (Persist's, which commits them) completes its run. A
    /// completion without one (the Orchestrator, Request or Athena
    /// learning the count last) leaves the run to Persist. Absent: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub table_commit: bool,
    /// The page's records told apart from another page's (16 hex digits:
    /// Persist's `Framer::fingerprint`, over the record count, the first
    /// record and the last one's beginning); absent for a page of no
    /// records or written by an earlier version. Two pages of a run with
    /// the same are reported as [`Manifest::duplicated`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_fingerprint: Option<String>,
    /// How the page changed (or, frozen, would have changed) its dataset's
    /// columns, one line per change ([`RunCompleted::schema_changes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_changes: Vec<String>,
    /// The page's `target.on_schema_change`.
    #[serde(default, skip_serializing_if = "contracts::SchemaChange::is_default")]
    pub on_schema_change: contracts::SchemaChange,
}

/// How many pages a run expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Pages (receipts) the run is complete with; 0 for an empty run.
    pub pages: u64,
    /// Why the run stopped before the vendor's data ended (a cursor run
    /// that reached `strategy.max_pages` with a next page still offered),
    /// `None` for a whole run. Carried into the [`Manifest`] and the
    /// run-completed event: such a run is complete as a run but not a
    /// whole copy of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// Records the vendor announced for the run (a count-first run's probe
    /// total), `None` when unknown. A run whose pages held fewer completes
    /// [`Expected::truncated`]: the vendor served shorter pages than asked
    /// (a page size cap, such as Django REST Framework's 1,000), so records
    /// between the pages were never fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
}

/// `expected.json` as written: the count, and whether the run's pages
/// need to list receipts of the earlier layout (see the module's "Lakes
/// written by earlier versions").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ExpectedRecord {
    #[serde(flatten)]
    expected: Expected,
    /// `true` when the run's folder held no earlier-layout receipt as the
    /// count was written: its pages list only their shard's folder.
    /// Absent (a count an earlier version wrote): `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    receipts_in_shard_folders: bool,
}

/// What a completed run wrote: read it instead of listing the lake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Pages persisted.
    pub pages: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records quarantined.
    pub records_quarantined: u64,
    /// Parquet objects, sorted.
    pub files: Vec<String>,
    /// FNV-1a 64 hash (hex) of the distinct page schemas, sorted: equal
    /// across runs whose pages have the same columns and types.
    pub schema_hash: String,
    /// [`Expected::truncated`]: why the run holds less than the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// Why the run holds records more than once ([`duplicated`]), if it
    /// does ([`RunCompleted::duplicated`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated: Option<String>,
    /// Its pages' schema changes, sorted and each once
    /// ([`RunCompleted::schema_changes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_changes: Vec<String>,
    /// Its dataset's `target.on_schema_change`.
    #[serde(default, skip_serializing_if = "contracts::SchemaChange::is_default")]
    pub on_schema_change: contracts::SchemaChange,
    /// What its table commit found worth a look ([`Compacted::notes`];
    /// [`RunCompleted::table_notes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table_notes: Vec<String>,
}

/// The ledger as a function uses it: the lake, and optionally the topic on
/// which completed runs are announced ([`RunCompleted`]).
#[derive(Clone, Copy)]
pub struct RunLedger<'a> {
    /// The lake bucket.
    pub store: &'a dyn ObjectStore,
    /// The run-events topic (an ARN on AWS, a name locally) and its publisher.
    pub events: Option<(&'a dyn crate::ports::TopicPublisher, &'a str)>,
}

/// Where a completion is announced: the run-events topic's publisher and
/// name, or `None` (the free functions, the tests).
type Events<'a> = Option<(&'a dyn crate::ports::TopicPublisher, &'a str)>;

impl RunLedger<'_> {
    /// [`record_expected`], announcing the run if this completed it.
    ///
    /// # Errors
    /// [`PortError`] from the store or the topic.
    pub async fn record_expected(&self, expected: &Expected) -> Result<Completion, PortError> {
        let key = keys::expected_key(&expected.pipeline, &expected.run_id);
        let earlier = self.store.list(&keys::legacy_receipts_prefix(&expected.pipeline, &expected.run_id)).await?;
        let record = ExpectedRecord { expected: expected.clone(), receipts_in_shard_folders: earlier.is_empty() };
        self.store.put(&key, encode(&key, &record)?).await?;
        check_completion(self.store, &expected.pipeline, &expected.run_id, None, self.events).await
    }

    /// [`complete_if_done`], announcing the run if this completed it.
    ///
    /// # Errors
    /// [`PortError`] from the store or the topic.
    pub async fn complete_if_done(&self, pipeline: &str, run_id: &RunId) -> Result<Completion, PortError> {
        check_completion(self.store, pipeline, run_id, None, self.events).await
    }

    /// [`complete_if_done`] with `compactor` rewriting the run's files
    /// before its manifest and `_SUCCESS` are written, as the completion
    /// by [`record_page`] does: for a run whose count is learnt after its
    /// last page (a stream shard's window, closed once its batches are
    /// recorded). Idempotent: a run complete already is
    /// [`Completion::AlreadyComplete`].
    ///
    /// # Errors
    /// [`PortError`] from the store, the compactor or the topic.
    pub async fn complete_with(
        &self,
        pipeline: &str,
        run_id: &RunId,
        compactor: &dyn Compactor,
    ) -> Result<Completion, PortError> {
        check_completion(self.store, pipeline, run_id, Some(compactor), self.events).await
    }

    /// [`record_page`]: writes the page's receipt and completes the run if
    /// this was its last page, with `compactor` rewriting the run's files
    /// (see [`Compactor`]) before the manifest and the `_SUCCESS` marker
    /// are written, so a completed run's manifest lists its final files;
    /// announces the run if this completed it (before its `_SUCCESS`
    /// marker, so a completion that dies between them announces again
    /// when it is retried).
    ///
    /// # Errors
    /// [`PortError`] from the store, the compactor or the topic.
    pub async fn record_page(
        &self,
        receipt: &PageReceipt,
        compactor: Option<&dyn Compactor>,
    ) -> Result<Completion, PortError> {
        record_receipt(self.store, receipt, compactor, self.events).await
    }
}

/// Publishes [`RunCompleted`] for `manifest` on the run-events topic, if any.
async fn announce(events: Events<'_>, manifest: &Manifest) -> Result<(), PortError> {
    let Some((topics, topic)) = events else { return Ok(()) };
    tracing::info!(pipeline = %manifest.pipeline, run_id = %manifest.run_id, pages = manifest.pages, "run completed");
    let event = RunCompleted {
        version: contracts::V1,
        pipeline: manifest.pipeline.clone(),
        run_id: manifest.run_id.clone(),
        run_date: manifest.run_date,
        pages: manifest.pages,
        records_persisted: manifest.records_persisted,
        records_quarantined: manifest.records_quarantined,
        manifest_key: keys::manifest_key(&manifest.pipeline, &manifest.run_id),
        schema_hash: manifest.schema_hash.clone(),
        truncated: manifest.truncated.clone(),
        duplicated: manifest.duplicated.clone(),
        schema_changes: manifest.schema_changes.clone(),
        on_schema_change: manifest.on_schema_change,
        table_notes: manifest.table_notes.clone(),
    };
    let body = String::from_utf8_lossy(&encode(topic, &event)?).into_owned();
    // Attributes a subscription filters on (an SNS FilterPolicy matches
    // message attributes): `schema_changed`, and `notify`, what Notify's
    // subscription takes: a run whose changes it alerts (not under
    // `on_schema_change: evolve`) or whose records are duplicated.
    let changed = !manifest.schema_changes.is_empty();
    let notify =
        (changed && manifest.on_schema_change != contracts::SchemaChange::Evolve) || manifest.duplicated.is_some();
    let attributes = [
        ("pipeline".to_string(), manifest.pipeline.clone()),
        ("event".to_string(), "run_completed".to_string()),
        ("schema_changed".to_string(), changed.to_string()),
        (NOTIFY_ATTRIBUTE.to_string(), notify.to_string()),
    ]
    .into();
    topics.publish(topic, vec![crate::ports::TopicMessage { body, attributes, ..Default::default() }]).await
}

/// The run-completed event's attribute Notify's subscription filters on
/// (`"true"`: a run Notify alerts; `core::topology`, the template's
/// `RunEventsToSchemaChangesQueue`).
pub const NOTIFY_ATTRIBUTE: &str = "notify";

/// Why a run's pages hold records more than once, `None` when nothing says
/// they do:
/// - pages with the same [`PageReceipt::records_fingerprint`] (a vendor
///   that ignored the page's offset parameter, mistyped in the spec or
///   not supported, and served its first page again; for an Athena-driven
///   run, a query row returned twice, or rows the vendor answers alike:
///   the text names each cause);
/// - more records `landed` than the vendor `announced` (offset pages over
///   records added while the run paged: each insert shifts the records
///   behind it into the next page, so the boundary records are fetched
///   twice; or a total that is low, an estimate or a cap, so the run
///   planned too few pages and records past them were not fetched: the
///   text names both, and how to tell them apart).
pub fn duplicated(receipts: &[PageReceipt], announced: Option<u64>, landed: u64) -> Option<String> {
    let mut by_fingerprint: std::collections::BTreeMap<&str, Vec<&PageReceipt>> = std::collections::BTreeMap::new();
    for receipt in receipts {
        if let Some(fingerprint) = &receipt.records_fingerprint {
            by_fingerprint.entry(fingerprint).or_default().push(receipt);
        }
    }
    let mut repeats: Vec<Vec<&PageReceipt>> = by_fingerprint.into_values().filter(|pages| pages.len() > 1).collect();
    if !repeats.is_empty() {
        for pages in &mut repeats {
            pages.sort_by_key(|r| r.page);
        }
        repeats.sort_by_key(|pages| pages[0].page);
        let copies: u64 = repeats.iter().map(|pages| (pages.len() as u64 - 1) * pages[0].records_in).sum();
        let pages: usize = repeats.iter().map(Vec::len).sum();
        let first = &repeats[0];
        let listed: Vec<String> = first.iter().take(5).map(|r| r.page.to_string()).collect();
        let more = if first.len() > 5 { format!(" and {} more", first.len() - 5) } else { String::new() };
        return Some(format!(
            "{pages} of the run's pages hold records another of its pages holds (pages {}{more} hold the same {} \
             records: the same count, first and last record), {copies} records stored more than once. Paged by \
             offset or page number, the vendor served a page again instead of the next one: it ignores the page \
             parameter the run sends; check the spec's strategy.offset_param (and limit_param) against the \
             vendor's API documentation. Paged by cursor, its cursors lead back to a page already read (a cycle): \
             report it to the vendor; strategy.max_pages bounds such a run. Athena-driven (kind: athena), two of \
             the query's rows got the same answer: either the query returned a row twice and the vendor was \
             called twice for it (select DISTINCT values in strategy.query), or the vendor answers different \
             rows alike, and the copies are as it sent them. Once the cause is fixed, start the run again \
             (`--replace` its time for an Iceberg dataset; delete this run's files for a Parquet one)",
            listed.join(", "),
            first[0].records_in,
        ));
    }
    let announced = announced.filter(|announced| landed > *announced)?;
    Some(format!(
        "the run's pages held {landed} records, {} more than the {announced} the vendor announced (the probe's \
         total). Either records added while the run paged shifted offset pages, so records at page boundaries \
         were fetched twice (deduplicate on the records' key: target.write: merge with a key), or the vendor's \
         total is low (an estimate, or capped), and the run planned too few pages: records past its last page \
         were not fetched. Count the run's distinct keys to tell: as many as records means the total was low; \
         then page by a cursor, or without total_pointer so paging ends on a short page. Fewer keys than the \
         announced total means both: a vendor listing newest first shifts every page as records arrive, so \
         records were fetched twice and others skipped; page oldest first, or by a cursor",
        landed - announced
    ))
}

/// What [`complete_if_done`] found.
// One is returned per page and none is kept: the size of `Completed` costs
// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The expected count is not known yet, or pages are missing.
    NotYet,
    /// This call completed the run: the manifest and marker were written.
    Completed(Manifest),
    /// The run was already complete.
    AlreadyComplete,
}

fn encode<T: Serialize>(key: &str, value: &T) -> Result<bytes::Bytes, PortError> {
    serde_json::to_vec(value)
        .map(bytes::Bytes::from)
        .map_err(|err| PortError::permanent("encode ledger object", key.to_string(), err))
}

/// That a run was planned: written by the Orchestrator before it sends the
/// run's first message (`_runs/<pipeline>/<run_id>/plan.json`). With
/// tenants ([`crate::tenant::Tenants::Listed`]), Persist takes pages only
/// of planned runs (unless the page's tenant may open runs itself), so no
/// sender can start, or complete ahead of time, a run the Orchestrator has
/// not started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// The call strategy's kind (`simple`, `paged`, …).
    pub strategy: String,
}

/// Writes the run's [`Plan`] (rewritten as it is on a redelivered start),
/// and counts the run started ([`crate::metrics::RUNS_STARTED`], where the
/// process counts runs: [`crate::metrics::count_runs_to`]).
///
/// # Errors
/// [`PortError`] from the store.
pub async fn record_plan(store: &dyn ObjectStore, plan: &Plan) -> Result<(), PortError> {
    let key = keys::plan_key(&plan.pipeline, &plan.run_id);
    store.put(&key, encode(&key, plan)?).await?;
    crate::metrics::count_run(crate::metrics::RUNS_STARTED, &plan.pipeline, plan.run_id.as_str());
    Ok(())
}

/// Whether the run was planned: its plan record, or for a run planned
/// before plan records existed, its expected count, probe or query record.
///
/// # Errors
/// [`PortError`] from the store (other than not found).
pub async fn is_planned(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<bool, PortError> {
    let records = [keys::plan_key, keys::expected_key, keys::probe_key, keys::query_key];
    for key in records.map(|key| key(pipeline, run_id)) {
        match store.get(&key).await {
            Ok(_) => return Ok(true),
            Err(PortError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(false)
}

/// Writes the run's expected page count, then checks completion with
/// [`complete_if_done`] (an empty run, or one whose pages were all
/// persisted before the count was known, completes here).
///
/// # Errors
/// [`PortError`] from the store.
pub async fn record_expected(store: &dyn ObjectStore, expected: &Expected) -> Result<Completion, PortError> {
    RunLedger { store, events: None }.record_expected(expected).await
}

/// Rewrites a completed run's data files before its manifest is written:
/// Persist's small-file coalescing. Given every receipt of the run (at
/// completion without its `schema` text, which only the manifest's schema
/// hash needs), it returns the run's final data keys (sorted or not; the
/// manifest sorts them).
#[async_trait::async_trait]
pub trait Compactor: Send + Sync {
    /// The run's data keys after compaction, and what its table commit
    /// found worth a look.
    ///
    /// # Errors
    /// [`PortError`] from the store; the run then stays incomplete and the
    /// message that completed it is retried. A permanent error (a table
    /// commit refused) fails the completing page to its DLQ.
    ///
    /// `partial`: why the run is not a whole copy of its source (the
    /// vendor announced more records than its pages held, or the run
    /// stopped at `strategy.max_pages`), `None` for a whole run. A commit
    /// that makes the run the whole table (`write: replace`) must refuse
    /// a partial run: it would drop every row the run missed.
    async fn compact(&self, receipts: &[PageReceipt], partial: Option<&str>) -> Result<Compacted, PortError>;
}

/// What a [`Compactor`] leaves of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// The run's final data keys (sorted or not; the manifest sorts them).
    pub files: Vec<String>,
    /// Lines from the table commit ([`crate::tables::CommittedRun::notes`]),
    /// for [`Manifest::table_notes`].
    pub notes: Vec<String>,
}

/// Writes a page's receipt and completes the run if this page was its last,
/// at a constant number of store calls per page, amortised (see the module
/// documentation): one GET of the expected count and one LIST of the
/// page's shard; when that shard is whole, its summary (one GET, and for
/// the first to see the shard whole its receipts' GETs and one PUT) and one
/// LIST of the summaries; when they are all there, the completion, with
/// `compactor` rewriting the run's files first.
///
/// # Errors
/// [`PortError`] from the store or the compactor; unreadable ledger
/// objects are [`PortError::Permanent`] naming their key; a shard summary
/// that other writers kept changing is [`PortError::Transient`].
pub async fn record_page(
    store: &dyn ObjectStore,
    receipt: &PageReceipt,
    compactor: Option<&dyn Compactor>,
) -> Result<Completion, PortError> {
    record_receipt(store, receipt, compactor, None).await
}

/// [`record_page`], announcing a completion on `events`.
async fn record_receipt(
    store: &dyn ObjectStore,
    receipt: &PageReceipt,
    compactor: Option<&dyn Compactor>,
    events: Events<'_>,
) -> Result<Completion, PortError> {
    let (pipeline, run_id) = (receipt.pipeline.as_str(), &receipt.run_id);
    let key = keys::receipt_key(pipeline, run_id, receipt.page);
    store.put(&key, encode(&key, receipt)?).await?;
    let expected = read_expected(store, pipeline, run_id).await?;
    let shard = Shard::of(receipt.page, expected.as_ref().map(|e| &e.expected));
    if shard.pages.is_empty() {
        // A page past the run's count: not part of the run.
        return Ok(Completion::NotYet);
    }
    // Without a count, the count's writer completes the shards of both
    // layouts (`check_completion`); with one an earlier version wrote, or
    // written beside earlier-layout receipts, list those too.
    let earlier = match &expected {
        Some(record) if !record.receipts_in_shard_folders => {
            store.list(&keys::legacy_receipt_shard_prefix(pipeline, run_id, shard.number)).await?
        }
        _ => Vec::new(),
    };
    let Some(receipt_keys) = shard.whole(store, pipeline, run_id, &earlier).await? else {
        return Ok(Completion::NotYet);
    };
    shard.summarise(store, pipeline, run_id, &receipt_keys, Some(receipt)).await?;
    match expected {
        Some(record) => complete(store, &record.expected, compactor, events).await,
        None => Ok(Completion::NotYet),
    }
}

/// Completes the run if its expected count is known and every page has a
/// receipt: summarises each whole shard that has no summary yet, then
/// writes the manifest and the `_SUCCESS` marker. It lists every shard
/// without a summary, so it costs up to one LIST per 1,000 pages: call it
/// once per run (when the count is learnt), and [`record_page`] per page.
///
/// # Errors
/// [`PortError`] from the store; unreadable ledger objects are
/// [`PortError::Permanent`] naming their key.
pub async fn complete_if_done(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Completion, PortError> {
    check_completion(store, pipeline, run_id, None, None).await
}

/// [`complete_if_done`], announcing a completion on `events`.
async fn check_completion(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    compactor: Option<&dyn Compactor>,
    events: Events<'_>,
) -> Result<Completion, PortError> {
    let Some(ExpectedRecord { expected, .. }) = read_expected(store, pipeline, run_id).await? else {
        return Ok(Completion::NotYet);
    };
    let summarised = summarised_shards(store, pipeline, run_id).await?;
    let mut unsummarised = Shard::all(&expected).filter(|shard| !summarised.contains(&shard.number)).peekable();
    // Once per run: the earlier layout's receipts of the whole run.
    let earlier = match unsummarised.peek() {
        Some(_) => store.list(&keys::legacy_receipts_prefix(pipeline, run_id)).await?,
        None => Vec::new(),
    };
    for shard in unsummarised {
        let Some(receipt_keys) = shard.whole(store, pipeline, run_id, &earlier).await? else {
            return Ok(Completion::NotYet);
        };
        shard.summarise(store, pipeline, run_id, &receipt_keys, None).await?;
    }
    complete(store, &expected, compactor, events).await
}

async fn read_expected(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Option<ExpectedRecord>, PortError> {
    read_record(store, &keys::expected_key(pipeline, run_id)).await
}

/// The receipt of `page` of a run, in its shard's folder or, written by an
/// earlier version, in the run's folder ([`keys::legacy_receipt_key`]);
/// `None` when the page has none.
///
/// # Errors
/// [`PortError`] from the store; an unreadable receipt is
/// [`PortError::Permanent`] naming its key.
pub async fn read_receipt(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    page: u32,
) -> Result<Option<PageReceipt>, PortError> {
    match read_record(store, &keys::receipt_key(pipeline, run_id, page)).await? {
        Some(receipt) => Ok(Some(receipt)),
        None => read_record(store, &keys::legacy_receipt_key(pipeline, run_id, page)).await,
    }
}

/// The ledger's JSON record at `key` (a run's count, replacement record,
/// re-run record…), `None` when there is none.
///
/// # Errors
/// [`PortError`] from the store; a body that is not the record's JSON is
/// [`PortError::Permanent`] naming `key`.
pub async fn read_record<T: serde::de::DeserializeOwned>(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<Option<T>, PortError> {
    match store.get(key).await {
        Ok(bytes) => decode(key, &bytes).map(Some),
        Err(PortError::NotFound { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Writes `value` as the ledger's JSON record at `key`.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn write_record<T: Serialize>(store: &dyn ObjectStore, key: &str, value: &T) -> Result<(), PortError> {
    store.put(key, encode(key, value)?).await
}

/// The shards whose summary is written.
async fn summarised_shards(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<std::collections::BTreeSet<u32>, PortError> {
    let listed = store.list(&keys::shard_summaries_prefix(pipeline, run_id)).await?;
    Ok(listed.iter().filter_map(|key| keys::summary_shard(key)).collect())
}

/// One receipt shard of a run and the pages it must hold to be whole.
struct Shard {
    number: u32,
    /// Pages `1000·number ..`, up to the run's count when it is known.
    pages: std::ops::Range<u32>,
}

impl Shard {
    /// The shard of `page`; without the run's count, a shard is whole only
    /// with all of its 1,000 pages.
    fn of(page: u32, expected: Option<&Expected>) -> Self {
        let number = page / keys::RECEIPT_SHARD_PAGES;
        let first = number * keys::RECEIPT_SHARD_PAGES;
        let mut end = first.saturating_add(keys::RECEIPT_SHARD_PAGES);
        if let Some(expected) = expected {
            end = end.min(u32::try_from(expected.pages).unwrap_or(u32::MAX));
        }
        Shard { number, pages: first..end.max(first) }
    }

    /// Every shard of a run of `expected.pages` pages.
    fn all(expected: &Expected) -> impl Iterator<Item = Shard> + '_ {
        let count = expected.pages.div_ceil(u64::from(keys::RECEIPT_SHARD_PAGES));
        (0..u32::try_from(count).unwrap_or(u32::MAX))
            .map(move |number| Shard::of(number * keys::RECEIPT_SHARD_PAGES, Some(expected)))
    }

    /// The keys of the shard's receipts when every page of the shard has
    /// one (one LIST of the shard's folder), `None` while some are missing.
    /// `earlier`: receipts of the earlier layout listed by the caller (any
    /// of the run's, kept when in the shard), each counted unless its page
    /// has one in the shard's folder too.
    async fn whole(
        &self,
        store: &dyn ObjectStore,
        pipeline: &str,
        run_id: &RunId,
        earlier: &[String],
    ) -> Result<Option<Vec<String>>, PortError> {
        let mut listed = store.list(&keys::receipt_shard_prefix(pipeline, run_id, self.number)).await?;
        listed.extend(earlier.iter().cloned());
        let by_page = keys::receipts_by_page(&listed);
        let keys: Vec<String> =
            by_page.into_iter().filter(|(page, _)| self.pages.contains(page)).map(|(_, key)| key.to_string()).collect();
        Ok((keys.len() == self.pages.len()).then_some(keys))
    }

    /// Makes the shard's summary hold every receipt of the shard and, with
    /// `own`, that receipt as written: the first writer builds it from the
    /// receipts (`receipt_keys`, one GET each); a later one whose receipt
    /// differs (a redelivered page) replaces its own entry. Both write
    /// with a compare-and-swap ([`ObjectStore::put_if`]), so concurrent
    /// writers never undo each other's entries.
    async fn summarise(
        &self,
        store: &dyn ObjectStore,
        pipeline: &str,
        run_id: &RunId,
        receipt_keys: &[String],
        own: Option<&PageReceipt>,
    ) -> Result<(), PortError> {
        let key = keys::shard_summary_key(pipeline, run_id, self.number);
        for _ in 0..SUMMARY_WRITE_ATTEMPTS {
            let (summary, version) = match store.get_versioned(&key).await? {
                None => {
                    let mut receipts = Vec::with_capacity(receipt_keys.len());
                    for receipt_key in receipt_keys {
                        receipts.push(decode::<PageReceipt>(receipt_key, &store.get(receipt_key).await?)?);
                    }
                    (ShardSummary::new(self.number, receipts), None)
                }
                Some((bytes, version)) => {
                    let mut summary: ShardSummary = decode(&key, &bytes)?;
                    let Some(own) = own.filter(|own| summary.receipt(own.page).as_ref() != Some(own)) else {
                        return Ok(());
                    };
                    summary.replace(own.clone());
                    (summary, Some(version))
                }
            };
            if store.put_if(&key, encode(&key, &summary)?, version.as_deref()).await? {
                return Ok(());
            }
        }
        Err(PortError::transient_msg(
            "write a shard summary",
            key,
            format!("other pages changed it during each of {SUMMARY_WRITE_ATTEMPTS} attempts"),
        ))
    }
}

/// Compare-and-swap attempts at a shard summary before the page gives up
/// (and is retried by its queue): its writers are the shard's last pages
/// and redelivered ones, a handful at a time.
const SUMMARY_WRITE_ATTEMPTS: usize = 10;

/// The receipts of one shard of a run in one object, written once the
/// shard is whole, so completion reads one object per 1,000 pages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ShardSummary {
    /// The shard's number.
    shard: u32,
    /// The distinct page schemas (the text of a wide table's schema is
    /// kilobytes, and a shard's pages mostly share one).
    schemas: Vec<String>,
    /// The receipts, in page order, each with `schema` moved to `schemas`.
    pages: Vec<SummaryPage>,
}

/// A receipt in a [`ShardSummary`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct SummaryPage {
    /// The receipt, its `schema` `None`.
    receipt: PageReceipt,
    /// Its schema: an index into [`ShardSummary::schemas`].
    schema: Option<usize>,
}

impl ShardSummary {
    fn new(shard: u32, mut receipts: Vec<PageReceipt>) -> Self {
        receipts.sort_by_key(|r| r.page);
        receipts.dedup_by_key(|r| r.page);
        let mut schemas: Vec<String> = Vec::new();
        let pages = receipts
            .into_iter()
            .map(|mut receipt| {
                let schema = receipt.schema.take().map(|text| match schemas.iter().position(|s| *s == text) {
                    Some(index) => index,
                    None => {
                        schemas.push(text);
                        schemas.len() - 1
                    }
                });
                SummaryPage { receipt, schema }
            })
            .collect();
        ShardSummary { shard, schemas, pages }
    }

    fn expand(&self, page: &SummaryPage) -> PageReceipt {
        PageReceipt { schema: page.schema.and_then(|i| self.schemas.get(i).cloned()), ..page.receipt.clone() }
    }

    fn receipt(&self, page: u32) -> Option<PageReceipt> {
        self.pages.iter().find(|p| p.receipt.page == page).map(|p| self.expand(p))
    }

    fn receipts(&self) -> Vec<PageReceipt> {
        self.pages.iter().map(|p| self.expand(p)).collect()
    }

    fn replace(&mut self, receipt: PageReceipt) {
        let mut receipts: Vec<PageReceipt> = self.receipts().into_iter().filter(|r| r.page != receipt.page).collect();
        receipts.push(receipt);
        *self = ShardSummary::new(self.shard, receipts);
    }
}

/// Why a count-first run's pages held fewer records than announced, from
/// its receipts: pages before the last that held fewer
/// than the fullest are named (an empty or short answer, a vendor's fault:
/// a trial's empty middle page was blamed on the page size); when every
/// page before the last held the same number, either the vendor caps its
/// page size at that number or its last answer was short, and which one
/// depends on `strategy.page_size`, which the receipts do not hold: both
/// are said.
fn short_pages(receipts: &[PageReceipt]) -> String {
    let full = receipts.iter().map(|r| r.records_in).max().unwrap_or(0);
    let last = receipts.iter().map(|r| r.page).max();
    let mut before_last: Vec<&PageReceipt> = receipts.iter().filter(|r| Some(r.page) != last).collect();
    before_last.sort_by_key(|r| r.page);
    let short: Vec<String> = before_last
        .iter()
        .filter(|r| r.records_in < full)
        .take(10)
        .map(|r| format!("page {} (the {}) held {}", r.page, ordinal(r.page + 1), r.records_in))
        .collect();
    // An empty page may be no answer at all: a status the spec maps to an
    // empty page (a trial's 404 read as "answered short").
    let mapped = if receipts.iter().any(|r| r.records_in == 0) {
        "; a page that held 0 may also be a status that response.status_actions maps to an empty page (such as \
         404: empty): check the run's log for it"
    } else {
        ""
    };
    if short.is_empty() {
        // The ledger does not know `strategy.page_size`: both readings.
        let held = receipts.iter().find(|r| Some(r.page) == last).map_or(0, |r| r.records_in);
        return format!(
            "every page before the last held {full} records and the last held {held}: if strategy.page_size is \
             more than {full}, the vendor caps its page size (Django REST Framework's is 1,000): set it to {full}; \
             if it is {full}, the vendor answered its last page short (a fault of the vendor, or records that moved \
             while the run paged: run again){mapped}"
        );
    }
    format!(
        "{} where the fullest page held {full}: the vendor answered short before the last page (a fault of the \
         vendor, or records that moved while the run paged: run again){mapped}",
        short.join(", ")
    )
}

/// The first page before the last that held no record while a later page
/// held some, said for a run's truncation reason; `None` when there is
/// none (an empty last page is how many vendors end).
pub fn empty_page_before_records(receipts: &[PageReceipt]) -> Option<String> {
    let mut pages: Vec<&PageReceipt> = receipts.iter().collect();
    pages.sort_by_key(|r| r.page);
    let last_with_records = pages.iter().rposition(|r| r.records_in > 0)?;
    pages[..last_with_records].iter().find(|r| r.records_in == 0).map(|empty| {
        format!(
            "page {} (the {}) came back empty while the vendor offered a next page, and later pages held records \
             (a fault of the vendor, or records that moved while the run paged): records may lie between them",
            empty.page,
            ordinal(empty.page.saturating_add(1))
        )
    })
}

/// `1st`, `2nd`, `3rd`, `4th`, … `11th`, `21st`: how a page is said to
/// people beside its number, which counts from 0 in keys, messages and
/// receipts (`page 1 (the 2nd)`), so it is not read as the first.
pub fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Completes the run when every shard has its summary: one LIST of the
/// summaries, then (once per run) a GET of each.
///
/// Every step can be killed and retried: the compactor resumes its own
/// work (Persist's writes a replacement record before it deletes
/// anything), the manifest and the state are rewritten the same, the
/// event goes out again (at least once), and `_SUCCESS`, written last,
/// is what makes the run complete for readers and retries.
async fn complete(
    store: &dyn ObjectStore,
    expected: &Expected,
    compactor: Option<&dyn Compactor>,
    events: Events<'_>,
) -> Result<Completion, PortError> {
    let (pipeline, run_id) = (expected.pipeline.as_str(), &expected.run_id);
    let shards: Vec<Shard> = Shard::all(expected).collect();
    let summarised = summarised_shards(store, pipeline, run_id).await?;
    if shards.iter().any(|shard| !summarised.contains(&shard.number)) {
        return Ok(Completion::NotYet);
    }
    if store.get(&keys::success_key(pipeline, run_id)).await.is_ok() {
        return Ok(Completion::AlreadyComplete);
    }
    // The receipts without their schema's text, each distinct text kept
    // once: it is kilobytes, and a run's pages mostly share one (a
    // 100,000-page run's receipts held with theirs were 200 MB).
    let mut receipts = Vec::with_capacity(usize::try_from(expected.pages).unwrap_or(0));
    let mut schemas = std::collections::BTreeSet::new();
    for shard in &shards {
        let key = keys::shard_summary_key(pipeline, run_id, shard.number);
        let ShardSummary { schemas: texts, pages, .. } = decode(&key, &store.get(&key).await?)?;
        for page in pages.into_iter().filter(|p| shard.pages.contains(&p.receipt.page)) {
            if let Some(text) = page.schema.and_then(|i| texts.get(i)) {
                schemas.insert(text.clone());
            }
            receipts.push(page.receipt);
        }
    }
    if compactor.is_none() && receipts.iter().any(|r| r.table_commit) {
        // Completing here would mark the run done with its files still
        // staged, never committed to its table. The function that learns
        // the count orders it before the last page (Request records it
        // before forwarding that page, Athena before publishing the last
        // rows), so this is a count learnt after an empty last result.
        let raw_key = receipts.last().map(|r| r.raw_key.as_str()).unwrap_or_default();
        tracing::error!(
            pipeline,
            run_id = %run_id,
            raw_key,
            "every page is in, but the run's files wait for their table commit, which only Persist makes: \
             the run stays open, its pages staged, until Persist receives one of its pages again (the raw \
             envelope at raw_key is that page's PersistMessage: send it to Persist's queue)"
        );
        return Ok(Completion::NotYet);
    }
    let schemas: Vec<&str> = schemas.iter().map(String::as_str).collect();
    let records_persisted: u64 = receipts.iter().map(|r| r.records_persisted).sum();
    let records_quarantined: u64 = receipts.iter().map(|r| r.records_quarantined).sum();
    let landed = records_persisted + records_quarantined;
    let short = expected.records.filter(|announced| landed < *announced).map(|announced| {
        format!(
            "the vendor announced {announced} records (the probe's total) but the run's pages held {landed}: {}; \
             start a new run (`tributary run SPEC`, or `--replace` this run's time for an Iceberg dataset): this \
             run keeps what it holds",
            short_pages(&receipts)
        )
    });
    // A run without a count whose empty page was followed by records (a
    // cursor vendor answering one page empty, yet offering the next) may
    // have missed records between its pages: an incremental pipeline's
    // cursor must not pass them (a trial's cursor moved past two orders
    // the empty page should have held, and no later run fetched them).
    // Not for a fan-out run (its query's binding, `query.json`, is kept):
    // its pages are one call per query row, and a row with nothing (a
    // customer without orders) is no gap (a trial's incremental fan-out
    // was truncated every run, its cursor never moving).
    let gap = match (expected.records.is_none() && expected.truncated.is_none())
        .then(|| empty_page_before_records(&receipts))
        .flatten()
    {
        Some(gap) if store.get_versioned(&keys::query_key(pipeline, run_id)).await?.is_none() => Some(gap),
        _ => None,
    };
    // Known before the table commit, which must not make a partial run
    // the whole table (`write: replace`).
    let partial = expected.truncated.as_deref().or(short.as_deref()).or(gap.as_deref());
    let Compacted { mut files, notes: table_notes } = match compactor {
        Some(compactor) => compactor.compact(&receipts, partial).await?,
        None => {
            Compacted { files: receipts.iter().flat_map(|r| r.data_keys.iter().cloned()).collect(), notes: Vec::new() }
        }
    };
    files.sort();
    // Incremental loading: the run's highest cursor becomes the pipeline's
    // (a no-op for pipelines without `incremental`), unless records it did
    // not fetch may lie below it; said with the truncation, before the
    // manifest (a retry folds again: only forward).
    let missing = match (&short, &expected.truncated, &gap) {
        (Some(_), _, _) | (None, None, Some(_)) => crate::state::Missing::BetweenItsPages,
        (None, Some(_), _) => crate::state::Missing::AfterItsPages,
        (None, None, None) => crate::state::Missing::Nothing,
    };
    let (_, said) = crate::state::fold_run(store, pipeline, run_id, missing).await?;
    let truncated = match (expected.truncated.clone().or(short), gap, said) {
        (Some(why), _, Some(said)) => Some(format!("{why}; {said}")),
        (Some(why), _, None) => Some(why),
        // An incremental run whose cursor was held back for the gap says
        // so; without a cursor the next run fetches everything again.
        (None, Some(gap), Some(said)) => Some(format!("{gap}; {said}")),
        (None, _, _) => None,
    };
    let manifest = Manifest {
        pipeline: pipeline.to_string(),
        run_id: run_id.clone(),
        run_date: expected.run_date,
        pages: receipts.len() as u64,
        records_persisted,
        records_quarantined,
        files,
        schema_hash: contracts::digest::fnv1a_hex(schemas.join("\n").as_bytes()),
        truncated,
        duplicated: duplicated(&receipts, expected.records, landed),
        schema_changes: {
            let mut changes: Vec<String> = receipts.iter().flat_map(|r| r.schema_changes.iter().cloned()).collect();
            changes.sort_unstable();
            changes.dedup();
            changes
        },
        on_schema_change: receipts.first().map(|r| r.on_schema_change).unwrap_or_default(),
        table_notes,
    };
    let key = keys::manifest_key(pipeline, run_id);
    store.put(&key, encode(&key, &manifest)?).await?;
    // Announced before the marker: a completion killed in between is
    // retried (no marker yet) and announces again; after the marker a
    // retry finds the run complete and would never announce it.
    announce(events, &manifest).await?;
    store.put(&keys::success_key(pipeline, run_id), bytes::Bytes::new()).await?;
    crate::metrics::count_run(crate::metrics::RUNS_COMPLETED, pipeline, run_id.as_str());
    Ok(Completion::Completed(manifest))
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, PortError> {
    serde_json::from_slice(bytes).map_err(|err| PortError::permanent("read ledger object", key.to_string(), err))
}

/// Every receipt of a run, listed and read one by one (status, replay and
/// totals: once per run, never per page).
async fn receipts(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<Vec<PageReceipt>, PortError> {
    let listed = store.list(&keys::receipts_prefix(pipeline, run_id)).await?;
    let mut receipts = Vec::new();
    for key in keys::receipts_by_page(&listed).into_values() {
        receipts.push(decode(key, &store.get(key).await?)?);
    }
    Ok(receipts)
}

/// Reopens a completed run so that its pages, sent again (`tributary
/// replay --stack`), complete it again: deletes its replacement record
/// and staged coalesced files ([`forget_replacement`], first: the run is
/// still complete without them, and the reopened run's completion must
/// coalesce the replayed pages anew, not finish the old record by deleting
/// them), its `_SUCCESS` marker, its manifest, its page receipts and shard
/// summaries (the run's count, `expected.json`, stays). Without the receipts, the first replayed page
/// would find the run whole with the old receipts and complete it at once,
/// and the later pages would then be skipped as deliveries of a completed
/// run. Returns whether the run was complete; an incomplete run is left as
/// it is (its pages rewrite their receipts as usual).
///
/// # Errors
/// [`PortError`] from the store.
pub async fn reopen_run(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<bool, PortError> {
    if store.get(&keys::success_key(pipeline, run_id)).await.is_err() {
        return Ok(false);
    }
    forget_replacement(store, pipeline, run_id).await?;
    store.delete(&keys::success_key(pipeline, run_id)).await?;
    store.delete(&keys::manifest_key(pipeline, run_id)).await?;
    drop_receipts(store, pipeline, run_id).await?;
    Ok(true)
}

/// Deletes a run's page receipts and shard summaries.
async fn drop_receipts(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<(), PortError> {
    let summaries = keys::shard_summaries_prefix(pipeline, run_id);
    for key in store.list(&keys::receipts_prefix(pipeline, run_id)).await? {
        if keys::receipt_page(&key).is_some() || key.starts_with(&summaries) {
            store.delete(&key).await?;
        }
    }
    Ok(())
}

/// Reopens a run that is stuck: not complete, with its page count known
/// and a receipt for every page, so no page of it is still on its way and
/// nothing will retry its completion but a redrive of the page that
/// failed it (a table commit refused: a `primary_key` naming no column, a
/// `write: replace` run holding fewer records than announced). Its page
/// receipts and shard summaries are deleted, as [`reopen_run`] deletes a
/// completed run's, so that a new fetch of every page completes it.
/// Returns whether the run was stuck; any other run is left as it is.
///
/// # Errors
/// [`PortError`] from the store; an unreadable count is permanent.
pub async fn reopen_stuck_run(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<bool, PortError> {
    if !is_stuck(store, pipeline, run_id).await? {
        return Ok(false);
    }
    forget_replacement(store, pipeline, run_id).await?;
    drop_receipts(store, pipeline, run_id).await?;
    Ok(true)
}

/// Whether the run is stuck ([`reopen_stuck_run`]): not complete, with a
/// page count of at least one page and a receipt for every page.
///
/// # Errors
/// [`PortError`] from the store; an unreadable count is permanent.
pub async fn is_stuck(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<bool, PortError> {
    if store.get(&keys::success_key(pipeline, run_id)).await.is_ok() {
        return Ok(false);
    }
    let Some(ExpectedRecord { expected, .. }) = read_expected(store, pipeline, run_id).await? else {
        return Ok(false);
    };
    let listed = store.list(&keys::receipts_prefix(pipeline, run_id)).await?;
    Ok(holds_every_page_but_incomplete(false, Some(expected.pages), keys::receipts_by_page(&listed).len() as u64))
}

/// The one definition of a stuck run, from counts a caller already has
/// ([`is_stuck`] reads them from the store; `tributary status` from its
/// listing): not `completed`, with a page count (`pages_planned`) of at
/// least one page and a receipt for every page (`pages_with_receipt`).
/// Such a run's completion was tried and failed: a redrive repeats it, and
/// where the cause is in the spec or the vendor's answers only a re-run
/// that fetches every page again ([`reopen_stuck_run`]) completes it. A
/// run without a page count (Athena-driven, or one whose count was never
/// written) is never stuck.
pub fn holds_every_page_but_incomplete(completed: bool, pages_planned: Option<u64>, pages_with_receipt: u64) -> bool {
    !completed && pages_planned.is_some_and(|planned| planned > 0 && pages_with_receipt >= planned)
}

/// Deletes a run's replacement record and its staged coalesced files
/// (`keys::replacement_key`, `keys::staged_coalesced_prefix`), so that the
/// run's next coalescing is planned anew: for a completed run being
/// reopened or coalesced again after a replay, never during a completion.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn forget_replacement(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<(), PortError> {
    store.delete(&keys::replacement_key(pipeline, run_id)).await?;
    for key in store.list(&keys::staged_coalesced_prefix(pipeline, run_id)).await? {
        store.delete(&key).await?;
    }
    Ok(())
}

/// Runs of `pipeline` completed for `run_date` (their manifests).
///
/// # Errors
/// [`PortError`] from the store; unreadable manifests are skipped.
pub async fn completed_runs(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_date: NaiveDate,
) -> Result<Vec<Manifest>, PortError> {
    let mut runs = Vec::new();
    for key in store.list(&keys::manifests_prefix(pipeline)).await? {
        match decode::<Manifest>(&key, &store.get(&key).await?) {
            Ok(manifest) if manifest.run_date == run_date => runs.push(manifest),
            Ok(_) => {}
            Err(err) => tracing::warn!(key, error = %err, "unreadable manifest skipped"),
        }
    }
    Ok(runs)
}

/// Totals over a run's receipts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Pages with a receipt.
    pub pages: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records quarantined.
    pub records_quarantined: u64,
    /// The pages' quarantine files (JSON lines, each record with its
    /// reason: `PageRef::quarantine`), in page order.
    pub quarantine_keys: Vec<String>,
    /// Parquet objects written.
    pub data_keys: Vec<String>,
    /// The completed run's [`Manifest::truncated`].
    pub truncated: Option<String>,
    /// The completed run's [`Manifest::duplicated`].
    pub duplicated: Option<String>,
    /// Whether the run is complete (its `_SUCCESS` marker is written): an
    /// Iceberg dataset's rows are in the table only then.
    pub completed: bool,
    /// The pages' schema changes, sorted and each once
    /// ([`Manifest::schema_changes`]).
    pub schema_changes: Vec<String>,
    /// The completed run's [`Manifest::table_notes`].
    pub table_notes: Vec<String>,
}

/// Sums the receipts of `run_id` of `pipeline`.
///
/// # Errors
/// [`PortError`] from the store; a receipt that is not valid JSON is a
/// [`PortError::Permanent`] naming its key.
pub async fn run_totals(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<RunTotals, PortError> {
    // A completed run's files are its manifest's (Persist may have
    // coalesced the pages' files).
    let completed = store.get(&keys::success_key(pipeline, run_id)).await.is_ok();
    let mut totals = RunTotals { completed, ..RunTotals::default() };
    let manifest = if totals.completed {
        let bytes = store.get(&keys::manifest_key(pipeline, run_id)).await.ok();
        bytes.and_then(|bytes| serde_json::from_slice::<Manifest>(&bytes).ok())
    } else {
        None
    };
    // One receipt at a time: a run's receipts are kilobytes each.
    let mut changes = std::collections::BTreeSet::new();
    let listed = store.list(&keys::receipts_prefix(pipeline, run_id)).await?;
    for key in keys::receipts_by_page(&listed).into_values() {
        let receipt: PageReceipt = decode(key, &store.get(key).await?)?;
        totals.pages += 1;
        totals.records_persisted += receipt.records_persisted;
        totals.records_quarantined += receipt.records_quarantined;
        totals.quarantine_keys.extend(receipt.quarantine_key);
        if manifest.is_none() {
            totals.data_keys.extend(receipt.data_keys);
        }
        changes.extend(receipt.schema_changes);
    }
    totals.schema_changes = changes.into_iter().collect();
    if let Some(manifest) = manifest {
        totals.data_keys = manifest.files;
        totals.truncated = manifest.truncated;
        totals.duplicated = manifest.duplicated;
        totals.table_notes = manifest.table_notes;
    }
    Ok(totals)
}

/// Every page receipt of a run, in page order.
///
/// # Errors
/// [`PortError`] from the store; unreadable receipts are
/// [`PortError::Permanent`] naming their key.
pub async fn run_receipts(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Vec<PageReceipt>, PortError> {
    let mut receipts = receipts(store, pipeline, run_id).await?;
    receipts.sort_by_key(|r| r.page);
    Ok(receipts)
}

/// Rewrites a completed run's manifest with `files` (after its files were
/// coalesced again, by a replay).
///
/// # Errors
/// [`PortError`] from the store; [`PortError::NotFound`] without a manifest.
pub async fn replace_manifest_files(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    mut files: Vec<String>,
) -> Result<(), PortError> {
    let key = keys::manifest_key(pipeline, run_id);
    let mut manifest: Manifest = decode(&key, &store.get(&key).await?)?;
    files.sort();
    manifest.files = files;
    store.put(&key, encode(&key, &manifest)?).await
}
