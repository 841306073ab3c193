//! The local broker's queues read out in tests: every message body a
//! queue holds, each message deleted once read (the queue is left empty).

use adapters::local::Broker;
use serde_json::Value;

/// Every message body on `queue` of `broker`, as sent (text), in the order
/// received (batches of 10); the queue is left empty.
///
/// # Panics
/// When the queue does not exist, or a message has no body or receipt.
pub fn drain(broker: &Broker, queue: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let records = broker.receive(queue, 10).expect("receive");
        if records.is_empty() {
            return bodies;
        }
        for record in records {
            broker.delete(queue, record.receipt_handle.as_deref().expect("receipt"));
            bodies.push(record.body.expect("body"));
        }
    }
}

/// [`drain`], each body parsed as JSON.
///
/// # Panics
/// As [`drain`], and when a body is not JSON.
pub fn drain_json(broker: &Broker, queue: &str) -> Vec<Value> {
    drain(broker, queue).iter().map(|body| serde_json::from_str(body).expect("JSON body")).collect()
}
