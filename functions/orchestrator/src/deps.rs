//! What the handler is given: where it sends things ([`OrchestratorConfig`]) and its ports ([`Deps`]).
//! The Lambda's `main.rs` and the CLI's local runtime build them.

use tributary_core::batch::DeadLetterTarget;

use crate::fanout::Fanout;
use tributary_core::ports::QueueSender;

/// Where the Orchestrator sends things (queue URLs on AWS, names locally).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrchestratorConfig {
    /// Request's queue (`REQUEST_QUEUE_URL`).
    pub request_queue: String,
    /// Persist's queue, named as `reply_to` of record requests
    /// (`PERSIST_QUEUE_URL`).
    pub persist_queue: String,
    /// This function's own queue, named as `reply_to` of probes
    /// (`ORCHESTRATOR_QUEUE_URL`).
    pub orchestrator_queue: String,
    /// The Athena function's queue, for the athena strategy's query
    /// (`ATHENA_QUEUE_URL`).
    pub athena_queue: String,
    /// The query-results topic, named as `reply_to` of queries; it fans out
    /// to the orchestrator queue (`QUERY_RESULTS_TOPIC_ARN`).
    pub query_results_topic: String,
    /// Where queue records that fail for good go, with the reason
    /// (`DLQ_URL`, `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive
    /// policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// How a count-first run's pages are sent: calls in flight, the page
    /// budget of one invocation, the time kept before the deadline
    /// ([`crate::fanout`]; `Fanout::default()` in the Lambda).
    pub fanout: Fanout,
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Sends the planned messages.
    pub queue: &'a dyn QueueSender,
    /// The run ledger, for the expected page count (`None`: no ledger).
    pub ledger: Option<tributary_core::ledger::RunLedger<'a>>,
    /// Queue addresses.
    pub config: &'a OrchestratorConfig,
}
