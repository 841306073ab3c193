//! Deterministic object keys of the lake.
//!
//! Every key derives from (dataset, run date, pipeline, run id, page) and
//! nothing else — no wall clock, no random part — so a redelivered message
//! rewrites the same objects instead of adding duplicates. The pipeline is
//! part of the file name because two pipelines may feed one dataset and fire
//! at the same scheduled time (the same run id): they must not overwrite each
//! other.
//!
//! | what | key |
//! |---|---|
//! | Parquet data | `<dataset>/dt=<YYYY-MM-DD>/<pipeline>-<run_id>-<page:05>.parquet` |
//! | more parts of the page (rotation), other partitions | `<dataset>/<partition>/<pipeline>-<run_id>-<page:05>[-<part:03>].parquet` |
//! | raw page (the `PersistMessage`, replayable) | `raw/<dataset>/dt=<YYYY-MM-DD>/<pipeline>-<run_id>-<page:05>.json` |
//! | raw claim-check payload (bytes as received) | `raw/<dataset>/dt=<YYYY-MM-DD>/<pipeline>-<run_id>-<page:05>.payload` |
//! | the dataset's schema | `_schema/<dataset>.json` |
//! | a table's catalog entry (local runtime: what Glue would get) | `_catalog/<table>.glue.json` |
//! | quarantined records | `quarantine/<dataset>/dt=<YYYY-MM-DD>/<pipeline>-<run_id>-<page:05>.jsonl` |
//! | page receipt (counts), in its shard's folder | `_runs/<pipeline>/<run_id>/receipts-<s:05>/page-<page:05>.json` (`s` = page ÷ 1,000) |
//! | page receipt written before 2026-12-06 (still read) | `_runs/<pipeline>/<run_id>/page-<page:05>.json` |
//! | shard summary (the receipts of pages `1000·s .. 1000·s+999`) | `_runs/<pipeline>/<run_id>/shard-<s:05>.json` |
//! | claim-check payload | `_claims/<pipeline>/<run_id>/page-<page:05>.json` |
//! | dead letter, archived by Notify | `_dead_letters/<dlq>/<sent time>-<message id>.json` |
//! | a run's pages coalesced into one file (per partition) | `<dataset>/<partition>/<pipeline>-<run_id>.parquet` |
//! | that file staged before it replaces the pages (outside every dataset folder) | `_runs/<pipeline>/<run_id>/coalesced/<group:05>.parquet` |
//! | the replacement record: what each coalesced file replaces (written before the first delete) | `_runs/<pipeline>/<run_id>/replacement.json` |
//! | expected page count, probe and query records, `_SUCCESS` | `_runs/<pipeline>/<run_id>/{expected,probe,query}.json`, `…/_SUCCESS` |
//! | a count-first run's pages sent so far (the Orchestrator's checkpoint) | `_runs/<pipeline>/<run_id>/pages-sent.json` |
//! | an Iceberg run's commit claim | `_runs/<pipeline>/<run_id>/iceberg-commit.json` |
//! | a completed run's manifest | `_manifests/<pipeline>/<run_id>.json` |
//! | a pipeline's cursor, and each page's | `_state/<pipeline>.json`, `_state/<pipeline>/<run_id>/page-<page:05>.json` |
//! | Iceberg: the local SQL catalog, the warehouse | `_iceberg/catalog.sqlite`, `_iceberg/warehouse/` |

use chrono::NaiveDate;

use contracts::RunId;

/// Folder of the dead-letter archive (`crate::dead_letters`).
pub const DEAD_LETTERS_PREFIX: &str = "_dead_letters/";

/// Where Notify archives a dead letter of DLQ `dlq`:
/// `_dead_letters/<dlq>/<sent time>-<message id>.json`, the sent time
/// (RFC 3339, from `SentTimestamp`) as `YYYYMMDDTHHMMSS.mmmZ` so keys sort
/// by age (`00000000T000000.000Z` when unknown). Characters other than
/// `A-Z a-z 0-9 - _ .` in the DLQ name or message id become `_`.
pub fn dead_letter_key(dlq: &str, sent_at: Option<&str>, message_id: &str) -> String {
    let clean = |text: &str| -> String {
        text.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect()
    };
    let time = sent_at
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(|| "00000000T000000.000Z".to_string(), |t| crate::dead_letters::key_time(&t.to_utc()));
    format!("{DEAD_LETTERS_PREFIX}{}/{time}-{}.json", clean(dlq), clean(message_id))
}

