//! Why a query message failed ([`AthenaError`]), split into permanent (dead-lettered with an
//! alert) and transient (retried by SQS).

use tributary_core::batch::{BodyError, RecordError};
use tributary_core::ports::PortError;

/// Why a query message failed.
#[derive(Debug, thiserror::Error)]
pub enum AthenaError {
    /// The query ended `FAILED` or `CANCELLED`.
    #[error("pipeline {pipeline} run {run_id}: query {execution_id} {state}: {reason}")]
    QueryFailed {
        /// Pipeline.
        pipeline: String,
        /// Run.
        run_id: String,
        /// Engine's execution id.
        execution_id: String,
        /// `FAILED` or `CANCELLED`.
        state: String,
        /// The engine's reason.
        reason: String,
    },
    /// The result lacks a column the message's `required_columns` names
    /// (a `{column}` placeholder of the pipeline's request template): every
    /// row would fail at its consumer, so no row is published.
    #[error(
        "pipeline {pipeline} run {run_id}: query {execution_id} answered the columns {columns:?}, without {missing:?} that \
         the request template's placeholders need (each row would fail); no row is published: select the column \
         under the placeholder's name (`SELECT id AS customer_id`), or rename the placeholder, then run again"
    )]
    MissingColumns {
        /// Pipeline.
        pipeline: String,
        /// Run.
        run_id: String,
        /// Engine's execution id.
        execution_id: String,
        /// The required columns the result lacks.
        missing: Vec<String>,
        /// The result's columns.
        columns: Vec<String>,
    },
    /// The engine returned the same page token twice.
    #[error("pipeline {pipeline} run {run_id}: query {execution_id} returned page token {token:?} twice")]
    RepeatedToken {
        /// Pipeline.
        pipeline: String,
        /// Run.
        run_id: String,
        /// Engine's execution id.
        execution_id: String,
        /// The token.
        token: String,
    },
    /// The engine, topic or queue failed.
    #[error("pipeline {pipeline} run {run_id}: {source}")]
    Port {
        /// Pipeline.
        pipeline: String,
        /// Run.
        run_id: String,
        /// What failed.
        source: PortError,
    },
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
}

impl RecordError for AthenaError {
    /// A failed query, a repeated token and an unreadable message recur on
    /// every try; engine, topic and queue hiccups do not.
    fn is_permanent(&self) -> bool {
        match self {
            AthenaError::Port { source, .. } => !source.is_retryable(),
            _ => true,
        }
    }
}
