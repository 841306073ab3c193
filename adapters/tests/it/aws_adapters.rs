//! The AWS adapters (`adapters::aws`) through the real aws-sdk
//! clients against a moto server.
//!
//! Needs `AWS_ENDPOINT_URL` pointing at moto:
//! `scripts/moto.sh install && eval "$(scripts/moto.sh start)"`. Without it
//! every test fails, saying so; none passes silently.
//!
//! Tests run concurrently (threads under `cargo test`, processes under
//! nextest) against one server, so each creates its own uniquely named
//! queues, topics, buckets, secrets and Glue databases and nothing resets
//! moto (a reset would wipe the resources of the tests running beside it).
//! The one piece of global state touched, Athena's seeded results and state
//! transitions, is used by a single test.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use adapters::aws::{
    AthenaEngine, GlueCatalog, S3Store, SecretsManagerStore, SnsPublisher, SqsSender, config_loader,
    s3_client_with_path_style,
};
use aws_config::{Region, SdkConfig};
use aws_sdk_sqs::config::interceptors::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextRef,
};
use aws_sdk_sqs::config::{ConfigBag, Credentials, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::BoxError;
use aws_sdk_sqs::types::QueueAttributeName;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use serde_json::{Value, json};
use tributary_core::batch::decode_body;
use tributary_core::catalog::{Catalog, ColumnDef, PartitionKey, Projection, TableDef};
use tributary_core::ports::{
    ObjectStore, PortError, Query, QueryEngine, QueueSender, SecretStore, TopicMessage, TopicPublisher,
};

const HOW_TO_START: &str = "start moto first: scripts/moto.sh install && eval \"$(scripts/moto.sh start)\"";

/// The moto server under test.
struct Moto {
    endpoint: String,
    config: SdkConfig,
    http: reqwest::Client,
}

/// Connects to moto, failing the test (with how to start it) when
/// `AWS_ENDPOINT_URL` is unset or does not answer.
async fn moto() -> Moto {
    let endpoint = match std::env::var("AWS_ENDPOINT_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_string(),
        _ => panic!("AWS_ENDPOINT_URL is not set; {HOW_TO_START}"),
    };
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("reqwest client");
    let probe = http.get(format!("{endpoint}/moto-api/")).send().await;
    match probe {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => panic!(
            "AWS_ENDPOINT_URL={endpoint} answered {} to /moto-api/: is it moto? {HOW_TO_START}",
            response.status()
        ),
        Err(err) => {
            panic!("moto at AWS_ENDPOINT_URL={endpoint} is unreachable ({err}); {HOW_TO_START}")
        }
    }
    // The endpoint itself comes from AWS_ENDPOINT_URL, read by aws-config
    // as in Lambda; only region and (absent) credentials are pinned here.
    let mut loader = config_loader().region(Region::new("us-east-1"));
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(Credentials::new("testing", "testing", None, None, "tributary-tests"));
    }
    Moto { endpoint, config: loader.load().await, http }
}

impl Moto {
    async fn post_api(&self, path: &str, body: &Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.endpoint))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("moto-api request");
        assert!(response.status().is_success(), "POST {path}: {}", response.status());
    }

    fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.config)
    }

    /// Creates a queue with the classic 256 KiB `MaximumMessageSize` (moto
    /// defaults to 1 MiB); returns its URL and ARN.
    async fn queue(&self, label: &str) -> (String, String) {
        let sqs = self.sqs();
        let url = sqs
            .create_queue()
            .queue_name(unique(label))
            .attributes(QueueAttributeName::MaximumMessageSize, "262144")
            .send()
            .await
            .expect("CreateQueue")
            .queue_url()
            .expect("queue URL")
            .to_string();
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .expect("GetQueueAttributes");
        let arn = attributes.attributes().and_then(|a| a.get(&QueueAttributeName::QueueArn)).expect("QueueArn").clone();
        (url, arn)
    }

    /// Receives and deletes messages until `expected` distinct ones arrived
    /// (or 20 s passed); returns their bodies.
    async fn drain(&self, url: &str, expected: usize) -> Vec<String> {
        let sqs = self.sqs();
        let mut bodies = BTreeMap::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while bodies.len() < expected && tokio::time::Instant::now() < deadline {
            let output = sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .visibility_timeout(60)
                .send()
                .await
                .expect("ReceiveMessage");
            for message in output.messages() {
                let id = message.message_id().expect("MessageId").to_string();
                bodies.insert(id, message.body().unwrap_or_default().to_string());
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(message.receipt_handle().expect("receipt handle"))
                    .send()
                    .await
                    .expect("DeleteMessage");
            }
        }
        bodies.into_values().collect()
    }
}