/// The file stem every object of one page shares:
/// `<pipeline>-<run_id>-<page:05>`.
pub fn page_stem(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{pipeline}-{run_id}-{page:05}")
}

/// Key of a run's pages of one partition folder coalesced into one file:
/// `<folder>/<pipeline>-<run_id>.parquet` (no page number), `folder`
/// being `<dataset>/<partition>`; a partition whose pages fill several
/// files has them as [`coalesced_bin_key`]s after this one.
pub fn coalesced_key(folder: &str, pipeline: &str, run_id: &str) -> String {
    format!("{folder}/{}", coalesced_name(pipeline, run_id))
}

/// Key of the `bin`-th coalesced file of a run's partition folder: bin 0
/// is [`coalesced_key`], the others `<folder>/<pipeline>-<run_id>.<bin:05>.parquet`
/// (not under [`run_page_files_prefix`]).
pub fn coalesced_bin_key(folder: &str, pipeline: &str, run_id: &str, bin: usize) -> String {
    if bin == 0 {
        return coalesced_key(folder, pipeline, run_id);
    }
    format!("{folder}/{pipeline}-{run_id}.{bin:05}.parquet")
}

fn coalesced_name(pipeline: &str, run_id: &str) -> String {
    format!("{pipeline}-{run_id}.parquet")
}

/// Prefix of the page files of `pipeline`'s run `run_id` in a partition
/// folder (`<dataset>/<partition>`): `<folder>/<pipeline>-<run_id>-`, so one
/// LIST finds which of them are left (the coalesced file,
/// `<pipeline>-<run_id>.parquet`, does not match it).
pub fn run_page_files_prefix(folder: &str, pipeline: &str, run_id: &str) -> String {
    format!("{folder}/{pipeline}-{run_id}-")
}

/// Whether `key` is a coalesced run file ([`coalesced_key`]) of
/// `pipeline`'s run `run_id`: its file name is `<pipeline>-<run_id>.parquet`.
pub fn is_coalesced(key: &str, pipeline: &str, run_id: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    if name == coalesced_name(pipeline, run_id) {
        return true;
    }
    // A later bin: `<pipeline>-<run_id>.<digits>.parquet`.
    name.strip_prefix(&format!("{pipeline}-{run_id}."))
        .and_then(|rest| rest.strip_suffix(".parquet"))
        .is_some_and(|bin| !bin.is_empty() && bin.bytes().all(|b| b.is_ascii_digit()))
}

/// Folder of a dataset's raw pages: `raw/<dataset>/`.
pub fn raw_prefix(dataset: &str) -> String {
    format!("raw/{dataset}/")
}

/// Folder of Parquet data: `<dataset>/dt=<date>`.
pub fn data_prefix(dataset: &str, run_date: NaiveDate) -> String {
    format!("{dataset}/dt={run_date}")
}

/// Where one page of one run of one pipeline lands in a dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageKey<'a> {
    /// Dataset (top folder).
    pub dataset: &'a str,
    /// Run date (`dt=` partition).
    pub run_date: NaiveDate,
    /// Pipeline that wrote it.
    pub pipeline: &'a str,
    /// Run id.
    pub run_id: &'a RunId,
    /// Page index.
    pub page: u32,
}

