//! Ports: one narrow trait per capability of the outside world.
//!
//! Handlers take these as `&dyn Trait`, so the same handler code runs in
//! Lambda (AWS adapters), in the local runtime and in tests (the local
//! adapters of the `adapters` crate, which really work: they are what the CLI
//! runs on, not mocks).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use contracts::HttpMethod;

/// The error a port keeps as the source of a [`PortError`]: any error that
/// may cross threads.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failed port call, split into retryable and permanent failures.
///
/// `message` is the text the error shows: the source error's own text when
/// there is one (kept as `source` for callers that walk the chain), or our
/// own words when there is none. Build them with [`PortError::transient`],
/// [`PortError::permanent`] (from an error) or [`PortError::transient_msg`],
/// [`PortError::permanent_msg`] (from words).
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// A transient failure (throttling, timeout, connection reset, 5xx from a
    /// service): retrying later may succeed.
    #[error("{operation} on {target} failed (transient): {message}")]
    Transient {
        /// Operation, e.g. `SendMessageBatch`.
        operation: &'static str,
        /// Queue, topic, key or URL concerned (never a secret value).
        target: String,
        /// What went wrong: the source's text, or our words without one.
        message: String,
        /// The error that caused it, if any (its text is in `message`).
        #[source]
        source: Option<BoxError>,
    },
    /// A failure that will recur on retry (not found, access denied, invalid
    /// request).
    #[error("{operation} on {target} failed: {message}")]
    Permanent {
        /// Operation.
        operation: &'static str,
        /// Target.
        target: String,
        /// What went wrong: the source's text, or our words without one.
        message: String,
        /// The error that caused it, if any (its text is in `message`).
        #[source]
        source: Option<BoxError>,
    },
    /// An object or secret that does not exist.
    #[error("{what} not found: {target}")]
    NotFound {
        /// `object`, `secret`, `queue`, …
        what: &'static str,
        /// Key, id or name.
        target: String,
    },
    /// A message or object larger than the destination allows.
    #[error("{what} of {bytes} bytes exceeds the limit of {limit} bytes for {target}")]
    TooLarge {
        /// `message`, `batch`, …
        what: &'static str,
        /// Destination.
        target: String,
        /// Size found.
        bytes: usize,
        /// Limit in force.
        limit: usize,
    },
}

impl PortError {
    /// A transient failure of `operation` on `target` caused by `source`,
    /// showing the source's text.
    pub fn transient(operation: &'static str, target: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        PortError::Transient { operation, target: target.into(), message: source.to_string(), source: Some(source) }
    }

    /// A permanent failure of `operation` on `target` caused by `source`,
    /// showing the source's text.
    pub fn permanent(operation: &'static str, target: impl Into<String>, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        PortError::Permanent { operation, target: target.into(), message: source.to_string(), source: Some(source) }
    }

    /// A transient failure of `operation` on `target` that no error caused,
    /// told in `message`.
    pub fn transient_msg(operation: &'static str, target: impl Into<String>, message: impl Into<String>) -> Self {
        PortError::Transient { operation, target: target.into(), message: message.into(), source: None }
    }

    /// A permanent failure of `operation` on `target` that no error caused,
    /// told in `message`.
    pub fn permanent_msg(operation: &'static str, target: impl Into<String>, message: impl Into<String>) -> Self {
        PortError::Permanent { operation, target: target.into(), message: message.into(), source: None }
    }

    /// The same error showing `message` instead (its source kept): for a
    /// source whose text needs our words around it, or another rendering
    /// (the AWS SDK's `DisplayErrorContext`). `NotFound` and `TooLarge`
    /// have no message and come back as they are.
    pub fn with_message(mut self, text: impl Into<String>) -> Self {
        if let PortError::Transient { message, .. } | PortError::Permanent { message, .. } = &mut self {
            *message = text.into();
        }
        self
    }

    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, PortError::Transient { .. })
    }
}