/// A name no other test (thread or process) uses: label, pid, clock, counter.
/// Lower-case ASCII, digits and `-`: valid for queues, topics, buckets and
/// secrets alike.
fn unique(label: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    format!("tributary-{label}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Records, per SDK call of input type `T`, what `measure` extracts from the
/// input (before serialisation, once per call whatever the SDK's retries).
#[derive(Clone)]
struct Recorder<T, M> {
    calls: Arc<Mutex<Vec<M>>>,
    measure: fn(&T) -> M,
}

impl<T, M> std::fmt::Debug for Recorder<T, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl<T, M: Clone> Recorder<T, M> {
    fn new(measure: fn(&T) -> M) -> Self {
        Self { calls: Arc::new(Mutex::new(Vec::new())), measure }
    }

    fn calls(&self) -> Vec<M> {
        self.calls.lock().expect("recorder lock").clone()
    }
}

impl<T, M> Intercept for Recorder<T, M>
where
    T: std::fmt::Debug + Send + Sync + 'static,
    M: Send + Sync + 'static,
{
    fn name(&self) -> &'static str {
        "Recorder"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(input) = context.input().downcast_ref::<T>() {
            self.calls.lock().expect("recorder lock").push((self.measure)(input));
        }
        Ok(())
    }
}

type SendBatchInput = aws_sdk_sqs::operation::send_message_batch::SendMessageBatchInput;

/// Body sizes of each `SendMessageBatch` call.
fn batch_body_sizes(input: &SendBatchInput) -> Vec<usize> {
    input.entries().iter().map(|e| e.message_body().len()).collect()
}

#[tokio::test]
async fn sqs_sender_splits_25_large_messages_within_limits_and_all_arrive() {
    let moto = moto().await;
    let (url, _) = moto.queue("sqs").await;
    let recorder = Recorder::new(batch_body_sizes);
    let client = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&moto.config).interceptor(recorder.clone()).build(),
    );
    let sender = SqsSender::new(client);

    // 25 distinct bodies of ~60 KiB: 4 fit in one 256 KiB call.
    let bodies: Vec<String> = (0..25).map(|i| json!({"i": i, "pad": "x".repeat(60 * 1024)}).to_string()).collect();
    sender.send(&url, bodies.clone()).await.expect("send");

    let calls = recorder.calls();
    assert!(calls.len() >= 7, "25 × 60 KiB needs at least 7 calls: {calls:?}");
    for call in &calls {
        let bytes: usize = call.iter().sum();
        assert!(
            call.len() <= 10 && bytes <= 262_144,
            "a SendMessageBatch call exceeded the limits: {} entries, {bytes} bytes",
            call.len()
        );
    }
    assert_eq!(calls.iter().map(Vec::len).sum::<usize>(), 25);

    let received: BTreeSet<String> = moto.drain(&url, 25).await.into_iter().collect();
    let sent: BTreeSet<String> = bodies.into_iter().collect();
    assert_eq!(received.len(), 25, "messages lost");
    assert_eq!(received, sent);
}

#[tokio::test]
async fn sqs_sender_refuses_an_oversize_body_and_an_unknown_queue() {
    let moto = moto().await;
    let (url, _) = moto.queue("sqs-limits").await;
    let recorder = Recorder::new(batch_body_sizes);
    let client = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&moto.config).interceptor(recorder.clone()).build(),
    );
    let sender = SqsSender::new(client);

    let err = sender.send(&url, vec!["small".into(), "y".repeat(262_145)]).await.expect_err("oversize body");
    assert!(matches!(err, PortError::TooLarge { bytes: 262_145, limit: 262_144, .. }), "{err:?}");
    assert!(recorder.calls().is_empty(), "nothing may be sent");

    let missing = url.replace("tributary-sqs-limits", "tributary-no-such-queue");
    let err = sender.send(&missing, vec!["{}".into()]).await.expect_err("unknown queue");
    assert!(!err.is_retryable(), "{err:?}");
    assert!(matches!(err, PortError::NotFound { what: "queue", .. }), "{err:?}");
}

#[tokio::test]
async fn sqs_sender_changes_a_received_messages_visibility() {
    let moto = moto().await;
    let (url, _) = moto.queue("sqs-visibility").await;
    let sqs = moto.sqs();
    let sender = SqsSender::new(sqs.clone());
    sender.send(&url, vec!["{\"n\": 1}".into()]).await.expect("send");
    let receive = || async {
        sqs.receive_message()
            .queue_url(&url)
            .visibility_timeout(600)
            .send()
            .await
            .expect("ReceiveMessage")
            .messages
            .unwrap_or_default()
    };
    let first = receive().await;
    assert_eq!(first.len(), 1);
    assert!(receive().await.is_empty(), "in flight for 600 s");
    let receipt = first[0].receipt_handle().expect("receipt");
    // Visible again at once: the change is what makes it come back.
    let changed = sender.change_visibility(&url, receipt, Duration::ZERO).await.expect("ChangeMessageVisibility");
    assert!(changed);
    let again = receive().await;
    assert_eq!(again.len(), 1, "visible again after the change");
    assert_eq!(again[0].body(), first[0].body());
}

