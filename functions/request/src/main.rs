//! Request Lambda: wiring only. Environment (read once, at cold start):
//! `LAKE_BUCKET` (required: claim-check payloads and the ledger of `cursor`
//! runs), `MAX_MESSAGE_BYTES` (default 262144, SQS's default
//! `MaximumMessageSize`; up to 1048576 for queues raised to 1 MiB),
//! `HTTP_TIMEOUT_SECS` (default 30), `HTTP_CONNECT_TIMEOUT_SECS` (default
//! 10), `HTTP_MAX_ATTEMPTS` (default 3), `MAX_RETRY_AFTER_SECS` (default 30),
//! `MAX_RESPONSE_BYTES` (default 67108864), `RUN_EVENTS_TOPIC_ARN`
//! (optional), `TRIBUTARY_S3_FORCE_PATH_STYLE` (default false), `DLQ_URL` and
//! `MAX_RECEIVE_COUNT` (dead letters with their reason).
//!
//! Each invocation's deadline (`Context.deadline`, epoch milliseconds)
//! reaches the handler: no call or retry wait runs past it.

use adapters::aws::{self, S3Store, SecretsManagerStore, SnsPublisher, SqsSender};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use request::http::{DEFAULT_CONNECT_TIMEOUT, HttpOptions, ReqwestClient};
use tributary_core::env::{LambdaEnv, dead_letter_target};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let defaults = request::RequestConfig::default();
    let config = request::RequestConfig {
        max_message_bytes: env.usize_or("MAX_MESSAGE_BYTES", defaults.max_message_bytes)?,
        max_attempts: env.usize_or("HTTP_MAX_ATTEMPTS", defaults.max_attempts)?,
        timeout: env.secs_or("HTTP_TIMEOUT_SECS", defaults.timeout)?,
        max_retry_after: env.secs_or("MAX_RETRY_AFTER_SECS", defaults.max_retry_after)?,
        max_response_bytes: env.u64_or("MAX_RESPONSE_BYTES", defaults.max_response_bytes)?,
        run_events_topic: env.optional("RUN_EVENTS_TOPIC_ARN")?,
        dead_letter: dead_letter_target(&env)?,
        metrics: tributary_core::metrics::MetricsTarget::Stdout,
        ..defaults
    };
    let bucket = env.required("LAKE_BUCKET")?;
    let sdk = aws::sdk_config().await;
    let connect_timeout = env.secs_or("HTTP_CONNECT_TIMEOUT_SECS", DEFAULT_CONNECT_TIMEOUT)?;
    let http = ReqwestClient::with_options(HttpOptions { connect_timeout, ..HttpOptions::default() })?;
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk)).with_max_batch_bytes(config.max_message_bytes);
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let store = S3Store::new(aws::s3_client(&sdk)?, bucket);
    // Cached secrets, OAuth tokens and rate budgets live across warm invocations.
    let secrets = SecretsManagerStore::new(aws_sdk_secretsmanager::Client::new(&sdk));
    let warm = request::Warm::default();
    let (http, queue, topics, store, secrets, warm, config) =
        (&http, &queue, &topics, &store, &secrets, &warm, &config);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = tributary_core::deadline::from_epoch_ms(event.context.deadline);
        let deps = request::Deps { http, queue, topics, store, secrets, warm, deadline, config };
        Ok::<_, Error>(request::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
