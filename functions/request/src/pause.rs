//! A vendor's long pause: a `Retry-After` longer than Request waits inside an
//! invocation (`MAX_RETRY_AFTER_SECS`, [`crate::RequestConfig::max_retry_after`]).
//!
//! The page must be called again once the pause is over, and waiting for the
//! vendor is not a failure of the page: it must not count toward the queue's
//! `maxReceiveCount`, or a throttled run (Django REST Framework's `100/min`
//! answers `Retry-After: 60`) would be dead-lettered after five pauses. So
//! Request sends the message again to its own queue with the pause as its
//! delay (`SendMessage` `DelaySeconds`) and counts the received one handled:
//! the copy is a new message whose receive count starts again at 0.
//!
//! - SQS delays a message at most 15 minutes ([`MAX_DELAY`]): a longer pause
//!   is waited out in steps, the copy carrying what is left
//!   ([`PAUSE_LEFT_SECS`]); a copy received with time left is sent again
//!   with the next step, without calling the vendor.
//! - Every copy carries the pauses the vendor asked for this message so far
//!   ([`PAUSED_SECS`]). Past 12 hours in all ([`MAX_PAUSED`]) a vendor that
//!   keeps throttling is a failure again: the message's visibility becomes
//!   the pause (`ChangeMessageVisibility`) and the receive counts, so it
//!   ends in the DLQ with an alert instead of pausing for ever.
//! - When the copy cannot be sent (no own queue, a port without delays, a
//!   send error), the visibility change is the fallback, as before.
//!
//! What to do is decided here from the record's attributes and the pause
//! alone ([`plan`], [`resume`]); the handler does the sending.

use std::collections::BTreeMap;
use std::time::Duration;

pub use tributary_core::ports::MAX_DELAY;

/// Message attribute: the seconds of pause the vendor asked for this
/// message so far, over all its copies.
pub const PAUSED_SECS: &str = "tributary-paused-secs";

/// Message attribute: the seconds of the current pause still to wait
/// before the vendor is called (a pause longer than [`MAX_DELAY`]).
pub const PAUSE_LEFT_SECS: &str = "tributary-pause-left-secs";

/// The most pause a message may have in all before waiting for the vendor
/// counts as a failure: 12 hours, the longest visibility SQS allows
/// ([`tributary_core::ports::MAX_VISIBILITY_TIMEOUT`]).
pub const MAX_PAUSED: Duration = tributary_core::ports::MAX_VISIBILITY_TIMEOUT;

/// The pause state a record carries in its message attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Paused {
    /// [`PAUSED_SECS`]: pause asked so far (0 for a message never paused).
    pub secs: u64,
    /// [`PAUSE_LEFT_SECS`]: the current pause's seconds still to wait.
    pub left_secs: u64,
}

impl Paused {
    /// The state in `attributes` (a record's message attributes); values
    /// that are not whole seconds read as 0.
    pub fn of(attributes: &BTreeMap<String, String>) -> Self {
        let secs = |name: &str| attributes.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        Self { secs: secs(PAUSED_SECS), left_secs: secs(PAUSE_LEFT_SECS) }
    }
}

/// What to do with a message the vendor paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Send it again to Request's own queue, visible after `delay`, with
    /// these attributes (ours replaced, the sender's kept), and count the
    /// received one handled.
    Copy {
        /// At most [`MAX_DELAY`].
        delay: Duration,
        /// The copy's message attributes.
        attributes: BTreeMap<String, String>,
    },
    /// Fail the record and make it visible again after `pause`
    /// (`ChangeMessageVisibility`): the receive counts.
    Visibility(Duration),
}

/// The plan for a message whose vendor asked for `pause`, the message
/// carrying `attributes` (its pause so far, [`Paused`]).
pub fn plan(attributes: &BTreeMap<String, String>, pause: Duration) -> Plan {
    // Whole seconds, rounded up: never call before the vendor said.
    let pause_secs = pause.as_secs() + u64::from(pause.subsec_nanos() > 0);
    let paused = Paused::of(attributes).secs.saturating_add(pause_secs);
    if paused > MAX_PAUSED.as_secs() {
        return Plan::Visibility(pause);
    }
    step(attributes, paused, pause_secs)
}

/// The step still to wait for a message received with time left on its
/// pause ([`PAUSE_LEFT_SECS`]); `None` when the vendor may be called.
pub fn resume(attributes: &BTreeMap<String, String>) -> Option<Plan> {
    let paused = Paused::of(attributes);
    (paused.left_secs > 0).then(|| step(attributes, paused.secs, paused.left_secs))
}

/// A copy delayed by the next step of `left_secs` (at most [`MAX_DELAY`]),
/// carrying `paused` and what is left after the step.
fn step(attributes: &BTreeMap<String, String>, paused: u64, left_secs: u64) -> Plan {
    let delay = left_secs.min(MAX_DELAY.as_secs());
    let mut attributes = attributes.clone();
    attributes.insert(PAUSED_SECS.into(), paused.to_string());
    attributes.remove(PAUSE_LEFT_SECS);
    if left_secs > delay {
        attributes.insert(PAUSE_LEFT_SECS.into(), (left_secs - delay).to_string());
    }
    Plan::Copy { delay: Duration::from_secs(delay), attributes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_pause_is_a_delayed_copy_carrying_the_pause_so_far() {
        let plan = plan(&attrs(&[("trace", "t-1")]), Duration::from_secs(120));
        let expected = attrs(&[("trace", "t-1"), (PAUSED_SECS, "120")]);
        assert_eq!(plan, Plan::Copy { delay: Duration::from_secs(120), attributes: expected });
        // Fractions round up; pauses add up over the copies.
        let plan = super::plan(&attrs(&[(PAUSED_SECS, "120")]), Duration::from_millis(30_500));
        assert_eq!(plan, Plan::Copy { delay: Duration::from_secs(31), attributes: attrs(&[(PAUSED_SECS, "151")]) });
    }

    #[test]
    fn a_pause_past_sqs_delays_is_waited_in_steps_without_calling() {
        let Plan::Copy { delay, attributes } = plan(&BTreeMap::new(), Duration::from_secs(3600)) else {
            panic!("a copy")
        };
        assert_eq!(delay, MAX_DELAY);
        assert_eq!(attributes, attrs(&[(PAUSED_SECS, "3600"), (PAUSE_LEFT_SECS, "2700")]));
        let mut steps = vec![delay];
        let mut current = attributes;
        while let Some(Plan::Copy { delay, attributes }) = resume(&current) {
            steps.push(delay);
            current = attributes;
        }
        assert_eq!(steps.iter().sum::<Duration>(), Duration::from_secs(3600));
        assert_eq!(steps.len(), 4);
        assert_eq!(current, attrs(&[(PAUSED_SECS, "3600")]), "the pause so far stays");
        assert_eq!(resume(&current), None, "then the vendor is called");
    }

    #[test]
    fn past_twelve_hours_of_pauses_the_vendor_is_a_failure_again() {
        let almost = attrs(&[(PAUSED_SECS, "43100")]);
        assert!(matches!(plan(&almost, Duration::from_secs(100)), Plan::Copy { .. }));
        assert_eq!(plan(&almost, Duration::from_secs(101)), Plan::Visibility(Duration::from_secs(101)));
        assert_eq!(Paused::of(&attrs(&[(PAUSED_SECS, "x")])), Paused::default(), "not a number: 0");
    }
}
