//! The per-message functions: dead letters into alerts ([`handle_sqs`], [`alert_for`]), grouped so a
//! burst is one alert, redacted ([`redacted_body`]), formatted for SMS and e-mail ([`sms_text`],
//! [`email_text`]) and published ([`publish`]); the freshness check ([`check_freshness`]).

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use contracts::AlertExample;
use contracts::{Alert, V1};
use serde_json::Value;
use tributary_core::batch::{self, RecordMeta, decode_body, queue_name_of_arn};
use tributary_core::ports::{PortError, TopicMessage, sanitize_subject};
use tributary_core::topology::{function_for_dead_letter_queue, function_for_queue};

use crate::deps::{Deps, FreshnessDeps};
use crate::error::EventError;

/// Body bytes quoted in an alert (1 KiB).
pub const EXCERPT_BYTES: usize = 1024;

/// Longest pipeline or run name quoted from a body (a body may carry
/// anything there; the alert must stay far below SNS's 256 KiB).
pub const NAME_BYTES: usize = 256;

/// Error text quoted in an alert (1 KiB).
pub const REASON_BYTES: usize = 1024;

/// The freshness check's trigger, sent by its own schedule at the
/// pipeline's deadline: `{"freshness_check": {"pipeline": "customers",
/// "deadline_utc": "07:30"}}`, as the whole event or as an EventBridge
/// Scheduler event's `detail`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreshnessCheck {
    /// Pipeline to check.
    pub pipeline: String,
    /// Its deadline (UTC, `HH:MM`), quoted in the alert.
    pub deadline_utc: String,
}

/// Alerts when `check.pipeline` has no run of `date` completed (no
/// manifest in the lake's run ledger). Returns the alert, if one was sent.
///
/// # Errors
/// [`PortError`] from the lake or the topic (the schedule's retry policy
/// runs the check again).
pub async fn check_freshness(
    check: &FreshnessCheck,
    date: chrono::NaiveDate,
    deps: FreshnessDeps<'_>,
) -> Result<Option<Alert>, PortError> {
    let completed = tributary_core::ledger::completed_runs(deps.store, &check.pipeline, date).await?;
    if !completed.is_empty() {
        tracing::info!(pipeline = %check.pipeline, %date, runs = completed.len(), "fresh: a run of the day completed");
        return Ok(None);
    }
    let reason = format!("no run of {date} completed by the deadline {} UTC", check.deadline_utc);
    let alert = Alert {
        version: V1,
        pipeline: Some(check.pipeline.clone()),
        run_id: None,
        page: None,
        function: "freshness".into(),
        source_queue: String::new(),
        message_id: format!("freshness-{}-{date}", check.pipeline),
        receive_count: 0,
        reason: Some(reason.clone()),
        summary: format!("pipeline {}: {reason}; dashboards reading it are stale", check.pipeline),
        body_excerpt: String::new(),
        body_bytes: 0,
        count: 1,
        first_seen: None,
        examples: Vec::new(),
    };
    publish(&alert, Deps { topics: deps.topics, config: deps.config, store: None }).await?;
    Ok(Some(alert))
}

/// What Notify was invoked with.
#[derive(Debug)]
pub enum NotifyEvent {
    /// Dead letters from a DLQ.
    DeadLetters(SqsEvent),
    /// A scheduled freshness check, for the date of the schedule's time.
    Freshness {
        /// The check.
        check: FreshnessCheck,
        /// The day whose run must be complete.
        date: chrono::NaiveDate,
    },
}

/// Classifies an invocation: an SQS batch (`Records`), or a freshness check
/// (`freshness_check` as the whole event, or in a scheduler event's
/// `detail`, dated by its `time`; else by `now`).
///
/// # Errors
/// [`EventError`] naming the field when the event is neither, or the check
/// is malformed.
pub fn parse_event(event: Value, now: chrono::DateTime<chrono::Utc>) -> Result<NotifyEvent, EventError> {
    if event.get("Records").is_some() {
        return serde_json::from_value(event).map(NotifyEvent::DeadLetters).map_err(EventError::Records);
    }
    let date = event
        .get("time")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(|| now.date_naive(), |t| t.with_timezone(&chrono::Utc).date_naive());
    let check = event.get("freshness_check").or_else(|| event.pointer("/detail/freshness_check"));
    match check {
        Some(check) => serde_json::from_value(check.clone())
            .map(|check| NotifyEvent::Freshness { check, date })
            .map_err(EventError::FreshnessCheck),
        None => Err(EventError::Unrecognised {
            fields: event.as_object().map(|map| map.keys().cloned().collect()).unwrap_or_default(),
        }),
    }
}

/// Examples quoted in a grouped alert.
pub const EXAMPLES: usize = 3;

/// Longest SMS text (SNS sends longer texts as several messages).
pub const SMS_MAX_CHARS: usize = 140;

