//! How a count-first run's pages are sent: in chunks, each checkpointed in the lake, within one
//! invocation's time, continued by the next invocation when the time or the page budget is used up.
//!
//! A run of `max_pages` (up to 100,000) pages is 10,000 SQS `SendMessageBatch` calls (10 entries
//! and at most 256 KiB each: the SQS quotas, `adapters/src/aws/batching.rs`). One invocation of 60
//! s cannot be trusted to make them all, so no invocation has to:
//!
//! 1. the pages go [`PageSeries::CHUNK`] (1,000) at a time, each chunk as 100 batch calls with
//!    [`Fanout::sends_in_flight`] in flight at once (the SQS adapter's
//!    `BatchClient::with_max_in_flight`);
//! 2. after SQS accepted a whole chunk, the number of pages sent so far is written to
//!    `_runs/<pipeline>/<run_id>/pages-sent.json` ([`PagesSent`],
//!    `tributary_core::keys::pages_sent_key`), with a compare-and-swap on the version read before
//!    the chunk;
//! 3. before each chunk, [`next_step`] decides: send the next chunk, stop because everything is
//!    sent, or continue in another invocation: past the soft deadline (the invocation's deadline
//!    less [`Fanout::safety_margin`]) or past [`Fanout::max_pages_per_invocation`], the probe
//!    reply is sent again to the orchestrator queue and this invocation returns;
//! 4. whoever handles a probe reply, a continuation or a redelivery alike, starts after the
//!    checkpoint. A reply for a run whose pages are all sent sends nothing.
//!
//! What "every page sent once" means under at-least-once delivery:
//! - an invocation that stops at a chunk boundary (deadline, budget, or a time-out while it waits
//!   before a chunk) loses nothing and repeats nothing: the next one starts at the checkpoint;
//! - an invocation killed while a chunk is in flight, or after SQS accepted it but before the
//!   checkpoint was written, leaves that chunk to be sent again: at most [`PageSeries::CHUNK`]
//!   pages are sent twice per killed invocation, never a page lost;
//! - two invocations working on one run at once (a probe reply delivered twice) both send their
//!   chunk, and the one whose checkpoint write loses the compare-and-swap stops: at most one
//!   chunk sent twice per extra delivery.
//!
//! A page sent twice is fetched twice by Request and persisted twice under the same deterministic
//! keys (`tributary_core::keys`: the raw page, its Parquet parts and its receipt are per
//! `(pipeline, run, page)`), so the lake holds it once; the run ledger counts receipts per page, so
//! the run completes once.
//!
//! The decisions are pure ([`next_step`]); the handler (`handler.rs` `send_pages`) does the I/O.
//!
//! [`PageSeries::CHUNK`]: crate::strategy::PageSeries::CHUNK

use std::ops::Range;
use std::time::Duration;

use contracts::RunId;
use serde::{Deserialize, Serialize};

use crate::strategy::PageSeries;

/// How a count-first run's pages are sent ([module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fanout {
    /// SQS `SendMessageBatch` calls in flight at once (default
    /// [`Fanout::DEFAULT_SENDS_IN_FLIGHT`]); applied by `main.rs` to the SQS adapter.
    pub sends_in_flight: usize,
    /// Pages one invocation sends at most before continuing in the next one, rounded up to a
    /// whole chunk (default `u32::MAX`: only the deadline bounds an invocation).
    pub max_pages_per_invocation: u32,
    /// Time kept free before the invocation's deadline to finish the chunk in flight, write its
    /// checkpoint and send the continuation (default [`Fanout::DEFAULT_SAFETY_MARGIN`]).
    pub safety_margin: Duration,
}

impl Fanout {
    /// Calls in flight at once by default: 16. A chunk of 1,000 pages is then about 7 round trips
    /// instead of 100; SQS standard queues have no request-rate quota for `SendMessageBatch` that
    /// this approaches ("nearly unlimited" API calls per second, Amazon SQS quotas).
    pub const DEFAULT_SENDS_IN_FLIGHT: usize = 16;

