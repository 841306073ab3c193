//! `RequestMessage`: one vendor call for the Request function.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Destination, HttpMethod, PageRef, PersistTarget, RunId, V1};

/// Asks the Request function to make one HTTP call and forward the outcome
/// to `reply_to`.
///
/// Sent by the Orchestrator to the request queue, and by other teams who use
/// Request as a service. Credentials are never carried here: only secret ids
/// (a later contract addition), so the message can be logged and dead-lettered
/// safely.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestMessage {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name, as in the spec.
    pub pipeline: String,
    /// Run this call belongs to.
    pub run_id: RunId,
    /// Date of the run (UTC), the default `dt=` partition of what it writes.
    pub run_date: NaiveDate,
    /// The page this call fetches; absent for a count-first probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageRef>,
    /// The call itself.
    pub http: HttpCall,
    /// What to do with the response.
    pub mode: RequestMode,
    /// Where the reply goes: the persist queue for records, the orchestrator
    /// queue for a probe.
    pub reply_to: Destination,
}

/// One HTTP call: method, absolute URL, query parameters, headers, JSON body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HttpCall {
    /// `GET` (default) or `POST`.
    #[serde(default)]
    pub method: HttpMethod,
    /// Absolute `http`/`https` URL, without the parameters of `query`.
    pub url: url::Url,
    /// Query parameters appended to `url` (percent-encoded by the caller).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Request headers. Never put credentials here: they would travel in
    /// clear through queues and DLQs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// JSON body, sent with `content-type: application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// What Request does with a successful response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestMode {
    /// Extract the records and send a `PersistMessage` to `reply_to`.
    Records {
        /// RFC 6901 JSON pointer to the array of records in the response
        /// (e.g. `/items`); absent or `""` means the root is the array.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        records_pointer: Option<String>,
        /// Dataset the records go to.
        target: PersistTarget,
    },
    /// Read the total record count and send a `ProbeReply` to `reply_to`
    /// (the count-first strategy's probe).
    Probe {
        /// RFC 6901 JSON pointer to a non-negative integer in the response
        /// (e.g. `/total`).
        total_pointer: String,
        /// Opaque data echoed unchanged in the `ProbeReply` (the Orchestrator
        /// puts the pipeline spec here, so it stays stateless).
        #[serde(default)]
        context: serde_json::Value,
    },
}
