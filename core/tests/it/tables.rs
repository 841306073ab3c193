//! The table-commit claim over the local lake: one writer of two holds
//! it, and an expired claim is taken over.

use adapters::local::DirStore;
use chrono::{Duration, Utc};
use contracts::RunId;
use tributary_core::tables::{Claimed, claim_commit};

#[tokio::test]
async fn one_of_two_completions_claims_the_commit_and_an_expired_claim_is_taken_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let run = RunId::new("r1").expect("id");
    let t0 = Utc::now();
    assert_eq!(claim_commit(&store, "p", &run, t0).await.expect("claim"), Claimed::Mine);
    assert!(dir.path().join("_runs/p/r1/iceberg-commit.json").is_file());
    let later = t0 + Duration::minutes(14);
    assert_eq!(claim_commit(&store, "p", &run, later).await.expect("claim"), Claimed::Held { since: t0 });
    let expired = t0 + Duration::minutes(16);
    assert_eq!(claim_commit(&store, "p", &run, expired).await.expect("claim"), Claimed::Mine);
    assert_eq!(
        claim_commit(&store, "p", &run, expired + Duration::seconds(1)).await.expect("claim"),
        Claimed::Held { since: expired },
        "the taken-over claim holds from its new time"
    );
    let other = RunId::new("r2").expect("id");
    assert_eq!(claim_commit(&store, "p", &other, later).await.expect("claim"), Claimed::Mine, "per run");
}

/// A trial: a stream stopped by SIGTERM in the middle of a commit left its
/// claim, and every batch of the next runs failed on it for 15 minutes. A
/// claim whose process has ended (same boot, no such process) is taken
/// over at once; one whose process runs, or that names no process (an
/// older claim), holds until its expiry.
#[tokio::test]
async fn a_claim_whose_process_has_ended_is_taken_over_at_once() {
    use tributary_core::tables::{ClaimHolder, CommitClaim};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let run = RunId::new("r1").expect("id");
    let Some(this) = ClaimHolder::this_process() else {
        panic!("this test needs Linux's /proc/sys/kernel/random/boot_id");
    };
    let t0 = Utc::now();
    let write = |holder: Option<ClaimHolder>| {
        let claim = CommitClaim { pipeline: "p".into(), run_id: run.clone(), claimed_at: t0, holder };
        std::fs::create_dir_all(dir.path().join("_runs/p/r1")).expect("folder");
        std::fs::write(dir.path().join("_runs/p/r1/iceberg-commit.json"), serde_json::to_vec(&claim).expect("json"))
            .expect("write");
    };
    let later = t0 + Duration::minutes(1);

    let mut ended = std::process::Command::new("true").spawn().expect("a process");
    ended.wait().expect("it ends");
    write(Some(ClaimHolder { pid: ended.id(), ..this.clone() }));
    assert_eq!(claim_commit(&store, "p", &run, later).await.expect("claim"), Claimed::Mine, "its process ended");

    let mut running = std::process::Command::new("sleep").arg("30").spawn().expect("a process");
    write(Some(ClaimHolder { pid: running.id(), ..this.clone() }));
    let held = claim_commit(&store, "p", &run, later).await.expect("claim");
    running.kill().expect("kill");
    running.wait().expect("ended");
    assert_eq!(held, Claimed::Held { since: t0 }, "its process runs");

    write(Some(ClaimHolder { boot_id: "another-machine".into(), pid: ended.id() }));
    assert_eq!(
        claim_commit(&store, "p", &run, later).await.expect("claim"),
        Claimed::Held { since: t0 },
        "another boot"
    );
    write(None);
    assert_eq!(claim_commit(&store, "p", &run, later).await.expect("claim"), Claimed::Held { since: t0 }, "no holder");
    write(Some(this));
    assert_eq!(
        claim_commit(&store, "p", &run, later).await.expect("claim"),
        Claimed::Held { since: t0 },
        "this process"
    );
}
