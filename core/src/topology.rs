//! The topology — queues, DLQs, redrive policies, topics, subscriptions and
//! which function consumes which queue — declared once.
//!
//! The local runtime builds its in-process queues from this table, and the
//! AWS stack (infra/template.yaml) declares the same resources. Names here
//! are logical; on AWS they are prefixed with the stack name
//! (`<stack>-request`, …), which [`function_for_dead_letter_queue`] accepts.

use std::time::Duration;

/// The five functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Function {
    /// Plans calls.
    Orchestrator,
    /// Calls vendor APIs.
    Request,
    /// Writes Parquet.
    Persist,
    /// Runs queries.
    Athena,
    /// Turns dead letters into alerts.
    Notify,
}

impl Function {
    /// Lower-case name, as in logs and alerts.
    pub fn name(self) -> &'static str {
        match self {
            Function::Orchestrator => "orchestrator",
            Function::Request => "request",
            Function::Persist => "persist",
            Function::Athena => "athena",
            Function::Notify => "notify",
        }
    }
}

/// A Lambda function's settings that the queues depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionDecl {
    /// Which function.
    pub function: Function,
    /// Lambda `Timeout` in seconds (Lambda allows at most 900).
    pub timeout_secs: u64,
    /// Lambda `MemorySize` in MB.
    pub memory_mb: u32,
}

/// The five functions' timeouts and memory. Each queue's visibility timeout
/// is at least six times its consumer's timeout, as the Lambda developer
/// guide recommends for SQS event sources (so a message is not redelivered
/// while a throttled or retried invocation still holds it).
pub const FUNCTIONS: &[FunctionDecl] = &[
    FunctionDecl { function: Function::Orchestrator, timeout_secs: 60, memory_mb: 256 },
    FunctionDecl { function: Function::Request, timeout_secs: 120, memory_mb: 384 },
    FunctionDecl { function: Function::Persist, timeout_secs: 300, memory_mb: 1024 },
    FunctionDecl { function: Function::Athena, timeout_secs: 900, memory_mb: 256 },
    FunctionDecl { function: Function::Notify, timeout_secs: 30, memory_mb: 128 },
];

/// The declaration of `function` ([`FUNCTIONS`] is in declaration order).
pub fn function(function: Function) -> &'static FunctionDecl {
    &FUNCTIONS[function as usize]
}

/// One SQS queue and the Lambda event source mapping that drains it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueDecl {
    /// Logical name.
    pub name: &'static str,
    /// Function triggered by the queue, if any.
    pub consumer: Option<Function>,
    /// Event source mapping `BatchSize` (SQS: at most 10 without a batching
    /// window, up to 10,000 with one).
    pub batch_size: usize,
    /// Event source mapping `MaximumBatchingWindowInSeconds` (0-300): how
    /// long Lambda gathers records before invoking; Notify's DLQs use it so
    /// a burst of dead letters becomes one grouped alert.
    pub batching_window_secs: u32,
    /// `VisibilityTimeout` in seconds; at least the consumer's timeout
    /// (AWS recommends six times it for SQS event sources).
    pub visibility_timeout_secs: u64,
    /// Redrive policy: `(dead-letter queue, maxReceiveCount)`.
    pub redrive: Option<(&'static str, u32)>,
}

impl QueueDecl {
    /// The visibility timeout as a duration.
    pub fn visibility_timeout(&self) -> Duration {
        Duration::from_secs(self.visibility_timeout_secs)
    }
}

