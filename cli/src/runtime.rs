//! The local runtime: the five functions' handlers over in-process queues
//! with SQS semantics, topics with SNS fan-out, and a directory as the bucket.
//!
//! The wiring comes from `tributary_core::topology`, the same table the AWS stack
//! follows: each work queue is drained by its function in batches of the
//! declared size, with the declared visibility timeout and redrive policy;
//! the DLQs are drained by Notify, whose alerts are printed and appended to
//! `<lake>/_alerts.jsonl`. Handlers return partial batch responses; the
//! runtime deletes the successful records and leaves the failed ones to
//! reappear after their visibility timeout (on the broker's virtual clock),
//! exactly as an SQS event source mapping would.
//!
//! Each spec run gets its own tenant ([`spec_tenant`]): Request and Persist
//! authenticate every message as on AWS, by its `SenderId`.
//!
//! Request reads secrets from `TRIBUTARY_SECRET_<ID>` or
//! `<lake>/_secrets.json`; its OAuth tokens and rate budgets are shared by
//! all workers; each invocation's deadline is the function's time-out from
//! the topology, as in Lambda.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::{DateTime, Utc};

use adapters::local::{Broker, DirCatalog, DirStore, FileSecrets, QueueConfig, Subscription};
use contracts::spec::PipelineSpec;
use contracts::{Alert, RunId};
use request::http::ReqwestClient;
use tributary_core::ledger;
use tributary_core::ports::{HttpClient, HttpRequest, HttpResponse, PortError, QueryEngine};
use tributary_core::tenant::{self, TenantGrant, Tenants};
use tributary_core::topology::{self, Function};

use crate::scheduler::{self, EventSource};

/// Settings of a local run.
#[derive(Clone, Debug)]
pub struct LocalOptions {
    /// The lake directory (the bucket).
    pub lake: PathBuf,
    /// Batches of one queue handled at once (Lambda concurrency), default 4.
    pub concurrency: usize,
    /// Queues' `MaximumMessageSize`, default 262144 (256 KiB).
    pub max_message_bytes: usize,
    /// Request's settings.
    pub request: request::RequestConfig,
    /// Persist's settings.
    pub persist: persist::PersistConfig,
    /// Whether a vendor's pause (a long `Retry-After`, after which Request
    /// sends the page again delayed) passes in real time, as the vendor's
    /// own clock does (default `true`): the run waits it out. `false`: on
    /// the virtual clock, like every queue timeout (tests of a vendor that
    /// throttles by call count, not by time).
    pub real_time_pauses: bool,
    /// Most bytes of fetched pages the persist queue holds before Request
    /// is held back (default [`LocalOptions::DEFAULT_PERSIST_QUEUE_BUDGET_BYTES`];
    /// never less than [`LocalOptions::persist_queue_budget`] makes it).
    /// See [Memory](LocalRuntime#memory).
    pub persist_queue_budget_bytes: usize,
    /// Most bytes of page requests the request queue holds before the
    /// Orchestrator is held back (default
    /// [`LocalOptions::DEFAULT_REQUEST_QUEUE_BUDGET_BYTES`]). See
    /// [Memory](LocalRuntime#memory).
    pub request_queue_budget_bytes: usize,
}

impl LocalOptions {
    /// Defaults for `lake`.
    pub fn new(lake: impl Into<PathBuf>) -> Self {
        let lake = lake.into();
        let metrics = tributary_core::metrics::MetricsTarget::File(lake.join("_metrics.jsonl"));
        Self {
            lake,
            concurrency: 4,
            max_message_bytes: request::DEFAULT_MAX_MESSAGE_BYTES,
            request: request::RequestConfig {
                dead_letter: Some(dead_letter_target(topology::REQUEST_QUEUE)),
                metrics: metrics.clone(),
                trust: local_trust(),
                tenants: local_tenants(),
                own_queue: Some(topology::REQUEST_QUEUE.into()),
                ..request::RequestConfig::default()
            },
            persist: persist::PersistConfig {
                dead_letter: Some(dead_letter_target(topology::PERSIST_QUEUE)),
                metrics,
                tenants: local_tenants(),
                ..persist::PersistConfig::default()
            },
            real_time_pauses: true,
            persist_queue_budget_bytes: Self::DEFAULT_PERSIST_QUEUE_BUDGET_BYTES,
            request_queue_budget_bytes: Self::DEFAULT_REQUEST_QUEUE_BUDGET_BYTES,
        }
    }

    /// Fetched pages the persist queue holds, by default, before Request
    /// waits: 16 MiB, about 70 pages of 1,000 demo customers (230 KiB
    /// each) or 64 of the largest inline page (256 KiB; a larger page goes
    /// by claim check and weighs its key). Persist takes at most
    /// `concurrency` batches of 5 pages at once (5 MiB at the default 4),
    /// so as much again is waiting whenever a Persist slot frees, and
    /// Request, which fetches faster than Persist writes, refills it long
    /// before it runs dry: Persist never waits for lack of pages.
    pub const DEFAULT_PERSIST_QUEUE_BUDGET_BYTES: usize = 16 << 20;

    /// Page requests the request queue holds, by default, before the
    /// Orchestrator plans more: 1 MiB, about 1,500 requests of a
    /// count-first run (about 700 bytes each), against Request's 4 x 5 in
    /// flight at the default concurrency. The Orchestrator plans 1,000
    /// pages at a time (`PageSeries::CHUNK`), so the queue holds at most
    /// about 2 MiB of requests whatever the run's size.
    pub const DEFAULT_REQUEST_QUEUE_BUDGET_BYTES: usize = 1 << 20;

    /// The persist queue's budget in effect: `persist_queue_budget_bytes`,
    /// raised to twice what Persist's invocations take at once (`concurrency`
    /// batches of full-size messages), so a high `concurrency` is never
    /// starved by a small budget.
    pub fn persist_queue_budget(&self) -> usize {
        let batch = topology::queue(topology::PERSIST_QUEUE).map_or(10, |q| q.batch_size);
        let in_flight = self.concurrency.max(1).saturating_mul(batch).saturating_mul(self.max_message_bytes);
        self.persist_queue_budget_bytes.max(in_flight.saturating_mul(2))
    }
}

