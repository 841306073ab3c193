//! The S3 calls one Persist page costs, counted through an
//! [`ObjectStore`] wrapper as the S3 adapter (`adapters::aws::S3Store`)
//! makes them: one request per port call (`list`: one `ListObjectsV2` per
//! 1,000 keys; `get_versioned` a `GetObject`; `put_if` a conditional
//! `PutObject`; `copy` a `CopyObject`). infra/README.md's "Cost" section
//! states these figures: change both together.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::NaiveDate;
use serde_json::{Value, json};

use adapters::local::{Broker, DirStore};
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use persist::{Deps, PersistConfig};
use tributary_core::ports::{ObjectStore, PortError};

/// The lake directory, recording every call as the S3 operation it is.
struct Counting {
    inner: DirStore,
    calls: Mutex<Vec<(&'static str, String)>>,
}

impl Counting {
    fn record(&self, operation: &'static str, key: &str) {
        self.calls.lock().expect("lock").push((operation, key.to_string()));
    }

    /// The calls so far, and forget them.
    fn take(&self) -> Vec<(&'static str, String)> {
        std::mem::take(&mut *self.calls.lock().expect("lock"))
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.record("PUT", key);
        self.inner.put(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        self.record("GET", key);
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        let keys = self.inner.list(prefix).await?;
        for _ in 0..keys.len().div_ceil(1000).max(1) {
            self.record("LIST", prefix);
        }
        Ok(keys)
    }

    async fn get_to_file(&self, key: &str, path: &std::path::Path) -> Result<u64, PortError> {
        self.record("GET", key);
        self.inner.get_to_file(key, path).await
    }

    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<(), PortError> {
        self.record("PUT", key);
        self.inner.put_file(key, path).await
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        self.record("COPY", &format!("{from} -> {to}"));
        self.inner.copy(from, to).await
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.record("DELETE", key);
        self.inner.delete(key).await
    }

    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        self.record("GET", key);
        self.inner.get_versioned(key).await
    }

    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        self.record("PUT", key);
        self.inner.put_if(key, body, version).await
    }
}

/// Page `index` of a 3-page run, 100 inline records (the usual page: under
/// SQS's 256 KiB, no claim check).
fn page(index: u32) -> PersistMessage {
    let records: Vec<Value> = (0..100)
        .map(|i| json!({"id": index * 100 + i, "name": format!("c{i}"), "amount": f64::from(i) * 1.5}))
        .collect();
    PersistMessage {
        version: V1,
        pipeline: "crm".into(),
        run_id: RunId::new("20261129T060000Z").expect("run id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef { index, count: 3 },
        target: PersistTarget::new("customers"),
        payload: Payload::Inline { records: contracts::RawRecords::from_values(&records).expect("records") },
        fetched_at: None,
    }
}

/// `operation -> calls`.
fn tally(calls: &[(&'static str, String)]) -> BTreeMap<&'static str, usize> {
    let mut tally = BTreeMap::new();
    for (operation, _) in calls {
        *tally.entry(*operation).or_insert(0) += 1;
    }
    tally
}

#[tokio::test]
async fn one_page_costs_the_s3_calls_infra_readme_states() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting { inner: DirStore::new(dir.path()), calls: Mutex::default() };
    let config = PersistConfig::default();
    let broker = Broker::new();
    // The Orchestrator's share, not counted: the run's expected page count.
    let expected = tributary_core::ledger::Expected {
        pipeline: "crm".into(),
        run_id: RunId::new("20261129T060000Z").expect("run id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages: 3,
        truncated: None,
        records: None,
    };
    tributary_core::ledger::record_expected(&store.inner, &expected).await.expect("expected");
    let mut seen = Vec::new();
    for index in 0..3 {
        let deps =
            Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None };
        let receipt = persist::persist_page(page(index), deps).await.expect("persisted");
        assert_eq!(receipt.records_persisted, 100);
        let calls = store.take();
        let listing: Vec<String> = calls.iter().map(|(op, key)| format!("{op} {key}")).collect();
        println!("page {index}: {:?}\n  {}", tally(&calls), listing.join("\n  "));
        seen.push(tally(&calls));
    }
    let expect = |pairs: &[(&'static str, usize)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
    let update = "infra/README.md's \"Cost\" section states these: update it with this test";
    // Any page before the last one: the completion marker (twice: before
    // the raw page is kept, and after the conversion, before the dataset
    // folder is written), the raw page, the dataset's schema (JSON and
    // Arrow), the Parquet file, the receipt (read first: a redelivery; in
    // its shard folder, then where versions before 2026-12-06 wrote it),
    // the expected count and the receipt shard's list.
    assert_eq!(seen[1], expect(&[("GET", 7), ("LIST", 1), ("PUT", 3)]), "a page in the middle of a run; {update}");
    // The first page of a new dataset writes its schema (its Arrow form
    // after looking for one: it is only ever replaced by a newer version).
    assert_eq!(seen[0], expect(&[("GET", 7), ("LIST", 1), ("PUT", 5)]), "the first page of a dataset; {update}");
    // The page completing a 3-page run adds the run's completion: the shard
    // summary (each receipt read), coalescing (each page file read, the
    // coalesced file staged, the replacement record written, the staged
    // file copied into place, the page files listed and deleted, the
    // staged copy deleted), the manifest, the state and _SUCCESS.
    let n = 3;
    let completion = expect(&[("COPY", 1), ("DELETE", n + 1), ("GET", 7 + 2 * n + 6), ("LIST", 1 + 4), ("PUT", 3 + 5)]);
    assert_eq!(seen[2], completion, "the page completing a {n}-page run; {update}");
}
