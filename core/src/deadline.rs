//! An invocation's deadline as a monotonic [`tokio::time::Instant`], what
//! the handlers' timers (`tokio::time::timeout_at`, `sleep_until`) take.
//!
//! Lambda gives the deadline as wall-clock milliseconds since the Unix epoch
//! (`lambda_runtime::Context::deadline`, from the Runtime API's
//! `Lambda-Runtime-Deadline-Ms` header); [`from_epoch_ms`] turns it into an
//! instant. The local runtime, which has no such header, ends an invocation
//! at the function's time-out as Lambda would ([`after_timeout`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use crate::topology::{self, Function};

/// The instant of a Lambda deadline given in milliseconds since the Unix
/// epoch (`lambda_runtime::Context::deadline`): now plus the time remaining;
/// a deadline already past is now.
pub fn from_epoch_ms(deadline_ms: u64) -> Instant {
    from_epoch_ms_at(deadline_ms, SystemTime::now(), Instant::now())
}

/// [`from_epoch_ms`] with the clocks read by the caller: `wall_now` and
/// `now` are the same moment on the wall clock and on the monotonic one.
pub fn from_epoch_ms_at(deadline_ms: u64, wall_now: SystemTime, now: Instant) -> Instant {
    // A wall clock before 1970 counts as the epoch: the whole span remains.
    let now_ms =
        wall_now.duration_since(UNIX_EPOCH).map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    now + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

/// The deadline of an invocation of `function` starting now: now plus its
/// time-out in [`topology::FUNCTIONS`] (what Lambda sets; the local runtime
/// uses it).
pub fn after_timeout(function: Function) -> Instant {
    Instant::now() + Duration::from_secs(topology::function(function).timeout_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_past_deadline_is_now_and_a_future_one_is_now_plus_the_remaining_time() {
        let wall_now = UNIX_EPOCH + Duration::from_millis(1_764_396_000_000);
        let now = Instant::now();
        assert_eq!(from_epoch_ms_at(1_764_395_999_000, wall_now, now), now, "a second ago");
        assert_eq!(from_epoch_ms_at(0, wall_now, now), now);
        assert_eq!(from_epoch_ms_at(1_764_396_000_000, wall_now, now), now, "exactly now");
        assert_eq!(from_epoch_ms_at(1_764_396_002_500, wall_now, now), now + Duration::from_millis(2_500));
        let before_the_epoch = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(from_epoch_ms_at(1_000, before_the_epoch, now), now + Duration::from_secs(1));
    }

    #[test]
    fn the_process_clocks_agree_with_a_deadline_from_the_wall_clock() {
        let in_ten_s = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as u64 + 10_000;
        let remaining = from_epoch_ms(in_ten_s) - Instant::now();
        assert!(remaining <= Duration::from_secs(10) && remaining > Duration::from_secs(9), "{remaining:?}");
        let timeout = Duration::from_secs(topology::function(Function::Request).timeout_secs);
        let remaining = after_timeout(Function::Request) - Instant::now();
        assert!(remaining <= timeout && remaining > timeout - Duration::from_secs(1), "{remaining:?}");
    }
}
