//! Athena Lambda: wiring only. Environment (read once, at cold start):
//! `ATHENA_WORKGROUP` and `ATHENA_OUTPUT_LOCATION` (optional defaults for
//! queries that name none).

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use shared::adapters::aws::{self, AthenaEngine, LambdaEnv, SnsPublisher, SqsSender};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
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
    let deps = athena::Deps { engine: &engine, topics: &topics, queue: &queue };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(athena::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