/// Handles a batch of dead letters: archives each one whole in the lake
/// (`deps.store`), then publishes one alert per (pipeline, run,
/// function). `batchItemFailures` lists the records that could not be
/// archived (they are not alerted yet: SQS redelivers them, so a letter is
/// never deleted from its DLQ before it is kept) and every record of a
/// group whose alert could not be published.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    let mut groups: Vec<(Alert, Vec<String>)> = Vec::new();
    let mut response = SqsBatchResponse::default();
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for record in &event.records {
        let meta = RecordMeta::of(record);
        if let Some(completed) = run_completed(record) {
            // A run-completed event (the run-events topic's subscription),
            // not a dead letter: alerted when it changed its dataset's
            // columns, never archived.
            if let Some(alert) = schema_alert(&completed, &meta) {
                groups.push((alert, vec![meta.message_id.clone()]));
            }
            if let Some(alert) = duplicated_alert(&completed, &meta) {
                groups.push((alert, vec![meta.message_id.clone()]));
            }
            if let Some(alert) = truncated_alert(&completed, &meta) {
                groups.push((alert, vec![meta.message_id]));
            }
            continue;
        }
        let alert = match dropped_batch_of(record) {
            Some(dropped) => {
                let pipeline = crate::stream::stream_pipeline(deps.store, &dropped.stream).await;
                stream_batch_alert(record, &meta, &dropped, pipeline)
            }
            None => alert_for(record, &meta),
        };
        if let Some(store) = deps.store {
            let letter = dead_letter_of(record, &meta, &alert, &now);
            if let Err(err) = tributary_core::dead_letters::archive(store, &letter).await {
                tracing::error!(message_id = %meta.message_id, error = %err, "could not archive the dead letter; SQS will redeliver it");
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = meta.message_id;
                response.batch_item_failures.push(failure);
                continue;
            }
        }
        let key = |a: &Alert| (a.pipeline.clone(), a.run_id.clone(), a.function.clone());
        match groups.iter_mut().find(|(group, _)| key(group) == key(&alert)) {
            Some((group, ids)) => {
                merge(group, alert);
                ids.push(meta.message_id);
            }
            None => groups.push((alert, vec![meta.message_id])),
        }
    }
    for (alert, ids) in groups {
        if alert.function != SCHEMA_FUNCTION {
            let mut emf =
                tributary_core::metrics::Metrics::new(&alert.function, alert.pipeline.as_deref().unwrap_or("unknown"));
            emf.count(tributary_core::metrics::DEAD_LETTERS, u64::from(alert.count));
            emf.count(tributary_core::metrics::RUNS_FAILED, 1);
            if let Some(run_id) = &alert.run_id {
                emf.property("run_id", Value::String(run_id.clone()));
            }
            emf.flush_to(&deps.config.metrics);
        }
        // A run-completed alert is sent once per run: a completion retried,
        // or two pages completing the run at once, announce it again
        // (at-least-once), and a trial got the same alert twice.
        let once = run_alert_marker(&alert);
        if let (Some(store), Some(marker)) = (deps.store, &once) {
            match store.get(marker).await {
                Ok(_) => {
                    tracing::info!(marker, "this run's alert was sent already");
                    continue;
                }
                Err(tributary_core::ports::PortError::NotFound { .. }) => {}
                Err(err) => tracing::warn!(marker, error = %err, "could not read the alert's marker; sending it"),
            }
        }
        if let Err(err) = publish(&alert, deps).await {
            tracing::error!(error = %err, messages = ids.len(), "could not publish the alert; SQS will redeliver its dead letters");
            for id in ids {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                response.batch_item_failures.push(failure);
            }
        } else if let (Some(store), Some(marker)) = (deps.store, &once)
            && let Err(err) = store.put(marker, bytes::Bytes::new()).await
        {
            tracing::warn!(marker, error = %err, "could not mark the run's alert as sent");
        }
    }
    response
}

/// The lake key marking that a run-completed alert (schema change, records
/// twice, a truncated run) was sent:
/// `_runs/<pipeline>/<run_id>/alerted-<function>`; `None` for a dead
/// letters' alert, which is one per batch of letters.
fn run_alert_marker(alert: &Alert) -> Option<String> {
    if ![SCHEMA_FUNCTION, DUPLICATED_FUNCTION, TRUNCATED_FUNCTION].contains(&alert.function.as_str()) {
        return None;
    }
    let (pipeline, run_id) = (alert.pipeline.as_ref()?, alert.run_id.as_ref()?);
    let run_id = contracts::RunId::new(run_id.as_str()).ok()?;
    Some(format!("{}{run_id}/alerted-{}", tributary_core::keys::pipeline_runs_prefix(pipeline), alert.function))
}

/// The [`contracts::RunCompleted`] a record carries (raw, or in an SNS
/// envelope), if it is one.
pub fn run_completed(record: &SqsMessage) -> Option<contracts::RunCompleted> {
    let (value, _) = decode_body(record.body.as_deref()?).ok()?;
    serde_json::from_value(value).ok()
}

/// Function name of a schema-change alert.
pub const SCHEMA_FUNCTION: &str = "schema";

/// The alert for a run that changed its dataset's columns
/// (`target.on_schema_change`: `alert`, the default, or `freeze`); `None`
/// for a run that changed none, or under `evolve`. One alert per run and
/// dataset: a change is made (or refused) by the run that meets it first.
pub fn schema_alert(event: &contracts::RunCompleted, meta: &RecordMeta) -> Option<Alert> {
    if event.schema_changes.is_empty() || event.on_schema_change == contracts::SchemaChange::Evolve {
        return None;
    }
    let changes = event.schema_changes.join("; ");
    let what = match event.on_schema_change {
        contracts::SchemaChange::Freeze => {
            "would have changed its dataset's columns, so the records that needed it were quarantined \
             (target.on_schema_change: freeze)"
        }
        _ => {
            "changed its dataset's columns (target.on_schema_change: alert; queries and joins on these columns may need a look)"
        }
    };
    let summary = format!("run {} of pipeline {} {what}: {}", event.run_id, event.pipeline, truncate(&changes, 600));
    Some(run_alert(event, meta, SCHEMA_FUNCTION, &changes, summary))
}

