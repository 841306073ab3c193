//! Persist Lambda: wiring only. Environment (read once, at cold start, and
//! checked by [`persist::LambdaConfig::from_env`]): `LAKE_BUCKET` (required),
//! `ZSTD_LEVEL` (1..=22, default 1), `ROW_GROUP_ROWS` (1..=1048576, default
//! 131072), `MAX_PAGE_BYTES` (bytes of a page after decompression, 1 MiB to 10
//! GiB, default 268435456), `MAX_COLUMNS` (columns of a dataset, 1..=10000,
//! default 1000), `TRIBUTARY_S3_FORCE_PATH_STYLE` (default false; read by
//! `adapters::aws::s3_client`), `DLQ_URL` and `MAX_RECEIVE_COUNT` (dead letters
//! with their reason; 1..=1000, default 5), `RUN_EVENTS_TOPIC_ARN` (announces
//! completed runs; unset: none), `GLUE_DATABASE` (the lake's Glue database:
//! each Parquet dataset's Hive table is created or updated there when its
//! schema changes, and each Iceberg dataset's table is committed there, one
//! snapshot per run, its files under `s3://<LAKE_BUCKET>/_iceberg/warehouse/`;
//! unset: no tables are registered, and pages of Iceberg datasets fail
//! naming `target.table_format`). The SDK's endpoint (AWS_ENDPOINT_URL, for an
//! emulator) also redirects the Iceberg FileIO. Metrics go to stdout (EMF).

use std::sync::Arc;

use adapters::aws::{self, GlueCatalog, S3Store};
use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use tributary_core::env::{LambdaEnv, optional_bool};
use tributary_iceberg::glue::{GlueSettings, glue_committer};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tributary_core::telemetry::init_lambda();
    let persist::LambdaConfig { handler: config, lake_bucket, run_events_topic, glue_database } =
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
                path_style: optional_bool(aws::S3_FORCE_PATH_STYLE_VAR, false)?,
            };
            Some(glue_committer(&settings, store.clone()).await?)
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
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        Ok::<_, Error>(persist::handle_sqs(&event.payload, deps).await)
    }))
    .await
}
