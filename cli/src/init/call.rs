//! init's vendor calls, made by Request's own code: its HTTP client behind
//! the SSRF guard, credentials read by secret id, redirects re-checked,
//! retries with `Retry-After` honoured, and (to prove a spec) its whole
//! handler, whose replies land on an in-process broker and whose ledger
//! writes land in a scratch directory that is removed afterwards.
//!
//! Every call counts against one budget ([`MAX_CALLS`], retries and
//! redirects included), so init calls a vendor a few times at most.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use adapters::local::{Broker, DirStore, FileSecrets, QueueConfig};
use contracts::RequestMessage;
use request::http::ReqwestClient;
use request::{Fetched, Outcome, RequestError};
use tributary_core::metrics::Metrics;
use tributary_core::ports::{HttpClient, HttpRequest, HttpResponse, PortError};
use tributary_core::topology;

/// Most HTTP calls one `tributary init` makes, retries and redirects
/// included: page 1, then at most a few candidate specs proved on two
/// pages each.
pub const MAX_CALLS: usize = 20;

/// Largest body init reads: 16 MiB (a first page is far smaller).
pub const MAX_BODY_BYTES: u64 = 16 << 20;

/// The time each handled message may take, retries and `Retry-After`
/// waits included (Request's own deadline in the Lambda is the
/// invocation's; 120 s is the local runtime's).
const CALL_DEADLINE: Duration = Duration::from_secs(120);

/// The queues Request's replies land on while a spec is proved.
const QUEUES: [&str; 3] = [topology::REQUEST_QUEUE, topology::PERSIST_QUEUE, topology::ORCHESTRATOR_QUEUE];

/// Request's ports and settings for init.
pub struct Caller {
    http: Budgeted,
    secrets: FileSecrets,
    warm: request::Warm,
    config: request::RequestConfig,
    broker: Broker,
    store: DirStore,
    /// Removed when the caller is dropped.
    _scratch: tempfile::TempDir,
}

impl Caller {
    /// A caller reading secrets from `TRIBUTARY_SECRET_<ID>` or
    /// `secrets_file`, and granting what `trust` grants (the spec's own
    /// secret for its origin, the local queues as destinations).
    ///
    /// # Errors
    /// The HTTP client cannot be built, or no scratch directory made.
    pub fn new(secrets_file: std::path::PathBuf, trust: request::trust::Trust) -> anyhow::Result<Self> {
        let scratch = tempfile::tempdir()?;
        let broker = Broker::new();
        for name in QUEUES {
            broker.create_queue(QueueConfig {
                name: name.to_string(),
                visibility_timeout: Duration::from_secs(30),
                max_message_bytes: usize::try_from(MAX_BODY_BYTES * 2).unwrap_or(usize::MAX),
                redrive: None,
            });
        }
        let config = request::RequestConfig {
            // Records always travel inline here: nothing goes by claim check.
            max_message_bytes: usize::try_from(MAX_BODY_BYTES * 2).unwrap_or(usize::MAX),
            max_response_bytes: MAX_BODY_BYTES,
            trust,
            ..request::RequestConfig::default()
        };
        Ok(Self {
            http: Budgeted { inner: ReqwestClient::new()?, calls: AtomicUsize::new(0) },
            secrets: FileSecrets::new(secrets_file),
            warm: request::Warm::default(),
            config,
            store: DirStore::new(scratch.path()),
            broker,
            _scratch: scratch,
        })
    }

    /// HTTP calls made so far.
    pub fn calls(&self) -> usize {
        self.http.calls.load(Ordering::SeqCst).min(MAX_CALLS)
    }

    /// Whether the call budget is spent.
    pub fn spent(&self) -> bool {
        self.http.calls.load(Ordering::SeqCst) >= MAX_CALLS
    }

    fn deps(&self) -> request::Deps<'_> {
        request::Deps {
            http: &self.http,
            queue: &self.broker,
            topics: &self.broker,
            store: &self.store,
            secrets: &self.secrets,
            warm: &self.warm,
            deadline: tokio::time::Instant::now() + CALL_DEADLINE,
            config: &self.config,
        }
    }

    /// Makes `message`'s call as Request does (after the deployment's
    /// checks) and returns the response, for init to read itself.
    ///
    /// # Errors
    /// [`RequestError`], its text scrubbed of the credentials.
    pub async fn fetch(&self, message: &RequestMessage) -> Result<Fetched, RequestError> {
        self.config.trust.check(message)?;
        let request = request::http_request(message, &self.config);
        let metrics = Mutex::new(Metrics::new("request", &message.pipeline));
        request::fetch(message, request, self.deps(), &metrics).await
    }

    /// Handles `message` as Request's handler does: its replies (records,
    /// a probe's total, a cursor run's next page) wait on the queue they
    /// were sent to ([`Caller::take`]).
    ///
    /// # Errors
    /// [`RequestError`], as the handler reports it.
    pub async fn handle(&self, message: RequestMessage) -> Result<Outcome, RequestError> {
        request::handle_message(message, self.deps()).await
    }

    /// The message bodies waiting on `queue`, which is left empty.
    pub fn take(&self, queue: &str) -> Vec<String> {
        let mut bodies = Vec::new();
        while let Ok(records) = self.broker.receive(queue, 10) {
            if records.is_empty() {
                break;
            }
            for record in records {
                if let Some(receipt) = record.receipt_handle.as_deref() {
                    self.broker.delete(queue, receipt);
                }
                bodies.extend(record.body);
            }
        }
        bodies
    }

    /// Empties the queues of what an earlier proof left there.
    pub fn clear(&self) {
        for queue in QUEUES {
            self.take(queue);
        }
    }

    /// The object at `key` in the scratch store (a claim check).
    ///
    /// # Errors
    /// The store's.
    pub async fn object(&self, key: &str) -> Result<bytes::Bytes, PortError> {
        tributary_core::ports::ObjectStore::get(&self.store, key).await
    }
}

/// Request's HTTP client, refusing calls past [`MAX_CALLS`].
struct Budgeted {
    inner: ReqwestClient,
    calls: AtomicUsize,
}

#[async_trait]
impl HttpClient for Budgeted {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, PortError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= MAX_CALLS {
            return Err(PortError::permanent_msg(
                "HTTP call",
                contracts::redacted_url(&request.url),
                format!("init calls a vendor at most {MAX_CALLS} times, and they are spent"),
            ));
        }
        self.inner.send(request).await
    }
}
