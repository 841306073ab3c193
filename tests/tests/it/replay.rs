//! `tributary replay`: raw pages archived by real local runs are re-driven
//! through Persist; the same keys come out, a second replay changes no byte,
//! broken pages are reported with their key and reason while the rest go on,
//! and `--from`/`--to` pick `dt=` folders inclusively.

use std::collections::BTreeMap;
use std::path::Path;

use adapters::local::DirStore;
use bytes::Bytes;
use chrono::{NaiveDate, TimeZone, Utc};
use test_support::vendor::{VendorBehaviour, paged_spec, start_vendor};
use tributary::replay::{DateRange, ReplayError, replay, replay_lake};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_core::ports::ObjectStore;

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, d).expect("a valid date")
}

/// A lake where pipeline `items` ran on 2026-11-27 and 2026-11-29: 61
/// records in pages of 25 each day (3 raw pages per day).
async fn lake_with_two_runs(lake: &Path) {
    let addr = start_vendor(VendorBehaviour { total: 61, ..Default::default() }).await;
    let runtime = LocalRuntime::new(LocalOptions::new(lake)).expect("runtime");
    for d in [27, 29] {
        let at = Utc.with_ymd_and_hms(2026, 11, d, 6, 0, 0).single().expect("a valid time");
        let summary = runtime.run(&paged_spec(addr, "items", 25), at).await.expect("run");
        assert!(summary.succeeded(), "{summary}");
    }
}

/// Every file of the lake with its bytes, keyed by its key.
async fn snapshot(lake: &Path) -> BTreeMap<String, Bytes> {
    let store = DirStore::new(lake);
    let mut files = BTreeMap::new();
    for key in store.list("").await.expect("list") {
        let bytes = store.get(&key).await.expect("get");
        files.insert(key, bytes);
    }
    files
}

fn keys_under<'a>(files: &'a BTreeMap<String, Bytes>, prefix: &str) -> Vec<&'a str> {
    files.keys().filter(|k| k.starts_with(prefix)).map(String::as_str).collect()
}

#[tokio::test]
async fn replay_rewrites_the_same_keys_and_a_second_replay_changes_nothing() {
    let lake = tempfile::tempdir().expect("tempdir");
    lake_with_two_runs(lake.path()).await;
    let before = snapshot(lake.path()).await;
    assert_eq!(keys_under(&before, "raw/items/").len(), 6, "{:?}", before.keys());

    let first = replay_lake(lake.path(), "items", DateRange::default()).await.expect("replay");
    assert!(first.succeeded(), "{first}");
    assert_eq!((first.pages, first.pages_persisted, first.records_persisted), (6, 6, 122), "{first}");
    let after_first = snapshot(lake.path()).await;
    assert_eq!(
        after_first.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "replay writes no key the runs did not write"
    );
    for key in keys_under(&before, "items/").into_iter().chain(keys_under(&before, "raw/items/")) {
        assert_eq!(after_first[key], before[key], "{key}: the same code makes the same bytes");
    }

    let second = replay_lake(lake.path(), "items", DateRange::default()).await.expect("replay");
    assert_eq!(second, first, "the same summary");
    let after_second = snapshot(lake.path()).await;
    assert_eq!(after_second.keys().collect::<Vec<_>>(), after_first.keys().collect::<Vec<_>>());
    for (key, bytes) in &after_second {
        assert_eq!(bytes, &after_first[key], "{key}: a second replay changes nothing");
    }
}

#[tokio::test]
async fn replay_picks_dt_folders_from_to_inclusive() {
    let lake = tempfile::tempdir().expect("tempdir");
    lake_with_two_runs(lake.path()).await;
    let ranges = [
        (DateRange { from: Some(day(29)), to: Some(day(29)) }, 3),
        (DateRange { from: Some(day(27)), to: Some(day(28)) }, 3),
        (DateRange { from: Some(day(28)), to: None }, 3),
        (DateRange { from: None, to: Some(day(29)) }, 6),
        (DateRange { from: Some(day(30)), to: None }, 0),
    ];
    for (range, pages) in ranges {
        let summary = replay_lake(lake.path(), "items", range).await.expect("replay");
        assert_eq!((summary.pages, summary.pages_persisted), (pages, pages), "{range}: {summary}");
    }
    let reversed = replay_lake(lake.path(), "items", DateRange { from: Some(day(29)), to: Some(day(27)) }).await;
    assert!(matches!(reversed, Err(ReplayError::Range { .. })), "{reversed:?}");
    let bad_name = replay_lake(lake.path(), "../items", DateRange::default()).await;
    assert!(bad_name.is_err_and(|err| err.to_string().contains("dataset")));
}