/// An alert about a completed run as a whole (no page, no body): its
/// `reason` cut to 1,024 characters.
fn run_alert(
    event: &contracts::RunCompleted,
    meta: &RecordMeta,
    function: &str,
    reason: &str,
    summary: String,
) -> Alert {
    Alert {
        version: V1,
        pipeline: Some(event.pipeline.clone()),
        run_id: Some(event.run_id.to_string()),
        page: None,
        function: function.into(),
        source_queue: meta.source_queue.clone(),
        message_id: meta.message_id.clone(),
        receive_count: meta.receive_count,
        reason: Some(truncate(reason, 1024)),
        summary,
        body_excerpt: String::new(),
        body_bytes: 0,
        count: 1,
        first_seen: None,
        examples: Vec::new(),
    }
}

/// Function name of the alert for a run holding records twice.
pub const DUPLICATED_FUNCTION: &str = "duplicated";

/// The alert for a completed run whose pages hold records more than once
/// ([`contracts::RunCompleted::duplicated`]: a vendor serving a page again,
/// or more records than it announced); `None` for any other run.
pub fn duplicated_alert(event: &contracts::RunCompleted, meta: &RecordMeta) -> Option<Alert> {
    let reason = event.duplicated.as_ref()?;
    Some(completed_alert(event, meta, DUPLICATED_FUNCTION, "holds records twice, or misses some", reason))
}

/// Function name of the alert for a run that stopped before the
/// vendor's data ended.
pub const TRUNCATED_FUNCTION: &str = "truncated";

/// The alert for a completed run that holds less than the vendor offers
/// ([`contracts::RunCompleted::truncated`]: `strategy.max_pages` reached
/// with a next page offered, a vendor's cursor that cycled, pages shorter
/// than the page size asked); `None` for any other run. Such a run's exit
/// code and `status` said so before; on AWS nobody reads either (a trial).
pub fn truncated_alert(event: &contracts::RunCompleted, meta: &RecordMeta) -> Option<Alert> {
    let reason = event.truncated.as_ref()?;
    let what = "holds less than the vendor offers (records past it were not fetched)";
    Some(completed_alert(event, meta, TRUNCATED_FUNCTION, what, reason))
}

/// The alert `function` for a completed run: `run R of pipeline P <what>:
/// <reason>` (the reason cut at 600 bytes in the summary).
fn completed_alert(
    event: &contracts::RunCompleted,
    meta: &RecordMeta,
    function: &str,
    what: &str,
    reason: &str,
) -> Alert {
    let summary = format!("run {} of pipeline {} {what}: {}", event.run_id, event.pipeline, truncate(reason, 600));
    run_alert(event, meta, function, reason, summary)
}

/// Adds `other` (a dead letter of the same pipeline, run and function) to
/// the group `alert`: the count, the earliest first-seen time, an example
/// while fewer than [`EXAMPLES`] are kept.
fn merge(alert: &mut Alert, other: Alert) {
    alert.count += other.count;
    alert.first_seen = match (alert.first_seen.take(), other.first_seen) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    for example in other.examples {
        if alert.examples.len() < EXAMPLES {
            alert.examples.push(example);
        }
    }
    let what = match (&alert.pipeline, &alert.run_id) {
        (Some(p), Some(r)) => format!("run {r} of pipeline {p}"),
        (Some(p), None) => format!("pipeline {p}"),
        _ => "messages that name no pipeline".to_string(),
    };
    let first = alert.examples.first().and_then(|e| e.reason.clone()).unwrap_or_else(|| "see the examples".into());
    if alert.function == crate::stream::STREAM_FUNCTION {
        // Each example names its dropped range; the replay steps stay.
        let steps = alert.summary.split_once("records are still in the stream").map(|(_, rest)| rest).unwrap_or("");
        alert.summary = format!(
            "{} stream batches of {what} dropped; first: {first}. The records are still in the stream{steps}",
            alert.count
        );
        return;
    }
    alert.summary = format!("{} gave up on {} messages of {what}; first: {first}", alert.function, alert.count);
}

