//! `QueryMessage`: a SQL query for the Athena function.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Destination, RunId, V1};

/// Asks the Athena function to run a query and publish its rows to
/// `reply_to` (normally the query-results SNS topic).
///
/// Values are bound as positional parameters (`?` in `sql`, Athena
/// `ExecutionParameters`), never concatenated into the SQL text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueryMessage {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name.
    pub pipeline: String,
    /// Run the query belongs to.
    pub run_id: RunId,
    /// SQL with `?` placeholders.
    pub sql: String,
    /// Values for the placeholders, in order (Athena `ExecutionParameters`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<String>,
    /// Glue/Athena database.
    pub database: String,
    /// Athena workgroup; the account's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup: Option<String>,
    /// S3 URI for Athena's result files; the workgroup's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_location: Option<String>,
    /// Where the rows are published.
    pub reply_to: Destination,
    /// Opaque data echoed with every published row batch.
    #[serde(default)]
    pub context: serde_json::Value,
}
