//! The run's values bound into every strategy's request template when the
//! run starts ([`with_run_values`]): `{run_date}`, `{run_id}`,
//! `{run_start}`, `{run_end}`, `{run_start_date}` and `{cursor}`
//! (`contracts::template::RUN_PLACEHOLDERS`).
//!
//! The window comes from the run id's scheduled time and the spec's
//! schedule (`tributary_core::calendar::RunWindow`); an id that is not a
//! time (a queued trigger's own) counts from the run date at 00:00 UTC.
//! The bound spec is what the run's probe and query carry as context, so a
//! count-first run's pages and an Athena-driven run's rows see the same
//! values whenever they are planned.

use chrono::NaiveTime;
use serde_json::{Map, Value};

use super::RunContext;
use super::bind::{BindError, Unbound, bind_template, substitute};
use contracts::spec::{PipelineSpec, StrategySpec};
use tributary_core::calendar::RunWindow;

/// The run's values by placeholder name; `cursor` only with `incremental`.
pub fn run_values(spec: &PipelineSpec, run: &RunContext) -> Map<String, Value> {
    let time = run.run_id.scheduled_time().unwrap_or_else(|| run.run_date.and_time(NaiveTime::MIN).and_utc());
    let schedule = spec.schedule.as_ref().and_then(|s| s.parse().ok());
    let window = RunWindow::of(schedule.as_ref(), time);
    let mut values = Map::new();
    values.insert("run_date".into(), Value::String(run.run_date.to_string()));
    values.insert("run_id".into(), Value::String(run.run_id.to_string()));
    values.insert("run_start".into(), Value::String(window.start_text()));
    values.insert("run_end".into(), Value::String(window.end_text()));
    values.insert("run_start_date".into(), Value::String(window.start.date_naive().to_string()));
    if let Some(incremental) = &spec.incremental {
        values.insert("cursor".into(), Value::String(incremental.start.clone()));
    }
    values
}

/// `spec` with the run's values bound into its request template and, for
/// the `athena` strategy, its query parameters. Other placeholders (an
/// Athena-driven template's `{column}`s) stay for the rows.
///
/// # Errors
/// [`BindError::Url`] when the URL stops being valid (a value is
/// percent-encoded as one path segment, so only a template that was
/// already odd gets there).
pub fn with_run_values(spec: &PipelineSpec, run: &RunContext) -> Result<PipelineSpec, BindError> {
    let values = run_values(spec, run);
    let bound = bind_template(&spec.request, &values, Unbound::Keep)?;
    let mut spec = spec.clone();
    spec.request.url = bound.url;
    spec.request.query = bound.query;
    spec.request.headers = bound.headers;
    spec.request.body = bound.body;
    if let StrategySpec::Athena(athena) = &mut spec.strategy {
        for (i, parameter) in athena.parameters.iter_mut().enumerate() {
            let field = format!("strategy.parameters[{i}]");
            *parameter = substitute(&field, parameter, &values, Unbound::Keep, str::to_string)?;
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::test_support::run;

    fn spec(yaml: &str) -> PipelineSpec {
        PipelineSpec::from_yaml(&format!("version: 1\npipeline: p\ntarget: {{dataset: d}}\n{yaml}"))
            .expect("valid spec")
    }

    #[test]
    fn every_run_value_is_bound_in_url_query_headers_and_body() {
        let spec = spec(
            "strategy: {kind: simple}\n\
             schedule: {expression: 'cron(0 6 * * ? *)'}\n\
             incremental: {cursor_field: /updated_at, start: '2026-01-01T00:00:00Z'}\n\
             request:\n  method: POST\n  url: 'https://api.example.com/days/{run_date}/x'\n  \
             query: {from: '{run_start}', to: '{run_end}', day: '{run_start_date}'}\n  \
             headers: {X-Run: 'run-{run_id}'}\n  \
             body: {since: '{cursor}', window: ['{run_start}', '{run_end}'], keep: '{other'}\n",
        );
        let bound = with_run_values(&spec, &run()).expect("bound");
        let request = &bound.request;
        assert_eq!(request.url.as_str(), "https://api.example.com/days/2026-11-29/x");
        assert_eq!(request.query["from"], "2026-11-28T06:00:00Z");
        assert_eq!(request.query["to"], "2026-11-29T06:00:00Z");
        assert_eq!(request.query["day"], "2026-11-28");
        assert_eq!(request.headers["X-Run"], "run-20261129T060000Z");
        assert_eq!(
            request.body,
            Some(serde_json::json!({"since": "2026-01-01T00:00:00Z",
                "window": ["2026-11-28T06:00:00Z", "2026-11-29T06:00:00Z"], "keep": "{other"}))
        );
    }

    #[test]
    fn an_athena_template_keeps_its_column_placeholders_and_binds_its_parameters() {
        let spec = spec(
            "strategy: {kind: athena, query: 'SELECT id FROM c WHERE dt BETWEEN ? AND ?', \
             parameters: ['{run_start_date}', '{run_date}'], database: lake}\n\
             request: {url: 'https://api.example.com/c/{id}', query: {until: '{run_end}', region: '{region}'}}\n",
        );
        let bound = with_run_values(&spec, &run()).expect("bound");
        let StrategySpec::Athena(athena) = &bound.strategy else { panic!("athena") };
        // No schedule: the window is the day before the scheduled time.
        assert_eq!(athena.parameters, ["2026-11-28", "2026-11-29"]);
        assert_eq!(bound.request.url.as_str(), "https://api.example.com/c/%7Bid%7D");
        assert_eq!(bound.request.query["region"], "{region}");
        assert_eq!(bound.request.query["until"], "2026-11-29T06:00:00Z");
    }

    #[test]
    fn a_run_id_that_is_no_time_counts_from_the_run_date() {
        let spec =
            spec("strategy: {kind: simple}\nrequest: {url: 'https://api.example.com/x', query: {to: '{run_end}'}}\n");
        let mut run = run();
        run.run_id = contracts::RunId::new("queued-7").expect("id");
        let bound = with_run_values(&spec, &run).expect("bound");
        assert_eq!(bound.request.query["to"], "2026-11-29T00:00:00Z");
    }
}
