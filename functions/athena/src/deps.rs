//! What the handler is given: its settings ([`AthenaConfig`]) and its ports ([`Deps`]).
//! The Lambda's `main.rs` and the CLI's local runtime build them.

use std::time::Duration;
use tributary_core::batch::DeadLetterTarget;
use tributary_core::ports::{QueryEngine, QueueSender, TopicPublisher};

/// The Athena function's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AthenaConfig {
    /// This function's own queue, where continuations go (`ATHENA_QUEUE_URL`).
    pub own_queue: String,
    /// Rows published per invocation at most before continuing in the next
    /// one (`MAX_ROWS_PER_INVOCATION`, default 100000).
    pub max_rows_per_invocation: u64,
    /// Time kept free before the deadline for publishing and re-enqueueing
    /// (default 30 s).
    pub safety_margin: Duration,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
}

impl AthenaConfig {
    /// Defaults with `own_queue`.
    pub fn new(own_queue: impl Into<String>) -> Self {
        Self {
            own_queue: own_queue.into(),
            max_rows_per_invocation: 100_000,
            safety_margin: Duration::from_secs(30),
            dead_letter: None,
        }
    }
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Runs the SQL.
    pub engine: &'a dyn QueryEngine,
    /// Publishes rows to a topic.
    pub topics: &'a dyn TopicPublisher,
    /// Sends rows to a queue, and continuations to our own queue.
    pub queue: &'a dyn QueueSender,
    /// The lake, for the run ledger: when the last row is published, the
    /// row count is the run's expected page count (`None`: no ledger).
    pub ledger: Option<tributary_core::ledger::RunLedger<'a>>,
    /// Settings.
    pub config: &'a AthenaConfig,
}
