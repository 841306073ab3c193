//! The per-message functions: a trigger parsed ([`parse_trigger`]) and handled ([`handle`]): a run
//! started (the strategy's plan recorded and sent), a probe reply or a query row turned into the
//! planned requests ([`on_probe_reply`], [`on_query_row`]), an SQS batch of them ([`handle_sqs`]).
//! A count-first run's pages are sent in checkpointed chunks within the invocation's deadline
//! ([`crate::fanout`]).

use crate::fanout::{self, PagesSent, Step};
use crate::strategy::{PageSeries, Plan, RunContext, strategy_for};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::{DateTime, NaiveDate, Utc};
use contracts::spec::PipelineSpec;
use contracts::{ProbeReply, QueryRow, RequestMode, RunId};
use serde_json::Value;
use tokio::time::Instant;
use tributary_core::batch::{self, RecordMeta};
use tributary_core::json::kind_of;
use tributary_core::ports::PortError;
use tributary_core::rerun;

use crate::deps::{Deps, OrchestratorConfig};
use crate::error::OrchestratorError;

/// A parsed trigger.
#[derive(Debug)]
pub enum Trigger {
    /// Start a run of `spec`.
    Start {
        /// The pipeline.
        spec: Box<PipelineSpec>,
        /// Run id.
        run_id: RunId,
        /// Run date.
        run_date: NaiveDate,
        /// The trigger's re-run token (its `replace` field): a completed
        /// run of this time is re-run, replacing its rows
        /// ([`tributary_core::rerun`]).
        replace: Option<String>,
    },
    /// Messages from the orchestrator queue.
    Sqs(SqsEvent),
}

/// Classifies an event. `now` dates runs whose trigger has no time.
///
/// # Errors
/// [`OrchestratorError::UnknownTrigger`] listing the keys found;
/// [`OrchestratorError::Spec`] for an invalid spec (naming the field);
/// [`OrchestratorError::BadField`] for a malformed `time` or `detail`.
pub fn parse_trigger(event: Value, now: DateTime<Utc>) -> Result<Trigger, OrchestratorError> {
    let Value::Object(map) = &event else {
        return Err(OrchestratorError::UnknownTrigger(format!("expected a JSON object, found {}", kind_of(&event))));
    };
    if is_scheduler_event(&event) {
        return scheduled_start(&event, Some(now));
    }
    if let Some(Value::Array(records)) = map.get("Records") {
        let from_sqs = records.iter().all(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:sqs"));
        if from_sqs && !records.is_empty() {
            let event: SqsEvent = serde_json::from_value(event).map_err(|err| OrchestratorError::BadField {
                field: "Records",
                value: "(SQS batch)".into(),
                reason: err.to_string(),
                source: Some(err.into()),
            })?;
            return Ok(Trigger::Sqs(event));
        }
    }
    if map.contains_key("pipeline") && map.contains_key("strategy") {
        return start(event, now);
    }
    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
    Err(OrchestratorError::UnknownTrigger(format!(
        "expected an EventBridge Scheduler event (source \"aws.scheduler\"), a pipeline spec (version, pipeline, strategy, request, target) or an SQS batch (Records from aws:sqs); found keys {keys:?}"
    )))
}

/// Whether `event` is shaped as an EventBridge Scheduler event (`source` =
/// `aws.scheduler`).
fn is_scheduler_event(event: &Value) -> bool {
    event.get("source").and_then(Value::as_str) == Some("aws.scheduler")
}

/// The run a scheduler event starts: its `detail` spec, its run id from
/// `time` (the scheduled time). `now` dates an event without `time`; `None`
/// makes `time` required (a queued trigger: a redelivery must plan the same
/// run, so the receive time cannot stand in).
fn scheduled_start(event: &Value, now: Option<DateTime<Utc>>) -> Result<Trigger, OrchestratorError> {
    let time = match (event.get("time"), now) {
        (Some(Value::String(text)), _) => DateTime::parse_from_rfc3339(text)
            .map_err(|err| OrchestratorError::BadField {
                field: "time",
                value: format!("{text:?}"),
                reason: format!("not an RFC 3339 time: {err}"),
                source: Some(err.into()),
            })?
            .with_timezone(&Utc),
        (None, Some(now)) => now,
        (other, _) => {
            return Err(OrchestratorError::BadField {
                field: "time",
                value: other.map_or("missing".into(), |v| excerpt(&v.to_string())),
                reason: "a queued run trigger needs the scheduled time (RFC 3339, e.g. 2026-11-29T06:00:00Z): the run id derives from it".into(),
                source: None,
            });
        }
    };
    let detail = match event.get("detail") {
        Some(Value::String(text)) => serde_json::from_str(text).map_err(|err| OrchestratorError::BadField {
            field: "detail",
            value: excerpt(text),
            reason: format!("a string detail must hold the pipeline spec as JSON: {err}"),
            source: Some(err.into()),
        })?,
        Some(detail @ Value::Object(_)) => detail.clone(),
        other => {
            return Err(OrchestratorError::BadField {
                field: "detail",
                value: other.map_or("missing".into(), |v| excerpt(&v.to_string())),
                reason: "must be the pipeline spec, as a JSON object or a JSON string".into(),
                source: None,
            });
        }
    };
    let replace = match event.get("replace") {
        None | Some(Value::Null) => None,
        Some(Value::String(token)) if !token.is_empty() && token.chars().count() <= rerun::MAX_TOKEN_CHARS => {
            Some(token.clone())
        }
        Some(other) => {
            return Err(OrchestratorError::BadField {
                field: "replace",
                value: excerpt(&other.to_string()),
                reason: format!(
                    "must be the re-run's token, a string of 1 to {} characters (tributary run/trigger --replace)",
                    rerun::MAX_TOKEN_CHARS
                ),
                source: None,
            });
        }
    };
    match start(detail, time)? {
        Trigger::Start { spec, run_id, run_date, .. } => Ok(Trigger::Start { spec, run_id, run_date, replace }),
        sqs => Ok(sqs),
    }
}

fn start(spec: Value, time: DateTime<Utc>) -> Result<Trigger, OrchestratorError> {
    let spec = PipelineSpec::from_value(spec)?;
    Ok(Trigger::Start {
        spec: Box::new(spec),
        run_id: RunId::from_time(time),
        run_date: time.date_naive(),
        replace: None,
    })
}

fn excerpt(text: &str) -> String {
    let mut end = text.len().min(120);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}", &text[..end])
}

