//! Request Lambda: wiring only. Environment (read once, at cold start, and
//! checked by [`request::LambdaConfig::from_env`]): `LAKE_BUCKET` (required:
//! claim-check payloads and the ledger of `cursor` runs), `MAX_MESSAGE_BYTES`
//! (1024..=1048576, default 262144, SQS's default `MaximumMessageSize`; up
//! to 1048576 for queues raised to 1 MiB), `HTTP_TIMEOUT_SECS` (1..=900,
//! default 30), `HTTP_CONNECT_TIMEOUT_SECS` (1..=900, default 10),
//! `HTTP_MAX_ATTEMPTS` (1..=10, default 3), `MAX_RETRY_AFTER_SECS` (0..=900,
//! default 30), `MAX_RESPONSE_BYTES` (1 to 10 GiB, default 67108864),
//! `RUN_EVENTS_TOPIC_ARN` (optional), `TRIBUTARY_S3_FORCE_PATH_STYLE`
//! (default false; read by `adapters::aws::s3_client`), `DLQ_URL` and
//! `MAX_RECEIVE_COUNT` (dead letters with their reason; 1..=1000, default 5).
//! Trust settings (`request::trust`, docs/request.md): `REPLY_DESTINATIONS`
//! (required: the stack's queue URLs and topic ARNs answers may go to,
//! comma-separated), `SECRET_GRANTS` (JSON: the secrets messages may name
//! and the hosts each may go to; default none), `ALLOW_LOOPBACK` and
//! `ALLOW_PRIVATE_NETWORKS` (default false: what a message's `allow` may
//! open at most). `REQUEST_QUEUE_URL` (optional): Request's own queue, where
//! a vendor's `Retry-After` longer than `MAX_RETRY_AFTER_SECS` becomes the
//! message's visibility (`ChangeMessageVisibility`).
//! `REQUEST_MAX_CONCURRENCY` (1..=1000, default 1): the request queue's
//! event source mapping `MaximumConcurrency`, the most instances that call
//! at once; each keeps to that fraction of a pipeline's rate budget
//! (`request::rate::share`), so all of them together keep to the spec's.
//!
//! Each invocation's deadline (`Context.deadline`, epoch milliseconds)
//! reaches the handler: no call or retry wait runs past it.

use adapters::aws::{self, S3Store, SecretsManagerStore, SnsPublisher, SqsSender};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use request::http::{HttpOptions, ReqwestClient};
use tributary_core::env::LambdaEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let request::LambdaConfig { handler: config, lake_bucket, connect_timeout } =
        request::LambdaConfig::from_env(&LambdaEnv::from_env())?;
    let sdk = aws::sdk_config().await;
    let http = ReqwestClient::with_options(HttpOptions { connect_timeout, ..HttpOptions::default() })?;
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&sdk)).with_max_batch_bytes(config.max_message_bytes);
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let store = S3Store::new(aws::s3_client(&sdk)?, lake_bucket);
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
