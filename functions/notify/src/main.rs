//! Notify Lambda: wiring only. Environment (read once, at cold start):
//! `ALERTS_TOPIC_ARN` (required).

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use shared::adapters::aws::{self, LambdaEnv, SnsPublisher};

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let config = notify::NotifyConfig {
        alerts_topic: env.required("ALERTS_TOPIC_ARN")?,
        metrics: shared::metrics::MetricsTarget::Stdout,
    };
    let sdk = aws::sdk_config().await;
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let deps = notify::Deps { topics: &topics, config: &config };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(notify::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
