//! AWS adapters: the [`tributary_core::ports`] over the aws-sdk-* clients (feature
//! `aws`).
//!
//! - [`SqsSender`], the [`tributary_core::ports::QueueSender`], by `SendMessageBatch`.
//! - [`SnsPublisher`], the [`tributary_core::ports::TopicPublisher`], by `PublishBatch`.
//! - [`S3Store`], the [`tributary_core::ports::ObjectStore`], on one bucket (and prefix).
//! - [`SecretsManagerStore`], the [`tributary_core::ports::SecretStore`], with a TTL cache.
//! - [`AthenaEngine`], the [`tributary_core::ports::QueryEngine`].
//! - [`GlueCatalog`], the [`tributary_core::catalog::Catalog`], on one Glue
//!   database.
//! - [`StackOutputs`]: a deployed stack's outputs (queue URLs, bucket,
//!   database, workgroup) for the CLI's AWS mode.
//! - `ScheduleGroup` (feature `scheduler`, operator tools only): one
//!   EventBridge Scheduler schedule group as `tributary_core::schedules`
//!   definitions.
//! - [`sdk_config`] and [`s3_client`], for clients built once at cold start
//!   (the environment itself is read by [`tributary_core::env`]).
//!
//! Errors: throttling, 5xx, time-outs and connection failures (after the
//! SDK's own retries) become [`tributary_core::ports::PortError::Transient`];
//! everything else [`tributary_core::ports::PortError::Permanent`], or `NotFound` /
//! `TooLarge` where the port says so.
//!
//! The adapters are tested against moto in server mode
//! (`adapters/tests/it/aws_adapters.rs`; `scripts/moto.sh`).

pub mod batching;
mod error;
mod provision;

mod athena;
mod glue;
#[cfg(feature = "kinesis")]
mod kinesis;
mod s3;
#[cfg(feature = "scheduler")]
mod scheduler;
mod secrets;
mod sns;
mod sqs;
pub mod stack;

pub use athena::{AthenaEngine, DEFAULT_QUERY_TIMEOUT, RESULTS_PAGE_SIZE};
pub use batching::{BatchClient, BatchLimits, DEFAULT_MAX_BATCH_BYTES, MAX_BATCH_ENTRIES};
pub use glue::GlueCatalog;
#[cfg(feature = "kinesis")]
pub use kinesis::{KinesisReader, MAX_GET_RECORDS};
pub use provision::{Provisioned, provision};
pub use s3::S3Store;
#[cfg(feature = "scheduler")]
pub use scheduler::ScheduleGroup;
pub use secrets::{DEFAULT_SECRET_TTL, SecretsManagerStore};
pub use sns::{SnsPublisher, TopicSubscription, list_topic_subscriptions};
pub use sqs::SqsSender;
pub use stack::StackOutputs;

use aws_config::BehaviorVersion;
use tributary_core::env::{self, EnvError, LambdaEnv};

/// Environment variable turning on S3 path-style addressing
/// (`http://host/bucket/key`), which emulators such as moto need: `true` or
/// `false` (default). Declared in [`env::S3_FORCE_PATH_STYLE`].
pub const S3_FORCE_PATH_STYLE_VAR: &str = env::S3_FORCE_PATH_STYLE.name;

/// The shared SDK configuration from the environment, with the latest
/// behaviour version: region (`AWS_REGION`), credentials (environment, web
/// identity, profile, container and instance metadata providers; no SSO and
/// no `credential_process`, which this build leaves out), and endpoint:
/// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_<SERVICE>`) redirects every
/// client, e.g. to moto on `http://127.0.0.1:<port>`.
///
/// Call once at cold start and build every client from the result.
pub async fn sdk_config() -> aws_config::SdkConfig {
    config_loader().load().await
}

/// The loader behind [`sdk_config`], to override settings (region,
/// credentials) before loading, as tests do.
pub fn config_loader() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest())
}

/// An S3 client from `config`, path-style when
/// `TRIBUTARY_S3_FORCE_PATH_STYLE=true` ([`S3_FORCE_PATH_STYLE_VAR`]).
///
/// # Errors
/// [`EnvError::Malformed`] when the variable is not a boolean.
pub fn s3_client(config: &aws_config::SdkConfig) -> Result<aws_sdk_s3::Client, EnvError> {
    let force_path_style = LambdaEnv::from_env().flag(&env::S3_FORCE_PATH_STYLE)?;
    Ok(s3_client_with_path_style(config, force_path_style))
}

/// An S3 client from `config` with path-style addressing on or off
/// (virtual-hosted style, `bucket.host`, is S3's default).
pub fn s3_client_with_path_style(config: &aws_config::SdkConfig, force_path_style: bool) -> aws_sdk_s3::Client {
    let s3_config = aws_sdk_s3::config::Builder::from(config).force_path_style(force_path_style).build();
    aws_sdk_s3::Client::from_conf(s3_config)
}
