//! Athena: runs a `QueryMessage` through the [`QueryEngine`](tributary_core::ports::QueryEngine) port and
//! publishes its rows, one `QueryRow` each, to `reply_to` (normally the
//! query-results topic, which fans out to the orchestrator queue). It is
//! the generic query service of the design (the seed's V4): any team may
//! send it a query and a destination.
//!
//! The work of one message, bounded by the invocation's deadline:
//! 1. start the query (parameters bound by the engine, never spliced into
//!    the SQL) — or pick up the execution named by the message's
//!    `continuation`;
//! 2. wait for it with backoff; still running near the deadline: re-enqueue a
//!    continuation and finish; `FAILED`/`CANCELLED`: fail with the state and
//!    the engine's reason (the message reaches the DLQ and its alert);
//! 3. page through the results, publishing each page's rows (topic:
//!    PublishBatch, 10 entries and 256 KiB per call, with `pipeline` and
//!    `run_id` message attributes for filter policies) numbered from the
//!    continuation's `next_row`; a page token seen twice is an error, not a
//!    loop; near the deadline or past `max_rows_per_invocation`, re-enqueue a
//!    continuation with the next token and row number.
//!
//! A page published twice (a retried invocation) repeats the same row
//! indexes, which become the same request page keys: no duplicates in the
//! lake.
//!
//! The Lambda binary's settings come from its environment through
//! [`LambdaConfig::from_env`].

mod config;
mod deps;
mod error;
mod handler;

pub use config::LambdaConfig;

pub use deps::{AthenaConfig, Deps};
pub use error::AthenaError;
pub use handler::{MAX_ROW_MESSAGE_BYTES, Progress, handle_sqs, in_stable_order, run_query};
