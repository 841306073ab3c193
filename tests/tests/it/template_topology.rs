//! infra/template.yaml follows `tributary_core::topology`, the one declaration of
//! queues, DLQs, redrive, batch sizes, visibility timeouts, function timeouts
//! and memory, topics and subscriptions that the local runtime uses too.
//!
//! The template is read as YAML (`serde_norway::Value`): CloudFormation's
//! short tags (`!Ref X`, `!GetAtt X.Arn`, `!Sub "..."`) arrive as
//! `Value::Tagged`, the long forms (`{"Ref": X}`, `{"Fn::GetAtt": [X, Arn]}`)
//! as one-key mappings; both are understood. Each test gathers every
//! difference and fails once, naming the resource and the topology entry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_norway::{Mapping, Value};
use tributary_core::env::EnvVar;
use tributary_core::topology::{self, Function, QueueDecl};

pub(super) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

const TEMPLATE: &str = "infra/template.yaml";

/// The template, parsed, with lookups by logical id.
pub(super) struct Template {
    root: Value,
}

impl Template {
    /// `infra/template.yaml`, or the file `TRIBUTARY_TEMPLATE` names (to try
    /// the checks on a variant).
    pub(super) fn load() -> Self {
        let path = std::env::var_os("TRIBUTARY_TEMPLATE").map_or_else(|| repo_root().join(TEMPLATE), PathBuf::from);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let root: Value =
            serde_norway::from_str(&text).unwrap_or_else(|err| panic!("{} is not valid YAML: {err}", path.display()));
        Self { root }
    }

    /// The whole template.
    pub(super) fn root(&self) -> &Value {
        &self.root
    }

    fn resources(&self) -> &Mapping {
        self.root.get("Resources").and_then(Value::as_mapping).expect("template has no Resources mapping")
    }

    /// `(logical id, resource)` of every resource of type `ty`.
    fn of_type<'a>(&'a self, ty: &'a str) -> impl Iterator<Item = (&'a str, &'a Value)> + 'a {
        self.resources().iter().filter_map(move |(id, resource)| {
            let id = id.as_str()?;
            (resource.get("Type").and_then(Value::as_str) == Some(ty)).then_some((id, resource))
        })
    }

    pub(super) fn resource(&self, id: &str) -> Option<&Value> {
        self.resources().get(id)
    }

    /// A parameter's `Default`.
    fn parameter_default(&self, name: &str) -> Option<&Value> {
        self.root.get("Parameters")?.get(name)?.get("Default")
    }

    /// The logical id of the `AWS::SQS::Queue` named `<stack>-<name>`.
    fn queue_id(&self, name: &str) -> Option<&str> {
        self.of_type("AWS::SQS::Queue")
            .find(|(_, q)| stack_suffix(prop(q, "QueueName")).as_deref() == Some(name))
            .map(|(id, _)| id)
    }

    /// The logical id of the `AWS::SNS::Topic` named `<stack>-<name>`.
    fn topic_id(&self, name: &str) -> Option<&str> {
        self.of_type("AWS::SNS::Topic")
            .find(|(_, t)| stack_suffix(prop(t, "TopicName")).as_deref() == Some(name))
            .map(|(id, _)| id)
    }

    /// The logical id of the `AWS::Serverless::Function` built from binary
    /// `function.name()` (`Metadata.BuildProperties.Binary`).
    pub(super) fn function_id(&self, function: Function) -> Option<&str> {
        self.of_type("AWS::Serverless::Function")
            .find(|(_, f)| {
                f.get("Metadata")
                    .and_then(|m| m.get("BuildProperties"))
                    .and_then(|b| b.get("Binary"))
                    .and_then(Value::as_str)
                    == Some(function.name())
            })
            .map(|(id, _)| id)
    }

    /// A number, literal or `!Ref` of a parameter (its default).
    fn number(&self, value: Option<&Value>) -> Option<u64> {
        let value = value?;
        if let Some(param) = ref_target(value) {
            return self.number(self.parameter_default(param));
        }
        value.as_u64().or_else(|| value.as_str()?.parse().ok())
    }

    /// Every SQS event of every function: `(function id, event name, queue id, event properties)`.
    fn sqs_events(&self) -> Vec<(&str, &str, Option<&str>, &Value)> {
        let mut events = Vec::new();
        for (function_id, function) in self.of_type("AWS::Serverless::Function") {
            let Some(map) = prop(function, "Events").and_then(Value::as_mapping) else { continue };
            for (name, event) in map {
                if event.get("Type").and_then(Value::as_str) != Some("SQS") {
                    continue;
                }
                let properties = event.get("Properties").unwrap_or(&Value::Null);
                let queue = properties.get("Queue").and_then(getatt).map(|(id, _)| id);
                events.push((function_id, name.as_str().unwrap_or("?"), queue, properties));
            }
        }
        events
    }
}

/// `resource.Properties.<name>`.
pub(super) fn prop<'a>(resource: &'a Value, name: &str) -> Option<&'a Value> {
    resource.get("Properties")?.get(name)
}