/// The archive entry of one dead letter: the record whole, with what its
/// alert found in it (pipeline, run, page, function, reason).
pub fn dead_letter_of(
    record: &SqsMessage,
    meta: &RecordMeta,
    alert: &Alert,
    archived_at: &str,
) -> tributary_core::dead_letters::DeadLetter {
    let message_attributes = record
        .message_attributes
        .iter()
        .filter_map(|(name, value)| Some((name.clone(), value.string_value.clone()?)))
        .collect();
    let attributes = record.attributes.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
    tributary_core::dead_letters::DeadLetter {
        dlq: meta.source_queue.clone(),
        // A letter moved by a redrive policy without DeadLetterQueueSourceArn
        // came from the work queue the DLQ is named after.
        source_queue: match alert.source_queue.strip_suffix("-dlq") {
            Some(work_queue) if alert.source_queue == meta.source_queue => work_queue.to_string(),
            _ => alert.source_queue.clone(),
        },
        function: alert.function.clone(),
        message_id: meta.message_id.clone(),
        pipeline: alert.pipeline.clone(),
        run_id: alert.run_id.clone(),
        page: alert.page,
        reason: alert.reason.clone(),
        receive_count: alert.receive_count,
        sent_at: sent_time(record, chrono::SecondsFormat::Millis),
        archived_at: archived_at.to_string(),
        body: record.body.clone().unwrap_or_default(),
        message_attributes,
        attributes,
        redriven: Vec::new(),
        resolved: None,
    }
}

/// Builds the alert for one dead letter. Never fails.
pub fn alert_for(record: &SqsMessage, meta: &RecordMeta) -> Alert {
    let body = record.body.as_deref().unwrap_or("");
    // A function that dead-lettered the record itself said who, where, how
    // often and why, in message attributes.
    let attribute = |name: &str| record.message_attributes.get(name).and_then(|a| a.string_value.clone());
    let reason = attribute(batch::ATTR_ERROR).map(|r| truncate(&r, REASON_BYTES));
    // Otherwise the work queue it came from: SQS sets DeadLetterQueueSourceArn
    // on redriven messages; without it, the DLQ's own name tells.
    let source_queue = attribute(batch::ATTR_SOURCE_QUEUE)
        .or_else(|| record.attributes.get("DeadLetterQueueSourceArn").map(|arn| queue_name_of_arn(arn).to_string()))
        .unwrap_or_else(|| meta.source_queue.clone());
    let function = attribute(batch::ATTR_FUNCTION).unwrap_or_else(|| {
        match record.attributes.get("DeadLetterQueueSourceArn") {
            Some(_) => function_for_queue(&source_queue),
            None => function_for_dead_letter_queue(&meta.source_queue),
        }
        .map_or("unknown", |f| f.name())
        .to_string()
    });
    let receive_count = attribute(batch::ATTR_RECEIVE_COUNT).and_then(|n| n.parse().ok()).unwrap_or(meta.receive_count);
    let parsed = decode_body(body).ok().map(|(value, _)| value);
    // A stream mapping's on-failure record (the stream-failures queue): the
    // dropped records and how to replay them.
    if let Some(dropped) = parsed.as_ref().and_then(crate::stream::dropped_stream_batch) {
        return stream_batch_alert(record, meta, &dropped, None);
    }
    // A Lambda asynchronous invocation record (the Orchestrator's on-failure
    // destination) or an EventBridge Scheduler dead-letter event: the
    // failed trigger names the pipeline, the record or the attributes the
    // error.
    if let Some(failed) = parsed.as_ref().and_then(|value| failed_invocation(value, &attribute)) {
        return invocation_alert(record, meta, failed, body, parsed.as_ref());
    }
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(|s| truncate(s, NAME_BYTES))
    };
    let pipeline = field("pipeline");
    let run_id = field("run_id");
    let page = parsed
        .as_ref()
        .and_then(|v| v.pointer("/page/index"))
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok());
    let what = match (&pipeline, &run_id, page) {
        (Some(p), Some(r), Some(page)) => format!(
            "page {page} (the {}) of run {r} of pipeline {p}",
            tributary_core::ledger::ordinal(page.saturating_add(1))
        ),
        (Some(p), Some(r), None) => format!("run {r} of pipeline {p}"),
        (Some(p), None, _) => format!("a message of pipeline {p}"),
        _ if parsed.is_none() => "a message whose body is not JSON".to_string(),
        _ => "a message that names no pipeline".to_string(),
    };
    let summary = match &reason {
        Some(reason) => format!("{function} gave up on {what} after {receive_count} receives: {reason}"),
        None => format!(
            "{function} gave up on {what} (message {}, receive count {receive_count}); the function's logs for this message id give the reason",
            meta.message_id
        ),
    };
    let found = Found { pipeline, run_id, page, function, source_queue, receive_count, reason, summary };
    one_alert(record, meta, body, parsed.as_ref(), found)
}

/// The dropped stream batch a record describes, if it is a stream mapping's
/// on-failure record.
fn dropped_batch_of(record: &SqsMessage) -> Option<crate::stream::DroppedStreamBatch> {
    let (value, _) = decode_body(record.body.as_deref()?).ok()?;
    crate::stream::dropped_stream_batch(&value)
}

/// The alert of a stream batch a mapping gave up on: which records, why,
/// and how to replay them ([`crate::stream`]). `pipeline` is the one the
/// stream's spec names, when Notify could read it.
fn stream_batch_alert(
    record: &SqsMessage,
    meta: &RecordMeta,
    dropped: &crate::stream::DroppedStreamBatch,
    pipeline: Option<String>,
) -> Alert {
    let body = record.body.as_deref().unwrap_or("");
    let parsed = decode_body(body).ok().map(|(value, _)| value);
    let reason = dropped.reason();
    let feeds = match &pipeline {
        Some(p) => format!("pipeline {p}: "),
        None => format!(
            "no pipeline found for stream {} (no spec at {} in the lake): ",
            dropped.stream,
            crate::stream::stream_spec_key(&dropped.stream)
        ),
    };
    let summary = format!("{feeds}{reason}. {}", dropped.replay_steps());
    let found = Found {
        pipeline,
        run_id: None,
        page: None,
        function: crate::stream::STREAM_FUNCTION.to_string(),
        source_queue: meta.source_queue.clone(),
        receive_count: dropped.attempts,
        reason: Some(reason),
        summary,
    };
    one_alert(record, meta, body, parsed.as_ref(), found)
}

