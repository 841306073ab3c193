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

/// A trial finding: a plain re-run of a completed run printed the run's
/// schema changes and table notes as if this attempt had made them. They
/// are shown as the earlier completion's.
#[tokio::test]
async fn a_rerun_of_a_completed_run_shows_its_schema_changes_as_the_earlier_completions() {
    let body = JsonBody::new(r#"{"data": [{"id": 1, "v": 7}]}"#);
    let addr = serve_json(body.clone()).await;
    let text = format!(
        "version: 1\npipeline: changes\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: changes}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 11, d, 6, 0, 0).single().expect("time");
    assert!(runtime.run(&spec, day(1)).await.expect("day 1").succeeded());
    // Day 2: `v` comes as text, a change to the dataset's columns.
    body.set(r#"{"data": [{"id": 2, "v": "seven"}]}"#);
    let second = runtime.run(&spec, day(2)).await.expect("day 2");
    assert!(second.succeeded() && !second.schema_changes.is_empty() && !second.completed_before, "{second}");
    assert!(!second.to_string().contains("as completed before"), "{second}");
    let again = runtime.run(&spec, day(2)).await.expect("day 2 again");
    assert_eq!(again.requests, 0, "{again}");
    assert!(again.completed_before && again.schema_changes == second.schema_changes, "{again}");
    let printed = again.to_string();
    assert!(
        printed.contains(
            "  as completed before  the schema changes and table notes below are the run's earlier completion's; \
             this attempt changed nothing\n  schema changes"
        ),
        "{printed}"
    );
}

/// A trial finding: the next step of an ad-hoc run (a time with
/// milliseconds) named its time to the second, so `--replace` as told
/// started another run and appended the rows a second time. The time it
/// names is the run's own.
#[tokio::test]
async fn the_next_step_names_an_ad_hoc_runs_own_time() {
    let body = JsonBody::new(r#"{"data": [{"id": 1}, {"id": 2}]}"#);
    let addr = serve_json(body).await;
    let text = format!(
        "version: 1\npipeline: adhoc\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: adhoc, table_format: iceberg}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let time =
        Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time") + chrono::Duration::milliseconds(168);
    let first =
        LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime").run(&spec, time).await.expect("run");
    assert!(first.succeeded() && first.completed, "{first}");
    let again =
        LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime").run(&spec, time).await.expect("run");
    let printed = again.to_string();
    assert!(printed.contains("--scheduled-at 2026-11-29T06:00:00.168Z --replace"), "{printed}");
    // The trial's step: `--replace` with the time to the second, a time
    // the lake has no run of. The summary says nothing was swapped.
    let whole_second = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let added = LocalRuntime::new(LocalOptions::new(lake.path()))
        .expect("runtime")
        .run_replacing(&spec, whole_second, Some("token-1"))
        .await
        .expect("run");
    let printed = added.to_string();
    assert!(
        printed.contains("--replace: the lake held no page of a run at 2026-11-29T06:00:00Z, so nothing was swapped"),
        "{printed}"
    );
}

/// A trial finding: a run's summary listed every alert written to the
/// lake while it ran, another pipeline's included (two `tributary run`s
/// on one lake). Here the vendor, while answering, appends another
/// pipeline's alert to the lake's alerts file, as the other process's
/// Notify would: the summary holds only this run's alerts.
#[tokio::test]
async fn a_runs_summary_holds_its_own_alerts_not_another_pipelines() {
    use axum::extract::State;
    use test_support::vendor::serve;
    async fn page(State(alerts): State<std::path::PathBuf>) -> axum::Json<serde_json::Value> {
        let foreign = serde_json::json!({
            "version": 1, "pipeline": "other", "run_id": "20261223T000000Z", "page": null,
            "function": "request", "source_queue": "request", "message_id": "m-1", "receive_count": 3,
            "reason": "gave up", "summary": "request gave up on run 20261223T000000Z of pipeline other",
            "body_excerpt": "", "body_bytes": 0, "count": 1, "first_seen": null, "examples": []
        });
        let mut line = foreign.to_string();
        line.push('\n');
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&alerts).expect("alerts file");
        std::io::Write::write_all(&mut file, line.as_bytes()).expect("append");
        axum::Json(serde_json::json!({"data": [{"id": 1}]}))
    }
    let lake = tempfile::tempdir().expect("tempdir");
    let alerts = tributary::runtime::alerts_file(lake.path());
    let addr = serve(axum::Router::new().route("/records", axum::routing::get(page)).with_state(alerts.clone())).await;
    let text = format!(
        "version: 1\npipeline: mine\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: mine}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let summary =
        LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime").run(&spec, time).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!(tributary::runtime::read_alerts(lake.path()).len(), 1, "the other pipeline's alert was written");
    assert!(summary.alerts.is_empty(), "not this run's: {:?}", summary.alerts);
}

/// A trial finding: a `--replace` run's summary did not say that it
/// swapped the run's rows, or how many. It says both, in its table notes,
/// and the table holds the new fetch only.
#[tokio::test]
async fn a_replace_runs_summary_says_how_many_rows_it_swapped() {
    let body = JsonBody::new(r#"{"data": [{"id": 1}, {"id": 2}]}"#);
    let addr = serve_json(body.clone()).await;
    let text = format!(
        "version: 1\npipeline: swap\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: swap, table_format: iceberg}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let runtime = || LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let first = runtime().run(&spec, time).await.expect("run");
    assert!(first.succeeded() && first.table_notes.is_empty(), "{first}");
    body.set(r#"{"data": [{"id": 1}, {"id": 2}, {"id": 3}]}"#);
    let again = runtime().run_replacing(&spec, time, Some("token-1")).await.expect("re-run");
    assert!(again.succeeded(), "{again}");
    let printed = again.to_string();
    assert!(
        printed.contains(&format!(
            "table notes          2 row(s) of run {} replaced by this attempt's 3, in one snapshot",
            first.run_id
        )),
        "{printed}"
    );
    let rows = tributary_e2e::readers::query_lake(lake.path(), "SELECT count(*) AS n FROM swap").await;
    assert_eq!(rows[0]["n"], 3, "{rows:?}");
}