/// An intrinsic function: `("Ref" | "GetAtt" | "Sub" | …, argument)`, from the
/// short tag form or the one-key long form.
pub(super) fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            Some((name.strip_prefix("Fn::").unwrap_or(name).to_string(), &tagged.value))
        }
        Value::Mapping(map) if map.len() == 1 => {
            let (key, arg) = map.iter().next()?;
            let key = key.as_str()?;
            if key == "Ref" || key.starts_with("Fn::") {
                Some((key.strip_prefix("Fn::").unwrap_or(key).to_string(), arg))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `X` of `!Ref X`.
pub(super) fn ref_target(value: &Value) -> Option<&str> {
    match intrinsic(value)? {
        (name, arg) if name == "Ref" => arg.as_str(),
        _ => None,
    }
}

/// `(X, Attr)` of `!GetAtt X.Attr` or `{"Fn::GetAtt": [X, Attr]}`.
fn getatt(value: &Value) -> Option<(&str, &str)> {
    let (name, arg) = intrinsic(value)?;
    if name != "GetAtt" {
        return None;
    }
    match arg {
        Value::String(text) => text.split_once('.'),
        Value::Sequence(seq) if seq.len() == 2 => Some((seq[0].as_str()?, seq[1].as_str()?)),
        _ => None,
    }
}

/// `name` of `!Sub "${AWS::StackName}-name"` (what `topology::function_for_queue`
/// maps back); a literal name as it is.
fn stack_suffix(value: Option<&Value>) -> Option<String> {
    // Intrinsics first: `as_str` looks through YAML tags.
    match value? {
        Value::String(text) => Some(text.clone()),
        value => match intrinsic(value)? {
            (name, Value::String(text)) if name == "Sub" => text.strip_prefix("${AWS::StackName}-").map(str::to_string),
            _ => None,
        },
    }
}

/// `value` as a list of strings (a scalar is a list of one).
pub(super) fn strings(value: Option<&Value>) -> Vec<&str> {
    match value {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Sequence(seq)) => seq.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(text)) => text.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn assert_no_failures(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{TEMPLATE} does not follow core/src/topology.rs ({what}):\n  - {}",
        failures.join("\n  - ")
    );
}

#[test]
fn every_declared_queue_exists_with_its_redrive_and_visibility() {
    let template = Template::load();
    let mut failures = Vec::new();
    for decl in topology::QUEUES {
        let Some(id) = template.queue_id(decl.name) else {
            failures.push(format!(
                "queue `{}`: no AWS::SQS::Queue with QueueName !Sub \"${{AWS::StackName}}-{}\"",
                decl.name, decl.name
            ));
            continue;
        };
        let queue = template.resource(id).expect("found above");
        let visibility = template.number(prop(queue, "VisibilityTimeout"));
        if visibility != Some(decl.visibility_timeout_secs) {
            failures.push(format!(
                "queue `{}` ({id}): VisibilityTimeout is {visibility:?}, topology says {}",
                decl.name, decl.visibility_timeout_secs
            ));
        }
        let redrive = prop(queue, "RedrivePolicy");
        match (decl.redrive, redrive) {
            (None, None) => {}
            (None, Some(_)) => {
                failures.push(format!("queue `{}` ({id}): has a RedrivePolicy, topology declares none", decl.name))
            }
            (Some((dlq, _)), None) => {
                failures.push(format!("queue `{}` ({id}): no RedrivePolicy, topology redrives to `{dlq}`", decl.name))
            }
            (Some((dlq, count)), Some(policy)) => {
                let target = policy.get("deadLetterTargetArn").and_then(getatt);
                let expected = template.queue_id(dlq);
                if expected.is_none() || target != expected.map(|dlq_id| (dlq_id, "Arn")) {
                    failures.push(format!(
                        "queue `{}` ({id}): RedrivePolicy.deadLetterTargetArn is {target:?}, expected !GetAtt of DLQ `{dlq}` ({})",
                        decl.name,
                        expected.unwrap_or("missing")
                    ));
                }
                let max = template.number(policy.get("maxReceiveCount"));
                if max != Some(u64::from(count)) {
                    failures.push(format!(
                        "queue `{}` ({id}): RedrivePolicy.maxReceiveCount is {max:?} (parameter defaults resolved), topology says {count}",
                        decl.name
                    ));
                }
            }
        }
    }
    // The stream failure queue exists only in a stack with a Kinesis stream
    // (condition HasKinesisStream); the local poller keeps its on-failure
    // records in the lake instead (`tributary::stream`), so the topology
    // does not declare it.
    for (id, queue) in template.of_type("AWS::SQS::Queue").filter(|(_, q)| q.get("Condition").is_none()) {
        match stack_suffix(prop(queue, "QueueName")) {
            Some(name) if topology::queue(&name).is_some() => {}
            other => failures.push(format!("AWS::SQS::Queue {id} (name {other:?}) is not declared in the topology")),
        }
    }
    assert_no_failures("queues", failures);
}

#[test]
fn functions_have_the_declared_timeout_and_memory() {
    let template = Template::load();
    let mut failures = Vec::new();
    for decl in topology::FUNCTIONS {
        let name = decl.function.name();
        let Some(id) = template.function_id(decl.function) else {
            failures.push(format!(
                "function `{name}`: no AWS::Serverless::Function with Metadata.BuildProperties.Binary `{name}`"
            ));
            continue;
        };
        let function = template.resource(id).expect("found above");
        let method = function.get("Metadata").and_then(|m| m.get("BuildMethod")).and_then(Value::as_str);
        if method != Some("rust-cargolambda") {
            failures
                .push(format!("function `{name}` ({id}): Metadata.BuildMethod is {method:?}, not rust-cargolambda"));
        }
        let timeout = template.number(prop(function, "Timeout"));
        if timeout != Some(decl.timeout_secs) {
            failures
                .push(format!("function `{name}` ({id}): Timeout is {timeout:?}, topology says {}", decl.timeout_secs));
        }
        let memory = template.number(prop(function, "MemorySize"));
        if memory != Some(u64::from(decl.memory_mb)) {
            failures
                .push(format!("function `{name}` ({id}): MemorySize is {memory:?}, topology says {}", decl.memory_mb));
        }
    }
    assert_no_failures("functions", failures);
}

#[test]
fn every_consumer_queue_triggers_its_function_with_partial_batch_responses() {
    let template = Template::load();
    let events = template.sqs_events();
    let mut failures = Vec::new();
    for decl in topology::QUEUES {
        let Some(queue_id) = template.queue_id(decl.name) else {
            failures.push(format!("queue `{}`: no AWS::SQS::Queue (see the queue test)", decl.name));
            continue;
        };
        let consumers: Vec<_> = events.iter().filter(|(_, _, queue, _)| *queue == Some(queue_id)).collect();
        let Some(function) = decl.consumer else {
            for (function_id, event, _, _) in consumers {
                failures.push(format!(
                    "queue `{}` ({queue_id}) has no consumer in the topology, but {function_id} has SQS event `{event}` on it",
                    decl.name
                ));
            }
            continue;
        };
        let Some(function_id) = template.function_id(function) else {
            failures.push(format!(
                "queue `{}`: its consumer `{}` has no function resource",
                decl.name,
                function.name()
            ));
            continue;
        };
        let mut found = false;
        for (consumer_id, event, _, properties) in consumers {
            if *consumer_id != function_id {
                failures.push(format!(
                    "queue `{}` ({queue_id}) is consumed by {consumer_id} (event `{event}`), topology says `{}` ({function_id})",
                    decl.name,
                    function.name()
                ));
                continue;
            }
            found = true;
            check_sqs_event(&template, decl, function_id, event, properties, &mut failures);
        }
        if !found {
            failures.push(format!(
                "queue `{}` ({queue_id}): {function_id} has no SQS event with Queue: !GetAtt {queue_id}.Arn",
                decl.name
            ));
        }
    }
    for (function_id, event, queue, _) in &events {
        if queue.is_none() {
            failures.push(format!("{function_id} SQS event `{event}`: Queue is not !GetAtt <a queue>.Arn"));
        }
    }
    assert_no_failures("event sources", failures);
}

fn check_sqs_event(
    template: &Template,
    decl: &QueueDecl,
    function_id: &str,
    event: &str,
    properties: &Value,
    failures: &mut Vec<String>,
) {
    let at = format!("queue `{}`: {function_id} event `{event}`", decl.name);
    let batch = template.number(properties.get("BatchSize"));
    if batch != Some(decl.batch_size as u64) {
        failures.push(format!("{at}: BatchSize is {batch:?}, topology says {}", decl.batch_size));
    }
    let window = template.number(properties.get("MaximumBatchingWindowInSeconds")).unwrap_or(0);
    if window != u64::from(decl.batching_window_secs) {
        failures.push(format!(
            "{at}: MaximumBatchingWindowInSeconds is {window}, topology says {}",
            decl.batching_window_secs
        ));
    }
    let responses = strings(properties.get("FunctionResponseTypes"));
    if !responses.contains(&"ReportBatchItemFailures") {
        failures.push(format!("{at}: FunctionResponseTypes {responses:?} lacks ReportBatchItemFailures"));
    }
    let function = template.resource(function_id).expect("function exists");
    let timeout = template.number(prop(function, "Timeout"));
    let visibility =
        template.queue_id(decl.name).and_then(|id| template.number(prop(template.resource(id)?, "VisibilityTimeout")));
    match (timeout, visibility) {
        (Some(timeout), Some(visibility)) if visibility >= 6 * timeout => {}
        _ => failures.push(format!(
            "{at}: the queue's VisibilityTimeout {visibility:?} is below 6x the function's Timeout {timeout:?}"
        )),
    }
}

#[test]
fn topics_and_subscriptions_exist_with_queue_policies() {
    let template = Template::load();
    let mut failures = Vec::new();
    for topic in topology::TOPICS {
        if template.topic_id(topic).is_none() {
            failures.push(format!(
                "topic `{topic}`: no AWS::SNS::Topic with TopicName !Sub \"${{AWS::StackName}}-{topic}\""
            ));
        }
    }
    for sub in topology::QUEUE_SUBSCRIPTIONS {
        let at = format!("subscription `{}` -> queue `{}`", sub.topic, sub.queue);
        let (Some(topic_id), Some(queue_id)) = (template.topic_id(sub.topic), template.queue_id(sub.queue)) else {
            failures.push(format!("{at}: the topic or the queue is missing"));
            continue;
        };
        let subscription = template.of_type("AWS::SNS::Subscription").find(|(_, s)| {
            prop(s, "TopicArn").and_then(ref_target) == Some(topic_id)
                && prop(s, "Endpoint").and_then(getatt) == Some((queue_id, "Arn"))
        });
        match subscription {
            None => failures.push(format!(
                "{at}: no AWS::SNS::Subscription with TopicArn !Ref {topic_id} and Endpoint !GetAtt {queue_id}.Arn"
            )),
            Some((id, s)) => {
                if prop(s, "Protocol").and_then(Value::as_str) != Some("sqs") {
                    failures.push(format!("{at} ({id}): Protocol is not sqs"));
                }
                let raw = truthy(prop(s, "RawMessageDelivery"));
                if raw != sub.raw {
                    failures.push(format!("{at} ({id}): RawMessageDelivery is {raw}, topology says {}", sub.raw));
                }
            }
        }
        if !queue_policy_allows(&template, queue_id, topic_id) {
            failures.push(format!(
                "{at}: no AWS::SQS::QueuePolicy on !Ref {queue_id} allowing sns.amazonaws.com sqs:SendMessage with aws:SourceArn = !Ref {topic_id}"
            ));
        }
    }
    assert_no_failures("topics and subscriptions", failures);
}

/// Whether an `AWS::SQS::QueuePolicy` on queue `queue_id` lets SNS topic
/// `topic_id` send to it.
fn queue_policy_allows(template: &Template, queue_id: &str, topic_id: &str) -> bool {
    template.of_type("AWS::SQS::QueuePolicy").any(|(_, policy)| {
        let queues = prop(policy, "Queues").and_then(Value::as_sequence);
        let covers_queue = queues.is_some_and(|qs| qs.iter().any(|q| ref_target(q) == Some(queue_id)));
        let statements = prop(policy, "PolicyDocument").and_then(|d| d.get("Statement")).and_then(Value::as_sequence);
        covers_queue && statements.is_some_and(|st| st.iter().any(|s| allows_topic(s, queue_id, topic_id)))
    })
}

/// Whether `statement` lets SNS topic `topic_id` send to queue `queue_id`.
fn allows_topic(statement: &Value, queue_id: &str, topic_id: &str) -> bool {
    let effect = statement.get("Effect").and_then(Value::as_str) == Some("Allow");
    let service = strings(statement.get("Principal").and_then(|p| p.get("Service"))).contains(&"sns.amazonaws.com");
    let action = strings(statement.get("Action")).iter().any(|a| *a == "sqs:SendMessage" || *a == "sqs:*");
    let resource = match statement.get("Resource") {
        Some(Value::Sequence(seq)) => seq.iter().any(|r| getatt(r) == Some((queue_id, "Arn"))),
        Some(single) => getatt(single) == Some((queue_id, "Arn")),
        None => false,
    };
    let source = statement.get("Condition").and_then(Value::as_mapping).is_some_and(|conditions| {
        conditions.values().any(|c| c.get("aws:SourceArn").and_then(ref_target) == Some(topic_id))
    });
    effect && service && action && resource && source
}

/// A function's environment table: `LambdaConfig::ENV` in its
/// `src/config.rs`, what its `from_env` reads.
fn env_table(function: Function) -> &'static [EnvVar] {
    match function {
        Function::Orchestrator => orchestrator::LambdaConfig::ENV,
        Function::Request => request::LambdaConfig::ENV,
        Function::Persist => persist::LambdaConfig::ENV,
        Function::Athena => athena::LambdaConfig::ENV,
        Function::Notify => notify::LambdaConfig::ENV,
    }
}

/// The `Environment.Variables` the template gives function `id`.
pub(super) fn template_env<'a>(template: &'a Template, id: &str) -> BTreeMap<String, &'a Value> {
    prop(template.resource(id).expect("exists"), "Environment")
        .and_then(|e| e.get("Variables"))
        .and_then(Value::as_mapping)
        .map(|vars| vars.iter().filter_map(|(k, v)| Some((k.as_str()?.to_string(), v))).collect())
        .unwrap_or_default()
}

#[test]
fn functions_get_exactly_the_environment_their_table_declares() {
    let template = Template::load();
    let mut failures = Vec::new();
    for decl in topology::FUNCTIONS {
        let name = decl.function.name();
        let table = env_table(decl.function);
        let declared: BTreeSet<&str> = table.iter().map(|var| var.name).collect();
        if declared.len() != table.len() {
            failures.push(format!("function `{name}`: LambdaConfig::ENV names a variable twice"));
        }
        let Some(id) = template.function_id(decl.function) else {
            failures.push(format!("function `{name}`: missing (see the function test)"));
            continue;
        };
        let set = template_env(&template, id);
        for var in table {
            match set.get(var.name) {
                None => failures.push(format!(
                    "function `{name}` ({id}): LambdaConfig::ENV declares {}, the template does not set it",
                    var.name
                )),
                // A literal must be a value the function accepts.
                Some(Value::String(value)) => {
                    if let Err(err) = var.check(value) {
                        failures.push(format!("function `{name}` ({id}): {err}"));
                    }
                }
                Some(_) => {}
            }
        }
        for var in set.keys().filter(|var| !declared.contains(var.as_str())) {
            failures.push(format!(
                "function `{name}` ({id}): the template sets {var}, which its LambdaConfig::ENV does not declare"
            ));
        }
    }
    assert_no_failures("function environments", failures);
}

