//! Per-pipeline rate budgets: calls per second (GCRA, through `governor`)
//! and calls in flight (a tokio semaphore), shared by every concurrent call
//! that holds the same [`RateLimits`].
//!
//! Request keeps one `RateLimits` per process: in Lambda it lives across
//! warm invocations and covers the concurrent records of each batch; the
//! local runtime hands one to all its workers, so the budget holds across
//! them. (Separate Lambda instances each keep their own: cap the function's
//! reserved concurrency to bound the total.)

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

struct Bucket {
    budget: RateBudget,
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

    fn bucket(&self, pipeline: &str, budget: RateBudget) -> Arc<Bucket> {
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bucket) = buckets.get(pipeline).filter(|b| b.budget == budget) {
            return bucket.clone();
        }
        // A changed budget replaces the bucket (a new spec was deployed).
        let rate = NonZeroU32::new(budget.requests_per_second).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(rate).allow_burst(NonZeroU32::MIN);
        let bucket = Arc::new(Bucket {
            budget,
            limiter: Arc::new(RateLimiter::direct(quota)),
            in_flight: budget.max_concurrency.map(|n| Arc::new(Semaphore::new(n.max(1) as usize))),
        });
        buckets.insert(pipeline.to_string(), bucket.clone());
        bucket
    }

    /// Waits for a concurrency slot, then for the next start time the rate
    /// allows (one call per `1/requests_per_second`, no bursts).
    ///
    /// # Errors
    /// [`NoSlot`] when `deadline` comes first.
    pub async fn acquire(&self, pipeline: &str, budget: RateBudget, deadline: Instant) -> Result<Permit, NoSlot> {
        let started = Instant::now();
        let no_slot = || NoSlot { waited_ms: started.elapsed().as_millis() as u64 };
        let bucket = self.bucket(pipeline, budget);
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

    #[tokio::test]
    async fn calls_are_spaced_and_concurrency_is_capped() {
        let limits = Arc::new(RateLimits::new());
        let budget = RateBudget { requests_per_second: 20, max_concurrency: Some(1) };
        let far = Instant::now() + Duration::from_secs(10);
        let started = std::time::Instant::now();
        for _ in 0..5 {
            let _permit = limits.acquire("p", budget, far).await.expect("slot");
        }
        // 5 calls at 20/s without burst: the 5th starts >= 4 * 50 ms after the first.
        assert!(started.elapsed() >= Duration::from_millis(190), "{:?}", started.elapsed());

        let held = limits.acquire("p", budget, far).await.expect("slot");
        let soon = Instant::now() + Duration::from_millis(100);
        assert!(limits.acquire("p", budget, soon).await.is_err(), "one in flight at most");
        drop(held);
        assert!(limits.acquire("other", budget, soon).await.is_ok(), "budgets are per pipeline");
    }
}