/// Handles any trigger: the Lambda entry point. `deadline` is the
/// invocation's (Lambda's `Context::deadline`): a count-first run's pages
/// not sent by then are left to a continuation ([`crate::fanout`]).
///
/// Returns a small JSON summary for a started run, and the SQS partial batch
/// response (`{"batchItemFailures": [...]}`) for an SQS batch.
///
/// # Errors
/// [`OrchestratorError`] for a trigger that cannot be planned; the Lambda
/// invocation then fails, and its on-failure destination (the orchestrator
/// DLQ) gets the event for Notify.
pub async fn handle(
    event: Value,
    now: DateTime<Utc>,
    deadline: Instant,
    deps: Deps<'_>,
) -> Result<Value, OrchestratorError> {
    match parse_trigger(event, now)? {
        Trigger::Start { spec, run_id, run_date, replace } => {
            let run = run_context(deps.config, run_id, run_date);
            let sent = begin_run(&spec, &run, replace.as_deref(), deps).await?;
            Ok(serde_json::json!({
                "pipeline": spec.pipeline,
                "run_id": run.run_id,
                "run_date": run.run_date,
                "strategy": strategy_for(&spec.strategy).kind(),
                "messages_sent": sent,
            }))
        }
        Trigger::Sqs(event) => {
            let response = handle_sqs(&event, deadline, deps).await;
            Ok(serde_json::to_value(response).unwrap_or_default())
        }
    }
}

/// The run context for `run_id` with this config's queues.
pub fn run_context(config: &OrchestratorConfig, run_id: RunId, run_date: NaiveDate) -> RunContext {
    RunContext {
        run_id,
        run_date,
        persist_queue: config.persist_queue.clone(),
        request_queue: config.request_queue.clone(),
        orchestrator_queue: config.orchestrator_queue.clone(),
        athena_queue: config.athena_queue.clone(),
        query_results_topic: config.query_results_topic.clone(),
    }
}

