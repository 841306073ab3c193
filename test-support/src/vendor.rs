//! Fake vendor APIs on 127.0.0.1: [`serve`] any router, [`serve_json`] a
//! JSON body at `/records` (changeable between runs), and the paged `/items`
//! vendor of [`start_vendor`] with the records it serves ([`record`],
//! [`detail`]) and a spec for it ([`paged_spec`]), and a vendor that
//! answers what it received ([`serve_echoes`]).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// Starts `router` on a free port of 127.0.0.1 (`127.0.0.1:0`) and returns
/// its address; the server runs on a spawned task for the rest of the test.
///
/// # Panics
/// When no loopback port can be bound, or when the server fails.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("vendor server") });
    addr
}

/// The body a [`serve_json`] vendor answers: shared, so a test can change it
/// between runs ([`JsonBody::set`]).
#[derive(Clone, Debug, Default)]
pub struct JsonBody(Arc<Mutex<String>>);

impl JsonBody {
    /// A body answering `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(Arc::new(Mutex::new(text.into())))
    }

    /// Answers `text` from now on.
    ///
    /// # Panics
    /// When a server task panicked holding the lock.
    pub fn set(&self, text: impl Into<String>) {
        *self.0.lock().expect("body lock") = text.into();
    }

    fn get(&self) -> String {
        self.0.lock().expect("body lock").clone()
    }
}