#[tokio::test]
async fn a_broken_raw_page_is_reported_with_its_key_and_reason_and_the_others_are_replayed() {
    let lake = tempfile::tempdir().expect("tempdir");
    lake_with_two_runs(lake.path()).await;
    let store = DirStore::new(lake.path());
    let broken = "raw/items/dt=2026-11-29/items-20261129T060000Z-00001.json";
    store.put(broken, Bytes::from_static(b"{\"version\": 1, \"pipeline\": ")).await.expect("put");
    let stray = "raw/items/undated/items-x-00000.json";
    store.put(stray, Bytes::from_static(b"{}")).await.expect("put");
    // An envelope of another dataset, misfiled under this one.
    let other = String::from_utf8(
        store.get("raw/items/dt=2026-11-27/items-20261127T060000Z-00000.json").await.expect("get").to_vec(),
    )
    .expect("utf-8")
    .replace("\"dataset\":\"items\"", "\"dataset\":\"elsewhere\"");
    let misfiled = "raw/items/dt=2026-11-27/elsewhere-00000.json";
    store.put(misfiled, Bytes::from(other)).await.expect("put");

    let summary = replay(&store, None, None, "items", DateRange::default(), &persist::PersistConfig::default())
        .await
        .expect("replay");
    assert!(!summary.succeeded());
    assert_eq!((summary.pages, summary.pages_persisted), (8, 5), "{summary}");
    let failures: BTreeMap<&str, &str> = summary.failures.iter().map(|f| (f.key.as_str(), f.reason.as_str())).collect();
    assert!(failures[broken].starts_with("not a persist message: EOF"), "{summary}");
    assert_eq!(failures[stray], "not under a dt=YYYY-MM-DD folder", "{summary}");
    assert!(failures[misfiled].contains("target.dataset is \"elsewhere\""), "{summary}");
    let text = summary.to_string();
    assert!(text.contains(&format!("FAILED {broken}: not a persist message")), "{text}");
    assert!(text.contains("8 raw pages, 5 persisted, 3 failed"), "{text}");
}

#[tokio::test]
async fn a_claim_check_page_is_replayed_from_its_raw_copy_and_a_second_replay_changes_nothing() {
    use contracts::{PageRef, Payload, PayloadFormat, PersistMessage, PersistTarget, RunId, V1};
    let lake = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(lake.path());
    let run_id = RunId::new("20261128T060000Z").expect("run id");
    let claim = tributary_core::keys::claim_key("big", &run_id, 0);
    // Integers beyond u64 only survive as the bytes sent: replay must not re-encode them.
    let page = "{\"id\":1,\"ref\":123456789012345678901234567890}\n{\"id\":2,\"ref\":7}\n";
    store.put(&claim, Bytes::from_static(page.as_bytes())).await.expect("put");
    let message = PersistMessage {
        version: V1,
        pipeline: "big".into(),
        run_id,
        run_date: day(28),
        page: PageRef { index: 0, count: 1 },
        target: PersistTarget::new("big"),
        payload: Payload::Object { key: claim.clone(), format: PayloadFormat::default() },
        fetched_at: None,
    };
    let config = persist::PersistConfig::default();
    let deps = persist::Deps {
        store: &store,
        queue: &adapters::local::Broker::new(),
        run_events: None,
        catalog: None,
        tables: None,
        config: &config,
    };
    persist::persist_page(message, deps).await.expect("persist");
    store.delete(&claim).await.expect("the claim check expires");
    let before = snapshot(lake.path()).await;

    let first = replay_lake(lake.path(), "big", DateRange::default()).await.expect("replay");
    assert_eq!((first.pages, first.pages_persisted, first.records_persisted), (1, 1, 2), "{first}");
    let after_first = snapshot(lake.path()).await;
    assert_eq!(after_first, before, "replaying from the raw copy rewrites the very same bytes");
    let second = replay_lake(lake.path(), "big", DateRange::default()).await.expect("replay");
    assert_eq!(second, first);
    assert_eq!(snapshot(lake.path()).await, after_first, "a second replay changes nothing");
}

#[tokio::test]
async fn replaying_a_dataset_without_raw_pages_is_not_a_success() {
    let lake = tempfile::tempdir().expect("tempdir");
    let summary = replay_lake(lake.path(), "nosuch", DateRange { from: None, to: None }).await.expect("replay");
    assert_eq!(summary.pages, 0);
    assert!(!summary.succeeded(), "a misspelt dataset must not exit 0");
    assert!(summary.to_string().contains("no raw pages under raw/nosuch/"), "{summary}");
}
