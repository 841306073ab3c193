//! Why a page could not be persisted ([`PersistError`]), split into
//! permanent (dead-lettered with an alert, the raw page kept) and
//! transient (retried by SQS).

use contracts::spec::SpecError;
use tributary_core::batch::{BodyError, RecordError};
use tributary_core::ports::PortError;

use crate::convert::ConvertError;

/// Why a page could not be persisted.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A name in the message cannot become part of a key.
    #[error("persist message: {0}")]
    Name(#[from] SpecError),
    /// A claim check's key that this message may not read: not under its
    /// own pipeline's `_claims/<pipeline>/` (another pipeline's claims,
    /// another dataset's `raw/` page, an absolute or empty key), or with a
    /// `.`, `..` or empty segment.
    #[error(
        "payload.key {key:?} {problem}: a claim check is read only under {prefix} (the message's own pipeline) or \
         as the page's own raw copy {raw}"
    )]
    ClaimKey {
        /// The key, as the message has it.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
        /// `_claims/<pipeline>/` of the message's pipeline.
        prefix: String,
        /// The page's own raw copy (what a replayed raw envelope names).
        raw: String,
    },
    /// A claim-check object could not be read as a JSON array.
    #[error("claim-check object {key}: {problem}")]
    Claim {
        /// Object key.
        key: String,
        /// What is wrong (the source's text, if there is one).
        problem: String,
        /// The conversion task's failure (a panic), when that is what
        /// went wrong.
        #[source]
        source: Option<tokio::task::JoinError>,
    },
    /// The records could not be converted to Parquet.
    #[error("dataset {dataset} page {page}: {source}")]
    Convert {
        /// Dataset.
        dataset: String,
        /// Page index.
        page: u32,
        /// Conversion failure.
        source: ConvertError,
    },
    /// The page asks for another partition layout than the dataset has.
    #[error("dataset {dataset}: {problem}")]
    Layout {
        /// Dataset.
        dataset: String,
        /// Both layouts, and what to do.
        problem: String,
    },
    /// The dataset's table format has no committer in this Persist.
    #[error(
        "dataset {dataset}: target.table_format is iceberg, but this Persist has no Iceberg table committer; the \
         page is not written (never as plain Parquet)"
    )]
    TableFormat {
        /// Dataset.
        dataset: String,
    },
    /// A page of a completed run with other records than the ones
    /// persisted: a new fetch of the run (a re-run of the same scheduled
    /// time), not a redelivery. A completed run's files were coalesced or
    /// committed to its table; one page cannot rewrite them.
    #[error(
        "run {run_id} of pipeline {pipeline} is complete, and page {page} now holds other records than the ones \
         persisted (a new fetch of a completed run, not a redelivery); a completed run is not rewritten by a new \
         fetch: start a new run (another scheduled time), or re-derive this one from its raw pages (tributary replay)"
    )]
    CompletedRun {
        /// Pipeline.
        pipeline: String,
        /// Run id.
        run_id: String,
        /// Page index.
        page: u32,
    },
    /// A page of a run that completed while this page was read, converted
    /// or written (a retry of the run racing its own completion), with
    /// other records than the run completed with: the vendor answered
    /// otherwise this time. The page's raw copy holds this fetch; `table`
    /// says what the run's table holds. Permanent, so it is dead-lettered
    /// with an alert rather than left as a silent difference between the
    /// raw copy and the table.
    #[error(
        "run {run_id} of pipeline {pipeline} completed while page {page} was persisted from a new fetch with other \
         records (a retry racing the run's completion): {table}; this fetch is kept as the page's raw copy \
         ({raw_key}). To load it, re-derive the run from its raw pages (tributary replay); to keep the table as it \
         is, nothing needs doing, but a replay would then load this fetch"
    )]
    CompletedWhileFetched {
        /// Pipeline.
        pipeline: String,
        /// Run id.
        run_id: String,
        /// Page index.
        page: u32,
        /// What the run's table holds of the page.
        table: String,
        /// The page's raw copy (this fetch).
        raw_key: String,
    },
    /// The sender is not authenticated, or names a pipeline or dataset it
    /// does not own (see `tributary_core::tenant`).
    #[error("refused: {0}")]
    Tenant(#[from] tributary_core::tenant::TenantError),
    /// A page of a run no Orchestrator planned, from a tenant that may not
    /// open runs itself.
    #[error(
        "run {run_id} of pipeline {pipeline} was not planned (no plan record _runs/{pipeline}/{run_id}/plan.json):          a page of tenant {tenant} is taken only for a run the Orchestrator started, unless TENANTS gives the          tenant `opens_runs: true`"
    )]
    Unplanned {
        /// Pipeline.
        pipeline: String,
        /// Run id.
        run_id: String,
        /// The tenant the page acts for.
        tenant: String,
    },
    /// The lake refused a read or write.
    #[error(transparent)]
    Store(#[from] PortError),
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A stream event or checkpoint that cannot be read (see
    /// [`crate::stream`]).
    #[error("stream batch: {field}: {problem}")]
    Stream {
        /// The field (`Records[3].eventID`) or checkpoint key.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl RecordError for PersistError {
    /// Invalid names, unreadable claim checks, missing objects and
    /// conversion failures recur on every try; store hiccups do not.
    fn is_permanent(&self) -> bool {
        match self {
            PersistError::Store(err) => !err.is_retryable(),
            PersistError::Name(_)
            | PersistError::ClaimKey { .. }
            | PersistError::Claim { .. }
            | PersistError::Convert { .. }
            | PersistError::Layout { .. }
            | PersistError::TableFormat { .. }
            | PersistError::CompletedRun { .. }
            | PersistError::CompletedWhileFetched { .. }
            | PersistError::Tenant(_)
            | PersistError::Unplanned { .. }
            | PersistError::Body(_)
            | PersistError::Stream { .. } => true,
        }
    }
}

/// A failure of the function's temporary folder (transient: the next try
/// may have the disk space).
pub(crate) fn local_error(operation: &'static str, err: std::io::Error) -> PersistError {
    PersistError::Store(PortError::transient(operation, std::env::temp_dir().display().to_string(), err))
}

/// A value that could not be encoded or decoded as JSON at `key`
/// (permanent).
pub(crate) fn encode_error(operation: &'static str, key: &str, err: serde_json::Error) -> PersistError {
    PersistError::Store(PortError::permanent(operation, key.to_string(), err))
}