impl PageKey<'_> {
    fn stem(&self) -> String {
        format!("{}/{}", data_prefix(self.dataset, self.run_date), page_stem(self.pipeline, self.run_id, self.page))
    }

    /// Key of the page's Parquet file.
    pub fn data(&self) -> String {
        format!("{}.parquet", self.stem())
    }

    /// Key of part `part` of the page's data in the Hive partition
    /// `partition` (e.g. `dt=2026-11-29`): part 0 has no suffix, later
    /// parts (file rotation) end `-001`, `-002`…
    pub fn data_part(&self, partition: &str, part: u32) -> String {
        let name = page_stem(self.pipeline, self.run_id, self.page);
        match part {
            0 => format!("{}/{partition}/{name}.parquet", self.dataset),
            n => format!("{}/{partition}/{name}-{n:03}.parquet", self.dataset),
        }
    }

    /// Key of the copy of a claim-check payload, kept for replay.
    pub fn raw_payload(&self) -> String {
        format!("raw/{}.payload", self.stem())
    }

    /// Key of the page's raw payload (the `PersistMessage` as received).
    pub fn raw(&self) -> String {
        format!("raw/{}.json", self.stem())
    }

    /// Key of the page's quarantined records (JSON lines with the reason).
    pub fn quarantine(&self) -> String {
        format!("quarantine/{}.jsonl", self.stem())
    }
}

/// Folder of every run's ledger: `_runs/`, then `<pipeline>/<run_id>/`.
pub const RUNS_PREFIX: &str = "_runs/";

/// Name of a completed run's marker in its ledger folder ([`success_key`]).
pub const SUCCESS_MARKER: &str = "_SUCCESS";

/// Name of a run's expected page count in its ledger folder ([`expected_key`]).
pub const EXPECTED_FILE: &str = "expected.json";

/// Folder of a pipeline's runs: `_runs/<pipeline>/`.
pub fn pipeline_runs_prefix(pipeline: &str) -> String {
    format!("{RUNS_PREFIX}{pipeline}/")
}

/// Folder of a run's page receipts.
pub fn receipts_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("{}{run_id}/", pipeline_runs_prefix(pipeline))
}

/// Key of a page receipt, in its shard's folder (see
/// [`RECEIPT_SHARD_PAGES`]):
/// `_runs/<pipeline>/<run_id>/receipts-<page ÷ 1000:05>/page-<page:05>.json`.
pub fn receipt_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{}page-{page:05}.json", receipt_shard_prefix(pipeline, run_id, page / RECEIPT_SHARD_PAGES))
}

/// Key of a page receipt as written before receipts had shard folders
/// (before 2026-12-06): `_runs/<pipeline>/<run_id>/page-<page:05>.json`.
/// Still read, so a run in flight across the upgrade completes and its
/// redelivered pages find their receipts ([`crate::ledger`]).
pub fn legacy_receipt_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{}page-{page:05}.json", receipts_prefix(pipeline, run_id))
}

/// Pages per receipt shard: 1,000, the most keys one S3 `ListObjectsV2`
/// call returns, so one LIST call reads a shard's folder.
pub const RECEIPT_SHARD_PAGES: u32 = 1_000;

/// Folder of the receipts of shard `shard` (pages `1000·shard ..
/// 1000·shard + 999`): `_runs/<pipeline>/<run_id>/receipts-<shard:05>/`.
///
/// Its own folder, so listing it reads only its receipts: on S3 a prefix
/// LIST costs the same either way, but a local lake is a folder of files,
/// where listing a prefix of a folder reads the whole folder (with every
/// receipt of a 10,000-page run in one folder, each page's LIST read
/// 10,000 names: the local runtime slowed as a run grew).
pub fn receipt_shard_prefix(pipeline: &str, run_id: &RunId, shard: u32) -> String {
    format!("{}receipts-{shard:05}/", receipts_prefix(pipeline, run_id))
}

/// Prefix of the receipts written before receipts had shard folders
/// ([`legacy_receipt_key`]): `_runs/<pipeline>/<run_id>/page-`.
pub fn legacy_receipts_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("{}page-", receipts_prefix(pipeline, run_id))
}

/// Prefix of shard `shard`'s receipts of the earlier layout:
/// `_runs/<pipeline>/<run_id>/page-<shard:02>`. Below page 100,000 it
/// matches exactly the shard's; past it, also longer page numbers that
/// begin with the same digits, so readers keep the keys whose
/// [`receipt_page`] is in the shard.
pub fn legacy_receipt_shard_prefix(pipeline: &str, run_id: &RunId, shard: u32) -> String {
    format!("{}{shard:02}", legacy_receipts_prefix(pipeline, run_id))
}