/// Why a run of a Parquet dataset cannot be re-run replacing its rows
/// (`replace` in the Orchestrator's event, `tributary run --replace`).
pub fn no_atomic_replace(dataset: &str) -> String {
    format!(
        "dataset {dataset} is kept as Parquet folders (target.table_format: parquet), which have no atomic replace: \
         readers would see the old and new rows together; re-run only Iceberg datasets, or re-derive the run \
         with `tributary replay`"
    )
}

/// Starts a run as [`start_run`] does; with a re-run token (`replace`),
/// first reopens the run when it completed ([`tributary_core::rerun::begin`]),
/// and starts nothing when this token's re-run completed already. Without
/// one, a run that is complete (its `_SUCCESS` marker, read through the
/// lake ledger) starts nothing. Returns the messages sent.
///
/// # Errors
/// [`OrchestratorError::BadField`] naming `replace` for a dataset that is
/// not an Iceberg table (a folder of Parquet files has no atomic replace)
/// or an Orchestrator without the lake ledger; then as [`start_run`].
pub async fn begin_run(
    spec: &PipelineSpec,
    run: &RunContext,
    replace: Option<&str>,
    deps: Deps<'_>,
) -> Result<usize, OrchestratorError> {
    let Some(token) = replace else {
        // A trigger of a completed run is a redelivery (EventBridge
        // Scheduler and SQS deliver at least once) or a plain re-run of its
        // time: it starts nothing. Planned again, its pages were fetched
        // with today's cursor and refused by Persist as other records, one
        // dead letter each (a trial: an overlapping backfill filled the
        // DLQ). `replace` re-runs it.
        if let Some(ledger) = deps.ledger
            && ledger.store.get(&tributary_core::keys::success_key(&spec.pipeline, &run.run_id)).await.is_ok()
        {
            tracing::info!("the run is complete: this trigger starts nothing (a re-run of it takes `replace`)");
            return Ok(0);
        }
        return start_run(spec, run, deps).await;
    };
    let refuse =
        |reason: String| OrchestratorError::BadField { field: "replace", value: excerpt(token), reason, source: None };
    if spec.target.table_format != contracts::TableFormat::Iceberg {
        return Err(refuse(no_atomic_replace(&spec.target.dataset)));
    }
    let Some(ledger) = deps.ledger else {
        return Err(refuse("this Orchestrator keeps no run ledger in the lake to reopen the run in".into()));
    };
    match rerun::begin(ledger.store, &spec.pipeline, &run.run_id, token, Utc::now()).await? {
        rerun::Begun::Done => {
            tracing::info!(token, "this re-run of the run completed already; nothing started");
            Ok(0)
        }
        begun => {
            tracing::info!(token, ?begun, "re-run");
            start_run(spec, run, deps).await
        }
    }
}

/// Plans the start of a run and sends it. Returns the messages sent.
///
/// # Errors
/// [`OrchestratorError::Plan`] or [`OrchestratorError::Send`].
#[tracing::instrument(skip_all, fields(pipeline = %spec.pipeline, run_id = %run.run_id))]
pub async fn start_run(spec: &PipelineSpec, run: &RunContext, deps: Deps<'_>) -> Result<usize, OrchestratorError> {
    let spec = &with_incremental_start(spec, deps).await?;
    let spec = &crate::strategy::run_values::with_run_values(spec, run)
        .map_err(|problem| crate::strategy::PlanError::RunValues { pipeline: spec.pipeline.clone(), problem })?;
    let strategy = strategy_for(&spec.strategy);
    let plan = strategy.start(spec, run)?;
    tracing::info!(strategy = strategy.kind(), messages = plan.len(), "run started");
    record_plan(strategy.kind(), run, &spec.pipeline, deps).await?;
    flag_rerun(&spec.pipeline, &run.run_id, deps).await?;
    record_expected(&plan, run, &spec.pipeline, deps).await?;
    record_probes(&plan, run, &spec.pipeline, deps).await?;
    send_plan(&plan, deps).await
}

