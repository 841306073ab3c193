//! `run-completed.v1`: the announcement of a completed run.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{RunId, V1};

/// Announced on the run-events topic when a run completes, so dashboards and
/// downstream jobs can refresh (`run-completed.v1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunCompleted {
    /// Contract version, always `1`.
    pub version: V1,
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
    /// Key of the run's manifest in the lake bucket.
    pub manifest_key: String,
    /// The manifest's schema hash.
    pub schema_hash: String,
    /// Set when the run stopped before the source's data ended, saying
    /// why (`strategy.max_pages` reached with a next page offered); absent
    /// for a whole run. Consumers that need the whole source treat such a
    /// run as failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// Set when the run's pages hold records more than once, saying which
    /// pages and the likely cause: pages holding the same records (the
    /// same count, first record and last record: a vendor that ignored
    /// the page's offset and served one page again), or more records than
    /// the vendor announced (records added while the run paged shift
    /// offset pages). Absent otherwise. The dataset holds those records
    /// twice: consumers treat such a run as failed; Notify alerts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated: Option<String>,
    /// How the run changed its dataset's columns, one line per change
    /// (`added column email (string) for /email`, `added variant column
    /// contact_id__string (string): /contact_id held string values beside
    /// its int64`), sorted; absent when it changed none. With
    /// `on_schema_change: freeze` these are the changes refused (their
    /// records quarantined).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_changes: Vec<String>,
    /// The dataset's `target.on_schema_change` (absent: `alert`): Notify
    /// alerts a run with schema changes unless it is `evolve`.
    #[serde(default, skip_serializing_if = "crate::SchemaChange::is_default")]
    pub on_schema_change: crate::SchemaChange,
    /// What the run's table commit found worth a data engineer's look, one
    /// line each: a `write: merge` run's rows without a key (added as
    /// they are), versions it could not rank, `hard_delete` text it could
    /// not read, a text `order_by` that does not sort as it reads. Absent
    /// when none (and for Parquet datasets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table_notes: Vec<String>,
}
