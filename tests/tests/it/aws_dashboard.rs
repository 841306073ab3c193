//! The stack's CloudWatch dashboard, deployed on the AWS emulator (issue 30,
//! item 3): the template's `AWS::CloudWatch::Dashboard` resource and its
//! `DashboardUrl` output go through CloudFormation (moto resolves the
//! `!Sub`), the body is read back with CloudWatch's `GetDashboard`, and it
//! names every queue and every function of the template as the stack names
//! them; `tributary status --stack` links the URL.
//!
//! moto cannot deploy the whole template (SAM's transform), so the stack
//! holds the dashboard alone, with the parameters its body names. The AWS
//! SDK has no CloudWatch client in this workspace: `GetDashboard` is one
//! call of CloudWatch's JSON protocol (`awsJson1_0`, target
//! `GraniteServiceVersion20100801`), made with reqwest (moto does not check
//! signatures).
//!
//! Needs moto at `AWS_ENDPOINT_URL`; runs in the `aws-emulator` test group.

use adapters::aws::stack::output;
use serde_json::{Value as Json, json};
use serde_norway::Value;
use tributary_e2e::emulator::reset_emulator;

use super::template_observability::{STACK, dashboard, graphs, template_names};
use super::template_topology::{Template, intrinsic};

/// `value` with CloudFormation's short tags in their long JSON form
/// (`!Sub x` -> `{"Fn::Sub": x}`, `!Ref x` -> `{"Ref": x}`, `!GetAtt A.B`
/// -> `{"Fn::GetAtt": ["A", "B"]}`), as CreateStack takes a JSON template.
fn long_form(value: &Value) -> Json {
    if let (Value::Tagged(_), Some((name, argument))) = (value, intrinsic(value)) {
        return match (name.as_str(), argument) {
            ("Ref", argument) => json!({ "Ref": long_form(argument) }),
            ("GetAtt", Value::String(path)) => {
                let (resource, attribute) = path.split_once('.').expect("!GetAtt Resource.Attribute");
                json!({ "Fn::GetAtt": [resource, attribute] })
            }
            (name, argument) => json!({ format!("Fn::{name}"): long_form(argument) }),
        };
    }
    match value {
        Value::Mapping(map) => Json::Object(
            map.iter().map(|(k, v)| (k.as_str().expect("string keys").to_string(), long_form(v))).collect(),
        ),
        Value::Sequence(seq) => Json::Array(seq.iter().map(long_form).collect()),
        other => serde_json::to_value(other).expect("a YAML scalar is JSON"),
    }
}

/// The template's dashboard, the parameters its body names and its
/// `DashboardUrl` output, as a template of its own.
fn dashboard_template(template: &Template) -> Json {
    let (id, resource, body) = dashboard(template);
    let parameters: serde_json::Map<String, Json> = template
        .root()
        .get("Parameters")
        .and_then(Value::as_mapping)
        .expect("Parameters")
        .iter()
        .filter_map(|(name, parameter)| {
            let name = name.as_str()?;
            body.contains(&format!("${{{name}}}")).then(|| (name.to_string(), long_form(parameter)))
        })
        .collect();
    let url = template.root().get("Outputs").and_then(|o| o.get(output::DASHBOARD_URL)).expect("DashboardUrl output");
    json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": parameters,
        "Resources": { id: long_form(resource) },
        "Outputs": { output::DASHBOARD_URL: long_form(url) },
    })
}

/// `GetDashboard` of `name`'s body, parsed.
async fn get_dashboard(endpoint: &str, name: &str) -> Json {
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .header("X-Amz-Target", "GraniteServiceVersion20100801.GetDashboard")
        .header(
            "Authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/monitoring/aws4_request, SignedHeaders=host, Signature=0",
        )
        .body(json!({ "DashboardName": name }).to_string())
        .send()
        .await
        .expect("GetDashboard");
    let status = response.status();
    let answer = response.text().await.expect("GetDashboard's answer");
    let answer: Json = serde_json::from_str(&answer).unwrap_or_else(|err| panic!("GetDashboard: {err}: {answer}"));
    assert!(status.is_success(), "GetDashboard {name}: {status} {answer}");
    let body = answer["DashboardBody"].as_str().unwrap_or_else(|| panic!("no DashboardBody in {answer}"));
    serde_json::from_str(body).unwrap_or_else(|err| panic!("the deployed body is not JSON ({err}): {body}"))
}

#[tokio::test]
async fn the_deployed_dashboard_names_every_queue_and_function_and_status_links_it() {
    let emulator = reset_emulator().await;
    let template = Template::load();
    let cloudformation = aws_sdk_cloudformation::Client::new(&emulator.config);
    cloudformation
        .create_stack()
        .stack_name(STACK)
        .template_body(dashboard_template(&template).to_string())
        .send()
        .await
        .unwrap_or_else(|err| panic!("CreateStack: {}", aws_sdk_cloudformation::error::DisplayErrorContext(err)));

    // The stack's output, as `status --stack` reads and prints it.
    let stack = tributary::aws::Stack::connect(STACK).await.expect("the stack's outputs");
    let url = stack.dashboard_url().expect("a DashboardUrl output").to_string();
    assert_eq!(
        url,
        format!(
            "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards/dashboard/{STACK}"
        )
    );
    assert_eq!(tributary::status::dashboard_line(STACK, stack.dashboard_url()), format!("\ndashboard: {url}\n"));

    let body = get_dashboard(&emulator.endpoint, STACK).await;
    let text = body.to_string();
    assert!(!text.contains("${"), "CloudFormation substituted every ${{…}}: {text}");
    let (queues, functions) = template_names(&template);
    let graphs = graphs(&body);
    let mut missing = Vec::new();
    for queue in &queues {
        let metric = if queue.ends_with("-dlq") {
            "ApproximateNumberOfMessagesVisible"
        } else {
            "ApproximateAgeOfOldestMessage"
        };
        if !graphs.iter().any(|g| g.dimension_values("AWS/SQS", metric, "QueueName").contains(queue)) {
            missing.push(format!("queue {queue} ({metric})"));
        }
    }
    for function in &functions {
        for metric in ["Errors", "Throttles", "Duration"] {
            if !graphs.iter().any(|g| g.dimension_values("AWS/Lambda", metric, "FunctionName").contains(function)) {
                missing.push(format!("function {function} ({metric})"));
            }
        }
    }
    assert!(missing.is_empty(), "the deployed dashboard lacks {missing:?}: {text}");
    assert_eq!(
        (queues.len(), functions.len()),
        (12, 5),
        "the template's queues {queues:?} and functions {functions:?}"
    );
}
