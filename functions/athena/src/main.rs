//! Athena Lambda: wiring only. Environment (read once, at cold start, and
//! checked by [`athena::LambdaConfig::from_env`]): `ATHENA_QUEUE_URL`
//! (required: this function's own queue, for continuations), `LAKE_BUCKET`
//! (required: the run ledger), `RUN_EVENTS_TOPIC_ARN` (announces completed
//! runs; unset: none), `MAX_ROWS_PER_INVOCATION` (at least 1, default
//! 100000), `DLQ_URL` and `MAX_RECEIVE_COUNT` (dead letters with their
//! reason; 1..=1000, default 5), `ATHENA_WORKGROUP` (a workgroup name) and
//! `ATHENA_OUTPUT_LOCATION` (an `s3://` URI): optional defaults for queries
//! that name none.

use adapters::aws::{self, AthenaEngine, SnsPublisher, SqsSender};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::LambdaEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
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
