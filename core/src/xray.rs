//! One run, one X-Ray trace: the trace header a queue record carries is kept
//! while its handler runs, so the messages sent for that record carry it on.
//!
//! With `Tracing: Active`, Lambda traces each invocation and the runtime sets
//! `_X_AMZN_TRACE_ID` to the invocation's trace header; the AWS SDK sends it
//! on every call as `X-Amzn-Trace-Id` (its recursion-detection interceptor),
//! and SQS keeps it with each message it accepts as the `AWSTraceHeader`
//! system attribute, SNS passes it on to its subscriptions (Amazon SQS and
//! AWS X-Ray, <https://docs.aws.amazon.com/xray/latest/devguide/xray-services-sqs.html>;
//! Amazon SNS and AWS X-Ray,
//! <https://docs.aws.amazon.com/xray/latest/devguide/xray-services-sns.html>).
//! That is enough for a scheduled start, whose invocation is the run's first
//! link. But an SQS-triggered invocation is a trace of its own, linked to the
//! traces of its batch's messages (X-Ray, "Tracing event-driven
//! applications"), and its batch may hold pages of several runs: sent with
//! the invocation's header, a page's reply would leave its run's trace.
//!
//! So [`crate::batch::for_each_message`] runs each record's handler inside
//! [`with_record_trace`] with the record's own `AWSTraceHeader`, and the AWS
//! adapters send what [`record_trace`] returns instead: on SQS as the
//! message's `AWSTraceHeader` system attribute (which wins over the HTTP
//! header), on SNS as the `Publish` call's `X-Amzn-Trace-Id`. Every message
//! of a run then carries the trace the run started in, and every invocation
//! that handles one is linked to it. No X-Ray SDK is needed: the functions
//! make no segments of their own, Lambda's are enough.
//!
//! Locally nothing sets a header, and nothing is sent.

use std::future::Future;

/// The SQS message system attribute holding the X-Ray trace header (a Lambda
/// SQS record's `attributes.AWSTraceHeader`; `SendMessage`'s
/// `MessageSystemAttributes`).
pub const TRACE_HEADER_ATTRIBUTE: &str = "AWSTraceHeader";

/// The HTTP header of an X-Ray trace (`Root=1-…;Parent=…;Sampled=1`).
pub const TRACE_HEADER: &str = "x-amzn-trace-id";

/// The longest trace header passed on: X-Ray's own is about 100 characters
/// (root, parent, sampled, and a lineage); a longer value is not one.
pub const MAX_TRACE_HEADER_CHARS: usize = 256;

tokio::task_local! {
    static RECORD_TRACE: Option<String>;
}

/// Runs `future` with `header` as the record's trace ([`record_trace`]),
/// after [`trace_header`] has checked it.
pub async fn with_record_trace<F: Future>(header: Option<&str>, future: F) -> F::Output {
    RECORD_TRACE.scope(header.and_then(trace_header).map(str::to_owned), future).await
}

/// The trace header of the record being handled ([`with_record_trace`]);
/// `None` outside a record, or for a record that carried none (the
/// invocation's own header then goes with every AWS call, as the SDK sends
/// it).
pub fn record_trace() -> Option<String> {
    RECORD_TRACE.try_with(Clone::clone).ok().flatten()
}

/// `value` if it reads as an X-Ray trace header: `Root=…` first, printable
/// ASCII without spaces, at most [`MAX_TRACE_HEADER_CHARS`]; anything else
/// (a sender's own attribute of that name) is not passed on, since SQS
/// refuses a malformed `AWSTraceHeader` and an HTTP header cannot hold
/// control characters.
pub fn trace_header(value: &str) -> Option<&str> {
    let value = value.trim();
    (value.starts_with("Root=") && value.len() <= MAX_TRACE_HEADER_CHARS && value.bytes().all(|b| b.is_ascii_graphic()))
        .then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

    #[tokio::test]
    async fn a_records_trace_is_seen_inside_its_scope_only() {
        assert_eq!(record_trace(), None, "outside any record");
        let inside = with_record_trace(Some(HEADER), async { record_trace() }).await;
        assert_eq!(inside.as_deref(), Some(HEADER));
        assert_eq!(with_record_trace(None, async { record_trace() }).await, None);
        // Two records handled at once keep their own.
        let other = "Root=1-00000000-000000000000000000000001;Sampled=0";
        let (a, b) = futures::join!(
            with_record_trace(Some(HEADER), async {
                tokio::task::yield_now().await;
                record_trace()
            }),
            with_record_trace(Some(other), async {
                tokio::task::yield_now().await;
                record_trace()
            }),
        );
        assert_eq!((a.as_deref(), b.as_deref()), (Some(HEADER), Some(other)));
        assert_eq!(record_trace(), None);
    }

    #[test]
    fn only_a_trace_header_is_passed_on() {
        assert_eq!(trace_header(HEADER), Some(HEADER));
        assert_eq!(trace_header(&format!(" {HEADER}\n")), Some(HEADER));
        for bad in ["", "Sampled=1", "Root=1-a b", "Root=1-\u{7}", &format!("Root={}", "a".repeat(300))] {
            assert_eq!(trace_header(bad), None, "{bad:?}");
        }
    }
}
