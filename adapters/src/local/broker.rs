//! In-process queues and topics with the semantics of SQS and SNS.
//!
//! Time is virtual: a message made invisible by a receive becomes visible
//! again `visibility_timeout` later on the broker's clock, and the runtime
//! advances that clock to the next visibility deadline when no message is
//! visible and no handler is running ([`Broker::advance_to_next_visible`]).
//! A run therefore exercises real redelivery and redrive without waiting
//! out real timeouts. A consumer waiting for work awaits
//! [`Broker::changed`], which any change that can make a message visible
//! ends.
//!
//! Delays asked through the port ([`QueueSender::send_delayed`], and
//! [`QueueSender::change_visibility`]) are a vendor's pause (Request after a
//! long `Retry-After`), and a vendor keeps real time: with
//! [`Broker::set_real_time_delays`] such a message is also held until that
//! much wall-clock time has passed ([`Broker::next_release`] says when),
//! so a local run against a real vendor's throttle waits it out instead of
//! calling again at once. Without it (the default) they are virtual too.
//!
//! One thing SQS does not do, for the local runtime's memory: a queue may be
//! held back by another ([`Broker::set_backpressure`]): it delivers nothing
//! while the other holds more than a budget of bytes. On AWS a queue is a
//! durable buffer of any depth; here every message is in this process's
//! memory, so the runtime holds Request back while the persist queue is
//! full of fetched pages, rather than keep a whole run's pages in memory
//! because Persist is slower than the vendor.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsMessage, SqsMessageAttribute};

use tributary_core::ports::{PortError, QueueMessage, QueueSender, TopicMessage, TopicPublisher};

/// Largest message SNS accepts (Amazon SNS quotas: 256 KiB per publish).
pub const SNS_MAX_MESSAGE_BYTES: usize = 262_144;

/// One queue's settings, as its SQS attributes would be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Queue name.
    pub name: String,
    /// `VisibilityTimeout`: how long a received message stays invisible.
    pub visibility_timeout: Duration,
    /// `MaximumMessageSize` in bytes (SQS: 1 KiB to 1 MiB; we default to the
    /// classic 256 KiB).
    pub max_message_bytes: usize,
    /// Redrive policy: `(deadLetterTargetArn, maxReceiveCount)`.
    pub redrive: Option<(String, u32)>,
}

/// A subscription of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subscription {
    /// SNS -> SQS.
    Queue {
        /// Subscribed queue.
        queue: String,
        /// `RawMessageDelivery`: the body as published, else the SNS
        /// notification envelope.
        raw: bool,
        /// `FilterPolicy` on message attributes: attribute name -> allowed
        /// values (all named attributes must match).
        filter: BTreeMap<String, Vec<String>>,
    },
    /// Each message body appended as a line to a file (standing in for the
    /// e-mail/SMS endpoints of the alerts topic).
    File {
        /// File path.
        path: PathBuf,
    },
}

/// A queue held back by another ([`Broker::set_backpressure`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Backpressure {
    /// The queue whose size holds this one back.
    downstream: String,
    /// Most bytes `downstream` may hold for this queue to deliver.
    max_bytes: usize,
}

/// Counters of a broker's life, for run summaries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerStats {
    /// Messages accepted per queue.
    pub sent: BTreeMap<String, u64>,
    /// Messages moved to a DLQ by a redrive policy, per source queue.
    pub dead_lettered: BTreeMap<String, u64>,
    /// Messages moved to a DLQ by a redrive policy, per DLQ.
    pub redriven_into: BTreeMap<String, u64>,
    /// Messages received (deliveries, redeliveries included) per queue.
    pub received: BTreeMap<String, u64>,
    /// Receives that delivered nothing because the queue was held back
    /// ([`Broker::set_backpressure`]) while it had messages, per queue.
    pub held_back: BTreeMap<String, u64>,
}

#[derive(Debug)]
struct Stored {
    id: String,
    body: String,
    /// Its size as SQS counts it: body, and attributes' names, types and
    /// values.
    size: usize,
    receive_count: u32,
    visible_at_ms: u64,
    /// Wall-clock send time, ms since the Unix epoch (`SentTimestamp`; the
    /// virtual clock only drives visibility).
    sent_at_epoch_ms: u64,
    first_received_ms: Option<u64>,
    receipt: Option<String>,
    system_attributes: BTreeMap<String, String>,
    message_attributes: BTreeMap<String, String>,
}

#[derive(Debug)]
struct QueueState {
    config: QueueConfig,
    messages: Vec<Stored>,
    /// The sum of its messages' sizes: visible, in flight or waiting out a
    /// visibility timeout, until deleted or moved to the DLQ.
    bytes: usize,
    /// The most `bytes` has been.
    peak_bytes: usize,
    /// Set: it delivers nothing while another queue is over a budget.
    backpressure: Option<Backpressure>,
}