/// What messages may use locally, before any spec is run: answers to the
/// topology's queues and topics, loopback and private addresses (the
/// machine's owner runs the specs: each spec's own `allow` still applies),
/// and no secret: [`LocalRuntime::run`] grants each spec's secret to that
/// spec's hosts and pipeline (see `request::trust`). No secret prefix:
/// secret ids are read as written (`TRIBUTARY_SECRET_<ID>`,
/// `<lake>/_secrets.json`).
pub fn local_trust() -> request::trust::Trust {
    let destinations =
        topology::QUEUES.iter().map(|q| q.name.to_string()).chain(topology::TOPICS.iter().map(|t| t.to_string()));
    request::trust::Trust {
        secrets: Some(BTreeMap::new()),
        networks: tributary_core::ports::NetworkAccess { loopback: true, private: true },
        destinations: Some(destinations.collect()),
        secret_prefix: request::secret_ref::SecretPrefix::default(),
    }
}

/// Who may send locally, before any spec is run: the runtime's own
/// functions (the broker sends as [`tenant::LOCAL_STACK_SENDER`]) and no
/// one else; [`LocalRuntime::run`] gives each spec its own tenant, named
/// after its pipeline, owning that pipeline and its dataset and sending as
/// [`tenant::local_sender`] (tests send as one through
/// `Broker::send_as`).
pub fn local_tenants() -> Tenants {
    Tenants::stack_only(&[tenant::LOCAL_STACK_SENDER])
}

/// The tenant the local runtime gives `spec`.
pub fn spec_tenant(spec: &PipelineSpec) -> TenantGrant {
    TenantGrant {
        senders: vec![tenant::local_sender(&spec.pipeline)],
        queues: Vec::new(),
        pipelines: vec![spec.pipeline.clone()],
        datasets: vec![spec.target.dataset.clone()],
        opens_runs: false,
    }
}

/// The DLQ of work queue `queue` and its `maxReceiveCount`, from the topology.
pub fn dead_letter_target(queue: &str) -> tributary_core::batch::DeadLetterTarget {
    let (dlq, max_receive_count) =
        topology::queue(queue).and_then(|q| q.redrive).unwrap_or((topology::NOTIFY_DLQ, topology::MAX_RECEIVE_COUNT));
    tributary_core::batch::DeadLetterTarget { dlq: dlq.to_string(), max_receive_count }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSummary {
    /// Pipeline.
    pub pipeline: String,
    /// Run id.
    pub run_id: String,
    /// HTTP calls made (retries included).
    pub requests: u64,
    /// Pages the run holds (receipts written, by this attempt or an
    /// earlier one of the same run).
    pub pages: u64,
    /// Of them, the pages persisted before this attempt began: a re-run
    /// whose pages all went to a DLQ persisted none.
    pub pages_before: u64,
    /// Whether the run was complete before this attempt (a plain re-run
    /// of it fetches and changes nothing): its [`RunSummary::schema_changes`]
    /// and [`RunSummary::table_notes`] are then its earlier completion's.
    pub completed_before: bool,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Whether the run completed (its `_SUCCESS` marker): an Iceberg
    /// dataset's records are in its table only then.
    pub completed: bool,
    /// Records quarantined with a reason.
    pub records_quarantined: u64,
    /// Messages that ended in a DLQ during the run, per DLQ (sent there
    /// with their reason by the functions, or moved by a redrive policy).
    pub dead_lettered: BTreeMap<String, u64>,
    /// Alerts Notify published during the run.
    pub alerts: Vec<Alert>,
    /// Parquet objects written.
    pub data_keys: Vec<String>,
    /// The quarantine files of the run's pages (keys in the lake: JSON
    /// lines, each record with its reason).
    pub quarantine_keys: Vec<String>,
    /// Why the run holds less than the source (`strategy.max_pages`
    /// reached with a next page offered); `None` for a whole run.
    pub truncated: Option<String>,
    /// Why the run holds records more than once (pages the vendor served
    /// again, or more records than it announced); `None` when nothing says
    /// it does (`tributary_core::ledger::duplicated`).
    pub duplicated: Option<String>,
    /// How the run changed its dataset's columns (or, frozen, would
    /// have): one line per change.
    pub schema_changes: Vec<String>,
    /// What the run's table commit found worth a look (a merge's rows
    /// without a key, versions it could not rank): one line each.
    pub table_notes: Vec<String>,
    /// What to do next when this attempt changed nothing a user could
    /// expect it to (a run complete before it, a run stuck with every
    /// page in and its completion refused), `None` otherwise.
    pub next_step: Option<String>,
    /// Wall time.
    pub wall_time: Duration,
}

impl RunSummary {
    /// Messages that ended in a DLQ.
    pub fn dead_letters(&self) -> u64 {
        self.dead_lettered.values().sum()
    }

    /// Whether every record was quarantined: records came, none reached
    /// the table.
    pub fn all_quarantined(&self) -> bool {
        self.records_persisted == 0 && self.records_quarantined > 0
    }

    /// Whether the run is a success: completed (its `_SUCCESS` marker),
    /// nothing dead-lettered, not every record quarantined, not
    /// truncated, and no record held twice.
    pub fn succeeded(&self) -> bool {
        self.completed
            && self.dead_letters() == 0
            && !self.all_quarantined()
            && self.truncated.is_none()
            && self.duplicated.is_none()
    }
}

impl std::fmt::Display for RunSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "pipeline {}  run {}", self.pipeline, self.run_id)?;
        writeln!(f, "  requests made        {}", self.requests)?;
        let pages = match self.pages_before {
            0 => self.pages.to_string(),
            before => format!(
                "{}  (the run holds {}: {before} from earlier attempts)",
                self.pages.saturating_sub(before),
                self.pages
            ),
        };
        writeln!(f, "  pages persisted      {pages}")?;
        let staged = if self.completed || self.pages == 0 {
            ""
        } else {
            "  (the run did not complete; an Iceberg table shows none of them until it does, a Parquet dataset shows them already; see `tributary status` and `tributary dlq`)"
        };
        writeln!(f, "  records persisted    {}{staged}", self.records_persisted)?;
        let mut note =
            if self.all_quarantined() { "  (every record: the run is not a success)" } else { "" }.to_string();
        // Where they are, with their reasons (a trial found only the count).
        if let Some(first) = self.quarantine_keys.first() {
            let more = match self.quarantine_keys.len() - 1 {
                0 => String::new(),
                n => format!(" and {n} more file(s)"),
            };
            note.push_str(&format!("  (each with its reason: {first}{more}, in the lake)"));
        }
        writeln!(f, "  records quarantined  {}{note}", self.records_quarantined)?;
        let dead: Vec<String> = self.dead_lettered.iter().map(|(q, n)| format!("{q}: {n}")).collect();
        let detail = if dead.is_empty() { String::new() } else { format!("  ({})", dead.join(", ")) };
        writeln!(f, "  messages in DLQs     {}{detail}", self.dead_letters())?;
        writeln!(f, "  alerts               {}", self.alerts.len())?;
        if let Some(reason) = &self.truncated {
            writeln!(f, "  truncated            {reason} (the run is not a success)")?;
        }
        if let Some(reason) = &self.duplicated {
            writeln!(f, "  duplicated           {reason} (the run is not a success)")?;
        }
        if self.completed_before && !(self.schema_changes.is_empty() && self.table_notes.is_empty()) {
            // A trial read a re-run's summary as changing the schema again.
            writeln!(
                f,
                "  {:<20} the schema changes and table notes below are the run's earlier completion's; this \
                 attempt changed nothing",
                "as completed before"
            )?;
        }
        for (i, change) in self.schema_changes.iter().enumerate() {
            let label = if i == 0 { "schema changes" } else { "" };
            writeln!(f, "  {label:<20} {change}")?;
        }
        for (i, note) in self.table_notes.iter().enumerate() {
            let label = if i == 0 { "table notes" } else { "" };
            writeln!(f, "  {label:<20} {note}")?;
        }
        if let Some(step) = &self.next_step {
            writeln!(f, "  next step            {step}")?;
        }
        write!(f, "  wall time            {:.2} s", self.wall_time.as_secs_f64())
    }
}

