//! `QueryMessage`: a SQL query for the Athena function.

use chrono::NaiveDate;
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
    /// Date of the run (UTC), passed on to every row.
    pub run_date: NaiveDate,
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
    /// Opaque data echoed with every published row.
    #[serde(default)]
    pub context: serde_json::Value,
    /// Columns every row must have (the Orchestrator's request template
    /// binds them as `{column}` placeholders). The Athena function checks
    /// them against the result's columns before it publishes a row: a
    /// result without one of them fails the query once, naming it, instead
    /// of every row failing at its consumer. Empty: nothing checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_columns: Vec<String>,
    /// Set when the Athena function re-enqueues a query it could not finish
    /// in one invocation: where to pick up. Absent on a new query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<QueryContinuation>,
}

/// Where a long query's processing continues.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueryContinuation {
    /// Athena `QueryExecutionId` of the running or finished query.
    pub execution_id: String,
    /// `NextToken` of the next result page; absent before the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
    /// Index of the next row to publish (rows already published: 0..this).
    pub next_row: u64,
}

/// One row of a query's result, published by the Athena function (to the
/// query-results topic, which fans out to the orchestrator queue).
///
/// `row_index` numbers the rows of the whole result from 0, so the request
/// a row becomes has a deterministic page key, and a row published twice
/// (at-least-once delivery) rewrites the same objects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueryRow {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name.
    pub pipeline: String,
    /// Run the query belongs to.
    pub run_id: RunId,
    /// Date of the run (UTC).
    pub run_date: NaiveDate,
    /// Position of the row in the whole result, from 0.
    pub row_index: u64,
    /// The row: column name -> value (numbers and booleans typed by column).
    pub row: serde_json::Map<String, serde_json::Value>,
    /// The query's `context`, echoed unchanged.
    #[serde(default)]
    pub context: serde_json::Value,
}
