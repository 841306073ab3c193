//! The `tributary` command line's library: the local runtime that runs whole
//! pipelines on one machine, the demo vendor API, lake read-back, the
//! dead-letter archive, and (feature `aws`) a deployed stack.
//!
//! Tests in `tests/` drive the same [`runtime::LocalRuntime`] the binary
//! uses.

#[cfg(feature = "aws")]
pub mod aws;
pub mod dlq;
pub mod lake;
pub mod location;
pub mod replay;
pub mod runtime;
pub mod scheduler;
pub mod status;
pub mod vendor;
