//! What the handler is given: its settings ([`PersistConfig`]) and its
//! ports ([`Deps`]). The Lambda's `main.rs` and the CLI's local runtime
//! build them; the handler only uses them.

use tributary_core::batch::DeadLetterTarget;
use tributary_core::catalog::Catalog;
use tributary_core::metrics::MetricsTarget;
use tributary_core::ports::{ObjectStore, QueueSender, TopicPublisher};
use tributary_core::tables::TableCommitter;
use tributary_core::tenant::Tenants;

use crate::convert::{PageLimits, WriterConfig};

/// Persist's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistConfig {
    /// Parquet writer settings.
    pub writer: WriterConfig,
    /// The most one page may hold: bytes after decompression
    /// (`MAX_PAGE_BYTES`, default 256 MiB), records (default 1,000,000),
    /// and its dataset's columns (`MAX_COLUMNS`, default 1,000); see
    /// [`PageLimits`].
    pub limits: PageLimits,
    /// Records of a batch handled at once (default 2).
    pub concurrency: usize,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// Where the EMF metrics of each page go (records persisted and
    /// quarantined, Parquet bytes).
    pub metrics: MetricsTarget,
    /// Write a page of a run already completed (its receipt and
    /// `_SUCCESS` exist) again instead of taking it as a duplicate
    /// delivery: `tributary replay` sets it, then coalesces the run again
    /// ([`coalesce::recoalesce_run`](crate::coalesce::recoalesce_run)). Default false.
    pub rewrite_completed_runs: bool,
    /// Who may send, and which pipelines and datasets each sender owns
    /// (`TENANTS`, `STACK_SENDERS`); the default, [`Tenants::Single`],
    /// trusts every sender the queue admits. See
    /// [`tributary_core::tenant`].
    pub tenants: Tenants,
}

impl Default for PersistConfig {
    fn default() -> Self {
        Self {
            writer: WriterConfig::default(),
            limits: PageLimits::default(),
            concurrency: 2,
            dead_letter: None,
            metrics: MetricsTarget::Off,
            rewrite_completed_runs: false,
            tenants: Tenants::Single,
        }
    }
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// The lake.
    pub store: &'a dyn ObjectStore,
    /// Sends dead letters with their reason.
    pub queue: &'a dyn QueueSender,
    /// The run-events topic and its publisher, to announce runs this page
    /// completes (`None`: completion is recorded in the lake only).
    pub run_events: Option<(&'a dyn TopicPublisher, &'a str)>,
    /// The table catalog each dataset's table definition goes to when its
    /// schema changes (the Glue Data Catalog on AWS; `None`: the published
    /// Arrow schema in the lake only).
    pub catalog: Option<&'a dyn Catalog>,
    /// Commits the runs of datasets with `target.table_format: iceberg` to
    /// their tables at completion (`None`: pages of such datasets fail
    /// permanently, naming `target.table_format`; they are never written
    /// as plain Parquet).
    pub tables: Option<&'a dyn TableCommitter>,
    /// Settings.
    pub config: &'a PersistConfig,
}