/// Records that the run was planned, before any of its messages is sent:
/// with tenants, Persist takes pages only of planned runs
/// ([`tributary_core::ledger::Plan`]).
async fn record_plan(
    strategy: &str,
    run: &RunContext,
    pipeline: &str,
    deps: Deps<'_>,
) -> Result<(), OrchestratorError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    let plan = tributary_core::ledger::Plan {
        pipeline: pipeline.to_string(),
        run_id: run.run_id.clone(),
        run_date: run.run_date,
        strategy: strategy.to_string(),
    };
    tributary_core::ledger::record_plan(ledger.store, &plan).await?;
    Ok(())
}

/// The digest a probe's context is bound by: FNV-1a 64 of its JSON text.
fn context_digest(context: &serde_json::Value) -> String {
    contracts::digest::fnv1a_hex(context.to_string().as_bytes())
}

/// Records, before a count-first run's probe or an Athena-driven run's
/// query is sent, the digest of the spec it carries: [`on_probe_reply`]
/// and [`on_query_row`] plan calls only for a reply or row that carries it
/// (a message that merely looks like one, sent by anyone who may write to
/// the orchestrator queue, plans nothing).
async fn record_probes(plan: &Plan, run: &RunContext, pipeline: &str, deps: Deps<'_>) -> Result<(), OrchestratorError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    let probes = plan.requests.iter().filter_map(|request| match &request.mode {
        RequestMode::Probe { context, .. } => Some((tributary_core::keys::probe_key(pipeline, &run.run_id), context)),
        RequestMode::Records { .. } => None,
    });
    let queries =
        plan.queries.iter().map(|query| (tributary_core::keys::query_key(pipeline, &run.run_id), &query.context));
    for (key, context) in probes.chain(queries) {
        let body = serde_json::json!({"context_digest": context_digest(context)}).to_string();
        ledger.store.put(&key, body.into_bytes().into()).await?;
    }
    Ok(())
}

/// What an answer to the Orchestrator is bound by.
struct Answer<'a> {
    what: &'static str,
    key: String,
    pipeline: &'a str,
    run_id: &'a RunId,
    context: &'a serde_json::Value,
}

/// Checks that `answer` answers a probe or query the Orchestrator sent.
async fn check_binding(answer: Answer<'_>, deps: Deps<'_>) -> Result<(), OrchestratorError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    let unbound = |problem| OrchestratorError::Unbound {
        what: answer.what,
        pipeline: answer.pipeline.to_string(),
        run_id: answer.run_id.to_string(),
        problem,
    };
    let recorded = match ledger.store.get(&answer.key).await {
        Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes).ok(),
        Err(PortError::NotFound { .. }) => return Err(unbound("nothing was sent for this run")),
        Err(err) => return Err(err.into()),
    };
    let recorded = recorded.as_ref().and_then(|v| v["context_digest"].as_str().map(str::to_string));
    if recorded.as_deref() != Some(context_digest(answer.context).as_str()) {
        return Err(unbound("the spec it carries is not the one sent"));
    }
    Ok(())
}

/// The spec with `incremental.start` set to the pipeline's cursor, when a
/// completed run left one in the lake (`_state/<pipeline>.json`); the
/// strategies bind it into `incremental.param`.
///
/// # Errors
/// [`OrchestratorError::Send`] when the state cannot be read.
pub async fn with_incremental_start(spec: &PipelineSpec, deps: Deps<'_>) -> Result<PipelineSpec, OrchestratorError> {
    let mut spec = spec.clone();
    if let (Some(incremental), Some(ledger)) = (spec.incremental.as_mut(), deps.ledger)
        && let Some(state) = tributary_core::state::current(ledger.store, &spec.pipeline).await?
    {
        incremental.start = tributary_core::state::text(&state.max);
        tracing::info!(cursor = %incremental.start, from_run = %state.run_id, "incremental run");
    }
    Ok(spec)
}

/// Handles a batch from the orchestrator queue — count-first probe replies
/// (and their continuations), query rows (raw from the query-results topic,
/// or in its SNS envelope) and run triggers (`tributary trigger`) —
/// reporting only the failed records. `deadline` is the invocation's.
pub async fn handle_sqs(event: &SqsEvent, deadline: Instant, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "orchestrator"));
    batch::for_each_message(event, 4, dead_letters, |message: Inbox, _meta: RecordMeta| async move {
        match message {
            Inbox::ProbeReply(reply) => on_probe_reply(reply, deadline, deps).await,
            Inbox::QueryRow(row) => on_query_row(*row, deps).await,
            Inbox::Start { spec, run_id, run_date, replace } => {
                let run = run_context(deps.config, run_id, run_date);
                begin_run(&spec, &run, replace.as_deref(), deps).await.map(|_| ())
            }
        }
    })
    .await
}

