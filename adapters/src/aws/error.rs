//! AWS SDK errors to [`PortError`]: retryable or permanent.
//!
//! The SDK has already retried throttling, 5xx and transport failures with
//! its standard retry strategy (3 attempts) before an error reaches us; what
//! is left is classified once more so the handler can report the record as a
//! batch item failure (transient: SQS redelivers it) or quarantine it
//! (permanent).

use aws_runtime::retries::classifiers::{THROTTLING_ERRORS, TRANSIENT_ERRORS};
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use tributary_core::ports::{BoxError, PortError};

/// The raw HTTP response type every aws-sdk-* crate uses (one smithy type,
/// re-exported by each service crate).
pub(crate) type RawResponse = aws_sdk_sqs::config::http::HttpResponse;

/// Server-side error codes that are worth retrying besides the SDK's own
/// throttling and transient lists (`aws_runtime::retries::classifiers`).
const SERVER_ERRORS: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServerException",
    "InternalServiceError",
    "InternalErrorException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "KMSThrottlingException",
    // AWS Glue: a service-side failure, a time-out, a conflicting writer,
    // a resource in transition (the `UpdateTable` API reference's errors).
    "InternalServiceException",
    "OperationTimeoutException",
    "ConcurrentModificationException",
    "ResourceNotReadyException",
];

/// Whether an AWS error code (or a `BatchResultErrorEntry.Code`) names a
/// throttling, time-out or server-side failure.
pub(crate) fn is_transient_code(code: &str) -> bool {
    THROTTLING_ERRORS.contains(&code) || TRANSIENT_ERRORS.contains(&code) || SERVER_ERRORS.contains(&code)
}

/// Whether `err` is worth retrying later: time-outs, dispatch (connection)
/// failures, unreadable responses, throttling codes and 5xx/429 statuses.
pub(crate) fn is_transient<E>(err: &SdkError<E, RawResponse>) -> bool
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ConstructionFailure(_) => false,
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            status >= 500 || status == 429 || service.err().code().is_some_and(is_transient_code)
        }
        // A variant added by a later SDK: retrying is the safe side, since a
        // permanent error would quarantine the record.
        _ => true,
    }
}

/// The error code of a service error, if any.
pub(crate) fn code<E>(err: &SdkError<E, RawResponse>) -> Option<&str>
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ServiceError(service) => service.err().code(),
        _ => None,
    }
}

/// Maps `err` from `operation` on `target` to [`PortError::Transient`] or
/// [`PortError::Permanent`], with the full error chain as the message and
/// `err` as the source.
pub(crate) fn port_error<E>(operation: &'static str, target: &str, err: SdkError<E, RawResponse>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let message = DisplayErrorContext(&err).to_string();
    let port_error = if is_transient(&err) {
        PortError::transient(operation, target, err)
    } else {
        PortError::permanent(operation, target, err)
    };
    port_error.with_message(message)
}

/// A request that could not be built (a required field missing): always a
/// bug on our side, so permanent.
pub(crate) fn build_error(operation: &'static str, target: &str, err: impl Into<BoxError>) -> PortError {
    let err = err.into();
    let message = format!("invalid request: {err}");
    PortError::permanent(operation, target, err).with_message(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_server_codes_are_transient() {
        for code in [
            "ThrottlingException",
            "RequestThrottled",
            "InternalError",
            "ServiceUnavailable",
            "InternalServiceException",
            "OperationTimeoutException",
            "ConcurrentModificationException",
        ] {
            assert!(is_transient_code(code), "{code}");
        }
        for code in [
            "AccessDenied",
            "InvalidParameterValue",
            "NoSuchKey",
            "InvalidInputException",
            "AccessDeniedException",
            "ResourceNumberLimitExceededException",
        ] {
            assert!(!is_transient_code(code), "{code}");
        }
    }
}
