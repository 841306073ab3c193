//! Request: the only code that calls vendor APIs.
//!
//! For each `RequestMessage` it makes the HTTP call (GET or POST, query,
//! headers, JSON body), retries a few times with exponential backoff and
//! jitter on 5xx, 408, 429 and transport failures, parses the JSON response
//! and, by the message's `mode`:
//! - `records`: extracts the array at `records_pointer` and sends a
//!   `PersistMessage` to `reply_to` — inline, or as a claim check (records
//!   in the lake, a pointer in the message) when the message would exceed
//!   the queue's maximum message size;
//! - `probe`: reads the total at `total_pointer` and sends a `ProbeReply`.
//!
//! Any failure fails that record alone (`batchItemFailures`): SQS redelivers
//! it after its visibility timeout and dead-letters it after
//! `maxReceiveCount`, where Notify alerts.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use serde_json::Value;

use shared::adapters::http::redacted_url;
use shared::batch::{self, BodyError, DeadLetterTarget, RecordError, RecordMeta};
use shared::contracts::{
    self, Destination, PageRef, Payload, PersistMessage, PersistTarget, ProbeReply, RequestMessage, RequestMode, V1,
};
use shared::json::kind_of;
use shared::keys;
use shared::metrics::{self, Metrics, MetricsTarget};
use shared::ports::{
    HttpClient, HttpRequest, HttpResponse, ObjectStore, PortError, QueueSender, TopicMessage, TopicPublisher,
};

/// Default maximum message size: 256 KiB, SQS's classic `MaximumMessageSize`
/// (Amazon SQS quotas; queues may be raised to 1 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 262_144;

/// Request's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestConfig {
    /// Largest message sent to `reply_to`, in bytes; larger record pages go
    /// by claim check (`MAX_MESSAGE_BYTES`, default 262144).
    pub max_message_bytes: usize,
    /// Calls per message, first included (default 3).
    pub max_attempts: usize,
    /// First backoff delay; doubles per retry, with full jitter (default 200 ms).
    pub base_delay: Duration,
    /// Total time allowed for one HTTP call (default 30 s).
    pub timeout: Duration,
    /// Records of a batch handled at once (default 5).
    pub concurrency: usize,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// Where the EMF metrics of each message go (records fetched, API
    /// latency, retries, throttles).
    pub metrics: MetricsTarget,
}

impl Default for RequestConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            timeout: Duration::from_secs(30),
            concurrency: 5,
            dead_letter: None,
            metrics: MetricsTarget::Off,
        }
    }
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Makes the vendor call.
    pub http: &'a dyn HttpClient,
    /// Sends replies to queues.
    pub queue: &'a dyn QueueSender,
    /// Publishes replies to topics.
    pub topics: &'a dyn TopicPublisher,
    /// Holds claim-check payloads.
    pub store: &'a dyn ObjectStore,
    /// Settings.
    pub config: &'a RequestConfig,
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The vendor answered with a non-success status.
    #[error("{target} answered HTTP {status}: {excerpt}")]
    Status {
        /// `METHOD url` without query string.
        target: String,
        /// Status code.
        status: u16,
        /// First bytes of the body.
        excerpt: String,
    },
    /// The call did not complete (timeout, connection failure).
    #[error(transparent)]
    Transport(PortError),
    /// The response is not JSON.
    #[error("response from {target} is not JSON ({error}); body starts {excerpt}")]
    NotJson {
        /// `METHOD url`.
        target: String,
        /// Parser message with line and column.
        error: String,
        /// First bytes of the body.
        excerpt: String,
    },
    /// The pointer does not lead to what the mode needs.
    #[error("response from {target}: `{field}` {pointer:?} {problem}")]
    Pointer {
        /// `METHOD url`.
        target: String,
        /// `records_pointer` or `total_pointer`.
        field: &'static str,
        /// The pointer.
        pointer: String,
        /// What was found instead.
        problem: String,
    },
    /// Sending the reply or storing the claim check failed.
    #[error("forwarding to {destination} failed: {source}")]
    Forward {
        /// Where it was going.
        destination: String,
        /// Port failure.
        source: PortError,
    },
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
}

impl RecordError for RequestError {
    /// HTTP 4xx other than 408 and 429, and unreadable messages: retrying
    /// the same call cannot succeed. A body that is not JSON, or lacks the
    /// array, may be a vendor's passing error page, so it is retried.
    fn is_permanent(&self) -> bool {
        match self {
            RequestError::Status { status, .. } => (400..500).contains(status) && !matches!(status, 408 | 429),
            RequestError::Transport(err) => !err.is_retryable(),
            RequestError::Forward { source, .. } => !source.is_retryable(),
            RequestError::Body(_) => true,
            RequestError::NotJson { .. } | RequestError::Pointer { .. } => false,
        }
    }
}