#[tokio::test]
async fn sqs_sender_sends_a_message_delayed_with_its_attributes() {
    let moto = moto().await;
    let (url, _) = moto.queue("sqs-delayed").await;
    let sqs = moto.sqs();
    let sender = SqsSender::new(sqs.clone());
    let message = tributary_core::ports::QueueMessage {
        body: "{\"n\": 1}".into(),
        attributes: [("tributary-paused-secs".to_string(), "120".to_string())].into(),
    };
    let sent = sender.send_delayed(&url, message, Duration::from_secs(2)).await.expect("SendMessage");
    assert!(sent);
    let receive = || async {
        sqs.receive_message()
            .queue_url(&url)
            .message_attribute_names("All")
            .send()
            .await
            .expect("ReceiveMessage")
            .messages
            .unwrap_or_default()
    };
    assert!(receive().await.is_empty(), "delayed 2 s");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let got = receive().await;
    assert_eq!(got.len(), 1, "visible after its delay");
    let attributes = got[0].message_attributes().expect("attributes");
    assert_eq!(attributes["tributary-paused-secs"].string_value(), Some("120"));
    // Over the byte limit: refused, nothing sent.
    let big = tributary_core::ports::QueueMessage { body: "x".repeat(300_000), attributes: Default::default() };
    let err = sender.send_delayed(&url, big, Duration::from_secs(1)).await.expect_err("too large");
    assert!(matches!(err, PortError::TooLarge { .. }), "{err:?}");
}

#[tokio::test]
async fn sns_fan_out_raw_and_enveloped_decode_to_the_same_json() {
    let moto = moto().await;
    let sns = aws_sdk_sns::Client::new(&moto.config);
    let topic = sns
        .create_topic()
        .name(unique("topic"))
        .send()
        .await
        .expect("CreateTopic")
        .topic_arn()
        .expect("TopicArn")
        .to_string();
    let (raw_url, raw_arn) = moto.queue("raw").await;
    let (env_url, env_arn) = moto.queue("env").await;
    for (arn, raw) in [(&raw_arn, "true"), (&env_arn, "false")] {
        sns.subscribe()
            .topic_arn(&topic)
            .protocol("sqs")
            .endpoint(arn)
            .attributes("RawMessageDelivery", raw)
            .send()
            .await
            .expect("Subscribe");
    }

    // 12 messages: two PublishBatch calls.
    let messages: Vec<TopicMessage> = (0..12)
        .map(|i| TopicMessage {
            subject: Some("Query\nresults ✓".into()),
            body: json!({"rows": [{"id": i}], "note": "fan-out"}).to_string(),
            attributes: [("kind".to_string(), "rows".to_string())].into(),
            per_protocol: Default::default(),
        })
        .collect();
    let expected: BTreeSet<String> =
        messages.iter().map(|m| serde_json::from_str::<Value>(&m.body).expect("json").to_string()).collect();
    SnsPublisher::new(sns).publish(&topic, messages).await.expect("publish");

    let mut decoded = Vec::new();
    for (url, enveloped) in [(&raw_url, false), (&env_url, true)] {
        let bodies = moto.drain(url, 12).await;
        assert_eq!(bodies.len(), 12, "lost messages on {url}");
        let mut values = BTreeSet::new();
        for body in &bodies {
            let (value, was_envelope) = decode_body(body).expect("decode_body");
            assert_eq!(was_envelope, enveloped, "{body}");
            if enveloped {
                let envelope: Value = serde_json::from_str(body).expect("envelope");
                assert_eq!(envelope["Subject"], "Query results ?", "sanitised subject");
            }
            values.insert(value.to_string());
        }
        decoded.push(values);
    }
    assert_eq!(decoded[0], expected);
    assert_eq!(decoded[1], expected);
}

