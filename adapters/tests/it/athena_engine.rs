//! `AthenaEngine` through the real aws-sdk-athena client against moto, with
//! an interceptor that rewrites moto's answers where moto cannot play the
//! part: a FAILED query with its reason, throttled polls, and a result of
//! 2,500 rows served in `NextToken` pages of `MaxResults` (moto returns
//! every row at once and ignores the token). The rewritten bodies go
//! through the SDK's own deserialisers, as Athena's would.
//!
//! Needs moto at `AWS_ENDPOINT_URL`: `scripts/moto.sh install && eval
//! "$(scripts/moto.sh start)"` (`bash .ci/run` does it).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapters::aws::{AthenaEngine, config_loader};
use aws_config::Region;
use aws_sdk_athena::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
};
use aws_sdk_athena::config::{ConfigBag, Credentials, Intercept, RuntimeComponents};
use aws_sdk_athena::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde_json::{Value, json};
use tokio::time::Instant;
use tributary_core::ports::{Query, QueryEngine, QueryState};

const HOW_TO_START: &str = "start moto first: scripts/moto.sh install && eval \"$(scripts/moto.sh start)\"";

/// What the interceptor does to moto's answers.
#[derive(Clone, Debug, Default)]
struct Script {
    /// GetQueryExecution answers FAILED with this reason.
    fail_with: Option<String>,
    /// The first N GetQueryExecution calls answer 400 TooManyRequestsException.
    throttle_polls: usize,
    /// GetQueryResults serves this many data rows, paged by MaxResults/NextToken.
    rows: Option<usize>,
}

#[derive(Debug, Default)]
struct Seen {
    polls: usize,
    throttled: usize,
    last_token: Option<String>,
    last_max_results: Option<i32>,
    result_calls: Vec<Option<String>>,
}

#[derive(Clone, Debug)]
struct FakeAthena {
    script: Script,
    seen: Arc<Mutex<Seen>>,
}