/// A template value as the docs show it: `"262144"`, `!Ref LakeBucket`,
/// `!Join [",", [!Ref A, !Ref B]]`.
fn template_value_text(value: &Value) -> String {
    match (intrinsic(value), value) {
        (Some((name, arg)), _) => {
            let arg = match arg {
                Value::String(text) => text.clone(),
                other => template_value_text(other),
            };
            format!("!{name} {arg}")
        }
        (None, Value::String(text)) => format!("{text:?}"),
        (None, Value::Sequence(items)) => {
            format!("[{}]", items.iter().map(template_value_text).collect::<Vec<_>>().join(", "))
        }
        (None, other) => serde_norway::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

const ENV_DOC: &str = "infra/README.md";
const ENV_TABLE_START: &str =
    "<!-- environment table: generated from each LambdaConfig::ENV by tests/tests/it/template_topology.rs -->";
const ENV_TABLE_END: &str = "<!-- end of environment table -->";

/// infra/README.md's environment table is the functions' tables with what
/// the template sets: a difference fails, and `TRIBUTARY_UPDATE_DOCS=1`
/// rewrites it.
#[test]
fn the_infra_readme_lists_every_function_variable_from_its_table() {
    let template = Template::load();
    let mut table = String::from(
        "| function | variable | what | value in the stack | default in code | allowed |\n|---|---|---|---|---|---|\n",
    );
    for decl in topology::FUNCTIONS {
        let set = template.function_id(decl.function).map(|id| template_env(&template, id)).unwrap_or_default();
        for var in env_table(decl.function) {
            let stack = set.get(var.name).map(|value| format!("`{}`", template_value_text(value))).unwrap_or_default();
            let allowed = var.allowed_text();
            table.push_str(&format!(
                "| {} | `{}` | {} | {stack} | {} | {allowed} |\n",
                decl.function.name(),
                var.name,
                var.doc,
                var.default_text()
            ));
        }
    }
    let path = repo_root().join(ENV_DOC);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {ENV_DOC}: {err}"));
    let (Some(start), Some(end)) = (text.find(ENV_TABLE_START), text.find(ENV_TABLE_END)) else {
        panic!("{ENV_DOC} has no `{ENV_TABLE_START}` ... `{ENV_TABLE_END}` section");
    };
    let start = start + ENV_TABLE_START.len();
    let expected = format!("\n{table}");
    if text[start..end] == expected {
        return;
    }
    if std::env::var_os("TRIBUTARY_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{expected}{}", &text[..start], &text[end..])).expect("write the docs");
        return;
    }
    panic!(
        "{ENV_DOC}'s environment table is not the functions' LambdaConfig::ENV (TRIBUTARY_UPDATE_DOCS=1 rewrites it); expected:\n{table}"
    );
}

/// Every statement of every inline policy of the role that function
/// `function_id` runs as (`Role: !GetAtt <role>.Arn`).
pub(super) fn role_statements<'a>(template: &'a Template, function_id: &str) -> Vec<&'a Value> {
    let function = template.resource(function_id).expect("function exists");
    let Some((role_id, "Arn")) = prop(function, "Role").and_then(getatt) else {
        panic!("{function_id}: Role is not !GetAtt <role>.Arn");
    };
    let role = template.resource(role_id).unwrap_or_else(|| panic!("{function_id}: no role {role_id}"));
    prop(role, "Policies")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|policy| policy.get("PolicyDocument")?.get("Statement")?.as_sequence())
        .flatten()
        .collect()
}

/// The text of `!Sub "…"` (short or long form).
pub(super) fn sub_text(value: &Value) -> Option<&str> {
    match intrinsic(value)? {
        (name, Value::String(text)) if name == "Sub" => Some(text.as_str()),
        _ => None,
    }
}

#[test]
fn persist_registers_tables_in_the_lake_database_only() {
    let template = Template::load();
    let persist = template.function_id(Function::Persist).expect("persist function");
    let mut failures = Vec::new();
    let statements = role_statements(&template, persist);
    let glue: Vec<&Value> = statements
        .iter()
        .copied()
        .filter(|statement| strings(statement.get("Action")).iter().any(|a| a.starts_with("glue:")))
        .collect();
    let actions: BTreeSet<&str> = glue.iter().flat_map(|statement| strings(statement.get("Action"))).collect();
    // GetDatabase: the Iceberg committer looks the database up first;
    // the table optimizers of its Iceberg tables (TABLE_OPTIMIZERS).
    let expected = BTreeSet::from([
        "glue:CreateTable",
        "glue:GetDatabase",
        "glue:GetTable",
        "glue:UpdateTable",
        "glue:CreateTableOptimizer",
        "glue:GetTableOptimizer",
    ]);
    if actions != expected {
        failures.push(format!("{persist}'s role allows Glue actions {actions:?}, expected exactly {expected:?}"));
    }
    let catalog = "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:catalog";
    let database = "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:database/${LakeDatabase}";
    let tables = "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/${LakeDatabase}/*";
    for statement in &glue {
        let sid = statement.get("Sid").and_then(Value::as_str).unwrap_or("(no Sid)");
        if statement.get("Effect").and_then(Value::as_str) != Some("Allow") {
            failures.push(format!("{persist} statement {sid}: Effect is not Allow"));
        }
        let resources: Option<BTreeSet<&str>> = match statement.get("Resource") {
            Some(Value::Sequence(seq)) => seq.iter().map(sub_text).collect(),
            Some(single) => sub_text(single).map(|text| BTreeSet::from([text])),
            None => None,
        };
        if resources != Some(BTreeSet::from([catalog, database, tables])) {
            failures.push(format!(
                "{persist} statement {sid}: Resource is {resources:?}, expected the catalog, the lake database and its tables"
            ));
        }
    }
    let env = prop(template.resource(persist).expect("exists"), "Environment").and_then(|e| e.get("Variables"));
    let glue_database = env.and_then(|vars| vars.get("GLUE_DATABASE")).and_then(ref_target);
    if glue_database != Some("LakeDatabase") {
        failures.push(format!("{persist}: GLUE_DATABASE is {glue_database:?}, expected !Ref LakeDatabase"));
    }
    // The optimizers run as TableOptimizerRole: Persist names it and may
    // pass it to Glue only; the role trusts Glue only.
    let optimizer_role = env.and_then(|vars| vars.get("TABLE_OPTIMIZER_ROLE_ARN")).and_then(getatt);
    if optimizer_role != Some(("TableOptimizerRole", "Arn")) {
        failures.push(format!(
            "{persist}: TABLE_OPTIMIZER_ROLE_ARN is {optimizer_role:?}, expected !GetAtt TableOptimizerRole.Arn"
        ));
    }
    let passes: Vec<&Value> =
        statements.iter().copied().filter(|s| strings(s.get("Action")).contains(&"iam:PassRole")).collect();
    let passed: Vec<Option<(&str, &str)>> = passes.iter().map(|s| s.get("Resource").and_then(getatt)).collect();
    if passed != [Some(("TableOptimizerRole", "Arn"))] {
        failures.push(format!("{persist}: iam:PassRole on {passed:?}, expected TableOptimizerRole only"));
    }
    let to_glue =
        passes.first().and_then(|s| s.get("Condition")?.get("StringEquals")?.get("iam:PassedToService")?.as_str());
    if to_glue != Some("glue.amazonaws.com") {
        failures
            .push(format!("{persist}: iam:PassRole's iam:PassedToService is {to_glue:?}, expected glue.amazonaws.com"));
    }
    let trust = template
        .resource("TableOptimizerRole")
        .and_then(|role| prop(role, "AssumeRolePolicyDocument"))
        .and_then(|doc| doc.get("Statement")?.as_sequence())
        .map(|statements| {
            statements.iter().filter_map(|s| s.get("Principal")?.get("Service")?.as_str()).collect::<Vec<_>>()
        });
    if trust != Some(vec!["glue.amazonaws.com"]) {
        failures.push(format!("TableOptimizerRole trusts {trust:?}, expected glue.amazonaws.com only"));
    }
    assert_no_failures("Persist's catalog access", failures);
}

/// The outputs `tributary deploy-schedules` and `tributary trigger` read,
/// and the resource each must point at: `(output, intrinsic, logical id,
/// attribute)`.
fn schedule_outputs(template: &Template) -> Vec<(&'static str, &'static str, String, &'static str)> {
    let id = |found: Option<&str>, what: &str| found.map_or_else(|| format!("<no {what}>"), str::to_string);
    vec![
        ("OrchestratorFunctionArn", "GetAtt", id(template.function_id(Function::Orchestrator), "orchestrator"), "Arn"),
        ("NotifyFunctionArn", "GetAtt", id(template.function_id(Function::Notify), "notify"), "Arn"),
        ("SchedulerRoleArn", "GetAtt", "SchedulerRole".into(), "Arn"),
        ("SchedulerDlqArn", "GetAtt", id(template.queue_id(topology::SCHEDULER_DLQ), "scheduler DLQ"), "Arn"),
        ("ScheduleGroupName", "Ref", "ScheduleGroup".into(), ""),
        ("OrchestratorQueueUrl", "Ref", id(template.queue_id(topology::ORCHESTRATOR_QUEUE), "orchestrator queue"), ""),
    ]
}