/// The receipt keys among `listed` (any listing of a run's folder), one per
/// page, by page: a page with a receipt in its shard's folder and one of
/// the earlier layout ([`legacy_receipt_key`], delivered before and after
/// the upgrade) keeps the shard folder's, the later.
pub fn receipts_by_page(listed: &[String]) -> std::collections::BTreeMap<u32, &str> {
    let mut by_page = std::collections::BTreeMap::new();
    for key in listed {
        let Some(page) = receipt_page(key) else { continue };
        let in_shard_folder = |key: &str| key.rsplit('/').nth(1).is_some_and(|folder| folder.starts_with("receipts-"));
        match by_page.entry(page) {
            std::collections::btree_map::Entry::Vacant(entry) => {
                entry.insert(key.as_str());
            }
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                if in_shard_folder(key) && !in_shard_folder(entry.get()) {
                    entry.insert(key.as_str());
                }
            }
        }
    }
    by_page
}

/// The page of a receipt key (`…/page-<page>.json`, in a shard folder or
/// not), `None` for another object of the run's folder (`expected.json`, a
/// shard summary, …).
pub fn receipt_page(key: &str) -> Option<u32> {
    let name = key.rsplit('/').next()?;
    name.strip_prefix("page-")?.strip_suffix(".json")?.parse().ok()
}

/// Prefix of a run's shard summaries: `_runs/<pipeline>/<run_id>/shard-`.
pub fn shard_summaries_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("{}shard-", receipts_prefix(pipeline, run_id))
}

/// Key of the summary of receipt shard `shard` (see
/// [`RECEIPT_SHARD_PAGES`]): `_runs/<pipeline>/<run_id>/shard-<shard:05>.json`.
pub fn shard_summary_key(pipeline: &str, run_id: &RunId, shard: u32) -> String {
    format!("{}{shard:05}.json", shard_summaries_prefix(pipeline, run_id))
}

/// The shard of a shard summary key, `None` for another object.
pub fn summary_shard(key: &str) -> Option<u32> {
    let name = key.rsplit('/').next()?;
    name.strip_prefix("shard-")?.strip_suffix(".json")?.parse().ok()
}

/// Key of a dataset's schema (Persist's inferred and declared columns).
pub fn schema_key(dataset: &str) -> String {
    format!("_schema/{dataset}.json")
}

/// Key of a dataset's published Arrow schema (an Arrow IPC stream holding
/// only the schema: data, lineage and partition columns).
pub fn arrow_schema_key(dataset: &str) -> String {
    format!("_schema/{dataset}.arrow")
}

/// Key of a table's catalog entry in the local lake: the Glue `TableInput`
/// that the AWS Glue catalog would receive, as JSON
/// (`adapters::local::DirCatalog`).
pub fn catalog_key(table: &str) -> String {
    format!("_catalog/{table}.glue.json")
}

/// Folder of every pipeline's claim-check payloads.
pub const CLAIMS_PREFIX: &str = "_claims/";

/// Folder of a pipeline's claim-check payloads: `_claims/<pipeline>/`.
/// Persist reads a message's claim check only under its own pipeline's.
pub fn claims_prefix(pipeline: &str) -> String {
    format!("{CLAIMS_PREFIX}{pipeline}/")
}

/// Key of a claim-check payload written by Request.
pub fn claim_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{}{run_id}/page-{page:05}.json", claims_prefix(pipeline))
}

/// Key of a run's expected page count.
pub fn expected_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}{EXPECTED_FILE}", receipts_prefix(pipeline, run_id))
}

/// Key of a run's plan record ([`crate::ledger::Plan`]), written by the
/// Orchestrator before it sends the run's first message.
pub fn plan_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}plan.json", receipts_prefix(pipeline, run_id))
}

/// Key of a count-first run's probe record: the digest of the spec the
/// Orchestrator sent with its probe, which the probe's reply must carry.
pub fn probe_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}probe.json", receipts_prefix(pipeline, run_id))
}

