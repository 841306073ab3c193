//! A Django REST Framework vendor through `tributary run` (the local
//! runtime), as a new user met it (issue 27, item 0): its throttle
//! (`100/min`) written as a per-minute rate, its `Retry-After` waited out
//! instead of dead-lettering the run, its `404` one page past the end read
//! as the end (`status_actions: {404: empty}`), and its
//! `Authorization: Token <key>` (`auth.scheme`).
//!
//! The vendor answers as DRF's `PageNumberPagination` does:
//! `GET /contacts/?page=N&page_size=S` gives
//! `{"count", "next", "previous", "results"}`, a page past the last one
//! `404 {"detail": "Invalid page."}`, a missing or wrong token
//! `401 {"detail": "Invalid token."}`, a throttled call
//! `429 {"detail": "Request was throttled. Expected available in N seconds."}`
//! with `Retry-After: N`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use serde_json::json;

use contracts::spec::PipelineSpec;
use test_support::logs::LogBuffer;
use test_support::vendor::{Echo, EchoLog, EchoReply, serve_echoes};
use tributary::runtime::{LocalOptions, LocalRuntime, RunSummary, read_alerts};

/// When the vendor throttles.
#[derive(Clone, Debug)]
enum Throttle {
    /// Never.
    Never,
    /// The first `calls` calls for page `page` (by count, not time).
    FirstCallsOf { page: u32, calls: usize, retry_after_secs: u64 },
    /// More than `calls` calls within `window` (DRF's `SimpleRateThrottle`,
    /// by time), answering the seconds until the oldest leaves the window.
    Window { calls: usize, window: Duration },
    /// A call less than `gap` after the one before.
    Gap { gap: Duration },
}

/// What a [`Drf`] vendor saw: calls per page, and the times of the calls
/// it answered (not throttled), all pages.
#[derive(Debug, Default)]
struct Seen {
    calls: std::collections::BTreeMap<u32, usize>,
    answered: Vec<Instant>,
}

/// A DRF-shaped vendor of `total` contacts.
#[derive(Clone, Debug)]
struct Drf {
    total: u32,
    /// `Authorization: Token <token>` required.
    token: Option<String>,
    throttle: Throttle,
    /// What it saw so far.
    seen: Arc<Mutex<Seen>>,
    /// 429s answered.
    throttled: Arc<Mutex<usize>>,
}

impl Drf {
    fn new(total: u32) -> Self {
        Self { total, token: None, throttle: Throttle::Never, seen: Arc::default(), throttled: Arc::default() }
    }

    fn answer(&self, echo: &Echo) -> EchoReply {
        let query: std::collections::BTreeMap<String, String> =
            url::form_urlencoded::parse(echo.query.as_deref().unwrap_or("").as_bytes()).into_owned().collect();
        if let Some(token) = &self.token
            && echo.headers.get("authorization") != Some(&format!("Token {token}"))
        {
            return EchoReply::json(401, json!({"detail": "Invalid token."}).to_string());
        }
        let page: u32 = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
        let size: u32 = query.get("page_size").and_then(|p| p.parse().ok()).unwrap_or(50).min(1000);
        let now = Instant::now();
        let wait = {
            let mut seen = self.seen.lock().expect("seen");
            let calls = seen.calls.entry(page).or_default();
            *calls += 1;
            let calls = *calls;
            let wait = match &self.throttle {
                Throttle::Never => None,
                Throttle::FirstCallsOf { page: p, calls: n, retry_after_secs } => {
                    (*p == page && calls <= *n).then_some(*retry_after_secs)
                }
                Throttle::Window { calls: n, window } => {
                    let recent: Vec<Instant> = seen.answered.iter().copied().filter(|t| now - *t < *window).collect();
                    (recent.len() >= *n).then(|| (*window - (now - recent[0])).as_secs_f64().ceil() as u64)
                }
                Throttle::Gap { gap } => seen.answered.last().filter(|last| now - **last < *gap).map(|_| 60),
            };
            if wait.is_none() {
                seen.answered.push(now);
            }
            wait
        };
        if let Some(secs) = wait {
            *self.throttled.lock().expect("throttled") += 1;
            let detail = format!("Request was throttled. Expected available in {secs} seconds.");
            return EchoReply::json(429, json!({"detail": detail}).to_string())
                .with_header("retry-after", secs.to_string());
        }
        let pages = self.total.div_ceil(size).max(1);
        if page == 0 || page > pages {
            return EchoReply::json(404, json!({"detail": "Invalid page."}).to_string());
        }
        let first = (page - 1) * size;
        let results: Vec<_> =
            (first..self.total.min(first + size)).map(|i| json!({"id": i, "name": format!("contact {i}")})).collect();
        let link = |p: u32| format!("http://vendor.test{}?page={p}&page_size={size}", echo.path);
        let body = json!({
            "count": self.total,
            "next": (page < pages).then(|| link(page + 1)),
            "previous": (page > 1).then(|| link(page - 1)),
            "results": results,
        });
        EchoReply::json(200, body.to_string())
    }

