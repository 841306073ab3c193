//! Athena: runs a `QueryMessage` through the [`QueryEngine`] port and
//! publishes the rows to `reply_to` (normally the query-results topic, which
//! fans out to the orchestrator queue).
//!
//! This is the generic query service of the design (the seed's V4). Each
//! published message is one row: `{"version":1,"pipeline","run_id","row",
//! "context"}`, with `pipeline` and `run_id` as message attributes for
//! subscription filter policies. Polling with backoff, result paging and
//! continuation for very large results live in the engine adapters and the
//! Athena-driven ingestion work.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use serde_json::json;

use shared::batch::{self, BodyError, RecordMeta};
use shared::contracts::{Destination, QueryMessage};
use shared::ports::{PortError, Query, QueryEngine, QueueSender, TopicMessage, TopicPublisher};

/// The ports the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Runs the SQL.
    pub engine: &'a dyn QueryEngine,
    /// Publishes rows to a topic.
    pub topics: &'a dyn TopicPublisher,
    /// Sends rows to a queue.
    pub queue: &'a dyn QueueSender,
}

/// Why a query message failed.
#[derive(Debug, thiserror::Error)]
pub enum AthenaError {
    /// The query failed or the rows could not be published.
    #[error("pipeline {pipeline} run {run_id}: {source}")]
    Port {
        /// Pipeline.
        pipeline: String,
        /// Run.
        run_id: String,
        /// What failed (the engine's reason for a failed query).
        source: PortError,
    },
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
}

/// Handles an SQS batch of `QueryMessage`s, one at a time.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    batch::for_each_message(event, 1, |message: QueryMessage, _meta: RecordMeta| run_query(message, deps)).await
}

/// Runs one query and publishes every row. Returns the number of rows.
///
/// # Errors
/// [`AthenaError::Port`] with the engine's reason.
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id))]
pub async fn run_query(message: QueryMessage, deps: Deps<'_>) -> Result<(), AthenaError> {
    let port =
        |source| AthenaError::Port { pipeline: message.pipeline.clone(), run_id: message.run_id.to_string(), source };
    let query =
        Query { sql: message.sql.clone(), parameters: message.parameters.clone(), database: message.database.clone() };
    let rows = deps.engine.run(&query).await.map_err(port)?;
    let bodies: Vec<String> = rows
        .rows
        .into_iter()
        .map(|row| {
            json!({"version": 1, "pipeline": message.pipeline, "run_id": message.run_id, "row": row, "context": message.context})
                .to_string()
        })
        .collect();
    tracing::info!(rows = bodies.len(), "query answered");
    let result = match &message.reply_to {
        Destination::Topic { topic } => {
            let attributes: std::collections::BTreeMap<String, String> =
                [("pipeline".into(), message.pipeline.clone()), ("run_id".into(), message.run_id.to_string())].into();
            let messages = bodies
                .into_iter()
                .map(|body| TopicMessage { subject: None, body, attributes: attributes.clone() })
                .collect();
            deps.topics.publish(topic, messages).await
        }
        Destination::Queue { queue } => deps.queue.send(queue, bodies).await,
    };
    result.map_err(port)
}
