//! Per-pipeline rate budgets: calls per second (GCRA, through `governor`)
//! and calls in flight (a tokio semaphore), shared by every concurrent call
//! that holds the same [`RateLimits`].
//!
//! Request keeps one `RateLimits` per process: in Lambda it lives across
//! warm invocations and covers the concurrent records of each batch; the
//! local runtime hands one to all its workers, so the budget holds across
//! them (one share: `instances` = 1).
//!
//! Separate Lambda instances each keep their own, and nothing is shared
//! between them. So the budget holds across instances by division: the
//! request queue's event source mapping runs at most N instances at once
//! (`ScalingConfig.MaximumConcurrency`, which the stack also gives Request
//! as `REQUEST_MAX_CONCURRENCY`), and each instance takes [`share`] of the
//! spec's budget, `requests_per_second / N` with a burst of one call, so N
//! instances together start at most `requests_per_second` calls a second
//! (plus at most one call each when they start). The cost: an instance keeps
//! to its share even when fewer than N run, so a pipeline alone on a quiet
//! stack gets `k / N` of its rate from its `k` busy instances.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{Quota, RateLimiter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use contracts::RateBudget;

type Limiter = RateLimiter<governor::state::NotKeyed, governor::state::InMemoryState, DefaultClock>;

/// One instance's part of a pipeline's [`RateBudget`] when up to
/// `instances` instances call at once ([`share`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Time between call starts in this instance: `instances` /
    /// `requests_per_second` seconds, rounded up to the nanosecond (so the
    /// instances' sum never exceeds the rate); bursts of one call.
    pub period: Duration,
    /// Calls in flight in this instance: `max_concurrency / instances`
    /// rounded down, at least 1 (so with more instances than
    /// `max_concurrency` the sum can reach `instances`); `None`: no cap.
    pub max_in_flight: Option<u32>,
}

/// This instance's share of `budget` when up to `instances` instances run
/// at once: `requests_per_second / instances` calls a second, or
/// `requests_per_minute / instances` a minute (a rate of 0 counts as 1;
/// [`RateBudget::calls_per_secs`]), and `max_concurrency / instances`
/// calls in flight, at least one each.
pub fn share(budget: RateBudget, instances: NonZeroU32) -> Share {
    let (calls, secs) = budget.calls_per_secs();
    let nanos = (u128::from(instances.get()) * u128::from(secs) * 1_000_000_000).div_ceil(u128::from(calls));
    let period = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
    let max_in_flight = budget.max_concurrency.map(|cap| (cap / instances.get()).max(1));
    Share { period, max_in_flight }
}

struct Bucket {
    share: Share,
    limiter: Arc<Limiter>,
    in_flight: Option<Arc<Semaphore>>,
}

/// Budgets by pipeline.
#[derive(Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<String, Arc<Bucket>>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits").finish_non_exhaustive()
    }
}

