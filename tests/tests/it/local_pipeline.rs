//! End-to-end: whole pipelines through the local runtime against a local
//! vendor API, with the Parquet read back.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use chrono::{TimeZone, Utc};
use serde_json::Value;

use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use test_support::lake::read_dataset;
use test_support::vendor::{VendorBehaviour, paged_spec, record, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime, read_alerts};
use tributary_core::ports::QueueSender;

fn ids(rows: &[Value]) -> Vec<u64> {
    let mut ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().expect("id")).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test]
async fn paged_pipeline_persists_every_record_exactly_once_with_its_values() {
    let vendor = VendorBehaviour { total: 137, ..Default::default() };
    let addr = start_vendor(vendor.clone()).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "items", 20);

    let summary = runtime.run(&spec, Utc::now()).await.expect("run");

    assert!(summary.succeeded(), "{summary}");
    assert_eq!(summary.pages, 7, "{summary}");
    assert_eq!(summary.records_persisted, 137);
    assert_eq!(summary.requests, 8, "one probe and seven pages");
    assert_eq!(vendor.calls.load(Ordering::SeqCst), 8);
    let rows = read_dataset(lake.path(), "items");
    assert_eq!(ids(&rows), (0..137).collect::<Vec<u64>>(), "every record exactly once");
    for row in &rows {
        let id = u32::try_from(row["id"].as_u64().expect("id")).expect("small id");
        let expected = record(id);
        assert_eq!(row["name"], expected["name"]);
        assert_eq!(row["score"].as_f64(), expected["score"].as_f64(), "integers and floats widen to float64");
        assert_eq!(row["nested"], expected["nested"]);
    }
    // The run ledger completed the run: a manifest for readers and a marker.
    let run_id = RunId::new(summary.run_id.clone()).expect("run id");
    let manifest: tributary_core::ledger::Manifest = serde_json::from_slice(
        &std::fs::read(lake.path().join(tributary_core::keys::manifest_key("items", &run_id)))
            .expect("manifest written"),
    )
    .expect("manifest");
    assert_eq!((manifest.pages, manifest.records_persisted, manifest.files.len()), (7, 137, 1), "7 pages, 1 file");
    assert_eq!(manifest.files, [format!("items/dt={}/items-{}.parquet", manifest.run_date, summary.run_id)]);
    assert_eq!(manifest.schema_hash.len(), 16);
    assert!(lake.path().join(tributary_core::keys::success_key("items", &run_id)).is_file());
    let events = std::fs::read_to_string(lake.path().join("_run_events.jsonl")).expect("run events");
    let event: contracts::RunCompleted =
        serde_json::from_str(events.lines().next().expect("one event")).expect("event");
    assert_eq!((event.pipeline.as_str(), event.pages, event.records_persisted), ("items", 7, 137));
    assert_eq!(event.manifest_key, tributary_core::keys::manifest_key("items", &run_id));
    // The local catalog holds the Glue table Persist would register on AWS.
    let entry: Value = serde_json::from_slice(
        &std::fs::read(lake.path().join(tributary_core::keys::catalog_key("items"))).expect("catalog entry"),
    )
    .expect("Glue TableInput JSON");
    let columns: Vec<&str> = entry["StorageDescriptor"]["Columns"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["Name"].as_str())
        .collect();
    assert_eq!(columns[..4], ["id", "name", "nested", "score"], "data columns in table order: {columns:?}");
    assert!(columns.contains(&"_tributary_loaded_at"), "{columns:?}");
    assert_eq!(entry["PartitionKeys"][0]["Name"], "dt");
    assert_eq!(entry["Parameters"]["storage.location.template"], "s3://local/items/dt=${dt}");
    let raw = std::fs::read_dir(lake.path().join("raw/items")).expect("raw pages kept").count();
    assert_eq!(raw, 1, "one dt= partition of raw pages");

    // CloudWatch EMF lines, kept locally in <lake>/_metrics.jsonl.
    let emf: Vec<Value> = std::fs::read_to_string(lake.path().join("_metrics.jsonl"))
        .expect("metrics file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("EMF line is JSON"))
        .collect();
    let sum = |function: &str, metric: &str| -> u64 {
        emf.iter().filter(|l| l["function"] == function).filter_map(|l| l[metric].as_u64()).sum()
    };
    assert_eq!(sum("request", "records_fetched"), 137);
    assert_eq!(sum("persist", "records_persisted"), 137);
    let latencies: usize = emf.iter().filter_map(|l| l["api_latency"].as_array()).map(Vec::len).sum();
    assert_eq!(latencies, 8, "one latency sample per HTTP call");
    assert!(
        emf.iter().all(|l| l["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "tributary" && l["pipeline"] == "items")
    );
}

#[tokio::test]
async fn rerunning_the_same_run_overwrites_instead_of_duplicating() {
    let addr = start_vendor(VendorBehaviour { total: 45, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "again", 10);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("valid time");

    let first = runtime.run(&spec, scheduled).await.expect("first run");
    let second = runtime.run(&spec, scheduled).await.expect("redelivered schedule");

    assert_eq!(first.run_id, "20261129T060000Z");
    assert_eq!(first.run_id, second.run_id);
    assert_eq!(second.records_persisted, 45);
    assert_eq!(ids(&read_dataset(lake.path(), "again")), (0..45).collect::<Vec<u64>>());
    assert!(lake.path().join("again/dt=2026-11-29/again-20261129T060000Z.parquet").is_file(), "the run's one file");
    let parquet = std::fs::read_dir(lake.path().join("again/dt=2026-11-29")).expect("partition").count();
    assert_eq!(parquet, 1, "the second run's pages did not add files beside it");
}

/// The documented recovery of a count-first run that failed part-way: run
/// the same scheduled time again once the vendor is fixed. The re-run
/// requests the pages without a receipt, and only those, and completes
/// the run; the attempt that did not complete is not a success.
#[tokio::test]
async fn rerunning_a_failed_paged_run_requests_its_missing_pages_and_completes_it() {
    let vendor = VendorBehaviour { total: 50, broken_offsets: BTreeSet::from([20, 30, 40]), ..Default::default() };
    let (healed, calls) = (vendor.healed.clone(), vendor.calls.clone());
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "healed", 10);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 28, 6, 0, 0).single().expect("valid time");

    let failed = runtime.run(&spec, scheduled).await.expect("first attempt");
    assert!(!failed.completed && !failed.succeeded(), "{failed}");
    assert_eq!((failed.pages, failed.records_persisted), (2, 20), "{failed}");

    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    let calls_before = calls.load(std::sync::atomic::Ordering::SeqCst);
    let rerun = runtime.run(&spec, scheduled).await.expect("re-run");

    assert!(rerun.completed && rerun.succeeded(), "{rerun}");
    assert_eq!(rerun.run_id, failed.run_id);
    // The probe, then pages 2, 3 and 4: not the two persisted already.
    assert_eq!(rerun.requests, 4, "{rerun}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst) - calls_before, 4);
    assert_eq!((rerun.pages, rerun.pages_before, rerun.records_persisted), (5, 2, 50), "{rerun}");
    assert_eq!(ids(&read_dataset(lake.path(), "healed")), (0..50).collect::<Vec<u64>>());

    // A third attempt of the completed run starts nothing: no request.
    let again = runtime.run(&spec, scheduled).await.expect("third attempt");
    assert!(again.succeeded(), "{again}");
    assert_eq!((again.requests, again.records_persisted), (0, 50), "{again}");
}

/// A trial: a count-first run failed on page 2, the vendor then grew by 5
/// records (a sixth page by the new total), and the re-run `status`
/// advised fetched nothing, persisted nothing and said nothing: the new
/// probe's count was taken for another plan and ignored. The run's plan
/// stands: the re-run fetches its missing page and completes it; the 5
/// new records are the next run's.
#[tokio::test]
async fn a_rerun_completes_its_plan_when_the_vendors_total_makes_another_page_count() {
    let vendor = VendorBehaviour { total: 50, broken_offsets: BTreeSet::from([20]), ..Default::default() };
    let (healed, resized, calls) = (vendor.healed.clone(), vendor.resized.clone(), vendor.calls.clone());
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "grown", 10);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 28, 6, 0, 0).single().expect("valid time");
    let failed = runtime.run(&spec, scheduled).await.expect("first attempt");
    assert!(!failed.completed, "{failed}");
    assert_eq!((failed.pages, failed.records_persisted), (4, 40), "{failed}");

    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    resized.store(55, std::sync::atomic::Ordering::SeqCst);
    let calls_before = calls.load(std::sync::atomic::Ordering::SeqCst);
    let rerun = runtime.run(&spec, scheduled).await.expect("re-run");
    assert!(rerun.completed && rerun.succeeded(), "{rerun}");
    // The probe, then page 2.
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst) - calls_before, 2, "{rerun}");
    assert_eq!((rerun.pages, rerun.pages_before, rerun.records_persisted), (5, 4, 50), "{rerun}");
    assert_eq!(ids(&read_dataset(lake.path(), "grown")), (0..50).collect::<Vec<u64>>());

    // The same with 15 fewer: the plan's last page comes back empty.
    let vendor = VendorBehaviour { total: 50, broken_offsets: BTreeSet::from([20]), ..Default::default() };
    let (healed, resized) = (vendor.healed.clone(), vendor.resized.clone());
    let addr = start_vendor(vendor).await;
    let spec = paged_spec(addr, "shrunk", 10);
    assert!(!runtime.run(&spec, scheduled).await.expect("first attempt").completed);
    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    resized.store(35, std::sync::atomic::Ordering::SeqCst);
    let rerun = runtime.run(&spec, scheduled).await.expect("re-run");
    assert!(rerun.completed, "{rerun}");
    assert_eq!(rerun.pages, 5, "{rerun}");
}