impl QueueState {
    fn new(config: QueueConfig) -> Self {
        Self { config, messages: Vec::new(), bytes: 0, peak_bytes: 0, backpressure: None }
    }

    fn push(&mut self, message: Stored) {
        self.bytes += message.size;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        self.messages.push(message);
    }

    fn remove(&mut self, index: usize) -> Stored {
        let message = self.messages.remove(index);
        self.bytes -= message.size;
        message
    }
}

#[derive(Debug, Default)]
struct State {
    clock_ms: u64,
    /// This broker's part of its message ids ([`instance_id`]).
    instance: String,
    next_id: u64,
    queues: BTreeMap<String, QueueState>,
    topics: BTreeMap<String, Vec<Subscription>>,
    stats: BrokerStats,
    /// Whether delays asked through the port also pass in real time
    /// ([`Broker::set_real_time_delays`]).
    real_time_delays: bool,
    /// Messages held until a wall-clock instant, by message id.
    held: HashMap<String, std::time::Instant>,
}

/// In-process SQS/SNS.
#[derive(Debug)]
pub struct Broker {
    state: Mutex<State>,
    /// Signalled when a message may have become visible: sent, fanned out,
    /// redriven, or the clock advanced.
    changed: tokio::sync::Notify,
}

const REGION: &str = "local";
const ACCOUNT: &str = "000000000000";

/// The ARN a local queue reports (`arn:aws:sqs:local:000000000000:<name>`).
pub fn queue_arn(name: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}")
}

/// The ARN a local topic reports.
pub fn topic_arn(name: &str) -> String {
    format!("arn:aws:sns:{REGION}:{ACCOUNT}:{name}")
}

/// A part of message ids no other broker has: 8 random hex digits, so the
/// ids of two runs (each its own process and broker) never collide in the
/// dead-letter archive or `tributary dlq list`, as SQS's UUIDs never do.
fn instance_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

impl Default for Broker {
    fn default() -> Self {
        Self::new()
    }
}

