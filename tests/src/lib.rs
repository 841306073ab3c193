//! Support for tributary's end-to-end tests: a configurable vendor API on
//! 127.0.0.1 and lake read-back helpers. The tests live in `tests/tests/`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

pub mod emulator;
pub mod readers;

/// A paged vendor API: `GET /items?offset=&limit=` answers
/// `{"meta": {"total": N}, "results": [...]}`, record `i` being
/// `{"id": i, "name": "item i", "score": i * 1.5 or i, "nested": {...}}`;
/// `GET /items/{id}/details` answers `{"data": [two details]}`.
#[derive(Clone, Debug, Default)]
pub struct VendorBehaviour {
    /// Records served.
    pub total: u32,
    /// Offsets whose page answers a body that is not JSON.
    pub broken_offsets: BTreeSet<u32>,
    /// Calls received.
    pub calls: Arc<AtomicUsize>,
}

/// Record `i` as the vendor serves it.
pub fn record(i: u32) -> Value {
    let score = if i.is_multiple_of(2) { json!(i) } else { json!(f64::from(i) * 1.5) };
    json!({"id": i, "name": format!("item {i}"), "score": score, "nested": {"even": i.is_multiple_of(2), "tags": ["t", i.to_string()]}})
}

#[derive(Debug, serde::Deserialize)]
struct Page {
    offset: u32,
    limit: u32,
}

async fn items(State(behaviour): State<VendorBehaviour>, Query(page): Query<Page>) -> Response {
    behaviour.calls.fetch_add(1, Ordering::SeqCst);
    if behaviour.broken_offsets.contains(&page.offset) {
        return (StatusCode::OK, "<html>maintenance</html>").into_response();
    }
    let results: Vec<Value> = (page.offset..behaviour.total).take(page.limit as usize).map(record).collect();
    Json(json!({"meta": {"total": behaviour.total}, "results": results})).into_response()
}

async fn details(
    State(behaviour): State<VendorBehaviour>,
    axum::extract::Path(id): axum::extract::Path<u32>,
) -> Response {
    behaviour.calls.fetch_add(1, Ordering::SeqCst);
    Json(json!({"data": [detail(id, 0), detail(id, 1)]})).into_response()
}

/// Detail `k` of item `id`, as `GET /items/{id}/details` serves it.
pub fn detail(id: u32, k: u32) -> Value {
    json!({"item_id": id, "k": k, "note": format!("detail {k} of item {id}")})
}

/// Starts the vendor API on a free loopback port.
///
/// # Panics
/// When no loopback port can be bound (tests only).
pub async fn start_vendor(behaviour: VendorBehaviour) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let app =
        Router::new().route("/items", get(items)).route("/items/{id}/details", get(details)).with_state(behaviour);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A paged spec for the vendor at `addr`.
pub fn paged_spec(addr: SocketAddr, pipeline: &str, page_size: u32) -> contracts::spec::PipelineSpec {
    let text = format!(
        "version: 1\npipeline: {pipeline}\nstrategy: {{kind: paged, page_size: {page_size}, total_pointer: /meta/total}}\nrequest: {{url: 'http://{addr}/items', records_pointer: /results, allow: {{loopback: true}}}}\ntarget: {{dataset: {pipeline}}}\n"
    );
    contracts::spec::PipelineSpec::from_yaml(&text).expect("valid spec")
}

/// Every row of every Parquet file under `<lake>/<dataset>/`, as JSON
/// objects (through arrow-json's writer, so values are checked as written).
///
/// # Panics
/// On unreadable files (tests only).
pub fn read_dataset(lake: &Path, dataset: &str) -> Vec<Value> {
    let mut files = Vec::new();
    collect_parquet(&lake.join(dataset), &mut files);
    files.sort();
    let mut rows = Vec::new();
    for file in files {
        for batch in tributary::lake::read_parquet(&file).expect("readable parquet") {
            rows.extend(tributary::lake::batch_to_json(&batch).expect("batch to json"));
        }
    }
    rows
}

fn collect_parquet(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_parquet(&path, out);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
}