/// Stops the completion of `pipeline`'s run at `scheduled` into `dataset`
/// after it has planned its coalesced file: a directory where that file
/// goes. Returns the run's data folder key and the directory.
fn block_coalesced_file(
    lake: &std::path::Path,
    dataset: &str,
    pipeline: &str,
    scheduled: chrono::DateTime<Utc>,
) -> (String, std::path::PathBuf) {
    let run_id = RunId::from_time(scheduled);
    let folder = tributary_core::keys::data_prefix(dataset, scheduled.date_naive());
    let blocked = lake.join(tributary_core::keys::coalesced_key(&folder, pipeline, run_id.as_str()));
    std::fs::create_dir_all(&blocked).expect("a directory where the run's coalesced file goes");
    (folder, blocked)
}

/// A trial: a `tributary run` killed after its last page's receipt,
/// before the run's completion, left a run that holds every page; running
/// it again fetched nothing, completed nothing, and advised redriving a
/// dead letter that did not exist. The next attempt now completes it, as
/// the lost delivery would have. Here the completion is stopped by a
/// directory where the run's coalesced file goes (the letter it leaves is
/// resolved by the attempt that completes the run); a kill leaves the same
/// ledger, without the letter.
#[tokio::test]
async fn a_run_holding_every_page_but_not_completed_is_completed_by_its_next_attempt() {
    let vendor = VendorBehaviour { total: 50, ..Default::default() };
    let calls = vendor.calls.clone();
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "finished", 10);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 28, 6, 0, 0).single().expect("valid time");
    let run_id = RunId::from_time(scheduled);
    let (_, marker) = block_coalesced_file(lake.path(), "finished", &spec.pipeline, scheduled);

    let stuck = runtime.run(&spec, scheduled).await.expect("first attempt");
    assert!(!stuck.completed && !stuck.succeeded(), "{stuck}");
    assert_eq!((stuck.pages, stuck.records_persisted), (5, 50), "every page is in: {stuck}");
    let store = adapters::local::DirStore::new(lake.path());
    assert!(tributary_core::ledger::is_stuck(&store, &spec.pipeline, &run_id).await.expect("ledger"));
    // Later runs do not hide it from `tributary status` (a trial's was
    // behind 20 stream windows): it is listed after the most recent ones.
    for day in 29..=30 {
        let later = Utc.with_ymd_and_hms(2026, 11, day, 6, 0, 0).single().expect("valid time");
        assert!(runtime.run(&spec, later).await.expect("a later run").succeeded());
    }
    let runs = tributary::status::recent_runs(&store, None, 1).await.expect("status");
    let listed: Vec<(&str, bool)> = runs.iter().map(|run| (run.run_id.as_str(), run.completed)).collect();
    assert_eq!(listed, [("20261130T060000Z", true), ("20261128T060000Z", false)], "the newest, then the stuck one");
    // Tried again while the cause stays: the completion's own error, and
    // the command that finishes the run once it is fixed.
    let again = runtime.run(&spec, scheduled).await.expect("second attempt");
    let text = again.to_string();
    assert!(!again.completed, "{again}");
    assert!(text.contains("holds every page but completing it failed"), "{text}");
    assert!(
        text.contains("--scheduled-at 2026-11-28T06:00:00Z` completes it from the pages already in the lake"),
        "{text}"
    );

    std::fs::remove_dir(&marker).expect("the cause removed");
    let calls_before = calls.load(Ordering::SeqCst);
    let finished = runtime.run(&spec, scheduled).await.expect("third attempt");
    assert!(finished.completed && finished.succeeded(), "{finished}");
    assert_eq!((finished.pages, finished.records_persisted), (5, 50), "{finished}");
    assert_eq!(calls.load(Ordering::SeqCst) - calls_before, 1, "the probe only: no page fetched again");
    assert!(finished.next_step.is_none(), "{finished}");
    let thrice: Vec<u64> = (0..50).flat_map(|id| [id; 3]).collect();
    assert_eq!(ids(&read_dataset(lake.path(), "finished")), thrice, "each record once a run, of three runs");
    assert!(!tributary_core::ledger::is_stuck(&store, &spec.pipeline, &run_id).await.expect("ledger"));
}

