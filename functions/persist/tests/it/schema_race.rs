//! A trial's finding (7 runs of 12 lost a column): a page converted against
//! an older version of the dataset's schema published that version's Arrow
//! form after a page that had widened it, and the run's completion
//! coalesced its files onto the older form, dropping the column a later
//! page added. The older page's read is played by a store that serves the
//! schema as it was before the widening page wrote it.

use std::sync::Mutex;

use adapters::local::{Broker, DirStore};
use async_trait::async_trait;
use bytes::Bytes;
use contracts::{PersistMessage, PersistTarget};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use persist::{Deps, PersistConfig};
use test_support::runs::{expect_pages, page};
use tributary_core::keys;
use tributary_core::ports::{ObjectStore, PortError};

const RUN: &str = "20261201T060000Z";

/// The lake, but the dataset's schema read (with its version) as `stale`
/// once: what a page that read it before another page widened it holds.
struct StaleOnce<'a> {
    inner: &'a DirStore,
    key: String,
    stale: Mutex<Option<(Bytes, String)>>,
}

#[async_trait]
impl ObjectStore for StaleOnce<'_> {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.inner.put(key, body).await
    }
    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        self.inner.list(prefix).await
    }
    async fn get_to_file(&self, key: &str, path: &std::path::Path) -> Result<u64, PortError> {
        self.inner.get_to_file(key, path).await
    }
    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<(), PortError> {
        self.inner.put_file(key, path).await
    }
    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        self.inner.copy(from, to).await
    }
    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.inner.delete(key).await
    }
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        if key == self.key
            && let Some(stale) = self.stale.lock().expect("lock").take()
        {
            return Ok(Some(stale));
        }
        self.inner.get_versioned(key).await
    }
    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        self.inner.put_if(key, body, version).await
    }
}

fn invoices(index: u32, records: &str) -> PersistMessage {
    page("invoices", PersistTarget::new("invoices"), RUN, index, 3, records)
}

async fn persist(store: &dyn ObjectStore, message: PersistMessage) {
    let (queue, config) = (Broker::new(), PersistConfig::default());
    let deps = Deps { store, queue: &queue, config: &config, run_events: None, catalog: None, tables: None };
    persist::persist_page(message, deps).await.expect("persisted");
}

#[tokio::test]
async fn a_page_of_an_older_schema_version_never_takes_back_a_column_a_later_page_added() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = DirStore::new(dir.path());
    expect_pages(&lake, "invoices", RUN, 3).await;
    persist(&lake, invoices(0, r#"[{"id": 1, "amount": "10.00"}]"#)).await;
    let schema_key = keys::schema_key("invoices");
    let before = lake.get_versioned(&schema_key).await.expect("read").expect("the dataset's schema");
    // Page 2 adds `discount`: the schema's next version.
    persist(&lake, invoices(2, r#"[{"id": 3, "amount": "30.00", "discount": {"pct": 5}}]"#)).await;
    // Page 1 read the schema before page 2 wrote it, and completes the run.
    let stale = StaleOnce { inner: &lake, key: schema_key, stale: Mutex::new(Some(before)) };
    persist(&stale, invoices(1, r#"[{"id": 2, "amount": "20.00"}]"#)).await;

    let arrow = lake.get(&keys::arrow_schema_key("invoices")).await.expect("the published schema");
    let arrow = lake_format::codec::decode_arrow_schema(&arrow).expect("Arrow schema");
    assert!(arrow.field_with_name("discount").is_ok(), "the published schema keeps discount: {arrow:?}");
    // The run's files: every row once, and page 2's discount kept.
    let (mut rows, mut discounts) = (0, 0);
    for key in lake.list("invoices/").await.expect("list").iter().filter(|k| k.ends_with(".parquet")) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(lake.get(key).await.expect("file"))
            .expect("Parquet")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            rows += batch.num_rows();
            let discount = batch.column_by_name("discount").expect("the file has discount");
            discounts += discount.len() - discount.null_count();
        }
    }
    assert_eq!((rows, discounts), (3, 1), "every row once, the one discount kept");
    assert!(lake.get(&keys::success_key("invoices", &contracts::RunId::new(RUN).expect("id"))).await.is_ok());
}