/// Counts the HTTP calls made through it (a decorator over the real client).
#[derive(Debug)]
pub struct CountingHttp<C> {
    inner: C,
    calls: AtomicU64,
}

impl<C> CountingHttp<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> Self {
        Self { inner, calls: AtomicU64::new(0) }
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl<C: HttpClient> HttpClient for CountingHttp<C> {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, PortError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.send(request).await
    }
}

/// Runs pipelines on one machine.
///
/// # Memory
///
/// Every queued message is in this process's memory, where on AWS a queue
/// is a durable buffer of any depth. Two budgets keep a run's memory flat
/// whatever its size, by backpressure on delivery
/// ([`Broker::set_backpressure`]; the queues' semantics are otherwise
/// SQS's: nothing is lost, dropped or received more often):
///
/// - Request is handed no batch while the persist queue holds more than
///   [`LocalOptions::persist_queue_budget`] bytes: pages fetched faster
///   than Persist writes them wait at the vendor, not in memory. The
///   persist queue then holds at most that budget plus what the Request
///   invocations already running send (`concurrency` x 5 pages).
/// - The Orchestrator plans a count-first run's pages 1,000 at a time, one
///   chunk per invocation (`Fanout::max_pages_per_invocation`, the same
///   continuation a Lambda near its deadline sends), and is handed no
///   batch while the request queue holds more than
///   [`LocalOptions::request_queue_budget_bytes`]: a 100,000-page run's
///   requests are planned as Request takes them, not all at once.
///
/// Neither queue's consumer is held back by the other's producer, so the
/// budgets never stall a run: Persist drains its queue under the budget,
/// then Request is handed batches again, and so on up the chain.
pub struct LocalRuntime {
    options: LocalOptions,
    ports: Ports,
    /// Request's trust settings: `options.request.trust` plus the secrets
    /// of the specs run so far, each to its own hosts and pipeline.
    trust: std::sync::Mutex<request::trust::Trust>,
    /// Request's and Persist's tenants: `options.request.tenants` plus a
    /// tenant per spec run so far ([`spec_tenant`]).
    tenants: std::sync::Mutex<Tenants>,
    /// The run being driven, if any ([`LocalRuntime::in_flight`]).
    in_flight: std::sync::Mutex<Option<InFlight>>,
    /// When the vendor's last pause said on stderr ends (with no progress
    /// bar, stderr not a terminal), so that each pause is said once.
    pause_said: std::sync::Mutex<Option<std::time::Instant>>,
}

/// A vendor's pause (`Retry-After`, a rate limit) held in the request
/// queue at least this long is said on stderr when no progress bar shows
/// it: a run waiting in silence reads as hung. (Request waits out a
/// `Retry-After` of up to `MAX_RETRY_AFTER_SECS`, 30 s, inside the call;
/// a longer one holds the page in its queue.)
pub const PAUSE_SAID_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// The run a [`LocalRuntime`] is driving: what an interrupted `tributary
/// run` names so that it can be finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// The pipeline.
    pub pipeline: String,
    /// The run id.
    pub run_id: RunId,
    /// The scheduled time the run id derives from: `--scheduled-at` of
    /// this time is the same run.
    pub scheduled_at: DateTime<Utc>,
}

