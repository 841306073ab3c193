//! The `tributary` command line's library: the local runtime that runs whole
//! pipelines on one machine, the demo vendor API, lake read-back, folders of
//! pipeline specs and backfill ranges ([`pipelines`]), and with feature
//! `aws` the stack-side commands `deploy-schedules` and `trigger`.
//!
//! Tests in `tests/` drive the same [`runtime::LocalRuntime`] the binary
//! uses.

pub mod lake;
pub mod pipelines;
pub mod replay;
pub mod runtime;
pub mod scheduler;
#[cfg(feature = "aws")]
pub mod schedules;
pub mod status;
pub mod vendor;
