//! Batch calls shared by SQS `SendMessageBatch` and SNS `PublishBatch`:
//! splitting entries by count and bytes, and retrying failed entries.
//!
//! Both APIs take at most 10 entries per call, and both cap the *sum* of the
//! entries' sizes (256 KiB by default; SQS raised its per-message and batch
//! maximum to 1 MiB in 2025, SNS still allows 256 KiB):
//! - <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html>
//! - <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html>
//! - <https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html>
//!
//! A batch call can succeed while some of its entries fail; each failed
//! entry says whether the fault is the sender's (`SenderFault`). Entries
//! failed without sender fault are sent again, by id, after a short backoff;
//! an entry failed by the sender's fault is a permanent error.
//!
//! The calls of one `send`/`publish` go one after another by default; with
//! [`BatchClient::with_max_in_flight`] up to that many are in flight at once
//! (the Orchestrator sends a 1,000-page chunk as 100 calls, 16 at a time).
//! Neither API has a request-rate quota for standard queues and topics that
//! a few calls in flight approach; the entries' order across calls is then
//! not kept (a standard queue does not keep it either).
//!
//! The two SDKs declare the same shapes twice (`MessageAttributeValue`,
//! `BatchResultErrorEntry`); `StringAttribute` and the `From` impls for
//! `FailedEntry` read both, so each adapter only builds its own entries.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use tributary_core::ports::PortError;

use super::error::build_error;

/// Most entries one `SendMessageBatch` or `PublishBatch` call takes.
pub const MAX_BATCH_ENTRIES: usize = 10;

/// Default most bytes of one batch call, all entries together: 262,144 bytes
/// (256 KiB), the classic SQS `MaximumMessageSize` and the SNS publish limit.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 262_144;

/// The limits one batch call must respect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most entries per call (at most [`MAX_BATCH_ENTRIES`]).
    pub max_entries: usize,
    /// Most bytes per call, all entries' sizes added up; also the largest
    /// single entry accepted.
    pub max_bytes: usize,
}

impl Default for BatchLimits {
    /// 10 entries, 262,144 bytes.
    fn default() -> Self {
        Self { max_entries: MAX_BATCH_ENTRIES, max_bytes: DEFAULT_MAX_BATCH_BYTES }
    }
}

/// An SDK client with the limits its batch calls respect: the one shape of
/// [`SqsSender`](super::SqsSender) (`aws_sdk_sqs::Client`) and
/// [`SnsPublisher`](super::SnsPublisher) (`aws_sdk_sns::Client`).
///
/// Build once at cold start and share: the SDK client holds the connection
/// pool.
#[derive(Clone, Debug)]
pub struct BatchClient<C> {
    pub(crate) client: C,
    limits: BatchLimits,
    in_flight: usize,
}

impl<C> BatchClient<C> {
    /// `client` with the default limits (10 entries, 262,144 bytes per call),
    /// one call in flight at a time.
    pub fn new(client: C) -> Self {
        Self { client, limits: BatchLimits::default(), in_flight: 1 }
    }

    /// Lets up to `calls` batch calls of one `send`/`publish` be in flight at
    /// once (at least 1; the default is 1: one after another, in order).
    /// Which calls succeeded before an error is then not a prefix: every
    /// consumer of these messages is idempotent (at-least-once delivery).
    pub fn with_max_in_flight(mut self, calls: usize) -> Self {
        self.in_flight = calls.max(1);
        self
    }

    /// Batch calls in flight at once at most.
    pub fn max_in_flight(&self) -> usize {
        self.in_flight
    }

    /// Caps the bytes of one call (and of one message) at `max_bytes`: for
    /// SQS, set it to the target queues' `MaximumMessageSize` when that is
    /// smaller than 256 KiB, or up to 1,048,576 for queues raised to 1 MiB;
    /// SNS takes at most 262,144.
    pub fn with_max_batch_bytes(mut self, max_bytes: usize) -> Self {
        self.limits.max_bytes = max_bytes;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }
}

