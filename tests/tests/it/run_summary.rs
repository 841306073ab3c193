//! What `tributary run` prints for an attempt whose pages all went to a
//! DLQ: the pages an earlier attempt persisted are not counted as this
//! attempt's.

use chrono::{TimeZone, Utc};
use test_support::vendor::{JsonBody, serve_json};
use tributary::runtime::{LocalOptions, LocalRuntime};

#[tokio::test]
async fn a_rerun_whose_pages_all_go_to_a_dlq_persisted_no_page() {
    let body = JsonBody::new(r#"{"data": [{"id": 1, "v": "first"}, {"id": 2, "v": "first"}]}"#);
    let addr = serve_json(body.clone()).await;
    let text = format!(
        "version: 1\npipeline: again\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: again}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let first =
        LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime").run(&spec, time).await.expect("run");
    assert!(first.succeeded() && first.completed, "{first}");
    assert!(first.to_string().contains("  pages persisted      1\n"), "{first}");

    // The vendor's records changed and the completed run's time is run
    // again (`tributary run --scheduled-at`): a trigger of a completed run
    // starts nothing (a trial's overlapping backfill filled the DLQ with
    // its refused pages), and the summary says so and how to re-fetch.
    body.set(r#"{"data": [{"id": 1, "v": "second"}, {"id": 2, "v": "second"}]}"#);
    let again =
        LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime").run(&spec, time).await.expect("run");
    assert_eq!((again.requests, again.dead_letters(), again.pages, again.pages_before), (0, 0, 1, 1), "{again}");
    let printed = again.to_string();
    assert!(printed.contains("  pages persisted      0  (the run holds 1: 1 from earlier attempts)\n"), "{printed}");
    assert!(
        printed.contains("this run was complete before this attempt, so its pages were not fetched again"),
        "{printed}"
    );

    // The run is complete, with no dead letter.
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status");
    assert_eq!((runs[0].state(), runs[0].dead_letters, runs[0].resolved), ("complete", 0, 0), "{runs:?}");
}
