//! A count-first run of 100,000 pages planned through the real Orchestrator handler against moto
//! (SQS for the queues, S3 for the run ledger and the sending checkpoint), with the SDK's
//! `SendMessageBatch` calls counted and the time measured (printed as `FANOUT ...` lines; run
//! with `--no-capture` to see them).
//!
//! Needs `AWS_ENDPOINT_URL` pointing at moto (`eval "$(scripts/moto.sh start)"`). Each test
//! makes its own uniquely named queues and bucket and nothing resets moto.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use adapters::aws::{S3Store, SqsSender};
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_sqs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::BoxError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;
use aws_sdk_sqs::types::QueueAttributeName;
use orchestrator::{Deps, Fanout, OrchestratorConfig};
use tokio::time::Instant;
use tributary_core::ledger::RunLedger;
use tributary_core::ports::{PortError, QueueMessage, QueueSender};

use crate::common::{self, StallAt, Watch};

const PAGES: u32 = 100_000;

/// The deadline given to each invocation here: an hour, so that only the test's own time-out or
/// page budget stops one (moto on a busy machine is far slower than SQS).
fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(3_600)
}

/// Counts the SDK's `SendMessageBatch` calls (once per call, before serialisation, whatever the
/// SDK's own retries).
#[derive(Clone, Debug, Default)]
struct CountBatches(Arc<AtomicUsize>);

