//! Request Lambda: wiring only. Its environment is the table
//! [`request::LambdaConfig::ENV`], read and checked once, at cold start, by
//! [`request::LambdaConfig::from_env`]; `infra/README.md` lists it.
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
    // Runs started and completed, counted by the run ledger (EMF on stdout).
    tributary_core::metrics::count_runs_to("request", tributary_core::metrics::MetricsTarget::Stdout);
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