impl Broker {
    /// An empty broker. Its message ids are `local-<instance>-<n>` (SNS:
    /// `local-sns-<instance>-<n>`), the instance part its own
    /// (`instance_id`).
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State { instance: instance_id(), ..State::default() }),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-update of plain
        // data; the state is still consistent enough to continue.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates (or reconfigures) a queue.
    pub fn create_queue(&self, config: QueueConfig) {
        let mut state = self.lock();
        let name = config.name.clone();
        match state.queues.get_mut(&name) {
            Some(queue) => queue.config = config,
            None => {
                state.queues.insert(name, QueueState::new(config));
            }
        }
    }

    /// Creates a topic with its subscriptions.
    pub fn create_topic(&self, name: &str, subscriptions: Vec<Subscription>) {
        self.lock().topics.insert(name.to_string(), subscriptions);
    }

    /// Receives up to `max` visible messages (SQS `ReceiveMessage`, at most
    /// 10 per call on AWS), as the records of an SQS Lambda event.
    ///
    /// A visible message already received `maxReceiveCount` times is moved
    /// to the queue's DLQ instead of being delivered, as SQS does, with the
    /// `DeadLetterQueueSourceArn` attribute set.
    ///
    /// A queue held back ([`Broker::set_backpressure`]) delivers nothing, and
    /// moves nothing to its DLQ, while its downstream queue is over its
    /// budget: its messages wait, visible, their receive counts as they were.
    ///
    /// # Errors
    /// [`PortError::NotFound`] for an unknown queue.
    pub fn receive(&self, queue: &str, max: usize) -> Result<Vec<SqsMessage>, PortError> {
        let mut state = self.lock();
        let state = &mut *state;
        let now = state.clock_ms;
        let q = state.queues.get(queue).ok_or_else(|| PortError::NotFound { what: "queue", target: queue.into() })?;
        if Self::over_budget(&state.queues, q) {
            if !q.messages.is_empty() {
                *state.stats.held_back.entry(queue.to_string()).or_default() += 1;
            }
            return Ok(Vec::new());
        }
        let Some(q) = state.queues.get_mut(queue) else { return Ok(Vec::new()) };
        let mut delivered = Vec::new();
        let mut dead = Vec::new();
        let mut index = 0;
        let real_now = std::time::Instant::now();
        while index < q.messages.len() && delivered.len() < max {
            let message = &mut q.messages[index];
            let held = state.held.get(&message.id).is_some_and(|until| *until > real_now);
            if message.visible_at_ms > now || held {
                index += 1;
                continue;
            }
            if let Some((_, max_receive)) = &q.config.redrive
                && message.receive_count >= *max_receive
            {
                dead.push(q.remove(index));
                continue;
            }
            message.receive_count += 1;
            message.visible_at_ms = now + duration_ms(q.config.visibility_timeout);
            message.first_received_ms.get_or_insert(now);
            state.next_id += 1;
            let receipt = format!("{}#{}", message.id, state.next_id);
            message.receipt = Some(receipt.clone());
            delivered.push(to_sqs_record(queue, message, receipt));
            index += 1;
        }
        *state.stats.received.entry(queue.to_string()).or_default() += delivered.len() as u64;
        if !dead.is_empty() {
            let dlq = q.config.redrive.as_ref().map(|(dlq, _)| dlq.clone()).unwrap_or_default();
            *state.stats.dead_lettered.entry(queue.to_string()).or_default() += dead.len() as u64;
            *state.stats.redriven_into.entry(dlq.clone()).or_default() += dead.len() as u64;
            let source_arn = queue_arn(queue);
            if let Some(dlq_state) = state.queues.get_mut(&dlq) {
                for mut message in dead {
                    // The message keeps its id, body and receive count.
                    message.visible_at_ms = now;
                    message.receipt = None;
                    message.system_attributes.insert("DeadLetterQueueSourceArn".into(), source_arn.clone());
                    dlq_state.push(message);
                }
            } else {
                tracing::error!(queue, dlq, "redrive target queue does not exist; dead letters dropped");
            }
            self.changed.notify_waiters();
        }
        Ok(delivered)
    }

    /// Deletes a received message (SQS `DeleteMessage`). A stale receipt
    /// (the message was received again since) is ignored, as SQS may.
    pub fn delete(&self, queue: &str, receipt: &str) {
        let mut state = self.lock();
        if let Some(q) = state.queues.get_mut(queue)
            && let Some(index) = q.messages.iter().position(|m| m.receipt.as_deref() == Some(receipt))
        {
            q.remove(index);
        }
    }

    /// Whether every queue is empty (no visible or in-flight message).
    pub fn is_drained(&self) -> bool {
        self.lock().queues.values().all(|q| q.messages.is_empty())
    }

    /// Messages (visible or in flight) in `queue`.
    pub fn depth(&self, queue: &str) -> usize {
        self.lock().queues.get(queue).map_or(0, |q| q.messages.len())
    }

    /// Bytes of the messages `queue` holds (visible, in flight or waiting
    /// out a visibility timeout), each counted as SQS counts a message's
    /// size: its body and its attributes' names, types and values.
    pub fn held_bytes(&self, queue: &str) -> usize {
        self.lock().queues.get(queue).map_or(0, |q| q.bytes)
    }

    /// The most bytes `queue` has held at once ([`Broker::held_bytes`]).
    pub fn peak_bytes(&self, queue: &str) -> usize {
        self.lock().queues.get(queue).map_or(0, |q| q.peak_bytes)
    }

    /// Holds `queue` back while `downstream` holds more than `max_bytes`
    /// ([`Broker::held_bytes`]): [`Broker::receive`] from `queue` delivers
    /// nothing then. This is the local runtime's backpressure, not an SQS
    /// feature: the consumer of `queue` sends to `downstream` (Request
    /// fetches pages for the persist queue), and every message here is in
    /// memory, so a producer faster than its consumer would otherwise keep
    /// a whole run in memory.
    ///
    /// What `downstream` holds is then at most `max_bytes` plus what the
    /// invocations of `queue`'s consumer already running send to it.
    /// `downstream`'s consumer must not be held back by `queue` in turn (or
    /// the two would wait for each other): it drains `downstream` to the
    /// budget, and `queue` delivers again. An unknown `queue` is ignored.
    pub fn set_backpressure(&self, queue: &str, downstream: &str, max_bytes: usize) {
        if let Some(q) = self.lock().queues.get_mut(queue) {
            q.backpressure = Some(Backpressure { downstream: downstream.to_string(), max_bytes });
        }
    }

    /// Whether `queue` is held back now ([`Broker::set_backpressure`]).
    pub fn is_held_back(&self, queue: &str) -> bool {
        let state = self.lock();
        state.queues.get(queue).is_some_and(|q| Self::over_budget(&state.queues, q))
    }

    /// Whether `queue`'s downstream queue holds more than its budget.
    fn over_budget(queues: &BTreeMap<String, QueueState>, queue: &QueueState) -> bool {
        queue.backpressure.as_ref().is_some_and(|limit| {
            queues.get(&limit.downstream).is_some_and(|downstream| downstream.bytes > limit.max_bytes)
        })
    }

    /// Advances the virtual clock to the earliest time an invisible (in
    /// flight) message becomes visible again. Returns `false` when no message
    /// is in flight.
    pub fn advance_to_next_visible(&self) -> bool {
        let mut state = self.lock();
        let now = state.clock_ms;
        let next =
            state.queues.values().flat_map(|q| q.messages.iter()).map(|m| m.visible_at_ms).filter(|at| *at > now).min();
        match next {
            Some(at) => {
                state.clock_ms = at;
                self.changed.notify_waiters();
                true
            }
            None => false,
        }
    }

    /// Makes the delays asked through the port ([`QueueSender::send_delayed`],
    /// [`QueueSender::change_visibility`]) pass in real time too: the
    /// message is not delivered before that much wall-clock time has passed,
    /// whatever the virtual clock says. The local runtime turns it on: those
    /// delays are a vendor's pauses, and the vendor's clock is real.
    pub fn set_real_time_delays(&self, on: bool) {
        self.lock().real_time_delays = on;
    }

    /// The earliest wall-clock instant a message held in real time
    /// ([`Broker::set_real_time_delays`]) may be delivered; `None` when no
    /// message is held. Nothing signals [`Broker::changed`] then: a
    /// consumer waits for this instant itself.
    pub fn next_release(&self) -> Option<std::time::Instant> {
        let mut state = self.lock();
        let state = &mut *state;
        // Asked at every turn of the runtime's drain: without a held
        // message, the queues (a run's pages) are not walked.
        if state.held.is_empty() {
            return None;
        }
        let now = std::time::Instant::now();
        let queued: std::collections::HashSet<&str> =
            state.queues.values().flat_map(|q| q.messages.iter()).map(|m| m.id.as_str()).collect();
        state.held.retain(|id, until| *until > now && queued.contains(id.as_str()));
        state.held.values().min().copied()
    }

    /// Holds message `id` until `delay` from now in real time, when delays
    /// are real ([`Broker::set_real_time_delays`]).
    fn hold(state: &mut State, id: &str, delay: Duration) {
        if state.real_time_delays {
            state.held.insert(id.to_string(), std::time::Instant::now() + delay);
        }
    }

    fn send_delayed_from(
        &self,
        sender_id: &str,
        queue: &str,
        message: QueueMessage,
        delay: Duration,
    ) -> Result<bool, PortError> {
        let delay = delay.min(tributary_core::ports::MAX_DELAY);
        let mut state = self.lock();
        Self::enqueue(&mut state, queue, message, sender_id)?;
        let now = state.clock_ms;
        let sent = state.queues.get_mut(queue).and_then(|q| q.messages.last_mut()).map(|stored| {
            stored.visible_at_ms = now + duration_ms(delay);
            stored.id.clone()
        });
        if let Some(id) = sent {
            Self::hold(&mut state, &id, delay);
        }
        self.changed.notify_waiters();
        Ok(true)
    }

    /// A future that ends at the next change that may make a message
    /// visible: a send, a topic fanning out to a queue, a redrive to a DLQ,
    /// the clock advancing. It sees the changes made after it was created
    /// and enabled (`Notified::enable`), even before it is first polled:
    /// make it before looking at the queues, and a message sent after the
    /// look still ends the wait.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// The virtual clock, in milliseconds since the broker started.
    pub fn clock_ms(&self) -> u64 {
        self.lock().clock_ms
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BrokerStats {
        self.lock().stats.clone()
    }

    /// The broker as seen by sender `sender_id`: what it sends or
    /// publishes carries that `SenderId` (the IAM unique id SQS stamps on a
    /// message; see `tributary_core::tenant`). The broker itself sends as
    /// the local stack ([`tributary_core::tenant::LOCAL_STACK_SENDER`]);
    /// tests send as another tenant through this.
    pub fn send_as(&self, sender_id: &str) -> SendAs<'_> {
        SendAs { broker: self, sender_id: sender_id.to_string() }
    }

    fn enqueue(state: &mut State, queue: &str, message: QueueMessage, sender_id: &str) -> Result<(), PortError> {
        let QueueMessage { mut body, attributes } = message;
        // Held until deleted: without the slack a body written by
        // `serde_json::to_string` has (up to its length again).
        body.shrink_to_fit();
        let now = state.clock_ms;
        state.next_id += 1;
        let id = format!("local-{}-{:08}", state.instance, state.next_id);
        let q =
            state.queues.get_mut(queue).ok_or_else(|| PortError::NotFound { what: "queue", target: queue.into() })?;
        let size = body.len() + attributes.iter().map(|(n, v)| n.len() + "String".len() + v.len()).sum::<usize>();
        if size > q.config.max_message_bytes {
            return Err(PortError::TooLarge {
                what: "message",
                target: queue.into(),
                bytes: size,
                limit: q.config.max_message_bytes,
            });
        }
        q.push(Stored {
            id,
            body,
            size,
            receive_count: 0,
            visible_at_ms: now,
            sent_at_epoch_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or_default(),
            first_received_ms: None,
            receipt: None,
            system_attributes: [(tributary_core::tenant::SENDER_ID_ATTRIBUTE.to_string(), sender_id.to_string())]
                .into(),
            message_attributes: attributes,
        });
        *state.stats.sent.entry(queue.to_string()).or_default() += 1;
        Ok(())
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn to_sqs_record(queue: &str, message: &Stored, receipt: String) -> SqsMessage {
    let mut attributes: HashMap<String, String> = HashMap::new();
    attributes.insert("ApproximateReceiveCount".into(), message.receive_count.to_string());
    attributes.insert("SentTimestamp".into(), message.sent_at_epoch_ms.to_string());
    if let Some(first) = message.first_received_ms {
        attributes.insert("ApproximateFirstReceiveTimestamp".into(), first.to_string());
    }
    for (name, value) in &message.system_attributes {
        attributes.insert(name.clone(), value.clone());
    }
    let mut record = SqsMessage::default();
    record.message_id = Some(message.id.clone());
    record.receipt_handle = Some(receipt);
    record.body = Some(message.body.clone());
    record.attributes = attributes;
    record.message_attributes = message
        .message_attributes
        .iter()
        .map(|(name, value)| {
            let mut attribute = SqsMessageAttribute::default();
            attribute.string_value = Some(value.clone());
            attribute.data_type = Some("String".into());
            (name.clone(), attribute)
        })
        .collect();
    record.event_source = Some("aws:sqs".into());
    record.event_source_arn = Some(queue_arn(queue));
    record.aws_region = Some(REGION.into());
    record
}

/// A [`Broker`] sending as one sender ([`Broker::send_as`]).
#[derive(Debug)]
pub struct SendAs<'a> {
    broker: &'a Broker,
    sender_id: String,
}

