//! Orchestrator Lambda: wiring only. Environment (read once, at cold start):
//! `REQUEST_QUEUE_URL`, `PERSIST_QUEUE_URL`, `ORCHESTRATOR_QUEUE_URL`,
//! `ATHENA_QUEUE_URL`, `QUERY_RESULTS_TOPIC_ARN`, `LAKE_BUCKET` (run ledger) (required),
//! `RUN_EVENTS_TOPIC_ARN` (announces completed runs; unset: none),
//! `MAX_BATCH_BYTES` (SendMessageBatch payload cap, default 262144),
//! `DLQ_URL` and `MAX_RECEIVE_COUNT` (dead letters with their reason).

use adapters::aws::{self, SqsSender};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;
use tributary_core::env::{LambdaEnv, dead_letter_target};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let config = orchestrator::OrchestratorConfig {
        request_queue: env.required("REQUEST_QUEUE_URL")?,
        persist_queue: env.required("PERSIST_QUEUE_URL")?,
        orchestrator_queue: env.required("ORCHESTRATOR_QUEUE_URL")?,
        athena_queue: env.required("ATHENA_QUEUE_URL")?,
        query_results_topic: env.required("QUERY_RESULTS_TOPIC_ARN")?,
        dead_letter: dead_letter_target(&env)?,
    };
    let sdk = aws::sdk_config().await;
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk))
        .with_max_batch_bytes(env.usize_or("MAX_BATCH_BYTES", aws::DEFAULT_MAX_BATCH_BYTES)?);
    let ledger = aws::S3Store::new(aws::s3_client(&sdk)?, env.required("LAKE_BUCKET")?);
    let topics = aws::SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let run_events = env.optional("RUN_EVENTS_TOPIC_ARN")?;
    let ledger = tributary_core::ledger::RunLedger {
        store: &ledger,
        events: run_events.as_deref().map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
    };
    let deps = orchestrator::Deps { queue: &queue, config: &config, ledger: Some(ledger) };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        orchestrator::handle(event.payload, chrono::Utc::now(), deps).await.map_err(Error::from)
    }))
    .await
}
