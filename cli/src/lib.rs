//! The `tributary` command line's library: the local runtime that runs whole
//! pipelines on one machine, the demo vendor API, lake read-back, the
//! dead-letter archive, a stream's Kappa replay ([`kappa`]), folders of pipeline specs and backfill ranges
//! ([`pipelines`]), a spec inferred from a vendor's answers ([`init`]), and
//! (feature `aws`) a deployed stack and its schedules.
//!
//! Tests in `tests/` drive the same [`runtime::LocalRuntime`] the binary
//! uses.

#[cfg(feature = "aws")]
pub mod aws;
pub mod demo_stream;
pub mod dlq;
pub mod init;
pub mod kappa;
pub mod lake;
pub mod lease;
pub mod location;
pub mod pipelines;
pub mod replay;
pub mod runtime;
pub mod scheduler;
#[cfg(feature = "aws")]
pub mod schedules;
pub mod status;
pub mod stream;
pub mod stream_specs;
pub mod vendor;