/// An entry larger than [`BatchLimits::max_bytes`] on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Oversize {
    /// Index of the entry.
    pub index: usize,
    /// Its size in bytes.
    pub bytes: usize,
}

/// Splits entries of the given sizes (bytes) into consecutive batches, in
/// order, each with at most `limits.max_entries` entries (clamped to 1..=10)
/// and at most `limits.max_bytes` bytes in all. Returns index ranges.
///
/// # Errors
/// [`Oversize`] for the first entry larger than `limits.max_bytes` alone.
pub fn split_batches(sizes: &[usize], limits: BatchLimits) -> Result<Vec<Range<usize>>, Oversize> {
    let max_entries = limits.max_entries.clamp(1, MAX_BATCH_ENTRIES);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (index, &size) in sizes.iter().enumerate() {
        if size > limits.max_bytes {
            return Err(Oversize { index, bytes: size });
        }
        let full = index - start >= max_entries || bytes.saturating_add(size) > limits.max_bytes;
        if index > start && full {
            batches.push(start..index);
            start = index;
            bytes = 0;
        }
        bytes += size;
    }
    if start < sizes.len() {
        batches.push(start..sizes.len());
    }
    Ok(batches)
}

/// The entry id sent for the entry at `index` of a `send`/`publish` call
/// (ids must be unique within a batch: alphanumerics, `-`, `_`, ≤ 80 chars).
pub(crate) fn entry_id(index: usize) -> String {
    format!("m{index}")
}

/// One entry reported in a batch response's `Failed` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FailedEntry {
    /// Entry id as sent.
    pub id: String,
    /// `SenderFault`: the request itself is wrong, retrying cannot help.
    pub sender_fault: bool,
    /// Error code.
    pub code: String,
    /// Error message.
    pub message: Option<String>,
}

/// What a batch call reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchOutcome {
    /// Ids in the `Successful` list.
    pub successful: Vec<String>,
    /// The `Failed` list.
    pub failed: Vec<FailedEntry>,
}

/// Reads an SDK's `BatchResultErrorEntry` (one type per SDK crate, the
/// same fields: `Id`, `SenderFault`, `Code`, `Message`).
macro_rules! failed_entry_from {
    ($($entry:ty),+ $(,)?) => {$(
        impl From<&$entry> for FailedEntry {
            fn from(entry: &$entry) -> Self {
                FailedEntry {
                    id: entry.id().to_string(),
                    sender_fault: entry.sender_fault(),
                    code: entry.code().to_string(),
                    message: entry.message().map(str::to_string),
                }
            }
        }
    )+};
}

failed_entry_from!(aws_sdk_sqs::types::BatchResultErrorEntry, aws_sdk_sns::types::BatchResultErrorEntry);

/// A message attribute of data type `String` (what SQS and SNS subscription
/// filter policies match on), one impl per SDK's `MessageAttributeValue`.
pub(crate) trait StringAttribute: Sized {
    /// The attribute holding `value`.
    ///
    /// # Errors
    /// The SDK builder's error (a required field missing: a bug here; one
    /// smithy type, re-exported by each SDK crate).
    fn string(value: &str) -> Result<Self, aws_sdk_sqs::error::BuildError>;
}

macro_rules! string_attribute {
    ($($value:ty),+ $(,)?) => {$(
        impl StringAttribute for $value {
            fn string(value: &str) -> Result<Self, aws_sdk_sqs::error::BuildError> {
                <$value>::builder().data_type("String").string_value(value).build()
            }
        }
    )+};
}

string_attribute!(aws_sdk_sqs::types::MessageAttributeValue, aws_sdk_sns::types::MessageAttributeValue);

