//! Incremental state over the local lake: completed runs move a pipeline's
//! cursor forward only.

use adapters::local::DirStore;
use contracts::RunId;
use serde_json::json;
use tributary_core::state::{current, fold_run, record_page};

#[tokio::test]
async fn completed_runs_move_the_cursor_forward_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let r1 = RunId::new("r1").expect("id");
    record_page(&store, "p", &r1, 0, json!("2026-11-02")).await.expect("page");
    record_page(&store, "p", &r1, 1, json!("2026-11-05")).await.expect("page");
    let state = fold_run(&store, "p", &r1).await.expect("fold").expect("state");
    assert_eq!(state.max, json!("2026-11-05"));
    let r2 = RunId::new("r2").expect("id");
    record_page(&store, "p", &r2, 0, json!("2026-11-04")).await.expect("page");
    assert_eq!(fold_run(&store, "p", &r2).await.expect("fold").expect("state").run_id, r1, "never backwards");
    assert_eq!(current(&store, "p").await.expect("read").expect("state").max, json!("2026-11-05"));
}