/// What arrives on the orchestrator queue, told apart by shape: a run
/// trigger has `source` = `aws.scheduler`, a `ProbeReply` has `total`, a
/// `QueryRow` has `row`.
#[derive(Debug)]
pub enum Inbox {
    /// A count-first probe's answer.
    ProbeReply(ProbeReply),
    /// One row of an Athena-driven run's query.
    QueryRow(Box<QueryRow>),
    /// A run trigger: the EventBridge Scheduler event shape
    /// (`{"source":"aws.scheduler","time":"2026-11-29T06:00:00Z","detail":<spec>}`,
    /// `time` required), as `tributary trigger` sends it. Started as the
    /// scheduler would start it: the same run id for the same time.
    Start {
        /// The pipeline.
        spec: Box<PipelineSpec>,
        /// Run id, from `time`.
        run_id: RunId,
        /// Run date, from `time`.
        run_date: NaiveDate,
        /// The re-run token (`replace`), see [`Trigger::Start`].
        replace: Option<String>,
    },
}

impl<'de> serde::Deserialize<'de> for Inbox {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        let problem = |contract: &str, err: contracts::ContractError| D::Error::custom(format!("{contract}: {err}"));
        if is_scheduler_event(&value) {
            return match scheduled_start(&value, None) {
                Ok(Trigger::Start { spec, run_id, run_date, replace }) => {
                    Ok(Inbox::Start { spec, run_id, run_date, replace })
                }
                Ok(Trigger::Sqs(_)) => Err(D::Error::custom("run trigger: not a run")),
                Err(err) => Err(D::Error::custom(format!("run trigger: {err}"))),
            };
        }
        if value.get("row").is_some() {
            contracts::decode(value).map(|row| Inbox::QueryRow(Box::new(row))).map_err(|e| problem("query row", e))
        } else if value.get("total").is_some() {
            contracts::decode(value).map(Inbox::ProbeReply).map_err(|e| problem("probe reply", e))
        } else {
            Err(D::Error::custom(
                "expected a run trigger (`source` \"aws.scheduler\"), a probe reply (with `total`) or a query row (with `row`)",
            ))
        }
    }
}

/// Turns one query row into its request and sends it.
///
/// # Errors
/// [`OrchestratorError::Plan`] naming the template field and placeholder
/// when the row lacks a value; send failures.
#[tracing::instrument(skip_all, fields(pipeline = %row.pipeline, run_id = %row.run_id, page = row.row_index))]
pub async fn on_query_row(row: QueryRow, deps: Deps<'_>) -> Result<(), OrchestratorError> {
    let spec = PipelineSpec::from_value(row.context.clone())?;
    if spec.pipeline != row.pipeline {
        return Err(OrchestratorError::Mismatch { reply: row.pipeline, spec: spec.pipeline });
    }
    let key = tributary_core::keys::query_key(&row.pipeline, &row.run_id);
    let answer = Answer { what: "query row", key, pipeline: &row.pipeline, run_id: &row.run_id, context: &row.context };
    check_binding(answer, deps).await?;
    let run = run_context(deps.config, row.run_id.clone(), row.run_date);
    let plan = strategy_for(&spec.strategy).on_row(&spec, &run, &row)?;
    send_plan(&plan, deps).await?;
    Ok(())
}