/// A failure of the runtime itself (not of a pipeline's messages).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The orchestrator refused the start event.
    #[error(transparent)]
    Orchestrator(#[from] orchestrator::OrchestratorError),
    /// A port failed outside any handler.
    #[error(transparent)]
    Port(#[from] PortError),
    /// Another `tributary run` holds this run ([`crate::lease`]).
    #[error(transparent)]
    InFlight(#[from] crate::lease::InFlight),
    /// The lake directory cannot be used.
    #[error("lake directory {path}: {message}")]
    Lake {
        /// Path.
        path: PathBuf,
        /// Problem (the source's text, if there is one).
        message: String,
        /// The I/O error, if one is the cause.
        #[source]
        source: Option<std::io::Error>,
    },
}

impl LocalRuntime {
    /// A runtime over `options.lake`, with the topology's queues and topics.
    ///
    /// # Errors
    /// [`RuntimeError`] when the lake directory cannot be created or the HTTP
    /// client cannot start.
    pub fn new(options: LocalOptions) -> Result<Self, RuntimeError> {
        let lake_error = |message: String, source: Option<std::io::Error>| RuntimeError::Lake {
            path: options.lake.clone(),
            message,
            source,
        };
        if options.lake.exists() && !options.lake.is_dir() {
            return Err(lake_error("it is a file, not a directory".into(), None));
        }
        std::fs::create_dir_all(&options.lake).map_err(|err| lake_error(err.to_string(), Some(err)))?;
        // Fail before the run rather than in every handler: the lake must take writes.
        let probe = options.lake.join(format!(".tributary-write-check-{}", std::process::id()));
        std::fs::write(&probe, b"").map_err(|err| lake_error(format!("cannot write there: {err}"), Some(err)))?;
        let _ = std::fs::remove_file(&probe);
        let broker = Arc::new(Broker::new());
        broker.set_real_time_delays(options.real_time_pauses);
        for decl in topology::QUEUES {
            broker.create_queue(QueueConfig {
                name: decl.name.into(),
                visibility_timeout: decl.visibility_timeout(),
                max_message_bytes: options.max_message_bytes,
                redrive: decl.redrive.map(|(dlq, count)| (dlq.to_string(), count)),
            });
        }
        // Memory flat whatever the run's size (see the type's docs).
        broker.set_backpressure(topology::REQUEST_QUEUE, topology::PERSIST_QUEUE, options.persist_queue_budget());
        broker.set_backpressure(
            topology::ORCHESTRATOR_QUEUE,
            topology::REQUEST_QUEUE,
            options.request_queue_budget_bytes,
        );
        for topic in topology::TOPICS {
            let mut subscriptions: Vec<Subscription> = topology::QUEUE_SUBSCRIPTIONS
                .iter()
                .filter(|s| s.topic == *topic)
                .map(|s| Subscription::Queue {
                    queue: s.queue.into(),
                    raw: s.raw,
                    filter: s.filter.iter().map(|(name, value)| (name.to_string(), vec![value.to_string()])).collect(),
                })
                .collect();
            if *topic == topology::ALERTS_TOPIC {
                subscriptions.push(Subscription::File { path: alerts_file(&options.lake) });
            }
            if *topic == topology::RUN_EVENTS_TOPIC {
                subscriptions.push(Subscription::File { path: options.lake.join("_run_events.jsonl") });
            }
            broker.create_topic(topic, subscriptions);
        }
        let store = Arc::new(DirStore::new(&options.lake));
        // The catalog wants an absolute warehouse path.
        let lake_root = std::path::absolute(&options.lake).map_err(|err| lake_error(err.to_string(), Some(err)))?;
        let ports = Ports {
            tables: Arc::new(tributary_iceberg::LocalCommitter::new(lake_root, store.clone())),
            store,
            catalog: Arc::new(DirCatalog::new(&options.lake)),
            http: Arc::new(CountingHttp::new(ReqwestClient::new()?)),
            engine: Arc::new(lakequery::LakeEngine::new(&options.lake)),
            secrets: Arc::new(FileSecrets::new(options.lake.join("_secrets.json"))),
            // One budget and token cache for every worker: a pipeline's rate
            // budget holds across the runtime's concurrent invocations.
            warm: Arc::new(request::Warm::default()),
            broker,
        };
        Ok(Self {
            ports,
            trust: std::sync::Mutex::new(options.request.trust.clone()),
            tenants: std::sync::Mutex::new(options.request.tenants.clone()),
            in_flight: std::sync::Mutex::new(None),
            pause_said: std::sync::Mutex::new(None),
            options,
        })
    }

    /// Lets Request use `spec`'s secret, for `spec`'s pipeline and hosts
    /// (done by [`LocalRuntime::run`]; for messages injected by hand).
    pub fn grant(&self, spec: &PipelineSpec) {
        self.trust.lock().unwrap_or_else(std::sync::PoisonError::into_inner).grant_spec(spec);
        self.tenants.lock().unwrap_or_else(std::sync::PoisonError::into_inner).grant(&spec.pipeline, spec_tenant(spec));
    }

    /// Keeps `spec` with run `run_id` (`_runs/<pipeline>/<run_id>/spec.json`,
    /// [`keys::run_spec_key`]): a later `tributary dlq redrive` of the
    /// run's dead letters grants what it grants ([`LocalRuntime::grant_run`]).
    /// A spec holds secret ids, never secret values.
    async fn keep_spec(&self, spec: &PipelineSpec, run_id: &RunId) -> Result<(), RuntimeError> {
        let key = tributary_core::keys::run_spec_key(&spec.pipeline, run_id);
        let bytes = serde_json::to_vec_pretty(spec)
            .map_err(|err| tributary_core::ports::PortError::permanent("encode the run's spec", key.clone(), err))?;
        tributary_core::ports::ObjectStore::put(self.ports.store.as_ref(), &key, bytes::Bytes::from(bytes)).await?;
        Ok(())
    }

    /// Grants what the spec kept with run `run_id` of `pipeline` grants
    /// ([`LocalRuntime::grant`]); `false` when the run has no kept spec
    /// (a run from before specs were kept: name it with `--spec`).
    ///
    /// # Errors
    /// [`RuntimeError`] when the kept spec cannot be read or is not a spec.
    pub async fn grant_run(&self, pipeline: &str, run_id: &str) -> Result<bool, RuntimeError> {
        let Ok(run_id) = RunId::new(run_id) else { return Ok(false) };
        let key = tributary_core::keys::run_spec_key(pipeline, &run_id);
        let bytes = match tributary_core::ports::ObjectStore::get(self.ports.store.as_ref(), &key).await {
            Ok(bytes) => bytes,
            Err(tributary_core::ports::PortError::NotFound { .. }) => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        let spec = PipelineSpec::from_value(
            serde_json::from_slice(&bytes)
                .map_err(|err| tributary_core::ports::PortError::permanent("read the run's spec", key.clone(), err))?,
        )
        .map_err(|err| tributary_core::ports::PortError::permanent("read the run's spec", key, err))?;
        self.grant(&spec);
        Ok(true)
    }

    /// The in-process broker (tests inject messages through it).
    pub fn broker(&self) -> &Arc<Broker> {
        &self.ports.broker
    }

    /// The lake store.
    pub fn store(&self) -> &Arc<DirStore> {
        &self.ports.store
    }

    /// Runs `spec` to completion: fires the Orchestrator with an EventBridge
    /// Scheduler event dated `now` (so the run id is `now` as
    /// `YYYYMMDDTHHMMSSZ`), then drains every queue.
    ///
    /// # Errors
    /// [`RuntimeError::Orchestrator`] when the start event is refused (an
    /// invalid spec); message failures are not errors but end in the summary.
    pub async fn run(&self, spec: &PipelineSpec, now: DateTime<Utc>) -> Result<RunSummary, RuntimeError> {
        self.run_replacing(spec, now, None).await
    }

    /// [`LocalRuntime::run`], the trigger carrying the re-run token
    /// `replace` (`tributary run --replace`): a completed run of `now` is
    /// re-run and replaces its rows in its Iceberg table
    /// (`tributary_core::rerun`); the same token again starts nothing.
    ///
    /// # Errors
    /// As [`LocalRuntime::run`]; a Parquet dataset with a token is refused
    /// ([`RuntimeError::Orchestrator`] naming `replace`).
    pub async fn run_replacing(
        &self,
        spec: &PipelineSpec,
        now: DateTime<Utc>,
        replace: Option<&str>,
    ) -> Result<RunSummary, RuntimeError> {
        let lease = self.lease(spec, &RunId::from_time(now))??;
        self.run_leased(spec, now, replace, lease).await
    }

    /// An ad-hoc run (`tributary run` without a time): [`LocalRuntime::run`]
    /// at `now`, or, when a run of that id exists or is in flight (another
    /// `tributary run` started in the same millisecond), at the next free
    /// millisecond: an ad-hoc time is only a name, so two ad-hoc runs are
    /// always two runs.
    ///
    /// # Errors
    /// As [`LocalRuntime::run`].
    pub async fn run_ad_hoc(&self, spec: &PipelineSpec, mut now: DateTime<Utc>) -> Result<RunSummary, RuntimeError> {
        loop {
            let run_id = RunId::from_time(now);
            // Under the lease, so that a run that was checked cannot start meanwhile.
            if let Ok(lease) = self.lease(spec, &run_id)? {
                let key = tributary_core::keys::run_spec_key(&spec.pipeline, &run_id);
                if !self.options.lake.join(&key).exists() {
                    return self.run_leased(spec, now, None, lease).await;
                }
            }
            now += chrono::Duration::milliseconds(1);
        }
    }

    /// The run this runtime drives now, or drove last (set when a run
    /// starts, never cleared): what a `tributary run` interrupted by
    /// Ctrl-C names.
    pub fn in_flight(&self) -> Option<InFlight> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Takes the lease of run `run_id` ([`crate::lease`]).
    fn lease(
        &self,
        spec: &PipelineSpec,
        run_id: &RunId,
    ) -> Result<Result<crate::lease::RunLease, crate::lease::InFlight>, RuntimeError> {
        crate::lease::RunLease::take(&self.options.lake, &spec.pipeline, run_id.as_str()).map_err(|err| {
            RuntimeError::Lake {
                path: self.options.lake.clone(),
                message: format!("cannot take the run's lock: {err}"),
                source: Some(err),
            }
        })
    }

    /// The run of `now`, its lease held until its summary is made: a
    /// second `tributary run` of this run id meanwhile is refused, not
    /// mixed into it.
    async fn run_leased(
        &self,
        spec: &PipelineSpec,
        now: DateTime<Utc>,
        replace: Option<&str>,
        _lease: crate::lease::RunLease,
    ) -> Result<RunSummary, RuntimeError> {
        let started = Instant::now();
        let calls_before = self.ports.http.calls();
        let dead_before = dead_letters(&self.ports.broker.stats());
        let alerts_before = read_alerts(&self.options.lake).len();
        let run_id = RunId::from_time(now);
        *self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(InFlight { pipeline: spec.pipeline.clone(), run_id: run_id.clone(), scheduled_at: now });
        self.grant(spec);
        self.keep_spec(spec, &run_id).await?;
        let store = self.ports.store.as_ref();
        let complete_before = crate::dlq::run_complete(store, &spec.pipeline, run_id.as_str()).await?;
        let archived_before = crate::dlq::archive_keys(store).await?;
        let receipts_prefix = tributary_core::keys::receipts_prefix(&spec.pipeline, &run_id);
        let receipts = tributary_core::ports::ObjectStore::list(store, &receipts_prefix).await?;
        // A re-run (`--replace`) of a completed or stuck run fetches every
        // page again (its reopen deletes the old fetch's receipts): none is
        // from an earlier attempt.
        let reopens =
            replace.is_some() && (complete_before || ledger::is_stuck(store, &spec.pipeline, &run_id).await?);
        let pages_held = tributary_core::keys::receipts_by_page(&receipts).len() as u64;
        let pages_before = if reopens { 0 } else { pages_held };
        // `--replace` of a time the lake has no run of: nothing to swap,
        // said in the summary (a trial's `--replace` with a time to the
        // second of an ad-hoc run added a second run, silently).
        let replaced_nothing = replace.is_some() && !reopens && pages_held == 0;

        let mut event = scheduler_event(spec, now);
        if let Some(token) = replace {
            event["replace"] = serde_json::Value::from(token);
        }
        let config = self.orchestrator_config();
        let deps = orchestrator::Deps {
            queue: self.ports.broker.as_ref(),
            config: &config,
            ledger: Some(self.ports.ledger()),
        };
        orchestrator::handle(event, now, tributary_core::deadline::after_timeout(Function::Orchestrator), deps).await?;
        self.drain().await;
        let finish_failed = self.finish_interrupted(spec, &run_id, replace.is_some()).await?;
        if !complete_before || replace.is_some() {
            // This attempt completed the run, or re-ran it whole (with no
            // new dead letter): an earlier attempt's dead letters are
            // resolved.
            let by = tributary_core::dead_letters::ResolvedBy::Rerun;
            crate::dlq::resolve_recovered(store, &spec.pipeline, run_id.as_str(), &archived_before, None, by).await?;
        }

        let totals = ledger::run_totals(self.ports.store.as_ref(), &spec.pipeline, &run_id).await?;
        let mut dead_lettered = dead_letters(&self.ports.broker.stats());
        for (queue, before) in dead_before {
            if let Some(n) = dead_lettered.get_mut(&queue) {
                *n -= before;
            }
        }
        dead_lettered.retain(|_, n| *n > 0);
        // The lake's alerts file is shared by every `tributary run` on it:
        // only this run's (a trial's summary listed another pipeline's
        // alerts as its own), and those that name no run.
        let alerts = read_alerts(&self.options.lake)
            .into_iter()
            .skip(alerts_before)
            .filter(|alert| alert_of(alert, &spec.pipeline, &run_id))
            .collect();
        let next_step = match finish_failed {
            Some(reason) => Some(finish_failed_step(spec, now, &run_id, &reason)),
            None => self.next_step(spec, now, &run_id, complete_before && replace.is_none(), replaced_nothing).await?,
        };
        Ok(RunSummary {
            pipeline: spec.pipeline.clone(),
            run_id: run_id.to_string(),
            requests: self.ports.http.calls() - calls_before,
            pages: totals.pages,
            pages_before,
            completed_before: complete_before && replace.is_none(),
            records_persisted: totals.records_persisted,
            completed: totals.completed,
            records_quarantined: totals.records_quarantined,
            dead_lettered,
            alerts,
            data_keys: totals.data_keys,
            quarantine_keys: totals.quarantine_keys,
            truncated: totals.truncated,
            duplicated: totals.duplicated,
            schema_changes: totals.schema_changes,
            table_notes: totals.table_notes,
            next_step,
            wall_time: started.elapsed(),
        })
    }

    /// Completes the run when, after this attempt's messages, it holds
    /// every page but is not complete ([`ledger::is_stuck`]): its last
    /// page's delivery died before completing it (a `tributary run` killed
    /// there; the local queue does not keep that message, as SQS would),
    /// so this attempt fetched nothing and nothing else would complete it
    /// ([`persist::finish_run`], what that delivery would have done). Not
    /// for a re-run (`replacing`), whose reopen fetches every page again.
    /// `Some(reason)` when the completion fails: the reason, for the
    /// summary's next step.
    ///
    /// # Errors
    /// [`RuntimeError`] when the ledger cannot be read.
    async fn finish_interrupted(
        &self,
        spec: &PipelineSpec,
        run_id: &RunId,
        replacing: bool,
    ) -> Result<Option<String>, RuntimeError> {
        let store = self.ports.store.as_ref();
        if replacing || !ledger::is_stuck(store, &spec.pipeline, run_id).await? {
            return Ok(None);
        }
        let deps = persist::Deps {
            store,
            queue: self.ports.broker.as_ref(),
            run_events: Some((self.ports.broker.as_ref(), topology::RUN_EVENTS_TOPIC)),
            catalog: Some(self.ports.catalog.as_ref()),
            tables: Some(self.ports.tables.as_ref()),
            config: &self.options.persist,
        };
        match persist::finish_run(&spec.target, &spec.pipeline, run_id, deps).await {
            Ok(completion) => {
                tracing::info!(?completion, "completed a run that held every page: its last delivery died before");
                Ok(None)
            }
            Err(err) => Ok(Some(err.to_string())),
        }
    }

    /// [`RunSummary::next_step`]: for a run that was complete before this
    /// attempt (`was_complete`, without `--replace`), that its pages were
    /// not fetched again (a trial took "records persisted 6" for a new
    /// fetch of a vendor's changed data); for a run stuck with every page
    /// in and not complete ([`ledger::is_stuck`]), that only a re-run with
    /// `--replace` (or a redrive of the letter that failed it) completes it;
    /// for a `--replace` of a time the lake held no page of a run at
    /// (`replaced_nothing`), that nothing was swapped and the run is new.
    async fn next_step(
        &self,
        spec: &PipelineSpec,
        now: DateTime<Utc>,
        run_id: &RunId,
        was_complete: bool,
        replaced_nothing: bool,
    ) -> Result<Option<String>, RuntimeError> {
        let at = RunId::scheduled_at_text(now);
        let iceberg = spec.target.table_format == contracts::TableFormat::Iceberg;
        if replaced_nothing {
            return Ok(Some(format!(
                "--replace: the lake held no page of a run at {at}, so nothing was swapped and this run was added as a new \
                 one; to replace a run, give its own time (`tributary status` lists the runs; an ad-hoc run's \
                 time has milliseconds)"
            )));
        }
        if was_complete {
            let again = if iceberg {
                format!("`tributary run SPEC --scheduled-at {at} --replace` fetches it again and swaps its rows")
            } else {
                "a Parquet dataset cannot swap a run's rows: start a new run (`tributary run SPEC`)".to_string()
            };
            return Ok(Some(format!(
                "this run was complete before this attempt, so its pages were not fetched again (the vendor's \
                 answers now are not compared with it); {again}"
            )));
        }
        if ledger::is_stuck(self.ports.store.as_ref(), &spec.pipeline, run_id).await? {
            let again = if iceberg {
                format!(
                    "fix the cause, then `tributary run SPEC --scheduled-at {at} --replace` fetches the run again \
                     and commits it"
                )
            } else {
                "fix the cause, then redrive the letter (`tributary dlq redrive`)".to_string()
            };
            return Ok(Some(format!(
                "the run holds every page but did not complete: its completion failed, and its dead letter says \
                 why (`tributary dlq list --run {run_id}`); {again}"
            )));
        }
        Ok(None)
    }

    fn orchestrator_config(&self) -> orchestrator::OrchestratorConfig {
        orchestrator::OrchestratorConfig {
            request_queue: topology::REQUEST_QUEUE.into(),
            persist_queue: topology::PERSIST_QUEUE.into(),
            orchestrator_queue: topology::ORCHESTRATOR_QUEUE.into(),
            athena_queue: topology::ATHENA_QUEUE.into(),
            query_results_topic: topology::QUERY_RESULTS_TOPIC.into(),
            dead_letter: Some(dead_letter_target(topology::ORCHESTRATOR_QUEUE)),
            // One chunk of page requests per invocation, the next one
            // held back by the request queue's budget (see `LocalRuntime`'s
            // docs, Memory).
            fanout: orchestrator::Fanout {
                max_pages_per_invocation: orchestrator::strategy::PageSeries::CHUNK,
                ..orchestrator::Fanout::default()
            },
        }
    }

    /// Delivers messages until every consumed queue is empty and nothing is
    /// in flight, each queue to its consumer as an event source mapping with
    /// `concurrency` as its maximum concurrency (see [`scheduler`]): an
    /// invocation that ends frees its slot at once, and a free slot takes
    /// the next visible batch, so a slow Persist batch never idles Request.
    /// When nothing is in flight and nothing is visible, the virtual clock
    /// jumps to the next visibility deadline.
    pub async fn drain(&self) {
        // Drawn on stderr only when it is a terminal; hidden in tests and CI.
        let progress = indicatif::ProgressBar::new(0);
        progress.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} [{bar:30}] {pos}/{len} requests  {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let sources: Vec<EventSource<Function>> = topology::QUEUES
            .iter()
            .filter_map(|decl| {
                Some(EventSource {
                    queue: decl.name,
                    batch_size: decl.batch_size,
                    batching_window_secs: decl.batching_window_secs,
                    consumer: decl.consumer?,
                })
            })
            .collect();
        scheduler::drain(
            &self.ports.broker,
            &sources,
            self.options.concurrency,
            |function, records| invoke(self.handles(), function, records),
            || self.show_progress(&progress),
        )
        .await;
        progress.finish_and_clear();
    }

    /// Requests done of requests planned so far, pages persisted, dead letters.
    fn show_progress(&self, progress: &indicatif::ProgressBar) {
        let stats = self.ports.broker.stats();
        let sent = |queue: &str| stats.sent.get(queue).copied().unwrap_or(0);
        let done = |queue: &str| sent(queue).saturating_sub(self.ports.broker.depth(queue) as u64);
        progress.set_length(sent(topology::REQUEST_QUEUE));
        progress.set_position(done(topology::REQUEST_QUEUE));
        let dead_by_queue = dead_letters(&stats);
        let dead: u64 = dead_by_queue.values().sum();
        // A page Persist gave up on has left its queue too, to its DLQ.
        let given_up = dead_by_queue.get(&dead_letter_target(topology::PERSIST_QUEUE).dlq).copied().unwrap_or(0);
        let persisted = done(topology::PERSIST_QUEUE).saturating_sub(given_up);
        let mut message = format!("{persisted} pages persisted  {dead} dead letters");
        if let Some(until) = self.ports.broker.next_release() {
            let wait = until.saturating_duration_since(std::time::Instant::now());
            let secs = wait.as_secs_f64().ceil();
            message.push_str(&format!("  the vendor asked for a pause: calling again in {secs} s"));
            let mut said = self.pause_said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if progress.is_hidden() && wait >= PAUSE_SAID_AFTER && *said != Some(until) {
                *said = Some(until);
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "the vendor asked for a pause (Retry-After or a rate limit): calling again in {secs} s; \
                     Ctrl-C stops the run and says how to finish it"
                );
            }
        }
        progress.set_message(message);
    }

    fn handles(&self) -> Handles {
        let tenants = self.tenants.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Handles {
            ports: self.ports.clone(),
            request: Arc::new(request::RequestConfig {
                trust: self.trust.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
                tenants: tenants.clone(),
                ..self.options.request.clone()
            }),
            persist: Arc::new(persist::PersistConfig { tenants, ..self.options.persist.clone() }),
            orchestrator: Arc::new(self.orchestrator_config()),
            athena: Arc::new(athena::AthenaConfig {
                dead_letter: Some(dead_letter_target(topology::ATHENA_QUEUE)),
                ..athena::AthenaConfig::new(topology::ATHENA_QUEUE)
            }),
            notify: Arc::new(notify_config(&self.options.lake)),
        }
    }
}

/// Owned handles a spawned invocation borrows its ports from.
#[derive(Clone)]
struct Handles {
    ports: Ports,
    request: Arc<request::RequestConfig>,
    persist: Arc<persist::PersistConfig>,
    orchestrator: Arc<orchestrator::OrchestratorConfig>,
    athena: Arc<athena::AthenaConfig>,
    notify: Arc<notify::NotifyConfig>,
}

/// The local implementations of the ports, shared by every invocation.
#[derive(Clone)]
struct Ports {
    broker: Arc<Broker>,
    store: Arc<DirStore>,
    catalog: Arc<DirCatalog>,
    /// Commits Iceberg datasets' runs to the lake's local catalog
    /// (`_iceberg/`, opened on the first commit).
    tables: Arc<tributary_iceberg::LocalCommitter>,
    http: Arc<CountingHttp<ReqwestClient>>,
    engine: Arc<dyn QueryEngine>,
    secrets: Arc<FileSecrets>,
    warm: Arc<request::Warm>,
}

impl Ports {
    fn ledger(&self) -> tributary_core::ledger::RunLedger<'_> {
        tributary_core::ledger::RunLedger {
            store: self.store.as_ref(),
            events: Some((self.broker.as_ref(), topology::RUN_EVENTS_TOPIC)),
        }
    }
}

/// One Lambda invocation of `function` with an SQS event of `records`.
async fn invoke(h: Handles, function: Function, records: Vec<SqsMessage>) -> SqsBatchResponse {
    let mut event = SqsEvent::default();
    event.records = records;
    match function {
        Function::Orchestrator => {
            let deps = orchestrator::Deps {
                queue: h.ports.broker.as_ref(),
                config: &h.orchestrator,
                ledger: Some(h.ports.ledger()),
            };
            orchestrator::handle_sqs(&event, tributary_core::deadline::after_timeout(Function::Orchestrator), deps)
                .await
        }
        Function::Request => {
            let deps = request::Deps {
                http: h.ports.http.as_ref(),
                queue: h.ports.broker.as_ref(),
                topics: h.ports.broker.as_ref(),
                store: h.ports.store.as_ref(),
                secrets: h.ports.secrets.as_ref(),
                warm: &h.ports.warm,
                // As in Lambda: the invocation ends at the function's time-out.
                deadline: tributary_core::deadline::after_timeout(Function::Request),
                config: &h.request,
            };
            request::handle_sqs(&event, deps).await
        }
        Function::Persist => {
            let deps = persist::Deps {
                store: h.ports.store.as_ref(),
                queue: h.ports.broker.as_ref(),
                run_events: Some((h.ports.broker.as_ref(), topology::RUN_EVENTS_TOPIC)),
                catalog: Some(h.ports.catalog.as_ref()),
                tables: Some(h.ports.tables.as_ref()),
                config: &h.persist,
            };
            persist::handle_sqs(&event, deps).await
        }
        Function::Athena => {
            let deps = athena::Deps {
                engine: h.ports.engine.as_ref(),
                topics: h.ports.broker.as_ref(),
                queue: h.ports.broker.as_ref(),
                config: &h.athena,
                ledger: Some(h.ports.ledger()),
            };
            // As in Lambda: the invocation ends at the function's time-out.
            athena::handle_sqs(&event, tributary_core::deadline::after_timeout(Function::Athena), deps).await
        }
        Function::Notify => {
            let deps = notify::Deps {
                topics: h.ports.broker.as_ref(),
                config: &h.notify,
                store: Some(h.ports.store.as_ref()),
            };
            notify::handle_sqs(&event, deps).await
        }
    }
}

/// The next step of a run whose completion failed when this attempt tried
/// it ([`LocalRuntime::finish_interrupted`]): the reason, and that the
/// same command completes it from the pages in the lake once the cause is
/// fixed (persisting no page again; planning may still call the vendor).
fn finish_failed_step(spec: &PipelineSpec, now: DateTime<Utc>, run_id: &RunId, reason: &str) -> String {
    let at = RunId::scheduled_at_text(now);
    let refetch = if spec.target.table_format == contracts::TableFormat::Iceberg {
        format!(", or `tributary run SPEC --scheduled-at {at} --replace` fetches every page again and commits it")
    } else {
        String::new()
    };
    format!(
        "run {run_id} holds every page but completing it failed: {reason}; fix the cause, then `tributary run SPEC \
         --scheduled-at {at}` completes it from the pages already in the lake{refetch}"
    )
}

/// Messages in each DLQ so far: sent there plus redriven there.
fn dead_letters(stats: &adapters::local::BrokerStats) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for decl in topology::QUEUES {
        let Some((dlq, _)) = decl.redrive else { continue };
        let n = stats.sent.get(dlq).copied().unwrap_or(0) + stats.redriven_into.get(dlq).copied().unwrap_or(0);
        if n > 0 {
            counts.insert(dlq.to_string(), n);
        }
    }
    counts
}

