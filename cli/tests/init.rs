//! `tributary init URL` then `tributary run SPEC`, as a new user goes from a
//! vendor endpoint to a completed run: against a loopback vendor of each
//! paging form the spec supports, the spec init writes runs and lands every
//! record exactly once (counted in the lake by `tributary query`); a vendor
//! init cannot classify, and each bad input, is one line on stderr, exit
//! non-zero, and no file written.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use test_support::vendor::{Echo, EchoReply, serve_echoes};

/// Records every vendor here serves: ids 0..23, three pages of 10.
const TOTAL: usize = 23;
/// Records per page when the vendor decides.
const PAGE: usize = 10;

fn record(i: usize) -> Value {
    json!({"id": i, "name": format!("record {i}"), "updatedAt": format!("2026-03-{:02}T10:00:00Z", i % 28 + 1)})
}

fn records(from: usize, count: usize) -> Vec<Value> {
    (from..TOTAL.min(from + count)).map(record).collect()
}

fn query(echo: &Echo) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(echo.query.as_deref().unwrap_or("").as_bytes()).into_owned().collect()
}

fn number(query: &BTreeMap<String, String>, name: &str, default: usize) -> usize {
    query.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn tributary(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tributary"));
    command.current_dir(dir).env_remove("RUST_LOG");
    command
}

/// Runs `command` off the runtime's threads (the vendor answers on them).
async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("run tributary")).await.expect("join")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tributary init URL --allow-loopback --out spec.yaml` in `dir`, plus `extra`.
async fn init(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let mut command = tributary(dir);
    command.args(["init", url, "--allow-loopback", "--out", "spec.yaml"]).args(extra);
    output(command).await
}

/// Init, validate, run into a fresh lake, and count the dataset's rows and
/// distinct ids; returns init's stdout.
async fn init_and_run(url: &str, dataset: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let inited = init(dir.path(), url, &[&["--dataset", dataset], extra].concat()).await;
    let stdout = text(&inited.stdout);
    assert!(inited.status.success(), "init failed:\n{stdout}\n{}", text(&inited.stderr));
    let spec = dir.path().join("spec.yaml");
    assert!(spec.is_file(), "{stdout}");

    let mut validate = tributary(dir.path());
    validate.args(["validate", "spec.yaml"]);
    let validated = output(validate).await;
    assert!(validated.status.success(), "validate: {}", text(&validated.stderr));

    let mut run = tributary(dir.path());
    run.args(["run", "spec.yaml", "--lake", "lake"]);
    let ran = output(run).await;
    assert!(ran.status.success(), "run failed:\n{}\n{}\n{stdout}", text(&ran.stdout), text(&ran.stderr));

    let mut count = tributary(dir.path());
    count.args(["query", "--lake", "lake", &format!("SELECT count(*) AS n, count(DISTINCT id) AS ids FROM {dataset}")]);
    let counted = output(count).await;
    assert!(counted.status.success(), "query: {}", text(&counted.stderr));
    assert_eq!(
        counts(&counted),
        json!({"n": TOTAL, "ids": TOTAL}),
        "every record exactly once:\n{stdout}\n{}",
        text(&ran.stdout)
    );
    stdout
}

/// The one row `tributary query` printed.
fn counts(output: &Output) -> Value {
    serde_json::from_str(text(&output.stdout).trim()).unwrap_or_else(|_| json!(text(&output.stdout)))
}

/// A vendor answering `answer(echo)` on loopback, and its base URL.
async fn vendor<F>(answer: F) -> String
where
    F: Fn(&Echo) -> EchoReply + Send + Sync + 'static,
{
    let (addr, _log) = serve_echoes(answer).await;
    format!("http://{addr}")
}

fn ok(body: Value) -> EchoReply {
    EchoReply::json(200, body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_and_a_total_in_the_body_become_a_count_first_spec() {
    let base = vendor(|echo| {
        let q = query(echo);
        ok(json!({"meta": {"total": TOTAL}, "results": records(number(&q, "offset", 0), number(&q, "limit", PAGE))}))
    })
    .await;
    let stdout = init_and_run(&format!("{base}/records?offset=0&limit=10"), "records_offset", &[]).await;
    assert!(stdout.contains("kind: paged") && stdout.contains("total_pointer: /meta/total"), "{stdout}");
    assert!(stdout.contains("style: offset_limit"), "{stdout}");
    assert!(stdout.contains("records_pointer: /results"), "{stdout}");
    assert!(stdout.contains("proved     page 2 (GET"), "{stdout}");
    assert!(stdout.contains("updated_at  timestamp(us, UTC)  from key \"updatedAt\""), "the table is shown:\n{stdout}");
    assert!(stdout.contains("# incremental:") && stdout.contains("cursor_field: /updatedAt"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_numbers_and_x_total_count_become_a_count_first_spec_reading_the_header() {
    let base = vendor(|echo| {
        let q = query(echo);
        let (page, size) = (number(&q, "page", 1), number(&q, "per_page", PAGE));
        ok(json!(records((page - 1) * size, size))).with_header("x-total-count", TOTAL.to_string())
    })
    .await;
    let stdout = init_and_run(&format!("{base}/items?page=1&per_page=10"), "items_pages", &[]).await;
    assert!(stdout.contains("total_header: x-total-count") && stdout.contains("style: page_number"), "{stdout}");
    assert!(stdout.contains("the body itself, an array of 10 objects"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_django_rest_framework_count_and_next_link_become_count_first_page_numbers() {
    let base = vendor(|echo| {
        let page = number(&query(echo), "page", 1);
        let pages = TOTAL.div_ceil(PAGE);
        if page == 0 || page > pages {
            return EchoReply::json(404, r#"{"detail": "Invalid page."}"#);
        }
        let host = echo.headers.get("host").cloned().unwrap_or_default();
        let link = |p: usize| format!("http://{host}/contacts/?page={p}");
        ok(json!({
            "count": TOTAL,
            "next": (page < pages).then(|| link(page + 1)),
            "previous": (page > 1).then(|| link(page - 1)),
            "results": records((page - 1) * PAGE, PAGE),
        }))
    })
    .await;
    let stdout = init_and_run(&format!("{base}/contacts/"), "contacts", &[]).await;
    let params = "params: {style: page_number, page_param: page, size_param: null, first_page: 1}";
    assert!(stdout.contains("total_pointer: /count") && stdout.contains(params), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_header_becomes_a_link_header_cursor() {
    let base = vendor(|echo| {
        let page = number(&query(echo), "page", 1);
        let host = echo.headers.get("host").cloned().unwrap_or_default();
        let mut reply = ok(json!(records((page - 1) * PAGE, PAGE)));
        if page * PAGE < TOTAL {
            let next = format!(
                "<http://{host}/repos?page={}>; rel=\"next\", <http://{host}/repos?page=3>; rel=\"last\"",
                page + 1
            );
            reply = reply.with_header("link", next);
        }
        reply
    })
    .await;
    let stdout = init_and_run(&format!("{base}/repos"), "repos", &[]).await;
    assert!(stdout.contains("next: {kind: link_header}"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_url_in_the_body_becomes_a_body_url_cursor() {
    let base = vendor(|echo| {
        let after = number(&query(echo), "after", 0);
        let next = (after + PAGE < TOTAL).then(|| format!("/events?after={}", after + PAGE));
        ok(json!({"data": records(after, PAGE), "links": {"self": "/events", "next": next}}))
    })
    .await;
    let stdout = init_and_run(&format!("{base}/events"), "events_links", &[]).await;
    assert!(stdout.contains("next: {kind: body_url, pointer: /links/next}"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_body_becomes_a_body_token_cursor() {
    let base = vendor(|echo| {
        let q = query(echo);
        let from = q.get("cursor").and_then(|c| c.strip_prefix("c")).and_then(|n| n.parse().ok()).unwrap_or(0);
        let next = (from + PAGE < TOTAL).then(|| format!("c{}", from + PAGE));
        ok(json!({"items": records(from, PAGE), "meta": {"next_cursor": next}}))
    })
    .await;
    let stdout = init_and_run(&format!("{base}/changes"), "changes", &[]).await;
    assert!(stdout.contains("next: {kind: body_token, pointer: /meta/next_cursor, param: cursor}"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn has_more_and_string_ids_become_a_last_record_cursor() {
    let base = vendor(|echo| {
        let q = query(echo);
        let limit = number(&q, "limit", PAGE);
        let from = q.get("starting_after").and_then(|id| id.strip_prefix("cus_")).and_then(|n| n.parse::<usize>().ok());
        let from = from.map_or(0, |n| n + 1);
        let data: Vec<Value> = records(from, limit)
            .into_iter()
            .map(|mut r| {
                r["id"] = json!(format!("cus_{}", r["id"]));
                r
            })
            .collect();
        ok(json!({"object": "list", "url": "/v1/customers", "has_more": from + limit < TOTAL, "data": data}))
    })
    .await;
    // Stripe's ids are text, counted as such.
    let stdout = init_and_run(&format!("{base}/v1/customers?limit=10"), "customers", &[]).await;
    let next = "next: {kind: last_record, pointer: /id, param: starting_after, has_more: /has_more}";
    assert!(stdout.contains(next), "{stdout}");
    assert!(stdout.contains("/v1/customers?limit=10\""), "the fixed limit stays:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndjson_with_offsets_in_the_url_becomes_a_numbered_cursor() {
    let base = vendor(|echo| {
        let q = query(echo);
        let lines: Vec<String> =
            records(number(&q, "offset", 0), number(&q, "limit", PAGE)).iter().map(Value::to_string).collect();
        EchoReply {
            status: 200,
            headers: vec![("content-type".into(), "application/x-ndjson".into())],
            body: lines.join("\n") + "\n",
        }
    })
    .await;
    let stdout = init_and_run(&format!("{base}/export?offset=0&limit=10"), "export", &[]).await;
    assert!(stdout.contains("NDJSON, one record a line"), "{stdout}");
    assert!(stdout.contains("next: {kind: offset, offset_param: offset, limit_param: limit, limit: 10}"), "{stdout}");
    assert!(!stdout.contains("records_pointer:"), "NDJSON has no records pointer:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_paging_shown_becomes_a_simple_spec() {
    let base = vendor(|_| ok(json!({"data": records(0, TOTAL)}))).await;
    let stdout = init_and_run(&format!("{base}/all"), "all_records", &[]).await;
    assert!(stdout.contains("kind: simple"), "{stdout}");
    assert!(stdout.contains("not proved: a simple run makes one call, so there is no page 2 to compare"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_secret_is_used_by_id_and_never_shown() {
    const SECRET: &str = "s3cr3t-token-value-42";
    let base = vendor(|echo| {
        if echo.headers.get("authorization").map(String::as_str) != Some(&format!("Bearer {SECRET}")) {
            return EchoReply::json(401, r#"{"detail": "no"}"#).with_header("www-authenticate", "Bearer");
        }
        let q = query(echo);
        ok(json!({"total": TOTAL, "offset": number(&q, "offset", 0), "limit": number(&q, "limit", PAGE),
                  "items": records(number(&q, "offset", 0), number(&q, "limit", PAGE))}))
    })
    .await;
    let url = format!("{base}/secure");
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = init(dir.path(), &url, &[]).await;
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("HTTP 401") && stderr.contains("--auth bearer --secret ID"), "{stderr}");

    let mut command = tributary(dir.path());
    command
        .args(["init", &url, "--allow-loopback", "--out", "spec.yaml", "--auth", "bearer", "--secret", "vendor-token"])
        .env("TRIBUTARY_SECRET_VENDOR_TOKEN", SECRET);
    let inited = output(command).await;
    let stdout = text(&inited.stdout);
    assert!(inited.status.success(), "{stdout}{}", text(&inited.stderr));
    assert!(stdout.contains("auth: {kind: bearer, secret_id: vendor-token}"), "{stdout}");
    assert!(stdout.contains("style: offset_limit") && stdout.contains("as the body echoes them"), "{stdout}");
    let spec = std::fs::read_to_string(dir.path().join("spec.yaml")).expect("spec");
    for shown in [&stdout, &text(&inited.stderr), &spec] {
        assert!(!shown.contains(SECRET), "the secret is never shown:\n{shown}");
    }
    let mut run = tributary(dir.path());
    run.args(["run", "spec.yaml", "--lake", "lake"]).env("TRIBUTARY_SECRET_VENDOR_TOKEN", SECRET);
    let ran = output(run).await;
    assert!(ran.status.success(), "{}{}", text(&ran.stdout), text(&ran.stderr));
    assert!(!text(&ran.stdout).contains(SECRET));
}

/// A vendor whose first answer is a 429 with `Retry-After: secs`, then
/// every record in one page; its base URL and its count of calls.
async fn throttled_once(secs: u64) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let base = vendor(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return EchoReply::json(429, r#"{"detail": "slow down"}"#).with_header("retry-after", secs.to_string());
        }
        ok(json!({"data": records(0, TOTAL)}))
    })
    .await;
    (base, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_is_waited_out() {
    let (base, _) = throttled_once(1).await;
    let started = std::time::Instant::now();
    let stdout = init_and_run(&format!("{base}/throttled"), "throttled", &[]).await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "the pause is honoured");
    assert!(stdout.contains("kind: simple"), "{stdout}");
}

/// A long pause is said once on stderr when no progress bar shows it (a
/// trial finding: `Retry-After: 3600` looked like a hung run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_pause_is_said_on_stderr() {
    // Past Request's 30 s waited inside an invocation
    // (`MAX_RETRY_AFTER_SECS`): the page is held in its queue.
    let (base, calls) = throttled_once(31).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = format!(
        "version: 1\npipeline: paused\nstrategy: {{kind: simple}}\n\
         request: {{url: '{base}/x', records_pointer: /data, allow: {{loopback: true}}}}\ntarget: {{dataset: paused}}\n"
    );
    std::fs::write(dir.path().join("spec.yaml"), spec).expect("write spec");
    let mut run = tributary(dir.path());
    run.args(["run", "spec.yaml", "--lake", "lake"]);
    let ran = output(run).await;
    let stderr = text(&ran.stderr);
    assert!(ran.status.success(), "{stderr}\n{}", text(&ran.stdout));
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("the vendor asked for a pause")).collect();
    assert_eq!(said.len(), 1, "said once:\n{stderr}");
    assert!(said[0].contains("calling again in 3") && said[0].contains("Ctrl-C"), "{stderr}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "called again after the pause");
}

/// Init against `url` fails with one line on stderr holding each of
/// `expected`, exit non-zero, and writes nothing in its folder.
async fn fails(url: &str, extra: &[&str], expected: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = tributary(dir.path());
    command.args(["init", url, "--out", "spec.yaml"]).args(extra);
    let failed = output(command).await;
    let stderr = text(&failed.stderr);
    assert!(!failed.status.success(), "must fail: {}", text(&failed.stdout));
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line:\n{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    for part in expected {
        assert!(stderr.contains(part), "stderr should name {part:?}:\n{stderr}");
    }
    let written: Vec<PathBuf> = std::fs::read_dir(dir.path()).expect("dir").map(|e| e.expect("entry").path()).collect();
    assert!(written.is_empty(), "nothing written: {written:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendor_it_cannot_classify_is_said_so() {
    // A total beyond page 1, and no way shown to page 2: every guess gets page 1 again.
    let base = vendor(|_| ok(json!({"total": TOTAL, "items": records(0, PAGE)}))).await;
    fails(&format!("{base}/opaque"), &["--allow-loopback"], &["cannot classify", "the body's total 23 at /total"])
        .await;
    // A total in Content-Range only, which a spec cannot read.
    let range =
        vendor(|_| ok(json!(records(0, PAGE))).with_header("content-range", format!("items 0-9/{TOTAL}"))).await;
    fails(&format!("{range}/ranged"), &["--allow-loopback"], &["cannot classify", "Content-Range"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_one_line_naming_the_cause_and_write_nothing() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        drop(listener);
        addr
    };
    fails(&format!("http://{closed}/x"), &["--allow-loopback"], &["cannot reach the vendor", "connection"]).await;

    let base = vendor(|echo| match echo.path.as_str() {
        "/text" => EchoReply {
            status: 200,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: "hello, world".into(),
        },
        "/login" => EchoReply {
            status: 200,
            headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
            body: "<!DOCTYPE html><html><form action=/session><input name=login><input type=password></form></html>"
                .into(),
        },
        "/unauthorized" => {
            EchoReply::json(401, r#"{"error": "unauthorized"}"#).with_header("www-authenticate", "Basic realm=api")
        }
        "/forbidden" => EchoReply::json(403, r#"{"error": "forbidden"}"#),
        "/missing" => EchoReply::json(404, r#"{"error": "no such thing"}"#),
        "/repeats" => {
            // A next link the vendor ignores: page 2 is page 1 again.
            let host = echo.headers.get("host").cloned().unwrap_or_default();
            ok(json!(records(0, PAGE))).with_header("link", format!("<http://{host}/repeats?page=2>; rel=\"next\""))
        }
        _ => ok(json!({"data": records(0, 3)})),
    })
    .await;
    let loopback = ["--allow-loopback"];
    fails(&format!("{base}/text"), &loopback, &["not JSON", "hello, world"]).await;
    fails(&format!("{base}/login"), &loopback, &["an HTML page (a login page)", "--auth"]).await;
    fails(&format!("{base}/unauthorized"), &loopback, &["HTTP 401", "--auth basic --secret ID", "--auth api_key"])
        .await;
    fails(&format!("{base}/forbidden"), &loopback, &["HTTP 403", "--auth bearer"]).await;
    fails(&format!("{base}/missing"), &loopback, &["HTTP 404", "no such thing"]).await;
    fails(&format!("{base}/repeats"), &loopback, &["page 2 repeats page 1", "rel=\"next\""]).await;
    fails(&format!("{base}/fine"), &[], &["SSRF guard", "--allow-loopback"]).await;
    fails(
        &format!("{base}/fine?api_key=k"),
        &loopback,
        &["credential", "--auth api_key --secret ID --query-param api_key"],
    )
    .await;
    fails("not a url", &[], &["is not a URL"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_spec_is_kept_unless_forced() {
    let base = vendor(|_| ok(json!({"data": records(0, 3)}))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("spec.yaml"), "mine").expect("write");
    let refused = init(dir.path(), &format!("{base}/all"), &[]).await;
    assert!(!refused.status.success() && text(&refused.stderr).contains("--force"), "{}", text(&refused.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("spec.yaml")).expect("read"), "mine");
    let forced = init(dir.path(), &format!("{base}/all"), &["--force"]).await;
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    // Without --out the file is named after the URL's last segment.
    let mut named = tributary(dir.path());
    named.args(["init", &format!("{base}/v1/Customer-List"), "--allow-loopback"]);
    let named = output(named).await;
    assert!(named.status.success(), "{}", text(&named.stderr));
    assert!(dir.path().join("customer_list.yaml").is_file(), "{}", text(&named.stdout));
}

/// A trial finding: init refused a sample holding `1e400` (beyond a 64-bit
/// float) as not JSON, while `tributary run` of the same vendor
/// quarantines that one record. Init now samples it as run reads it: the
/// spec is written, and the run keeps the other records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_beyond_a_float_in_the_sample_is_no_reason_to_refuse() {
    let body = {
        let mut records: Vec<String> = records(0, TOTAL).iter().map(Value::to_string).collect();
        records[3] = r#"{"id": 3, "name": "record 3", "amount": 1e400}"#.into();
        format!(r#"{{"data": [{}]}}"#, records.join(","))
    };
    let base = vendor(move |_| EchoReply::json(200, body.clone())).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let inited = init(dir.path(), &format!("{base}/all"), &["--dataset", "huge"]).await;
    assert!(inited.status.success(), "init: {}\n{}", text(&inited.stdout), text(&inited.stderr));
    let mut run = tributary(dir.path());
    run.args(["run", "spec.yaml", "--lake", "lake"]);
    let ran = output(run).await;
    let stdout = text(&ran.stdout);
    assert!(ran.status.success(), "{stdout}\n{}", text(&ran.stderr));
    assert!(stdout.contains(&format!("records persisted    {}", TOTAL - 1)), "{stdout}");
    assert!(stdout.contains("records quarantined  1"), "{stdout}");
    // Where it is, with its reason (a trial found only the count).
    let line = stdout.lines().find(|line| line.contains("records quarantined")).unwrap_or_default();
    let key = line.split("each with its reason: ").nth(1).and_then(|rest| rest.split(',').next()).unwrap_or_default();
    assert!(key.starts_with("quarantine/huge/"), "{line}");
    let quarantined = std::fs::read_to_string(dir.path().join("lake").join(key)).expect("the file the summary names");
    assert!(quarantined.contains("1e400"), "{quarantined}");
}
