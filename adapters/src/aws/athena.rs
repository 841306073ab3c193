//! [`QueryEngine`] over Amazon Athena: `StartQueryExecution`, polling
//! `GetQueryExecution`, paging `GetQueryResults`.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_athena::types::{ColumnInfo, QueryExecutionContext, QueryExecutionState, ResultConfiguration, Row};
use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::{Map, Number, Value};
use tokio::time::Instant;

use super::error::port_error;
use tributary_core::ports::{PortError, Query, QueryEngine, QueryState, ResultPage};

/// Rows per `GetQueryResults` page: 1,000, the API's maximum.
/// <https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryResults.html>
pub const RESULTS_PAGE_SIZE: i32 = 1000;

/// Default longest wait for a query to finish: 600 s, inside the Athena
/// function's 900 s Lambda time-out (the Lambda maximum) with room to
/// publish the rows.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs queries on Athena and reads their results.
///
/// [`QueryEngine::start`] passes the parameters as `ExecutionParameters`
/// (never spliced into the SQL by us); [`QueryEngine::wait`] polls
/// `GetQueryExecution` with backoff; [`QueryEngine::page`] reads one
/// `GetQueryResults` page, skipping the header row Athena puts first on the
/// first page of a `SELECT`'s results.
///
/// Values are typed by the column's `ColumnInfo.Type`: `tinyint`,
/// `smallint`, `integer`, `bigint` → JSON integer; `double`, `float`,
/// `real` → JSON number; `boolean` → JSON bool; anything else (`varchar`,
/// `decimal`, `date`, `timestamp`, `array`, …) → JSON string; a missing
/// `VarCharValue` (SQL `NULL`) → `null`. A value that does not parse as its
/// type stays a string.
#[derive(Clone, Debug)]
pub struct AthenaEngine {
    client: aws_sdk_athena::Client,
    workgroup: Option<String>,
    output_location: Option<String>,
    timeout: Duration,
    min_poll: Duration,
    max_poll: Duration,
}

impl AthenaEngine {
    /// An engine on the account's default workgroup and its result
    /// location, with [`DEFAULT_QUERY_TIMEOUT`].
    pub fn new(client: aws_sdk_athena::Client) -> Self {
        Self {
            client,
            workgroup: None,
            output_location: None,
            timeout: DEFAULT_QUERY_TIMEOUT,
            min_poll: Duration::from_millis(250),
            max_poll: Duration::from_secs(5),
        }
    }

    /// Runs queries in workgroup `workgroup` (`WorkGroup`).
    pub fn with_workgroup(mut self, workgroup: impl Into<String>) -> Self {
        self.workgroup = Some(workgroup.into());
        self
    }

    /// Writes result files under `s3://…` URI `location`
    /// (`ResultConfiguration.OutputLocation`); the workgroup's setting when
    /// unset.
    pub fn with_output_location(mut self, location: impl Into<String>) -> Self {
        self.output_location = Some(location.into());
        self
    }

    /// Polls the query's state first after `min`, then at doubling intervals
    /// up to `max`.
    pub fn with_poll_delays(mut self, min: Duration, max: Duration) -> Self {
        self.min_poll = min;
        self.max_poll = max.max(min);
        self
    }

    /// Best-effort `StopQueryExecution` of a query we gave up on.
    pub async fn stop(&self, id: &str) {
        if let Err(err) = self.client.stop_query_execution().query_execution_id(id).send().await {
            tracing::warn!(query_execution_id = id, error = %port_error("StopQueryExecution", id, err), "could not stop query");
        }
    }
}

#[async_trait]
impl QueryEngine for AthenaEngine {
    /// `StartQueryExecution` with the parameters as `ExecutionParameters`.
    /// The query's workgroup and output location override the engine's.
    async fn start(&self, query: &Query) -> Result<String, PortError> {
        let target = format!("database {}", query.database);
        let context = QueryExecutionContext::builder().database(&query.database).build();
        let parameters = (!query.parameters.is_empty())
            .then(|| query.parameters.iter().map(|value| string_literal(value)).collect::<Vec<_>>());
        let output_location = query.output_location.as_ref().or(self.output_location.as_ref());
        let output = self
            .client
            .start_query_execution()
            .query_string(&query.sql)
            .query_execution_context(context)
            .set_execution_parameters(parameters)
            .set_work_group(query.workgroup.clone().or_else(|| self.workgroup.clone()))
            .set_result_configuration(
                output_location.map(|location| ResultConfiguration::builder().output_location(location).build()),
            )
            .send()
            .await
            .map_err(|err| port_error("StartQueryExecution", &target, err))?;
        let id = output.query_execution_id().map(str::to_string).ok_or_else(|| {
            PortError::permanent_msg("StartQueryExecution", target, "response has no QueryExecutionId")
        })?;
        tracing::info!(query_execution_id = %id, database = %query.database, "query started");
        Ok(id)
    }

