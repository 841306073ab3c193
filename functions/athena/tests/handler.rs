//! The Athena function's handler over a scripted engine (the port's
//! contract: start, wait, page with tokens) and the real local broker:
//! continuation across invocations, FAILED queries, repeated tokens.

use std::sync::Mutex;
use std::time::Duration;

use adapters::local::{Broker, QueueConfig, Subscription};
use async_trait::async_trait;
use contracts::{Destination, QueryMessage, QueryRow, RunId, V1};
use serde_json::json;
use test_support::queues::drain;
use tokio::time::Instant;
use tributary_core::ports::{PortError, Query, QueryEngine, QueryState, ResultPage};

/// Serves `total` rows `{"n": i}` in pages of `page_rows`, tokens being the
/// next offset; optionally fails, stays running, or repeats a token.
struct ScriptedEngine {
    total: usize,
    page_rows: usize,
    state: QueryState,
    repeat_token: bool,
    /// A row whose `blob` is 300,000 bytes, past the 256 KiB message limit.
    wide_row: Option<usize>,
    started: Mutex<Vec<Query>>,
}

impl ScriptedEngine {
    fn new(total: usize, page_rows: usize) -> Self {
        Self {
            total,
            page_rows,
            state: QueryState::Succeeded,
            repeat_token: false,
            wide_row: None,
            started: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl QueryEngine for ScriptedEngine {
    async fn start(&self, query: &Query) -> Result<String, PortError> {
        self.started.lock().expect("lock").push(query.clone());
        Ok("exec-1".into())
    }

    async fn wait(&self, _: &str, _: Instant) -> Result<QueryState, PortError> {
        Ok(self.state.clone())
    }

    async fn page(&self, _: &str, token: Option<&str>) -> Result<ResultPage, PortError> {
        let offset: usize = token.map_or(0, |t| t.parse().expect("our token"));
        let end = (offset + self.page_rows).min(self.total);
        let row = |n: usize| match self.wide_row {
            Some(wide) if wide == n => json!({ "n": n, "blob": "x".repeat(300_000) }),
            _ => json!({ "n": n }),
        };
        let rows = (offset..end).map(|n| row(n).as_object().cloned().unwrap_or_default()).collect();
        let next_token =
            if self.repeat_token { Some("7".to_string()) } else { (end < self.total).then(|| end.to_string()) };
        Ok(ResultPage { columns: vec!["n".into()], rows, next_token })
    }
}

fn broker() -> Broker {
    let broker = Broker::new();
    for name in ["athena", "rows", "athena-dlq"] {
        broker.create_queue(QueueConfig {
            name: name.into(),
            visibility_timeout: Duration::from_secs(60),
            max_message_bytes: 262_144,
            redrive: None,
        });
    }
    broker.create_topic(
        "query-results",
        vec![Subscription::Queue { queue: "rows".into(), raw: true, filter: Default::default() }],
    );
    broker
}

fn message() -> QueryMessage {
    QueryMessage {
        version: V1,
        pipeline: "tx".into(),
        run_id: RunId::new("20261129T060000Z").expect("id"),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        sql: "SELECT n FROM numbers WHERE dt = ?".into(),
        parameters: vec!["2026-11-29".into()],
        database: "lake".into(),
        workgroup: Some("wg".into()),
        output_location: None,
        reply_to: Destination::Topic { topic: "query-results".into() },
        context: json!({"spec": "echoed"}),
        required_columns: Vec::new(),
        continuation: None,
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

#[tokio::test]
async fn a_large_result_continues_across_invocations_without_gaps_or_duplicates() {
    let broker = broker();
    let engine = ScriptedEngine::new(2_500, 1_000);
    let mut config = athena::AthenaConfig::new("athena");
    config.max_rows_per_invocation = 1_000;
    config.safety_margin = Duration::ZERO;
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };

    let mut next = Some(message());
    let mut invocations = 0;
    while let Some(message) = next.take() {
        invocations += 1;
        let progress = athena::run_query(message, soon(), deps).await.expect("query");
        assert!(progress.rows_published <= 1_000);
        next = drain(&broker, "athena").pop().map(|body| serde_json::from_str(&body).expect("continuation"));
    }
    assert_eq!(invocations, 3);
    let started = engine.started.lock().expect("lock");
    assert_eq!(started.len(), 1, "continuations reuse the execution, never restart the query");
    assert_eq!(started[0].parameters, ["2026-11-29"]);
    assert_eq!(started[0].workgroup.as_deref(), Some("wg"));

    let rows: Vec<QueryRow> = drain(&broker, "rows").iter().map(|b| serde_json::from_str(b).expect("row")).collect();
    let indexes: Vec<u64> = rows.iter().map(|r| r.row_index).collect();
    assert_eq!(indexes, (0..2_500).collect::<Vec<u64>>());
    assert!(rows.iter().all(|r| r.row["n"].as_u64() == Some(r.row_index) && r.context == json!({"spec": "echoed"})));
}

#[tokio::test]
async fn a_query_still_running_at_the_deadline_continues_later() {
    let broker = broker();
    let mut engine = ScriptedEngine::new(10, 10);
    engine.state = QueryState::Running { state: "RUNNING".into() };
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let progress = athena::run_query(message(), soon(), deps).await.expect("continues");
    assert_eq!(progress.rows_published, 0);
    let continuation: QueryMessage = serde_json::from_str(&drain(&broker, "athena")[0]).expect("continuation");
    let c = continuation.continuation.expect("continuation set");
    assert_eq!((c.execution_id.as_str(), c.next_token, c.next_row), ("exec-1", None, 0));
}

#[tokio::test]
async fn failed_queries_and_repeated_tokens_are_errors_with_the_reason() {
    let broker = broker();
    let mut engine = ScriptedEngine::new(10, 10);
    engine.state = QueryState::Failed { state: "FAILED".into(), reason: "TABLE_NOT_FOUND: numbers".into() };
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let err = athena::run_query(message(), soon(), deps).await.expect_err("failed").to_string();
    assert!(err.contains("FAILED") && err.contains("TABLE_NOT_FOUND: numbers") && err.contains("exec-1"), "{err}");

    let mut engine = ScriptedEngine::new(30, 10);
    engine.repeat_token = true;
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let err = athena::run_query(message(), soon(), deps).await.expect_err("loop").to_string();
    assert!(err.contains("returned page token \"7\" twice"), "{err}");
}

#[tokio::test]
async fn an_empty_result_publishes_nothing_and_succeeds() {
    let broker = broker();
    let engine = ScriptedEngine::new(0, 10);
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let progress = athena::run_query(message(), soon(), deps).await.expect("query");
    assert_eq!(progress, athena::Progress { rows_published: 0, continued: None });
    assert!(drain(&broker, "rows").is_empty());
}

#[tokio::test]
async fn a_row_too_wide_for_one_message_is_dead_lettered_alone_and_the_others_are_published() {
    let broker = broker();
    let mut engine = ScriptedEngine::new(5, 10);
    engine.wide_row = Some(2);
    let mut config = athena::AthenaConfig::new("athena");
    config.dead_letter =
        Some(tributary_core::batch::DeadLetterTarget { dlq: "athena-dlq".into(), max_receive_count: 5 });
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let progress = athena::run_query(message(), soon(), deps).await.expect("the query succeeds");
    assert_eq!(progress.rows_published, 5, "rows handled: 4 published, 1 dead-lettered");
    let rows: Vec<QueryRow> = drain(&broker, "rows").iter().map(|b| serde_json::from_str(b).expect("row")).collect();
    assert_eq!(rows.iter().map(|r| r.row_index).collect::<Vec<_>>(), [0, 1, 3, 4]);
    let dead = broker.receive("athena-dlq", 10).expect("receive");
    assert_eq!(dead.len(), 1);
    let reason = dead[0].message_attributes["tributary-error"].string_value.clone().unwrap_or_default();
    assert!(
        reason.starts_with("row 2 of query exec-1 is a message of 300") && reason.contains("262144-byte"),
        "{reason}"
    );
    let body: serde_json::Value = serde_json::from_str(dead[0].body.as_deref().expect("body")).expect("JSON");
    assert_eq!((body["pipeline"].as_str(), body["oversize_row"]["row_index"].as_u64()), (Some("tx"), Some(2)));

    // Without a DLQ the page fails, naming the row, as before.
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let err = athena::run_query(message(), soon(), deps).await.expect_err("no DLQ").to_string();
    assert!(err.contains("row 2 of query exec-1") && err.contains("262144"), "{err}");
}

/// A pipeline whose request template binds `{customer_id}` from rows that
/// answer only `n` (a trial's finding: 25 rows made 25 dead letters): the
/// query fails once, naming the column it lacks and the ones it has, no row
/// is published and no count is recorded; with the column there, every row
/// is published.
#[tokio::test]
async fn a_result_without_a_required_column_fails_the_query_once_and_publishes_no_row() {
    let broker = broker();
    let engine = ScriptedEngine::new(25, 10);
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let wrong = QueryMessage { required_columns: vec!["customer_id".into(), "n".into()], ..message() };
    let err = athena::run_query(wrong, soon(), deps).await.expect_err("a missing column");
    assert!(
        matches!(&err, athena::AthenaError::MissingColumns { missing, .. } if missing == &["customer_id"]),
        "{err}"
    );
    assert!(tributary_core::batch::RecordError::is_permanent(&err), "dead-lettered with an alert: {err}");
    let text = err.to_string();
    assert!(text.contains("\"customer_id\"") && text.contains("[\"n\"]") && text.contains("AS customer_id"), "{text}");
    assert!(drain(&broker, "rows").is_empty(), "no row published");

    let right = QueryMessage { required_columns: vec!["n".into()], ..message() };
    let progress = athena::run_query(right, soon(), deps).await.expect("every column there");
    assert_eq!(progress.rows_published, 25);
    assert_eq!(drain(&broker, "rows").len(), 25);
}

/// A trial: a re-run of a fan-out run ran its `SELECT DISTINCT id` again,
/// whose rows came back in another order, so pages already persisted were
/// bound to other customers (orders stored twice, others lost). The query
/// runs ordered by the template's columns; without any, as written.
#[tokio::test]
async fn the_query_runs_ordered_by_the_templates_columns() {
    let broker = broker();
    let engine = ScriptedEngine::new(3, 10);
    let config = athena::AthenaConfig::new("athena");
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: None };
    let message = QueryMessage { required_columns: vec!["n".into()], ..message() };
    athena::run_query(message, soon(), deps).await.expect("published");
    let started = engine.started.lock().expect("lock").clone();
    assert_eq!(
        started[0].sql, "SELECT * FROM (\nSELECT n FROM numbers WHERE dt = ?\n) AS tributary_rows ORDER BY \"n\"",
        "ordered"
    );
    assert_eq!(started[0].parameters, ["2026-11-29"], "the parameters as they were");
    assert_eq!(
        athena::in_stable_order("SELECT \"a\"\"b\" FROM t -- ids\n;", &["a\"b".into()]),
        "SELECT * FROM (\nSELECT \"a\"\"b\" FROM t -- ids\n) AS tributary_rows ORDER BY \"a\"\"b\"",
        "a trailing comment stays one, a trailing semicolon goes, a quote in a name is doubled"
    );
    assert_eq!(athena::in_stable_order("SELECT 1;", &[]), "SELECT 1;", "nothing bound: as written");
}

/// A trial: the re-run of a 2,000-customer fan-out run that failed on one
/// customer called the vendor 2,000 times. The rows whose page holds a
/// receipt are not published again: here pages 0, 2 and 4 of 5.
#[tokio::test]
async fn a_rerun_publishes_only_the_rows_whose_page_is_missing() {
    let broker = broker();
    let engine = ScriptedEngine::new(5, 10);
    let config = athena::AthenaConfig::new("athena");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = adapters::local::DirStore::new(dir.path());
    let message = QueryMessage { required_columns: vec!["n".into()], ..message() };
    for page in [0, 2, 4] {
        let key = tributary_core::keys::receipt_key(&message.pipeline, &message.run_id, page);
        tributary_core::ports::ObjectStore::put(&store, &key, "{}".into()).await.expect("receipt");
    }
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = athena::Deps { engine: &engine, topics: &broker, queue: &broker, config: &config, ledger: Some(ledger) };
    let progress = athena::run_query(message, soon(), deps).await.expect("published");
    let rows: Vec<QueryRow> = drain(&broker, "rows").iter().map(|b| serde_json::from_str(b).expect("row")).collect();
    let indexes: Vec<u64> = rows.iter().map(|r| r.row_index).collect();
    assert_eq!(indexes, [1, 3], "only the missing pages' rows");
    assert_eq!(rows[0].row["n"], json!(1), "each row under its own index");
    assert_eq!(progress.rows_published, 5, "the result's rows, as counted for continuations");
}