/// `attributes` as an entry's `MessageAttributes`, each a `String`
/// attribute; `None` when there are none (the field is then left out of
/// the request, as before).
///
/// # Errors
/// [`PortError::Permanent`] (an invalid request) naming `operation` and
/// `target` when an attribute cannot be built.
pub(crate) fn string_attributes<V: StringAttribute>(
    operation: &'static str,
    target: &str,
    attributes: &BTreeMap<String, String>,
) -> Result<Option<HashMap<String, V>>, PortError> {
    if attributes.is_empty() {
        return Ok(None);
    }
    attributes
        .iter()
        .map(|(name, value)| Ok((name.clone(), V::string(value).map_err(|err| build_error(operation, target, err))?)))
        .collect::<Result<HashMap<_, _>, PortError>>()
        .map(Some)
}

/// Delays between re-sends of failed entries: 100 ms doubling to 2 s, with
/// jitter, 5 re-sends at most (about 4 s in all, well inside a Lambda's
/// time).
pub(crate) fn entry_retry_policy() -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(5)
        .with_jitter()
}

/// Sends every entry, sizes `sizes` (bytes), in batch calls within `limits`
/// ([`split_batches`]), up to `in_flight` calls at once (1: one after
/// another, in order), each call's failed entries re-sent by [`send_all`]
/// with [`entry_retry_policy`]. `call` sends the entries at the given
/// indices in one batch call.
///
/// # Errors
/// - [`PortError::TooLarge`] (`what: "message"`) when one entry alone is
///   over `limits.max_bytes`: nothing is sent;
/// - the first error of [`send_all`]; the calls still in flight are then
///   dropped (each may or may not have reached the service), and with
///   `in_flight` 1 the batches before the failing one are sent.
pub(crate) async fn send_in_batches<F, Fut>(
    operation: &'static str,
    target: &str,
    sizes: &[usize],
    limits: BatchLimits,
    in_flight: usize,
    call: F,
) -> Result<(), PortError>
where
    F: Fn(Vec<usize>) -> Fut,
    Fut: Future<Output = Result<BatchOutcome, PortError>>,
{
    use futures::StreamExt;

    let batches = split_batches(sizes, limits).map_err(|over| PortError::TooLarge {
        what: "message",
        target: target.to_string(),
        bytes: over.bytes,
        limit: limits.max_bytes,
    })?;
    let (policy, call) = (entry_retry_policy(), &call);
    let mut calls = futures::stream::iter(batches)
        .map(|batch| send_all(operation, target, batch.collect(), &policy, call))
        .buffer_unordered(in_flight.max(1));
    while let Some(sent) = calls.next().await {
        sent?;
    }
    Ok(())
}