    /// Polls `GetQueryExecution` with exponential backoff (250 ms doubling to
    /// 5 s by default); a throttled or failed poll (`TooManyRequestsException`,
    /// 5xx) is retried on the same schedule, not reported. The deadline is
    /// capped by the engine's time-out.
    async fn wait(&self, id: &str, deadline: Instant) -> Result<QueryState, PortError> {
        let deadline = deadline.min(Instant::now() + self.timeout);
        let mut delays = ExponentialBuilder::new()
            .with_min_delay(self.min_poll)
            .with_max_delay(self.max_poll)
            .with_jitter()
            .without_max_times()
            .build();
        let mut last_state = "UNKNOWN".to_string();
        loop {
            match self.client.get_query_execution().query_execution_id(id).send().await {
                Ok(output) => {
                    let status = output.query_execution().and_then(|q| q.status());
                    let reason = status.and_then(|s| s.state_change_reason()).unwrap_or("no reason given");
                    let state = status.and_then(|s| s.state());
                    match state {
                        Some(QueryExecutionState::Succeeded) => return Ok(QueryState::Succeeded),
                        Some(state @ (QueryExecutionState::Failed | QueryExecutionState::Cancelled)) => {
                            return Ok(QueryState::Failed {
                                state: state.as_str().to_string(),
                                reason: reason.to_string(),
                            });
                        }
                        other => last_state = other.map_or("UNKNOWN", QueryExecutionState::as_str).to_string(),
                    }
                }
                Err(err) => {
                    let err = port_error("GetQueryExecution", id, err);
                    if !err.is_retryable() {
                        return Err(err);
                    }
                    tracing::warn!(query_execution_id = id, error = %err, "polling throttled or failed; retrying");
                }
            }
            let delay = delays.next().unwrap_or(self.max_poll);
            if Instant::now() + delay > deadline {
                return Ok(QueryState::Running { state: last_state });
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// One `GetQueryResults` page of up to [`RESULTS_PAGE_SIZE`] rows.
    async fn page(&self, id: &str, token: Option<&str>) -> Result<ResultPage, PortError> {
        let output = self
            .client
            .get_query_results()
            .query_execution_id(id)
            .max_results(RESULTS_PAGE_SIZE)
            .set_next_token(token.map(str::to_string))
            .send()
            .await
            .map_err(|err| port_error("GetQueryResults", id, err))?;
        let mut page = ResultPage::default();
        if let Some(set) = output.result_set() {
            let columns: Vec<ColumnInfo> =
                set.result_set_metadata().map(|m| m.column_info().to_vec()).unwrap_or_default();
            page.columns = columns.iter().map(|c| c.name().to_string()).collect();
            // Athena repeats the column names as the first row of the first page.
            let skip = usize::from(token.is_none());
            page.rows = set.rows().iter().skip(skip).map(|row| to_object(&columns, row)).collect();
        }
        page.next_token = output.next_token().filter(|next| !next.is_empty()).map(str::to_string);
        Ok(page)
    }
}

/// `value` as a SQL string literal (`'…'`, inner quotes doubled).
///
/// Athena substitutes each `ExecutionParameters` entry as SQL text, so
/// every value is bound as a `varchar` literal: compare it with other
/// types through `CAST(? AS …)` or a typed literal in the SQL.
fn string_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// One result row as a JSON object keyed by column name.
fn to_object(columns: &[ColumnInfo], row: &Row) -> Map<String, Value> {
    columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let raw = row.data().get(i).and_then(|d| d.var_char_value());
            (column.name().to_string(), to_json(column.r#type(), raw))
        })
        .collect()
}

/// A result value as JSON, typed by its Athena column type.
fn to_json(column_type: &str, raw: Option<&str>) -> Value {
    let Some(raw) = raw else {
        return Value::Null;
    };
    let typed = match column_type.to_ascii_lowercase().as_str() {
        "tinyint" | "smallint" | "integer" | "int" | "bigint" => raw.trim().parse::<i64>().ok().map(Value::from),
        "double" | "float" | "real" => raw.trim().parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number),
        "boolean" => match raw.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => None,
    };
    typed.unwrap_or_else(|| Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_follow_their_column_type() {
        assert_eq!(to_json("integer", Some("1")), json!(1));
        assert_eq!(to_json("bigint", Some("9007199254740993")), json!(9_007_199_254_740_993_i64));
        assert_eq!(to_json("double", Some("1.5")), json!(1.5));
        assert_eq!(to_json("double", Some("NaN")), json!("NaN"));
        assert_eq!(to_json("boolean", Some("true")), json!(true));
        assert_eq!(to_json("varchar", Some("42")), json!("42"));
        assert_eq!(to_json("decimal", Some("1.10")), json!("1.10"));
        assert_eq!(to_json("integer", None), Value::Null);
        assert_eq!(to_json("integer", Some("x")), json!("x"));
    }

    #[test]
    fn parameters_are_bound_as_string_literals() {
        assert_eq!(string_literal("2026-11-29"), "'2026-11-29'");
        assert_eq!(string_literal("o'brien"), "'o''brien'");
    }
}