/// Plans the pages of a count-first run from its probe reply and sends them,
/// after those already sent for the run ([`crate::fanout`]: checkpointed
/// chunks; near `deadline` the reply is sent again to the orchestrator queue
/// as the continuation). A total of 0 sends nothing and succeeds.
///
/// Sending is at-least-once: if it fails part-way, the reply is redelivered
/// and sending goes on after the last checkpointed chunk; a page sent twice
/// (at most the chunk in flight) writes the same deterministic keys, so the
/// lake holds each page once. Without a ledger (`deps.ledger` `None`) there is
/// no checkpoint: every page is sent in this invocation.
///
/// # Errors
/// [`OrchestratorError`] for a context that is not a valid spec, a plan over
/// `max_pages`, or a send failure.
#[tracing::instrument(skip_all, fields(pipeline = %reply.pipeline, run_id = %reply.run_id, total = reply.total))]
pub async fn on_probe_reply(reply: ProbeReply, deadline: Instant, deps: Deps<'_>) -> Result<(), OrchestratorError> {
    let spec = PipelineSpec::from_value(reply.context.clone())?;
    if spec.pipeline != reply.pipeline {
        return Err(OrchestratorError::Mismatch { reply: reply.pipeline, spec: spec.pipeline });
    }
    let key = tributary_core::keys::probe_key(&reply.pipeline, &reply.run_id);
    let answer =
        Answer { what: "probe reply", key, pipeline: &reply.pipeline, run_id: &reply.run_id, context: &reply.context };
    check_binding(answer, deps).await?;
    let run = run_context(deps.config, reply.run_id.clone(), reply.run_date);
    let mut plan = strategy_for(&spec.strategy).on_probe_reply(&spec, &run, &reply)?;
    let Some(counted) = &plan.pages else {
        record_expected(&plan, &run, &spec.pipeline, deps).await?;
        send_plan(&plan, deps).await?;
        return Ok(());
    };
    let mut checkpoint = Checkpoint::read(&spec.pipeline, &run.run_id, counted.count, deps).await?;
    // The run's first plan stands, whatever total this reply counts: a
    // second reply of the same probe, a continuation, or a re-run's probe
    // (a run that failed or was stopped) when the vendor's total now
    // makes another number of pages. A trial's re-run, told to finish such
    // a run, fetched nothing and failed silently once 5 more records made
    // a sixth page. Records past the plan are the next run's, as for a
    // total that drifts while a run pages; the checkpoint's
    // compare-and-swap keeps two senders from sending a chunk twice over.
    let pages = if checkpoint.sent.pages == counted.count {
        counted.clone()
    } else {
        tracing::warn!(
            pages = counted.count,
            planned = checkpoint.sent.pages,
            resend = checkpoint.sent.resend,
            "the vendor's total now makes another number of pages; the run's plan stands"
        );
        plan.expected_pages = Some(u64::from(checkpoint.sent.pages));
        plan.expected_records = None;
        counted.with_count(checkpoint.sent.pages)
    };
    let pages = &pages;
    if checkpoint.sent.resend {
        // A re-run: what an earlier attempt sent and nobody persisted goes
        // again (its messages may be in a DLQ, or lost with a local run's
        // in-memory queues); the flag is cleared after, so a crash in
        // between sends them again rather than never.
        resend_unpersisted(pages, checkpoint.sent.sent, &spec.pipeline, &run.run_id, deps).await?;
        checkpoint.sent.resend = false;
        let sent = checkpoint.sent.sent;
        if !checkpoint.advance(sent, deps).await? {
            tracing::warn!(sent, "another invocation is sending this run's pages; stopping");
            return Ok(());
        }
    }
    tracing::info!(pages = pages.count, already_sent = checkpoint.sent.sent, "pages planned");
    if checkpoint.sent.sent == 0 {
        // A checkpoint is written after the count: only the first delivery records it.
        record_expected(&plan, &run, &spec.pipeline, deps).await?;
    }
    send_plan(&plan, deps).await?;
    send_pages(pages, checkpoint, &reply, deadline, deps).await
}