#[test]
fn schedules_are_deployed_per_spec_from_the_stack_outputs() {
    let template = Template::load();
    let mut failures = Vec::new();
    // No pipeline is wired into the template: adding one is a spec in a
    // folder and `tributary deploy-schedules`.
    for (id, _) in template.of_type("AWS::Scheduler::Schedule") {
        failures
            .push(format!("schedule {id}: pipelines are scheduled by `tributary deploy-schedules`, not the template"));
    }
    if let Some(params) = template.root.get("Parameters").and_then(Value::as_mapping) {
        for name in params.keys().filter_map(Value::as_str).filter(|n| n.ends_with("PipelineSpec")) {
            failures.push(format!("parameter {name}: pipeline specs live in a folder, not in template parameters"));
        }
    }
    if template.resource("ScheduleGroup").and_then(|g| g.get("Type")).and_then(Value::as_str)
        != Some("AWS::Scheduler::ScheduleGroup")
    {
        failures.push("ScheduleGroup: no AWS::Scheduler::ScheduleGroup (one group per stack)".into());
    }
    let outputs = template.root.get("Outputs");
    for (name, function, id, attribute) in schedule_outputs(&template) {
        let value = outputs.and_then(|o| o.get(name)).and_then(|o| o.get("Value"));
        let found = match value.and_then(intrinsic) {
            Some((f, _)) if f == "GetAtt" => value.and_then(getatt).map(|(i, a)| (i.to_string(), a.to_string())),
            Some((f, arg)) if f == "Ref" => arg.as_str().map(|i| (i.to_string(), String::new())),
            _ => None,
        };
        if found != Some((id.clone(), attribute.to_string())) {
            failures.push(format!(
                "output {name}: Value is {found:?}, expected !{function} {id}{}{attribute}",
                if attribute.is_empty() { "" } else { "." }
            ));
        }
    }
    // The role schedules run as invokes both targets and may dead-letter.
    let role = template.resource("SchedulerRole");
    let statements: Vec<&Value> = role
        .and_then(|r| prop(r, "Policies"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("PolicyDocument")?.get("Statement")?.as_sequence())
        .flatten()
        .collect();
    let allows = |action: &str, id: &str| {
        statements.iter().any(|s| {
            let resources = match s.get("Resource") {
                Some(Value::Sequence(seq)) => seq.iter().filter_map(getatt).collect::<Vec<_>>(),
                Some(single) => getatt(single).into_iter().collect(),
                None => Vec::new(),
            };
            strings(s.get("Action")).contains(&action) && resources.contains(&(id, "Arn"))
        })
    };
    for (action, id) in [
        ("lambda:InvokeFunction", template.function_id(Function::Orchestrator)),
        ("lambda:InvokeFunction", template.function_id(Function::Notify)),
        ("sqs:SendMessage", template.queue_id(topology::SCHEDULER_DLQ)),
    ] {
        let id = id.unwrap_or("<missing>");
        if !allows(action, id) {
            failures.push(format!("SchedulerRole: no statement allowing {action} on !GetAtt {id}.Arn"));
        }
    }
    assert_no_failures("schedules", failures);
}

#[test]
fn deployed_schedules_start_a_run_named_after_the_scheduled_time() {
    let targets = tributary_core::schedules::StackTargets {
        orchestrator_arn: "arn:aws:lambda:us-east-1:123456789012:function:t-orchestrator".into(),
        notify_arn: "arn:aws:lambda:us-east-1:123456789012:function:t-notify".into(),
        role_arn: "arn:aws:iam::123456789012:role/t-scheduler".into(),
        dlq_arn: "arn:aws:sqs:us-east-1:123456789012:t-scheduler-dlq".into(),
    };
    let scheduled = "2026-11-29T06:00:00Z";
    let files = tributary::pipelines::load_dir(&repo_root().join("examples")).expect("the examples are valid");
    let mut failures = Vec::new();
    let mut checked = (0, 0);
    for file in &files {
        let defs = tributary_core::schedules::declared(&file.spec, &targets).expect("schedulable");
        for def in defs {
            // What Scheduler passes at the scheduled time.
            let event = def.input.replace(tributary_core::schedules::SCHEDULED_TIME, scheduled).replace(
                tributary_core::schedules::SCHEDULE_ARN,
                "arn:aws:scheduler:us-east-1:123456789012:schedule/g/x",
            );
            let event: serde_json::Value = serde_json::from_str(&event).expect("the input is JSON");
            if def.target_arn == targets.notify_arn {
                checked.1 += 1;
                match notify::parse_event(event, chrono::Utc::now()) {
                    Ok(notify::NotifyEvent::Freshness { date, check })
                        if date.to_string() == "2026-11-29" && check.pipeline == file.spec.pipeline => {}
                    other => failures.push(format!(
                        "schedule {}: Notify does not read it as that day's freshness check: {other:?}",
                        def.name
                    )),
                }
                continue;
            }
            checked.0 += 1;
            match orchestrator::parse_trigger(event, chrono::Utc::now()) {
                Ok(orchestrator::Trigger::Start { run_id, spec, .. })
                    if run_id.as_str() == "20261129T060000Z" && *spec == file.spec => {}
                other => failures.push(format!(
                    "schedule {}: the Orchestrator does not start run 20261129T060000Z of its spec: {other:?}",
                    def.name
                )),
            }
        }
    }
    assert_eq!(checked, (3, 1), "the three examples are scheduled, customers has a freshness check");
    assert_no_failures("deployed schedules", failures);
}

impl Template {
    /// A parameter's declaration.
    pub(super) fn parameter(&self, name: &str) -> Option<&Value> {
        self.root.get("Parameters")?.get(name)
    }

    /// A parameter's numeric attribute (`MinValue`, `MaxValue`, `Default`).
    fn parameter_number(&self, name: &str, attribute: &str) -> Option<u64> {
        self.number(self.parameter(name)?.get(attribute))
    }
}

/// The parameter of `!Ref P`, when `P` is a declared parameter.
fn parameter_ref<'a>(template: &Template, value: Option<&'a Value>) -> Option<&'a str> {
    let name = ref_target(value?)?;
    template.parameter(name).is_some().then_some(name)
}

/// Every SQS event source mapping caps its concurrency with a template
/// parameter in AWS's range (2-1000); Request learns its own cap (the rate
/// budget's divisor) from the same parameter; Notify's reserved concurrency
/// covers its mappings.
#[test]
fn event_source_mappings_cap_their_concurrency_with_parameters() {
    let template = Template::load();
    let mut failures = Vec::new();
    let events = template.sqs_events();
    assert!(!events.is_empty(), "{TEMPLATE} has no SQS event");
    let mut notify_sum = 0;
    let notify = template.function_id(Function::Notify).expect("notify function");
    for (function_id, event, queue, properties) in &events {
        let at = format!("{function_id} event `{event}`");
        let value = properties.get("ScalingConfig").and_then(|s| s.get("MaximumConcurrency"));
        let Some(param) = parameter_ref(&template, value) else {
            failures.push(format!("{at}: ScalingConfig.MaximumConcurrency is {value:?}, expected !Ref <a parameter>"));
            continue;
        };
        let (min, max, default) = (
            template.parameter_number(param, "MinValue"),
            template.parameter_number(param, "MaxValue"),
            template.parameter_number(param, "Default"),
        );
        let in_range = matches!((min, max, default), (Some(min), Some(max), Some(d)) if min >= 2 && max <= 1000 && (min..=max).contains(&d));
        if !in_range {
            failures.push(format!(
                "{at}: parameter {param} has MinValue {min:?}, MaxValue {max:?}, Default {default:?}; AWS allows 2-1000"
            ));
        }
        if template.parameter(param).and_then(|p| p.get("Description")).is_none() {
            failures.push(format!("{at}: parameter {param} has no Description saying why its default"));
        }
        if *function_id == notify {
            notify_sum += default.unwrap_or(0);
        }
        // Request divides each pipeline's rate by the same cap.
        let request_queue = template.queue_id(topology::REQUEST_QUEUE);
        if *queue == request_queue {
            let request = template.resource(function_id).expect("function exists");
            let env = prop(request, "Environment").and_then(|e| e.get("Variables"));
            let set = env.and_then(|vars| vars.get("REQUEST_MAX_CONCURRENCY")).and_then(ref_target);
            if set != Some(param) {
                failures.push(format!(
                    "{at}: REQUEST_MAX_CONCURRENCY is {set:?}, expected !Ref {param} (the mapping's cap divides the rate budget)"
                ));
            }
        }
    }
    // Notify: `!If [cond, !Ref <param>, !Ref AWS::NoValue]` or `!Ref <param>`.
    let reserved = prop(template.resource(notify).expect("exists"), "ReservedConcurrentExecutions");
    let reserved_param = match reserved.and_then(intrinsic) {
        Some((name, Value::Sequence(branches))) if name == "If" => branches.get(1).and_then(ref_target),
        Some((name, Value::String(param))) if name == "Ref" => Some(param.as_str()),
        _ => None,
    };
    match reserved_param.and_then(|p| Some((p, template.parameter_number(p, "Default")?))) {
        None => failures.push(format!("{notify}: ReservedConcurrentExecutions is {reserved:?}, expected a parameter")),
        // One more than the mappings' sum: the scheduled freshness checks.
        Some((param, default)) if default <= notify_sum => failures.push(format!(
            "{notify}: {param} defaults to {default}, not above its mappings' maximum concurrency ({notify_sum}): Lambda would throttle them"
        )),
        Some(_) => {}
    }
    assert_no_failures("event source mapping concurrency", failures);
}

/// The functions whose role may send to a queue they consume (they chain
/// messages through their own queue) are exactly those with `RecursiveLoop:
/// Allow`; Lambda's loop detection would stop their chains after 16 links.
#[test]
fn exactly_the_functions_that_send_to_their_own_queue_allow_recursive_loops() {
    let template = Template::load();
    let events = template.sqs_events();
    let mut failures = Vec::new();
    let mut self_sending = BTreeSet::new();
    for decl in topology::FUNCTIONS {
        let Some(id) = template.function_id(decl.function) else { continue };
        // Its asynchronous invocations' on-failure destination is no link of
        // a chain even when it consumes that queue (Notify and scheduler-dlq):
        // Lambda sends there only after an asynchronous invocation failed, and
        // an invocation by the queue's mapping is synchronous.
        let on_failure = prop(template.resource(id).expect("exists"), "EventInvokeConfig")
            .and_then(|c| c.get("DestinationConfig")?.get("OnFailure")?.get("Destination"))
            .and_then(getatt)
            .map(|(q, _)| q);
        let own: BTreeSet<&str> = events
            .iter()
            .filter(|(f, ..)| *f == id)
            .filter_map(|(_, _, q, _)| *q)
            .filter(|q| Some(*q) != on_failure)
            .collect();
        let sends_to_own = role_statements(&template, id).into_iter().any(|statement| {
            let allow = statement.get("Effect").and_then(Value::as_str) == Some("Allow");
            let send = strings(statement.get("Action")).iter().any(|a| *a == "sqs:SendMessage" || *a == "sqs:*");
            let resources: Vec<&Value> = match statement.get("Resource") {
                Some(Value::Sequence(seq)) => seq.iter().collect(),
                Some(single) => vec![single],
                None => Vec::new(),
            };
            let own_queue =
                resources.iter().any(|r| getatt(r).is_some_and(|(q, attr)| attr == "Arn" && own.contains(q)));
            allow && send && own_queue
        });
        let recursive = prop(template.resource(id).expect("exists"), "RecursiveLoop").and_then(Value::as_str);
        match (sends_to_own, recursive) {
            (true, Some("Allow")) => {
                self_sending.insert(decl.function.name());
            }
            (true, other) => failures.push(format!(
                "{id} may send to its own queue, but RecursiveLoop is {other:?}: Lambda would stop its chains after 16 messages"
            )),
            (false, Some("Allow")) => failures
                .push(format!("{id} never sends to its own queue, yet RecursiveLoop is Allow (leave Lambda's guard on)")),
            (false, _) => {}
        }
    }
    // The code: Request sends a cursor run's next page to its own queue,
    // Athena its continuations (still running, or more rows), the
    // Orchestrator a count-first run's continuation (pages left when its
    // time runs out, `orchestrator::fanout`).
    let expected = BTreeSet::from(["athena", "orchestrator", "request"]);
    if failures.is_empty() && self_sending != expected {
        failures.push(format!("self-sending functions are {self_sending:?}, the code's are {expected:?}"));
    }
    assert_no_failures("recursive loops", failures);
}