/// One message for an SQS queue: a body and string message attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueMessage {
    /// Body.
    pub body: String,
    /// String message attributes (SQS allows at most 10 per message; names
    /// of `A-Za-z0-9_-.`, up to 256 characters). They count toward the
    /// message size: name, `String` and value.
    pub attributes: BTreeMap<String, String>,
}

impl QueueMessage {
    /// Bytes SQS counts toward `MaximumMessageSize`: the body plus, per
    /// attribute, its name, data type (`String`) and value.
    pub fn size(&self) -> usize {
        self.body.len()
            + self.attributes.iter().map(|(name, value)| name.len() + "String".len() + value.len()).sum::<usize>()
    }
}

/// Sends messages to SQS queues.
#[async_trait]
pub trait QueueSender: Send + Sync {
    /// Sends each message to `queue` (a queue URL on AWS, a name locally).
    /// Adapters split the messages into `SendMessageBatch` calls of at most
    /// 10 entries and at most the configured total bytes (SQS quotas).
    ///
    /// # Errors
    /// [`PortError`]; an `Ok` means every message was accepted by the queue.
    async fn send_messages(&self, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError>;

    /// Sends each body, without attributes, as one message to `queue`.
    ///
    /// # Errors
    /// As [`QueueSender::send_messages`].
    async fn send(&self, queue: &str, bodies: Vec<String>) -> Result<(), PortError> {
        let messages = bodies.into_iter().map(|body| QueueMessage { body, attributes: BTreeMap::new() }).collect();
        self.send_messages(queue, messages).await
    }

    /// Makes a received message visible again `timeout` from now (SQS
    /// `ChangeMessageVisibility`; `timeout` at most
    /// [`MAX_VISIBILITY_TIMEOUT`], 12 hours, the SQS quota). The local
    /// broker and the SQS adapter implement it; the default leaves the
    /// message to its queue's visibility timeout and says so in `Ok(false)`.
    ///
    /// # Errors
    /// [`PortError`]: an unknown queue, or a receipt no longer valid.
    async fn change_visibility(&self, queue: &str, receipt_handle: &str, timeout: Duration) -> Result<bool, PortError> {
        let _ = (queue, receipt_handle, timeout);
        Ok(false)
    }

    /// Sends `message` to `queue`, visible only `delay` from now (SQS
    /// `SendMessage` with `DelaySeconds`; `delay` in whole seconds, at most
    /// [`MAX_DELAY`], 15 minutes, the SQS quota). The message is a new one:
    /// its receive count starts again at 0. The local broker and the SQS
    /// adapter implement it; the default sends nothing and says so in
    /// `Ok(false)`.
    ///
    /// # Errors
    /// As [`QueueSender::send_messages`].
    async fn send_delayed(&self, queue: &str, message: QueueMessage, delay: Duration) -> Result<bool, PortError> {
        let _ = (queue, message, delay);
        Ok(false)
    }
}

/// The longest visibility timeout SQS allows: 12 hours (43,200 s; Amazon
/// SQS quotas, "Visibility timeout").
pub const MAX_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(43_200);

/// The longest delay of a message SQS allows: 15 minutes (900 s; Amazon
/// SQS quotas, "Delay queue" / `DelaySeconds`).
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// One message for an SNS topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicMessage {
    /// Subject (e-mail subscribers see it): what [`sanitize_subject`] gives
    /// is what SNS accepts, ASCII without line breaks, under 100 characters;
    /// the SNS adapter passes every subject through it.
    pub subject: Option<String>,
    /// Body (with `per_protocol`, the `default` text).
    pub body: String,
    /// String message attributes, used by subscription filter policies.
    pub attributes: BTreeMap<String, String>,
    /// A different text per subscription protocol (`sms`, `email`, `sqs`,
    /// `lambda`, …): when not empty, the message is published with
    /// `MessageStructure=json` and `body` as the `default` text (Amazon SNS
    /// Publish API reference).
    pub per_protocol: BTreeMap<String, String>,
}

