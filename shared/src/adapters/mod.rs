//! Implementations of the [`crate::ports`].
//!
//! - [`http`]: the reqwest-based [`crate::ports::HttpClient`], used in Lambda
//!   and locally alike, behind [`ssrf`]'s address guard.
//! - [`local`]: in-process queues and topics with SQS/SNS semantics, a
//!   directory as the bucket, secrets from a file or the environment.

#[cfg(feature = "aws")]
pub mod aws;
pub mod http;
pub mod local;
pub mod ssrf;
