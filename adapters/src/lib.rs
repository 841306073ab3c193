//! Implementations of `tributary_core`'s ports.
//!
//! - [`local`]: in-process queues and topics with SQS/SNS semantics, a
//!   directory as the bucket, secrets from a file or the environment: what
//!   the command line runs whole pipelines on.
//! - `aws` (feature `aws`): the same ports over the aws-sdk-* clients.
//!
//! The HTTP client (reqwest, behind the SSRF guard) belongs to the `request`
//! function, the only code that calls vendor APIs.

#[cfg(feature = "aws")]
pub mod aws;
pub mod local;
