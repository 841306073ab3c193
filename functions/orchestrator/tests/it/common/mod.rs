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
    }
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
