//! The per-message function: a query run ([`run_query`]), polled with backoff until the invocation's
//! deadline, its rows published in batches (a continuation sent when time runs out), and an SQS
//! batch of query messages ([`handle_sqs`]).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use contracts::{Destination, QueryContinuation, QueryMessage, QueryRow, V1};
use std::collections::{BTreeMap, BTreeSet};
use tokio::time::Instant;
use tributary_core::batch::{self, RecordMeta};
use tributary_core::ports::{PortError, Query, QueryState, ResultPage, TopicMessage};

use crate::deps::Deps;
use crate::error::AthenaError;

/// What one invocation did with a query message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Rows published by this invocation.
    pub rows_published: u64,
    /// The continuation re-enqueued, if the query is not done.
    pub continued: Option<QueryContinuation>,
}

/// Handles an SQS batch of `QueryMessage`s, one at a time, each bounded by
/// `deadline` (the invocation's).
pub async fn handle_sqs(event: &SqsEvent, deadline: Instant, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "athena"));
    batch::for_each_message(event, 1, dead_letters, |message: QueryMessage, _meta: RecordMeta| async move {
        run_query(message, deadline, deps).await.map(|_| ())
    })
    .await
}

/// Runs (or continues) one query and publishes its rows.
///
/// # Errors
/// [`AthenaError::QueryFailed`] with the engine's state and reason;
/// [`AthenaError::MissingColumns`] (a result without a column of the
/// message's `required_columns`, before any row is published);
/// [`AthenaError::RepeatedToken`]; [`AthenaError::Port`].
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id))]
pub async fn run_query(message: QueryMessage, deadline: Instant, deps: Deps<'_>) -> Result<Progress, AthenaError> {
    let port =
        |source| AthenaError::Port { pipeline: message.pipeline.clone(), run_id: message.run_id.to_string(), source };
    let soft_deadline = deadline.checked_sub(deps.config.safety_margin).unwrap_or_else(Instant::now);
    let (execution_id, mut token, mut next_row) = match &message.continuation {
        Some(c) => (c.execution_id.clone(), c.next_token.clone(), c.next_row),
        None => {
            let query = Query {
                sql: in_stable_order(&message.sql, &message.required_columns),
                parameters: message.parameters.clone(),
                database: message.database.clone(),
                workgroup: message.workgroup.clone(),
                output_location: message.output_location.clone(),
            };
            (deps.engine.start(&query).await.map_err(port)?, None, 0)
        }
    };
    match deps.engine.wait(&execution_id, soft_deadline).await.map_err(port)? {
        QueryState::Succeeded => {}
        QueryState::Running { state } => {
            tracing::info!(execution_id, state, "query still running; continuing in the next invocation");
            let continuation = QueryContinuation { execution_id, next_token: token, next_row };
            continue_later(&message, &continuation, deps).await.map_err(port)?;
            return Ok(Progress { rows_published: 0, continued: Some(continuation) });
        }
        QueryState::Failed { state, reason } => {
            // The order by the template's columns fails on a result that
            // lacks one: the query as written says which, as before.
            if message.continuation.is_none()
                && let Some(missing) = missing_in_query_as_written(&message, soft_deadline, deps).await
            {
                return Err(missing);
            }
            return Err(AthenaError::QueryFailed {
                pipeline: message.pipeline.clone(),
                run_id: message.run_id.to_string(),
                execution_id,
                state,
                reason,
            });
        }
    }
    let persisted = persisted_pages(&message, deps).await.map_err(port)?;
    let mut published = 0;
    loop {
        let page = deps.engine.page(&execution_id, token.as_deref()).await.map_err(port)?;
        let missing = missing_columns(&message, &page);
        if !missing.is_empty() {
            return Err(AthenaError::MissingColumns {
                pipeline: message.pipeline.clone(),
                run_id: message.run_id.to_string(),
                execution_id,
                missing,
                columns: page.columns,
            });
        }
        let rows = page.rows.len() as u64;
        if page.next_token.is_none() {
            // The run's count goes to the ledger before its last rows are
            // published, so the Persist page of the run's last request
            // completes the run (coalescing or committing its files); a
            // count recorded after every page is in would complete it
            // here, where nothing is committed.
            record_count(&message, next_row + rows, deps).await.map_err(port)?;
        }
        publish_rows(&message, &execution_id, next_row, page.rows, &persisted, deps).await.map_err(port)?;
        next_row += rows;
        published += rows;
        match page.next_token {
            None => break,
            Some(next) if token.as_deref() == Some(next.as_str()) => {
                return Err(AthenaError::RepeatedToken {
                    pipeline: message.pipeline.clone(),
                    run_id: message.run_id.to_string(),
                    execution_id,
                    token: next,
                });
            }
            Some(next) => token = Some(next),
        }
        if published >= deps.config.max_rows_per_invocation || Instant::now() >= soft_deadline {
            let continuation = QueryContinuation { execution_id, next_token: token, next_row };
            tracing::info!(rows = published, next_row, "continuing the result in the next invocation");
            continue_later(&message, &continuation, deps).await.map_err(port)?;
            return Ok(Progress { rows_published: published, continued: Some(continuation) });
        }
    }
    tracing::info!(rows = published, total_rows = next_row, "query answered");
    Ok(Progress { rows_published: published, continued: None })
}