/// A trial: `tributary replay` of a dataset holding a run killed in the
/// middle of its completion (its page files being replaced by a coalesced
/// one) failed on a page file the replacement had deleted, and left the
/// coalesced file beside the pages written again: every row twice until a
/// second replay. The replay now completes such a run first.
#[tokio::test]
async fn a_replay_completes_a_run_caught_in_its_completion_before_replaying_it() {
    let vendor = VendorBehaviour { total: 50, ..Default::default() };
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "caught", 10);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 28, 6, 0, 0).single().expect("valid time");
    let run_id = RunId::from_time(scheduled);
    let (folder, blocked) = block_coalesced_file(lake.path(), "caught", &spec.pipeline, scheduled);
    let stuck = runtime.run(&spec, scheduled).await.expect("run");
    assert!(!stuck.completed && stuck.pages == 5, "{stuck}");
    let store = adapters::local::DirStore::new(lake.path());
    let replacement = tributary_core::keys::replacement_key(&spec.pipeline, &run_id);
    assert!(
        tributary_core::ports::ObjectStore::get(&store, &replacement).await.is_ok(),
        "the completion stopped after planning its replacement"
    );
    std::fs::remove_dir(&blocked).expect("the cause removed");

    let replayed = tributary::replay::replay_lake(lake.path(), "caught", Default::default()).await.expect("replay");
    assert!(replayed.succeeded(), "{replayed}");
    assert_eq!((replayed.pages_persisted, replayed.records_persisted), (5, 50), "{replayed}");
    assert_eq!(ids(&read_dataset(lake.path(), "caught")), (0..50).collect::<Vec<u64>>(), "each record once");
    let files: Vec<String> = std::fs::read_dir(lake.path().join(&folder))
        .expect("folder")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "one coalesced file, no page file beside it: {files:?}");
    assert!(!tributary_core::ledger::is_stuck(&store, &spec.pipeline, &run_id).await.expect("ledger"));
}

