//! Request Lambda: wiring only. Environment (read once, at cold start):
//! `LAKE_BUCKET` (required: claim-check payloads), `MAX_MESSAGE_BYTES`
//! (default 262144), `HTTP_TIMEOUT_SECS` (default 30), `HTTP_MAX_ATTEMPTS`
//! (default 3), `TRIBUTARY_S3_FORCE_PATH_STYLE` (default false), `DLQ_URL` and
//! `MAX_RECEIVE_COUNT` (dead letters with their reason).

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use shared::adapters::aws::{self, LambdaEnv, S3Store, SnsPublisher, SqsSender, dead_letter_target};
use shared::adapters::http::ReqwestClient;

#[tokio::main]
async fn main() -> Result<(), Error> {
    shared::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let defaults = request::RequestConfig::default();
    let config = request::RequestConfig {
        max_message_bytes: env.usize_or("MAX_MESSAGE_BYTES", defaults.max_message_bytes)?,
        max_attempts: env.usize_or("HTTP_MAX_ATTEMPTS", defaults.max_attempts)?,
        timeout: env.secs_or("HTTP_TIMEOUT_SECS", defaults.timeout)?,
        dead_letter: dead_letter_target(&env)?,
        metrics: shared::metrics::MetricsTarget::Stdout,
        ..defaults
    };
    let bucket = env.required("LAKE_BUCKET")?;
    let sdk = aws::sdk_config().await;
    let http = ReqwestClient::new()?;
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk)).with_max_batch_bytes(config.max_message_bytes);
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let store = S3Store::new(aws::s3_client(&sdk)?, bucket);
    let deps = request::Deps { http: &http, queue: &queue, topics: &topics, store: &store, config: &config };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(request::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
