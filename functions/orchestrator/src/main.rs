//! Orchestrator Lambda: wiring only. Its environment is the table
//! [`orchestrator::LambdaConfig::ENV`], read and checked once, at cold start, by
//! [`orchestrator::LambdaConfig::from_env`]; `infra/README.md` lists it.

use adapters::aws::{self, SqsSender};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;
use tributary_core::env::LambdaEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    // Runs started and completed, counted by the run ledger (EMF on stdout).
    tributary_core::metrics::count_runs_to("orchestrator", tributary_core::metrics::MetricsTarget::Stdout);
    let config = orchestrator::LambdaConfig::from_env(&LambdaEnv::from_env())?;
    let sdk = aws::sdk_config().await;
    // A count-first run's chunk of 1,000 pages goes as 100 calls, this many at once.
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk))
        .with_max_batch_bytes(config.max_batch_bytes.unwrap_or(aws::DEFAULT_MAX_BATCH_BYTES))
        .with_max_in_flight(config.handler.fanout.sends_in_flight);
    let ledger = aws::S3Store::new(aws::s3_client(&sdk)?, config.lake_bucket.clone());
    let topics = aws::SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let ledger = tributary_core::ledger::RunLedger {
        store: &ledger,
        events: config
            .run_events_topic
            .as_deref()
            .map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
    };
    let deps = orchestrator::Deps { queue: &queue, config: &config.handler, ledger: Some(ledger) };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = tributary_core::deadline::from_epoch_ms(event.context.deadline);
        orchestrator::handle(event.payload, chrono::Utc::now(), deadline, deps).await.map_err(Error::from)
    }))
    .await
}