/// What an alert says of one dead letter, before the common fields.
struct Found {
    pipeline: Option<String>,
    run_id: Option<String>,
    page: Option<u32>,
    function: String,
    source_queue: String,
    receive_count: u32,
    reason: Option<String>,
    summary: String,
}

/// The alert of one dead letter: `found` with its id, first-seen time and
/// the redacted body excerpt.
fn one_alert(record: &SqsMessage, meta: &RecordMeta, body: &str, parsed: Option<&Value>, found: Found) -> Alert {
    let body_excerpt = truncate(&redacted_body(body, parsed), EXCERPT_BYTES);
    Alert {
        version: V1,
        pipeline: found.pipeline,
        run_id: found.run_id,
        page: found.page,
        function: found.function,
        source_queue: found.source_queue,
        message_id: meta.message_id.clone(),
        receive_count: found.receive_count,
        reason: found.reason.clone(),
        summary: found.summary,
        body_excerpt: body_excerpt.clone(),
        body_bytes: body.len(),
        count: 1,
        first_seen: sent_time(record, chrono::SecondsFormat::Secs),
        examples: vec![AlertExample {
            message_id: meta.message_id.clone(),
            page: found.page,
            receive_count: found.receive_count,
            reason: found.reason,
            body_excerpt: truncate(&body_excerpt, EXAMPLE_BYTES),
        }],
    }
}

/// The record's `SentTimestamp` as RFC 3339 UTC, at `precision`.
fn sent_time(record: &SqsMessage, precision: chrono::SecondsFormat) -> Option<String> {
    record
        .attributes
        .get("SentTimestamp")
        .and_then(|ms| ms.parse::<i64>().ok())
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(precision, true))
}

/// A trigger that failed before any queue saw it: what Notify reads from
/// a Lambda asynchronous invocation record or a scheduler dead-letter event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedInvocation {
    /// `orchestrator`, `notify` (the function that failed) or `scheduler`
    /// (the schedule could not invoke its target).
    pub function: String,
    /// Pipeline named by the trigger (`detail.pipeline`, or `pipeline` of a
    /// bare spec, or `freshness_check.pipeline`).
    pub pipeline: Option<String>,
    /// The run the trigger stood for (`time` as a run id), when it has one
    /// (a freshness check has none).
    pub run_id: Option<String>,
    /// Whether the trigger was a freshness check (Notify's own scheduled
    /// invocation, sent to scheduler-dlq by its on-failure destination or
    /// by Scheduler) rather than a run.
    pub freshness_check: bool,
    /// The error (`errorType: errorMessage`, or the scheduler's
    /// `ERROR_CODE: ERROR_MESSAGE`).
    pub reason: Option<String>,
    /// Invocation attempts.
    pub attempts: u32,
}

/// Reads a failed trigger from a dead letter's JSON body:
/// - a Lambda asynchronous invocation record (`requestContext`,
///   `requestPayload`, `responsePayload`; "Capturing records of Lambda
///   asynchronous invocations" in the Lambda developer guide), sent by the
///   Orchestrator's `OnFailure` destination;
/// - an EventBridge Scheduler dead-letter event: the target's input as the
///   body, with `ERROR_CODE` / `ERROR_MESSAGE` message attributes
///   ("Configuring a dead-letter queue" in the Scheduler user guide).
///
/// `None` for anything else (tributary's own messages).
pub fn failed_invocation(body: &Value, attribute: &dyn Fn(&str) -> Option<String>) -> Option<FailedInvocation> {
    let trigger_fields = |payload: &Value| {
        let detail = match payload.get("detail") {
            Some(Value::String(text)) => serde_json::from_str(text).ok(),
            Some(detail) => Some(detail.clone()),
            None => None,
        };
        let named = |value: Option<&Value>| {
            value.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(|s| truncate(s, NAME_BYTES))
        };
        let pipeline = named(detail.as_ref().and_then(|d| d.get("pipeline")))
            .or_else(|| named(payload.get("pipeline")))
            .or_else(|| named(payload.pointer("/freshness_check/pipeline")))
            .or_else(|| named(detail.as_ref().and_then(|d| d.pointer("/freshness_check/pipeline"))));
        let freshness_check = payload.get("freshness_check").is_some()
            || detail.as_ref().is_some_and(|d| d.get("freshness_check").is_some());
        let run_id = payload
            .get("time")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .filter(|_| !freshness_check)
            .map(|t| contracts::RunId::from_time(t.to_utc()).to_string());
        (pipeline, run_id, freshness_check)
    };
    if let (Some(context), Some(payload)) = (body.get("requestContext"), body.get("requestPayload")) {
        let function_arn = context.get("functionArn").and_then(Value::as_str).unwrap_or("");
        let name = function_arn.split(':').nth(6).unwrap_or(function_arn).to_ascii_lowercase();
        let function = ["orchestrator", "notify", "request", "persist", "athena"]
            .into_iter()
            .find(|f| name.contains(f))
            .map_or_else(|| if name.is_empty() { "unknown".to_string() } else { name.clone() }, str::to_string);
        let response = body.get("responsePayload");
        let text = |key: &str| response.and_then(|r| r.get(key)).and_then(Value::as_str).map(str::to_string);
        let condition = context.get("condition").and_then(Value::as_str).unwrap_or("failed");
        let reason = match (text("errorType"), text("errorMessage")) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message,
            (Some(kind), None) => kind,
            (None, None) => format!("{condition} (no error message in the invocation record)"),
        };
        let (pipeline, run_id, freshness_check) = trigger_fields(payload);
        let attempts = context.get("approximateInvokeCount").and_then(Value::as_u64).unwrap_or(1);
        return Some(FailedInvocation {
            function,
            pipeline,
            run_id,
            freshness_check,
            reason: Some(truncate(&reason, REASON_BYTES)),
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        });
    }
    let (code, message) = (attribute("ERROR_CODE"), attribute("ERROR_MESSAGE"));
    if code.is_none() && message.is_none() {
        return None;
    }
    let reason = [code, message].into_iter().flatten().collect::<Vec<_>>().join(": ");
    let (pipeline, run_id, freshness_check) = trigger_fields(body);
    let attempts = attribute("RETRY_ATTEMPTS").and_then(|n| n.parse::<u32>().ok()).map_or(1, |n| n + 1);
    Some(FailedInvocation {
        function: "scheduler".into(),
        pipeline,
        run_id,
        freshness_check,
        reason: Some(truncate(&reason, REASON_BYTES)),
        attempts,
    })
}