impl From<String> for JsonBody {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl From<&str> for JsonBody {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

/// The records a [`serve_pages`] vendor pages through: shared, so a test
/// can change them between runs ([`PagedRecords::set`]).
#[derive(Clone, Debug, Default)]
pub struct PagedRecords(Arc<Mutex<Vec<Value>>>);

impl PagedRecords {
    /// Serves `records` from now on (in this order, repeats and all).
    ///
    /// # Panics
    /// When a server task panicked holding the lock.
    pub fn set(&self, records: Vec<Value>) {
        *self.0.lock().expect("records lock") = records;
    }
}

/// A vendor answering `GET /records?offset=O&limit=L` with
/// `{"meta": {"total": N}, "results": [records O .. O+L]}` of `records`
/// (as they are at the time of the call), on a free loopback port: the
/// offset paging of [`paged_spec`], over records a test chooses.
///
/// # Panics
/// As [`serve`].
pub async fn serve_pages(records: PagedRecords) -> SocketAddr {
    serve_pages_capped(records, u32::MAX).await
}

/// [`serve_pages`] with a page size cap: a `limit` above `cap` is served
/// `cap` records, silently, as Django REST Framework does with its
/// `max_page_size` (1,000 by default).
///
/// # Panics
/// As [`serve`].
pub async fn serve_pages_capped(records: PagedRecords, cap: u32) -> SocketAddr {
    async fn page(State((records, cap)): State<(PagedRecords, u32)>, Query(page): Query<Page>) -> Response {
        let all = records.0.lock().expect("records lock").clone();
        let take = page.limit.min(cap) as usize;
        let results: Vec<&Value> = all.iter().skip(page.offset as usize).take(take).collect();
        Json(json!({"meta": {"total": all.len()}, "results": results})).into_response()
    }
    serve(Router::new().route("/records", get(page)).with_state((records, cap))).await
}

/// A vendor answering `GET /records` with `body` (as it is at the time of
/// the call) as `content-type: application/json`, on a free loopback port.
///
/// # Panics
/// As [`serve`].
pub async fn serve_json(body: impl Into<JsonBody>) -> SocketAddr {
    let router = Router::new()
        .route(
            "/records",
            get(|State(body): State<JsonBody>| async move { ([("content-type", "application/json")], body.get()) }),
        )
        .with_state(body.into());
    serve(router).await
}

/// A vendor answering `GET /records` with the bytes `body` as they are
/// (they need not be UTF-8) as `content-type: content_type`, on a free
/// loopback port; returns its address and a count of the calls received.
///
/// # Panics
/// As [`serve`].
pub async fn serve_bytes(body: Vec<u8>, content_type: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .route(
            "/records",
            get(move |State((body, calls)): State<(Arc<Vec<u8>>, Arc<AtomicUsize>)>| async move {
                calls.fetch_add(1, Ordering::SeqCst);
                ([("content-type", content_type)], body.as_ref().clone())
            }),
        )
        .with_state((Arc::new(body), calls.clone()));
    (serve(router).await, calls)
}

/// A paged vendor API: `GET /items?offset=&limit=` answers
/// `{"meta": {"total": N}, "results": [...]}`, record `i` being
/// [`record`]`(i)`; `GET /items/{id}/details` answers
/// `{"data": [detail(id, 0), detail(id, 1)]}` ([`detail`]).
#[derive(Clone, Debug, Default)]
pub struct VendorBehaviour {
    /// Records served.
    pub total: u32,
    /// Offsets whose page answers a body that is not JSON.
    pub broken_offsets: BTreeSet<u32>,
    /// Once set, the broken offsets answer like the others: the vendor
    /// fixed, for a re-run.
    pub healed: Arc<std::sync::atomic::AtomicBool>,
    /// Calls received.
    pub calls: Arc<AtomicUsize>,
    /// Item ids whose details answer a body that is not JSON, until
    /// [`VendorBehaviour::healed`] is set.
    pub broken_details: BTreeSet<u32>,
    /// Once set (non-zero), the records served and the total said instead
    /// of `total`: a vendor that grew or shrank between attempts.
    pub resized: Arc<std::sync::atomic::AtomicU32>,
}

/// Record `i` as the paged vendor serves it:
/// `{"id": i, "name": "item i", "score": i (even) or i * 1.5 (odd), "nested": {"even": …, "tags": ["t", "i"]}}`.
pub fn record(i: u32) -> Value {
    let score = if i.is_multiple_of(2) { json!(i) } else { json!(f64::from(i) * 1.5) };
    json!({"id": i, "name": format!("item {i}"), "score": score, "nested": {"even": i.is_multiple_of(2), "tags": ["t", i.to_string()]}})
}

/// Detail `k` of item `id`, as `GET /items/{id}/details` serves it:
/// `{"item_id": id, "k": k, "note": "detail k of item id"}`.
pub fn detail(id: u32, k: u32) -> Value {
    json!({"item_id": id, "k": k, "note": format!("detail {k} of item {id}")})
}

#[derive(Debug, serde::Deserialize)]
struct Page {
    offset: u32,
    limit: u32,
}

async fn items(State(behaviour): State<VendorBehaviour>, Query(page): Query<Page>) -> Response {
    behaviour.calls.fetch_add(1, Ordering::SeqCst);
    if behaviour.broken_offsets.contains(&page.offset) && !behaviour.healed.load(Ordering::SeqCst) {
        return (StatusCode::OK, "<html>maintenance</html>").into_response();
    }
    let total = match behaviour.resized.load(Ordering::SeqCst) {
        0 => behaviour.total,
        resized => resized,
    };
    let results: Vec<Value> = (page.offset..total).take(page.limit as usize).map(record).collect();
    Json(json!({"meta": {"total": total}, "results": results})).into_response()
}

async fn details(
    State(behaviour): State<VendorBehaviour>,
    axum::extract::Path(id): axum::extract::Path<u32>,
) -> Response {
    behaviour.calls.fetch_add(1, Ordering::SeqCst);
    if behaviour.broken_details.contains(&id) && !behaviour.healed.load(Ordering::SeqCst) {
        return (StatusCode::OK, "<html>maintenance</html>").into_response();
    }
    Json(json!({"data": [detail(id, 0), detail(id, 1)]})).into_response()
}

/// Starts the paged vendor of [`VendorBehaviour`] on a free loopback port.
///
/// # Panics
/// As [`serve`].
pub async fn start_vendor(behaviour: VendorBehaviour) -> SocketAddr {
    let router =
        Router::new().route("/items", get(items)).route("/items/{id}/details", get(details)).with_state(behaviour);
    serve(router).await
}

/// A paged spec (`page_size` records a page, the total at `/meta/total`,
/// loopback allowed) for the vendor at `addr`, writing dataset `pipeline`.
///
/// # Panics
/// When `pipeline` is not a valid pipeline or dataset name.
pub fn paged_spec(addr: SocketAddr, pipeline: &str, page_size: u32) -> contracts::spec::PipelineSpec {
    let text = format!(
        "version: 1\npipeline: {pipeline}\nstrategy: {{kind: paged, page_size: {page_size}, total_pointer: /meta/total}}\nrequest: {{url: 'http://{addr}/items', records_pointer: /results, allow: {{loopback: true}}}}\ntarget: {{dataset: {pipeline}}}\n"
    );
    contracts::spec::PipelineSpec::from_yaml(&text).expect("valid spec")
}

/// What an echoing vendor ([`serve_echoes`]) received.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Echo {
    /// `GET`, `POST`.
    pub method: String,
    /// The path, as sent (percent-encoded).
    pub path: String,
    /// The query string, as sent, without `?`.
    pub query: Option<String>,
    /// Headers, names lower-case (values that are not text left out).
    pub headers: std::collections::BTreeMap<String, String>,
}

impl Echo {
    /// The credential the request carried: an `Authorization` header
    /// without its scheme (`Bearer`, `Basic`), else an `x-api-key` header,
    /// else the first query parameter named like a key (`api_key`, `key`,
    /// `token`, `access_token`), decoded.
    pub fn credential(&self) -> Option<String> {
        if let Some(value) = self.headers.get("authorization") {
            return Some(value.split_once(' ').map_or(value.as_str(), |(_, token)| token).to_string());
        }
        if let Some(key) = self.headers.get("x-api-key") {
            return Some(key.clone());
        }
        let query = self.query.as_deref()?;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| matches!(name.as_ref(), "api_key" | "key" | "token" | "access_token"))
            .map(|(_, value)| value.into_owned())
    }
}