    /// Time kept before the deadline by default: 15 s of the Orchestrator's 60 s
    /// (`topology::FUNCTIONS`). One chunk takes well under a second on SQS; the margin also
    /// covers the batch entries' re-sends (about 4 s at most, `batching::entry_retry_policy`) and
    /// the SDK's own retries.
    pub const DEFAULT_SAFETY_MARGIN: Duration = Duration::from_secs(15);
}

impl Default for Fanout {
    fn default() -> Self {
        Self {
            sends_in_flight: Self::DEFAULT_SENDS_IN_FLIGHT,
            max_pages_per_invocation: u32::MAX,
            safety_margin: Self::DEFAULT_SAFETY_MARGIN,
        }
    }
}

/// The checkpoint of a count-first run's page sending, at
/// `_runs/<pipeline>/<run_id>/pages-sent.json`: pages `0..sent` of `pages` were accepted by the
/// request queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagesSent {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Pages in the plan.
    pub pages: u32,
    /// Pages `0..sent` are sent.
    pub sent: u32,
    /// Set by a new start of the run (a re-run of the same run id, the
    /// documented recovery of a run that failed or was interrupted): the
    /// next probe reply sends again those of pages `0..sent` that hold no
    /// receipt, then clears it. Absent (false) otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resend: bool,
}

/// What to do next with a count-first run's pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these pages (one chunk), then checkpoint `range.end`.
    Send(Range<u32>),
    /// Leave the rest, from page `from`, to another invocation: send the continuation.
    Continue {
        /// The first page not sent.
        from: u32,
    },
    /// Every page is sent.
    Done,
}

/// The next step for a plan of `pages` pages of which `0..sent` are sent, `sent_here` of them by
/// this invocation, `out_of_time` when the soft deadline is past.
///
/// An invocation always sends at least one chunk before it continues elsewhere, so a run moves
/// forward whatever the deadline.
pub fn next_step(pages: u32, sent: u32, sent_here: u32, out_of_time: bool, fanout: &Fanout) -> Step {
    if sent >= pages {
        return Step::Done;
    }
    if sent_here > 0 && (out_of_time || sent_here >= fanout.max_pages_per_invocation) {
        return Step::Continue { from: sent };
    }
    Step::Send(sent..pages.min(sent.saturating_add(PageSeries::CHUNK)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_the_checkpoint_and_the_last_is_short() {
        let fanout = Fanout::default();
        assert_eq!(next_step(2_500, 0, 0, false, &fanout), Step::Send(0..1_000));
        assert_eq!(next_step(2_500, 2_000, 2_000, false, &fanout), Step::Send(2_000..2_500));
        assert_eq!(next_step(2_500, 2_500, 500, false, &fanout), Step::Done);
        assert_eq!(next_step(0, 0, 0, false, &fanout), Step::Done, "an empty plan sends nothing");
        assert_eq!(next_step(2_500, 3_000, 0, false, &fanout), Step::Done, "a checkpoint past the plan");
    }

    #[test]
    fn the_deadline_or_the_budget_continue_elsewhere_after_one_chunk_at_least() {
        let budget = Fanout { max_pages_per_invocation: 1_500, ..Fanout::default() };
        assert_eq!(next_step(5_000, 3_000, 0, true, &budget), Step::Send(3_000..4_000), "progress first");
        assert_eq!(next_step(5_000, 4_000, 1_000, true, &budget), Step::Continue { from: 4_000 });
        assert_eq!(next_step(5_000, 1_000, 1_000, false, &budget), Step::Send(1_000..2_000));
        assert_eq!(next_step(5_000, 2_000, 2_000, false, &budget), Step::Continue { from: 2_000 });
        assert_eq!(next_step(2_000, 2_000, 2_000, true, &budget), Step::Done, "nothing left: no continuation");
    }

    #[test]
    fn the_checkpoint_reads_back() {
        let run_id = RunId::new("20261129T060000Z").expect("run id");
        let sent = PagesSent { pipeline: "customers".into(), run_id, pages: 100_000, sent: 51_000, resend: false };
        let text = serde_json::to_string(&sent).expect("json");
        assert_eq!(text, r#"{"pipeline":"customers","run_id":"20261129T060000Z","pages":100000,"sent":51000}"#);
        assert_eq!(serde_json::from_str::<PagesSent>(&text).expect("read"), sent);
    }
}