/// `sql` with its rows in the same order each time it runs on the same
/// rows: `SELECT * FROM (sql) ORDER BY` the template's columns (`columns`,
/// the message's `required_columns`, which the rows fill in). A row's
/// index is its page's, and a re-run of a run (the documented recovery)
/// runs the query again: an order that changed between the attempts put
/// other rows under pages already persisted (a trial's `SELECT DISTINCT id`
/// came back in another order: some customers' orders stored twice,
/// others lost). Rows alike in those columns make the same call, so their
/// order among themselves does not matter. The query stands on its own
/// lines so that a trailing `--` comment stays one; a trailing `;` is
/// dropped. Unchanged without columns (a template that binds nothing).
pub fn in_stable_order(sql: &str, columns: &[String]) -> String {
    if columns.is_empty() {
        return sql.to_string();
    }
    let body = sql.trim().trim_end_matches(';').trim_end();
    let order: Vec<String> = columns.iter().map(|c| format!("\"{}\"", c.replace('"', "\"\""))).collect();
    format!("SELECT * FROM (\n{body}\n) AS tributary_rows ORDER BY {}", order.join(", "))
}

/// After the ordered query failed: the query as written, run to its first
/// result page, and [`AthenaError::MissingColumns`] when that lacks a
/// required column (the order's failure, said as the check says it);
/// `None` when it has them all, fails too, or is not done by the deadline
/// (the ordered query's own failure is then the error).
async fn missing_in_query_as_written(message: &QueryMessage, deadline: Instant, deps: Deps<'_>) -> Option<AthenaError> {
    if message.required_columns.is_empty() {
        return None;
    }
    let query = Query {
        sql: message.sql.clone(),
        parameters: message.parameters.clone(),
        database: message.database.clone(),
        workgroup: message.workgroup.clone(),
        output_location: message.output_location.clone(),
    };
    let execution_id = deps.engine.start(&query).await.ok()?;
    let QueryState::Succeeded = deps.engine.wait(&execution_id, deadline).await.ok()? else { return None };
    let page = deps.engine.page(&execution_id, None).await.ok()?;
    let missing = missing_columns(message, &page);
    (!missing.is_empty()).then(|| AthenaError::MissingColumns {
        pipeline: message.pipeline.clone(),
        run_id: message.run_id.to_string(),
        execution_id,
        missing,
        columns: page.columns,
    })
}

/// The message's `required_columns` that a result page's columns lack
/// (exact names, as the rows' keys are); none for a page that names no
/// column and has no row.
fn missing_columns(message: &QueryMessage, page: &ResultPage) -> Vec<String> {
    if page.columns.is_empty() && page.rows.is_empty() {
        return Vec::new();
    }
    message.required_columns.iter().filter(|name| !page.columns.contains(name)).cloned().collect()
}

/// The pages of the message's run that hold a receipt already (one LIST
/// of the run's receipts; none without a ledger): a re-run of a run that
/// failed part-way publishes only the rows whose page is missing, since
/// the query runs in the same order each time ([`in_stable_order`]). A
/// trial's re-run of a 2,000-customer run called the vendor 2,000 times to
/// recover one page. A page persisted while the list is read is published
/// again, and Persist takes it as the redelivery it is.
async fn persisted_pages(message: &QueryMessage, deps: Deps<'_>) -> Result<BTreeSet<u64>, PortError> {
    let Some(ledger) = deps.ledger else { return Ok(BTreeSet::new()) };
    let listed = ledger.store.list(&tributary_core::keys::receipts_prefix(&message.pipeline, &message.run_id)).await?;
    let pages: BTreeSet<u64> =
        listed.iter().filter_map(|key| tributary_core::keys::receipt_page(key)).map(u64::from).collect();
    if !pages.is_empty() {
        tracing::info!(persisted = pages.len(), "rows whose page an earlier attempt persisted are not published again");
    }
    Ok(pages)
}

/// Records in the run ledger that the run has `pages` pages, one per
/// result row (nothing without a ledger).
async fn record_count(message: &QueryMessage, pages: u64, deps: Deps<'_>) -> Result<(), PortError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    let expected = tributary_core::ledger::Expected {
        pipeline: message.pipeline.clone(),
        run_id: message.run_id.clone(),
        run_date: message.run_date,
        pages,
        truncated: None,
        records: None,
    };
    ledger.record_expected(&expected).await.map(|_| ())
}

/// Largest row message published: 262,144 bytes, body and attributes
/// together, the SNS `Publish` limit ("Amazon SNS quotas": 256 KiB) and
/// the classic SQS `MaximumMessageSize`.
pub const MAX_ROW_MESSAGE_BYTES: usize = 262_144;