    async fn serve(&self) -> (std::net::SocketAddr, EchoLog) {
        let vendor = self.clone();
        serve_echoes(move |echo| vendor.answer(echo)).await
    }

    fn calls_of(&self, page: u32) -> usize {
        self.seen.lock().expect("seen").calls.get(&page).copied().unwrap_or(0)
    }

    fn throttled(&self) -> usize {
        *self.throttled.lock().expect("throttled")
    }
}

/// A count-first spec of `pipeline` over the vendor at `addr`, pages of
/// `page_size` by page number, with `request` added under `request:`.
fn count_first(addr: std::net::SocketAddr, pipeline: &str, page_size: u32, request: &str) -> PipelineSpec {
    PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: {pipeline}\n\
         strategy: {{kind: paged, page_size: {page_size}, total_pointer: /count, \
         params: {{style: page_number, page_param: page, size_param: page_size}}}}\n\
         request: {{url: 'http://{addr}/contacts/', records_pointer: /results, allow: {{loopback: true}}{request}}}\n\
         target: {{dataset: {pipeline}}}\n"
    ))
    .expect("valid spec")
}

fn at_six() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 5, 6, 0, 0).single().expect("time")
}

fn completed(summary: &RunSummary, records: u64) {
    assert!(summary.succeeded() && summary.completed, "{summary}");
    assert_eq!(summary.records_persisted, records, "{summary}");
    assert_eq!(summary.dead_letters(), 0, "{summary}");
}

#[tokio::test]
async fn a_per_minute_rate_keeps_a_run_under_the_vendors_throttle() {
    // The vendor throttles a call that comes less than 150 ms after the one
    // before; 240 a minute is one call every 250 ms (as the calls start:
    // they reach the vendor a few ms early or late).
    let vendor = Drf { throttle: Throttle::Gap { gap: Duration::from_millis(150) }, ..Drf::new(50) };
    let (addr, _log) = vendor.serve().await;
    let spec = count_first(addr, "contacts", 10, ", rate: {requests_per_minute: 240}");
    assert_eq!(spec.request.policy.rate.map(|r| r.calls_per_secs()), Some((240, 60)));
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let summary = runtime.run(&spec, at_six()).await.expect("run");
    completed(&summary, 50);
    assert_eq!(vendor.throttled(), 0, "never throttled: {summary}");
    let times = vendor.seen.lock().expect("seen").answered.clone();
    assert!(times.len() >= 5, "{times:?}");
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_millis(180), "calls {:?} apart", pair[1] - pair[0]);
    }
    let spread = times[times.len() - 1] - times[0];
    let calls = u32::try_from(times.len() - 1).expect("calls");
    assert!(spread >= Duration::from_millis(250) * calls - Duration::from_millis(50), "{calls} gaps in {spread:?}");
}

