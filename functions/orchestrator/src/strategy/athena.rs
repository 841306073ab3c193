//! `athena`: the seed's V4 — calls driven by rows of a lake query.
//!
//! 1. `start` sends one `QueryMessage` to the Athena function's queue, whose
//!    rows go to the query-results topic (fanned out to the orchestrator
//!    queue), with the spec as context. The run's values (`{run_date}`,
//!    `{run_start}`, ...) in the parameters were replaced when the run
//!    started; the values are bound by the engine, never spliced into the
//!    SQL.
//! 2. Each `QueryRow` becomes one `RequestMessage`: page index = the row's
//!    index in the result (deterministic keys), page count 0 (unknown up
//!    front). The row's values are bound into the request template's
//!    `{column}` placeholders — in the URL (percent-encoded as a path
//!    segment), query values, header values and JSON body strings (a body
//!    string that is exactly `{column}` takes the value with its JSON type).
//!    A placeholder without a value fails that row alone, naming both.
//!
//! A query with no rows publishes nothing: a successful run of zero requests.

use serde_json::{Map, Value};

use super::{CallStrategy, Plan, PlanError, RunContext, records_request};
use contracts::spec::{AthenaSpec, PipelineSpec};
use contracts::{Destination, HttpCall, PageRef, QueryMessage, QueryRow, V1};

pub use super::bind::BindError;
use super::bind::{Unbound, bind_template};

/// Athena-driven planning over the spec's `AthenaSpec`.
#[derive(Clone, Copy, Debug)]
pub struct Athena<'a>(pub &'a AthenaSpec);

impl CallStrategy for Athena<'_> {
    fn kind(&self) -> &'static str {
        "athena"
    }

    fn start(&self, spec: &PipelineSpec, run: &RunContext) -> Result<Plan, PlanError> {
        // The run's values were bound into the parameters when the run
        // started (`run_values::with_run_values`).
        let parameters = self.0.parameters.clone();
        let query = QueryMessage {
            version: V1,
            pipeline: spec.pipeline.clone(),
            run_id: run.run_id.clone(),
            run_date: run.run_date,
            sql: self.0.query.clone(),
            parameters,
            database: self.0.database.clone(),
            workgroup: self.0.workgroup.clone(),
            output_location: self.0.output_location.clone(),
            reply_to: Destination::Topic { topic: run.query_results_topic.clone() },
            context: serde_json::to_value(spec).unwrap_or_default(),
            required_columns: spec.row_placeholders(),
            continuation: None,
        };
        Ok(Plan {
            requests: Vec::new(),
            queries: vec![query],
            expected_pages: None,
            pages: None,
            expected_records: None,
        })
    }

    fn on_row(&self, spec: &PipelineSpec, run: &RunContext, row: &QueryRow) -> Result<Plan, PlanError> {
        let http = bind(spec, &row.row).map_err(|problem| PlanError::Row {
            pipeline: spec.pipeline.clone(),
            row_index: row.row_index,
            problem,
        })?;
        let index = u32::try_from(row.row_index)
            .map_err(|_| PlanError::RowIndex { pipeline: spec.pipeline.clone(), row_index: row.row_index })?;
        Ok(Plan { requests: vec![records_request(spec, run, PageRef { index, count: 0 }, http)], ..Plan::default() })
    }
}