/// Key of the spec a run was started with, kept by the local runtime
/// (`tributary run`) so that `tributary dlq redrive` grants Request
/// exactly what that spec would (its secret, its hosts) when it sends the
/// run's dead letters again.
pub fn run_spec_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}spec.json", receipts_prefix(pipeline, run_id))
}

/// Key of an Athena-driven run's query record: the digest of the spec the
/// Orchestrator sent with its query, which each row must carry.
pub fn query_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}query.json", receipts_prefix(pipeline, run_id))
}

/// Name of a run's replacement record in its ledger folder
/// ([`replacement_key`]).
pub const REPLACEMENT_FILE: &str = "replacement.json";

/// Key of a run's replacement record (Persist's `coalesce::Replacement`):
/// which page files each coalesced file of the run replaces, written
/// before the first of them is deleted, so a completion that dies
/// part-way is finished from it: `_runs/<pipeline>/<run_id>/replacement.json`.
pub fn replacement_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}{REPLACEMENT_FILE}", receipts_prefix(pipeline, run_id))
}

/// Folder of a run's staged coalesced files: `_runs/<pipeline>/<run_id>/coalesced/`.
/// It is outside every dataset folder (a table's location), so no reader
/// (Glue/Athena, DuckDB, DataFusion) reads a staged file as data.
pub fn staged_coalesced_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("{}coalesced/", receipts_prefix(pipeline, run_id))
}

/// Key of the staged copy of the run's coalesced file number `group` (its
/// partition folders in sorted order):
/// `_runs/<pipeline>/<run_id>/coalesced/<group:05>.parquet`.
pub fn staged_coalesced_key(pipeline: &str, run_id: &RunId, group: usize) -> String {
    format!("{}{group:05}.parquet", staged_coalesced_prefix(pipeline, run_id))
}

/// Key of a count-first run's sending checkpoint: how many of its pages the
/// Orchestrator has sent to the request queue, so a redelivered or continued
/// probe reply starts after them (`orchestrator::fanout`).
pub fn pages_sent_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}pages-sent.json", receipts_prefix(pipeline, run_id))
}

/// Key of a completed run's marker.
pub fn success_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}{SUCCESS_MARKER}", receipts_prefix(pipeline, run_id))
}

/// Key of a completed run's re-run record ([`crate::rerun::Rerun`]):
/// `_runs/<pipeline>/<run_id>/rerun.json`.
pub fn rerun_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}rerun.json", receipts_prefix(pipeline, run_id))
}

/// Prefix of one run's objects of one kind in a dataset's date folder:
/// `<kind><dataset>/dt=<run_date>/<pipeline>-<run_id>-` (`kind` being
/// `raw/` or `quarantine/`), every page's key starting with it.
pub fn run_pages_prefix(kind: &str, dataset: &str, run_date: NaiveDate, pipeline: &str, run_id: &RunId) -> String {
    format!("{kind}{}/{pipeline}-{run_id}-", data_prefix(dataset, run_date))
}

/// Key of the claim a run's table commit is guarded by
/// (`tributary_core::tables::claim_commit`).
pub fn table_commit_claim_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}iceberg-commit.json", receipts_prefix(pipeline, run_id))
}

/// Folder of a pipeline's completed-run manifests: `_manifests/<pipeline>/`.
pub fn manifests_prefix(pipeline: &str) -> String {
    format!("_manifests/{pipeline}/")
}

/// Key of a completed run's manifest.
pub fn manifest_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}{run_id}.json", manifests_prefix(pipeline))
}

/// Key of a pipeline's cursor (`crate::state`): `_state/<pipeline>.json`.
pub fn state_key(pipeline: &str) -> String {
    format!("_state/{pipeline}.json")
}

/// Folder of a run's page cursors: `_state/<pipeline>/<run_id>/`.
pub fn state_run_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("_state/{pipeline}/{run_id}/")
}

/// Key of one page's cursor: `_state/<pipeline>/<run_id>/page-<page:05>.json`.
pub fn state_page_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{}page-{page:05}.json", state_run_prefix(pipeline, run_id))
}

