//! What an operator watches a stack with (issue 30, item 3): every function
//! traced by X-Ray and allowed to write its traces, and one CloudWatch
//! dashboard whose Metrics Insights queries read tributary's own EMF metrics
//! (`tributary_core::metrics`), whose link is an output. The lake bucket's
//! versioning is `template_topology::the_lake_and_its_catalog_are_retained_versioned_and_expire_by_parameter`'s;
//! `aws_dashboard` deploys the dashboard on moto and reads it back.

use std::collections::BTreeSet;

use serde_norway::Value;
use tributary_core::metrics;
use tributary_core::topology::{self, Function};

use super::template_topology::{Template, intrinsic, prop, role_statements, strings, sub_text};

/// The stack name the dashboard's `${AWS::StackName}` stands for here.
pub(super) const STACK: &str = "tributary-dash";

/// The functions of the template, each with its logical id.
fn functions(template: &Template) -> Vec<(Function, &str)> {
    topology::FUNCTIONS
        .iter()
        .map(|decl| (decl.function, template.function_id(decl.function).expect("every function is in the template")))
        .collect()
}

/// The `Resources` of the template of type `ty`: `(logical id, resource)`.
fn resources_of<'a>(template: &'a Template, ty: &'a str) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
    template
        .root()
        .get("Resources")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(move |(id, r)| (r.get("Type").and_then(Value::as_str) == Some(ty)).then_some((id.as_str()?, r)))
}

/// `name` (a `!Sub "${AWS::StackName}-…"`) as named in stack [`STACK`].
fn in_stack(name: Option<&Value>) -> Option<String> {
    let text = name.and_then(sub_text)?;
    Some(text.replace("${AWS::StackName}", STACK))
}

/// The names every queue and every function of the template have in stack
/// [`STACK`]: `(queues, functions)`.
pub(super) fn template_names(template: &Template) -> (BTreeSet<String>, BTreeSet<String>) {
    // A queue that exists only under a condition (the stream failure queue
    // of a stack with a Kinesis stream) is not on the one dashboard body
    // every stack shares.
    let queues = resources_of(template, "AWS::SQS::Queue")
        .filter(|(_, q)| q.get("Condition").is_none())
        .map(|(id, q)| in_stack(prop(q, "QueueName")).unwrap_or_else(|| panic!("{id}: QueueName is not a !Sub")))
        .collect();
    let functions = functions(template)
        .into_iter()
        .map(|(_, id)| {
            let function = template.resource(id).expect("exists");
            in_stack(prop(function, "FunctionName")).unwrap_or_else(|| panic!("{id}: FunctionName is not a !Sub"))
        })
        .collect();
    (queues, functions)
}

/// The dashboard's resource and its body's `!Sub` text.
pub(super) fn dashboard(template: &Template) -> (&str, &Value, &str) {
    let (id, dashboard) = resources_of(template, "AWS::CloudWatch::Dashboard")
        .next()
        .expect("the template has an AWS::CloudWatch::Dashboard");
    let body = prop(dashboard, "DashboardBody").and_then(sub_text).expect("DashboardBody is a !Sub of JSON text");
    (id, dashboard, body)
}

/// A metric graph of a dashboard body: its `properties.metrics` rows.
pub(super) struct Graph {
    /// `properties.metrics`.
    pub rows: Vec<serde_json::Value>,
}

/// The metric widgets of dashboard body `body`.
pub(super) fn graphs(body: &serde_json::Value) -> Vec<Graph> {
    body["widgets"]
        .as_array()
        .expect("a dashboard body has widgets")
        .iter()
        .filter(|w| w["type"] == "metric")
        .map(|w| Graph { rows: w["properties"]["metrics"].as_array().cloned().unwrap_or_default() })
        .collect()
}

impl Graph {
    /// The dimension values of its rows on `namespace`'s `metric` by
    /// `dimension` (`["AWS/SQS", "ApproximateAgeOfOldestMessage",
    /// "QueueName", "<name>", {…}]`).
    pub(super) fn dimension_values(&self, namespace: &str, metric: &str, dimension: &str) -> BTreeSet<String> {
        self.rows
            .iter()
            .filter_map(|row| {
                let row = row.as_array()?;
                (row.first()?.as_str()? == namespace
                    && row.get(1)?.as_str()? == metric
                    && row.get(2)?.as_str()? == dimension)
                    .then(|| row.get(3)?.as_str().map(str::to_string))?
            })
            .collect()
    }

    /// Its Metrics Insights queries (`[{"expression": …}]` rows).
    pub(super) fn expressions(&self) -> Vec<String> {
        self.rows.iter().filter_map(|row| row.get(0)?.get("expression")?.as_str().map(str::to_string)).collect()
    }
}

/// The dashboard's body as stack [`STACK`] in `us-east-1` with the
/// parameters' defaults would have it, parsed.
fn body_with_defaults(template: &Template, text: &str) -> serde_json::Value {
    let mut text = text.replace("${AWS::StackName}", STACK).replace("${AWS::Region}", "us-east-1");
    let parameters = template.root().get("Parameters").and_then(Value::as_mapping).expect("Parameters");
    for (name, parameter) in parameters {
        let (Some(name), Some(default)) = (name.as_str(), parameter.get("Default")) else { continue };
        let default = default.as_str().map(str::to_string).or_else(|| default.as_u64().map(|n| n.to_string()));
        if let Some(default) = default {
            text = text.replace(&format!("${{{name}}}"), &default);
        }
    }
    assert!(!text.contains("${"), "the dashboard body names only pseudo parameters and parameters: {text}");
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("the dashboard body is not JSON ({err}): {text}"))
}

