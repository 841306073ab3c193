//! Why a trigger could not be planned ([`OrchestratorError`]), split into permanent (dead-lettered
//! with an alert) and transient (retried by SQS).

use crate::strategy::PlanError;
use contracts::spec::SpecError;
use tributary_core::batch::{BodyError, RecordError};
use tributary_core::ports::{BoxError, PortError};

/// Why an orchestration failed.
#[derive(Debug, thiserror::Error)]
pub enum OrchestratorError {
    /// The event is none of the accepted triggers.
    #[error("unrecognised orchestrator event: {0}")]
    UnknownTrigger(String),
    /// The trigger carried an invalid spec.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A field of the trigger is malformed.
    #[error("orchestrator event: `{field}` = {value}: {reason}")]
    BadField {
        /// Field path.
        field: &'static str,
        /// Value found.
        value: String,
        /// What is wrong (the source's text, if there is one).
        reason: String,
        /// The parser's error, when one refused the value.
        #[source]
        source: Option<BoxError>,
    },
    /// The strategy could not plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Sending the plan failed.
    #[error("sending planned requests failed: {0}")]
    Send(#[from] PortError),
    /// An SQS record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// A probe reply or a query row for a run the Orchestrator did not
    /// start, or with another spec than the one it sent.
    #[error(
        "{what} for run {run_id} of pipeline {pipeline}: {problem}; ignored (only answers to the Orchestrator's own probes and queries plan calls)"
    )]
    Unbound {
        /// `probe reply` or `query row`.
        what: &'static str,
        /// Pipeline in the reply.
        pipeline: String,
        /// Run id in the reply.
        run_id: String,
        /// What does not match.
        problem: &'static str,
    },
    /// A probe reply names a different pipeline than its spec.
    #[error("probe reply for pipeline {reply:?} carries the spec of pipeline {spec:?}")]
    Mismatch {
        /// Pipeline in the reply.
        reply: String,
        /// Pipeline in the echoed spec.
        spec: String,
    },
}

impl RecordError for OrchestratorError {
    /// Everything but a failed send recurs on every try.
    fn is_permanent(&self) -> bool {
        match self {
            OrchestratorError::Send(err) => !err.is_retryable(),
            _ => true,
        }
    }
}
