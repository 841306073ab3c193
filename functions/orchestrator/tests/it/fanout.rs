//! A count-first run's pages sent in checkpointed chunks (`orchestrator::fanout`), through the
//! real handler on the local broker and a directory lake: a deadline continues the run in another
//! invocation, a time-out part-way is resumed after the last checkpoint, and a reply for a run
//! whose pages are all sent sends nothing. `fanout_moto.rs` runs the same at 100,000 pages on
//! moto.

use adapters::local::{Broker, DirStore};
use contracts::ProbeReply;
use orchestrator::Deps;
use tokio::time::Instant;

use crate::common::{self, StallAt, Watch};

/// A broker with the request and orchestrator queues, a directory lake with the probe of a
/// 3,500-page run recorded (the run started), and that run's probe reply.
async fn started(dir: &std::path::Path) -> (Broker, DirStore, ProbeReply) {
    let broker = common::broker(&["request", "orchestrator"]);
    let store = DirStore::new(dir);
    let config = common::config();
    let run = common::run(&config);
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = Deps { queue: &broker, config: &config, ledger: Some(ledger) };
    orchestrator::start_run(&common::paged_spec(), &run, deps).await.expect("run starts");
    assert_eq!(test_support::queues::drain(&broker, "request").len(), 1, "the probe");
    (broker, store, common::probe_reply(&run, 3_500))
}

#[tokio::test]
async fn a_deadline_passed_sends_a_chunk_per_invocation_and_the_continuations_finish_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (broker, store, reply) = started(dir.path()).await;
    let config = common::config();
    let watch = Watch::new(&broker, "request", None);
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = Deps { queue: &watch, config: &config, ledger: Some(ledger) };
    let mut next = Some(reply);
    let mut invocations = 0;
    while let Some(reply) = next.take() {
        invocations += 1;
        // Every invocation starts with its deadline already inside the safety margin.
        orchestrator::on_probe_reply(reply, Instant::now(), deps).await.expect("a chunk sent");
        let mut continuations = test_support::queues::drain_json(&broker, "orchestrator");
        assert!(continuations.len() <= 1, "{continuations:?}");
        next = continuations.pop().map(|body| contracts::decode(body).expect("the probe reply again"));
    }
    assert_eq!(invocations, 4, "1,000 + 1,000 + 1,000 + 500 pages");
    let (every_page, sent) = common::coverage(&watch.accepted(), 3_500);
    assert!(every_page && sent == 3_500, "each page once: {sent} sent");
    assert_eq!(test_support::queues::drain(&broker, "request").len(), 3_500);
}

#[tokio::test]
async fn a_time_out_part_way_resumes_after_the_checkpoint_and_repeats_at_most_the_chunk_in_flight() {
    for (forward, repeated) in [(false, 0), (true, 1_000)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (broker, store, reply) = started(dir.path()).await;
        let config = common::config();
        let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
        // The first invocation hangs at its third chunk: before sending it, or after SQS accepted
        // it and before its checkpoint; the Lambda time-out ends it there.
        let first = Watch::new(&broker, "request", Some(StallAt { after: 2_000, forward }));
        let deps = Deps { queue: &first, config: &config, ledger: Some(ledger) };
        tokio::select! {
            result = orchestrator::on_probe_reply(reply.clone(), common::deadline(), deps) => panic!("no time-out: {result:?}"),
            () = first.stalled.notified() => {}
        }
        let checkpoint = tributary_core::ports::ObjectStore::get(
            &store,
            &tributary_core::keys::pages_sent_key(&reply.pipeline, &reply.run_id),
        )
        .await
        .expect("checkpoint");
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&checkpoint).expect("json")["sent"], 2_000);

        // The reply is redelivered after its visibility time-out.
        let again = Watch::new(&broker, "request", None);
        let deps = Deps { queue: &again, config: &config, ledger: Some(ledger) };
        orchestrator::on_probe_reply(reply.clone(), common::deadline(), deps).await.expect("resumed");
        assert_eq!(again.accepted().first(), Some(&2_000), "it starts after the checkpoint");
        let queued = test_support::queues::drain(&broker, "request").len();
        assert_eq!(queued, 3_500 + repeated, "forwarded before the time-out: {forward}");
        let all: Vec<u32> = first.accepted().into_iter().chain(again.accepted()).collect();
        assert!(common::coverage(&all, 3_500).0, "every page sent");
        assert!(test_support::queues::drain(&broker, "orchestrator").is_empty(), "no continuation needed");

        // A late duplicate of the reply finds every page sent; a second reply with another total
        // (the probe run twice by Request) leaves the first plan standing.
        let other = ProbeReply { total: reply.total + 50_000, ..reply.clone() };
        orchestrator::on_probe_reply(reply, common::deadline(), deps).await.expect("nothing to do");
        orchestrator::on_probe_reply(other, common::deadline(), deps).await.expect("ignored");
        assert!(test_support::queues::drain(&broker, "request").is_empty(), "nothing sent twice");
    }
}