#[async_trait]
impl QueueSender for SendAs<'_> {
    async fn send_messages(&self, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError> {
        self.broker.send_from(&self.sender_id, queue, messages)
    }

    async fn change_visibility(&self, queue: &str, receipt_handle: &str, timeout: Duration) -> Result<bool, PortError> {
        self.broker.change_visibility(queue, receipt_handle, timeout).await
    }

    async fn send_delayed(&self, queue: &str, message: QueueMessage, delay: Duration) -> Result<bool, PortError> {
        self.broker.send_delayed_from(&self.sender_id, queue, message, delay)
    }
}

#[async_trait]
impl TopicPublisher for SendAs<'_> {
    async fn publish(&self, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        self.broker.publish_from(&self.sender_id, topic, messages)
    }
}

impl Broker {
    fn send_from(&self, sender_id: &str, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError> {
        let mut state = self.lock();
        // Check every message first so a refused batch enqueues nothing.
        let q = state.queues.get(queue).ok_or_else(|| PortError::NotFound { what: "queue", target: queue.into() })?;
        let limit = q.config.max_message_bytes;
        if let Some(message) = messages.iter().find(|m| m.size() > limit) {
            return Err(PortError::TooLarge { what: "message", target: queue.into(), bytes: message.size(), limit });
        }
        for message in messages {
            Self::enqueue(&mut state, queue, message, sender_id)?;
        }
        self.changed.notify_waiters();
        Ok(())
    }

    fn publish_from(&self, sender_id: &str, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        let mut state = self.lock();
        let subscriptions = state
            .topics
            .get(topic)
            .cloned()
            .ok_or_else(|| PortError::NotFound { what: "topic", target: topic.into() })?;
        if let Some(message) = messages.iter().find(|m| m.wire_body().len() > SNS_MAX_MESSAGE_BYTES) {
            return Err(PortError::TooLarge {
                what: "message",
                target: topic.into(),
                bytes: message.wire_body().len(),
                limit: SNS_MAX_MESSAGE_BYTES,
            });
        }
        for message in messages {
            state.next_id += 1;
            let message_id = format!("local-sns-{}-{:08}", state.instance, state.next_id);
            for subscription in &subscriptions {
                match subscription {
                    Subscription::Queue { queue, raw, filter } => {
                        if !filter_matches(filter, &message.attributes) {
                            continue;
                        }
                        // An SQS subscriber of a structured message gets its `sqs` text.
                        let text = message.text_for("sqs");
                        let body = if *raw { text.to_string() } else { envelope(topic, &message_id, &message, text) };
                        let delivered = QueueMessage { body, attributes: BTreeMap::new() };
                        Self::enqueue(&mut state, queue, delivered, sender_id)?;
                        self.changed.notify_waiters();
                    }
                    Subscription::File { path } => {
                        // The file stands for machine subscribers: the `sqs` text too.
                        append_line(path, message.text_for("sqs")).map_err(|err| {
                            PortError::permanent("append to subscription file", path.display().to_string(), err)
                        })?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The broker itself sends as the local stack.
#[async_trait]
impl QueueSender for Broker {
    async fn send_messages(&self, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError> {
        self.send_from(tributary_core::tenant::LOCAL_STACK_SENDER, queue, messages)
    }

    /// Sets the in-flight message's next visibility to `timeout` from now
    /// on the broker's clock (capped at 12 hours, as SQS), and in real time
    /// too with [`Broker::set_real_time_delays`]. A stale receipt (the
    /// message was deleted or received again) is refused, as SQS does.
    async fn change_visibility(&self, queue: &str, receipt_handle: &str, timeout: Duration) -> Result<bool, PortError> {
        let timeout = timeout.min(tributary_core::ports::MAX_VISIBILITY_TIMEOUT);
        let mut state = self.lock();
        let now = state.clock_ms;
        let q =
            state.queues.get_mut(queue).ok_or_else(|| PortError::NotFound { what: "queue", target: queue.into() })?;
        let message =
            q.messages.iter_mut().find(|m| m.receipt.as_deref() == Some(receipt_handle)).ok_or_else(|| {
                PortError::NotFound { what: "receipt handle", target: format!("{queue} {receipt_handle}") }
            })?;
        message.visible_at_ms = now + duration_ms(timeout);
        let id = message.id.clone();
        Self::hold(&mut state, &id, timeout);
        self.changed.notify_waiters();
        Ok(true)
    }

    /// Sends `message` visible `delay` from now (at most 15 minutes, as
    /// SQS) on the broker's clock, and in real time too with
    /// [`Broker::set_real_time_delays`].
    async fn send_delayed(&self, queue: &str, message: QueueMessage, delay: Duration) -> Result<bool, PortError> {
        self.send_delayed_from(tributary_core::tenant::LOCAL_STACK_SENDER, queue, message, delay)
    }
}

/// The broker itself publishes as the local stack.
#[async_trait]
impl TopicPublisher for Broker {
    async fn publish(&self, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        self.publish_from(tributary_core::tenant::LOCAL_STACK_SENDER, topic, messages)
    }
}

fn filter_matches(filter: &BTreeMap<String, Vec<String>>, attributes: &BTreeMap<String, String>) -> bool {
    filter.iter().all(|(name, allowed)| attributes.get(name).is_some_and(|value| allowed.contains(value)))
}

/// The SNS notification envelope an SQS subscription without raw delivery
/// receives (Amazon SNS message format, `Type: Notification`).
fn envelope(topic: &str, message_id: &str, message: &TopicMessage, text: &str) -> String {
    let attributes: serde_json::Map<String, serde_json::Value> = message
        .attributes
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::json!({ "Type": "String", "Value": value })))
        .collect();
    let mut envelope = serde_json::json!({
        "Type": "Notification",
        "MessageId": message_id,
        "TopicArn": topic_arn(topic),
        "Message": text,
        "Timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "SignatureVersion": "1",
        "Signature": "",
        "SigningCertURL": "",
        "UnsubscribeURL": "",
        "MessageAttributes": attributes,
    });
    if let Some(subject) = &message.subject {
        envelope["Subject"] = serde_json::Value::String(subject.clone());
    }
    envelope.to_string()
}

fn append_line(path: &std::path::Path, line: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let mut line = line.replace('\n', " ");
    line.push('\n');
    file.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> Broker {
        let broker = Broker::new();
        broker.create_queue(QueueConfig {
            name: "work".into(),
            visibility_timeout: Duration::from_secs(30),
            max_message_bytes: 64,
            redrive: Some(("work-dlq".into(), 2)),
        });
        broker.create_queue(QueueConfig {
            name: "work-dlq".into(),
            visibility_timeout: Duration::from_secs(30),
            max_message_bytes: 64,
            redrive: None,
        });
        broker
    }

    #[tokio::test]
    async fn two_brokers_never_give_the_same_message_id() {
        let (one, two) = (broker(), broker());
        for b in [&one, &two] {
            b.send("work", vec!["a".into()]).await.expect("send");
        }
        let id = |b: &Broker| b.receive("work", 1).expect("receive")[0].message_id.clone().expect("id");
        let (a, b) = (id(&one), id(&two));
        assert_ne!(a, b, "the first message of each broker");
        assert!(
            a.starts_with("local-") && a.ends_with("-00000001") && a.len() == "local-12345678-00000001".len(),
            "{a}"
        );
    }

    #[tokio::test]
    async fn received_message_is_invisible_until_the_timeout() {
        let broker = broker();
        broker.send("work", vec!["a".into(), "b".into()]).await.expect("send");
        let first = broker.receive("work", 10).expect("receive");
        assert_eq!(first.len(), 2);
        assert!(broker.receive("work", 10).expect("receive").is_empty(), "in flight");
        broker.delete("work", first[0].receipt_handle.as_deref().expect("receipt"));
        assert!(broker.advance_to_next_visible());
        assert_eq!(broker.clock_ms(), 30_000);
        let again = broker.receive("work", 10).expect("receive");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].body.as_deref(), Some("b"));
        assert_eq!(again[0].attributes["ApproximateReceiveCount"], "2");
    }

    #[tokio::test]
    async fn a_delayed_message_is_a_new_one_visible_after_its_delay() {
        let broker = broker();
        let message = QueueMessage { body: "later".into(), attributes: [("k".to_string(), "v".to_string())].into() };
        assert!(broker.send_delayed("work", message, Duration::from_secs(120)).await.expect("send"));
        assert!(broker.receive("work", 10).expect("receive").is_empty(), "delayed");
        assert_eq!(broker.next_release(), None, "virtual delays hold nothing in real time");
        assert!(broker.advance_to_next_visible());
        assert_eq!(broker.clock_ms(), 120_000);
        let got = broker.receive("work", 10).expect("receive");
        assert_eq!((got.len(), got[0].attributes["ApproximateReceiveCount"].as_str()), (1, "1"));
        assert_eq!(got[0].message_attributes["k"].string_value.as_deref(), Some("v"));
        broker.delete("work", got[0].receipt_handle.as_deref().expect("receipt"));
        // SQS's 15 minutes at most.
        broker.send_delayed("work", QueueMessage::default(), Duration::from_secs(3600)).await.expect("send");
        assert!(broker.advance_to_next_visible());
        assert_eq!(broker.clock_ms(), 120_000 + 900_000);
    }

    #[tokio::test]
    async fn real_time_delays_hold_a_message_until_the_wall_clock_passes_them() {
        let broker = broker();
        broker.set_real_time_delays(true);
        let started = std::time::Instant::now();
        broker.send_delayed("work", QueueMessage::default(), Duration::from_millis(300)).await.expect("send");
        assert!(broker.advance_to_next_visible(), "the virtual clock moves as before");
        assert!(broker.receive("work", 10).expect("receive").is_empty(), "but the message is held");
        let release = broker.next_release().expect("held");
        assert!(release >= started + Duration::from_millis(300), "{:?}", release - started);
        tokio::time::sleep_until(release.into()).await;
        assert_eq!(broker.receive("work", 10).expect("receive").len(), 1);
        assert_eq!(broker.next_release(), None);
        // A changed visibility is a vendor's pause too.
        broker.send("work", vec!["b".into()]).await.expect("send");
        let got = broker.receive("work", 10).expect("receive");
        let receipt = got[0].receipt_handle.as_deref().expect("receipt");
        broker.change_visibility("work", receipt, Duration::from_millis(200)).await.expect("change");
        assert!(broker.advance_to_next_visible());
        assert!(broker.receive("work", 10).expect("receive").is_empty(), "held");
        assert!(broker.next_release().is_some());
    }

    #[tokio::test]
    async fn redrives_to_the_dlq_after_max_receive_count() {
        let broker = broker();
        broker.send("work", vec!["poison".into()]).await.expect("send");
        for _ in 0..2 {
            assert_eq!(broker.receive("work", 10).expect("receive").len(), 1);
            broker.advance_to_next_visible();
        }
        assert!(broker.receive("work", 10).expect("receive").is_empty());
        let dead = broker.receive("work-dlq", 10).expect("receive");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].body.as_deref(), Some("poison"));
        assert_eq!(dead[0].attributes["DeadLetterQueueSourceArn"], queue_arn("work"));
        assert_eq!(broker.stats().dead_lettered["work"], 1);
    }

    #[tokio::test]
    async fn a_message_weighs_on_its_queue_until_deleted_or_moved_to_the_dlq() {
        let broker = broker();
        let with_attribute =
            QueueMessage { body: "abc".into(), attributes: [("k".to_string(), "v".to_string())].into() };
        let plain = QueueMessage { body: "de".into(), attributes: BTreeMap::new() };
        broker.send_messages("work", vec![with_attribute, plain]).await.expect("send");
        // As SQS counts a message: body, attribute name, type and value.
        assert_eq!(broker.held_bytes("work"), 3 + (1 + "String".len() + 1) + 2);
        let got = broker.receive("work", 10).expect("receive");
        assert_eq!(broker.held_bytes("work"), 13, "in flight, still held");
        broker.delete("work", got[0].receipt_handle.as_deref().expect("receipt"));
        assert_eq!(broker.held_bytes("work"), 2);
        broker.delete("work", got[0].receipt_handle.as_deref().expect("receipt"));
        assert_eq!(broker.held_bytes("work"), 2, "a stale receipt deletes nothing");
        // "de" reaches maxReceiveCount (2) and moves to the DLQ, its bytes with it.
        broker.advance_to_next_visible();
        assert_eq!(broker.receive("work", 10).expect("receive").len(), 1);
        broker.advance_to_next_visible();
        assert!(broker.receive("work", 10).expect("receive").is_empty());
        assert_eq!((broker.held_bytes("work"), broker.held_bytes("work-dlq")), (0, 2));
        assert_eq!(broker.peak_bytes("work"), 13);
    }

    /// A producer `work` -> `out` whose consumer is slower: `out`'s bytes
    /// stay within the budget plus one batch of `work`'s output, and
    /// every message of `work` is delivered once, none lost or redriven.
    #[tokio::test]
    async fn a_held_back_queue_delivers_nothing_while_its_downstream_is_over_budget() {
        const BUDGET: usize = 1_000;
        const BATCH: usize = 5;
        const OUTPUT: usize = 100;
        let broker = Broker::new();
        for name in ["work", "out"] {
            broker.create_queue(QueueConfig {
                name: name.into(),
                visibility_timeout: Duration::from_secs(30),
                max_message_bytes: 262_144,
                redrive: Some(("dlq".into(), 1)),
            });
        }
        broker.set_backpressure("work", "out", BUDGET);
        let inputs: Vec<String> = (0..200).map(|n| n.to_string()).collect();
        broker.send("work", inputs.clone()).await.expect("send");

        let (mut delivered, mut held_back, mut step) = (Vec::new(), 0, 0);
        while broker.depth("work") + broker.depth("out") > 0 {
            step += 1;
            let batch = broker.receive("work", BATCH).expect("receive");
            if batch.is_empty() && broker.depth("work") > 0 {
                assert!(broker.is_held_back("work"));
                held_back += 1;
            }
            for record in batch {
                assert_eq!(record.attributes["ApproximateReceiveCount"], "1");
                delivered.push(record.body.clone().expect("body"));
                broker.send("out", vec!["x".repeat(OUTPUT)]).await.expect("send");
                broker.delete("work", record.receipt_handle.as_deref().expect("receipt"));
            }
            assert!(broker.held_bytes("out") <= BUDGET + BATCH * OUTPUT, "step {step}: {}", broker.held_bytes("out"));
            // The consumer of `out` takes one message every third step.
            if step % 3 == 0 {
                for record in broker.receive("out", 1).expect("receive") {
                    broker.delete("out", record.receipt_handle.as_deref().expect("receipt"));
                }
            }
        }
        assert_eq!(delivered, inputs, "every message, once, in order");
        assert!(held_back > 100, "work waited for out: {held_back} steps");
        assert_eq!(broker.stats().held_back["work"], held_back, "each counted");
        assert_eq!(broker.peak_bytes("out"), BUDGET + BATCH * OUTPUT);
        assert_eq!(broker.stats().dead_lettered.get("work"), None);
        assert!(!broker.is_held_back("work"), "out is empty");
    }

    #[tokio::test]
    async fn changed_ends_at_a_send_made_after_it_was_enabled_and_at_a_clock_advance() {
        use futures::FutureExt;
        let broker = broker();
        let changed = broker.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        broker.send("work", vec!["a".into()]).await.expect("send");
        assert!(changed.now_or_never().is_some(), "the send ends the wait, though it came before the first poll");

        let received = broker.receive("work", 10).expect("receive");
        assert_eq!(received.len(), 1);
        let changed = broker.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        assert!(broker.advance_to_next_visible());
        assert!(changed.now_or_never().is_some(), "the message is visible again");
    }

    #[tokio::test]
    async fn oversize_message_is_refused_and_nothing_enqueued() {
        let broker = broker();
        let err = broker.send("work", vec!["ok".into(), "x".repeat(65)]).await.expect_err("too large");
        assert!(matches!(err, PortError::TooLarge { bytes: 65, limit: 64, .. }), "{err}");
        assert_eq!(broker.depth("work"), 0);
    }

    #[tokio::test]
    async fn topic_fans_out_raw_and_enveloped_with_filters() {
        let broker = Broker::new();
        for name in ["raw", "wrapped", "filtered"] {
            broker.create_queue(QueueConfig {
                name: name.into(),
                visibility_timeout: Duration::from_secs(1),
                max_message_bytes: 262_144,
                redrive: None,
            });
        }
        broker.create_topic(
            "rows",
            vec![
                Subscription::Queue { queue: "raw".into(), raw: true, filter: BTreeMap::new() },
                Subscription::Queue { queue: "wrapped".into(), raw: false, filter: BTreeMap::new() },
                Subscription::Queue {
                    queue: "filtered".into(),
                    raw: true,
                    filter: BTreeMap::from([("pipeline".into(), vec!["other".into()])]),
                },
            ],
        );
        let message = TopicMessage {
            subject: Some("s".into()),
            body: r#"{"n":1}"#.into(),
            attributes: BTreeMap::from([("pipeline".into(), "p".into())]),
            per_protocol: BTreeMap::new(),
        };
        broker.publish("rows", vec![message]).await.expect("publish");
        let raw = broker.receive("raw", 10).expect("receive");
        assert_eq!(raw[0].body.as_deref(), Some(r#"{"n":1}"#));
        let wrapped = broker.receive("wrapped", 10).expect("receive");
        let envelope: serde_json::Value =
            serde_json::from_str(wrapped[0].body.as_deref().expect("body")).expect("json");
        assert_eq!(envelope["Type"], "Notification");
        assert_eq!(envelope["Message"], r#"{"n":1}"#);
        assert_eq!(envelope["MessageAttributes"]["pipeline"]["Value"], "p");
        assert_eq!(broker.depth("filtered"), 0, "filter policy must drop non-matching messages");
    }
}
