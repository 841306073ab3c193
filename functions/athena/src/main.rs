//! Athena Lambda: wiring only. Its environment is the table
//! [`athena::LambdaConfig::ENV`], read and checked once, at cold start, by
//! [`athena::LambdaConfig::from_env`]; `infra/README.md` lists it.

use adapters::aws::{self, AthenaEngine, SnsPublisher, SqsSender};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::LambdaEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    // Runs started and completed, counted by the run ledger (EMF on stdout).
    tributary_core::metrics::count_runs_to("athena", tributary_core::metrics::MetricsTarget::Stdout);
    let athena::LambdaConfig { handler: config, lake_bucket, run_events_topic, workgroup, output_location } =
        athena::LambdaConfig::from_env(&LambdaEnv::from_env())?;
    let sdk = aws::sdk_config().await;
    let mut engine = AthenaEngine::new(aws_sdk_athena::Client::new(&sdk));
    if let Some(workgroup) = workgroup {
        engine = engine.with_workgroup(workgroup);
    }
    if let Some(location) = output_location {
        engine = engine.with_output_location(location);
    }
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk));
    let ledger = aws::S3Store::new(aws::s3_client(&sdk)?, lake_bucket);
    let ledger = tributary_core::ledger::RunLedger {
        store: &ledger,
        events: run_events_topic.as_deref().map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
    };
    let deps = athena::Deps { engine: &engine, topics: &topics, queue: &queue, config: &config, ledger: Some(ledger) };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = tributary_core::deadline::from_epoch_ms(event.context.deadline);
        Ok::<_, Error>(athena::handle_sqs(&event.payload, deadline, deps).await)
    }))
    .await
}