impl TopicMessage {
    /// What SNS receives as `Message`: the body, or with `per_protocol` the
    /// JSON object of the texts by protocol, `default` included.
    pub fn wire_body(&self) -> String {
        if self.per_protocol.is_empty() {
            return self.body.clone();
        }
        let mut texts = self.per_protocol.clone();
        texts.insert("default".into(), self.body.clone());
        serde_json::to_string(&texts).unwrap_or_else(|_| self.body.clone())
    }

    /// The text a subscriber of `protocol` gets.
    pub fn text_for(&self, protocol: &str) -> &str {
        self.per_protocol.get(protocol).map_or(self.body.as_str(), String::as_str)
    }
}

/// Longest subject sent, in characters. The SNS `Publish` API reference
/// says a subject "must be less than 100 characters long", so 99 keeps us
/// inside either reading of the limit:
/// <https://docs.aws.amazon.com/sns/latest/api/API_Publish.html>.
pub const SNS_MAX_SUBJECT_CHARS: usize = 99;

/// The subject SNS will accept, or `None` when nothing printable is left.
///
/// SNS subjects are ASCII without line breaks or control characters, begin
/// with a letter, digit or punctuation mark, and are shorter than 100
/// characters (`Publish` API reference). Runs of whitespace and control
/// characters become one space, other non-ASCII characters become `?`, the
/// result is trimmed and cut to [`SNS_MAX_SUBJECT_CHARS`].
pub fn sanitize_subject(subject: &str) -> Option<String> {
    let mut out = String::with_capacity(subject.len().min(SNS_MAX_SUBJECT_CHARS));
    let mut pending_space = false;
    for c in subject.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
            continue;
        }
        let c = if c.is_ascii_graphic() { c } else { '?' };
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
        if out.len() >= SNS_MAX_SUBJECT_CHARS {
            break;
        }
    }
    out.truncate(SNS_MAX_SUBJECT_CHARS);
    let trimmed = out.trim_end();
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// Publishes messages to SNS topics.
#[async_trait]
pub trait TopicPublisher: Send + Sync {
    /// Publishes each message to `topic` (an ARN on AWS, a name locally).
    ///
    /// # Errors
    /// [`PortError`]; an `Ok` means every message was accepted.
    async fn publish(&self, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError>;
}

/// Objects in the lake bucket.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Writes `body` at `key`, replacing any object there. Readers never see
    /// a partial object.
    ///
    /// # Errors
    /// [`PortError`].
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError>;

    /// Reads the object at `key`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] when there is none; other [`PortError`]s.
    async fn get(&self, key: &str) -> Result<Bytes, PortError>;

    /// Keys under `prefix`, sorted.
    ///
    /// # Errors
    /// [`PortError`].
    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError>;

    /// Writes the object at `key` to the local file `path` (streamed where
    /// the store can: memory does not grow with the object).
    ///
    /// # Errors
    /// As [`ObjectStore::get`]; [`PortError::Transient`] when the file
    /// cannot be written.
    async fn get_to_file(&self, key: &str, path: &std::path::Path) -> Result<u64, PortError> {
        let body = self.get(key).await?;
        tokio::fs::write(path, &body)
            .await
            .map_err(|err| PortError::transient("write local file", path.display().to_string(), err))?;
        Ok(body.len() as u64)
    }

    /// Writes the local file `path` at `key` (streamed where the store can).
    ///
    /// # Errors
    /// As [`ObjectStore::put`]; [`PortError::Transient`] when the file
    /// cannot be read.
    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<(), PortError> {
        let body = tokio::fs::read(path)
            .await
            .map_err(|err| PortError::transient("read local file", path.display().to_string(), err))?;
        self.put(key, Bytes::from(body)).await
    }