#[test]
fn functions_log_json_at_the_stack_levels() {
    let template = Template::load();
    let mut failures = Vec::new();
    let functions: Vec<_> = template.of_type("AWS::Serverless::Function").collect();
    assert_eq!(functions.len(), topology::FUNCTIONS.len(), "one function resource per topology function");
    let lambda_levels = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];
    for (id, function) in functions {
        let logging = prop(function, "LoggingConfig");
        let format = logging.and_then(|l| l.get("LogFormat")).and_then(Value::as_str);
        if format != Some("JSON") {
            failures.push(format!(
                "{id}: LoggingConfig.LogFormat is {format:?}, expected JSON (tracing writes JSON lines)"
            ));
        }
        for (key, allowed) in [("ApplicationLogLevel", &lambda_levels[..]), ("SystemLogLevel", &lambda_levels[1..4])] {
            let value = logging.and_then(|l| l.get(key));
            let Some(param) = parameter_ref(&template, value) else {
                failures.push(format!("{id}: LoggingConfig.{key} is {value:?}, expected !Ref <a parameter>"));
                continue;
            };
            let values = strings(template.parameter(param).and_then(|p| p.get("AllowedValues")));
            if values.is_empty() || values.iter().any(|v| !allowed.contains(v)) {
                failures.push(format!("{id}: parameter {param} allows {values:?}; Lambda's {key} takes {allowed:?}"));
            }
        }
        if logging.and_then(|l| l.get("LogGroup")).and_then(ref_target).is_none() {
            failures.push(format!("{id}: LoggingConfig.LogGroup is not !Ref <its log group>"));
        }
    }
    assert_no_failures("logging", failures);
}

#[test]
fn max_receive_count_never_dead_letters_on_the_first_receive() {
    let template = Template::load();
    let min = template.parameter_number("MaxReceiveCount", "MinValue");
    let max = template.parameter_number("MaxReceiveCount", "MaxValue");
    assert!(min.is_some_and(|m| m >= 2), "MaxReceiveCount MinValue is {min:?}: at least 2");
    assert!(
        max.is_some_and(|m| m < u64::from(topology::DLQ_MAX_RECEIVE_COUNT)),
        "MaxReceiveCount MaxValue is {max:?}: below the DLQs' {} (SQS keeps the receive count into the DLQ)",
        topology::DLQ_MAX_RECEIVE_COUNT
    );
}

/// `(metric, queue or function id, alarm)` of every CloudWatch alarm on
/// one dimension.
fn alarms(template: &Template) -> Vec<(&str, &str, &str, &Value)> {
    template
        .of_type("AWS::CloudWatch::Alarm")
        .filter_map(|(id, alarm)| {
            let metric = prop(alarm, "MetricName").and_then(Value::as_str)?;
            let dimensions = prop(alarm, "Dimensions").and_then(Value::as_sequence)?;
            let [dimension] = dimensions.as_slice() else { return None };
            let value = dimension.get("Value")?;
            let target = match dimension.get("Name").and_then(Value::as_str)? {
                "QueueName" => getatt(value).filter(|(_, attr)| *attr == "QueueName").map(|(q, _)| q)?,
                "FunctionName" => ref_target(value)?,
                _ => return None,
            };
            Some((metric, target, id, alarm))
        })
        .collect()
}

#[test]
fn alarms_watch_every_function_work_queue_and_dlq_for_operations() {
    let template = Template::load();
    let mut failures = Vec::new();
    let Some(operations) = template.topic_id("operations") else {
        panic!("no AWS::SNS::Topic named !Sub \"${{AWS::StackName}}-operations\"");
    };
    let alerts = template.topic_id(topology::ALERTS_TOPIC).expect("alerts topic");
    let alarms = alarms(&template);
    // `alarm on (metric, target)` with `> threshold` to `topics`.
    let mut expect = |what: String, metric: &str, target: &str, threshold: Option<u64>, topics: &[&str]| {
        let found = alarms.iter().find(|(m, t, ..)| *m == metric && *t == target);
        let Some((_, _, id, alarm)) = found else {
            failures.push(format!("{what}: no AWS::CloudWatch::Alarm on {metric} of {target}"));
            return;
        };
        let operator = prop(alarm, "ComparisonOperator").and_then(Value::as_str);
        if operator != Some("GreaterThanThreshold") {
            failures.push(format!("{what} ({id}): ComparisonOperator is {operator:?}"));
        }
        let actual = prop(alarm, "Threshold");
        let ok = match threshold {
            Some(n) => template.number(actual) == Some(n),
            None => parameter_ref(&template, actual).is_some(),
        };
        if !ok {
            failures
                .push(format!("{what} ({id}): Threshold is {actual:?}, expected {threshold:?} (None: a parameter)"));
        }
        let actions: Vec<&str> = prop(alarm, "AlarmActions")
            .and_then(Value::as_sequence)
            .map(|seq| seq.iter().filter_map(ref_target).collect())
            .unwrap_or_default();
        for topic in topics {
            if !actions.contains(topic) {
                failures.push(format!("{what} ({id}): AlarmActions {actions:?} lack !Ref {topic}"));
            }
        }
        if prop(alarm, "TreatMissingData").and_then(Value::as_str) != Some("notBreaching") {
            failures.push(format!("{what} ({id}): TreatMissingData is not notBreaching (idle is healthy)"));
        }
    };
    for decl in topology::FUNCTIONS {
        let Some(id) = template.function_id(decl.function) else { continue };
        for metric in ["Errors", "Throttles"] {
            expect(format!("function `{}`", decl.function.name()), metric, id, Some(0), &[operations]);
        }
    }
    let dead_letter_queues: BTreeSet<&str> = topology::QUEUES
        .iter()
        .filter_map(|q| q.redrive.map(|(dlq, _)| dlq))
        .chain(topology::QUEUE_SUBSCRIPTIONS.iter().filter_map(|s| s.dlq))
        // The schedules' DeadLetterConfig (tributary deploy-schedules).
        .chain([topology::SCHEDULER_DLQ])
        .collect();
    for decl in topology::QUEUES {
        let Some(id) = template.queue_id(decl.name) else { continue };
        let what = format!("queue `{}`", decl.name);
        if dead_letter_queues.contains(decl.name) {
            // A DLQ nobody drains tells the alerts topic's users too.
            let topics: &[&str] = if decl.consumer.is_none() { &[operations, alerts] } else { &[operations] };
            expect(what, "ApproximateNumberOfMessagesVisible", id, Some(0), topics);
        } else {
            expect(what, "ApproximateAgeOfOldestMessage", id, None, &[operations]);
        }
    }
    // The subscription itself: the_operations_address_is_required_and_alerts_always_reach_someone.
    assert_no_failures("alarms", failures);
}

#[test]
fn query_results_subscription_redrives_to_its_dlq() {
    let template = Template::load();
    let mut failures = Vec::new();
    for sub in topology::QUEUE_SUBSCRIPTIONS {
        let Some(dlq) = sub.dlq else { continue };
        let at = format!("subscription `{}` -> `{}`", sub.topic, sub.queue);
        let (Some(topic_id), Some(queue_id), Some(dlq_id)) =
            (template.topic_id(sub.topic), template.queue_id(sub.queue), template.queue_id(dlq))
        else {
            failures.push(format!("{at}: the topic, the queue or DLQ `{dlq}` is missing"));
            continue;
        };
        let subscription = template.of_type("AWS::SNS::Subscription").find(|(_, s)| {
            prop(s, "TopicArn").and_then(ref_target) == Some(topic_id)
                && prop(s, "Endpoint").and_then(getatt) == Some((queue_id, "Arn"))
        });
        let Some((id, subscription)) = subscription else {
            failures.push(format!("{at}: no AWS::SNS::Subscription"));
            continue;
        };
        let target = prop(subscription, "RedrivePolicy").and_then(|p| p.get("deadLetterTargetArn")).and_then(getatt);
        if target != Some((dlq_id, "Arn")) {
            failures.push(format!(
                "{at} ({id}): RedrivePolicy.deadLetterTargetArn is {target:?}, expected !GetAtt {dlq_id}.Arn"
            ));
        }
        // SNS itself sends the dead letters: the DLQ's policy must let it.
        if !queue_policy_allows(&template, dlq_id, topic_id) {
            failures.push(format!("{at}: no AWS::SQS::QueuePolicy on {dlq_id} allowing {topic_id} (via SNS) to send"));
        }
    }
    assert_no_failures("subscription redrive", failures);
}

/// Whether `value` (through tags, lists and mappings) holds the string `text`.
pub(super) fn mentions(value: &Value, text: &str) -> bool {
    match value {
        Value::String(s) => s.contains(text),
        Value::Sequence(seq) => seq.iter().any(|v| mentions(v, text)),
        Value::Mapping(map) => map.iter().any(|(k, v)| mentions(k, text) || mentions(v, text)),
        Value::Tagged(tagged) => mentions(&tagged.value, text),
        _ => false,
    }
}

