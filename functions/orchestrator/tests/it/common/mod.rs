//! Helpers of the Orchestrator's tests: queue names and a local broker.

#![allow(dead_code)]

use std::time::Duration;

use adapters::local::{Broker, QueueConfig};

/// The Orchestrator's queues by their local names.
pub fn config() -> orchestrator::OrchestratorConfig {
    orchestrator::OrchestratorConfig {
        request_queue: "request".into(),
        persist_queue: "persist".into(),
        orchestrator_queue: "orchestrator".into(),
        athena_queue: "athena".into(),
        query_results_topic: "query-results".into(),
        dead_letter: None,
        fanout: orchestrator::Fanout::default(),
    }
}

/// The deadline of an invocation starting now: the Orchestrator's 60 s time-out.
pub fn deadline() -> tokio::time::Instant {
    tributary_core::deadline::after_timeout(tributary_core::topology::Function::Orchestrator)
}

/// A broker with `queues`.
pub fn broker(queues: &[&str]) -> Broker {
    let broker = Broker::new();
    for name in queues {
        broker.create_queue(QueueConfig {
            name: (*name).into(),
            visibility_timeout: Duration::from_secs(60),
            max_message_bytes: 262_144,
            redrive: None,
        });
    }
    broker
}

/// A count-first spec of pages of 100 records, up to 100,000 pages.
pub fn paged_spec() -> contracts::spec::PipelineSpec {
    contracts::spec::PipelineSpec::from_yaml(
        "version: 1\npipeline: customers\nstrategy: {kind: paged, page_size: 100, total_pointer: /total, max_pages: 100000}\nrequest: {url: 'http://h/c', records_pointer: /items}\ntarget: {dataset: customers}\n",
    )
    .expect("valid spec")
}

/// The probe reply of [`paged_spec`]'s run `run` saying `pages` pages (100 records each), as
/// Request sends it (the spec as context).
pub fn probe_reply(run: &orchestrator::strategy::RunContext, pages: u32) -> contracts::ProbeReply {
    contracts::ProbeReply {
        version: contracts::V1,
        pipeline: "customers".into(),
        run_id: run.run_id.clone(),
        run_date: run.run_date,
        total: u64::from(pages) * 100,
        context: serde_json::to_value(paged_spec()).expect("spec as JSON"),
    }
}

/// The run [`paged_spec`] is started for.
pub fn run(config: &orchestrator::OrchestratorConfig) -> orchestrator::strategy::RunContext {
    let run_date = chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date");
    orchestrator::run_context(config, contracts::RunId::new("20261129T060000Z").expect("run id"), run_date)
}

/// Where a [`Watch`] stops the invocation: when the pages sent to its queue reach `after`, the
/// next send to it stalls for ever, after forwarding its messages (`forward`: SQS accepted them,
/// no checkpoint was written) or before (the chunk never left).
#[derive(Clone, Copy, Debug)]
pub struct StallAt {
    /// Pages sent to the queue before the stalling send.
    pub after: usize,
    /// Whether the stalling send's messages reach the queue first.
    pub forward: bool,
}

/// A [`QueueSender`](tributary_core::ports::QueueSender) in front of a real one, recording the
/// page index of every page request `queue` accepted, and stalling where told (a Lambda
/// time-out: the test drops the handler's future once [`Watch::stalled`] fires).
pub struct Watch<'a> {
    inner: &'a dyn tributary_core::ports::QueueSender,
    queue: String,
    stall: Option<StallAt>,
    /// Page indexes accepted, in the order their sends returned.
    pub accepted: std::sync::Mutex<Vec<u32>>,
    /// Fires when the stalling send is reached.
    pub stalled: std::sync::Arc<tokio::sync::Notify>,
}

impl<'a> Watch<'a> {
    /// Watches the sends of `inner` to `queue`.
    pub fn new(inner: &'a dyn tributary_core::ports::QueueSender, queue: &str, stall: Option<StallAt>) -> Self {
        Self {
            inner,
            queue: queue.to_string(),
            stall,
            accepted: std::sync::Mutex::new(Vec::new()),
            stalled: std::sync::Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// The page indexes accepted so far.
    pub fn accepted(&self) -> Vec<u32> {
        self.accepted.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl tributary_core::ports::QueueSender for Watch<'_> {
    async fn send_messages(
        &self,
        queue: &str,
        messages: Vec<tributary_core::ports::QueueMessage>,
    ) -> Result<(), tributary_core::ports::PortError> {
        if queue != self.queue {
            return self.inner.send_messages(queue, messages).await;
        }
        let pages: Vec<u32> = messages
            .iter()
            .filter_map(|m| serde_json::from_str::<serde_json::Value>(&m.body).ok())
            .filter_map(|body| body["page"]["index"].as_u64().and_then(|i| u32::try_from(i).ok()))
            .collect();
        let stall = self.stall.filter(|stall| !pages.is_empty() && self.accepted().len() >= stall.after);
        if let Some(stall) = stall {
            if stall.forward {
                self.inner.send_messages(queue, messages).await?;
            }
            self.stalled.notify_one();
            return std::future::pending().await;
        }
        self.inner.send_messages(queue, messages).await?;
        self.accepted.lock().expect("lock").extend(pages);
        Ok(())
    }
}

/// Each page index of `0..pages` `accepted` holds, and how many times over all.
pub fn coverage(accepted: &[u32], pages: u32) -> (bool, usize) {
    let distinct: std::collections::BTreeSet<u32> = accepted.iter().copied().collect();
    (distinct.len() == pages as usize && distinct.iter().all(|&p| p < pages), accepted.len())
}