/// The alert of a failed trigger ([`failed_invocation`]).
fn invocation_alert(
    record: &SqsMessage,
    meta: &RecordMeta,
    failed: FailedInvocation,
    body: &str,
    parsed: Option<&Value>,
) -> Alert {
    let what = match (&failed.pipeline, &failed.run_id) {
        (Some(p), _) if failed.freshness_check => format!("the freshness check of pipeline {p}"),
        (Some(p), Some(r)) => format!("the trigger of run {r} of pipeline {p}"),
        (Some(p), None) => format!("a trigger of pipeline {p}"),
        _ => "a trigger that names no pipeline".to_string(),
    };
    let reason = failed.reason.clone().unwrap_or_default();
    let summary = format!("{} gave up on {what} after {} attempts: {reason}", failed.function, failed.attempts);
    let found = Found {
        pipeline: failed.pipeline,
        run_id: failed.run_id,
        page: None,
        function: failed.function,
        source_queue: meta.source_queue.clone(),
        receive_count: failed.attempts,
        reason: failed.reason,
        summary,
    };
    one_alert(record, meta, body, parsed, found)
}

/// The body with the values of credential-looking fields (`authorization`,
/// `*token*`, `*secret*`, … — [`contracts::spec::is_credential_name`]; not
/// every `*key`, which would hide a claim check's `key`) and strings that
/// are credentials by their form (`Bearer …`, a JSON Web
/// Token: [`contracts::spec::is_credential_value`]) replaced by
/// `<redacted>`, at any depth, and likewise the values of such
/// parameters in the query string of any `http(s)://` URL string
/// (`…?api_key=<redacted>`), so an alert e-mail never carries a secret
/// another team put in a header or a URL. A body that is not JSON is
/// returned as is.
pub fn redacted_body(body: &str, parsed: Option<&Value>) -> String {
    let Some(parsed) = parsed else { return body.to_string() };
    let mut value = parsed.clone();
    let mut stack = vec![&mut value];
    let mut changed = false;
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, field) in map.iter_mut() {
                    if contracts::spec::is_credential_name(key) && !field.is_object() && !field.is_array() {
                        *field = Value::String("<redacted>".into());
                        changed = true;
                    } else {
                        stack.push(field);
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::String(text) if contracts::spec::is_credential_value(text) => {
                *text = "<redacted>".into();
                changed = true;
            }
            Value::String(text) => {
                if let Some(redacted) = redacted_url_query(text) {
                    *text = redacted;
                    changed = true;
                }
            }
            _ => {}
        }
    }
    if changed { value.to_string() } else { body.to_string() }
}

/// `text` with the values of credential-named query parameters replaced by
/// `<redacted>`, when it is an `http(s)://` URL with such a parameter;
/// `None` otherwise.
fn redacted_url_query(text: &str) -> Option<String> {
    if !(text.starts_with("http://") || text.starts_with("https://")) || !text.contains('?') {
        return None;
    }
    let mut url = url::Url::parse(text).ok()?;
    let pairs: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    if !pairs.iter().any(|(name, _)| contracts::spec::is_credential_field(name)) {
        return None;
    }
    url.query_pairs_mut().clear().extend_pairs(pairs.iter().map(|(name, value)| {
        (name.as_str(), if contracts::spec::is_credential_field(name) { "<redacted>" } else { value.as_str() })
    }));
    Some(url.to_string())
}

/// Body bytes quoted per example in the e-mail text.
pub const EXAMPLE_BYTES: usize = 300;