/// The spec's request template with `row`'s values bound.
///
/// # Errors
/// [`BindError`] naming the template field and the placeholder when the row
/// has no such column or its value is `null`, an object or an array (except
/// as a whole body value), or when the URL stops being valid.
pub fn bind(spec: &PipelineSpec, row: &Map<String, Value>) -> Result<HttpCall, BindError> {
    let template = bind_template(&spec.request, row, Unbound::Fail)?;
    let mut query = template.query;
    query.extend(super::incremental_param(spec));
    Ok(HttpCall { method: template.method, url: template.url, query, headers: template.headers, body: template.body })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::strategy::strategy_for;
    use crate::strategy::test_support::run;
    use contracts::RequestMode;

    fn spec() -> PipelineSpec {
        PipelineSpec::from_yaml(
            r#"
version: 1
pipeline: tx
strategy: {kind: athena, query: "SELECT id, region FROM customers WHERE dt = ? AND note <> '?'", parameters: ["{run_date}"], database: lake}
request:
  method: POST
  url: "http://h/customers/{id}/transactions"
  query: {region: "{region}", fixed: "1"}
  body: {customer: "{id}", label: "c-{id}", nested: [{r: "{region}"}]}
  records_pointer: /data
target: {dataset: tx}
"#,
        )
        .expect("valid spec")
    }

    fn row(value: Value) -> QueryRow {
        QueryRow {
            version: V1,
            pipeline: "tx".into(),
            run_id: run().run_id,
            run_date: run().run_date,
            row_index: 41,
            row: value.as_object().cloned().unwrap_or_default(),
            context: Value::Null,
        }
    }

    #[test]
    fn start_sends_the_query_with_bound_run_parameters() {
        let spec = crate::strategy::run_values::with_run_values(&spec(), &run()).expect("bound");
        let plan = strategy_for(&spec.strategy).start(&spec, &run()).expect("plan");
        assert!(plan.requests.is_empty());
        let query = &plan.queries[0];
        assert_eq!(query.parameters, ["2026-11-29"]);
        assert_eq!(query.reply_to, Destination::Topic { topic: "query-results".into() });
        assert_eq!(PipelineSpec::from_value(query.context.clone()).expect("spec in context"), spec);
        // The template's `{column}`s (URL, query, body), each once: the
        // Athena function checks the result has them before any row goes out.
        assert_eq!(query.required_columns, ["id", "region"]);
    }

    #[test]
    fn a_row_becomes_one_request_with_its_values_bound() {
        let spec = spec();
        let plan = strategy_for(&spec.strategy)
            .on_row(&spec, &run(), &row(json!({"id": 7, "region": "São Paulo/Sul"})))
            .expect("plan");
        let request = &plan.requests[0];
        assert_eq!(request.http.url.as_str(), "http://h/customers/7/transactions");
        assert_eq!(request.http.query["region"], "São Paulo/Sul");
        assert_eq!(request.http.query["fixed"], "1");
        assert_eq!(request.http.body, Some(json!({"customer": 7, "label": "c-7", "nested": [{"r": "São Paulo/Sul"}]})));
        assert_eq!(request.page, Some(PageRef { index: 41, count: 0 }));
        assert!(matches!(&request.mode, RequestMode::Records { records_pointer: Some(p), .. } if p == "/data"));
    }

    #[test]
    fn path_values_stay_one_segment() {
        let spec = spec();
        let plan = strategy_for(&spec.strategy)
            .on_row(&spec, &run(), &row(json!({"id": "a/../b c", "region": "x"})))
            .expect("plan");
        assert_eq!(plan.requests[0].http.url.path(), "/customers/a%2F..%2Fb%20c/transactions");
    }

    #[test]
    fn a_dot_or_empty_segment_fails_the_row_instead_of_calling_another_path() {
        // `..` would call /transactions (the URL rules resolve it, and read
        // `%2E%2E` as `..` too), `.` /customers/transactions, an empty value
        // /customers//transactions: a trial found the other endpoint's
        // answer landed as the row's records.
        let spec = spec();
        let strategy = strategy_for(&spec.strategy);
        for (value, effect) in [("..", "parent path"), (".", "without this segment"), ("", "empty segment")] {
            let err = strategy
                .on_row(&spec, &run(), &row(json!({"id": value, "region": "x"})))
                .expect_err("refused")
                .to_string();
            assert!(err.contains("request.url") && err.contains("{id}") && err.contains(effect), "{value:?}: {err}");
            assert!(err.contains("row 41") && err.contains("not called"), "{err}");
        }
        // Dots within a segment are the value as sent.
        for value in ["...", "a..", ".hidden", "v1.2"] {
            let plan = strategy.on_row(&spec, &run(), &row(json!({"id": value, "region": "x"}))).expect("called");
            assert_eq!(plan.requests[0].http.url.path(), format!("/customers/{value}/transactions"));
        }
        // Two placeholders of one segment that make `..` together: the path
        // the URL rules would call is named.
        let two = PipelineSpec::from_yaml(
            "version: 1\npipeline: tx\nstrategy: {kind: athena, query: 'SELECT 1', database: lake}\nrequest: {url: 'http://h/customers/{id}{region}/transactions'}\ntarget: {dataset: tx}\n",
        )
        .expect("valid spec");
        let err = bind(&two, &row(json!({"id": ".", "region": "."})).row).expect_err("a dot segment");
        assert!(matches!(&err, BindError::Rewritten { path, .. } if path == "/transactions"), "{err}");
        assert!(err.to_string().contains("not called"), "{err}");
    }

    #[test]
    fn a_missing_or_null_value_fails_the_row_naming_field_and_placeholder() {
        let spec = spec();
        let strategy = strategy_for(&spec.strategy);
        let err = strategy.on_row(&spec, &run(), &row(json!({"region": "x"}))).expect_err("no id").to_string();
        assert!(err.contains("request.url") && err.contains("{id}") && err.contains("row 41"), "{err}");
        let err = strategy.on_row(&spec, &run(), &row(json!({"id": 1, "region": null}))).expect_err("null").to_string();
        assert!(err.contains("request.query.region") && err.contains("null"), "{err}");
    }

    #[test]
    fn bind_errors_name_field_and_placeholder() {
        let spec = spec();
        let err = bind(&spec, &row(json!({"id": 1, "region": {"a": 1}})).row).expect_err("an object");
        assert_eq!((err.field(), err.placeholder()), ("request.query.region", Some("region")));
        assert_eq!(
            err.to_string(),
            "request.query.region: placeholder {region} has an object in the row, not a value that fits in text"
        );
        let err = bind(&spec, &row(json!({"region": "x"})).row).expect_err("no id");
        assert_eq!(
            err,
            BindError::Missing {
                field: "request.url".into(),
                placeholder: "id".into(),
                columns: vec!["region".into()],
            }
        );
        assert_eq!(err.to_string(), r#"request.url: placeholder {id} has no value: the row's columns are ["region"]"#);
    }

    #[test]
    fn parameters_take_only_the_run_placeholders() {
        let spec = |parameter: &str| {
            format!(
                "version: 1\npipeline: p\nstrategy: {{kind: athena, query: 'SELECT 1 WHERE a = ?', parameters: ['{parameter}'], database: d}}\nrequest: {{url: 'http://h/x'}}\ntarget: {{dataset: d}}\n"
            )
        };
        let err = PipelineSpec::from_yaml(&spec("{nonsense}")).expect_err("unknown placeholder").to_string();
        assert!(
            err.contains("strategy.parameters[0]") && err.contains("{nonsense}") && err.contains("{run_date}"),
            "{err}"
        );
        PipelineSpec::from_yaml(&spec("{run_date}/{run_id}")).expect("the run's placeholders");
    }

    #[test]
    fn parameter_count_must_match_the_placeholders() {
        let text = "version: 1\npipeline: p\nstrategy: {kind: athena, query: 'SELECT 1 WHERE a = ? AND b = ?', parameters: [x], database: d}\nrequest: {url: 'http://h/x'}\ntarget: {dataset: d}\n";
        let err = PipelineSpec::from_yaml(text).expect_err("count mismatch").to_string();
        assert!(err.contains("strategy.parameters") && err.contains("2 `?` placeholders"), "{err}");
    }
}
