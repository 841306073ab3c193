//! The run's values in every strategy's request (issue 27, item 3): a
//! date-windowed backfill (`tributary run --from/--to`, one run per
//! scheduled time) tells the vendor each run's day and window, through a
//! one-call run, a count-first run's probe and every page, and the
//! incremental cursor placed in the body.

use chrono::{NaiveDate, TimeZone, Utc};
use serde_json::json;

use contracts::spec::PipelineSpec;
use test_support::vendor::{Echo, EchoReply, serve_echoes};
use tributary::runtime::{LocalOptions, LocalRuntime};

/// The query parameters a request carried, decoded.
fn query(echo: &Echo) -> std::collections::BTreeMap<String, String> {
    url::form_urlencoded::parse(echo.query.as_deref().unwrap_or("").as_bytes()).into_owned().collect()
}

fn day(text: &str) -> NaiveDate {
    text.parse().expect("date")
}

#[tokio::test]
async fn a_daily_backfill_binds_each_runs_date_and_window_into_the_vendors_query() {
    let (addr, log) = serve_echoes(|echo| {
        let q = query(echo);
        EchoReply::json(200, json!([{"id": 1, "day": q.get("date")}]).to_string())
    })
    .await;
    let spec = PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: orders\nstrategy: {{kind: simple}}\n\
         schedule: {{expression: 'cron(0 6 * * ? *)'}}\n\
         request: {{url: 'http://{addr}/orders/{{run_date}}', allow: {{loopback: true}}, \
         query: {{date: '{{run_date}}', updated_since: '{{run_start}}', updated_before: '{{run_end}}'}}}}\n\
         target: {{dataset: orders}}\n"
    ))
    .expect("valid spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    // What `tributary run --from 2026-12-01 --to 2026-12-03` does.
    let times = tributary::pipelines::backfill_times(&spec, day("2026-12-01"), day("2026-12-03"), 10).expect("times");
    for time in times {
        let summary = runtime.run(&spec, time).await.expect("run");
        assert!(summary.succeeded(), "{summary}");
    }
    let seen: Vec<(String, String, String, String)> = log
        .lock()
        .expect("log")
        .iter()
        .map(|echo| {
            let q = query(echo);
            (echo.path.clone(), q["date"].clone(), q["updated_since"].clone(), q["updated_before"].clone())
        })
        .collect();
    let expected: Vec<(String, String, String, String)> = [
        ("2026-12-01", "2026-11-30T06:00:00Z", "2026-12-01T06:00:00Z"),
        ("2026-12-02", "2026-12-01T06:00:00Z", "2026-12-02T06:00:00Z"),
        ("2026-12-03", "2026-12-02T06:00:00Z", "2026-12-03T06:00:00Z"),
    ]
    .iter()
    .map(|(d, from, to)| (format!("/orders/{d}"), d.to_string(), from.to_string(), to.to_string()))
    .collect();
    assert_eq!(seen, expected, "each run asks for its own day and window, contiguous and without overlap");
}

#[tokio::test]
async fn a_count_first_runs_probe_and_every_page_carry_the_runs_window() {
    let (addr, log) = serve_echoes(|echo| {
        let q = query(echo);
        let page: u32 = q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
        EchoReply::json(200, json!({"total": 3, "items": [{"id": page, "since": q.get("since")}]}).to_string())
    })
    .await;
    let spec = PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: tickets\nstrategy: {{kind: paged, page_size: 1, total_pointer: /total, \
         params: {{style: page_number}}}}\n\
         request: {{url: 'http://{addr}/tickets', allow: {{loopback: true}}, records_pointer: /items, \
         query: {{since: '{{run_start}}'}}, headers: {{X-Window-End: '{{run_end}}'}}}}\n\
         target: {{dataset: tickets}}\n"
    ))
    .expect("valid spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let at = Utc.with_ymd_and_hms(2026, 12, 5, 0, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, at).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!(summary.records_persisted, 3, "{summary}");
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 4, "the probe and three pages: {log:?}");
    for echo in log.iter() {
        // No schedule: the window is the day before the scheduled time.
        assert_eq!(query(echo)["since"], "2026-12-04T00:00:00Z", "{echo:?}");
        assert_eq!(echo.headers["x-window-end"], "2026-12-05T00:00:00Z", "{echo:?}");
    }
}

#[tokio::test]
async fn the_incremental_cursor_goes_where_the_template_places_it() {
    let (addr, log) = serve_echoes(|_| {
        EchoReply::json(
            200,
            json!([{"id": 1, "updated_at": "2026-12-01T10:00:00Z"}, {"id": 2, "updated_at": "2026-12-02T11:00:00Z"}])
                .to_string(),
        )
    })
    .await;
    let spec = PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: changes\nstrategy: {{kind: simple}}\n\
         request: {{method: POST, url: 'http://{addr}/search', allow: {{loopback: true}}, \
         headers: {{X-Since: '{{cursor}}'}}, body: {{filter: {{updated_after: '{{cursor}}'}}}}}}\n\
         incremental: {{cursor_field: /updated_at, start: '2026-01-01T00:00:00Z'}}\n\
         target: {{dataset: changes}}\n"
    ))
    .expect("valid spec: {cursor} placed, no incremental.param");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    for hour in [6, 7] {
        let at = Utc.with_ymd_and_hms(2026, 12, 5, hour, 0, 0).single().expect("time");
        let summary = runtime.run(&spec, at).await.expect("run");
        assert!(summary.succeeded(), "{summary}");
    }
    let log = log.lock().expect("log");
    let sent: Vec<(&str, Option<&str>)> =
        log.iter().map(|e| (e.headers["x-since"].as_str(), e.query.as_deref())).collect();
    // The first run starts from `start`; the second from the first's highest
    // updated_at. No query parameter is added: the spec names none.
    assert_eq!(sent, [("2026-01-01T00:00:00Z", None), ("2026-12-02T11:00:00Z", None)]);
}