/// Publishes one (grouped) alert: `MessageStructure=json` with the `sms`,
/// `email`/`default` texts and the [`Alert`] JSON for machine protocols; a
/// subject SNS accepts ([`sanitize_subject`]: ASCII, no line breaks, under
/// 100 characters); `pipeline`, `function`, `severity` attributes.
///
/// # Errors
/// [`PortError`] from the topic.
pub async fn publish(alert: &Alert, deps: Deps<'_>) -> Result<(), PortError> {
    // SNS refuses an empty attribute value (InvalidParameterValue), which
    // would fail the alert and poison Notify's own queue: a blank name is
    // "unknown".
    let pipeline = alert.pipeline.as_deref().filter(|p| !p.trim().is_empty()).unwrap_or("unknown");
    let function = if alert.function.trim().is_empty() { "unknown" } else { alert.function.as_str() };
    let times = if alert.count == 1 { String::new() } else { format!(" {}x", alert.count) };
    let subject = if alert.function == SCHEMA_FUNCTION {
        sanitize_subject(&format!("tributary alert: pipeline {pipeline} changed its dataset's columns"))
    } else if alert.function == crate::stream::STREAM_FUNCTION {
        sanitize_subject(&format!("tributary alert: stream records dropped{times} for pipeline {pipeline}"))
    } else {
        sanitize_subject(&format!("tributary alert: {}{times} failed for pipeline {pipeline}", alert.function))
    };
    let json = serde_json::to_string(alert)
        .map_err(|err| PortError::permanent("encode alert", deps.config.alerts_topic.clone(), err))?;
    let email = email_text(alert);
    let per_protocol = [
        ("sms", sms_text(alert)),
        ("email", email.clone()),
        ("email-json", json.clone()),
        ("sqs", json.clone()),
        ("lambda", json.clone()),
        ("http", json.clone()),
        ("https", json),
    ]
    .into_iter()
    .map(|(protocol, text)| (protocol.to_string(), text))
    .collect();
    let attributes = [
        ("pipeline".to_string(), pipeline.to_string()),
        ("function".to_string(), function.to_string()),
        ("severity".to_string(), if alert.function == SCHEMA_FUNCTION { "warning" } else { "error" }.to_string()),
    ]
    .into();
    if alert.function == SCHEMA_FUNCTION {
        tracing::warn!(pipeline, "schema change: {}", alert.summary);
    } else {
        tracing::error!(pipeline, function = %alert.function, count = alert.count, "dead letters: {}", alert.summary);
    }
    let message = TopicMessage { subject, body: email, attributes, per_protocol };
    deps.topics.publish(&deps.config.alerts_topic, vec![message]).await
}

/// The SMS text: at most [`SMS_MAX_CHARS`] characters.
pub fn sms_text(alert: &Alert) -> String {
    let pipeline = alert.pipeline.as_deref().unwrap_or("unknown pipeline");
    let run = alert.run_id.as_deref().map(|r| format!(" run {r}")).unwrap_or_default();
    let times = if alert.count == 1 { String::new() } else { format!(" {}x", alert.count) };
    let reason = alert.reason.as_deref().unwrap_or("see the e-mail");
    let text = format!("tributary: {} failed{times}, {pipeline}{run}: {reason}", alert.function);
    let mut sms: String = text.chars().take(SMS_MAX_CHARS).collect();
    if sms.len() < text.len() {
        sms.pop();
        sms.push('…');
    }
    sms
}

/// The full e-mail (and `default`) text.
pub fn email_text(alert: &Alert) -> String {
    use std::fmt::Write;
    let pipeline = alert.pipeline.as_deref().unwrap_or("(not named by the message)");
    let run = alert.run_id.as_deref().unwrap_or("(not named by the message)");
    let mut text = String::new();
    if alert.function == crate::stream::STREAM_FUNCTION {
        let _ = writeln!(text, "tributary alert: {} stream batch(es) dropped before reaching the lake\n", alert.count);
        let _ = writeln!(text, "Pipeline:    {pipeline}");
        let _ = writeln!(text, "Dropped:");
        for (i, example) in alert.examples.iter().enumerate() {
            let _ = writeln!(text, "{}. {}", i + 1, example.reason.as_deref().unwrap_or("(no range in the record)"));
        }
        let _ = writeln!(text, "\nWhat to do:\n{}", alert.summary);
        return text;
    }
    let _ = writeln!(text, "tributary alert: {} gave up on {} message(s)\n", alert.function, alert.count);
    let _ = writeln!(text, "Pipeline:    {pipeline}");
    let _ = writeln!(text, "Run:         {run}");
    let _ = writeln!(text, "Function:    {} (queue {})", alert.function, alert.source_queue);
    let _ = writeln!(text, "Dead letters: {}", alert.count);
    if let Some(first_seen) = &alert.first_seen {
        let _ = writeln!(text, "First seen:  {first_seen}");
    }
    let _ = writeln!(text, "\nFirst failures:");
    for (i, example) in alert.examples.iter().enumerate() {
        let page = example.page.map(|p| format!(", page {p}")).unwrap_or_default();
        let _ =
            writeln!(text, "{}. message {}{page}, receive count {}", i + 1, example.message_id, example.receive_count);
        let _ = writeln!(
            text,
            "   reason: {}",
            example.reason.as_deref().unwrap_or("(not recorded: moved by the redrive policy; see the logs)")
        );
        let _ = writeln!(text, "   body:   {}", example.body_excerpt);
    }
    let _ = writeln!(text, "\nWhat to do:\n{}", what_to_do(alert));
    if let (Some(p), Some(r)) = (&alert.pipeline, &alert.run_id) {
        let _ = writeln!(text, "\nThe run's log lines (CloudWatch Logs Insights, log groups /aws/lambda/<stack>-*):");
        let _ = writeln!(
            text,
            "fields @timestamp, @log, level, message, error | filter pipeline = \"{p}\" and run_id = \"{r}\" | sort @timestamp asc"
        );
    }
    text
}