/// Publishes `rows` (indexes from `first_row`) but those whose page is in
/// `persisted`, each as one `QueryRow`.
async fn publish_rows(
    message: &QueryMessage,
    execution_id: &str,
    first_row: u64,
    rows: Vec<serde_json::Map<String, serde_json::Value>>,
    persisted: &BTreeSet<u64>,
    deps: Deps<'_>,
) -> Result<(), PortError> {
    let rows: Vec<(serde_json::Map<String, serde_json::Value>, u64)> =
        rows.into_iter().zip(first_row..).filter(|(_, row_index)| !persisted.contains(row_index)).collect();
    if rows.is_empty() {
        return Ok(());
    }
    let indexes: Vec<u64> = rows.iter().map(|(_, row_index)| *row_index).collect();
    let mut bodies = rows
        .into_iter()
        .map(|(row, row_index)| {
            contracts::encode(&QueryRow {
                version: V1,
                pipeline: message.pipeline.clone(),
                run_id: message.run_id.clone(),
                run_date: message.run_date,
                row_index,
                row,
                context: message.context.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| PortError::permanent("encode row", message.pipeline.clone(), err))?;
    let attributes: BTreeMap<String, String> =
        [("pipeline".into(), message.pipeline.clone()), ("run_id".into(), message.run_id.to_string())].into();
    let attribute_bytes: usize = attributes.iter().map(|(k, v)| k.len() + "String".len() + v.len()).sum();
    // A row too wide for one message fails alone: it is dead-lettered with
    // the reason and the others are fanned out.
    let mut index = indexes.into_iter();
    let mut wide = Vec::new();
    bodies.retain(|body| {
        let row_index = index.next().unwrap_or_default();
        let keep = body.len() + attribute_bytes <= MAX_ROW_MESSAGE_BYTES;
        if !keep {
            wide.push((row_index, body.len()));
        }
        keep
    });
    for (row_index, bytes) in wide {
        dead_letter_wide_row(message, execution_id, row_index, bytes, deps).await?;
    }
    if bodies.is_empty() {
        return Ok(());
    }
    match &message.reply_to {
        Destination::Topic { topic } => {
            let messages = bodies
                .into_iter()
                .map(|body| TopicMessage { body, attributes: attributes.clone(), ..TopicMessage::default() })
                .collect();
            deps.topics.publish(topic, messages).await
        }
        Destination::Queue { queue } => deps.queue.send(queue, bodies).await,
        // A kind of destination newer than this build (the enum is
        // non-exhaustive for other teams' sake): refused, not guessed.
        other => Err(PortError::permanent_msg(
            "send the query rows",
            other.to_string(),
            "a kind of destination this build cannot send to",
        )),
    }
}

/// Sends a small dead letter for row `row_index` whose message would be
/// `bytes` long, over [`MAX_ROW_MESSAGE_BYTES`]: the row itself stays in
/// the query's results (`execution_id`), which the letter names. Without a
/// DLQ the page fails as [`PortError::TooLarge`].
async fn dead_letter_wide_row(
    message: &QueryMessage,
    execution_id: &str,
    row_index: u64,
    bytes: usize,
    deps: Deps<'_>,
) -> Result<(), PortError> {
    let Some(target) = &deps.config.dead_letter else {
        return Err(PortError::TooLarge {
            what: "query row message",
            target: format!("row {row_index} of query {execution_id}"),
            bytes,
            limit: MAX_ROW_MESSAGE_BYTES,
        });
    };
    let reason = format!(
        "row {row_index} of query {execution_id} is a message of {bytes} bytes, over the {MAX_ROW_MESSAGE_BYTES}-byte SNS/SQS limit: select fewer or narrower columns; the other rows were published"
    );
    tracing::error!(row_index, bytes, execution_id, "a query row too wide for one message is dead-lettered alone");
    let body = serde_json::json!({
        "oversize_row": {"pipeline": message.pipeline, "run_id": message.run_id, "run_date": message.run_date,
                         "row_index": row_index, "execution_id": execution_id, "bytes": bytes},
        "pipeline": message.pipeline, "run_id": message.run_id,
    });
    let attributes = [
        (batch::ATTR_ERROR, reason),
        (batch::ATTR_FUNCTION, "athena".to_string()),
        (batch::ATTR_SOURCE_QUEUE, queue_name(&deps.config.own_queue).to_string()),
        (batch::ATTR_RECEIVE_COUNT, "1".to_string()),
        (batch::ATTR_PERMANENT, "true".to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect();
    let letter = tributary_core::ports::QueueMessage { body: body.to_string(), attributes };
    deps.queue.send_messages(&target.dlq, vec![letter]).await
}

/// The queue name in a queue URL (`https://sqs…/<account>/<name>`) or name.
fn queue_name(queue: &str) -> &str {
    queue.rsplit('/').next().unwrap_or(queue)
}

async fn continue_later(
    message: &QueryMessage,
    continuation: &QueryContinuation,
    deps: Deps<'_>,
) -> Result<(), PortError> {
    let next = QueryMessage { continuation: Some(continuation.clone()), ..message.clone() };
    let body = contracts::encode(&next)
        .map_err(|err| PortError::permanent("encode continuation", deps.config.own_queue.clone(), err))?;
    deps.queue.send(&deps.config.own_queue, vec![body]).await
}
