//! tributary's library crate: everything the five functions and the command
//! line share.
//!
//! - [`contracts`]: the public, versioned message types (JSON Schema in
//!   `docs/contracts/`), and [`spec`]: the pipeline spec a schedule fires.
//! - [`strategy`]: the `CallStrategy` trait and its variants (pure planning).
//! - [`ports`]: one narrow trait per outside capability; [`adapters`]: the
//!   implementations (local ones that really work, HTTP through reqwest).
//! - [`batch`]: the SQS batch helper every SQS-triggered function uses.
//! - [`rate`]: per-pipeline rate budgets shared by concurrent vendor calls.
//! - [`state`]: incremental loading's cursor per pipeline, in the lake.
//! - [`topology`]: the queues, DLQs, topics and subscriptions, declared once.
//! - [`telemetry`]: tracing set-up for Lambda (JSON) and the CLI (text).

pub mod adapters;
pub mod batch;
pub mod contracts;
pub mod json;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod ports;
pub mod rate;
pub mod spec;
pub mod state;
pub mod strategy;
pub mod telemetry;
pub mod topology;
