//! Round trips, version refusal and schema freshness.

use chrono::NaiveDate;
use serde_json::json;

use super::*;

fn run_id() -> RunId {
    RunId::new("20261129T060000Z").expect("valid")
}

fn date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid")
}

fn round_trip<T>(message: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = encode(message).expect("encode");
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(value["version"], 1, "{text}");
    let back: T = decode(value).expect("decode");
    assert_eq!(&back, message);
}

pub(crate) fn request_message() -> RequestMessage {
    RequestMessage {
        version: V1,
        pipeline: "customers".into(),
        run_id: run_id(),
        run_date: date(),
        page: Some(PageRef { index: 2, count: 5 }),
        http: HttpCall {
            method: HttpMethod::Post,
            url: url::Url::parse("https://api.example.com/v1/customers").expect("url"),
            query: [("offset".to_string(), "100".to_string())].into(),
            headers: [("accept".to_string(), "application/json".to_string())].into(),
            body: Some(json!({"filter": {"active": true}})),
        },
        policy: Default::default(),
        mode: RequestMode::Records {
            records_pointer: Some("/items".into()),
            target: PersistTarget::new("customers"),
            next: None,
            planned_total: None,
            cursor_field: None,
        },
        reply_to: Destination::Queue { queue: "persist".into() },
    }
}

#[test]
fn every_contract_round_trips() {
    round_trip(&request_message());
    let mut probe = request_message();
    probe.page = None;
    probe.mode = RequestMode::Probe {
        total_pointer: "/total".into(),
        total_header: None,
        context: json!({"k": [1, 2]}),
        records_pointer: Some("/items".into()),
    };
    probe.reply_to = Destination::Topic { topic: "arn:aws:sns:us-east-1:1:t".into() };
    round_trip(&probe);
    for payload in [
        Payload::Inline { records: RawRecords::from_values(&[json!({"id": 1}), json!({"id": 2.5})]).expect("records") },
        Payload::Object { key: "_claims/x".into(), format: Default::default() },
    ] {
        round_trip(&PersistMessage {
            version: V1,
            pipeline: "customers".into(),
            run_id: run_id(),
            run_date: date(),
            page: PageRef { index: 0, count: 1 },
            target: PersistTarget::new("customers"),
            payload,
            fetched_at: None,
        });
    }
    round_trip(&ProbeReply {
        version: V1,
        pipeline: "p".into(),
        run_id: run_id(),
        run_date: date(),
        total: 250,
        context: json!(null),
    });
    round_trip(&QueryMessage {
        version: V1,
        pipeline: "p".into(),
        run_id: run_id(),
        run_date: date(),
        sql: "SELECT id FROM customers WHERE dt = ?".into(),
        parameters: vec!["2026-11-29".into()],
        database: "lake".into(),
        workgroup: None,
        output_location: Some("s3://bucket/athena/".into()),
        reply_to: Destination::Topic { topic: "query-results".into() },
        context: json!({}),
        required_columns: vec!["id".into()],
        continuation: Some(QueryContinuation {
            execution_id: "q-1".into(),
            next_token: Some("t".into()),
            next_row: 1000,
        }),
    });
    round_trip(&QueryRow {
        version: V1,
        pipeline: "p".into(),
        run_id: run_id(),
        run_date: date(),
        row_index: 7,
        row: json!({"id": 7, "name": "x", "missing": null}).as_object().cloned().unwrap_or_default(),
        context: json!({"spec": true}),
    });
    round_trip(&Alert {
        version: V1,
        pipeline: Some("p".into()),
        run_id: None,
        page: Some(3),
        function: "request".into(),
        source_queue: "request".into(),
        message_id: "m-1".into(),
        receive_count: 3,
        reason: Some("HTTP 404".into()),
        summary: "s".into(),
        body_excerpt: "{".into(),
        body_bytes: 1,
        count: 2,
        first_seen: Some("2026-11-29T06:00:00Z".into()),
        examples: vec![AlertExample {
            message_id: "m-1".into(),
            page: Some(3),
            receive_count: 3,
            reason: Some("HTTP 404".into()),
            body_excerpt: "{".into(),
        }],
    });
}

#[test]
fn unknown_version_is_refused_with_a_clear_error() {
    let mut value = serde_json::to_value(request_message()).expect("json");
    value["version"] = json!(2);
    let err = decode::<RequestMessage>(value.clone()).expect_err("version 2");
    assert_eq!(err.path, "version");
    assert!(err.to_string().contains("unsupported contract version 2: this build reads version 1"), "{err}");
    // The right version quoted says so (a trial finding: it read as
    // "unsupported contract version \"1\": this build reads version 1").
    value["version"] = json!("1");
    let err = decode::<RequestMessage>(value).expect_err("version \"1\"");
    assert!(err.to_string().contains("contract version \"1\" is text: write the number 1 without quotes"), "{err}");
}

#[test]
fn missing_and_malformed_fields_are_named() {
    let mut value = serde_json::to_value(request_message()).expect("json");
    value["page"]["index"] = json!("two");
    let err = decode::<RequestMessage>(value).expect_err("bad page");
    assert_eq!(err.path, "page.index");
    let mut value = serde_json::to_value(request_message()).expect("json");
    value["run_id"] = json!("../../etc");
    let err = decode::<RequestMessage>(value).expect_err("bad run id");
    assert_eq!(err.path, "run_id");
    assert!(err.to_string().contains("RequestMessage"), "{err}");
}

/// Fails when `docs/contracts/` does not match the types: the JSON Schemas
/// and the book's reference pages rendered from them (so the book cannot
/// say other than the schema). Regenerate with
/// `cargo run -p tributary-cli -- schema --out docs/contracts`.
#[test]
fn committed_schemas_are_fresh() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/contracts");
    let schemas = schemas().into_iter().map(|(name, text)| (name.to_owned(), text));
    for (name, generated) in schemas.chain(references()) {
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        assert!(
            committed == generated,
            "{name} is stale: run `cargo run -p tributary-cli -- schema --out docs/contracts` and commit the result"
        );
    }
}