/// A re-run's probe reply ([`PagesSent::resend`]): sends again those of
/// pages `0..sent` that hold no receipt in the run ledger, chunk by chunk;
/// a completed run sends nothing. A page an earlier attempt still has in
/// flight (a re-run started while it runs, on AWS) is requested twice: its
/// deterministic keys keep it once in the lake, at the cost of a second
/// vendor call.
///
/// # Errors
/// [`OrchestratorError`] when the ledger cannot be read or a send fails
/// (the reply is then redelivered and does this again).
async fn resend_unpersisted(
    pages: &PageSeries,
    sent: u32,
    pipeline: &str,
    run_id: &RunId,
    deps: Deps<'_>,
) -> Result<(), OrchestratorError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    if ledger.store.get(&tributary_core::keys::success_key(pipeline, run_id)).await.is_ok() {
        tracing::info!(pages = pages.count, "the run completed already; nothing sent again");
        return Ok(());
    }
    let listed = ledger.store.list(&tributary_core::keys::receipts_prefix(pipeline, run_id)).await?;
    let persisted: std::collections::BTreeSet<u32> =
        listed.iter().filter_map(|key| tributary_core::keys::receipt_page(key)).collect();
    let missing: Vec<u32> = (0..sent.min(pages.count)).filter(|page| !persisted.contains(page)).collect();
    for chunk in missing.chunks(PageSeries::CHUNK as usize) {
        let bodies = chunk.iter().map(|&index| encode(&pages.get(index))).collect::<Result<Vec<_>, _>>()?;
        deps.queue.send(&deps.config.request_queue, bodies).await?;
    }
    tracing::info!(
        pages = pages.count,
        sent,
        sent_again = missing.len(),
        "a re-run: pages without a receipt sent again"
    );
    Ok(())
}

/// Flags a run started again ([`start_run`]) whose count-first pages an
/// earlier attempt sent, for its probe reply to send again the pages that
/// hold no receipt ([`PagesSent::resend`]). Nothing for a run without that
/// checkpoint (a first start, another strategy), a completed run or no
/// ledger.
///
/// # Errors
/// [`OrchestratorError`] when the ledger cannot be read or written.
async fn flag_rerun(pipeline: &str, run_id: &RunId, deps: Deps<'_>) -> Result<(), OrchestratorError> {
    let Some(ledger) = deps.ledger else { return Ok(()) };
    let mut checkpoint = Checkpoint::read(pipeline, run_id, 0, deps).await?;
    if checkpoint.version.is_none() || checkpoint.sent.resend {
        return Ok(());
    }
    if ledger.store.get(&tributary_core::keys::success_key(pipeline, run_id)).await.is_ok() {
        return Ok(());
    }
    checkpoint.sent.resend = true;
    let sent = checkpoint.sent.sent;
    if checkpoint.advance(sent, deps).await? {
        tracing::info!(sent, pages = checkpoint.sent.pages, "a re-run of the run: unpersisted pages will go again");
    } else {
        // An earlier attempt moved it meanwhile: it is still sending, and
        // what it sends is not lost.
        tracing::warn!(sent, "the run's pages are being sent; the re-run leaves them to it");
    }
    Ok(())
}

/// Where a count-first run's page sending stands: the checkpoint read
/// ([`PagesSent`]) and its version, for the compare-and-swap after the next
/// chunk (`None`: no checkpoint yet, or no ledger).
struct Checkpoint {
    key: String,
    sent: PagesSent,
    version: Option<String>,
}

impl Checkpoint {
    /// The run's checkpoint in the ledger (its `pages` those of the plan
    /// being sent), or none sent of `pages`.
    async fn read(pipeline: &str, run_id: &RunId, pages: u32, deps: Deps<'_>) -> Result<Self, OrchestratorError> {
        let key = tributary_core::keys::pages_sent_key(pipeline, run_id);
        let mut checkpoint = Self {
            sent: PagesSent { pipeline: pipeline.to_string(), run_id: run_id.clone(), pages, sent: 0, resend: false },
            key,
            version: None,
        };
        let Some(ledger) = deps.ledger else { return Ok(checkpoint) };
        if let Some((bytes, version)) = ledger.store.get_versioned(&checkpoint.key).await? {
            let read: PagesSent = serde_json::from_slice(&bytes).map_err(|err| OrchestratorError::BadField {
                field: "pages-sent.json",
                value: checkpoint.key.clone(),
                reason: format!("the run's sending checkpoint cannot be read: {err}"),
                source: Some(err.into()),
            })?;
            checkpoint.sent.sent = read.sent;
            checkpoint.sent.pages = read.pages;
            checkpoint.sent.resend = read.resend;
            checkpoint.version = Some(version);
        }
        Ok(checkpoint)
    }

