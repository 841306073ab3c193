//! Dev-only helpers shared by tributary's tests (the end-to-end tests in
//! `tests/`, the functions' and the CLI's integration tests): fake vendor
//! APIs on a free loopback port ([`vendor`]), the lake read back as JSON
//! rows ([`lake`]), a run's pages as Persist receives them ([`runs`]), the
//! local broker's queues read out ([`queues`]), log lines captured in
//! memory ([`logs`]), the functions' configuration checks ([`env`](mod@env)), a
//! lake that dies after a chosen call, to kill a step part-way ([`crash`]), and
//! with feature `iceberg`
//! a directory lake with the local Iceberg catalog and its tables read back
//! (`iceberg`).
//!
//! Helpers panic instead of returning errors: they run in tests only.

pub mod crash;
pub mod env;
#[cfg(feature = "iceberg")]
pub mod iceberg;
pub mod lake;
pub mod logs;
pub mod queues;
pub mod runs;
pub mod vendor;
