//! Request: the only code that calls vendor APIs.
//!
//! For each `RequestMessage` it makes the HTTP call (GET or POST, query,
//! headers, JSON body) under the message's `policy` — credentials read by
//! secret id ([`auth`]), the SSRF guard (host allow-list, resolved addresses
//! checked in the HTTP adapter, redirects followed here and re-checked), the
//! pipeline's rate budget ([`crate::rate`]), response rules — and retries
//! with exponential backoff, full jitter and `Retry-After` ([`retry`]),
//! always inside the invocation's deadline. It parses the JSON response and,
//! by the message's `mode`:
//! - `records`: extracts the array at `records_pointer` and sends a
//!   `PersistMessage` to `reply_to` — inline, or as a claim check (records
//!   in the lake, a pointer in the message) when the message would exceed
//!   the queue's maximum message size; with `next` (the `cursor` strategy)
//!   it then sends the next page's message itself ([`paging`]), or records
//!   the run's page count in the ledger on the last page;
//!   With `cursor_field` (incremental loading) it records the page's highest
//!   cursor value in the lake first.
//! - `probe`: reads the total at `total_pointer` and sends a `ProbeReply`.
//!
//! Any failure fails that record alone (`batchItemFailures`): SQS redelivers
//! it after its visibility timeout and dead-letters it after
//! `maxReceiveCount`, where Notify alerts; permanent failures (a 4xx, a
//! refused address, a missing secret, a body past the size cap) go to the
//! DLQ at once. See `docs/request.md`. The Lambda binary's settings come
//! from its environment through [`LambdaConfig::from_env`].

pub mod auth;
mod config;
mod deps;
mod error;
mod fetch;
mod handler;
pub mod http;
mod page;
pub mod paging;
pub mod pause;
pub mod rate;
pub mod retry;
pub mod scrub;
pub mod secret_ref;
pub mod ssrf;
pub mod trust;

pub use config::{LambdaConfig, MAX_ATTEMPTS_RANGE, MAX_RESPONSE_BYTES_RANGE, MAX_RETRY_AFTER_SECS_RANGE};
pub use fetch::{Fetched, fetch};

pub use deps::{
    BASE_MEMORY_BYTES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RESPONSE_BYTES, Deps, MAX_REDIRECTS,
    PAGE_MEMORY_PER_BODY_BYTE, RequestConfig, Warm, peak_memory_bytes,
};
pub use error::RequestError;
pub use handler::{Outcome, handle_message, handle_sqs, http_request, normalize_body};
