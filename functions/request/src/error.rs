//! Why a call failed ([`RequestError`]): each variant permanent (dead-lettered with an alert: a 4xx,
//! a refused address, a missing secret, a body past the cap) or transient (retried by SQS), with the
//! target redacted and credentials scrubbed.

use crate::{auth, paging, trust};
use std::time::Duration;
use tributary_core::batch::{BodyError, RecordError};
use tributary_core::ports::{BoxError, PortError};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The vendor answered with a non-success status.
    #[error("{target} answered HTTP {status}: {excerpt}")]
    Status {
        /// `METHOD url` without query string.
        target: String,
        /// Status code.
        status: u16,
        /// First bytes of the body.
        excerpt: String,
        /// Whether a retry may succeed: 5xx, 408, 429, or a status the
        /// spec's `response.status_actions` says to retry.
        retryable: bool,
        /// The `Retry-After` the vendor asked for.
        retry_after: Option<Duration>,
    },
    /// The call did not complete (timeout, connection failure), or the SSRF
    /// guard refused the address (permanent, naming host and address), or
    /// the body passed its size cap (permanent).
    #[error(transparent)]
    Transport(PortError),
    /// The host is not the message's own nor in `policy.allow.hosts`, or a
    /// redirect is unusable (permanent).
    #[error("{target}: {reason}")]
    Refused {
        /// `METHOD url` of the refused call.
        target: String,
        /// Why (the source's text, if there is one).
        reason: String,
        /// The error behind the refusal: an unusable redirect's URL
        /// error, a name check's.
        #[source]
        source: Option<BoxError>,
    },
    /// No time is left in the invocation for the call (retryable: SQS
    /// redelivers the record).
    #[error("{target}: {reason}")]
    Deadline {
        /// `METHOD url`.
        target: String,
        /// What did not fit (the source's text, if there is one).
        reason: String,
        /// The rate budget's refusal, when that is what did not fit.
        #[source]
        source: Option<BoxError>,
    },
    /// Retrying inside this invocation was stopped (a `Retry-After` past
    /// the cap, or a wait past the deadline); SQS redelivers the record.
    #[error("{last} ({reason})")]
    RetryLater {
        /// The last failure.
        last: Box<RequestError>,
        /// Why no further retry here.
        reason: String,
    },
    /// The credentials cannot be had.
    #[error("`{field}` = {value:?}: {problem}")]
    Auth {
        /// Field of the policy, e.g. `policy.auth.secret_id`.
        field: &'static str,
        /// Its value (a secret id or URL, never a secret).
        value: String,
        /// What went wrong (the source's text, if there is one).
        problem: String,
        /// Whether retrying cannot help.
        permanent: bool,
        /// The error that caused it: the secret store's, the token call's, or
        /// the token response's parser's.
        #[source]
        source: Option<BoxError>,
    },
    /// The response's content type is not the expected one.
    #[error(
        "response from {target} has content type {found:?}, expected {expected:?} (`policy.response.content_type`)"
    )]
    ContentType {
        /// `METHOD url`.
        target: String,
        /// The expected media type.
        expected: String,
        /// What the response said.
        found: String,
    },
    /// The response is not JSON.
    #[error("response from {target} is not JSON ({error}); body starts {excerpt}")]
    NotJson {
        /// `METHOD url`.
        target: String,
        /// The parser's error, with line and column.
        #[source]
        error: crate::page::NotJson,
        /// First bytes of the body.
        excerpt: String,
    },
    /// The pointer does not lead to what the mode needs.
    #[error("response from {target}: `{field}` {pointer:?} {problem}")]
    Pointer {
        /// `METHOD url`.
        target: String,
        /// `records_pointer`, `total_pointer` or `total_header`.
        field: &'static str,
        /// The pointer.
        pointer: String,
        /// What was found instead.
        problem: String,
    },
    /// The next page of a `cursor` run cannot be found in the response.
    #[error("response from {target}: {problem}")]
    Paging {
        /// `METHOD url`.
        target: String,
        /// What is wrong, naming `strategy.next`'s field.
        #[source]
        problem: paging::PagingError,
    },
    /// Sending the reply or storing the claim check failed.
    #[error("forwarding to {destination} failed: {source}")]
    Forward {
        /// Where it was going.
        destination: String,
        /// Port failure.
        source: PortError,
    },
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// The message asks for a secret, an allowance or a destination the
    /// deployment does not grant (permanent; see [`trust`]).
    #[error("refused by the deployment's trust settings: {0}")]
    Untrusted(#[from] trust::Untrusted),
    /// The sender is not authenticated, or names a pipeline it does not
    /// own (permanent; see [`tributary_core::tenant`]).
    #[error("refused: {0}")]
    Tenant(#[from] tributary_core::tenant::TenantError),
    /// Another error whose text held a credential the vendor echoed, with
    /// it replaced by `<redacted>` ([`RequestError::scrubbed`]); it keeps
    /// the original's retry semantics.
    #[error("{text}")]
    Scrubbed {
        /// The original error's text, scrubbed.
        text: String,
        /// Whether the original was permanent.
        permanent: bool,
        /// Whether the original was retryable within the invocation.
        retryable: bool,
        /// The original's `Retry-After`.
        retry_after: Option<Duration>,
    },
}

impl RecordError for RequestError {
    /// HTTP 4xx other than 408 and 429 (unless the spec says to retry),
    /// refused hosts and addresses, missing secrets, bodies past the cap
    /// and unreadable messages: retrying the same call cannot succeed; so
    /// is a JSON body without what `records_pointer` / `total_pointer`
    /// names (a configuration mistake: the same body comes back). A body
    /// that is not JSON may be a vendor's passing error page, so it is
    /// retried (by redelivery).
    fn is_permanent(&self) -> bool {
        match self {
            RequestError::Status { retryable, .. } => !retryable,
            RequestError::Transport(err) => !err.is_retryable(),
            RequestError::Forward { source, .. } => !source.is_retryable(),
            RequestError::Auth { permanent, .. } => *permanent,
            RequestError::Body(_)
            | RequestError::Untrusted(_)
            | RequestError::Tenant(_)
            | RequestError::Refused { .. }
            | RequestError::Paging { .. }
            | RequestError::Pointer { .. } => true,
            RequestError::Scrubbed { permanent, .. } => *permanent,
            RequestError::Deadline { .. }
            | RequestError::RetryLater { .. }
            | RequestError::ContentType { .. }
            | RequestError::NotJson { .. } => false,
        }
    }
}

impl RequestError {
    /// Whether a retry within this invocation may succeed: 5xx, 408, 429,
    /// statuses the spec marks `retry`, and transport failures.
    pub fn is_retryable(&self) -> bool {
        match self {
            RequestError::Status { retryable, .. } => *retryable,
            RequestError::Transport(err) => err.is_retryable(),
            RequestError::Scrubbed { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// This error, or when its text holds one of `credentials` (a vendor
    /// echoing the request in a body, an error page, a header or a next
    /// link), a [`RequestError::Scrubbed`] with them replaced by
    /// `<redacted>` and the same retry semantics.
    pub fn scrubbed(self, credentials: &auth::Credentials) -> RequestError {
        let text = self.to_string();
        let clean = credentials.scrub(text.clone());
        if clean == text {
            return self;
        }
        RequestError::Scrubbed {
            text: clean,
            permanent: self.is_permanent(),
            retryable: self.is_retryable(),
            retry_after: self.retry_after(),
        }
    }

    /// The pause a vendor asked for (`Retry-After`) that was too long to
    /// wait inside the invocation ([`RequestError::RetryLater`]): when the
    /// message should be delivered again.
    pub fn redeliver_after(&self) -> Option<Duration> {
        match self {
            RequestError::RetryLater { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// The `Retry-After` the vendor asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            RequestError::Status { retry_after, .. } | RequestError::Scrubbed { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
