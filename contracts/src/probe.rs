//! `ProbeReply`: the total a count-first probe found.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{RunId, V1};

/// Request's answer to a probe: the total number of records the vendor
/// reports, sent back to the orchestrator queue so the Orchestrator can plan
/// one request per page without calling the vendor itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeReply {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name.
    pub pipeline: String,
    /// Run being planned.
    pub run_id: RunId,
    /// Date of the run (UTC).
    pub run_date: NaiveDate,
    /// Total records reported by the vendor (read at the probe's
    /// `total_pointer`).
    pub total: u64,
    /// The probe's `context`, echoed unchanged.
    #[serde(default)]
    pub context: serde_json::Value,
}
