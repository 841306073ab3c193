//! Persist Lambda: wiring only. Environment (read once, at cold start):
//! `LAKE_BUCKET` (required), `ZSTD_LEVEL` (default 1), `ROW_GROUP_ROWS`
//! (default 131072), `TRIBUTARY_S3_FORCE_PATH_STYLE` (default false), `DLQ_URL`
//! and `MAX_RECEIVE_COUNT` (dead letters with their reason), `RUN_EVENTS_TOPIC_ARN`
//! (announces completed runs; unset: none).

use adapters::aws::{self, S3Store};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::{LambdaEnv, dead_letter_target};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let env = LambdaEnv::from_env();
    let defaults = persist::WriterConfig::default();
    let zstd_level = env.u64_or("ZSTD_LEVEL", 1)?;
    let writer = persist::WriterConfig {
        zstd_level: i32::try_from(zstd_level).map_err(|_| format!("ZSTD_LEVEL={zstd_level} is out of range 1..=22"))?,
        row_group_rows: env.usize_or("ROW_GROUP_ROWS", defaults.row_group_rows)?,
        ..defaults
    };
    let config =
        persist::PersistConfig { writer, dead_letter: dead_letter_target(&env)?, ..persist::PersistConfig::default() };
    let bucket = env.required("LAKE_BUCKET")?;
    let sdk = aws::sdk_config().await;
    let store = S3Store::new(aws::s3_client(&sdk)?, bucket);
    let queue = aws::SqsSender::new(aws_sdk_sqs::Client::new(&sdk));
    let topics = aws::SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let run_events = env.optional("RUN_EVENTS_TOPIC_ARN")?;
    let deps = persist::Deps {
        store: &store,
        queue: &queue,
        run_events: run_events.as_deref().map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
        config: &config,
    };
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(persist::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