#[tokio::test]
async fn a_total_of_zero_is_a_successful_empty_run() {
    let addr = start_vendor(VendorBehaviour { total: 0, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let summary = runtime.run(&paged_spec(addr, "empty", 10), Utc::now()).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!((summary.requests, summary.pages, summary.records_persisted), (1, 0, 0));
    let run_id = RunId::new(summary.run_id.clone()).expect("run id");
    let manifest = std::fs::read_to_string(lake.path().join(tributary_core::keys::manifest_key("empty", &run_id)))
        .expect("an empty run completes too");
    assert!(manifest.contains("\"pages\":0"), "{manifest}");
}

#[tokio::test]
async fn a_broken_page_is_retried_then_dead_lettered_with_an_alert_and_the_others_persist() {
    let vendor = VendorBehaviour { total: 100, broken_offsets: BTreeSet::from([40]), ..Default::default() };
    let addr = start_vendor(vendor.clone()).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");

    let summary = runtime.run(&paged_spec(addr, "broken", 20), Utc::now()).await.expect("run");

    assert!(!summary.succeeded());
    assert_eq!(summary.dead_lettered.get("request-dlq"), Some(&1), "{summary}");
    assert_eq!(summary.records_persisted, 80);
    let persisted = ids(&read_dataset(lake.path(), "broken"));
    assert_eq!(persisted, (0..40).chain(60..100).collect::<Vec<u64>>());
    // The broken page was received maxReceiveCount (5) times: 1 probe + 5 pages + 4 redeliveries.
    assert_eq!(summary.requests, 10);
    assert_eq!(summary.alerts.len(), 1);
    let alert = &summary.alerts[0];
    assert_eq!(alert.pipeline.as_deref(), Some("broken"));
    assert_eq!(alert.function, "request");
    assert_eq!(alert.page, Some(2));
    assert_eq!(alert.receive_count, 5, "given up on its last allowed receive");
    let first_seen =
        chrono::DateTime::parse_from_rfc3339(alert.first_seen.as_deref().expect("first seen")).expect("RFC 3339");
    assert!((Utc::now() - first_seen.with_timezone(&Utc)).num_minutes().abs() < 5, "a wall-clock time: {first_seen}");
    let reason = alert.reason.as_deref().expect("the reason reaches the alert");
    assert!(reason.contains("is not JSON") && reason.contains("maintenance"), "{reason}");
    assert_eq!(read_alerts(lake.path()).len(), 1, "the alert is in <lake>/_alerts.jsonl");
    let metrics = std::fs::read_to_string(lake.path().join("_metrics.jsonl")).expect("metrics file");
    let dead: u64 = metrics
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["dead_letters"].as_u64())
        .sum();
    assert_eq!(dead, 1, "the dead_letters metric counts the alerted dead letter");
    let kept: Vec<_> =
        std::fs::read_dir(lake.path().join("_dead_letters/request-dlq")).expect("dead letters kept").collect();
    assert_eq!(kept.len(), 1);
    let entry = std::fs::read_to_string(kept[0].as_ref().expect("entry").path()).expect("read");
    let dead_letter: tributary_core::dead_letters::DeadLetter = serde_json::from_str(&entry).expect("archive entry");
    assert!(dead_letter.body.contains("\"offset\":\"40\""), "the whole RequestMessage is kept: {entry}");
    assert_eq!((dead_letter.function.as_str(), dead_letter.source_queue.as_str()), ("request", "request"));
    assert!(dead_letter.reason.is_some(), "with the reason Request gave: {entry}");
}

#[tokio::test]
async fn a_record_that_is_not_json_fails_alone_and_is_alerted_after_max_receive_count() {
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let good = PersistMessage {
        version: V1,
        pipeline: "inject".into(),
        run_id: RunId::new("r1").expect("valid"),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef::SINGLE,
        target: PersistTarget::new("inject"),
        payload: Payload::Inline {
            records: contracts::RawRecords::from_values(&[record(1), record(2), Value::from(3)]).expect("records"),
        },
        fetched_at: None,
    };
    let bodies = vec!["{not json".to_string(), serde_json::to_string(&good).expect("json")];
    runtime.broker().send("persist", bodies).await.expect("send");

    runtime.drain().await;

    let stats = runtime.broker().stats();
    assert_eq!(stats.sent.get("persist-dlq"), Some(&1), "a malformed message is dead-lettered at once");
    assert_eq!(stats.received["persist"], 2, "the bad record once (permanent), the good one once");
    assert_eq!(ids(&read_dataset(lake.path(), "inject")), [1, 2]);
    let quarantine = std::fs::read_to_string(lake.path().join("quarantine/inject/dt=2026-11-29/inject-r1-00000.jsonl"))
        .expect("quarantine");
    assert!(quarantine.contains("record 2 is an integer, not a JSON object"), "{quarantine}");
    let alerts = read_alerts(lake.path());
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].function, "persist");
    assert_eq!(alerts[0].pipeline, None);
    assert!(alerts[0].reason.as_deref().is_some_and(|r| r.starts_with("body is not JSON")), "{:?}", alerts[0]);
    assert!(alerts[0].body_excerpt.starts_with("{not json"));
}