impl RequestError {
    /// Whether a retry within this invocation may succeed: 5xx, 408, 429 and
    /// transport failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            RequestError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            RequestError::Transport(err) => err.is_retryable(),
            _ => false,
        }
    }
}

/// What a handled message produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Records forwarded to Persist.
    Records {
        /// How many.
        count: usize,
        /// Whether they went by claim check.
        claim_check: bool,
    },
    /// A probe's total forwarded to the Orchestrator.
    Total(u64),
}

/// Handles an SQS batch of `RequestMessage`s, reporting only failed records.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "request"));
    batch::for_each_message(
        event,
        deps.config.concurrency,
        dead_letters,
        |message: RequestMessage, _meta: RecordMeta| async move { handle_message(message, deps).await.map(|_| ()) },
    )
    .await
}

/// Makes the call of one message and forwards the outcome to `reply_to`.
///
/// # Errors
/// [`RequestError`]; retryable ones have already been retried
/// `max_attempts - 1` times.
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id, page = message.page.map(|p| p.index)))]
pub async fn handle_message(message: RequestMessage, deps: Deps<'_>) -> Result<Outcome, RequestError> {
    let metrics = std::sync::Mutex::new(Metrics::new("request", &message.pipeline));
    let outcome = call_and_forward(&message, deps, &metrics).await;
    let mut metrics = metrics.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    metrics.property("run_id", Value::String(message.run_id.to_string()));
    if let Some(page) = message.page {
        metrics.property("page", Value::from(page.index));
    }
    if let Ok(Outcome::Records { count, .. }) = &outcome {
        metrics.count(metrics::RECORDS_FETCHED, *count as u64);
    }
    metrics.flush_to(&deps.config.metrics);
    outcome
}

async fn call_and_forward(
    message: &RequestMessage,
    deps: Deps<'_>,
    metrics: &std::sync::Mutex<Metrics>,
) -> Result<Outcome, RequestError> {
    let request = http_request(message, deps.config.timeout);
    let target = format!("{} {}", request.method, redacted_url(&request.url));
    let response = fetch(&request, &target, deps, metrics).await?;
    let mut body: Value = serde_json::from_slice(&response.body).map_err(|err| RequestError::NotJson {
        target: target.clone(),
        error: err.to_string(),
        excerpt: excerpt(&response.body),
    })?;
    match &message.mode {
        RequestMode::Records { records_pointer, target: dataset } => {
            let records = take_records(&mut body, records_pointer.as_deref(), &target)?;
            let page = message.page.unwrap_or(PageRef::SINGLE);
            let count = records.len();
            let claim_check = forward_records(message, page, dataset, records, deps).await?;
            tracing::info!(records = count, claim_check, "page fetched");
            Ok(Outcome::Records { count, claim_check })
        }
        RequestMode::Probe { total_pointer, context } => {
            let total = read_total(&body, total_pointer, &target)?;
            let reply = ProbeReply {
                version: V1,
                pipeline: message.pipeline.clone(),
                run_id: message.run_id.clone(),
                run_date: message.run_date,
                total,
                context: context.clone(),
            };
            send(&message.reply_to, encode(&reply)?, deps).await?;
            tracing::info!(total, "probe answered");
            Ok(Outcome::Total(total))
        }
    }
}

/// The HTTP request of a message: its URL with the query parameters added.
pub fn http_request(message: &RequestMessage, timeout: Duration) -> HttpRequest {
    let mut url = message.http.url.clone();
    if !message.http.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&message.http.query);
    }
    let mut headers = message.http.headers.clone();
    headers.entry("accept".into()).or_insert_with(|| "application/json".into());
    HttpRequest {
        method: message.http.method,
        url,
        headers,
        body: message.http.body.as_ref().map(|b| Bytes::from(b.to_string())),
        timeout,
    }
}