/// The requests a [`serve_echoes`] vendor received, in order.
pub type EchoLog = Arc<Mutex<Vec<Echo>>>;

/// An echoing vendor's answer: status, headers, body text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EchoReply {
    /// HTTP status.
    pub status: u16,
    /// Response headers (a `Location`, a `Link`, a `content-type`).
    pub headers: Vec<(String, String)>,
    /// The body, sent as is.
    pub body: String,
}

impl EchoReply {
    /// `status` with `body` as `application/json`.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Self { status, headers: vec![("content-type".into(), "application/json".into())], body: body.into() }
    }

    /// This reply with header `name: value` added.
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// A vendor that answers every request (any method, any path) with
/// `answer(echo)`, where `echo` is what it received ([`Echo`]): the way to
/// play a vendor that echoes the request's credential in an error page, a
/// body, a `Location` or a next link. Requests it received are kept in the
/// returned log, in order.
///
/// # Panics
/// As [`serve`]; a header `answer` gives that HTTP cannot carry fails the
/// request with a 500.
pub async fn serve_echoes<F>(answer: F) -> (SocketAddr, EchoLog)
where
    F: Fn(&Echo) -> EchoReply + Send + Sync + 'static,
{
    let log: EchoLog = Arc::default();
    let state = (log.clone(), Arc::new(answer));
    let router = Router::new().fallback(
        |State((log, answer)): State<(EchoLog, Arc<F>)>, request: axum::extract::Request| async move {
            let echo = Echo {
                method: request.method().to_string(),
                path: request.uri().path().to_string(),
                query: request.uri().query().map(str::to_string),
                headers: request
                    .headers()
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
                    .collect(),
            };
            log.lock().expect("echo log").push(echo.clone());
            let reply = answer(&echo);
            let mut response = Response::builder().status(reply.status);
            for (name, value) in &reply.headers {
                response = response.header(name, value);
            }
            response
                .body(axum::body::Body::from(reply.body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        },
    );
    (serve(router.with_state(state)).await, log)
}