/// The orchestrator's queue: probe replies and query rows.
pub const ORCHESTRATOR_QUEUE: &str = "orchestrator";
/// Request's queue.
pub const REQUEST_QUEUE: &str = "request";
/// Persist's queue.
pub const PERSIST_QUEUE: &str = "persist";
/// The Athena function's queue.
pub const ATHENA_QUEUE: &str = "athena";
/// Where EventBridge Scheduler puts the invocations it could not deliver
/// after its retry policy (the schedules' `DeadLetterConfig`).
pub const SCHEDULER_DLQ: &str = "scheduler-dlq";
/// Where Notify's own failures go; nothing consumes it (operators alarm on
/// its depth).
pub const NOTIFY_DLQ: &str = "notify-dlq";
/// Where SNS puts the query-results messages it could not deliver to the
/// orchestrator queue (the subscription's redrive policy; on AWS only: the
/// local broker delivers in process). Nothing consumes it: operators alarm
/// on its depth.
pub const QUERY_RESULTS_DLQ: &str = "query-results-dlq";
/// Notify's subscription to the run-events topic: completed runs Notify
/// alerts (`notify = true`: they changed their dataset's columns, not
/// under `target.on_schema_change: evolve`, or hold records twice).
pub const SCHEMA_CHANGES_QUEUE: &str = "schema-changes";
/// The topic Athena publishes rows on.
pub const QUERY_RESULTS_TOPIC: &str = "query-results";
/// The topic Notify publishes alerts on (e-mail/SMS subscribers).
pub const ALERTS_TOPIC: &str = "alerts";
/// The topic completed runs are announced on (`run-completed.v1`), for
/// dashboards and downstream jobs.
pub const RUN_EVENTS_TOPIC: &str = "run-events";

/// Default `maxReceiveCount` of the work queues.
pub const MAX_RECEIVE_COUNT: u32 = 5;

/// `maxReceiveCount` of the DLQs (redriving to `notify-dlq`). SQS carries a
/// message's `ApproximateReceiveCount` into its DLQ, so this must exceed
/// [`MAX_RECEIVE_COUNT`] or a dead letter would skip Notify altogether.
pub const DLQ_MAX_RECEIVE_COUNT: u32 = 10;

/// Every queue.
pub const QUEUES: &[QueueDecl] = &[
    work_queue(ORCHESTRATOR_QUEUE, Function::Orchestrator, 10, 360, "orchestrator-dlq"),
    work_queue(REQUEST_QUEUE, Function::Request, 5, 720, "request-dlq"),
    work_queue(PERSIST_QUEUE, Function::Persist, 5, 1800, "persist-dlq"),
    work_queue(ATHENA_QUEUE, Function::Athena, 1, 5400, "athena-dlq"),
    dead_letter_queue("orchestrator-dlq"),
    dead_letter_queue("request-dlq"),
    dead_letter_queue("persist-dlq"),
    dead_letter_queue("athena-dlq"),
    // Runs EventBridge Scheduler could not deliver (every schedule's
    // DeadLetterConfig, `tributary deploy-schedules`). Locally nothing sends
    // to it: `tributary run` starts runs itself.
    dead_letter_queue(SCHEDULER_DLQ),
    QueueDecl {
        name: SCHEMA_CHANGES_QUEUE,
        consumer: Some(Function::Notify),
        batch_size: 10,
        batching_window_secs: 0,
        visibility_timeout_secs: 180,
        redrive: Some((NOTIFY_DLQ, DLQ_MAX_RECEIVE_COUNT)),
    },
    QueueDecl {
        name: NOTIFY_DLQ,
        consumer: None,
        batch_size: 10,
        batching_window_secs: 0,
        visibility_timeout_secs: 180,
        redrive: None,
    },
    QueueDecl {
        name: QUERY_RESULTS_DLQ,
        consumer: None,
        batch_size: 10,
        batching_window_secs: 0,
        visibility_timeout_secs: 180,
        redrive: None,
    },
];

const fn work_queue(
    name: &'static str,
    consumer: Function,
    batch_size: usize,
    visibility_timeout_secs: u64,
    dlq: &'static str,
) -> QueueDecl {
    QueueDecl {
        name,
        consumer: Some(consumer),
        batch_size,
        batching_window_secs: 0,
        visibility_timeout_secs,
        redrive: Some((dlq, MAX_RECEIVE_COUNT)),
    }
}

const fn dead_letter_queue(name: &'static str) -> QueueDecl {
    QueueDecl {
        name,
        consumer: Some(Function::Notify),
        batch_size: 100,
        batching_window_secs: 30,
        visibility_timeout_secs: 180,
        redrive: Some((NOTIFY_DLQ, DLQ_MAX_RECEIVE_COUNT)),
    }
}

