//! When to retry a vendor call, and how long to wait: pure functions, so
//! every case is unit-tested without a clock.
//!
//! - Backoff is exponential (backon's `ExponentialBuilder`: base delay,
//!   doubling, capped) with full jitter: the wait is uniform in
//!   `[0, backoff]` ("Exponential Backoff And Jitter", AWS Architecture
//!   Blog), so concurrent records that failed together spread out.
//! - `Retry-After` (RFC 9110 §10.2.3) wins over the backoff, in either form:
//!   delta-seconds or an HTTP-date. `0` (or a date in the past) waits the
//!   base delay, never zero: no hot loop against a throttling vendor.
//! - A `Retry-After` past the cap, or any wait that would end too close to
//!   the invocation's deadline, is not slept: the record fails now as a
//!   retryable error, and SQS redelivers it after its visibility timeout.

use std::time::{Duration, SystemTime};

/// Limits of the in-invocation retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The smallest wait, also for `Retry-After: 0`.
    pub base_delay: Duration,
    /// The longest `Retry-After` slept inside an invocation.
    pub max_retry_after: Duration,
    /// Time kept after a wait for the next call and the forwarding.
    pub reserve: Duration,
}

/// What to do after a retryable failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Sleep this long, then call again.
    Sleep(Duration),
    /// Stop retrying in this invocation, for this reason.
    GiveUp(String),
}

/// Reads a `Retry-After` value at `now`: delta-seconds (`120`; RFC 9110
/// §10.2.3, digits only, so more than a `u64` holds is the longest pause,
/// not no header: a trial's `99999999999999999999` was retried after
/// 140 ms) or an HTTP-date (`Fri, 31 Dec 2027 23:59:59 GMT`; a date in
/// the past is 0). `None` for anything else.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait before the next attempt.
///
/// `backoff` is backon's next exponential delay, `jitter` a uniform draw in
/// `[0, 1]` (full jitter), `remaining` the time left before the
/// invocation's deadline.
pub fn next_wait(
    retry_after: Option<Duration>,
    backoff: Duration,
    jitter: f64,
    policy: &RetryPolicy,
    remaining: Duration,
) -> Wait {
    let wait = match retry_after {
        Some(asked) if asked > policy.max_retry_after => {
            return Wait::GiveUp(format!(
                "Retry-After {} s is past the {} s cap; leaving the retry to SQS redelivery",
                asked.as_secs(),
                policy.max_retry_after.as_secs()
            ));
        }
        Some(asked) => asked.max(policy.base_delay),
        None => backoff.mul_f64(jitter.clamp(0.0, 1.0)),
    };
    if wait + policy.reserve >= remaining {
        return Wait::GiveUp(format!(
            "waiting {} ms would pass the invocation's deadline ({} ms left); leaving the retry to SQS redelivery",
            wait.as_millis(),
            remaining.as_millis()
        ));
    }
    Wait::Sleep(wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        base_delay: Duration::from_millis(200),
        max_retry_after: Duration::from_secs(30),
        reserve: Duration::from_secs(2),
    };
    const PLENTY: Duration = Duration::from_secs(100);

    #[test]
    fn retry_after_in_both_forms() {
        let now = httpdate::parse_http_date("Sun, 29 Nov 2026 12:00:00 GMT").expect("date");
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 3600 ", now), Some(Duration::from_secs(3600)));
        assert_eq!(parse_retry_after("Sun, 29 Nov 2026 12:00:05 GMT", now), Some(Duration::from_secs(5)));
        assert_eq!(parse_retry_after("Sun, 29 Nov 2026 11:00:00 GMT", now), Some(Duration::ZERO), "past date");
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("99999999999999999999", now), Some(Duration::from_secs(u64::MAX)), "overflow");
        assert_eq!(parse_retry_after("", now), None);
        // Past any cap: SQS's redelivery takes it, not a retry now.
        let huge = parse_retry_after("99999999999999999999", now);
        assert!(matches!(next_wait(huge, Duration::from_secs(1), 0.5, &POLICY, PLENTY), Wait::GiveUp(_)));
    }

    #[test]
    fn retry_after_wins_but_zero_waits_the_base_delay() {
        let backoff = Duration::from_secs(4);
        assert_eq!(
            next_wait(Some(Duration::from_secs(2)), backoff, 0.5, &POLICY, PLENTY),
            Wait::Sleep(Duration::from_secs(2))
        );
        assert_eq!(next_wait(Some(Duration::ZERO), backoff, 0.5, &POLICY, PLENTY), Wait::Sleep(POLICY.base_delay));
    }

    #[test]
    fn full_jitter_spans_zero_to_the_backoff() {
        let backoff = Duration::from_millis(800);
        assert_eq!(next_wait(None, backoff, 0.0, &POLICY, PLENTY), Wait::Sleep(Duration::ZERO));
        assert_eq!(next_wait(None, backoff, 0.25, &POLICY, PLENTY), Wait::Sleep(Duration::from_millis(200)));
        assert_eq!(next_wait(None, backoff, 1.0, &POLICY, PLENTY), Wait::Sleep(backoff));
    }

    #[test]
    fn long_retry_after_and_the_deadline_give_up_at_once() {
        let Wait::GiveUp(reason) = next_wait(Some(Duration::from_secs(3600)), Duration::ZERO, 0.0, &POLICY, PLENTY)
        else {
            panic!("3600 s is past the cap")
        };
        assert!(reason.contains("3600") && reason.contains("cap"), "{reason}");
        let Wait::GiveUp(reason) =
            next_wait(Some(Duration::from_secs(5)), Duration::ZERO, 0.0, &POLICY, Duration::from_secs(6))
        else {
            panic!("5 s + 2 s reserve does not fit in 6 s")
        };
        assert!(reason.contains("deadline"), "{reason}");
    }
}
