//! Notify Lambda: wiring only. Its environment is the table
//! [`notify::LambdaConfig::ENV`], read and checked once, at cold start, by
//! [`notify::LambdaConfig::from_env`]; `infra/README.md` lists it.

use adapters::aws::{self, S3Store, SnsPublisher};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;
use tributary_core::env::LambdaEnv;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let notify::LambdaConfig { handler: config, lake_bucket } = notify::LambdaConfig::from_env(&LambdaEnv::from_env())?;
    let sdk = aws::sdk_config().await;
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let store = S3Store::new(aws::s3_client(&sdk)?, lake_bucket);
    let (topics, config, store) = (&topics, &config, &store);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        match notify::parse_event(event.payload, chrono::Utc::now())? {
            notify::NotifyEvent::DeadLetters(event) => {
                let response = notify::handle_sqs(&event, notify::Deps { topics, config, store: Some(store) }).await;
                Ok::<_, Error>(serde_json::to_value(response)?)
            }
            notify::NotifyEvent::Freshness { check, date } => {
                let deps = notify::FreshnessDeps { store, topics, config };
                let alert = notify::check_freshness(&check, date, deps).await?;
                Ok(serde_json::json!({ "pipeline": check.pipeline, "date": date, "fresh": alert.is_none() }))
            }
        }
    }))
    .await
}
