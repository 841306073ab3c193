//! The `tributary` command line's library: the local runtime that runs whole
//! pipelines on one machine, the demo vendor API, and lake read-back.
//!
//! Tests in `tests/` drive the same [`runtime::LocalRuntime`] the binary
//! uses.

pub mod lake;
pub mod replay;
pub mod runtime;
pub mod scheduler;
pub mod status;
pub mod vendor;