/// Every `!Sub` text among a statement's resources.
fn resource_texts(statement: &Value) -> Vec<&str> {
    match statement.get("Resource") {
        Some(Value::Sequence(seq)) => seq.iter().filter_map(sub_text).collect(),
        Some(single) => sub_text(single).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Two stacks coexist: the Glue database and secrets are per stack; and the
/// lake rights are scoped to the prefixes each function uses.
#[test]
fn stacks_are_scoped_and_lake_rights_follow_the_keys() {
    let template = Template::load();
    let mut failures = Vec::new();
    // Glue: the parameter's default is empty, and empty derives the name
    // from the stack name.
    let database = template.resource("LakeDatabase").expect("LakeDatabase");
    let name = prop(database, "DatabaseInput").and_then(|d| d.get("Name"));
    let default = template.parameter_default("LakeDatabaseName").and_then(Value::as_str);
    if !name.is_some_and(|n| mentions(n, "AWS::StackName")) || default != Some("") {
        failures.push(format!(
            "LakeDatabase name {name:?} with LakeDatabaseName default {default:?}: expected the stack name by default"
        ));
    }
    // Request reads only this stack's secrets.
    let request = template.function_id(Function::Request).expect("request function");
    let secrets: Vec<&str> = role_statements(&template, request)
        .into_iter()
        .filter(|s| strings(s.get("Action")).iter().any(|a| a.starts_with("secretsmanager:")))
        .flat_map(resource_texts)
        .collect();
    if secrets.is_empty() || secrets.iter().any(|r| !r.ends_with(":secret:${AWS::StackName}/*")) {
        failures.push(format!("{request}: secrets {secrets:?}, expected only secret:${{AWS::StackName}}/*"));
    }
    // Persist writes and deletes nothing bucket-wide: its own prefixes,
    // the datasets' partitioned Parquet files (core/src/keys.rs) and the
    // Iceberg tables (tributary_core::keys::iceberg_warehouse_prefix).
    let persist = template.function_id(Function::Persist).expect("persist function");
    let allowed = [
        "raw/*",
        "quarantine/*",
        "_schema/*",
        "_runs/*",
        "_manifests/*",
        "_state/*",
        "_claims/*",
        "_streams/*",
        "*/*=*/*.parquet",
        "_iceberg/*",
    ];
    for statement in role_statements(&template, persist) {
        let actions = strings(statement.get("Action"));
        if !actions.iter().any(|a| a.starts_with("s3:") && *a != "s3:ListBucket") {
            continue;
        }
        for resource in resource_texts(statement) {
            let path = resource.strip_prefix("${LakeBucket.Arn}/");
            if !path.is_some_and(|p| allowed.contains(&p)) {
                failures.push(format!("{persist}: {actions:?} on {resource}, outside {allowed:?}"));
            }
            if path == Some("_claims/*") && actions.iter().any(|a| *a != "s3:GetObject") {
                failures.push(format!("{persist}: {actions:?} on _claims/*: Persist only reads claim checks"));
            }
        }
    }
    // Persist deletes a run's staged coalesced files and commit claim
    // (_runs/), a re-run's old raw and quarantine pages, and stream
    // checkpoints on a replay (_streams/): an audit found none of these
    // granted, so no multi-page Parquet run could complete on AWS.
    let deletes: Vec<&str> = role_statements(&template, persist)
        .into_iter()
        .filter(|s| strings(s.get("Action")).contains(&"s3:DeleteObject"))
        .flat_map(resource_texts)
        .filter_map(|r| r.strip_prefix("${LakeBucket.Arn}/"))
        .collect();
    for prefix in ["_runs/*", "raw/*", "quarantine/*", "_streams/*"] {
        if !deletes.contains(&prefix) {
            failures.push(format!("{persist}: no s3:DeleteObject on {prefix} (deletes {deletes:?})"));
        }
    }
    // Notify keeps dead letters in the lake (_dead_letters/), so it knows it.
    let notify = template.function_id(Function::Notify).expect("notify function");
    let archive = role_statements(&template, notify).into_iter().any(|s| {
        strings(s.get("Action")).contains(&"s3:PutObject")
            && resource_texts(s).contains(&"${LakeBucket.Arn}/_dead_letters/*")
    });
    let env = prop(template.resource(notify).expect("exists"), "Environment").and_then(|e| e.get("Variables"));
    if !archive || env.and_then(|v| v.get("LAKE_BUCKET")).and_then(ref_target) != Some("LakeBucket") {
        failures.push(format!("{notify}: needs s3:PutObject on _dead_letters/* and LAKE_BUCKET = !Ref LakeBucket"));
    }
    // Athena: a per-query scan cutoff, from a parameter at Athena's minimum or above.
    let workgroup = template.resource("AthenaWorkGroup").expect("AthenaWorkGroup");
    let cutoff = prop(workgroup, "WorkGroupConfiguration").and_then(|c| c.get("BytesScannedCutoffPerQuery"));
    match parameter_ref(&template, cutoff) {
        Some(param) if template.parameter_number(param, "MinValue").is_some_and(|m| m >= 10_000_000) => {}
        _ => failures.push(format!(
            "AthenaWorkGroup: BytesScannedCutoffPerQuery is {cutoff:?}, expected !Ref <parameter, MinValue >= 10 MB>"
        )),
    }
    assert_no_failures("stack scoping", failures);
}

/// Request's `MemorySize` holds its peak (issue 25): one page at
/// `MAX_RESPONSE_BYTES` (the client reads one large body at a time) plus
/// the rest of a batch of the request queue's `BatchSize`, at the bytes per
/// body byte `request-bench` measured (`request::peak_memory_bytes`).
#[test]
fn request_memory_holds_a_page_at_the_response_cap_and_the_rest_of_its_batch() {
    let template = Template::load();
    let id = template.function_id(Function::Request).expect("the Request function");
    let memory_mb = template.number(prop(template.resource(id).expect("exists"), "MemorySize")).expect("MemorySize");
    let env = template_env(&template, id);
    let cap: u64 = env
        .get("MAX_RESPONSE_BYTES")
        .and_then(|v| v.as_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or(request::DEFAULT_MAX_RESPONSE_BYTES);
    let queue = topology::QUEUES.iter().find(|q| q.consumer == Some(Function::Request)).expect("the request queue");
    let concurrency = request::RequestConfig::default().concurrency as u64;
    let at_once = (queue.batch_size as u64).min(concurrency);
    let needed = request::peak_memory_bytes(cap, at_once, request::http::DEFAULT_LARGE_BODY_BYTES);
    assert!(
        needed <= memory_mb * 1_000_000,
        "Request needs {} MB for a {cap}-byte page and {} more at once; MemorySize is {memory_mb}",
        needed / 1_000_000,
        at_once - 1
    );
    // And not far more than it needs: memory is billed by the MB-second.
    assert!(
        memory_mb * 1_000_000 < needed * 2,
        "MemorySize {memory_mb} is over twice the {} MB needed",
        needed / 1_000_000
    );
}

/// The branches of `!If [condition, a, b]`; any other value alone.
fn if_branches(value: &Value) -> Vec<&Value> {
    match intrinsic(value) {
        Some((name, Value::Sequence(args))) if name == "If" && args.len() == 3 => vec![&args[1], &args[2]],
        _ => vec![value],
    }
}

/// `(X, Attr)` of every `!GetAtt X.Attr` among a statement's resources.
fn resource_getatts(statement: &Value) -> Vec<(&str, &str)> {
    match statement.get("Resource") {
        Some(Value::Sequence(seq)) => seq.iter().filter_map(getatt).collect(),
        Some(single) => getatt(single).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Logical ids of the topics any alarm notifies (`AlarmActions: [!Ref T]`).
fn alarm_topics(template: &Template) -> BTreeSet<&str> {
    template
        .of_type("AWS::CloudWatch::Alarm")
        .flat_map(|(_, alarm)| prop(alarm, "AlarmActions").and_then(Value::as_sequence).into_iter().flatten())
        .filter_map(ref_target)
        .collect()
}

/// The lake's prefixes that expire after a parameter's days (core/src/keys.rs),
/// and the least default each may have: raw pages are the replay source.
fn expiring_prefixes() -> [(String, u64, &'static str); 3] {
    let run_id = contracts::RunId::from_time(chrono::DateTime::from_timestamp(1_795_932_000, 0).expect("time"));
    let page = tributary_core::keys::PageKey {
        dataset: "customers",
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pipeline: "crm",
        run_id: &run_id,
        page: 3,
    };
    let folder = |key: String| format!("{}/", key.split('/').next().unwrap_or_default());
    [
        (folder(page.raw()), 30, "raw pages, the only replay source: at least a month of replay"),
        (folder(page.quarantine()), 14, "quarantined records: at least two weeks to look at them"),
        (
            tributary_core::keys::DEAD_LETTERS_PREFIX.to_string(),
            14,
            "the dead-letter archive: at least the DLQs' own 14 days",
        ),
    ]
}

/// Issue 25, item 4: what holds data or its catalog outlives the stack; the
/// bucket is versioned with noncurrent versions expiring; raw/, quarantine/
/// and _dead_letters/ expire after a parameter's days, whose defaults
/// infra/README.md states; nothing else the lake needs expires.
#[test]
fn the_lake_and_its_catalog_are_retained_versioned_and_expire_by_parameter() {
    let template = Template::load();
    let mut failures = Vec::new();
    let mut kept = 0;
    for ty in ["AWS::S3::Bucket", "AWS::Glue::Database"] {
        for (id, resource) in template.of_type(ty) {
            kept += 1;
            for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
                let value = resource.get(policy).and_then(Value::as_str);
                if value != Some("Retain") {
                    failures.push(format!(
                        "{id} ({ty}): {policy} is {value:?}, expected Retain (it holds data or its catalog)"
                    ));
                }
            }
        }
    }
    assert_eq!(kept, 2, "the lake bucket and the Glue database");
    let bucket = template.resource("LakeBucket").expect("LakeBucket");
    let versioning = prop(bucket, "VersioningConfiguration").and_then(|v| v.get("Status")).and_then(Value::as_str);
    if versioning != Some("Enabled") {
        failures.push(format!("LakeBucket: VersioningConfiguration.Status is {versioning:?}, expected Enabled"));
    }
    let rules: Vec<&Value> = prop(bucket, "LifecycleConfiguration")
        .and_then(|l| l.get("Rules"))
        .and_then(Value::as_sequence)
        .map(|seq| seq.iter().filter(|r| r.get("Status").and_then(Value::as_str) == Some("Enabled")).collect())
        .unwrap_or_default();
    fn prefix_of(rule: &Value) -> Option<&str> {
        rule.get("Prefix").or_else(|| rule.get("Filter").and_then(|f| f.get("Prefix"))).and_then(Value::as_str)
    }
    let readme = std::fs::read_to_string(repo_root().join(ENV_DOC)).expect("infra/README.md");
    // A parameter's days: at least 1, its default at least `least`, stated in the README.
    let check_days = |what: &str, value: Option<&Value>, least: u64, why: &str| -> Vec<String> {
        let mut failures = Vec::new();
        let Some(param) = parameter_ref(&template, value) else {
            return vec![format!("{what}: days are {value:?}, expected !Ref <parameter>")];
        };
        let default = template.parameter_number(param, "Default");
        if default.is_none_or(|d| d < least) || template.parameter_number(param, "MinValue").is_none_or(|m| m < 1) {
            failures
                .push(format!("{what}: {param} Default {default:?} (at least {least}: {why}), MinValue at least 1"));
        }
        if let Some(default) = default
            && !readme.contains(&format!("| `{param}` | `{default}` |"))
        {
            failures
                .push(format!("{ENV_DOC} does not state {param}'s default: no row \"| `{param}` | `{default}` |\""));
        }
        failures
    };
    let noncurrent = rules.iter().find(|r| r.get("NoncurrentVersionExpiration").is_some() && prefix_of(r).is_none());
    match noncurrent {
        None => failures.push("LakeBucket: no enabled bucket-wide rule with NoncurrentVersionExpiration".into()),
        Some(rule) => failures.extend(check_days(
            "noncurrent versions",
            rule.get("NoncurrentVersionExpiration").and_then(|n| n.get("NoncurrentDays")),
            7,
            "an overwrite or delete stays recoverable for a week at least",
        )),
    }
    let expiring = expiring_prefixes();
    for (prefix, least, why) in &expiring {
        match rules.iter().find(|r| prefix_of(r) == Some(prefix)) {
            None => failures.push(format!("LakeBucket: no enabled lifecycle rule with Prefix {prefix}")),
            Some(rule) => failures.extend(check_days(prefix, rule.get("ExpirationInDays"), *least, why)),
        }
    }
    // Nothing else expires: the ledger, schemas, state and datasets are the lake.
    let scratch = ["athena-results/", "_claims/"];
    for rule in &rules {
        if rule.get("ExpirationInDays").is_none() && rule.get("ExpirationDate").is_none() {
            continue;
        }
        match prefix_of(rule) {
            Some(p) if scratch.contains(&p) || expiring.iter().any(|(e, ..)| e == p) => {}
            other => failures
                .push(format!("LakeBucket: a rule expires current objects under {other:?}, which the lake needs")),
        }
    }
    assert_no_failures("lake retention", failures);
}

/// Issue 25, item 5: every alarm pages someone from the first deploy. The
/// operations address has no default and refuses an empty value (so `sam
/// deploy --guided` asks for it); the alerts topic gets AlertEmail or, when
/// it is empty, the operations address; the deploy commands of docs/deploy.md and infra/README.md pass
/// every required parameter.
#[test]
fn the_operations_address_is_required_and_alerts_always_reach_someone() {
    let template = Template::load();
    let mut failures = Vec::new();
    let operations_email = template.parameter("OperationsEmail").expect("parameter OperationsEmail");
    if operations_email.get("Default").is_some() {
        failures.push("OperationsEmail has a Default: it must be asked for".into());
    }
    if template.number(operations_email.get("MinLength")).is_none_or(|n| n < 3) {
        failures.push("OperationsEmail: MinLength below 3 lets an empty address through".into());
    }
    let pattern = operations_email.get("AllowedPattern").and_then(Value::as_str).unwrap_or_default();
    if !pattern.contains('@') || pattern.contains("^$") {
        failures.push(format!("OperationsEmail: AllowedPattern {pattern:?} is not an e-mail address's"));
    }
    let operations = template.topic_id("operations").expect("operations topic");
    let alerts = template.topic_id(topology::ALERTS_TOPIC).expect("alerts topic");
    let email_subscription = |topic: &str| {
        template.of_type("AWS::SNS::Subscription").find(|(_, s)| {
            prop(s, "TopicArn").and_then(ref_target) == Some(topic)
                && prop(s, "Protocol").and_then(Value::as_str) == Some("email")
        })
    };
    for (topic, accepted) in [(operations, &["OperationsEmail"][..]), (alerts, &["AlertEmail", "OperationsEmail"][..])]
    {
        let Some((id, subscription)) = email_subscription(topic) else {
            failures.push(format!("{topic}: no e-mail AWS::SNS::Subscription"));
            continue;
        };
        if let Some(condition) = subscription.get("Condition") {
            failures.push(format!("{id}: Condition {condition:?}: the subscription must always exist"));
        }
        let endpoint = prop(subscription, "Endpoint").expect("Endpoint");
        let targets: Vec<Option<&str>> = if_branches(endpoint).into_iter().map(ref_target).collect();
        if !targets.iter().all(|t| t.is_some_and(|t| accepted.contains(&t)))
            || !targets.contains(&Some("OperationsEmail"))
        {
            failures.push(format!(
                "{id}: Endpoint {targets:?}, expected among {accepted:?} with OperationsEmail as the fallback"
            ));
        }
    }
    // The deploy commands pass every parameter that has no default.
    let required: Vec<&str> = template
        .root
        .get("Parameters")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter(|(_, p)| p.get("Default").is_none())
        .filter_map(|(name, _)| name.as_str())
        .collect();
    assert!(required.contains(&"OperationsEmail"), "{required:?}");
    for doc in ["docs/deploy.md", ENV_DOC] {
        let text = std::fs::read_to_string(repo_root().join(doc)).unwrap_or_else(|err| panic!("{doc}: {err}"));
        let commands: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("sam deploy --guided")).collect();
        if commands.is_empty() {
            failures.push(format!("{doc}: no `sam deploy --guided` command"));
        }
        for command in commands {
            for param in &required {
                if !command.contains(&format!("{param}=")) {
                    failures.push(format!("{doc}: `{command}` does not pass the required {param}"));
                }
            }
        }
    }
    assert_no_failures("operations address", failures);
}

/// Issue 25, item 6: a freshness check (an asynchronous invocation of
/// Notify by its schedule) that fails goes to a queue Notify drains and
/// alerts on, which also has its own depth alarm; Notify's role may send
/// there.
#[test]
fn failed_freshness_checks_go_to_a_queue_notify_alerts_on() {
    let template = Template::load();
    let mut failures = Vec::new();
    let notify = template.function_id(Function::Notify).expect("notify function");
    let config = prop(template.resource(notify).expect("exists"), "EventInvokeConfig");
    let on_failure = config.and_then(|c| c.get("DestinationConfig")).and_then(|d| d.get("OnFailure"));
    let kind = on_failure.and_then(|o| o.get("Type")).and_then(Value::as_str);
    let Some((queue, "Arn")) = on_failure.and_then(|o| o.get("Destination")).and_then(getatt) else {
        panic!(
            "{notify}: EventInvokeConfig.DestinationConfig.OnFailure.Destination is not !GetAtt <queue>.Arn: {on_failure:?}"
        );
    };
    if kind != Some("SQS")
        || template.resource(queue).and_then(|q| q.get("Type")).and_then(Value::as_str) != Some("AWS::SQS::Queue")
    {
        failures.push(format!("{notify}: on-failure destination {queue} ({kind:?}) is not an SQS queue"));
    }
    if !template.sqs_events().iter().any(|(function, _, q, _)| *function == notify && *q == Some(queue)) {
        failures.push(format!(
            "{notify}: does not consume its on-failure destination {queue}, so no alert tells of a failed check"
        ));
    }
    let operations = template.topic_id("operations").expect("operations topic");
    let alarmed = alarms(&template).iter().any(|(metric, target, _, alarm)| {
        *metric == "ApproximateNumberOfMessagesVisible"
            && *target == queue
            && mentions(prop(alarm, "AlarmActions").unwrap_or(&Value::Null), operations)
    });
    if !alarmed {
        failures.push(format!("{queue}: no depth alarm to {operations}, for when Notify itself cannot alert"));
    }
    let may_send = role_statements(&template, notify).into_iter().any(|s| {
        strings(s.get("Action")).contains(&"sqs:SendMessage") && resource_getatts(s).contains(&(queue, "Arn"))
    });
    if !may_send {
        failures.push(format!(
            "{notify}: its role may not sqs:SendMessage to {queue} (Lambda sends the record as the function)"
        ));
    }
    let retries = template.number(config.and_then(|c| c.get("MaximumRetryAttempts")));
    if retries.is_none_or(|r| r > 2) {
        failures.push(format!("{notify}: MaximumRetryAttempts {retries:?}, expected 0-2"));
    }
    assert_no_failures("freshness on-failure destination", failures);
}

/// Issue 25, item 8: every topic is encrypted at rest. Topics an alarm
/// publishes to use a customer managed key whose policy lets CloudWatch use
/// it (CloudWatch cannot use the AWS-managed alias/aws/sns, and its
/// notifications would be dropped); the others alias/aws/sns; a function
/// publishing to a topic under the stack's key may use the key.
#[test]
fn topics_are_encrypted_and_alarms_can_publish_to_theirs() {
    let template = Template::load();
    let mut failures = Vec::new();
    let alarmed = alarm_topics(&template);
    let mut topics = 0;
    for (id, topic) in template.of_type("AWS::SNS::Topic") {
        topics += 1;
        let key = prop(topic, "KmsMasterKeyId");
        let managed = key.and_then(Value::as_str) == Some("alias/aws/sns");
        let own_key = key.and_then(ref_target).filter(|k| {
            template.resource(k).and_then(|r| r.get("Type")).and_then(Value::as_str) == Some("AWS::KMS::Key")
        });
        match (alarmed.contains(id), managed, own_key) {
            (_, false, None) => failures
                .push(format!("{id}: KmsMasterKeyId is {key:?}, expected alias/aws/sns or !Ref <AWS::KMS::Key>")),
            (true, true, _) => {
                failures.push(format!("{id}: alarms publish to it, and CloudWatch cannot use alias/aws/sns"))
            }
            _ => {}
        }
        let Some(key_id) = own_key else { continue };
        let key_resource = template.resource(key_id).expect("key");
        let cloudwatch = prop(key_resource, "KeyPolicy")
            .and_then(|p| p.get("Statement"))
            .and_then(Value::as_sequence)
            .is_some_and(|statements| {
                statements.iter().any(|s| {
                    let actions = strings(s.get("Action"));
                    s.get("Effect").and_then(Value::as_str) == Some("Allow")
                        && strings(s.get("Principal").and_then(|p| p.get("Service")))
                            .contains(&"cloudwatch.amazonaws.com")
                        && actions.contains(&"kms:Decrypt")
                        && actions.iter().any(|a| a.starts_with("kms:GenerateDataKey"))
                })
            });
        if alarmed.contains(id) && !cloudwatch {
            failures.push(format!(
                "{id}: key {key_id}'s policy does not let cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*"
            ));
        }
        if !truthy(prop(key_resource, "EnableKeyRotation")) {
            failures.push(format!("{key_id}: EnableKeyRotation is not true"));
        }
        for decl in topology::FUNCTIONS {
            let Some(function) = template.function_id(decl.function) else { continue };
            let statements = role_statements(&template, function);
            let publishes = statements.iter().any(|s| {
                strings(s.get("Action")).contains(&"sns:Publish")
                    && s.get("Resource").is_some_and(|r| if_branches(r).iter().any(|r| ref_target(r) == Some(id)))
            });
            let uses_key = statements.iter().any(|s| {
                strings(s.get("Action")).iter().any(|a| a.starts_with("kms:GenerateDataKey"))
                    && resource_getatts(s).contains(&(key_id, "Arn"))
            });
            if publishes && !uses_key {
                failures.push(format!("{function}: publishes to {id} but may not kms:GenerateDataKey* with {key_id}"));
            }
        }
    }
    assert!(topics >= 4, "the four topics");
    assert_no_failures("topic encryption", failures);
}

/// Issue 25, item 8: work queues keep a message 14 days (SQS's maximum), so
/// a stuck consumer or a long vendor outage does not lose it.
#[test]
fn queues_keep_messages_fourteen_days() {
    let template = Template::load();
    let mut failures = Vec::new();
    for decl in topology::QUEUES {
        let Some(id) = template.queue_id(decl.name) else { continue };
        let retention = template.number(prop(template.resource(id).expect("exists"), "MessageRetentionPeriod"));
        if retention != Some(1_209_600) {
            failures
                .push(format!("queue `{}` ({id}): MessageRetentionPeriod {retention:?}, expected 1209600", decl.name));
        }
    }
    assert_no_failures("queue retention", failures);
}

/// Issue 25, item 8: alarms on tributary's own EMF metrics (records
/// quarantined; dead letters, i.e. failed runs), summed over every pipeline
/// of the namespace and dimensions `core/src/metrics.rs` writes, to the
/// operations topic.
#[test]
fn custom_metrics_have_alarms_for_operations() {
    use tributary_core::metrics;
    let template = Template::load();
    let mut failures = Vec::new();
    let operations = template.topic_id("operations").expect("operations topic");
    for metric in [metrics::RECORDS_QUARANTINED, metrics::DEAD_LETTERS] {
        let found = template.of_type("AWS::CloudWatch::Alarm").find(|(_, alarm)| {
            prop(alarm, "Metrics").and_then(Value::as_sequence).is_some_and(|queries| {
                queries.iter().any(|q| {
                    q.get("Expression").and_then(Value::as_str).is_some_and(|e| e.contains(&format!("SUM({metric})")))
                })
            })
        });
        let Some((id, alarm)) = found else {
            failures.push(format!("no AWS::CloudWatch::Alarm with a Metrics expression SUM({metric})"));
            continue;
        };
        let queries = prop(alarm, "Metrics").and_then(Value::as_sequence).expect("found by it");
        let returned: Vec<&Value> = queries.iter().filter(|q| truthy(q.get("ReturnData"))).collect();
        let [query] = returned.as_slice() else {
            failures.push(format!("{id}: exactly one query must have ReturnData: true"));
            continue;
        };
        let expression = query.get("Expression").and_then(Value::as_str).unwrap_or_default();
        let schema = format!(
            "SCHEMA(\"{}\", \"{}\", \"{}\")",
            metrics::NAMESPACE,
            metrics::DIMENSION_FUNCTION,
            metrics::DIMENSION_PIPELINE
        );
        if !expression.contains(&format!("SUM({metric})")) || !expression.contains(&schema) {
            failures.push(format!("{id}: the returned query {expression:?} is not SUM({metric}) FROM {schema}"));
        }
        if template.number(query.get("Period")).is_none() {
            failures.push(format!("{id}: the query has no Period (a Metrics Insights alarm needs one)"));
        }
        let actions: Vec<&str> = prop(alarm, "AlarmActions")
            .and_then(Value::as_sequence)
            .map(|seq| seq.iter().filter_map(ref_target).collect())
            .unwrap_or_default();
        if !actions.contains(&operations) {
            failures.push(format!("{id}: AlarmActions {actions:?} lack !Ref {operations}"));
        }
        if prop(alarm, "TreatMissingData").and_then(Value::as_str) != Some("notBreaching") {
            failures.push(format!("{id}: TreatMissingData is not notBreaching (no data is healthy)"));
        }
    }
    assert_no_failures("custom metric alarms", failures);
}

/// Issue 29: the stream resources exist only with `KinesisStreamArn` or
/// `MskClusterArn` + `KafkaTopic` (a stack without streams is as before),
/// and both mappings have the event source mapping settings the stream
/// handler relies on.
#[test]
fn the_stream_resources_are_behind_their_parameter_with_the_mapping_s_safety_settings() {
    let template = Template::load();
    for (id, condition) in [
        ("StreamFailureQueue", "HasStream"),
        ("NotifyStreamFailureMapping", "HasStream"),
        ("NotifyStreamPolicy", "HasStream"),
        ("PersistStreamFailurePolicy", "HasStream"),
        ("PersistStreamMapping", "HasKinesisStream"),
        ("PersistStreamPolicy", "HasKinesisStream"),
        ("StreamIteratorAgeAlarm", "HasKinesisStream"),
        ("PersistKafkaMapping", "HasKafkaTopic"),
        ("PersistKafkaPolicy", "HasKafkaTopic"),
        ("StreamOffsetLagAlarm", "HasKafkaTopic"),
    ] {
        let resource = template.resource(id).unwrap_or_else(|| panic!("{id} is in the template"));
        assert_eq!(resource.get("Condition").and_then(Value::as_str), Some(condition), "{id}");
    }
    // Every resource behind a stream condition is one of the above: a new
    // one must be added here, with its condition.
    let conditioned: BTreeSet<&str> = template
        .resources()
        .iter()
        .filter(|(_, r)| {
            matches!(
                r.get("Condition").and_then(Value::as_str),
                Some("HasStream" | "HasKinesisStream" | "HasKafkaTopic")
            )
        })
        .filter_map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(conditioned.len(), 10, "stream resources: {conditioned:?}");
    let conditions = template.root().get("Conditions").expect("Conditions");
    let has_stream = serde_norway::to_string(conditions.get("HasStream").expect("HasStream")).expect("yaml");
    assert!(
        has_stream.contains("HasKinesisStream") && has_stream.contains("HasKafkaTopic"),
        "HasStream is either source: {has_stream}"
    );
    for id in ["PersistStreamMapping", "PersistKafkaMapping"] {
        let mapping = template.resource(id).expect("mapping");
        let property = |name: &str| prop(mapping, name).cloned().unwrap_or(Value::Null);
        assert_eq!(property("BisectBatchOnFunctionError"), Value::Bool(true), "{id}");
        assert_eq!(
            property("FunctionResponseTypes"),
            serde_norway::from_str::<Value>("[ReportBatchItemFailures]").expect("yaml"),
            "{id}"
        );
        for name in [
            "MaximumRetryAttempts",
            "MaximumRecordAgeInSeconds",
            "MaximumBatchingWindowInSeconds",
            "BatchSize",
            "StartingPosition",
        ] {
            assert!(!property(name).is_null(), "{id}.{name}");
        }
        let destination = property("DestinationConfig");
        let destination = serde_norway::to_string(&destination).expect("yaml");
        assert!(
            destination.contains("StreamFailureQueue"),
            "{id}: on-failure destination is the stream failure queue: {destination}"
        );
    }
    let kinesis = template.resource("PersistStreamMapping").expect("mapping");
    assert!(prop(kinesis, "ParallelizationFactor").is_some(), "PersistStreamMapping.ParallelizationFactor");
    let kafka = template.resource("PersistKafkaMapping").expect("mapping");
    assert!(prop(kafka, "Topics").is_some(), "PersistKafkaMapping.Topics");
    assert!(
        prop(kafka, "ProvisionedPollerConfig").is_some(),
        "PersistKafkaMapping.ProvisionedPollerConfig: Lambda's Kafka error handling controls need provisioned mode"
    );
}

/// Issue 29: `ParallelizationFactor` above 1 breaks the per-shard checkpoint
/// (a high-water mark), so the parameter allows 1 only.
#[test]
fn the_parallelization_factor_parameter_allows_one_only() {
    let template = Template::load();
    let parameter =
        template.root().get("Parameters").and_then(|p| p.get("StreamParallelizationFactor")).expect("parameter");
    assert_eq!(parameter.get("AllowedValues"), Some(&serde_norway::from_str::<Value>("[1]").expect("yaml")));
}

/// Issue 29: the Kafka mapping's role has what an MSK event source mapping
/// needs (the Lambda developer guide's MSK permissions page), and the stack
/// refuses `MskClusterArn` without `KafkaTopic`.
#[test]
fn the_kafka_mapping_s_role_and_parameters_are_complete() {
    let template = Template::load();
    let policy = serde_norway::to_string(template.resource("PersistKafkaPolicy").expect("policy")).expect("yaml");
    for action in [
        "kafka:DescribeClusterV2",
        "kafka:GetBootstrapBrokers",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeVpcs",
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
    ] {
        assert!(policy.contains(action), "PersistKafkaPolicy lacks {action}");
    }
    let rule = template.root().get("Rules").and_then(|r| r.get("KafkaTopicWithMskCluster")).expect("rule");
    let rule = serde_norway::to_string(rule).expect("yaml");
    assert!(rule.contains("MskClusterArn") && rule.contains("KafkaTopic"), "{rule}");
}

/// The statements of the `AWS::IAM::Policy` resources attached to `role_id`
/// (`Roles: [!Ref role]`), with the logical id of each policy.
fn attached_policy_statements<'a>(template: &'a Template, role_id: &str) -> Vec<(&'a str, &'a Value)> {
    template
        .of_type("AWS::IAM::Policy")
        .filter(|(_, policy)| {
            prop(policy, "Roles")
                .and_then(Value::as_sequence)
                .is_some_and(|roles| roles.iter().any(|role| ref_target(role) == Some(role_id)))
        })
        .flat_map(|(id, policy)| {
            prop(policy, "PolicyDocument")
                .and_then(|d| d.get("Statement"))
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .map(move |statement| (id, statement))
        })
        .collect()
}

/// Lambda checks the execution role's rights when it creates an SQS event
/// source mapping and refuses one it cannot read, which fails the stack.
/// An audit found Notify's schema-changes mapping without
/// `sqs:ReceiveMessage` on its queue: every SQS event of a function, and
/// every `AWS::Lambda::EventSourceMapping` on a queue, must have its
/// function's role grant ReceiveMessage, DeleteMessage and
/// GetQueueAttributes on that queue; a right granted by a separate
/// `AWS::IAM::Policy` must be in the mapping's `DependsOn`, so that it
/// exists when the mapping is created.
#[test]
fn every_mapping_s_queue_is_read_with_rights_its_role_has_when_the_mapping_is_made() {
    let template = Template::load();
    let mut failures = Vec::new();
    let mut mappings: Vec<(String, &str, &str, Vec<&str>)> = template
        .sqs_events()
        .into_iter()
        .filter_map(|(function_id, event, queue, _)| {
            Some((format!("{function_id} event {event}"), function_id, queue?, Vec::new()))
        })
        .collect();
    for (id, mapping) in template.of_type("AWS::Lambda::EventSourceMapping") {
        let Some((queue, "Arn")) = prop(mapping, "EventSourceArn").and_then(getatt) else { continue };
        if template.resource(queue).and_then(|q| q.get("Type")).and_then(Value::as_str) != Some("AWS::SQS::Queue") {
            continue;
        }
        let Some(function_id) = prop(mapping, "FunctionName").and_then(ref_target) else {
            failures.push(format!("{id}: FunctionName is not !Ref <function>"));
            continue;
        };
        mappings.push((id.to_string(), function_id, queue, strings(mapping.get("DependsOn"))));
    }
    assert!(mappings.len() >= 8, "the template's SQS mappings: {}", mappings.len());
    let needed = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"];
    for (what, function_id, queue, depends_on) in mappings {
        let function = template.resource(function_id).expect("function exists");
        let Some((role_id, "Arn")) = prop(function, "Role").and_then(getatt) else {
            failures.push(format!("{what}: {function_id}'s Role is not !GetAtt <role>.Arn"));
            continue;
        };
        let grants = |statement: &Value| {
            let actions = strings(statement.get("Action"));
            needed.iter().all(|a| actions.contains(a)) && resource_getatts(statement).contains(&(queue, "Arn"))
        };
        if role_statements(&template, function_id).into_iter().any(grants) {
            continue;
        }
        match attached_policy_statements(&template, role_id).into_iter().find(|(_, s)| grants(s)) {
            Some((policy, _)) if depends_on.contains(&policy) => {}
            Some((policy, _)) => failures
                .push(format!("{what}: {queue}'s rights are in {policy}, which is not in the mapping's DependsOn")),
            None => failures.push(format!("{what}: {role_id} grants no {needed:?} on {queue}")),
        }
    }
    assert_no_failures("mapping rights", failures);
}