/// The EventBridge Scheduler event that fires `spec` at `time`, in the shape
/// AWS delivers (`source` `aws.scheduler`, the spec as `detail`).
pub fn scheduler_event(spec: &PipelineSpec, time: DateTime<Utc>) -> serde_json::Value {
    serde_json::json!({
        "version": "0",
        "id": format!("local-{}", RunId::from_time(time)),
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": "000000000000",
        // Milliseconds only for an ad-hoc run's time (its run id has them).
        "time": time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        "region": "local",
        "resources": [format!("arn:aws:scheduler:local:000000000000:schedule/default/{}", spec.pipeline)],
        "detail": spec,
    })
}

/// Notify's settings on one machine: alerts on the alerts topic (written to
/// [`alerts_file`]), EMF lines to `<lake>/_metrics.jsonl`.
pub fn notify_config(lake: &Path) -> notify::NotifyConfig {
    notify::NotifyConfig {
        alerts_topic: topology::ALERTS_TOPIC.into(),
        metrics: tributary_core::metrics::MetricsTarget::File(lake.join("_metrics.jsonl")),
    }
}

/// Whether `alert` is of run `run_id` of `pipeline`, or names no pipeline
/// or run (then it may be any run's, and is shown).
fn alert_of(alert: &Alert, pipeline: &str, run_id: &RunId) -> bool {
    alert.pipeline.as_deref().is_none_or(|of| of == pipeline)
        && alert.run_id.as_deref().is_none_or(|run| run == run_id.as_str())
}

/// `<lake>/_alerts.jsonl`.
pub fn alerts_file(lake: &Path) -> PathBuf {
    lake.join("_alerts.jsonl")
}

/// Alerts recorded in the lake, oldest first (unreadable lines skipped).
pub fn read_alerts(lake: &Path) -> Vec<Alert> {
    std::fs::read_to_string(alerts_file(lake))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}