#[tokio::test]
async fn pages_over_the_message_size_limit_travel_by_claim_check() {
    let addr = start_vendor(VendorBehaviour { total: 300, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let mut options = LocalOptions::new(lake.path());
    options.max_message_bytes = 4_096;
    options.request.max_message_bytes = 4_096;
    let runtime = LocalRuntime::new(options).expect("runtime");

    let summary = runtime.run(&paged_spec(addr, "big", 100), Utc::now()).await.expect("run");

    assert!(summary.succeeded(), "{summary}");
    assert_eq!(ids(&read_dataset(lake.path(), "big")), (0..300).collect::<Vec<u64>>());
    let claims = std::fs::read_dir(lake.path().join("_claims/big")).expect("claims written").count();
    assert_eq!(claims, 1, "one run folder of claim-check payloads");
}

/// The local runtime's memory stays flat (`LocalRuntime`'s docs, Memory):
/// a run of more pages than its queues' budgets hold is planned a chunk
/// of 1,000 requests at a time and fetched as Persist keeps up, each
/// queue at most its budget plus what is already under way, and nothing
/// is lost or received twice for it.
#[tokio::test]
async fn a_run_bigger_than_the_queue_budgets_waits_for_persist_instead_of_piling_up() {
    const PAGES: u32 = 1_050;
    let addr = start_vendor(VendorBehaviour { total: PAGES, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let options = LocalOptions {
        concurrency: 1,
        // Pages of one record (about 400 bytes a message): the persist
        // queue's budget in effect is 2 x 5 x 2,048 bytes, some 50 pages.
        max_message_bytes: 2_048,
        persist_queue_budget_bytes: 0,
        request_queue_budget_bytes: 16 * 1024,
        ..LocalOptions::new(lake.path())
    };
    let persist_budget = options.persist_queue_budget();
    assert_eq!(persist_budget, 2 * 5 * 2_048);
    let runtime = LocalRuntime::new(options).expect("runtime");
    let text = format!(
        "version: 1\npipeline: many\nstrategy: {{kind: paged, page_size: 1, total_pointer: /meta/total, max_pages: 2000}}\nrequest: {{url: 'http://{addr}/items', records_pointer: /results, allow: {{loopback: true}}}}\ntarget: {{dataset: many}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("valid spec");

    let summary = runtime.run(&spec, Utc::now()).await.expect("run");

    assert!(summary.succeeded(), "{summary}");
    assert_eq!((summary.pages, summary.records_persisted, summary.requests), (1_050, 1_050, 1_051), "{summary}");
    assert_eq!(ids(&read_dataset(lake.path(), "many")), (0..u64::from(PAGES)).collect::<Vec<u64>>());
    let broker = runtime.broker();
    let stats = broker.stats();
    // Persist is the slow end: Request waited for it, and the fetched
    // pages waiting were at most the budget and one Request batch (5).
    assert!(stats.held_back["request"] > 0, "{stats:?}");
    assert!(broker.peak_bytes("persist") <= persist_budget + 5 * 2_048, "{}", broker.peak_bytes("persist"));
    // The Orchestrator planned the first 1,000 pages, then waited for the
    // request queue to go under its budget before the other 50.
    assert!(stats.held_back["orchestrator"] > 0, "{stats:?}");
    assert_eq!(stats.received["orchestrator"], 2, "the probe's reply and one continuation");
    // Nothing received twice: one probe and 1,050 pages, 1,050 pages persisted.
    assert_eq!((stats.received["request"], stats.received["persist"]), (1_051, 1_050));
}

#[tokio::test]
async fn a_run_of_small_pages_leaves_one_file_and_a_late_duplicate_page_adds_no_rows() {
    let addr = start_vendor(VendorBehaviour { total: 95, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("valid time");
    let summary = runtime.run(&paged_spec(addr, "small", 10), scheduled).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    let folder = lake.path().join("small/dt=2026-11-29");
    let files: Vec<String> = std::fs::read_dir(&folder)
        .expect("partition")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["small-20261129T060000Z.parquet"], "10 pages coalesced into one file");
    assert_eq!(summary.data_keys, ["small/dt=2026-11-29/small-20261129T060000Z.parquet"]);

    // A page of the completed run delivered again (SQS at-least-once): its
    // rows are in the coalesced file already, and it writes none.
    let store = adapters::local::DirStore::new(lake.path());
    let raw =
        tributary_core::ports::ObjectStore::get(&store, "raw/small/dt=2026-11-29/small-20261129T060000Z-00003.json")
            .await
            .expect("raw page");
    let message: PersistMessage = serde_json::from_slice(&raw).expect("a persist message");
    let config = persist::PersistConfig::default();
    let broker = adapters::local::Broker::new();
    let deps =
        persist::Deps { store: &store, queue: &broker, run_events: None, catalog: None, tables: None, config: &config };
    persist::persist_page(message, deps).await.expect("the duplicate is accepted");
    assert_eq!(std::fs::read_dir(&folder).expect("partition").count(), 1, "no page file beside the run's");
    assert_eq!(ids(&read_dataset(lake.path(), "small")), (0..95).collect::<Vec<u64>>(), "every record once");
}

/// Issue 24: locally each spec is its own tenant, as a team is on AWS: a
/// page another spec's tenant sends for a pipeline it does not own, or an
/// unknown sender's, is dead-lettered with the reason and writes nothing,
/// while the spec's own run is untouched.
#[tokio::test]
async fn locally_each_spec_is_its_own_tenant() {
    let addr = start_vendor(VendorBehaviour { total: 12, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let at = |hour| Utc.with_ymd_and_hms(2026, 11, 1, hour, 0, 0).single().expect("a valid time");
    let (orders, rival) = (paged_spec(addr, "orders", 5), paged_spec(addr, "rival", 5));
    let first = runtime.run(&orders, at(6)).await.expect("run");
    assert!(first.succeeded(), "{first}");
    assert!(runtime.run(&rival, at(7)).await.expect("run").succeeded());
    let before = read_dataset(lake.path(), "orders").len();

    // The rival's tenant names the orders pipeline (the victim's run and claim checks) into its own dataset.
    let forged = PersistMessage {
        version: V1,
        pipeline: "orders".into(),
        run_id: RunId::new(&first.run_id).expect("run id"),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 1).expect("date"),
        page: PageRef { index: 9, count: 10 },
        target: PersistTarget::new("rival"),
        payload: Payload::Inline { records: contracts::RawRecords::from_values(&[record(99)]).expect("records") },
        fetched_at: None,
    };
    let body = serde_json::to_string(&forged).expect("JSON");
    let rival_sender = tributary_core::tenant::local_sender("rival");
    let as_rival = runtime.broker().send_as(&rival_sender);
    as_rival.send("persist", vec![body.clone()]).await.expect("send");
    runtime.broker().send_as("local:nobody").send("persist", vec![body]).await.expect("send");
    runtime.drain().await;

    // Both are dead-lettered with their reasons, kept in the dead-letter archive.
    let archive = lake.path().join("_dead_letters/persist-dlq");
    let reasons: Vec<String> = std::fs::read_dir(&archive)
        .expect("dead letters kept")
        .map(|entry| std::fs::read_to_string(entry.expect("entry").path()).expect("read"))
        .map(|text| serde_json::from_str::<tributary_core::dead_letters::DeadLetter>(&text).expect("archive entry"))
        .filter_map(|letter| letter.reason)
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(!read_alerts(lake.path()).is_empty(), "Notify alerted");
    assert!(reasons.iter().any(|r| r.contains("`pipeline` = orders: tenant rival does not own it")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("sender not authenticated: SenderId local:nobody")), "{reasons:?}");
    assert_eq!(read_dataset(lake.path(), "orders").len(), before, "the victim's table is untouched");
    assert!(read_dataset(lake.path(), "rival").iter().all(|row| row["id"] != 99), "nothing forged landed");
}

/// Every quarantined record of `dataset` in the lake: (record index, reason).
fn quarantined(lake: &std::path::Path, dataset: &str) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    let mut folders = vec![lake.join("quarantine").join(dataset)];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("quarantine folder").map(|e| e.expect("entry").path()) {
            if entry.is_dir() {
                folders.push(entry);
                continue;
            }
            for line in std::fs::read_to_string(&entry).expect("quarantine file").lines() {
                // The records are kept as sent: deeper than serde_json reads,
                // with lone surrogates; read the line as Request reads them.
                let cleaned = tributary_core::json::tape::without_unrepresentable(line).expect("a JSON line");
                let line: Value = serde_json::from_str(cleaned.as_deref().unwrap_or(line)).expect("a JSON line");
                found.push((line["index"].as_u64().expect("index"), line["reason"].as_str().expect("reason").into()));
            }
        }
    }
    found.sort();
    found
}

/// A record nested 300 levels (beyond serde_json's 127, within the
/// tokenizer's 512), one whose key is a lone surrogate and one with a byte
/// that is not UTF-8 in a string each fail alone: through `tributary run`'s
/// runtime against a local vendor, as a JSON page and as NDJSON lines (the
/// deep record first, so the body is recognised as NDJSON by that line),
/// the vendor is called once, the other records land, and each bad one is
/// quarantined with a reason naming it and its problem.
#[tokio::test]
async fn a_deep_record_a_lone_surrogate_key_or_a_byte_not_utf8_is_quarantined_alone() {
    let deep = format!(r#"{{"id": 1, "deep": {}{}}}"#, "[".repeat(300), "]".repeat(300));
    let records: [&[u8]; 5] = [
        br#"{"id": 0, "name": "plain"}"#,
        deep.as_bytes(),
        br#"{"id": 2, "\ud800": 1}"#,
        b"{\"id\": 3, \"name\": \"Jos\xe9\"}",
        br#"{"id": 4, "name": "Jos\u00e9"}"#,
    ];
    let json_page = [b"{\"data\": [".as_slice(), &records.join(b", ".as_slice()), b"]}"].concat();
    let lines = [records[1], records[0], records[2], records[3], records[4]].join(b"\n".as_slice());
    for (label, body, content_type, pointer, deep_index) in
        [("json", json_page, "application/json", "records_pointer: /data, ", 1), ("ndjson", lines, "text/plain", "", 0)]
    {
        let (addr, calls) = test_support::vendor::serve_bytes(body, content_type).await;
        let lake = tempfile::tempdir().expect("tempdir");
        let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
        let spec = contracts::spec::PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: odd\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/records', \
             {pointer}allow: {{loopback: true}}}}\ntarget: {{dataset: odd}}\n"
        ))
        .expect("valid spec");

        let summary = runtime
            .run(&spec, Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("a time"))
            .await
            .expect("run");

        assert_eq!(calls.load(Ordering::SeqCst), 1, "{label}: one vendor call, no retry: {summary}");
        assert_eq!(summary.dead_letters(), 0, "{label}: {summary}");
        assert_eq!((summary.records_persisted, summary.records_quarantined), (2, 3), "{label}: {summary}");
        let rows = read_dataset(lake.path(), "odd");
        assert_eq!(ids(&rows), [0, 4], "{label}");
        assert!(rows.iter().any(|row| row["name"] == "José"), "{label}: the escaped é of a good record is kept");
        let reasons = quarantined(lake.path(), "odd");
        let indexes: Vec<u64> = reasons.iter().map(|(index, _)| *index).collect();
        assert_eq!(indexes, [deep_index, 2, 3], "{label}: the three bad records, each alone: {reasons:?}");
        let reason = |index: u64| reasons.iter().find(|(i, _)| *i == index).map(|(_, r)| r.as_str()).unwrap_or("");
        assert!(
            reason(deep_index).starts_with(&format!("record {deep_index} is nested 301 levels deep, more than 32")),
            "{label}: {reasons:?}"
        );
        assert!(
            reason(2).starts_with(r#"record 2: the key "\ud800" at / is not valid Unicode"#),
            "{label}: {reasons:?}"
        );
        assert!(
            reason(3).starts_with("record 3: field /name: expected string")
                && reason(3).contains("the vendor's byte 0xe9, not UTF-8"),
            "{label}: {reasons:?}"
        );
    }
}

#[tokio::test]
async fn a_vendor_page_size_cap_is_a_truncated_run_not_a_silent_loss() {
    use test_support::vendor::{PagedRecords, serve_pages_capped};
    // 120 records; the spec asks for pages of 40, the vendor serves 25 at
    // most (its cap): pages at offsets 0, 40 and 80 hold 75 records.
    let records = PagedRecords::default();
    records.set((0..120).map(|i| serde_json::json!({"id": i, "updated": i})).collect());
    let addr = serve_pages_capped(records, 25).await;
    let text = format!(
        "version: 1\npipeline: capped\nstrategy: {{kind: paged, page_size: 40, total_pointer: /meta/total}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /results, allow: {{loopback: true}}}}\n\
         incremental: {{cursor_field: /updated, param: updated_since, start: '0'}}\n\
         target: {{dataset: capped}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, time).await.expect("run");
    assert_eq!(summary.records_persisted, 75);
    assert!(!summary.succeeded(), "a run that lost records is not a success: {summary}");
    let reason = summary.truncated.clone().unwrap_or_default();
    assert!(
        reason.contains("announced 120 records") && reason.contains("held 75") && reason.contains("strategy.page_size"),
        "{reason}"
    );
    assert!(summary.to_string().contains("truncated"), "{summary}");
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status");
    assert_eq!(runs.iter().map(|r| r.state()).collect::<Vec<_>>(), ["truncated"], "tributary status");
    // ... with the reason under its table (a trial found none for a cap).
    let hints = tributary::status::recovery_hints(&runs, &tributary::status::Place::Lake("lake".into()));
    assert!(hints.contains("truncated: the vendor announced 120 records"), "{hints}");
    // The skipped records lie between the pages: the incremental cursor
    // stays, so the next run (with the page size fixed) asks for them
    // again. A trial found it moved past them (here to 104), and they were never fetched.
    assert!(reason.contains("the incremental cursor stays at incremental.start (not 104)"), "{reason}");
    assert_eq!(tributary_core::state::current(&store, "capped").await.expect("state"), None);
}

/// A trial finding: a mistyped `offset_param` (the vendor ignores the
/// unknown parameter and serves its first page for every offset) stored the
/// first page once per page with exit 0. The run now completes but is not
/// a success, says which pages repeat and what to check, and Notify alerts.
#[tokio::test]
async fn a_vendor_serving_its_first_page_again_is_a_duplicated_run_not_a_success() {
    use axum::extract::{Query, State};
    use test_support::vendor::serve;
    // Answers `?offset=O&limit=L` properly but, like most APIs, ignores a
    // parameter it does not know: `ofset` gets page 0 every time.
    async fn page(
        State(records): State<Vec<Value>>,
        Query(query): Query<std::collections::HashMap<String, u32>>,
    ) -> axum::Json<Value> {
        let (offset, limit) = (query.get("offset").copied().unwrap_or(0), query.get("limit").copied().unwrap_or(10));
        let results: Vec<&Value> = records.iter().skip(offset as usize).take(limit as usize).collect();
        axum::Json(serde_json::json!({"meta": {"total": records.len()}, "results": results}))
    }
    let records: Vec<Value> = (0..90).map(|i| serde_json::json!({"id": i, "name": format!("n{i}")})).collect();
    let addr = serve(axum::Router::new().route("/records", axum::routing::get(page)).with_state(records)).await;
    let spec_text = |pipeline: &str, offset_param: &str| {
        format!(
            "version: 1\npipeline: {pipeline}\nstrategy: {{kind: paged, page_size: 30, total_pointer: /meta/total, \
             params: {{style: offset_limit, offset_param: {offset_param}, limit_param: limit}}}}\n\
             request: {{url: 'http://{addr}/records', records_pointer: /results, allow: {{loopback: true}}}}\n\
             target: {{dataset: {pipeline}}}\n"
        )
    };
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");

    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = contracts::spec::PipelineSpec::from_yaml(&spec_text("mistyped", "ofset")).expect("spec");
    let summary = runtime.run(&spec, time).await.expect("run");
    assert!(summary.completed, "the run completes: {summary}");
    assert_eq!(summary.records_persisted, 90, "three pages of the same 30 records: {summary}");
    assert!(!summary.succeeded(), "a run that stored records three times is not a success: {summary}");
    let reason = summary.duplicated.clone().unwrap_or_default();
    assert!(reason.contains("pages 0, 1, 2 hold the same 30 records"), "{reason}");
    assert!(
        reason.contains("60 records stored more than once") && reason.contains("strategy.offset_param"),
        "{reason}"
    );
    assert!(summary.to_string().contains("duplicated"), "{summary}");
    let ids: BTreeSet<i64> = read_dataset(lake.path(), "mistyped").iter().filter_map(|r| r["id"].as_i64()).collect();
    assert_eq!(ids, (0..30).collect::<BTreeSet<_>>(), "what the vendor served: its first page, three times");
    let alerts = serde_json::to_string(&read_alerts(lake.path())).expect("alerts");
    assert!(alerts.contains("\"function\":\"duplicated\"") && alerts.contains("strategy.offset_param"), "{alerts}");
    // `tributary status` says so too, with the reason.
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status");
    assert_eq!(runs.iter().map(|r| r.state()).collect::<Vec<_>>(), ["duplicated"], "tributary status");
    let place = tributary::status::Place::Lake(lake.path().display().to_string());
    let hints = tributary::status::recovery_hints(&runs, &place);
    assert!(
        hints.contains("duplicated: 3 of the run's pages hold records") && hints.contains("offset_param"),
        "{hints}"
    );

    // The same vendor paged by its real parameter: no duplicate reported.
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = contracts::spec::PipelineSpec::from_yaml(&spec_text("right", "offset")).expect("spec");
    let summary = runtime.run(&spec, time).await.expect("run");
    assert!(summary.succeeded() && summary.duplicated.is_none(), "{summary}");
    let ids: BTreeSet<i64> = read_dataset(lake.path(), "right").iter().filter_map(|r| r["id"].as_i64()).collect();
    assert_eq!(ids.len(), 90);
    assert!(!serde_json::to_string(&read_alerts(lake.path())).expect("alerts").contains("duplicated"));
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status");
    assert_eq!(runs.iter().map(|r| r.state()).collect::<Vec<_>>(), ["complete"], "tributary status");
}

/// A trial finding: a vendor that serves its JSON gzipped without saying
/// so (a `.json.gz` file host, `application/octet-stream`) failed the run
/// as "not JSON". The body is decompressed and its records land.
#[tokio::test]
async fn a_gzip_body_sent_unasked_is_decompressed_and_lands() {
    use std::io::Write;
    let records: Vec<Value> = (0..40).map(|i| serde_json::json!({"id": i})).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(serde_json::json!({ "data": records }).to_string().as_bytes()).expect("gzip");
    let (addr, _calls) =
        test_support::vendor::serve_bytes(gz.finish().expect("gzip"), "application/octet-stream").await;
    let text = format!(
        "version: 1\npipeline: gz\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /data, allow: {{loopback: true}}}}\n\
         target: {{dataset: gz}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, time).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    let ids: BTreeSet<i64> = read_dataset(lake.path(), "gz").iter().filter_map(|r| r["id"].as_i64()).collect();
    assert_eq!(ids, (0..40).collect::<BTreeSet<_>>());
}

#[tokio::test]
async fn a_wrong_records_pointer_fails_the_run_once_naming_the_keys_present() {
    use test_support::vendor::{PagedRecords, serve_pages};
    let records = PagedRecords::default();
    records.set((0..100).map(|i| serde_json::json!({"id": i})).collect());
    let addr = serve_pages(records).await;
    let text = format!(
        "version: 1\npipeline: wrong\nstrategy: {{kind: paged, page_size: 10, total_pointer: /meta/total}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /items, allow: {{loopback: true}}}}\n\
         target: {{dataset: wrong}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let time = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, time).await.expect("run");
    assert_eq!(summary.dead_letters(), 1, "the probe fails, no page is planned: {summary}");
    assert_eq!(summary.requests, 1, "one call: {summary}");
    let alerts = read_alerts(lake.path());
    let text = serde_json::to_string(&alerts).expect("alerts");
    assert!(text.contains("records_pointer") && text.contains("did you mean /results"), "{text}");
    assert!(text.contains("has keys meta, results"), "{text}");
}

/// Issue 27, item 5: a run whose id is in flight in another `tributary
/// run` is refused, naming the run and the process, and calls nothing;
/// once that run ends (or its process is gone) the same id runs.
#[tokio::test]
async fn a_run_already_in_flight_is_refused_and_runs_once_released() {
    let vendor = VendorBehaviour { total: 3, ..Default::default() };
    let addr = start_vendor(vendor.clone()).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = paged_spec(addr, "items", 20);
    let at = Utc.with_ymd_and_hms(2026, 12, 5, 6, 0, 0).single().expect("time");
    // Another `tributary run` of the same time holds the run.
    let held =
        tributary::lease::RunLease::take(lake.path(), &spec.pipeline, "20261205T060000Z").expect("io").expect("free");
    let err = runtime.run(&spec, at).await.expect_err("in flight").to_string();
    assert!(err.contains("20261205T060000Z") && err.contains("in flight") && err.contains("process"), "{err}");
    assert_eq!(vendor.calls.load(Ordering::SeqCst), 0, "nothing was called");
    drop(held);
    let summary = runtime.run(&spec, at).await.expect("released: the run starts");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!(summary.records_persisted, 3);
    assert!(!lake.path().join("_runs/items/20261205T060000Z/running.lock").exists(), "the lease ends with the run");
}
