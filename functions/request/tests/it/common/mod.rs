//! Helpers of Request's integration tests: a real handler over the real
//! reqwest client, the local broker, a lake in a temp dir, secrets from a
//! file, and local HTTP servers (axum on `test_support::vendor::serve`, or
//! raw TCP for silent and reset connections).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use adapters::local::{Broker, DirStore, FileSecrets, QueueConfig};
use contracts::{self, RequestMessage};
use request::http::{HttpOptions, ReqwestClient};
use request::ssrf::Lookup;
use request::trust::Trust;
use request::{Deps, RequestConfig, Warm};

pub const PERSIST_QUEUE: &str = "persist";
pub const REQUEST_QUEUE: &str = "request";
pub const ORCHESTRATOR_QUEUE: &str = "orchestrator";

/// Starts `router` on 127.0.0.1:0 (the shared fake vendor server).
pub use test_support::vendor::serve;

/// What a raw server does with one connection.
#[derive(Clone, Debug)]
pub enum Conn {
    /// Reads the request and never answers.
    Silent,
    /// Reads the request and resets the connection (RST, SO_LINGER 0).
    Reset,
    /// Answers 200 with this JSON body.
    Json(String),
}

/// A raw TCP server playing `script` one connection at a time (the last
/// entry repeats); returns its address and the count of accepted connections.
pub async fn scripted(script: Vec<Conn>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let n = count.fetch_add(1, Ordering::SeqCst);
            let conn = script.get(n).or(script.last()).cloned().unwrap_or(Conn::Silent);
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer).await;
                match conn {
                    Conn::Silent => tokio::time::sleep(Duration::from_secs(600)).await,
                    Conn::Reset => {
                        #[allow(deprecated)]
                        let _ = stream.set_linger(Some(Duration::ZERO));
                        drop(stream);
                    }
                    Conn::Json(body) => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(head.as_bytes()).await;
                        let _ = stream.write_all(body.as_bytes()).await;
                        let _ = stream.shutdown().await;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// Request's handler with local adapters.
pub struct Harness {
    pub http: ReqwestClient,
    pub broker: Broker,
    pub dir: tempfile::TempDir,
    pub store: DirStore,
    pub secrets: FileSecrets,
    pub warm: Warm,
    pub config: RequestConfig,
    /// Time the invocation has, from each `deps()` call.
    pub invocation: Duration,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_http(ReqwestClient::new().expect("client"))
    }

    /// A harness whose HTTP client resolves names through `lookup`.
    pub fn with_lookup(lookup: Arc<dyn Lookup>) -> Self {
        Self::with_http(ReqwestClient::with_options(HttpOptions { lookup, ..HttpOptions::default() }).expect("client"))
    }

    fn with_http(http: ReqwestClient) -> Self {
        let broker = Broker::new();
        for name in [PERSIST_QUEUE, REQUEST_QUEUE, ORCHESTRATOR_QUEUE] {
            broker.create_queue(QueueConfig {
                name: name.into(),
                visibility_timeout: Duration::from_secs(720),
                max_message_bytes: 262_144,
                redrive: None,
            });
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let secrets = FileSecrets::new(dir.path().join("_secrets.json"));
        let config = RequestConfig {
            base_delay: Duration::from_millis(1),
            deadline_reserve: Duration::from_millis(200),
            own_queue: Some(REQUEST_QUEUE.into()),
            // Answers to the harness's queues only; any secret (tests of
            // grants set `trust.secrets`); loopback for the local servers.
            trust: Trust {
                destinations: Some([PERSIST_QUEUE, REQUEST_QUEUE, ORCHESTRATOR_QUEUE].map(String::from).into()),
                ..Trust::unrestricted()
            },
            ..RequestConfig::default()
        };
        Self { http, broker, dir, store, secrets, warm: Warm::default(), config, invocation: Duration::from_secs(120) }
    }

    /// Writes the secrets file.
    pub fn secrets(&self, secrets: Value) {
        std::fs::write(self.dir.path().join("_secrets.json"), secrets.to_string()).expect("secrets file");
    }

    pub fn deps(&self) -> Deps<'_> {
        Deps {
            http: &self.http,
            queue: &self.broker,
            topics: &self.broker,
            store: &self.store,
            secrets: &self.secrets,
            warm: &self.warm,
            deadline: tokio::time::Instant::now() + self.invocation,
            config: &self.config,
        }
    }

    /// Every message body on `queue`, as sent (text); the queue is left empty.
    pub fn drain_text(&self, queue: &str) -> Vec<String> {
        test_support::queues::drain(&self.broker, queue)
    }

    /// Every message body on `queue`, as JSON; the queue is left empty.
    pub fn drain(&self, queue: &str) -> Vec<Value> {
        test_support::queues::drain_json(&self.broker, queue)
    }
}

