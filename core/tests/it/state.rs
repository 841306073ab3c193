//! Incremental state over the local lake: completed runs move a pipeline's
//! cursor forward only, and a truncated run only past what it fetched in
//! ascending order.

use adapters::local::DirStore;
use contracts::RunId;
use serde_json::json;
use tributary_core::state::{Missing, current, fold_run, record_page};

#[tokio::test]
async fn completed_runs_move_the_cursor_forward_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let r1 = RunId::new("r1").expect("id");
    record_page(&store, "p", &r1, 0, json!("2026-11-02"), Some(json!("2026-11-01"))).await.expect("page");
    record_page(&store, "p", &r1, 1, json!("2026-11-05"), Some(json!("2026-11-03"))).await.expect("page");
    let (state, held) = fold_run(&store, "p", &r1, Missing::Nothing).await.expect("fold");
    assert_eq!((state.expect("state").max, held), (json!("2026-11-05"), None));
    let r2 = RunId::new("r2").expect("id");
    record_page(&store, "p", &r2, 0, json!("2026-11-04"), None).await.expect("page");
    let (state, _) = fold_run(&store, "p", &r2, Missing::Nothing).await.expect("fold");
    assert_eq!(state.expect("state").run_id, r1, "never backwards");
    assert_eq!(current(&store, "p").await.expect("read").expect("state").max, json!("2026-11-05"));
}

#[tokio::test]
async fn a_truncated_run_moves_the_cursor_only_when_what_it_missed_lies_above_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    // Newest first, cut by max_pages: the pages not fetched hold older
    // records, which a moved cursor would skip for good.
    let newest_first = RunId::new("r1").expect("id");
    record_page(&store, "p", &newest_first, 0, json!(200), Some(json!(160))).await.expect("page");
    record_page(&store, "p", &newest_first, 1, json!(159), Some(json!(120))).await.expect("page");
    let (state, held) = fold_run(&store, "p", &newest_first, Missing::AfterItsPages).await.expect("fold");
    assert_eq!(state, None, "the cursor stays where it was (incremental.start)");
    let held = held.expect("a reason");
    assert!(held.contains("stays at incremental.start (not 200)") && held.contains("ascending"), "{held}");

    // Oldest first, cut by max_pages: what it missed is above; the cursor
    // moves, so a catch-up of a few pages a run goes on.
    let oldest_first = RunId::new("r2").expect("id");
    record_page(&store, "p", &oldest_first, 0, json!(40), Some(json!(1))).await.expect("page");
    record_page(&store, "p", &oldest_first, 1, json!(80), Some(json!(40))).await.expect("page");
    let (state, said) = fold_run(&store, "p", &oldest_first, Missing::AfterItsPages).await.expect("fold");
    assert_eq!(state.expect("moved").max, json!(80));
    assert!(said.expect("said").contains("the incremental cursor moved to 80: the run's pages came in ascending"));

    // Oldest first, but the vendor capped its pages: records were skipped
    // between pages, whatever the order.
    let capped = RunId::new("r3").expect("id");
    record_page(&store, "p", &capped, 0, json!(120), Some(json!(81))).await.expect("page");
    let (state, held) = fold_run(&store, "p", &capped, Missing::BetweenItsPages).await.expect("fold");
    assert_eq!(state.expect("kept").max, json!(80), "not moved to 120");
    assert!(held.expect("a reason").contains("skipped records between them"));
}