/// The next step for a dead letters' alert, by its first reason: what the
/// vendor's HTTP status says to check (401/403 the credentials, 404 the
/// URL, 400/422 the request), then how the letters are sent again once the
/// cause is fixed. A trial's alerts named the failure but no next step.
fn what_to_do(alert: &Alert) -> String {
    let reason = alert.examples.iter().find_map(|e| e.reason.as_deref()).unwrap_or_default();
    let status = |code: &str| reason.contains(&format!("answered HTTP {code}"));
    let check = if status("401") || status("403") {
        "The vendor refused the credentials: check the pipeline's request.auth secret (its value, and the key's \
         permissions at the vendor). "
    } else if status("404") {
        "The vendor has nothing at that address: check request.url and the paging parameters against the vendor's \
         documentation (a vendor that answers 404 past its last page needs response.status_actions {404: empty}). "
    } else if status("400") || status("422") {
        "The vendor refused the request as written: check request.query, request.headers and request.body. "
    } else if status("429") || status("5") || reason.contains("timed out") || reason.contains("onnection") {
        "The vendor was unavailable or throttling: nothing to change if it is back. "
    } else {
        "Fix the cause the reason names. "
    };
    let pipeline = alert.pipeline.as_deref().map(|p| format!(" --pipeline {p}")).unwrap_or_default();
    format!(
        "{check}Then send the dead letters again: tributary dlq redrive --all{pipeline} (with --stack NAME on AWS), \
         or run the run's time again; tributary status shows the run."
    )
}

/// At most `max` bytes of `text`, cut on a character boundary, with `…`
/// when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_the_alert() {
        let body = r#"{"pipeline":"p","http":{"headers":{"Authorization":"Bearer SECRET123","accept":"x"},"query":{"api_key":"K3Y"}}}"#;
        let parsed: Value = serde_json::from_str(body).expect("json");
        let shown = redacted_body(body, Some(&parsed));
        assert!(!shown.contains("SECRET123") && !shown.contains("K3Y"), "{shown}");
        assert!(shown.contains("\"accept\":\"x\""), "other fields stay: {shown}");
        // A credential in a URL's query string (a spec written with one
        // before the spec check refused it, or another team's message).
        let body = r#"{"http":{"url":"http://127.0.0.1:8080/t?page=2&api_key=SUPERSECRET123"},"note":"http://x?y"}"#;
        let parsed: Value = serde_json::from_str(body).expect("json");
        let shown = redacted_body(body, Some(&parsed));
        assert!(!shown.contains("SUPERSECRET123"), "{shown}");
        assert!(shown.contains("page=2&api_key=%3Credacted%3E"), "the rest of the URL stays: {shown}");
        assert!(shown.contains("\"note\":\"http://x?y\""), "{shown}");
    }

    #[test]
    fn events_are_dead_letters_or_freshness_checks() {
        let now = chrono::Utc::now();
        let scheduled = serde_json::json!({"time": "2026-11-29T07:30:00Z",
            "freshness_check": {"pipeline": "customers", "deadline_utc": "07:30"}});
        let Ok(NotifyEvent::Freshness { check, date }) = parse_event(scheduled, now) else { panic!("freshness") };
        assert_eq!((check.pipeline.as_str(), date.to_string().as_str()), ("customers", "2026-11-29"));
        let in_detail = serde_json::json!({"source": "aws.scheduler", "time": "2026-11-30T07:30:00Z",
            "detail": {"freshness_check": {"pipeline": "p", "deadline_utc": "07:30"}}});
        assert!(matches!(parse_event(in_detail, now), Ok(NotifyEvent::Freshness { .. })));
        assert!(matches!(parse_event(serde_json::json!({"Records": []}), now), Ok(NotifyEvent::DeadLetters(_))));
        let err = parse_event(serde_json::json!({"freshness_check": {"pipeline": "p"}}), now)
            .expect_err("no deadline")
            .to_string();
        assert!(err.contains("freshness_check") && err.contains("deadline_utc"), "{err}");
        assert!(parse_event(serde_json::json!({"hello": 1}), now).is_err());
        let err = parse_event(serde_json::json!({"hello": 1}), now).expect_err("neither").to_string();
        assert!(err.contains("`Records`") && err.contains(r#"["hello"]"#), "{err}");
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        let text = "é".repeat(600); // 1200 bytes
        let cut = truncate(&text, EXCERPT_BYTES);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= EXCERPT_BYTES + '…'.len_utf8());
        assert_eq!(truncate("short", 10), "short");
    }
}
