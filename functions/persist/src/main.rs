//! Persist Lambda: wiring only. Its environment is the table
//! [`persist::LambdaConfig::ENV`], read and checked once, at cold start, by
//! [`persist::LambdaConfig::from_env`]; `infra/README.md` lists it.
//! The SDK's endpoint (AWS_ENDPOINT_URL, for an emulator) also redirects
//! the Iceberg FileIO. Metrics go to stdout (EMF).

use std::sync::Arc;

use adapters::aws::{self, GlueCatalog, S3Store};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::{self, LambdaEnv};
use tributary_iceberg::glue::{GlueOptimizers, GlueSettings, OptimizerSettings, glue_committer};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    // Runs started and completed, counted by the run ledger (EMF on stdout).
    tributary_core::metrics::count_runs_to("persist", tributary_core::metrics::MetricsTarget::Stdout);
    let persist::LambdaConfig { handler: config, lake_bucket, run_events_topic, glue_database, table_optimizers } =
        persist::LambdaConfig::from_env(&LambdaEnv::from_env())?;
    let sdk = aws::sdk_config().await;
    let catalog = glue_database.clone().map(|database| GlueCatalog::new(&sdk, database, &lake_bucket));
    let store: Arc<dyn tributary_core::ports::ObjectStore> =
        Arc::new(S3Store::new(aws::s3_client(&sdk)?, lake_bucket.clone()));
    let tables = match glue_database {
        Some(database) => {
            let settings = GlueSettings {
                database,
                bucket: lake_bucket,
                region: sdk.region().map(ToString::to_string),
                endpoint: sdk.endpoint_url().map(ToString::to_string),
                path_style: LambdaEnv::from_env().flag(&env::S3_FORCE_PATH_STYLE)?,
            };
            let committer = glue_committer(&settings, store.clone()).await?;
            Some(match table_optimizers {
                Some(o) => {
                    let days = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
                    let settings = OptimizerSettings {
                        kinds: o.kinds,
                        role_arn: o.role_arn,
                        snapshot_retention_days: days(o.snapshot_retention_days),
                        snapshots_to_retain: days(o.snapshots_to_retain),
                        orphan_file_retention_days: days(o.orphan_file_retention_days),
                    };
                    committer
                        .with_housekeeping(Arc::new(GlueOptimizers::new(aws_sdk_glue::Client::new(&sdk), settings)))
                }
                None => committer,
            })
        }
        None => None,
    };
    let queue = aws::SqsSender::new(aws_sdk_sqs::Client::new(&sdk));
    let topics = aws::SnsPublisher::new(aws_sdk_sns::Client::new(&sdk));
    let deps = persist::Deps {
        store: store.as_ref(),
        queue: &queue,
        run_events: run_events_topic
            .as_deref()
            .map(|topic| (&topics as &dyn tributary_core::ports::TopicPublisher, topic)),
        catalog: catalog.as_ref().map(|c| c as &dyn tributary_core::catalog::Catalog),
        tables: tables.as_ref().map(|t| t as &dyn tributary_core::tables::TableCommitter),
        config: &config,
    };
    // SQS messages from the persist queue, or a stream batch from a Kinesis
    // or Kafka event source mapping (`persist::stream`), told apart by
    // their `eventSource`.
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        if persist::stream::stream_event_kind(&event.payload).is_some() {
            return Ok::<_, Error>(persist::stream::handle_stream_event(event.payload, deps).await?);
        }
        let sqs: SqsEvent = serde_json::from_value(event.payload)?;
        Ok::<_, Error>(serde_json::to_value(persist::handle_sqs(&sqs, deps).await)?)
    }))
    .await
}