#[tokio::test]
async fn a_retry_after_past_the_cap_pauses_the_page_without_dead_lettering_it() {
    // Page 2 is throttled with Retry-After: 120 six times in a row: more
    // pauses than the queue's maxReceiveCount (5). Each is waited out on
    // the virtual clock (this vendor counts calls, not time).
    let vendor = Drf { throttle: Throttle::FirstCallsOf { page: 2, calls: 6, retry_after_secs: 120 }, ..Drf::new(30) };
    let (addr, _log) = vendor.serve().await;
    let spec = count_first(addr, "throttled", 10, "");
    let lake = tempfile::tempdir().expect("tempdir");
    let options = LocalOptions { real_time_pauses: false, ..LocalOptions::new(lake.path()) };
    let runtime = LocalRuntime::new(options).expect("runtime");
    let before = runtime.broker().clock_ms();
    let summary = runtime.run(&spec, at_six()).await.expect("run");
    completed(&summary, 30);
    assert_eq!((vendor.throttled(), vendor.calls_of(2)), (6, 7), "one call per pause, then the page");
    assert!(
        runtime.broker().clock_ms() - before >= 6 * 120_000,
        "each pause waited: {} ms",
        runtime.broker().clock_ms()
    );
    assert!(read_alerts(lake.path()).is_empty());
}

#[tokio::test]
async fn a_time_window_throttle_is_waited_out_in_real_time_not_called_in_a_loop() {
    // DRF's throttle counts calls in a sliding window of wall-clock time: 3
    // calls every 2 s here. Every Retry-After is a pause (no wait inside an
    // invocation), and the local runtime holds each paused page for real:
    // the vendor's clock is the wall clock.
    let vendor = Drf { throttle: Throttle::Window { calls: 3, window: Duration::from_secs(2) }, ..Drf::new(40) };
    let (addr, _log) = vendor.serve().await;
    let spec = count_first(addr, "windowed", 5, "");
    let lake = tempfile::tempdir().expect("tempdir");
    let mut options = LocalOptions::new(lake.path());
    options.request.max_retry_after = Duration::ZERO;
    let runtime = LocalRuntime::new(options).expect("runtime");
    let started = Instant::now();
    let summary = runtime.run(&spec, at_six()).await.expect("run");
    completed(&summary, 40);
    // 9 calls (the probe and 8 pages), 3 per 2 s: at least 4 s.
    assert!(started.elapsed() >= Duration::from_secs(4), "{:?}", started.elapsed());
    // Each throttled page waits its Retry-After before calling again: a
    // few 429s per page at most, never a loop against the throttle.
    assert!(vendor.throttled() <= 2 * 9, "{} calls throttled", vendor.throttled());
}

#[tokio::test]
async fn page_number_paging_ending_in_a_404_completes_with_404_empty() {
    // 100 contacts in pages of 50: pages 1 and 2 are full, so the run asks
    // for page 3, which DRF answers 404 "Invalid page.".
    let vendor = Drf::new(100);
    let (addr, _log) = vendor.serve().await;
    let spec = |pipeline: &str, response: &str| {
        PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: {pipeline}\n\
             strategy: {{kind: cursor, next: {{kind: page_number, page_param: page, size_param: page_size, size: 50}}}}\n\
             request: {{url: 'http://{addr}/contacts/', records_pointer: /results, allow: {{loopback: true}}{response}}}\n\
             target: {{dataset: {pipeline}}}\n"
        ))
        .expect("valid spec")
    };
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    // Without the rule, the 404 fails the last page: the run is not complete.
    let summary = runtime.run(&spec("bare", ""), at_six()).await.expect("run");
    assert!(!summary.succeeded() && summary.dead_letters() == 1, "{summary}");
    let alerts = read_alerts(lake.path());
    assert!(alerts.iter().any(|a| a.reason.as_deref().is_some_and(|r| r.contains("404"))), "{alerts:?}");
    // The documented recipe: a 404 is an empty page, which ends the run.
    let summary =
        runtime.run(&spec("recipe", ", response: {status_actions: {404: empty}}"), at_six()).await.expect("run");
    completed(&summary, 100);
    assert_eq!(summary.requests, 3, "pages 1, 2 and the 404: {summary}");
}