async fn fetch(
    request: &HttpRequest,
    target: &str,
    deps: Deps<'_>,
    metrics: &std::sync::Mutex<Metrics>,
) -> Result<HttpResponse, RequestError> {
    let record = |f: &dyn Fn(&mut Metrics)| {
        if let Ok(mut metrics) = metrics.lock() {
            f(&mut metrics);
        }
    };
    let attempt = || async {
        let started = std::time::Instant::now();
        let response = deps.http.send(request.clone()).await;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        record(&|m| m.duration_ms(metrics::API_LATENCY, elapsed_ms));
        let response = response.map_err(RequestError::Transport)?;
        if response.status == 429 {
            record(&|m| m.count(metrics::API_THROTTLES, 1));
        }
        if (200..300).contains(&response.status) {
            Ok(response)
        } else {
            Err(RequestError::Status {
                target: target.to_string(),
                status: response.status,
                excerpt: excerpt(&response.body),
            })
        }
    };
    let backoff = ExponentialBuilder::default()
        .with_min_delay(deps.config.base_delay)
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(deps.config.max_attempts.saturating_sub(1))
        .with_jitter();
    attempt
        .retry(backoff)
        .when(RequestError::is_retryable)
        .notify(|err, delay| {
            record(&|m| m.count(metrics::API_RETRIES, 1));
            tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "vendor call failed; retrying")
        })
        .await
}

fn take_records(body: &mut Value, pointer: Option<&str>, target: &str) -> Result<Vec<Value>, RequestError> {
    let pointer = pointer.unwrap_or("");
    let problem = |problem: String| RequestError::Pointer {
        target: target.to_string(),
        field: "records_pointer",
        pointer: pointer.to_string(),
        problem,
    };
    match body.pointer_mut(pointer) {
        Some(Value::Array(records)) => Ok(std::mem::take(records)),
        Some(other) => Err(problem(format!("leads to {}, not an array of records", kind_of(other)))),
        None => Err(problem("is not in the response".into())),
    }
}

fn read_total(body: &Value, pointer: &str, target: &str) -> Result<u64, RequestError> {
    let problem = |problem: String| RequestError::Pointer {
        target: target.to_string(),
        field: "total_pointer",
        pointer: pointer.to_string(),
        problem,
    };
    match body.pointer(pointer) {
        Some(Value::Number(n)) => {
            n.as_u64().ok_or_else(|| problem(format!("leads to {n}, not a non-negative integer")))
        }
        Some(Value::String(s)) => {
            s.trim().parse().map_err(|_| problem(format!("leads to {s:?}, not a non-negative integer")))
        }
        Some(other) => Err(problem(format!("leads to {}, not a non-negative integer", kind_of(other)))),
        None => Err(problem("is not in the response".into())),
    }
}

async fn forward_records(
    message: &RequestMessage,
    page: PageRef,
    target: &PersistTarget,
    records: Vec<Value>,
    deps: Deps<'_>,
) -> Result<bool, RequestError> {
    let mut persist = PersistMessage {
        version: V1,
        pipeline: message.pipeline.clone(),
        run_id: message.run_id.clone(),
        run_date: message.run_date,
        page,
        target: target.clone(),
        payload: Payload::Inline { records },
    };
    let mut body = encode(&persist)?;
    let mut claim_check = false;
    if body.len() > deps.config.max_message_bytes {
        // Claim check: the records go to the lake, the message carries the key.
        let key = keys::claim_key(&message.pipeline, &message.run_id, page.index);
        let payload = std::mem::replace(&mut persist.payload, Payload::Object { key: key.clone(), format: Default::default() });
        let records = match payload {
            Payload::Inline { records } => records,
            Payload::Object { .. } => Vec::new(),
        };
        let records = serde_json::to_vec(&records).map_err(|err| encode_error(&err))?;
        deps.store
            .put(&key, Bytes::from(records))
            .await
            .map_err(|source| RequestError::Forward { destination: format!("object {key}"), source })?;
        body = encode(&persist)?;
        claim_check = true;
    }
    send(&message.reply_to, body, deps).await?;
    Ok(claim_check)
}

async fn send(destination: &Destination, body: String, deps: Deps<'_>) -> Result<(), RequestError> {
    let result = match destination {
        Destination::Queue { queue } => deps.queue.send(queue, vec![body]).await,
        Destination::Topic { topic } => {
            deps.topics.publish(topic, vec![TopicMessage { body, ..TopicMessage::default() }]).await
        }
    };
    result.map_err(|source| RequestError::Forward { destination: destination.to_string(), source })
}

fn encode<T: serde::Serialize>(message: &T) -> Result<String, RequestError> {
    contracts::encode(message).map_err(|err| encode_error(&err))
}

fn encode_error(err: &serde_json::Error) -> RequestError {
    RequestError::Forward {
        destination: "(encoding)".into(),
        source: PortError::Permanent { operation: "encode message", target: "reply".into(), message: err.to_string() },
    }
}

/// The first 200 bytes of a body as text, cut on a character boundary.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let text = text.trim_end_matches('\u{FFFD}');
    format!("{text:?}")
}