#[tokio::test]
async fn s3_store_round_trips_bytes_and_lists_over_pages() {
    let moto = moto().await;
    let bucket = unique("s3");
    let plain = s3_client_with_path_style(&moto.config, true);
    plain.create_bucket().bucket(&bucket).send().await.expect("CreateBucket");

    let recorder = Recorder::new(|input: &aws_sdk_s3::operation::list_objects_v2::ListObjectsV2Input| {
        input.continuation_token().map(str::to_string)
    });
    let listing = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&moto.config).force_path_style(true).interceptor(recorder.clone()).build(),
    );
    let store = S3Store::new(plain, &bucket).with_prefix("lake");
    let paged = S3Store::new(listing, &bucket).with_prefix("lake/").with_page_size(2);

    let every_byte: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let objects: BTreeMap<&str, Bytes> = [
        ("a/1.parquet", Bytes::from(every_byte.clone())),
        ("a/2.bin", Bytes::from_static(b"\x00\xff\r\n\x1b")),
        ("a/3.json", Bytes::from_static(b"{\"id\":1}\n")),
        ("b/only.txt", Bytes::from_static(b"")),
    ]
    .into();
    for (key, body) in &objects {
        store.put(key, body.clone()).await.expect("put");
    }
    // A put replaces.
    store.put("a/2.bin", Bytes::from_static(b"replaced")).await.expect("put again");

    for (key, body) in &objects {
        let expected = if *key == "a/2.bin" { Bytes::from_static(b"replaced") } else { body.clone() };
        assert_eq!(store.get(key).await.expect("get"), expected, "{key}");
    }

    let all = paged.list("").await.expect("list all");
    assert_eq!(all, objects.keys().map(|k| k.to_string()).collect::<Vec<_>>());
    let calls = recorder.calls();
    assert!(
        calls.len() == 2 && calls[0].is_none() && calls[1].is_some(),
        "4 keys at 2 per page: two ListObjectsV2 calls, the second with a token: {calls:?}"
    );

    let under_a = paged.list("a/").await.expect("list a/");
    assert_eq!(under_a, vec!["a/1.parquet", "a/2.bin", "a/3.json"]);
    assert_eq!(recorder.calls().len(), 4, "3 keys at 2 per page: two more calls");
    assert!(paged.list("none/").await.expect("list none").is_empty());

    let err = store.get("a/missing").await.expect_err("missing key");
    assert!(matches!(err, PortError::NotFound { what: "object", .. }), "{err:?}");
}

#[tokio::test]
async fn s3_store_streams_files_copies_server_side_and_deletes() {
    let moto = moto().await;
    let bucket = unique("s3f");
    let client = s3_client_with_path_style(&moto.config, true);
    client.create_bucket().bucket(&bucket).send().await.expect("CreateBucket");
    let store = S3Store::new(client, &bucket).with_prefix("lake/");
    let dir = tempfile::tempdir().expect("tempdir");

    let body: Vec<u8> = (0..=255u8).cycle().take(3_000_000).collect();
    let local = dir.path().join("part.parquet");
    std::fs::write(&local, &body).expect("write local file");
    store.put_file("d/dt=2026-11-29/p.parquet", &local).await.expect("put_file");
    store.copy("d/dt=2026-11-29/p.parquet", "raw/d/p weird=1.payload").await.expect("CopyObject");
    let back = dir.path().join("back");
    let written = store.get_to_file("raw/d/p weird=1.payload", &back).await.expect("get_to_file");
    assert_eq!(written, body.len() as u64);
    assert_eq!(std::fs::read(&back).expect("read back"), body, "byte for byte through put_file, copy, get_to_file");

    store.delete("d/dt=2026-11-29/p.parquet").await.expect("delete");
    store.delete("d/never-there").await.expect("deleting a missing key succeeds");
    assert_eq!(store.list("").await.expect("list"), ["raw/d/p weird=1.payload"]);
    let err = store.get_to_file("d/dt=2026-11-29/p.parquet", &back).await.expect_err("deleted");
    assert!(matches!(err, PortError::NotFound { what: "object", .. }), "{err:?}");
    let err = store.copy("nothing/here", "x").await.expect_err("copy of a missing key");
    assert!(matches!(err, PortError::NotFound { .. }), "{err:?}");
}

