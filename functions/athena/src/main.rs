//! Athena Lambda: wiring only. Environment (read once, at cold start):
//! `ATHENA_QUEUE_URL` (required: this function's own queue, for
//! continuations), `LAKE_BUCKET` (required: the run ledger), `RUN_EVENTS_TOPIC_ARN`
//! (announces completed runs; unset: none), `MAX_ROWS_PER_INVOCATION` (default 100000), `DLQ_URL` and
//! `MAX_RECEIVE_COUNT` (dead letters with their reason),
//! `ATHENA_WORKGROUP` and `ATHENA_OUTPUT_LOCATION` (optional defaults for
//! queries that name none).

use adapters::aws::{self, AthenaEngine, SnsPublisher, SqsSender};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::{LambdaEnv, dead_letter_target};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let mut config = athena::AthenaConfig::new(env.required("ATHENA_QUEUE_URL")?);
    config.max_rows_per_invocation = env.u64_or("MAX_ROWS_PER_INVOCATION", config.max_rows_per_invocation)?;
    config.dead_letter = dead_letter_target(&env)?;
    let sdk = aws::sdk_config().await;
    let mut engine = AthenaEngine::new(aws_sdk_athena::Client::new(&sdk));
    if let Some(workgroup) = env.optional("ATHENA_WORKGROUP")? {
        engine = engine.with_workgroup(workgroup);
    }
    if let Some(location) = env.optional("ATHENA_OUTPUT_LOCATION")? {
        engine = engine.with_output_location(location);
    }
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk));
    let ledger = aws::S3Store::new(aws::s3_client(&sdk)?, env.required("LAKE_BUCKET")?);
    let run_events = env.optional("RUN_EVENTS_TOPIC_ARN")?;
    let ledger = tributary_core::ledger::RunLedger {
        store: &ledger,
        events: run_events.as_deref().map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
    };
    let deps = athena::Deps { engine: &engine, topics: &topics, queue: &queue, config: &config, ledger: Some(ledger) };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = tributary_core::deadline::from_epoch_ms(event.context.deadline);
        Ok::<_, Error>(athena::handle_sqs(&event.payload, deadline, deps).await)
    }))
    .await
}