impl CountBatches {
    fn calls(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for CountBatches {
    fn name(&self) -> &'static str {
        "CountBatches"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.input().downcast_ref::<SendMessageBatchInput>().is_some() {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A name no other test uses.
fn unique(label: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    format!("tributary-{label}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// The run's queues and lake on moto, and the Orchestrator's settings pointing at them.
struct Stack {
    sqs: aws_sdk_sqs::Client,
    batches: CountBatches,
    store: S3Store,
    config: OrchestratorConfig,
}

impl Stack {
    async fn new(fanout: Fanout) -> Self {
        assert!(std::env::var_os("AWS_ENDPOINT_URL").is_some(), "start moto first: eval \"$(scripts/moto.sh start)\"");
        let sdk = adapters::aws::config_loader().load().await;
        let batches = CountBatches::default();
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(&sdk).interceptor(batches.clone()).build(),
        );
        let s3 = adapters::aws::s3_client_with_path_style(&sdk, true);
        let bucket = unique("lake");
        s3.create_bucket().bucket(&bucket).send().await.expect("CreateBucket");
        let mut config = common::config();
        config.fanout = fanout;
        let mut stack = Self { sqs, batches, store: S3Store::new(s3, bucket), config };
        stack.config.request_queue = stack.create_queue(&unique("request")).await;
        stack.config.orchestrator_queue = stack.create_queue(&unique("orchestrator")).await;
        stack
    }

    /// Creates the queue `name` with the classic 256 KiB `MaximumMessageSize`; returns its URL.
    async fn create_queue(&self, name: &str) -> String {
        let created = self
            .sqs
            .create_queue()
            .queue_name(name)
            .attributes(QueueAttributeName::MaximumMessageSize, "262144")
            .send()
            .await
            .expect("CreateQueue");
        created.queue_url().expect("queue URL").to_string()
    }

    /// The SQS adapter as `main.rs` builds it.
    fn sender(&self) -> SqsSender {
        SqsSender::new(self.sqs.clone()).with_max_in_flight(self.config.fanout.sends_in_flight)
    }

    fn ledger(&self) -> Option<RunLedger<'_>> {
        Some(RunLedger { store: &self.store, events: None })
    }

    /// Messages on `queue` (moto's count is exact).
    async fn depth(&self, queue: &str) -> usize {
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(queue)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .expect("GetQueueAttributes");
        attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .map_or(0, |n| n.parse().expect("a count"))
    }

    /// Starts the run (its probe is sent to the request queue and recorded) and returns the
    /// probe's reply, saying `pages` pages, as one record of an SQS event from the orchestrator
    /// queue.
    async fn start_with(&self, pages: u32) -> SqsEvent {
        let run = common::run(&self.config);
        let sender = self.sender();
        let deps = Deps { queue: &sender, config: &self.config, ledger: self.ledger() };
        orchestrator::start_run(&common::paged_spec(), &run, deps).await.expect("run starts");
        let body = contracts::encode(&common::probe_reply(&run, pages)).expect("reply");
        sqs_event(vec![("probe-reply".into(), body)])
    }

    /// Receives the continuations waiting on the orchestrator queue as one SQS event, and deletes
    /// them (the event source mapping deletes a batch its handler answered without failures).
    async fn continuations(&self) -> SqsEvent {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.config.orchestrator_queue)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("ReceiveMessage");
        for message in received.messages() {
            let handle = message.receipt_handle().expect("receipt handle");
            let queue = &self.config.orchestrator_queue;
            self.sqs.delete_message().queue_url(queue).receipt_handle(handle).send().await.expect("DeleteMessage");
        }
        sqs_event(
            received
                .messages()
                .iter()
                .map(|m| (m.message_id().unwrap_or_default().to_string(), m.body().unwrap_or_default().to_string()))
                .collect(),
        )
    }
}

/// The request queue emptied after each send to it, its arrivals counted first
/// (`ApproximateNumberOfMessages`, exact in moto; then the queue made anew): moto's `SendMessageBatch`
/// slows with the queue's depth (measured here: about 0.1 s a call on an empty queue, 1 s at
/// 4,000 messages), so a queue of 100,000 messages is out of its reach. The Orchestrator sends
/// one chunk at a time, so each count is that chunk's (the first one's also holds the probe).
struct Emptied<'a> {
    inner: &'a dyn QueueSender,
    stack: &'a Stack,
    arrived: AtomicUsize,
}

impl<'a> Emptied<'a> {
    fn new(inner: &'a dyn QueueSender, stack: &'a Stack) -> Self {
        Self { inner, stack, arrived: AtomicUsize::new(0) }
    }

    /// Messages that arrived on the request queue.
    fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl QueueSender for Emptied<'_> {
    async fn send_messages(&self, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError> {
        self.inner.send_messages(queue, messages).await?;
        if queue == self.stack.config.request_queue {
            self.arrived.fetch_add(self.stack.depth(queue).await, Ordering::SeqCst);
            // PurgeQueue is refused twice a minute: a new queue of the same name (and URL).
            let name = queue.rsplit('/').next().expect("a queue name");
            self.stack.sqs.delete_queue().queue_url(queue).send().await.expect("DeleteQueue");
            self.stack.create_queue(name).await;
        }
        Ok(())
    }
}

/// An SQS event of (message id, body) records, as the event source mapping delivers them.
fn sqs_event(records: Vec<(String, String)>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = records
        .into_iter()
        .map(|(id, body)| {
            let mut record = SqsMessage::default();
            record.message_id = Some(id);
            record.body = Some(body);
            record.event_source = Some("aws:sqs".into());
            record
        })
        .collect();
    event
}

/// The required test of issue 25, item 3, at 100,000 pages: see [`time_out_half_way`]. Against
/// moto on a busy 2-core machine it took 1,658.5 s for its 10,000 calls (moto answers 5-8 calls
/// a second there), so the suite runs it at 4,000 pages and this one on demand.
#[tokio::test]
#[ignore = "28 minutes against moto here: cargo nextest run -p orchestrator --run-ignored only a_100k_page_plan"]
async fn a_100k_page_plan_completes_after_a_forced_time_out_half_way_with_every_page_sent_once() {
    time_out_half_way(PAGES).await;
}

/// [`time_out_half_way`] at 4,000 pages.
#[tokio::test]
async fn a_plan_completes_after_a_forced_time_out_half_way_with_every_page_sent_once() {
    time_out_half_way(4_000).await;
}

/// The first invocation is timed out half-way (its future dropped while it waits to send the
/// chunk after `pages / 2`, as Lambda ends an invocation at its time-out), the same probe reply
/// is delivered again, and the second invocation sends the rest from the checkpoint: every page
/// reaches the request queue exactly once.
async fn time_out_half_way(pages: u32) {
    let stack = Stack::new(Fanout::default()).await;
    let reply = stack.start_with(pages).await;
    let (calls_before, started) = (stack.batches.calls(), Instant::now());

    let sqs = stack.sender();
    let sender = Emptied::new(&sqs, &stack);
    let half_way = pages as usize / 2;
    let first = Watch::new(&sender, &stack.config.request_queue, Some(StallAt { after: half_way, forward: false }));
    let deps = Deps { queue: &first, config: &stack.config, ledger: stack.ledger() };
    tokio::select! {
        response = orchestrator::handle_sqs(&reply, deadline(), deps) => panic!("no time-out: {response:?}"),
        () = first.stalled.notified() => {}
    }
    let half = (stack.batches.calls() - calls_before, started.elapsed());
    assert_eq!(first.accepted().len(), half_way);

    let again = Watch::new(&sender, &stack.config.request_queue, None);
    let deps = Deps { queue: &again, config: &stack.config, ledger: stack.ledger() };
    let response = orchestrator::handle_sqs(&reply, deadline(), deps).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let (calls, elapsed) = (stack.batches.calls() - calls_before, started.elapsed());
    eprintln!(
        "FANOUT time-out half-way: {pages} pages, {calls} SendMessageBatch calls, {:.1} s ({} calls, {:.1} s before the time-out), {} in flight",
        elapsed.as_secs_f64(),
        half.0,
        half.1.as_secs_f64(),
        stack.config.fanout.sends_in_flight
    );

    assert_eq!(
        again.accepted().first().map(|&p| p as usize),
        Some(half_way),
        "the redelivery starts at the checkpoint"
    );
    let all: Vec<u32> = first.accepted().into_iter().chain(again.accepted()).collect();
    let (every_page, sent) = common::coverage(&all, pages);
    assert!(every_page, "every page accepted by SQS");
    // With every page accepted and as many page requests arrived as pages, none twice.
    assert_eq!(sender.arrived(), pages as usize + 1, "the pages and the probe");
    assert_eq!(sent, pages as usize);
    assert_eq!(calls, pages as usize / 10, "10 entries a call");
    assert_eq!(stack.depth(&stack.config.orchestrator_queue).await, 0, "no continuation needed");
}

/// A plan of 4,000 pages with a page budget of half the run per invocation: the first
/// invocation sends 2,000 pages and its continuation to the orchestrator queue, which the second
/// invocation (fed from that queue) finishes; again every page exactly once.
#[tokio::test]
async fn a_plan_continues_itself_half_way_and_sends_every_page_once() {
    const PAGES: u32 = 4_000;
    let stack = Stack::new(Fanout { max_pages_per_invocation: PAGES / 2, ..Fanout::default() }).await;
    let reply = stack.start_with(PAGES).await;
    let (calls_before, started) = (stack.batches.calls(), Instant::now());
    let sqs = stack.sender();
    let sender = Emptied::new(&sqs, &stack);
    let watch = Watch::new(&sender, &stack.config.request_queue, None);
    let deps = Deps { queue: &watch, config: &stack.config, ledger: stack.ledger() };
    let mut event = reply;
    let mut invocations = 0;
    while !event.records.is_empty() {
        invocations += 1;
        let response = orchestrator::handle_sqs(&event, deadline(), deps).await;
        assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
        event = stack.continuations().await;
        assert!(event.records.len() <= 1 && invocations <= 2, "one continuation at most");
    }
    let (calls, elapsed) = (stack.batches.calls() - calls_before, started.elapsed());
    eprintln!(
        "FANOUT continued half-way: {PAGES} pages, {calls} SendMessageBatch calls (1 the continuation), {:.1} s, {invocations} invocations",
        elapsed.as_secs_f64()
    );
    assert_eq!(invocations, 2);
    let (every_page, sent) = common::coverage(&watch.accepted(), PAGES);
    assert!(every_page && sent == PAGES as usize, "each page once: {sent} sent");
    assert_eq!(sender.arrived(), PAGES as usize + 1, "the pages and the probe");
    assert_eq!(calls, PAGES as usize / 10 + 1);
}

/// Calls and time of 1,000 pages sent in one invocation, one call in flight and the default
/// (the closing note's figures; not a check).
#[tokio::test]
#[ignore = "a measurement: cargo nextest run -p orchestrator --run-ignored only measure --no-capture"]
async fn measure_1000_pages_in_one_invocation() {
    for in_flight in [1, Fanout::DEFAULT_SENDS_IN_FLIGHT] {
        let stack = Stack::new(Fanout { sends_in_flight: in_flight, ..Fanout::default() }).await;
        let reply = stack.start_with(1_000).await;
        let (calls_before, started) = (stack.batches.calls(), Instant::now());
        let sender = stack.sender();
        let deps = Deps { queue: &sender, config: &stack.config, ledger: stack.ledger() };
        let response = orchestrator::handle_sqs(&reply, deadline(), deps).await;
        assert!(response.batch_item_failures.is_empty());
        eprintln!(
            "FANOUT 1000 pages, {in_flight} in flight: {} calls, {:.2} s",
            stack.batches.calls() - calls_before,
            started.elapsed().as_secs_f64()
        );
    }
}
