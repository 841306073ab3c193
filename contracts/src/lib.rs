//! tributary's public contracts, version 1: the JSON every function sends
//! and receives, and the pipeline spec a schedule fires ([`spec`]).
//!
//! Other teams depend on this crate alone (serde, schemars, url, chrono,
//! chrono-tz for [`schedule`]'s time zones, and http's header grammar; no
//! HTTP client, runtime, cron engine or AWS SDK).
//!
//! Other teams send [`RequestMessage`] and [`PersistMessage`] to our queues
//! and receive [`Alert`]s, so these types are public API. Each carries
//! `version` ([`V1`]), `pipeline` and `run_id`, and where relevant the page.
//! Readers are tolerant (unknown fields are ignored, so a producer may add
//! fields within version 1); a different `version` is refused.
//!
//! The JSON Schemas in `docs/contracts/` are generated from these types by
//! [`schemas`], and the book's reference pages beside them by
//! [`references`] (`tributary schema --out docs/contracts` writes both); a
//! test fails when the committed files are stale.

mod alert;
mod common;
pub mod digest;
pub mod paging;
mod persist;
mod probe;
mod query;
pub mod reference;
mod request;
mod run;
pub mod schedule;
pub mod spec;
pub mod stream;
mod target;
pub mod template;
mod version;

pub use alert::{Alert, AlertExample};
pub use common::{
    Destination, HttpMethod, PageRef, REDACTED_VALUE, RunId, RunIdError, RunIdProblem, is_credential_param,
    redacted_url,
};
pub use paging::{NextPage, PageParams};
pub use persist::{Layout, Payload, PayloadFormat, PersistMessage, RawRecords};
pub use probe::ProbeReply;
pub use query::{QueryContinuation, QueryMessage, QueryRow};
pub use request::{
    Auth, CallPolicy, Continuation, HttpCall, NetworkPolicy, PlannedTotal, RateBudget, RequestMessage, RequestMode,
    ResponseRules, StatusAction,
};
pub use run::RunCompleted;
pub use target::{
    Compression, DeclaredField, FieldType, FieldTypeError, FileSettings, Granularity, MAX_ROW_GROUP_ROWS, NamePolicy,
    Partitioning, PersistTarget, SchemaChange, TableFormat, TimeTransform, TimeUnit, Timestamps, WriteDisposition,
};
pub use version::V1;

use serde::de::DeserializeOwned;

use crate::spec::PipelineSpec;

/// A message that failed to decode, with the path of the offending field.
#[derive(Debug, thiserror::Error)]
#[error("invalid {contract}: at `{path}`: {message}")]
pub struct ContractError {
    /// Which contract was expected, e.g. `RequestMessage`.
    pub contract: &'static str,
    /// Path of the field that failed, e.g. `page.index` (`.` for the root).
    pub path: String,
    /// serde's description of the failure.
    pub message: String,
}

/// Decodes a JSON value into contract `T`, naming the failing field.
///
/// # Errors
/// [`ContractError`] with the field path (from `serde_path_to_error`) when
/// the value does not match `T`, including an unsupported `version`.
pub fn decode<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ContractError> {
    serde_path_to_error::deserialize(value).map_err(|err| ContractError {
        contract: short_type_name::<T>(),
        path: err.path().to_string(),
        message: spec::plain_types(err.inner().to_string()),
    })
}

/// Deserialises a contract from JSON text directly (not through a
/// `serde_json::Value`, so [`RawRecords`] keep their text), naming the
/// failing field's path.
///
/// # Errors
/// [`ContractError`] with the path, e.g. `payload.records`, and what is wrong.
pub fn decode_str<T: DeserializeOwned>(text: &str) -> Result<T, ContractError> {
    let fail = |path: String, message: String| ContractError { contract: short_type_name::<T>(), path, message };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|err| fail(err.path().to_string(), spec::plain_types(err.inner().to_string())))?;
    deserializer.end().map_err(|err| fail(".".into(), err.to_string()))?;
    Ok(value)
}

/// Serialises a contract to its JSON text. Contracts hold only strings,
/// numbers, maps and JSON values, so this cannot fail in practice; the error
/// is still returned rather than unwrapped.
///
/// # Errors
/// `serde_json::Error` if a value cannot be represented in JSON.
pub fn encode<T: serde::Serialize>(message: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string(message)
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

/// Every public contract's JSON Schema, as `(file name, pretty JSON)`.
///
/// File names are `<contract>.v1.schema.json`; the CLI writes them with
/// `tributary schema --out DIR`.
pub fn schemas() -> Vec<(&'static str, String)> {
    contract_schemas()
        .into_iter()
        .map(|(name, schema)| {
            let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            text.push('\n');
            (name, text)
        })
        .collect()
}

/// Every public contract's Markdown reference, rendered from its JSON
/// Schema by [`reference::markdown`], as `(file name, Markdown)`.
///
/// File names are `<contract>.v1.md`, beside the schemas they link to; the
/// CLI writes them with `tributary schema --out DIR`, and the book's
/// reference chapters are these files.
pub fn references() -> Vec<(String, String)> {
    contract_schemas()
        .into_iter()
        .map(|(name, schema)| {
            let page = name.trim_end_matches(".schema.json");
            let mut text = reference::markdown(name, schema.as_value());
            text.push('\n');
            (format!("{page}.md"), text)
        })
        .collect()
}

fn contract_schemas() -> Vec<(&'static str, schemars::Schema)> {
    vec![
        ("pipeline-spec.v1.schema.json", schemars::schema_for!(PipelineSpec)),
        ("stream-spec.v1.schema.json", schemars::schema_for!(crate::stream::StreamSpec)),
        ("request-message.v1.schema.json", schemars::schema_for!(RequestMessage)),
        ("persist-message.v1.schema.json", schemars::schema_for!(PersistMessage)),
        ("probe-reply.v1.schema.json", schemars::schema_for!(ProbeReply)),
        ("query-message.v1.schema.json", schemars::schema_for!(QueryMessage)),
        ("query-row.v1.schema.json", schemars::schema_for!(QueryRow)),
        ("alert.v1.schema.json", schemars::schema_for!(Alert)),
        ("run-completed.v1.schema.json", schemars::schema_for!(RunCompleted)),
    ]
}

#[cfg(test)]
mod tests;