/// A topic's subscription to a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSubscriptionDecl {
    /// Topic.
    pub topic: &'static str,
    /// Subscribed queue.
    pub queue: &'static str,
    /// `RawMessageDelivery`.
    pub raw: bool,
    /// The subscription's `RedrivePolicy` target: where SNS puts messages
    /// it could not deliver (the queue deleted, its policy refusing SNS).
    pub dlq: Option<&'static str>,
    /// The subscription's `FilterPolicy` on a message attribute: only
    /// messages whose attribute `.0` is `.1` are delivered.
    pub filter: Option<(&'static str, &'static str)>,
}

/// Topic-to-queue subscriptions (SNS -> SQS fan-out).
pub const QUEUE_SUBSCRIPTIONS: &[QueueSubscriptionDecl] = &[
    QueueSubscriptionDecl {
        topic: QUERY_RESULTS_TOPIC,
        queue: ORCHESTRATOR_QUEUE,
        raw: true,
        dlq: Some(QUERY_RESULTS_DLQ),
        filter: None,
    },
    QueueSubscriptionDecl {
        topic: RUN_EVENTS_TOPIC,
        queue: SCHEMA_CHANGES_QUEUE,
        raw: true,
        dlq: Some(NOTIFY_DLQ),
        filter: Some((crate::ledger::NOTIFY_ATTRIBUTE, "true")),
    },
];

/// Every topic.
pub const TOPICS: &[&str] = &[QUERY_RESULTS_TOPIC, ALERTS_TOPIC, RUN_EVENTS_TOPIC];

/// The declaration of `name`, if it is one of ours.
pub fn queue(name: &str) -> Option<&'static QueueDecl> {
    QUEUES.iter().find(|q| q.name == name)
}

/// The function whose work queue redrives into dead-letter queue `dlq_name`.
/// Accepts the logical name and stack-prefixed names (`<stack>-request-dlq`).
pub fn function_for_dead_letter_queue(dlq_name: &str) -> Option<Function> {
    QUEUES.iter().find_map(|q| {
        let (dlq, _) = q.redrive?;
        let matches = dlq_name == dlq || dlq_name.strip_suffix(dlq).is_some_and(|prefix| prefix.ends_with('-'));
        if matches && q.consumer != Some(Function::Notify) { q.consumer } else { None }
    })
}

/// The function consuming work queue `queue_name` (logical or prefixed).
pub fn function_for_queue(queue_name: &str) -> Option<Function> {
    QUEUES.iter().find_map(|q| {
        let matches = queue_name == q.name || queue_name.strip_suffix(q.name).is_some_and(|p| p.ends_with('-'));
        if matches { q.consumer } else { None }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_redrive_target_and_subscription_exists() {
        for q in QUEUES {
            if let Some((dlq, count)) = q.redrive {
                assert!(queue(dlq).is_some(), "{} redrives to undeclared {dlq}", q.name);
                assert!(count >= 1);
            }
            let max_batch = if q.batching_window_secs > 0 { 10_000 } else { 10 };
            assert!((1..=max_batch).contains(&q.batch_size), "{}: SQS batch size 1..={max_batch}", q.name);
            assert!(q.batching_window_secs <= 300, "{}: batching window 0..=300 s", q.name);
            if let Some(consumer) = q.consumer {
                let timeout = function(consumer).timeout_secs;
                assert!(q.visibility_timeout_secs >= 6 * timeout, "{}: visibility below 6x {timeout} s", q.name);
            }
        }
        for s in QUEUE_SUBSCRIPTIONS {
            assert!(TOPICS.contains(&s.topic) && queue(s.queue).is_some());
            assert!(s.dlq.is_none_or(|dlq| queue(dlq).is_some_and(|q| q.consumer.is_none())), "{}", s.topic);
        }
    }

    #[test]
    fn functions_are_declared_in_enum_order() {
        for (index, decl) in FUNCTIONS.iter().enumerate() {
            assert_eq!(decl.function as usize, index);
            assert!(decl.timeout_secs <= 900, "Lambda's maximum timeout is 900 s");
        }
    }

    #[test]
    fn dead_letter_queues_map_back_to_their_function() {
        assert_eq!(function_for_dead_letter_queue("request-dlq"), Some(Function::Request));
        assert_eq!(function_for_dead_letter_queue("tributary-prod-persist-dlq"), Some(Function::Persist));
        assert_eq!(function_for_dead_letter_queue("somebody-elses-queue"), None);
        assert_eq!(function_for_queue("tributary-prod-request"), Some(Function::Request));
    }
}
