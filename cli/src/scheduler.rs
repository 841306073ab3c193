//! Continuous scheduling of the local runtime's event source mappings.
//!
//! Each consumed queue is drained as a Lambda SQS event source mapping with
//! a maximum concurrency would drain it: at most `concurrency` invocations
//! of its consumer run at once, each with a batch of up to `batch_size`
//! records. An invocation that ends frees its slot at once — its succeeded
//! records are deleted, the failed ones (its `batchItemFailures`, or the
//! whole batch when the handler panicked) stay in flight until their
//! visibility timeout — and a free slot is filled as soon as a message is
//! visible. There are no rounds: a slow batch holds only its own slot, never
//! another queue's consumers nor the other slots of its queue.
//!
//! A mapping with a batching window (Notify's, on the DLQs, so that a burst
//! of failures becomes one alert) gathers records until its window closes;
//! here the window closes when no invocation of a mapping without one is in
//! flight, so whatever a burst sends arrives in one batch, and no run waits
//! out a real window.
//!
//! The broker's clock is virtual: it jumps to the next visibility deadline
//! only when nothing is in flight and nothing is visible. A message held in
//! real time (a vendor's pause, [`Broker::next_release`]) is waited for on
//! the wall clock. The drain ends when every drained queue is empty and
//! nothing is in flight.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsMessage};
use tokio::task::{Id, JoinError, JoinSet};

use adapters::local::Broker;

/// One queue's event source mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSource<C> {
    /// The queue drained.
    pub queue: &'static str,
    /// Records per invocation, at most (the mapping's `BatchSize`).
    pub batch_size: usize,
    /// The mapping's `MaximumBatchingWindowInSeconds`; any window above 0
    /// closes when the mappings without one have nothing in flight.
    pub batching_window_secs: u32,
    /// What is invoked with them (handed to `invoke` of [`drain`]).
    pub consumer: C,
}

/// An invocation in flight: its source and its records' (message id,
/// receipt handle).
struct InFlight {
    source: usize,
    receipts: Vec<(String, String)>,
}

/// Delivers the messages of every source's queue to `invoke(consumer,
/// records)`, each invocation in a task of its own (so a panic fails only
/// its batch), at most `concurrency` (at least 1) per source at once, until
/// the queues are drained (see the module's documentation). `progress` is
/// called whenever the queues may have changed: after invocations start,
/// end, or a message is sent.
pub async fn drain<C, F, Fut>(
    broker: &Broker,
    sources: &[EventSource<C>],
    concurrency: usize,
    mut invoke: F,
    mut progress: impl FnMut(),
) where
    C: Copy,
    F: FnMut(C, Vec<SqsMessage>) -> Fut,
    Fut: Future<Output = SqsBatchResponse> + Send + 'static,
{
    let slots = concurrency.max(1);
    let mut running = vec![0_usize; sources.len()];
    let mut tasks = JoinSet::new();
    let mut in_flight: HashMap<Id, InFlight> = HashMap::new();
    loop {
        // Registered before the queues are looked at, so a message sent
        // after the look still ends the wait below.
        let changed = broker.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        for (index, source) in sources.iter().enumerate() {
            if source.batching_window_secs > 0 && gathering(sources, &running) {
                continue;
            }
            while running[index] < slots {
                let records = match broker.receive(source.queue, source.batch_size) {
                    Ok(records) if !records.is_empty() => records,
                    _ => break,
                };
                let receipts = records
                    .iter()
                    .map(|r| (r.message_id.clone().unwrap_or_default(), r.receipt_handle.clone().unwrap_or_default()))
                    .collect();
                let task = tasks.spawn(invoke(source.consumer, records));
                in_flight.insert(task.id(), InFlight { source: index, receipts });
                running[index] += 1;
            }
        }
        progress();
        let release = broker.next_release();
        if tasks.is_empty() {
            let waiting = sources.iter().map(|s| broker.depth(s.queue)).sum::<usize>() > 0;
            if waiting && broker.advance_to_next_visible() {
                continue;
            }
            match release {
                // A vendor's pause: its clock is real, so this wait is too.
                Some(until) if waiting => tokio::time::sleep_until(until.into()).await,
                _ => return,
            }
            continue;
        }
        tokio::select! {
            () = sleep_until(release) => {}
            Some(ended) = tasks.join_next_with_id() => {
                settle(broker, sources, ended, &mut in_flight, &mut running);
                // And any other that ended meanwhile, before refilling.
                while let Some(ended) = tasks.try_join_next_with_id() {
                    settle(broker, sources, ended, &mut in_flight, &mut running);
                }
            }
            () = &mut changed => {}
        }
    }
}

