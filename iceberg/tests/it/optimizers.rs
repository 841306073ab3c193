//! Glue's table optimizers ([`GlueOptimizers`]) against a stand-in Glue
//! endpoint that records each `CreateTableOptimizer` call (moto 5.2.5 has
//! no such API): the three optimizers with the role, the catalog (the
//! role's account) and the retention settings; an optimizer that exists
//! already taken as done; any other answer an error naming the optimizer.

use std::sync::{Arc, Mutex};

use aws_sdk_glue::config::{BehaviorVersion, Credentials, Region};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use iceberg::{NamespaceIdent, TableIdent};
use serde_json::{Value, json};
use tributary_iceberg::TableHousekeeping;
use tributary_iceberg::glue::{GlueOptimizers, OptimizerSettings};

/// Each call's `X-Amz-Target` and JSON body.
type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// A Glue endpoint on loopback: `exists` tables answer
/// `AlreadyExistsException`, `denied` tables `AccessDeniedException`,
/// others `{}`.
async fn stand_in_glue() -> (String, Calls) {
    let calls: Calls = Arc::default();
    let recorded = calls.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap, body: String| {
            let recorded = recorded.clone();
            async move {
                let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let table = body["TableName"].as_str().unwrap_or("").to_string();
                recorded.lock().expect("calls").push((target, body));
                let error = |kind: &str| {
                    let body = json!({"__type": kind, "message": format!("{kind} for the test")}).to_string();
                    (StatusCode::BAD_REQUEST, [("content-type", "application/x-amz-json-1.1")], body)
                };
                match table.as_str() {
                    "exists" => error("AlreadyExistsException"),
                    "denied" => error("AccessDeniedException"),
                    _ => (StatusCode::OK, [("content-type", "application/x-amz-json-1.1")], "{}".to_string()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), calls)
}

fn optimizers(endpoint: &str, kinds: &[&str]) -> GlueOptimizers {
    let config = aws_sdk_glue::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .build();
    let settings = OptimizerSettings {
        kinds: kinds.iter().map(ToString::to_string).collect(),
        role_arn: "arn:aws:iam::123456789012:role/tributary-table-optimizers".into(),
        snapshot_retention_days: 5,
        snapshots_to_retain: 1,
        orphan_file_retention_days: 3,
    };
    GlueOptimizers::new(aws_sdk_glue::Client::from_conf(config), settings)
}

fn table(name: &str) -> TableIdent {
    TableIdent::new(NamespaceIdent::new("tributary_lake".into()), name.into())
}

#[tokio::test]
async fn each_optimizer_is_created_with_the_role_the_account_and_the_settings() {
    let (endpoint, calls) = stand_in_glue().await;
    let glue = optimizers(&endpoint, &["compaction", "retention", "orphan_file_deletion"]);
    glue.ensure(&table("customers")).await.expect("created");
    let calls = calls.lock().expect("calls").clone();
    let targets: Vec<&str> = calls.iter().map(|(target, _)| target.as_str()).collect();
    assert_eq!(targets, ["AWSGlue.CreateTableOptimizer"; 3]);
    let types: Vec<&str> = calls.iter().map(|(_, body)| body["Type"].as_str().unwrap_or("")).collect();
    assert_eq!(types, ["compaction", "retention", "orphan_file_deletion"]);
    for (_, body) in &calls {
        assert_eq!(body["CatalogId"], "123456789012", "the role's account: {body}");
        assert_eq!(body["DatabaseName"], "tributary_lake");
        assert_eq!(body["TableName"], "customers");
        let configuration = &body["TableOptimizerConfiguration"];
        // The configuration's members are camelCase on the wire (Glue's
        // API model), unlike the request's own.
        assert_eq!(configuration["roleArn"], "arn:aws:iam::123456789012:role/tributary-table-optimizers");
        assert_eq!(configuration["enabled"], true);
    }
    let retention = &calls[1].1["TableOptimizerConfiguration"]["retentionConfiguration"]["icebergConfiguration"];
    assert_eq!(
        (
            &retention["snapshotRetentionPeriodInDays"],
            &retention["numberOfSnapshotsToRetain"],
            &retention["cleanExpiredFiles"]
        ),
        (&json!(5), &json!(1), &json!(true))
    );
    let orphans = &calls[2].1["TableOptimizerConfiguration"]["orphanFileDeletionConfiguration"]["icebergConfiguration"];
    assert_eq!(orphans["orphanFileRetentionPeriodInDays"], 3);
    assert!(calls[0].1["TableOptimizerConfiguration"].get("retentionConfiguration").is_none());
}

#[tokio::test]
async fn an_optimizer_that_exists_is_done_and_a_refusal_names_the_optimizer() {
    let (endpoint, calls) = stand_in_glue().await;
    let glue = optimizers(&endpoint, &["compaction", "retention"]);
    glue.ensure(&table("exists")).await.expect("already there is done");
    assert_eq!(calls.lock().expect("calls").len(), 2, "both asked for");
    let err = glue.ensure(&table("denied")).await.expect_err("refused");
    assert!(err.contains("CreateTableOptimizer compaction"), "{err}");
    assert!(err.contains("AccessDenied"), "{err}");
    assert!(!err.contains("testing"), "no credential in the message: {err}");
}