/// The dataset schema's compare-and-swap on S3: `If-None-Match: *` and
/// `If-Match: <ETag>`, with the 412 of a lost race reported as `false`.
#[tokio::test]
async fn s3_store_put_if_swaps_only_from_the_etag_read() {
    let moto = moto().await;
    let bucket = unique("s3c");
    let client = s3_client_with_path_style(&moto.config, true);
    client.create_bucket().bucket(&bucket).send().await.expect("CreateBucket");
    let store = S3Store::new(client, &bucket).with_prefix("lake/");
    let key = "_schema/orders.json";

    assert!(store.get_versioned(key).await.expect("read").is_none());
    assert!(store.put_if(key, Bytes::from_static(b"v1"), None).await.expect("create"));
    assert!(!store.put_if(key, Bytes::from_static(b"other"), None).await.expect("exists"), "only if absent");
    let (body, v1) = store.get_versioned(key).await.expect("read").expect("exists");
    assert_eq!(body, Bytes::from_static(b"v1"));
    assert!(!v1.is_empty(), "an ETag");
    assert!(store.put_if(key, Bytes::from_static(b"v2"), Some(&v1)).await.expect("swap"));
    assert!(!store.put_if(key, Bytes::from_static(b"v3"), Some(&v1)).await.expect("stale ETag"), "v1 is gone");
    assert_eq!(store.get(key).await.expect("get"), Bytes::from_static(b"v2"));
}

#[tokio::test]
async fn secrets_manager_store_reads_caches_and_reports_missing() {
    let moto = moto().await;
    let client = aws_sdk_secretsmanager::Client::new(&moto.config);
    let name = unique("secret");
    client.create_secret().name(&name).secret_string("s3cr3t-token").send().await.expect("CreateSecret");

    let cached = SecretsManagerStore::new(client.clone());
    let uncached = SecretsManagerStore::new(client.clone()).with_ttl(Duration::ZERO);
    let secret = cached.get(&name).await.expect("get secret");
    assert_eq!(secret.expose(), "s3cr3t-token");
    assert!(!format!("{secret:?}").contains("s3cr3t"));

    client.put_secret_value().secret_id(&name).secret_string("rotated").send().await.expect("PutSecretValue");
    assert_eq!(
        cached.get(&name).await.expect("cached").expose(),
        "s3cr3t-token",
        "read again within the TTL: served from the cache"
    );
    assert_eq!(uncached.get(&name).await.expect("fresh").expose(), "rotated");

    let err = cached.get(&unique("missing")).await.expect_err("missing secret");
    assert!(matches!(err, PortError::NotFound { what: "secret", .. }), "{err:?}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn athena_engine_polls_and_types_seeded_rows() {
    let moto = moto().await;
    moto.post_api(
        "/moto-api/static/athena/query-results",
        &json!({"results": [{
            "rows": [{"Data": [{"VarCharValue": "id"}]}, {"Data": [{"VarCharValue": "1"}]}],
            "column_info": [{"Name": "id", "Type": "integer"}],
        }]}),
    )
    .await;
    // QUEUED and RUNNING before SUCCEEDED, so the engine really polls.
    moto.post_api(
        "/moto-api/state-manager/set-transition",
        &json!({"model_name": "athena::execution", "transition": {"progression": "manual", "times": 2}}),
    )
    .await;

    let polls = Recorder::new(|input: &aws_sdk_athena::operation::get_query_execution::GetQueryExecutionInput| {
        input.query_execution_id().map(str::to_string)
    });
    let starts = Recorder::new(|input: &aws_sdk_athena::operation::start_query_execution::StartQueryExecutionInput| {
        input.execution_parameters().to_vec()
    });
    let client = aws_sdk_athena::Client::from_conf(
        aws_sdk_athena::config::Builder::from(&moto.config)
            .interceptor(polls.clone())
            .interceptor(starts.clone())
            .build(),
    );
    let engine = AthenaEngine::new(client).with_poll_delays(Duration::from_millis(10), Duration::from_millis(50));
    let query = Query {
        sql: "SELECT id FROM runs WHERE day = ?".into(),
        parameters: vec!["2026-11-29".into()],
        database: "lake".into(),
        workgroup: None,
        output_location: None,
    };
    let result = async {
        let id = engine.start(&query).await?;
        let state = engine.wait(&id, tokio::time::Instant::now() + Duration::from_secs(20)).await?;
        assert_eq!(state, tributary_core::ports::QueryState::Succeeded);
        engine.page(&id, None).await
    }
    .await;
    moto.post_api("/moto-api/state-manager/unset-transition", &json!({"model_name": "athena::execution"})).await;

    let rows = result.expect("query");
    assert_eq!(
        starts.calls(),
        vec![vec!["'2026-11-29'".to_string()]],
        "parameters bound as ExecutionParameters string literals"
    );
    assert!(polls.calls().len() >= 3, "QUEUED, RUNNING, then SUCCEEDED: {:?}", polls.calls());
    assert_eq!(rows.columns, vec!["id"]);
    assert_eq!(rows.rows.len(), 1, "header row skipped: {rows:?}");
    assert_eq!(rows.next_token, None);
    assert_eq!(Value::Object(rows.rows[0].clone()), json!({"id": 1}));
}

type GlueUpdateInput = aws_sdk_glue::operation::update_table::UpdateTableInput;
type GlueCreateInput = aws_sdk_glue::operation::create_table::CreateTableInput;

/// Answers the first `GetTable` with Glue's `EntityNotFoundException`, as a
/// reader would see it just before another writer's `CreateTable` lands.
#[derive(Clone, Debug, Default)]
struct HideTableOnce {
    hidden: Arc<Mutex<bool>>,
}

impl Intercept for HideTableOnce {
    fn name(&self) -> &'static str {
        "HideTableOnce"
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut hidden = self.hidden.lock().expect("lock");
        if *hidden || cfg.load::<Metadata>().map(Metadata::name) != Some("GetTable") {
            return Ok(());
        }
        *hidden = true;
        let response = context.response_mut();
        *response.status_mut() = StatusCode::try_from(400).expect("status");
        let body = json!({"__type": "EntityNotFoundException", "Message": "Table not found"});
        *response.body_mut() = SdkBody::from(body.to_string());
        Ok(())
    }
}

