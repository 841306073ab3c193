//! Local adapters: what the `tributary` CLI runs whole pipelines on.
//!
//! - [`Broker`]: in-process SQS queues (batches, visibility timeout, receive
//!   count, redrive to a DLQ after `maxReceiveCount`, size limit) and SNS
//!   topics (fan-out to queues, raw or enveloped, filter policies; file
//!   sinks standing in for e-mail/SMS).
//! - [`DirStore`]: a directory as the bucket, with atomic writes.
//! - [`FileSecrets`]: secrets from the environment or a JSON file.
//! - [`DirCatalog`]: each table's Glue `TableInput` as
//!   `<lake>/_catalog/<table>.glue.json`, what the Glue catalog would get.

mod broker;
mod catalog;
mod dir_store;
mod file_stream;
mod secrets;

pub use broker::{Broker, BrokerStats, QueueConfig, SendAs, Subscription};
pub use catalog::{DirCatalog, LOCAL_BUCKET};
pub use dir_store::DirStore;
pub use file_stream::FileStream;
pub use secrets::FileSecrets;