/// Folder of everything Iceberg keeps in the lake: the local catalog and
/// the warehouse. Hive readers of the lake skip it (a leading `_`).
pub const ICEBERG_DIR: &str = "_iceberg";

/// The local SQL catalog's SQLite file, under [`ICEBERG_DIR`].
pub const ICEBERG_CATALOG_FILE: &str = "catalog.sqlite";

/// The warehouse folder (table locations), under [`ICEBERG_DIR`].
pub const ICEBERG_WAREHOUSE_DIR: &str = "warehouse";

/// Key of the local SQL catalog: `_iceberg/catalog.sqlite`.
pub fn iceberg_catalog_key() -> String {
    format!("{ICEBERG_DIR}/{ICEBERG_CATALOG_FILE}")
}

/// Prefix of the Iceberg warehouse: `_iceberg/warehouse` (no trailing `/`;
/// on AWS, `s3://<lake>/_iceberg/warehouse`).
pub fn iceberg_warehouse_prefix() -> String {
    format!("{ICEBERG_DIR}/{ICEBERG_WAREHOUSE_DIR}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_only_on_their_inputs() {
        let run = RunId::new("20261129T060000Z").expect("valid");
        let date = NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid date");
        let key = PageKey { dataset: "customers", run_date: date, pipeline: "crm", run_id: &run, page: 3 };
        assert_eq!(key.data(), "customers/dt=2026-11-29/crm-20261129T060000Z-00003.parquet");
        assert_eq!(key.raw(), "raw/customers/dt=2026-11-29/crm-20261129T060000Z-00003.json");
        assert_eq!(key.quarantine(), "quarantine/customers/dt=2026-11-29/crm-20261129T060000Z-00003.jsonl");
        assert_eq!(key.data_part("dt=2026-11-29", 0), key.data());
        assert_eq!(
            key.data_part("day=2026-11-01/hour=07", 2),
            "customers/day=2026-11-01/hour=07/crm-20261129T060000Z-00003-002.parquet"
        );
        let other_pipeline = PageKey { pipeline: "erp", ..key };
        assert_ne!(key.data(), other_pipeline.data(), "two pipelines feeding one dataset never overwrite each other");
        assert_eq!(receipt_key("p", &run, 12), "_runs/p/20261129T060000Z/receipts-00000/page-00012.json");
        assert_eq!(catalog_key("web_events"), "_catalog/web_events.glue.json");
        assert_eq!(claim_key("crm", &run, 4), "_claims/crm/20261129T060000Z/page-00004.json");
        assert!(claim_key("crm", &run, 4).starts_with(&claims_prefix("crm")));
        assert_eq!(
            coalesced_key("customers/dt=2026-11-29", "crm", run.as_str()),
            "customers/dt=2026-11-29/crm-20261129T060000Z.parquet"
        );
        assert!(is_coalesced(&coalesced_key("c/dt=x", "crm", "r"), "crm", "r"));
        let folder = "customers/dt=2026-11-29";
        assert!(key.data().starts_with(&run_page_files_prefix(folder, "crm", run.as_str())));
        assert!(!coalesced_key(folder, "crm", run.as_str()).starts_with(&run_page_files_prefix(
            folder,
            "crm",
            run.as_str()
        )));
        assert!(!is_coalesced(&key.data(), "crm", run.as_str()), "a page file is not a coalesced one");
        let second = coalesced_bin_key(folder, "crm", run.as_str(), 1);
        assert_eq!(second, "customers/dt=2026-11-29/crm-20261129T060000Z.00001.parquet");
        assert_eq!(coalesced_bin_key(folder, "crm", run.as_str(), 0), coalesced_key(folder, "crm", run.as_str()));
        assert!(is_coalesced(&second, "crm", run.as_str()));
        assert!(!second.starts_with(&run_page_files_prefix(folder, "crm", run.as_str())));
        assert!(!is_coalesced("c/crm-r.x.parquet", "crm", "r"), "not a bin number");
        assert_eq!(manifest_key("crm", &run), "_manifests/crm/20261129T060000Z.json");
        assert_eq!(replacement_key("crm", &run), "_runs/crm/20261129T060000Z/replacement.json");
        assert_eq!(staged_coalesced_key("crm", &run, 2), "_runs/crm/20261129T060000Z/coalesced/00002.parquet");
        assert!(staged_coalesced_key("crm", &run, 2).starts_with(&staged_coalesced_prefix("crm", &run)));
        assert_eq!(receipt_page(&replacement_key("crm", &run)), None, "not a receipt");
        assert_eq!(receipt_page(&staged_coalesced_key("crm", &run, 0)), None, "not a receipt");
        assert_eq!(state_page_key("crm", &run, 2), "_state/crm/20261129T060000Z/page-00002.json");
        assert_eq!(iceberg_catalog_key(), "_iceberg/catalog.sqlite");
    }

    #[test]
    fn a_shard_prefix_lists_its_thousand_receipts() {
        let run = RunId::new("r").expect("valid");
        for page in [0, 999, 1_000, 3_042, 9_999, 10_000, 99_999, 100_000, 123_456, 1_000_000, u32::MAX] {
            let key = receipt_key("p", &run, page);
            assert_eq!(receipt_page(&key), Some(page));
            let shard = page / RECEIPT_SHARD_PAGES;
            assert!(key.starts_with(&receipt_shard_prefix("p", &run, shard)), "{key} in shard {shard}");
            assert!(!key.starts_with(&receipt_shard_prefix("p", &run, shard + 1)));
            assert!(shard == 0 || !key.starts_with(&receipt_shard_prefix("p", &run, shard - 1)));
            let legacy = legacy_receipt_key("p", &run, page);
            assert_eq!(receipt_page(&legacy), Some(page), "a receipt of the earlier layout is still read");
            assert!(legacy.starts_with(&legacy_receipts_prefix("p", &run)));
            assert!(!key.starts_with(&legacy_receipts_prefix("p", &run)), "{key} is not listed as an earlier one");
        }
        assert_eq!(receipt_shard_prefix("p", &run, 3), "_runs/p/r/receipts-00003/");
        assert_eq!(receipt_key("p", &run, 3_042), "_runs/p/r/receipts-00003/page-03042.json");
        assert_eq!(legacy_receipt_key("p", &run, 3_042), "_runs/p/r/page-03042.json");
        assert!(!receipt_key("p", &run, 3).starts_with(&shard_summaries_prefix("p", &run)));
        assert!(legacy_receipt_key("p", &run, 3_042).starts_with(&legacy_receipt_shard_prefix("p", &run, 3)));
        let listed: Vec<String> = vec![
            legacy_receipt_key("p", &run, 1),
            receipt_key("p", &run, 1),
            legacy_receipt_key("p", &run, 2),
            expected_key("p", &run),
            receipt_key("p", &run, 0),
        ];
        let by_page: Vec<(u32, &str)> = receipts_by_page(&listed).into_iter().collect();
        let (zero, one, two) = (receipt_key("p", &run, 0), receipt_key("p", &run, 1), legacy_receipt_key("p", &run, 2));
        assert_eq!(
            by_page,
            vec![(0, zero.as_str()), (1, one.as_str()), (2, two.as_str())],
            "one per page, shard folder's first"
        );
        let reversed: Vec<String> = listed.iter().rev().cloned().collect();
        assert_eq!(receipts_by_page(&reversed).get(&1).copied(), Some(one.as_str()), "whatever the listing's order");
        assert_eq!(shard_summary_key("p", &run, 3), "_runs/p/r/shard-00003.json");
        assert_eq!(summary_shard(&shard_summary_key("p", &run, 3)), Some(3));
        assert!(shard_summary_key("p", &run, 3).starts_with(&shard_summaries_prefix("p", &run)));
        assert_eq!(receipt_page(&expected_key("p", &run)), None);
        assert_eq!(receipt_page(&shard_summary_key("p", &run, 3)), None);
        assert_eq!(summary_shard(&receipt_key("p", &run, 3)), None);
    }
}