impl Moto {
    fn glue(&self) -> aws_sdk_glue::Client {
        aws_sdk_glue::Client::new(&self.config)
    }

    /// A new Glue database (lower case, `_`: Hive's names).
    async fn glue_database(&self) -> String {
        let name = unique("lake").replace('-', "_");
        let input = aws_sdk_glue::types::DatabaseInput::builder().name(&name).build().expect("database input");
        self.glue().create_database().database_input(input).send().await.expect("CreateDatabase");
        name
    }

    async fn glue_table(&self, database: &str, name: &str) -> aws_sdk_glue::types::Table {
        let output = self.glue().get_table().database_name(database).name(name).send().await.expect("GetTable");
        output.table.expect("a table")
    }
}

/// A dataset like Persist's: scalars, a decimal, a struct, an array, the
/// lineage columns, partitioned by day and hour.
fn web_events() -> TableDef {
    let column = |name: &str, hive_type: &str, comment: &str| ColumnDef {
        name: name.into(),
        hive_type: hive_type.into(),
        comment: comment.into(),
    };
    TableDef {
        name: "web_events".into(),
        prefix: "web-events/".into(),
        columns: vec![
            column("id", "bigint", "record key `id`"),
            column("amount", "decimal(38,2)", "record key `amount`"),
            column("owner", "struct<login:string,id:bigint>", "record key `owner`"),
            column("tags", "array<string>", "record key `tags`"),
            column("_pipeline", "string", "lineage: the pipeline that wrote the row"),
            column("_run_id", "string", "lineage: the run"),
            column("_page", "int", "lineage: the page of the run"),
            column("_ingested_at", "timestamp", "lineage: when Persist wrote the file"),
        ],
        partition_keys: vec![
            PartitionKey { name: "dt".into(), projection: Projection::Date { first: "2026-01-01".into(), last: None } },
            PartitionKey { name: "hour".into(), projection: Projection::Hour },
        ],
        description: "web events from the demo vendor".into(),
        version: 1,
    }
}