    /// Copies the object at `from` to `to` (server-side where the store can).
    ///
    /// # Errors
    /// As [`ObjectStore::get`] and [`ObjectStore::put`].
    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        let body = self.get(from).await?;
        self.put(to, body).await
    }

    /// Deletes the object at `key`; deleting a missing object succeeds.
    ///
    /// # Errors
    /// [`PortError`].
    async fn delete(&self, key: &str) -> Result<(), PortError>;

    /// Reads the object at `key` with its version tag (S3: the `ETag`), for
    /// a later [`ObjectStore::put_if`]; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`PortError`].
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError>;

    /// Writes `body` at `key` only if the object is still at `version` (as
    /// read by [`ObjectStore::get_versioned`]), or, with `None`, only if
    /// there is no object: a compare-and-swap for read-modify-write objects
    /// that concurrent writers share (the dataset's schema). `Ok(false)`
    /// when another writer got there first: read again and retry.
    ///
    /// S3: `PutObject` with `If-Match: <ETag>` or `If-None-Match: *`; its
    /// `412 Precondition Failed` and `409 ConditionalRequestConflict` are
    /// `Ok(false)` (Amazon S3 User Guide, "Conditional requests").
    ///
    /// # Errors
    /// [`PortError`].
    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError>;
}

/// A secret value. Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for building an `Authorization` header; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Reads secrets by id (Secrets Manager on AWS).
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret's value.
    ///
    /// # Errors
    /// [`PortError::NotFound`] (permanent) for an unknown id.
    async fn get(&self, id: &str) -> Result<Secret, PortError>;
}

/// A SQL query with positional parameters (`?`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    /// SQL text with `?` placeholders.
    pub sql: String,
    /// Values bound to the placeholders, in order, as strings (Athena
    /// `ExecutionParameters`); compare them with other types through
    /// `CAST(? AS …)`.
    pub parameters: Vec<String>,
    /// Database (Glue) the tables live in.
    pub database: String,
    /// Athena workgroup; the engine's default when absent.
    pub workgroup: Option<String>,
    /// Where result files go (`s3://…`); the workgroup's when absent.
    pub output_location: Option<String>,
}

/// Where a started query stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueryState {
    /// Still `QUEUED` or `RUNNING` when the wait's deadline came.
    Running {
        /// The engine's state name.
        state: String,
    },
    /// `SUCCEEDED`: results can be paged.
    Succeeded,
    /// `FAILED` or `CANCELLED`, with the engine's reason
    /// (`StateChangeReason` on Athena, the planner's error locally).
    Failed {
        /// The engine's state name.
        state: String,
        /// Why.
        reason: String,
    },
}

/// One page of a query's results: rows as JSON objects keyed by column name
/// (values typed by column: integers and floats as numbers, booleans as
/// booleans, everything else as strings, SQL `NULL` as `null`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultPage {
    /// Column names in result order.
    pub columns: Vec<String>,
    /// Rows of this page (never the header row).
    pub rows: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Token of the next page; `None` on the last page.
    pub next_token: Option<String>,
}

/// Runs SQL over the lake: Athena on AWS, DataFusion locally.
///
/// The three calls follow Athena's API (StartQueryExecution,
/// GetQueryExecution, GetQueryResults) so a caller can stop between any two
/// of them and continue in a later invocation from the execution id and the
/// page token.
#[async_trait]
pub trait QueryEngine: Send + Sync {
    /// Starts `query`; returns its execution id.
    ///
    /// # Errors
    /// [`PortError::Permanent`] for a query refused outright (invalid
    /// request); [`PortError::Transient`] for throttling and service errors.
    async fn start(&self, query: &Query) -> Result<String, PortError>;

    /// Polls the query, with backoff, until it leaves `QUEUED`/`RUNNING` or
    /// `deadline` comes (then [`QueryState::Running`]). Throttled polls are
    /// retried, not reported.
    ///
    /// # Errors
    /// [`PortError`] when the state cannot be read at all (unknown id).
    async fn wait(&self, execution_id: &str, deadline: tokio::time::Instant) -> Result<QueryState, PortError>;