/// Ends at `until`, or never.
async fn sleep_until(until: Option<std::time::Instant>) {
    match until {
        Some(until) => tokio::time::sleep_until(until.into()).await,
        None => std::future::pending().await,
    }
}

/// Whether a batching window is still open: a mapping without one has an
/// invocation in flight (which may send more records).
fn gathering<C>(sources: &[EventSource<C>], running: &[usize]) -> bool {
    sources.iter().zip(running).any(|(source, running)| source.batching_window_secs == 0 && *running > 0)
}

/// Frees the slot of an ended invocation and deletes its succeeded records.
fn settle<C>(
    broker: &Broker,
    sources: &[EventSource<C>],
    ended: Result<(Id, SqsBatchResponse), JoinError>,
    in_flight: &mut HashMap<Id, InFlight>,
    running: &mut [usize],
) {
    let (id, response) = match ended {
        Ok((id, response)) => (id, Ok(response)),
        Err(err) => (err.id(), Err(err)),
    };
    let Some(InFlight { source, receipts }) = in_flight.remove(&id) else { return };
    running[source] -= 1;
    let queue = sources[source].queue;
    match response {
        Ok(response) => {
            let failed: HashSet<String> = response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect();
            for (message_id, receipt) in receipts {
                if !failed.contains(&message_id) {
                    broker.delete(queue, &receipt);
                }
            }
        }
        Err(err) => {
            tracing::error!(queue, error = %err, "handler panicked; the whole batch will be redelivered");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use adapters::local::{Broker, QueueConfig};
    use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};
    use tributary_core::ports::QueueSender;

    use super::{EventSource, drain};

    /// Yields enough for every other runnable task to make its progress
    /// many times over: a handler that "takes long" without a wall clock.
    const PATIENCE: usize = 10_000;

    fn broker(queues: &[(&str, Option<(&str, u32)>)]) -> Arc<Broker> {
        let broker = Arc::new(Broker::new());
        for (name, redrive) in queues {
            broker.create_queue(QueueConfig {
                name: (*name).into(),
                visibility_timeout: Duration::from_secs(30),
                max_message_bytes: 262_144,
                redrive: redrive.map(|(dlq, count)| (dlq.to_string(), count)),
            });
        }
        broker
    }

    fn body(records: &[SqsMessage]) -> Vec<String> {
        records.iter().map(|r| r.body.clone().unwrap_or_default()).collect()
    }

    type Log = Arc<Mutex<Vec<String>>>;

    fn note(log: &Log, line: String) {
        log.lock().expect("log").push(line);
    }

    fn position(log: &[String], line: &str) -> usize {
        log.iter().position(|l| l == line).unwrap_or_else(|| panic!("{line:?} not in {log:?}"))
    }

    /// A handler that runs until `line` is in the log (or its patience ends).
    async fn slow_until(log: Log, line: &'static str) {
        for _ in 0..PATIENCE {
            if log.lock().expect("log").iter().any(|l| l == line) {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// The slow handler of the two slot tests: done (`slow done` in the
    /// log) only once the fast chain has reached `fast 3`.
    async fn slow(log: Log) {
        slow_until(log.clone(), "fast 3").await;
        note(&log, "slow done".into());
    }

    /// A mapping without a batching window.
    fn source<C>(queue: &'static str, batch_size: usize, consumer: C) -> EventSource<C> {
        EventSource { queue, batch_size, batching_window_secs: 0, consumer }
    }

    /// [`drain`] with no progress callback.
    async fn run<C, F, Fut>(broker: &Broker, sources: &[EventSource<C>], concurrency: usize, invoke: F)
    where
        C: Copy,
        F: FnMut(C, Vec<SqsMessage>) -> Fut,
        Fut: Future<Output = SqsBatchResponse> + Send + 'static,
    {
        drain(broker, sources, concurrency, invoke, || {}).await;
    }

    /// A handler that handles `fast N` by sending `fast N+1` to its own
    /// queue, up to `fast 3`.
    async fn chain(broker: Arc<Broker>, log: Log, queue: &'static str, records: Vec<SqsMessage>) {
        for text in body(&records) {
            note(&log, text.clone());
            let n: u32 = text.trim_start_matches("fast ").parse().expect("fast N");
            if n < 3 {
                broker.send(queue, vec![format!("fast {}", n + 1)]).await.expect("send");
            }
        }
    }

    #[tokio::test]
    async fn a_slow_batch_does_not_hold_up_another_queue() {
        let broker = broker(&[("persist", None), ("request", None)]);
        broker.send("persist", vec!["slow".into()]).await.expect("send");
        broker.send("request", vec!["fast 1".into()]).await.expect("send");
        let log: Log = Arc::default();
        let sources = [source("persist", 5, "persist"), source("request", 5, "request")];

        run(&broker, &sources, 1, |consumer, records| {
            let (broker, log) = (broker.clone(), log.clone());
            async move {
                if consumer == "persist" {
                    slow(log).await;
                } else {
                    chain(broker, log, "request", records).await;
                }
                SqsBatchResponse::default()
            }
        })
        .await;

        let log = log.lock().expect("log").clone();
        // With rounds, the slow batch's round ran only `fast 1`: `fast 2`
        // waited for the slow batch to end.
        assert!(position(&log, "fast 3") < position(&log, "slow done"), "{log:?}");
        assert!(broker.is_drained());
    }

    #[tokio::test]
    async fn a_slow_batch_holds_only_its_own_slot_and_a_freed_slot_is_refilled() {
        let broker = broker(&[("request", None)]);
        broker.send("request", vec!["slow".into(), "fast 1".into()]).await.expect("send");
        let log: Log = Arc::default();
        let sources = [source("request", 1, ())];
        let in_flight = Arc::new(Mutex::new((0_usize, 0_usize)));

        run(&broker, &sources, 2, |(), records| {
            let (broker, log, in_flight) = (broker.clone(), log.clone(), in_flight.clone());
            async move {
                {
                    let mut counts = in_flight.lock().expect("counts");
                    counts.0 += 1;
                    counts.1 = counts.1.max(counts.0);
                }
                if body(&records) == ["slow"] {
                    slow(log).await;
                } else {
                    chain(broker, log, "request", records).await;
                }
                in_flight.lock().expect("counts").0 -= 1;
                SqsBatchResponse::default()
            }
        })
        .await;

        let log = log.lock().expect("log").clone();
        assert!(position(&log, "fast 3") < position(&log, "slow done"), "{log:?}");
        assert_eq!(in_flight.lock().expect("counts").1, 2, "at most `concurrency` invocations per queue at once");
        assert!(broker.is_drained());
    }

    #[tokio::test]
    async fn failed_records_are_redelivered_after_the_visibility_timeout_then_redriven_to_the_dlq() {
        let broker = broker(&[("work", Some(("work-dlq", 3))), ("work-dlq", None)]);
        broker.send("work", vec!["ok".into(), "poison".into()]).await.expect("send");
        let dead: Arc<Mutex<Vec<SqsMessage>>> = Arc::default();
        let sources = [source("work", 10, "work"), source("work-dlq", 10, "notify")];

        run(&broker, &sources, 4, |consumer, records| {
            let dead = dead.clone();
            async move {
                let mut response = SqsBatchResponse::default();
                for record in records {
                    if consumer == "notify" {
                        dead.lock().expect("dead").push(record);
                    } else if record.body.as_deref() == Some("poison") {
                        let mut failure = BatchItemFailure::default();
                        failure.item_identifier = record.message_id.clone().unwrap_or_default();
                        response.batch_item_failures.push(failure);
                    }
                }
                response
            }
        })
        .await;

        let stats = broker.stats();
        assert_eq!(stats.received["work"], 1 + 3, "ok once, poison maxReceiveCount times");
        assert_eq!(stats.dead_lettered["work"], 1);
        let dead = dead.lock().expect("dead");
        assert_eq!(body(&dead), ["poison"], "only the failed record is dead-lettered");
        assert_eq!(dead[0].attributes["ApproximateReceiveCount"], "4", "its receive in the DLQ counts too");
        assert_eq!(broker.clock_ms(), 3 * 30_000, "the clock jumped one visibility timeout per redelivery");
        assert!(broker.is_drained());
    }

    #[tokio::test]
    async fn a_panicking_handler_gets_its_whole_batch_redelivered() {
        let broker = broker(&[("work", Some(("work-dlq", 5))), ("work-dlq", None)]);
        broker.send("work", vec!["a".into(), "b".into()]).await.expect("send");
        let handled: Log = Arc::default();
        let sources = [source("work", 10, ())];

        run(&broker, &sources, 1, |(), records| {
            let handled = handled.clone();
            async move {
                if records[0].attributes["ApproximateReceiveCount"] == "1" {
                    panic!("handler bug on the first delivery");
                }
                for text in body(&records) {
                    note(&handled, text);
                }
                SqsBatchResponse::default()
            }
        })
        .await;

        assert_eq!(*handled.lock().expect("handled"), ["a", "b"], "the whole batch, once more");
        assert_eq!(broker.stats().received["work"], 4);
        assert_eq!(broker.clock_ms(), 30_000);
        assert!(broker.is_drained());
    }

    /// The local runtime's memory bound (`LocalRuntime`'s docs, Memory):
    /// Request fetches pages faster than Persist writes them, and while
    /// Request messages wait the persist queue never holds more than its
    /// budget plus what the Request invocations already running send.
    #[tokio::test]
    async fn a_held_back_request_queue_bounds_the_pages_waiting_for_persist() {
        const BUDGET: usize = 20_000;
        const PAGE: usize = 1_000;
        const BATCH: usize = 5;
        const SLOTS: usize = 2;
        const PAGES: usize = 200;
        let broker = broker(&[("request", None), ("persist", None)]);
        broker.set_backpressure("request", "persist", BUDGET);
        broker.send("request", (0..PAGES).map(|n| n.to_string()).collect()).await.expect("send");
        // (persisted, persisted while Request messages waited held back)
        let counts = Arc::new(Mutex::new((0_usize, 0_usize)));
        let sources = [source("request", BATCH, "request"), source("persist", BATCH, "persist")];

        run(&broker, &sources, SLOTS, |consumer, records| {
            let (broker, counts) = (broker.clone(), counts.clone());
            async move {
                if consumer == "request" {
                    for _ in &records {
                        broker.send("persist", vec!["r".repeat(PAGE)]).await.expect("send");
                    }
                } else {
                    // Persist: slower than Request.
                    for _ in 0..100 {
                        tokio::task::yield_now().await;
                    }
                    let waited = broker.is_held_back("request") && broker.depth("request") > 0;
                    let mut counts = counts.lock().expect("counts");
                    counts.0 += records.len();
                    counts.1 += usize::from(waited);
                }
                SqsBatchResponse::default()
            }
        })
        .await;

        let (persisted, waited) = *counts.lock().expect("counts");
        assert_eq!(persisted, PAGES, "every page, once");
        assert!(waited > 0, "Request waited for Persist");
        let peak = broker.peak_bytes("persist");
        assert!(peak <= BUDGET + SLOTS * BATCH * PAGE, "{peak} bytes of pages at once");
        assert!(peak < PAGES * PAGE / 4, "{peak}: not the run's pages");
        let stats = broker.stats();
        let pages = PAGES as u64;
        assert_eq!((stats.received["request"], stats.received["persist"]), (pages, pages), "nothing received twice");
        assert!(broker.is_drained());
    }

    #[tokio::test]
    async fn a_batching_window_gathers_what_a_burst_sends_into_one_invocation() {
        let broker = broker(&[("request", None), ("request-dlq", None)]);
        broker.send("request", vec!["a".into(), "b".into(), "c".into()]).await.expect("send");
        let batches: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let sources = [
            source("request", 5, "request"),
            EventSource { batching_window_secs: 30, ..source("request-dlq", 100, "notify") },
        ];

        run(&broker, &sources, 4, |consumer, records| {
            let (broker, batches) = (broker.clone(), batches.clone());
            async move {
                if consumer == "notify" {
                    batches.lock().expect("batches").push(body(&records));
                    return SqsBatchResponse::default();
                }
                // Each record fails for good and is dead-lettered on its
                // own, the drain free to run between the sends.
                for text in body(&records) {
                    broker.send("request-dlq", vec![text]).await.expect("send");
                    for _ in 0..100 {
                        tokio::task::yield_now().await;
                    }
                }
                SqsBatchResponse::default()
            }
        })
        .await;

        assert_eq!(*batches.lock().expect("batches"), [["a", "b", "c"]], "one Notify batch, so one alert");
        assert!(broker.is_drained());
    }
}