/// A records message for `url` whose policy is `policy` (loopback allowed
/// unless the policy says otherwise).
pub fn message(url: &str, policy: Value) -> RequestMessage {
    let mut policy = policy;
    if policy.get("allow").is_none() {
        policy["allow"] = json!({"loopback": true});
    }
    contracts::decode(json!({
        "version": 1,
        "pipeline": "vendor",
        "run_id": "20261129T060000Z",
        "run_date": "2026-11-29",
        "page": {"index": 0, "count": 1},
        "http": {"url": url},
        "policy": policy,
        "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "vendor"}},
        "reply_to": {"kind": "queue", "queue": PERSIST_QUEUE},
    }))
    .expect("valid RequestMessage")
}

/// Items of a page as the servers send them.
pub fn items(ids: std::ops::Range<u32>) -> Value {
    json!({"items": ids.map(|id| json!({"id": id})).collect::<Vec<_>>()})
}

/// A request a [`recorder`] server received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it arrived.
    pub at: std::time::Instant,
    /// `GET`, `POST`.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Headers, names lower-case.
    pub headers: std::collections::BTreeMap<String, String>,
    /// Body as text.
    pub body: String,
}

impl Seen {
    /// A query parameter of the request.
    pub fn query(&self, name: &str) -> Option<String> {
        let url = url::Url::parse(&format!("http://x{}", self.uri)).ok()?;
        url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
    }
}

/// Every request the server saw, in order.
pub type Log = Arc<std::sync::Mutex<Vec<Seen>>>;

/// A server that records every request and answers with `reply(n, seen)`,
/// `n` counting from 0.
pub async fn recorder<F>(reply: F) -> (SocketAddr, Log)
where
    F: Fn(usize, &Seen) -> axum::response::Response + Send + Sync + 'static,
{
    let log: Log = Arc::default();
    let reply = Arc::new(reply);
    let state = (log.clone(), reply);
    let router =
        Router::new().fallback(
            |axum::extract::State((log, reply)): axum::extract::State<(Log, Arc<F>)>,
             request: axum::extract::Request| async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
                let seen = Seen {
                    at: std::time::Instant::now(),
                    method: parts.method.to_string(),
                    uri: parts.uri.to_string(),
                    headers: parts
                        .headers
                        .iter()
                        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                        .collect(),
                    body: String::from_utf8_lossy(&body).into_owned(),
                };
                let n = {
                    let mut log = log.lock().expect("log");
                    log.push(seen.clone());
                    log.len() - 1
                };
                reply(n, &seen)
            },
        );
    (serve(router.with_state(state)).await, log)
}

/// A JSON response with `status` and extra headers.
pub fn reply(status: u16, headers: &[(&str, &str)], body: Value) -> axum::response::Response {
    let mut response = axum::response::Response::builder().status(status).header("content-type", "application/json");
    for (name, value) in headers {
        response = response.header(*name, *value);
    }
    response.body(axum::body::Body::from(body.to_string())).expect("response")
}