impl Intercept for FakeAthena {
    fn name(&self) -> &'static str {
        "FakeAthena"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        use aws_sdk_athena::operation::get_query_results::GetQueryResultsInput;
        if let Some(input) = context.input().downcast_ref::<GetQueryResultsInput>() {
            let mut seen = self.seen.lock().expect("lock");
            seen.last_token = input.next_token().map(str::to_string);
            seen.last_max_results = input.max_results();
            let token = seen.last_token.clone();
            seen.result_calls.push(token);
        }
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg.load::<Metadata>().map(|m| m.name().to_string()).unwrap_or_default();
        let mut seen = self.seen.lock().expect("lock");
        let replace = |context: &mut BeforeDeserializationInterceptorContextMut<'_>, status: u16, body: Value| {
            let response = context.response_mut();
            *response.status_mut() = StatusCode::try_from(status).expect("status");
            *response.body_mut() = SdkBody::from(body.to_string());
        };
        match operation.as_str() {
            "GetQueryExecution" => {
                seen.polls += 1;
                if seen.throttled < self.script.throttle_polls {
                    seen.throttled += 1;
                    let body = json!({"__type": "TooManyRequestsException", "Message": "Rate exceeded"});
                    replace(context, 400, body);
                } else if let Some(reason) = &self.script.fail_with {
                    let body = json!({"QueryExecution": {"QueryExecutionId": "q", "Status": {
                        "State": "FAILED", "StateChangeReason": reason}}});
                    replace(context, 200, body);
                }
            }
            "GetQueryResults" => {
                if let Some(total) = self.script.rows {
                    let offset: usize = seen.last_token.as_deref().map_or(0, |t| t.parse().expect("our token"));
                    let max = usize::try_from(seen.last_max_results.unwrap_or(1000)).expect("max");
                    // Row 0 of the whole result is the header, as on Athena.
                    let end = (offset + max).min(total + 1);
                    let rows: Vec<Value> = (offset..end)
                        .map(|i| {
                            let text = if i == 0 { "n".to_string() } else { (i - 1).to_string() };
                            json!({"Data": [{"VarCharValue": text}]})
                        })
                        .collect();
                    let mut body = json!({"ResultSet": {"Rows": rows,
                        "ResultSetMetadata": {"ColumnInfo": [{"Name": "n", "Type": "bigint"}]}}});
                    if end < total + 1 {
                        body["NextToken"] = json!(end.to_string());
                    }
                    replace(context, 200, body);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

async fn engine(script: Script) -> (AthenaEngine, Arc<Mutex<Seen>>) {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    assert!(!endpoint.trim().is_empty(), "AWS_ENDPOINT_URL is not set; {HOW_TO_START}");
    let reachable = reqwest::Client::new().get(format!("{}/moto-api/", endpoint.trim_end_matches('/'))).send().await;
    assert!(reachable.is_ok(), "moto at {endpoint} is unreachable; {HOW_TO_START}");
    let config = config_loader()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "tests"))
        .load()
        .await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let client = aws_sdk_athena::Client::from_conf(
        aws_sdk_athena::config::Builder::from(&config).interceptor(FakeAthena { script, seen: seen.clone() }).build(),
    );
    (AthenaEngine::new(client).with_poll_delays(Duration::from_millis(5), Duration::from_millis(20)), seen)
}

fn query() -> Query {
    Query {
        sql: "SELECT n FROM numbers WHERE day = ?".into(),
        parameters: vec!["2026-11-29".into()],
        database: "lake".into(),
        workgroup: None,
        output_location: Some("s3://results/athena/".into()),
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

#[tokio::test]
async fn a_failed_query_reports_its_state_and_reason() {
    let reason = "SYNTAX_ERROR: line 1:8: Column 'nope' cannot be resolved";
    let (engine, _) = engine(Script { fail_with: Some(reason.into()), ..Script::default() }).await;
    let id = engine.start(&query()).await.expect("start");
    let state = engine.wait(&id, soon()).await.expect("wait");
    assert_eq!(state, QueryState::Failed { state: "FAILED".into(), reason: reason.into() });
}

#[tokio::test]
async fn throttled_polls_are_retried_not_reported() {
    let (engine, seen) = engine(Script { throttle_polls: 7, ..Script::default() }).await;
    let id = engine.start(&query()).await.expect("start");
    let state = engine.wait(&id, soon()).await.expect("wait");
    assert_eq!(state, QueryState::Succeeded);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.throttled, 7);
    assert!(seen.polls > 7, "polled again after the throttling: {}", seen.polls);
}

#[tokio::test]
async fn a_deadline_before_the_query_ends_reports_running() {
    let (engine, _) = engine(Script { throttle_polls: 1_000, ..Script::default() }).await;
    let id = engine.start(&query()).await.expect("start");
    let state = engine.wait(&id, Instant::now() + Duration::from_millis(200)).await.expect("wait");
    assert!(matches!(state, QueryState::Running { .. }), "{state:?}");
}

#[tokio::test]
async fn pages_of_2500_rows_follow_next_token_and_skip_the_header_once() {
    let (engine, seen) = engine(Script { rows: Some(2_500), ..Script::default() }).await;
    let id = engine.start(&query()).await.expect("start");
    assert_eq!(engine.wait(&id, soon()).await.expect("wait"), QueryState::Succeeded);
    let mut token: Option<String> = None;
    let mut values = Vec::new();
    let mut pages = 0;
    loop {
        let page = engine.page(&id, token.as_deref()).await.expect("page");
        pages += 1;
        assert_eq!(page.columns, ["n"]);
        values.extend(page.rows.iter().map(|row| row["n"].as_u64().expect("bigint typed as a number")));
        match page.next_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3, "1000-row pages: header + 999, 1000, 501");
    assert_eq!(values, (0..2_500).collect::<Vec<u64>>(), "every row once, the header skipped once");
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.result_calls, [None, Some("1000".to_string()), Some("2000".to_string())]);
    assert_eq!(seen.last_max_results, Some(1000));
}