/// Held while a call is in flight; dropping it frees the concurrency slot.
#[derive(Debug)]
pub struct Permit(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// The budget could not be met before the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rate budget: no slot before the invocation's deadline (waited {waited_ms} ms)")]
pub struct NoSlot {
    /// Time spent waiting, in milliseconds.
    pub waited_ms: u64,
}

impl RateLimits {
    /// An empty set of budgets.
    pub fn new() -> Self {
        Self::default()
    }

    fn bucket(&self, pipeline: &str, share: Share) -> Arc<Bucket> {
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bucket) = buckets.get(pipeline).filter(|b| b.share == share) {
            return bucket.clone();
        }
        // A changed budget replaces the bucket (a new spec was deployed).
        let quota = Quota::with_period(share.period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
            .allow_burst(NonZeroU32::MIN);
        let bucket = Arc::new(Bucket {
            share,
            limiter: Arc::new(RateLimiter::direct(quota)),
            in_flight: share.max_in_flight.map(|n| Arc::new(Semaphore::new(n.max(1) as usize))),
        });
        buckets.insert(pipeline.to_string(), bucket.clone());
        bucket
    }

    /// Waits for a concurrency slot, then for the next start time this
    /// instance's [`share`] of `budget` allows, with up to `instances`
    /// instances calling at once (one call per `instances /
    /// requests_per_second` seconds, no bursts).
    ///
    /// # Errors
    /// [`NoSlot`] when `deadline` comes first.
    pub async fn acquire(
        &self,
        pipeline: &str,
        budget: RateBudget,
        instances: NonZeroU32,
        deadline: Instant,
    ) -> Result<Permit, NoSlot> {
        let started = Instant::now();
        let no_slot = || NoSlot { waited_ms: started.elapsed().as_millis() as u64 };
        let bucket = self.bucket(pipeline, share(budget, instances));
        let permit = match &bucket.in_flight {
            Some(semaphore) => {
                let acquired = tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned()).await;
                Some(acquired.map_err(|_| no_slot())?.map_err(|_| no_slot())?)
            }
            None => None,
        };
        loop {
            match bucket.limiter.check() {
                Ok(()) => return Ok(Permit(permit)),
                Err(not_until) => {
                    let wait: Duration = not_until.wait_time_from(DefaultClock::default().now());
                    if Instant::now() + wait > deadline {
                        return Err(no_slot());
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: NonZeroU32 = NonZeroU32::MIN;

    #[tokio::test]
    async fn calls_are_spaced_and_concurrency_is_capped() {
        let limits = Arc::new(RateLimits::new());
        let budget = RateBudget { max_concurrency: Some(1), ..RateBudget::per_second(20) };
        let far = Instant::now() + Duration::from_secs(10);
        let started = std::time::Instant::now();
        for _ in 0..5 {
            let _permit = limits.acquire("p", budget, ONE, far).await.expect("slot");
        }
        // 5 calls at 20/s without burst: the 5th starts >= 4 * 50 ms after the first.
        assert!(started.elapsed() >= Duration::from_millis(190), "{:?}", started.elapsed());

        let held = limits.acquire("p", budget, ONE, far).await.expect("slot");
        let soon = Instant::now() + Duration::from_millis(100);
        assert!(limits.acquire("p", budget, ONE, soon).await.is_err(), "one in flight at most");
        drop(held);
        assert!(limits.acquire("other", budget, ONE, soon).await.is_ok(), "budgets are per pipeline");
    }

    fn instances(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).expect("non-zero")
    }

    #[test]
    fn instances_divide_the_rate_and_their_sum_stays_within_it() {
        let budget = |rps, cap| RateBudget { max_concurrency: cap, ..RateBudget::per_second(rps) };
        // One instance (the local runtime): the spec's rate as it is.
        assert_eq!(share(budget(20, None), ONE), Share { period: Duration::from_millis(50), max_in_flight: None });
        // 10 instances of a 5/s budget: one call every 2 s each.
        assert_eq!(share(budget(5, Some(20)), instances(10)).period, Duration::from_secs(2));
        assert_eq!(share(budget(5, Some(20)), instances(10)).max_in_flight, Some(2));
        // More instances than the in-flight cap: one each, never zero.
        assert_eq!(share(budget(5, Some(3)), instances(10)).max_in_flight, Some(1));
        // A rate of 0 counts as 1/s; 1000 instances of it: one call per 1000 s each.
        assert_eq!(share(budget(0, None), instances(1000)).period, Duration::from_secs(1000));
        // Per minute: Django REST Framework's 100/min is one call every 0.6 s,
        // and over 5 instances one every 3 s each.
        assert_eq!(share(RateBudget::per_minute(100), ONE).period, Duration::from_millis(600));
        assert_eq!(share(RateBudget::per_minute(100), instances(5)).period, Duration::from_secs(3));
        assert_eq!(share(RateBudget::per_minute(7), ONE).period, Duration::from_nanos(8_571_428_572), "rounded up");
        // Rounded up, so the instances' rates add up to at most the spec's.
        for (rps, n) in [(7, 3), (1000, 7), (3, 1000), (u32::MAX, 1000), (1, 1), (999, 2)] {
            let period = share(budget(rps, None), instances(n)).period;
            let total = f64::from(n) / period.as_secs_f64();
            assert!(total <= f64::from(rps) * (1.0 + 1e-12), "{n} x 1/{period:?} = {total}/s > {rps}/s");
            assert!(total >= f64::from(rps) * 0.999, "{n} x 1/{period:?} = {total}/s is far below {rps}/s");
        }
    }

    #[tokio::test]
    async fn an_instance_keeps_to_its_share() {
        let limits = RateLimits::new();
        let budget = RateBudget::per_second(40);
        let far = Instant::now() + Duration::from_secs(10);
        let started = std::time::Instant::now();
        for _ in 0..3 {
            let _permit = limits.acquire("p", budget, instances(4), far).await.expect("slot");
        }
        // 40/s over 4 instances: 10/s here, the 3rd call >= 2 x 100 ms after the first.
        assert!(started.elapsed() >= Duration::from_millis(190), "{:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_millis(400), "{:?}", started.elapsed());
    }
}