/// A DRF token (40 hex digits, as `rest_framework.authtoken` makes them).
const KEY: &str = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b";

#[tokio::test]
async fn a_token_scheme_reaches_the_vendor_and_the_key_no_output() {
    let logs = LogBuffer::new();
    let _guard = logs.capture();
    let vendor = Drf { token: Some(KEY.into()), ..Drf::new(120) };
    let vendor_for_echo = vendor.clone();
    // /denied/ answers 403 quoting the header it got, as a careless vendor does.
    let (addr, log) = serve_echoes(move |echo| match echo.path.as_str() {
        "/denied/" => EchoReply::json(
            403,
            json!({"detail": format!("{} may not read this", echo.headers["authorization"])}).to_string(),
        ),
        _ => vendor_for_echo.answer(echo),
    })
    .await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"drf-key": KEY}).to_string()).expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let auth = ", auth: {kind: bearer, secret_id: drf-key, scheme: Token}";
    let summary = runtime.run(&count_first(addr, "tokened", 50, auth), at_six()).await.expect("run");
    completed(&summary, 120);
    let headers: Vec<String> =
        log.lock().expect("log").iter().map(|e| e.headers.get("authorization").cloned().unwrap_or_default()).collect();
    assert!(!headers.is_empty() && headers.iter().all(|h| *h == format!("Token {KEY}")), "{headers:?}");

    let denied = PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: denied\nstrategy: {{kind: simple}}\n\
         request: {{url: 'http://{addr}/denied/', records_pointer: /results, allow: {{loopback: true}}{auth}}}\n\
         target: {{dataset: denied}}\n"
    ))
    .expect("valid spec");
    let failed = runtime.run(&denied, at_six()).await.expect("run");
    assert_eq!(failed.dead_letters(), 1, "{failed}");
    let alerts = read_alerts(lake.path());
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    // The header the vendor quoted (`Token <key>`) is redacted whole.
    assert!(alerts[0].reason.as_deref().is_some_and(|r| r.contains("<redacted> may not read this")), "{alerts:?}");
    let mut outputs = vec![summary.to_string(), failed.to_string(), logs.text()];
    for alert in &alerts {
        outputs.push(serde_json::to_string(alert).expect("alert"));
        outputs.push(notify::email_text(alert));
        outputs.push(notify::sms_text(alert));
    }
    for entry in std::fs::read_dir(lake.path().join("_dead_letters/request-dlq")).expect("archive") {
        outputs.push(std::fs::read_to_string(entry.expect("entry").path()).expect("read"));
    }
    for text in &outputs {
        assert!(!text.contains(&KEY[..12]), "the key leaked:\n{text}");
    }
}

#[test]
fn the_documented_drf_specs_are_valid_and_say_each_setting() {
    let doc = std::fs::read_to_string(super::template_topology::repo_root().join("docs/request.md")).expect("doc");
    let section = doc.split("## A Django REST Framework vendor").nth(1).expect("the DRF section");
    let section = section.split("\n## ").next().expect("up to the next section");
    let specs: Vec<PipelineSpec> = section
        .split("```yaml\n")
        .skip(1)
        .map(|rest| PipelineSpec::from_yaml(rest.split("```").next().expect("closed")).expect("a valid spec"))
        .collect();
    assert_eq!(specs.len(), 2, "count first, and by page number without a total");
    for spec in &specs {
        let policy = &spec.request.policy;
        let token = contracts::Auth::Bearer { secret_id: "crm-key".into(), scheme: Some("Token".into()) };
        assert_eq!(policy.auth.as_ref(), Some(&token));
        assert_eq!(policy.rate.map(|r| r.calls_per_secs()), Some((100, 60)));
    }
    assert!(specs[0].request.policy.response.status_actions.is_empty(), "count first needs no 404 rule");
    assert_eq!(specs[1].request.policy.response.status_actions.get(&404), Some(&contracts::StatusAction::Empty));
}