/// Sends the entries `indices` with `call` (one batch call for the given
/// indices) until every one is in a `Successful` list.
///
/// Entries failed without sender fault, or missing from both lists, are sent
/// again after the next delay of `policy`. Returns `Ok` only when every entry
/// succeeded.
///
/// # Errors
/// - the error of `call` itself;
/// - [`PortError::Permanent`] naming the first entry failed with
///   `SenderFault = true` (or with an unknown id);
/// - [`PortError::Transient`] naming the entries still failing when the
///   policy's retries are used up.
pub(crate) async fn send_all<F, Fut>(
    operation: &'static str,
    target: &str,
    indices: Vec<usize>,
    policy: &ExponentialBuilder,
    mut call: F,
) -> Result<(), PortError>
where
    F: FnMut(Vec<usize>) -> Fut,
    Fut: Future<Output = Result<BatchOutcome, PortError>>,
{
    let mut delays = policy.build();
    let mut pending = indices;
    loop {
        let outcome = call(pending.clone()).await?;
        let by_id: BTreeMap<String, usize> = pending.iter().map(|&i| (entry_id(i), i)).collect();
        let mut reasons: BTreeMap<usize, String> = BTreeMap::new();
        for failed in &outcome.failed {
            let describe = || {
                format!(
                    "entry {} failed: {}: {}",
                    failed.id,
                    failed.code,
                    failed.message.as_deref().unwrap_or("(no message)")
                )
            };
            let Some(&index) = by_id.get(&failed.id) else {
                return Err(PortError::permanent_msg(
                    operation,
                    target.to_string(),
                    format!("response names an entry we did not send: {}", describe()),
                ));
            };
            // `SenderFault` is the service's verdict on the entry: the
            // request is wrong and will fail again.
            if failed.sender_fault {
                return Err(PortError::permanent_msg(
                    operation,
                    target.to_string(),
                    format!("{} (entry {} of the call)", describe(), index + 1),
                ));
            }
            reasons.insert(index, describe());
        }
        let succeeded: BTreeSet<&str> = outcome.successful.iter().map(String::as_str).collect();
        let remaining: Vec<usize> =
            pending.iter().copied().filter(|&i| !succeeded.contains(entry_id(i).as_str())).collect();
        if remaining.is_empty() {
            return Ok(());
        }
        let summary = remaining
            .iter()
            .map(|i| reasons.remove(i).unwrap_or_else(|| format!("entry {} missing from the response", entry_id(*i))))
            .collect::<Vec<_>>()
            .join("; ");
        let Some(delay) = delays.next() else {
            return Err(PortError::transient_msg(
                operation,
                target.to_string(),
                format!("{} entries still failing after retries: {summary}", remaining.len()),
            ));
        };
        tracing::warn!(
            operation,
            target,
            entries = remaining.len(),
            delay_ms = delay.as_millis() as u64,
            reasons = %summary,
            "retrying failed batch entries"
        );
        tokio::time::sleep(delay).await;
        pending = remaining;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn limits(max_entries: usize, max_bytes: usize) -> BatchLimits {
        BatchLimits { max_entries, max_bytes }
    }

    #[test]
    fn splits_by_count_and_by_bytes() {
        let sizes = vec![1; 25];
        let batches = split_batches(&sizes, BatchLimits::default()).unwrap();
        assert_eq!(batches, vec![0..10, 10..20, 20..25]);

        // 25 messages of 60 KiB: 4 fit in 256 KiB, a fifth would not.
        let sizes = vec![61_440; 25];
        let batches = split_batches(&sizes, BatchLimits::default()).unwrap();
        assert_eq!(batches.len(), 7);
        for batch in &batches {
            let bytes: usize = sizes[batch.clone()].iter().sum();
            assert!(batch.len() <= 10 && bytes <= 262_144, "{batch:?}");
        }
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 25);

        // Exactly full batches, then a mixed tail.
        let sizes = [100, 100, 50, 150, 1, 200];
        assert_eq!(split_batches(&sizes, limits(10, 200)).unwrap(), vec![0..2, 2..4, 4..5, 5..6]);
        assert!(split_batches(&[], BatchLimits::default()).unwrap().is_empty());
        // A zero entry limit is clamped to one.
        assert_eq!(split_batches(&[1, 1], limits(0, 10)).unwrap(), vec![0..1, 1..2]);
    }

    #[test]
    fn an_entry_over_the_limit_alone_is_refused() {
        assert_eq!(split_batches(&[10, 300, 10], limits(10, 200)), Err(Oversize { index: 1, bytes: 300 }));
        assert!(split_batches(&[200], limits(10, 200)).is_ok());
    }

    fn fast() -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(1))
            .with_max_delay(Duration::from_millis(2))
            .with_max_times(3)
    }

    fn failed(id: &str, sender_fault: bool, code: &str) -> FailedEntry {
        FailedEntry { id: id.into(), sender_fault, code: code.into(), message: Some("boom".into()) }
    }

    #[test]
    fn attributes_are_string_attributes_and_none_are_left_out() {
        let none: Option<HashMap<String, aws_sdk_sqs::types::MessageAttributeValue>> =
            string_attributes("SendMessageBatch", "q", &BTreeMap::new()).unwrap();
        assert!(none.is_none());
        let attributes = BTreeMap::from([("kind".to_string(), "rows".to_string())]);
        let sns: HashMap<String, aws_sdk_sns::types::MessageAttributeValue> =
            string_attributes("PublishBatch", "topic", &attributes).unwrap().expect("one attribute");
        assert_eq!(sns["kind"].data_type(), "String");
        assert_eq!(sns["kind"].string_value(), Some("rows"));
    }

    #[test]
    fn failed_entries_read_both_sdks() {
        use aws_sdk_sns::types::BatchResultErrorEntry as SnsEntry;
        use aws_sdk_sqs::types::BatchResultErrorEntry as SqsEntry;
        let sqs = SqsEntry::builder().id("m1").sender_fault(true).code("InvalidParameterValue").message("boom").build();
        assert_eq!(FailedEntry::from(&sqs.unwrap()), failed("m1", true, "InvalidParameterValue"));
        let sns = SnsEntry::builder().id("m2").sender_fault(false).code("InternalError").build();
        assert_eq!(
            FailedEntry::from(&sns.unwrap()),
            FailedEntry { message: None, ..failed("m2", false, "InternalError") }
        );
    }

    #[tokio::test]
    async fn transient_failures_are_resent_by_id_until_accepted() {
        let calls = Mutex::new(Vec::new());
        let result = send_all("SendMessageBatch", "q", vec![0, 1, 2], &fast(), |batch| {
            let attempt = {
                let mut calls = calls.lock().unwrap();
                calls.push(batch.clone());
                calls.len()
            };
            async move {
                Ok(match attempt {
                    // m1 fails transiently, m2 is missing from the response.
                    1 => BatchOutcome {
                        successful: vec!["m0".into()],
                        failed: vec![failed("m1", false, "InternalError")],
                    },
                    _ => BatchOutcome { successful: batch.iter().map(|&i| entry_id(i)).collect(), failed: vec![] },
                })
            }
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(*calls.lock().unwrap(), vec![vec![0, 1, 2], vec![1, 2]]);
    }

    #[tokio::test]
    async fn batches_go_up_to_in_flight_at_once_and_every_entry_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let sent = Mutex::new(Vec::new());
        for (in_flight, expected_peak) in [(1, 1), (4, 4)] {
            peak.store(0, Ordering::SeqCst);
            sent.lock().unwrap().clear();
            let sizes = vec![1; 95];
            send_in_batches("SendMessageBatch", "q", &sizes, BatchLimits::default(), in_flight, |batch| {
                let (now, peak, sent) = (&now, &peak, &sent);
                async move {
                    peak.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    sent.lock().unwrap().extend(batch.iter().copied());
                    Ok(BatchOutcome { successful: batch.iter().map(|&i| entry_id(i)).collect(), failed: vec![] })
                }
            })
            .await
            .expect("sent");
            assert_eq!(peak.load(Ordering::SeqCst), expected_peak, "{in_flight} in flight");
            let mut sent = sent.lock().unwrap().clone();
            if in_flight == 1 {
                assert!(sent.is_sorted(), "one at a time keeps the order");
            }
            sent.sort_unstable();
            assert_eq!(sent, (0..95).collect::<Vec<_>>(), "every entry once");
        }
    }

    #[tokio::test]
    async fn sender_fault_is_permanent_and_names_the_entry() {
        let err = send_all("PublishBatch", "topic", vec![0, 1], &fast(), |_| async {
            Ok(BatchOutcome { successful: vec!["m0".into()], failed: vec![failed("m1", true, "InvalidParameter")] })
        })
        .await
        .unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("m1") && err.to_string().contains("InvalidParameter"), "{err}");
    }

    #[tokio::test]
    async fn persistent_transient_failures_end_as_a_transient_error() {
        let err = send_all("SendMessageBatch", "q", vec![0], &fast(), |_| async {
            Ok(BatchOutcome { successful: vec![], failed: vec![failed("m0", false, "ServiceUnavailable")] })
        })
        .await
        .unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().contains("m0"), "{err}");
    }
}
