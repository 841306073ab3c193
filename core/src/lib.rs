//! tributary's core: what every function and the command line share, above
//! the public [`contracts`] and below the adapters.
//!
//! - [`ports`]: one narrow trait per outside capability (queue, topic, object
//!   store, query engine, secrets, HTTP); the `adapters` crate implements most of
//!   them (HTTP is Request's own `http.rs`, the local query engine `lakequery`,
//!   the table committer `tributary-iceberg`).
//! - [`batch`]: the SQS batch helper every SQS-triggered function uses.
//! - [`deadline`]: an invocation's deadline (Lambda's epoch milliseconds)
//!   as a tokio instant.
//! - [`env`](mod@env): the Lambda environment, read once at cold start, naming the
//!   variable on error.
//! - [`ledger`]: the run ledger in the lake (receipts, expected pages,
//!   completion); [`keys`]: every lake key, in one place.
//! - [`dead_letters`]: the dead-letter archive Notify keeps in the lake.
//! - [`state`]: incremental loading's cursor per pipeline, in the lake.
//! - [`catalog`]: a dataset's table definition (columns, Hive partition keys
//!   with Athena partition projection) and the catalog port that registers it.
//! - [`tables`]: the port that commits a run's staged files to a table
//!   (Iceberg) in one snapshot, and the claim that guards it.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`topology`]: the queues, DLQs, topics and subscriptions, declared once.
//! - [`schedules`]: the pipelines' EventBridge Scheduler schedules and the
//!   plan that makes a schedule group match the specs.
//! - [`telemetry`]: tracing set-up for Lambda (JSON) and the CLI (text).
//! - [`tenant`]: who sent a message (the SQS `SenderId` or the queue) and
//!   what that tenant owns: Request's and Persist's authentication.
//! - [`json`]: the tokenizer that keeps numbers' text, shared by Request and
//!   Persist.

pub mod batch;
pub mod calendar;
pub mod catalog;
pub mod dead_letters;
pub mod deadline;
pub mod env;
pub mod json;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod ports;
pub mod rerun;
pub mod schedules;
pub mod state;
pub mod streams;
pub mod tables;
pub mod telemetry;
pub mod tenant;
pub mod topology;
pub mod xray;