fn columns_of(columns: &[aws_sdk_glue::types::Column]) -> Vec<(String, String, String)> {
    columns
        .iter()
        .map(|c| {
            let text = |value: Option<&str>| value.unwrap_or_default().to_string();
            (c.name().to_string(), text(c.r#type()), text(c.comment()))
        })
        .collect()
}

fn parameters_of(table: &aws_sdk_glue::types::Table) -> BTreeMap<String, String> {
    table.parameters().map(|p| p.clone().into_iter().collect()).unwrap_or_default()
}

#[tokio::test]
async fn glue_catalog_creates_the_table_and_updates_it_only_on_change() {
    let moto = moto().await;
    let database = moto.glue_database().await;
    let updates = Recorder::new(|input: &GlueUpdateInput| input.table_input().map(|t| t.name().to_string()));
    let client = aws_sdk_glue::Client::from_conf(
        aws_sdk_glue::config::Builder::from(&moto.config).interceptor(updates.clone()).build(),
    );
    let catalog = GlueCatalog::with_client(client, &database, "lake");
    let v1 = web_events();
    catalog.upsert_table(&v1).await.expect("create");

    let table = moto.glue_table(&database, "web_events").await;
    assert_eq!(table.table_type(), Some("EXTERNAL_TABLE"));
    assert_eq!(table.description(), Some("web events from the demo vendor"));
    let storage = table.storage_descriptor().expect("storage descriptor");
    let expected: Vec<_> =
        v1.columns.iter().map(|c| (c.name.clone(), c.hive_type.clone(), c.comment.clone())).collect();
    assert_eq!(columns_of(storage.columns()), expected);
    assert_eq!(storage.location(), Some("s3://lake/web-events/"));
    assert_eq!(storage.input_format(), Some("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"));
    assert_eq!(storage.output_format(), Some("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"));
    assert_eq!(
        storage.serde_info().and_then(|s| s.serialization_library()),
        Some("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
    );
    let keys = columns_of(table.partition_keys());
    let key = |name: &str| (name.to_string(), "string".to_string(), String::new());
    assert_eq!(keys, [key("dt"), key("hour")], "partition keys are strings, without comments");
    let expected: BTreeMap<String, String> = [
        ("classification", "parquet"),
        ("EXTERNAL", "TRUE"),
        ("tributary.schema_version", "1"),
        ("projection.enabled", "true"),
        ("projection.dt.type", "date"),
        ("projection.dt.format", "yyyy-MM-dd"),
        ("projection.dt.range", "2026-01-01,NOW"),
        ("projection.dt.interval", "1"),
        ("projection.dt.interval.unit", "DAYS"),
        ("projection.hour.type", "integer"),
        ("projection.hour.range", "0,23"),
        ("projection.hour.digits", "2"),
        ("storage.location.template", "s3://lake/web-events/dt=${dt}/hour=${hour}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(parameters_of(&table), expected);
    let first_version = table.version_id().map(str::to_string);

    catalog.upsert_table(&v1).await.expect("unchanged");
    assert_eq!(updates.calls(), Vec::<Option<String>>::new(), "an unchanged definition is not written");
    assert_eq!(moto.glue_table(&database, "web_events").await.version_id().map(str::to_string), first_version);

    let mut v2 = web_events();
    v2.version = 2;
    v2.columns.push(ColumnDef {
        name: "email".into(),
        hive_type: "string".into(),
        comment: "record key `email`".into(),
    });
    v2.partition_keys.push(PartitionKey {
        name: "source".into(),
        projection: Projection::Enum { values: vec!["api".into(), "replay".into()] },
    });
    catalog.upsert_table(&v2).await.expect("update");
    catalog.upsert_table(&v2).await.expect("unchanged again");
    catalog.upsert_table(&v1).await.expect("a slow writer of version 1");
    assert_eq!(
        updates.calls(),
        vec![Some("web_events".to_string())],
        "one UpdateTable, for the change; version 1 never replaces version 2"
    );

    let table = moto.glue_table(&database, "web_events").await;
    assert_ne!(table.version_id().map(str::to_string), first_version);
    let storage = table.storage_descriptor().expect("storage descriptor");
    assert_eq!(columns_of(storage.columns()).last().map(|c| c.0.as_str()), Some("email"));
    assert_eq!(storage.columns().len(), 9);
    let keys: Vec<String> = table.partition_keys().iter().map(|k| k.name().to_string()).collect();
    assert_eq!(keys, ["dt", "hour", "source"]);
    let parameters = parameters_of(&table);
    assert_eq!(parameters["projection.source.type"], "enum");
    assert_eq!(parameters["projection.source.values"], "api,replay");
    assert_eq!(parameters["storage.location.template"], "s3://lake/web-events/dt=${dt}/hour=${hour}/source=${source}");
    assert_eq!(parameters["projection.dt.range"], "2026-01-01,NOW", "the other keys' projection is kept");
    let versions = moto
        .glue()
        .get_table_versions()
        .database_name(&database)
        .table_name("web_events")
        .send()
        .await
        .expect("versions");
    assert_eq!(versions.table_versions().len(), 2, "created, then updated once");
}

#[tokio::test]
async fn glue_catalog_answers_a_concurrent_creator_with_an_update() {
    let moto = moto().await;
    let database = moto.glue_database().await;
    // Another writer registers the first definition.
    GlueCatalog::new(&moto.config, &database, "lake").upsert_table(&web_events()).await.expect("other writer");

    let creates = Recorder::new(|input: &GlueCreateInput| input.table_input().map(|t| t.name().to_string()));
    let updates = Recorder::new(|input: &GlueUpdateInput| input.table_input().map(|t| t.name().to_string()));
    let client = aws_sdk_glue::Client::from_conf(
        aws_sdk_glue::config::Builder::from(&moto.config)
            .interceptor(HideTableOnce::default())
            .interceptor(creates.clone())
            .interceptor(updates.clone())
            .build(),
    );
    let mut v2 = web_events();
    v2.columns.push(ColumnDef { name: "email".into(), hive_type: "string".into(), comment: String::new() });
    GlueCatalog::with_client(client, &database, "lake").upsert_table(&v2).await.expect("upsert");

    assert_eq!(creates.calls(), vec![Some("web_events".to_string())], "not found, so CreateTable");
    assert_eq!(updates.calls(), vec![Some("web_events".to_string())], "AlreadyExistsException, so UpdateTable");
    let table = moto.glue_table(&database, "web_events").await;
    let columns = table.storage_descriptor().map(|s| s.columns().len());
    assert_eq!(columns, Some(v2.columns.len()));
}

#[tokio::test]
async fn glue_catalog_refuses_a_missing_database_naming_the_table() {
    let moto = moto().await;
    let database = unique("absent").replace('-', "_");
    let err = GlueCatalog::new(&moto.config, &database, "lake").upsert_table(&web_events()).await.expect_err("no db");
    assert!(matches!(err, PortError::Permanent { operation: "CreateTable", .. }), "{err:?}");
    assert!(err.to_string().contains(&format!("table {database}.web_events")), "{err}");
}

/// The `X-Amzn-Trace-Id` header of every request a client transmits (`None`
/// for a request without one).
#[derive(Clone, Debug, Default)]
struct TraceHeaders {
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl TraceHeaders {
    fn seen(&self) -> Vec<Option<String>> {
        std::mem::take(&mut *self.seen.lock().expect("lock"))
    }
}

impl Intercept for TraceHeaders {
    fn name(&self) -> &'static str {
        "TraceHeaders"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let header = context.request().headers().get(tributary_core::xray::TRACE_HEADER).map(str::to_string);
        self.seen.lock().expect("lock").push(header);
        Ok(())
    }
}

/// `AWSTraceHeader` of each entry of a `SendMessageBatch` call.
fn batch_trace_headers(input: &SendBatchInput) -> Vec<Option<String>> {
    input
        .entries()
        .iter()
        .map(|entry| {
            entry
                .message_system_attributes()
                .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeNameForSends::AwsTraceHeader))
                .and_then(|v| v.string_value().map(str::to_string))
        })
        .collect()
}

/// Issue 30, item 3: what is sent while a record is handled carries the
/// record's X-Ray trace header (`tributary_core::xray`): SQS messages as
/// their `AWSTraceHeader` system attribute (moto keeps it on `SendMessage`
/// and drops it on `SendMessageBatch`, so the batch's entries are read on
/// the wire), SNS publishes as the call's `X-Amzn-Trace-Id`; outside a
/// record, neither (the invocation's header is then the SDK's to send).
#[tokio::test]
async fn sends_for_a_record_carry_its_xray_trace_header() {
    use tributary_core::xray::with_record_trace;
    const TRACE: &str = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    let moto = moto().await;
    let (url, _) = moto.queue("traced").await;
    let entries = Recorder::new(batch_trace_headers);
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&moto.config).interceptor(entries.clone()).build(),
    );
    let sender = SqsSender::new(sqs.clone());

    with_record_trace(Some(TRACE), sender.send(&url, vec!["{\"n\": 1}".into(), "{\"n\": 2}".into()]))
        .await
        .expect("send");
    sender.send(&url, vec!["{\"n\": 3}".into()]).await.expect("send");
    let traced = Some(TRACE.to_string());
    assert_eq!(entries.calls(), vec![vec![traced.clone(), traced.clone()], vec![None]]);

    // SendMessage (a delayed copy), read back from the queue.
    moto.drain(&url, 3).await;
    let message = tributary_core::ports::QueueMessage { body: "{\"n\": 4}".into(), attributes: Default::default() };
    with_record_trace(Some(TRACE), sender.send_delayed(&url, message, Duration::ZERO)).await.expect("SendMessage");
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::AwsTraceHeader)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("ReceiveMessage");
    let message = received.messages().first().expect("the delayed copy");
    let attributes = message.attributes().expect("system attributes");
    assert_eq!(
        attributes.get(&aws_sdk_sqs::types::MessageSystemAttributeName::AwsTraceHeader).map(String::as_str),
        Some(TRACE)
    );

    // SNS: the PublishBatch call's header.
    let headers = TraceHeaders::default();
    let sns = aws_sdk_sns::Client::from_conf(
        aws_sdk_sns::config::Builder::from(&moto.config).interceptor(headers.clone()).build(),
    );
    let topic = sns.create_topic().name(unique("traced")).send().await.expect("CreateTopic");
    let topic = topic.topic_arn().expect("TopicArn").to_string();
    headers.seen();
    let publisher = SnsPublisher::new(sns);
    let message = || vec![TopicMessage { body: "{}".into(), ..TopicMessage::default() }];
    with_record_trace(Some(TRACE), publisher.publish(&topic, message())).await.expect("publish");
    publisher.publish(&topic, message()).await.expect("publish");
    assert_eq!(headers.seen(), vec![traced, None]);
}