    /// One page of a succeeded query's results: the first when `token` is
    /// `None` (the header row Athena puts first is skipped there, and only
    /// there), else the page `token` names.
    ///
    /// # Errors
    /// [`PortError`] from the engine.
    async fn page(&self, execution_id: &str, token: Option<&str>) -> Result<ResultPage, PortError>;
}

/// An HTTP request to a vendor.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpRequest {
    /// Method.
    pub method: HttpMethod,
    /// Absolute URL including the query string.
    pub url: url::Url,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// Body bytes (JSON), if any.
    pub body: Option<Bytes>,
    /// Total time allowed for the call.
    pub timeout: Duration,
    /// Address ranges beyond public ones the call may connect to (the SSRF
    /// guard checks the resolved addresses).
    pub access: NetworkAccess,
    /// Largest body read, in bytes: reading stops past it with
    /// [`PortError::TooLarge`]. `None`: no cap.
    pub max_body_bytes: Option<u64>,
}

/// An HTTP response.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// Whole body.
    pub body: Bytes,
    /// Held while this response (or a clone) lives when its body is a
    /// large one: a client may let one large body at a time into memory
    /// ([`LargeBodyTurn`]); `None` for a small body.
    pub turn: Option<LargeBodyTurn>,
}

/// One process's turn to hold a large response body: while a response
/// holding it lives (read, parsed, forwarded), the client reads no other
/// large body, so a batch of large pages costs one page of memory at a
/// time instead of one per message. Dropping the last clone ends the turn.
#[derive(Clone, Debug)]
pub struct LargeBodyTurn(pub std::sync::Arc<tokio::sync::OwnedMutexGuard<()>>);

impl PartialEq for LargeBodyTurn {
    /// Turns carry no data: any two compare equal.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Makes HTTP calls.
#[async_trait]
pub trait HttpClient: Send + Sync {
    /// Sends `request` and returns the response, whatever its status
    /// (redirects are returned, not followed).
    ///
    /// # Errors
    /// [`PortError::Transient`] for time-outs and connection failures;
    /// [`PortError::Permanent`] (operation `SSRF guard`) for an address the
    /// request's `access` refuses, naming host and address;
    /// [`PortError::TooLarge`] for a body past `max_body_bytes`.
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, PortError>;
}

/// Address ranges a call may reach besides public unicast addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetworkAccess {
    /// Loopback (`127.0.0.0/8`, `::1`).
    pub loopback: bool,
    /// Private: RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), shared address
    /// space (RFC 6598, `100.64/10`) and unique-local IPv6 (RFC 4193,
    /// `fc00::/7`).
    pub private: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_printable_ascii_and_short() {
        assert_eq!(sanitize_subject(""), None);
        assert_eq!(sanitize_subject(" \n\t "), None);
        assert_eq!(sanitize_subject("  Pipeline\nfailed:\t\tcafé  "), Some("Pipeline failed: caf?".to_string()));
        let long = "x".repeat(300);
        assert_eq!(sanitize_subject(&long).map(|s| s.len()), Some(SNS_MAX_SUBJECT_CHARS));
        let spaced = format!("{} tail", "y".repeat(SNS_MAX_SUBJECT_CHARS - 1));
        let cut = sanitize_subject(&spaced).unwrap();
        assert!(cut.len() <= SNS_MAX_SUBJECT_CHARS && !cut.ends_with(' '));
    }

    /// Notify's alert subjects: non-ASCII and line breaks in a pipeline or
    /// function name never reach SNS, and a long one is cut at the limit.
    #[test]
    fn alert_subjects_are_printable_ascii_and_short() {
        let subject = sanitize_subject(&format!("ação\n{}", "x".repeat(200))).expect("printable text left");
        assert_eq!(subject.chars().count(), SNS_MAX_SUBJECT_CHARS);
        assert!(subject.chars().all(|c| c.is_ascii_graphic() || c == ' '));
    }
}
