//! What the handler is given: its settings ([`RequestConfig`]), what it keeps warm across
//! invocations ([`Warm`]: OAuth tokens, rate budgets) and its ports ([`Deps`]). The Lambda's `main.rs`
//! and the CLI's local runtime build them.

use crate::{auth, trust};
use std::time::Duration;
use tributary_core::batch::DeadLetterTarget;
use tributary_core::metrics::MetricsTarget;
use tributary_core::ports::{HttpClient, ObjectStore, QueueSender, SecretStore, TopicPublisher};
use tributary_core::tenant::Tenants;

/// Default maximum message size: 256 KiB, SQS's classic `MaximumMessageSize`
/// (Amazon SQS quotas: a queue's `MaximumMessageSize` is 1 KiB to 256 KiB by
/// default and may be raised to 1 MiB; SNS publishes up to 256 KiB). Set
/// `MAX_MESSAGE_BYTES` to the persist queue's own `MaximumMessageSize`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 262_144;
/// Default largest response body read: 64 MiB. Request's memory is sized
/// for it: see [`peak_memory_bytes`].
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// Memory one page costs at its peak, per byte of its body: the body, the
/// tokenizer's tape (about 1.6 bytes a byte), then the records' text copied
/// once for forwarding. `request-bench` (bench/) measured 3.0 (a 60 MiB page:
/// 200 MB peak RSS, 16 MiB: 61 MB); 3.5 keeps a margin for bodies with more
/// tokens per byte.
pub const PAGE_MEMORY_PER_BODY_BYTE: f64 = 3.5;

/// Memory of the process before any page: runtime, TLS, allocator, AWS
/// SDK clients (about 10 MB measured; Lambda's own runtime and extensions
/// take more): 32 MB.
pub const BASE_MEMORY_BYTES: u64 = 32_000_000;

/// Request's peak memory, in bytes, for a batch of `batch_size` messages
/// handled at once whose bodies reach `max_response_bytes`: one large body
/// at a time (the client's large-body turn,
/// [`crate::http::HttpOptions::large_body_bytes`], `large_body_bytes`), so
/// one page at the cap plus `batch_size - 1` bodies just under the turn's
/// threshold. The template's `MemorySize` must hold it (a template test
/// checks `MAX_RESPONSE_BYTES`, the mapping's `BatchSize` and `MemorySize`
/// against it).
pub fn peak_memory_bytes(max_response_bytes: u64, batch_size: u64, large_body_bytes: u64) -> u64 {
    let page = |bytes: u64| (bytes as f64 * PAGE_MEMORY_PER_BODY_BYTE) as u64;
    BASE_MEMORY_BYTES + page(max_response_bytes) + batch_size.saturating_sub(1) * page(large_body_bytes)
}
/// Most redirects followed for one call (each target re-checked).
pub const MAX_REDIRECTS: usize = 5;

/// Request's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestConfig {
    /// Largest message sent to `reply_to`, in bytes; larger record pages go
    /// by claim check (`MAX_MESSAGE_BYTES`, default 262144: SQS's default
    /// `MaximumMessageSize`; up to 1048576 for queues raised to 1 MiB).
    pub max_message_bytes: usize,
    /// Calls per message, first included (`HTTP_MAX_ATTEMPTS`, default 3).
    pub max_attempts: usize,
    /// First backoff delay; doubles per retry, with full jitter; also the
    /// least wait after `Retry-After: 0` (default 200 ms).
    pub base_delay: Duration,
    /// Longest backoff delay (default 5 s).
    pub max_delay: Duration,
    /// Longest `Retry-After` waited inside an invocation
    /// (`MAX_RETRY_AFTER_SECS`, default 30 s); longer ones fail the record
    /// for SQS to redeliver after its visibility timeout.
    pub max_retry_after: Duration,
    /// Total time allowed for one HTTP call (`HTTP_TIMEOUT_SECS`, default
    /// 30 s); a message's `policy.timeout_secs` may only lower it, and the
    /// invocation's remaining time always bounds it.
    pub timeout: Duration,
    /// Time kept before the invocation's deadline for forwarding the result
    /// (default 3 s): no call or wait runs into it.
    pub deadline_reserve: Duration,
    /// Largest response body read (`MAX_RESPONSE_BYTES`, default 64 MiB); a
    /// message's `policy.response.max_bytes` may only lower it.
    pub max_response_bytes: u64,
    /// Records of a batch handled at once (default 5).
    pub concurrency: usize,
    /// Request instances that may call at once (`REQUEST_MAX_CONCURRENCY`:
    /// the request queue's event source mapping `MaximumConcurrency`).
    /// Each instance keeps to `1/max_instances` of a pipeline's rate budget
    /// ([`rate::share`](crate::rate::share)), so together they keep to the spec's. Default 1:
    /// one process, as in the local runtime, whose workers share one
    /// [`Warm`] and so one budget.
    pub max_instances: std::num::NonZeroU32,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// The run-events topic (`RUN_EVENTS_TOPIC_ARN`): a `cursor` run whose
    /// last page count, written by Request, completes it is announced there.
    pub run_events_topic: Option<String>,
    /// Where the EMF metrics of each message go (records fetched, API
    /// latency, retries, throttles).
    pub metrics: MetricsTarget,
    /// Request's own queue (`REQUEST_QUEUE_URL`; locally its name): a
    /// vendor's `Retry-After` longer than `max_retry_after` makes the
    /// message visible again after that pause there
    /// (`ChangeMessageVisibility`) instead of after the queue's visibility
    /// timeout. `None`: left to the visibility timeout.
    pub own_queue: Option<String>,
    /// What messages may use: secrets and their hosts, network allowances,
    /// answer destinations (`SECRET_GRANTS`, `ALLOW_LOOPBACK`,
    /// `ALLOW_PRIVATE_NETWORKS`, `REPLY_DESTINATIONS`); the default grants
    /// nothing. See [`trust`].
    pub trust: trust::Trust,
    /// Who may send, and which pipelines each sender owns (`TENANTS`,
    /// `STACK_SENDERS`); the default, [`Tenants::Single`], trusts every
    /// sender the queue admits. See [`tributary_core::tenant`].
    pub tenants: Tenants,
}

impl Default for RequestConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(30),
            timeout: Duration::from_secs(30),
            deadline_reserve: Duration::from_secs(3),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            concurrency: 5,
            max_instances: std::num::NonZeroU32::MIN,
            dead_letter: None,
            run_events_topic: None,
            metrics: MetricsTarget::Off,
            own_queue: None,
            trust: trust::Trust::default(),
            tenants: Tenants::default(),
        }
    }
}

/// State kept across warm invocations: OAuth tokens and rate budgets. Build
/// once per process (at cold start; the local runtime shares one between
/// all its workers).
#[derive(Debug, Default)]
pub struct Warm {
    /// OAuth access tokens.
    pub tokens: auth::TokenCache,
    /// Per-pipeline rate budgets.
    pub rates: crate::rate::RateLimits,
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
    /// Holds claim-check payloads and the ledger of `cursor` runs.
    pub store: &'a dyn ObjectStore,
    /// Reads credentials by secret id.
    pub secrets: &'a dyn SecretStore,
    /// Tokens and rate budgets that outlive one invocation.
    pub warm: &'a Warm,
    /// When the invocation ends (Lambda's `Context.deadline`, see
    /// [`tributary_core::deadline::from_epoch_ms`]): no call or wait runs
    /// past it.
    pub deadline: tokio::time::Instant,
    /// Settings.
    pub config: &'a RequestConfig,
}