#[test]
fn every_function_is_traced_and_may_write_its_traces() {
    let template = Template::load();
    let mut failures = Vec::new();
    let global = template.root().get("Globals").and_then(|g| g.get("Function")).and_then(|f| f.get("Tracing"));
    for (function, id) in functions(&template) {
        let own = prop(template.resource(id).expect("exists"), "Tracing");
        if own.or(global).and_then(Value::as_str) != Some("Active") {
            failures.push(format!("{id} ({}): Tracing is {:?}, expected Active", function.name(), own.or(global)));
        }
        let may =
            |action: &str| role_statements(&template, id).iter().any(|s| strings(s.get("Action")).contains(&action));
        for action in ["xray:PutTraceSegments", "xray:PutTelemetryRecords"] {
            if !may(action) {
                failures.push(format!("{id}: its role may not {action} (Lambda writes the segments with it)"));
            }
        }
    }
    assert!(failures.is_empty(), "X-Ray tracing:\n  - {}", failures.join("\n  - "));
}

#[test]
fn the_dashboard_graphs_runs_pages_records_queues_and_functions() {
    let template = Template::load();
    let (id, dashboard, text) = dashboard(&template);
    let name = prop(dashboard, "DashboardName").and_then(intrinsic);
    assert!(
        name.as_ref().is_some_and(|(f, arg)| f == "Ref" && arg.as_str() == Some("AWS::StackName")),
        "{id}: DashboardName {name:?}, expected !Ref AWS::StackName (one per stack)"
    );
    let body = body_with_defaults(&template, text);
    let graphs = graphs(&body);
    let mut failures = Vec::new();

    // tributary's metrics: every query names metrics core/src/metrics.rs
    // writes, in its namespace and dimensions; runs per pipeline.
    let schema = format!(
        "FROM SCHEMA(\"{}\", \"{}\", \"{}\")",
        metrics::NAMESPACE,
        metrics::DIMENSION_FUNCTION,
        metrics::DIMENSION_PIPELINE
    );
    let expressions: Vec<String> = graphs.iter().flat_map(Graph::expressions).collect();
    for expression in &expressions {
        let named = expression.split_once("SUM(").and_then(|(_, rest)| rest.split_once(')')).map(|(m, _)| m);
        if !named.is_some_and(|m| metrics::ALL_METRICS.contains(&m)) || !expression.contains(&schema) {
            failures.push(format!("query {expression:?}: not SUM(<a metric of core/src/metrics.rs>) {schema}"));
        }
    }
    let query = |metric: &str| expressions.iter().find(|e| e.contains(&format!("SUM({metric})")));
    for metric in [metrics::RUNS_STARTED, metrics::RUNS_COMPLETED, metrics::RUNS_FAILED] {
        if !query(metric).is_some_and(|e| e.ends_with("GROUP BY pipeline")) {
            failures.push(format!("no graph of {metric} per pipeline (GROUP BY pipeline)"));
        }
    }
    for metric in [
        metrics::PAGES_FETCHED,
        metrics::PAGES_PERSISTED,
        metrics::RECORDS_FETCHED,
        metrics::RECORDS_PERSISTED,
        metrics::RECORDS_QUARANTINED,
    ] {
        if query(metric).is_none() {
            failures.push(format!("no graph of {metric}"));
        }
    }

    // This stack's queues and functions.
    let (queues, functions) = template_names(&template);
    let shown = |namespace: &str, metric: &str, dimension: &str| -> BTreeSet<String> {
        graphs.iter().flat_map(|g| g.dimension_values(namespace, metric, dimension)).collect()
    };
    let dlqs: BTreeSet<String> = queues.iter().filter(|q| q.ends_with("-dlq")).cloned().collect();
    let work: BTreeSet<String> = queues.difference(&dlqs).cloned().collect();
    let depth = shown("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName");
    if depth != dlqs {
        failures.push(format!("DLQ depth graphs {depth:?}, expected every DLQ {dlqs:?}"));
    }
    let age = shown("AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName");
    if age != work {
        failures.push(format!("queue age graphs {age:?}, expected every work queue {work:?}"));
    }
    for metric in ["Errors", "Throttles", "Duration"] {
        let graphed = shown("AWS/Lambda", metric, "FunctionName");
        if graphed != functions {
            failures.push(format!("Lambda {metric} graphs {graphed:?}, expected {functions:?}"));
        }
    }

    // Its link is an output (what `tributary status --stack` prints).
    let output = template.root().get("Outputs").and_then(|o| o.get(adapters::aws::stack::output::DASHBOARD_URL));
    let url = output.and_then(|o| o.get("Value")).and_then(sub_text).unwrap_or_default();
    if !url.contains("#dashboards/dashboard/${") || !url.contains(&format!("${{{id}}}")) {
        failures.push(format!("output DashboardUrl {url:?} does not link ${{{id}}}"));
    }
    assert!(failures.is_empty(), "the dashboard:\n  - {}", failures.join("\n  - "));
}
