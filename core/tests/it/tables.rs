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