    /// Records pages `0..sent` as sent, if nobody else moved the checkpoint
    /// since it was read. `Ok(false)`: another invocation did.
    async fn advance(&mut self, sent: u32, deps: Deps<'_>) -> Result<bool, OrchestratorError> {
        self.sent.sent = sent;
        let Some(ledger) = deps.ledger else { return Ok(true) };
        let body = serde_json::to_vec(&self.sent).unwrap_or_default();
        if !ledger.store.put_if(&self.key, body.into(), self.version.as_deref()).await? {
            return Ok(false);
        }
        // The new version, for the next chunk's compare-and-swap.
        self.version = ledger.store.get_versioned(&self.key).await?.map(|(_, version)| version);
        Ok(true)
    }
}

/// Sends a count-first run's pages from the checkpoint on, a chunk at a time
/// (made, encoded and sent together: the memory of one chunk), as
/// [`fanout::next_step`] decides; near the deadline or past the
/// invocation's page budget, sends `reply` to the orchestrator queue again
/// as the continuation and returns.
async fn send_pages(
    pages: &PageSeries,
    mut checkpoint: Checkpoint,
    reply: &ProbeReply,
    deadline: Instant,
    deps: Deps<'_>,
) -> Result<(), OrchestratorError> {
    // Without a ledger there is no checkpoint to continue from: everything goes now.
    let fanout = match deps.ledger {
        Some(_) => deps.config.fanout,
        None => fanout::Fanout { max_pages_per_invocation: u32::MAX, ..deps.config.fanout },
    };
    let soft_deadline = deadline.checked_sub(fanout.safety_margin).unwrap_or_else(Instant::now);
    let (from, mut sent_here) = (checkpoint.sent.sent, 0);
    loop {
        let out_of_time = deps.ledger.is_some() && Instant::now() >= soft_deadline;
        match fanout::next_step(pages.count, checkpoint.sent.sent, sent_here, out_of_time, &fanout) {
            Step::Done => {
                tracing::info!(from, sent_here, "every page sent");
                return Ok(());
            }
            Step::Continue { from: next } => {
                deps.queue.send(&deps.config.orchestrator_queue, vec![encode(reply)?]).await?;
                tracing::info!(from, sent_here, next, "pages left to a continuation");
                return Ok(());
            }
            Step::Send(chunk) => {
                let bodies = chunk.clone().map(|index| encode(&pages.get(index))).collect::<Result<Vec<_>, _>>()?;
                deps.queue.send(&deps.config.request_queue, bodies).await?;
                sent_here += chunk.end - chunk.start;
                if !checkpoint.advance(chunk.end, deps).await? {
                    tracing::warn!(from, sent_here, "another invocation is sending this run's pages; stopping");
                    return Ok(());
                }
            }
        }
    }
}

fn encode<T: serde::Serialize>(message: &T) -> Result<String, OrchestratorError> {
    contracts::encode(message).map_err(|err| OrchestratorError::BadField {
        field: "plan",
        value: String::new(),
        reason: err.to_string(),
        source: Some(err.into()),
    })
}

/// Records the plan's expected page count in the run ledger, when it
/// settles it (an empty paged run completes here).
async fn record_expected(
    plan: &Plan,
    run: &RunContext,
    pipeline: &str,
    deps: Deps<'_>,
) -> Result<(), OrchestratorError> {
    let (Some(ledger), Some(pages)) = (deps.ledger, plan.expected_pages) else { return Ok(()) };
    let expected = tributary_core::ledger::Expected {
        pipeline: pipeline.to_string(),
        run_id: run.run_id.clone(),
        run_date: run.run_date,
        pages,
        truncated: None,
        records: plan.expected_records,
    };
    ledger.record_expected(&expected).await?;
    Ok(())
}

/// Sends the plan's queries and requests. Its `pages` (only a probe reply
/// plans them) are sent by [`send_pages`].
async fn send_plan(plan: &Plan, deps: Deps<'_>) -> Result<usize, OrchestratorError> {
    fn encode_all<T: serde::Serialize>(messages: &[T]) -> Result<Vec<String>, OrchestratorError> {
        messages.iter().map(encode).collect()
    }
    if !plan.queries.is_empty() {
        deps.queue.send(&deps.config.athena_queue, encode_all(&plan.queries)?).await?;
    }
    if !plan.requests.is_empty() {
        deps.queue.send(&deps.config.request_queue, encode_all(&plan.requests)?).await?;
    }
    Ok(plan.len())
}
