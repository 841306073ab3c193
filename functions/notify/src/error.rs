//! Why an invocation event is not one Notify handles ([`EventError`]).

/// An invocation Notify cannot read, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// `Records` is there but is not an SQS batch.
    #[error("`Records`: {0}")]
    Records(#[source] serde_json::Error),
    /// `freshness_check` is there but is not a [`FreshnessCheck`](crate::FreshnessCheck).
    #[error("`freshness_check`: {0}")]
    FreshnessCheck(#[source] serde_json::Error),
    /// Neither field is there.
    #[error(
        "expected an SQS batch (`Records`) or a freshness check (`freshness_check`); the event's fields are {fields:?}"
    )]
    Unrecognised {
        /// The event's top-level field names (none when it is not an object).
        fields: Vec<String>,
    },
}
