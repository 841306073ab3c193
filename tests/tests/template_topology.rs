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
use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};
use tributary_core::topology::{self, Function, QueueDecl};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

const TEMPLATE: &str = "infra/template.yaml";

/// The template, parsed, with lookups by logical id.
struct Template {
    root: Value,
}

impl Template {
    /// `infra/template.yaml`, or the file `TRIBUTARY_TEMPLATE` names (to try
    /// the checks on a variant).
    fn load() -> Self {
        let path = std::env::var_os("TRIBUTARY_TEMPLATE").map_or_else(|| repo_root().join(TEMPLATE), PathBuf::from);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        let root: Value =
            serde_norway::from_str(&text).unwrap_or_else(|err| panic!("{} is not valid YAML: {err}", path.display()));
        Self { root }
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

    fn resource(&self, id: &str) -> Option<&Value> {
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
    fn function_id(&self, function: Function) -> Option<&str> {
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
fn prop<'a>(resource: &'a Value, name: &str) -> Option<&'a Value> {
    resource.get("Properties")?.get(name)
}

/// An intrinsic function: `("Ref" | "GetAtt" | "Sub" | …, argument)`, from the
/// short tag form or the one-key long form.
fn intrinsic(value: &Value) -> Option<(String, &Value)> {
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
fn ref_target(value: &Value) -> Option<&str> {
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
fn strings(value: Option<&Value>) -> Vec<&str> {
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
    for (id, queue) in template.of_type("AWS::SQS::Queue") {
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
        let allowed = template.of_type("AWS::SQS::QueuePolicy").any(|(_, policy)| {
            let queues = prop(policy, "Queues").and_then(Value::as_sequence);
            let covers_queue = queues.is_some_and(|qs| qs.iter().any(|q| ref_target(q) == Some(queue_id)));
            let statements =
                prop(policy, "PolicyDocument").and_then(|d| d.get("Statement")).and_then(Value::as_sequence);
            covers_queue && statements.is_some_and(|st| st.iter().any(|s| allows_topic(s, queue_id, topic_id)))
        });
        if !allowed {
            failures.push(format!(
                "{at}: no AWS::SQS::QueuePolicy on !Ref {queue_id} allowing sns.amazonaws.com sqs:SendMessage with aws:SourceArn = !Ref {topic_id}"
            ));
        }
    }
    assert_no_failures("topics and subscriptions", failures);
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

/// Environment variable names mentioned in a main.rs: backquoted in its docs
/// (`` `LAKE_BUCKET` ``) or as string literals (`"LAKE_BUCKET"`).
fn documented_env_vars(main_rs: &str) -> BTreeSet<String> {
    let is_name = |s: &str| {
        s.len() > 2
            && s.contains('_')
            && s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    let mut names = BTreeSet::new();
    for quote in ['`', '"'] {
        for (index, piece) in main_rs.split(quote).enumerate() {
            if index % 2 == 1 && is_name(piece) {
                names.insert(piece.to_string());
            }
        }
    }
    names
}

/// Environment variable names a function's `src/config.rs` reads: its
/// string literals (`"LAKE_BUCKET"`) before its tests. Its docs are left
/// out: they also name constants such as `SQS_MESSAGE_BYTES_RANGE`.
fn config_env_vars(config_rs: &str) -> BTreeSet<String> {
    let code = config_rs.split("#[cfg(test)]").next().unwrap_or_default();
    documented_env_vars(code).into_iter().filter(|name| code.contains(&format!("\"{name}\""))).collect()
}

#[test]
fn functions_get_exactly_the_environment_their_main_reads() {
    let template = Template::load();
    let mut failures = Vec::new();
    for decl in topology::FUNCTIONS {
        let name = decl.function.name();
        let main = repo_root().join("functions").join(name).join("src/main.rs");
        let text = std::fs::read_to_string(&main).unwrap_or_else(|err| panic!("cannot read {}: {err}", main.display()));
        let read = documented_env_vars(&text);
        // The main reads its variables through `LambdaConfig::from_env`
        // (src/config.rs): its list must name every one of them.
        let config = repo_root().join("functions").join(name).join("src/config.rs");
        if let Ok(config_text) = std::fs::read_to_string(&config) {
            for var in config_env_vars(&config_text).difference(&read) {
                failures.push(format!(
                    "function `{name}`: {} reads {var}, which {} does not list",
                    main_display(&config),
                    main_display(&main)
                ));
            }
        }
        let Some(id) = template.function_id(decl.function) else {
            failures.push(format!("function `{name}`: missing (see the function test)"));
            continue;
        };
        let set: BTreeMap<String, &Value> = prop(template.resource(id).expect("exists"), "Environment")
            .and_then(|e| e.get("Variables"))
            .and_then(Value::as_mapping)
            .map(|vars| vars.iter().filter_map(|(k, v)| Some((k.as_str()?.to_string(), v))).collect())
            .unwrap_or_default();
        for var in &read {
            if !set.contains_key(var) {
                failures.push(format!(
                    "function `{name}` ({id}): {} reads {var}, the template does not set it",
                    main_display(&main)
                ));
            }
        }
        for var in set.keys() {
            if !read.contains(var) {
                failures.push(format!(
                    "function `{name}` ({id}): the template sets {var}, which {} never mentions",
                    main_display(&main)
                ));
            }
        }
    }
    assert_no_failures("function environments", failures);
}

/// Every statement of every inline policy of the role that function
/// `function_id` runs as (`Role: !GetAtt <role>.Arn`).
fn role_statements<'a>(template: &'a Template, function_id: &str) -> Vec<&'a Value> {
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
fn sub_text(value: &Value) -> Option<&str> {
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
    let glue: Vec<&Value> = role_statements(&template, persist)
        .into_iter()
        .filter(|statement| strings(statement.get("Action")).iter().any(|a| a.starts_with("glue:")))
        .collect();
    let actions: BTreeSet<&str> = glue.iter().flat_map(|statement| strings(statement.get("Action"))).collect();
    let expected = BTreeSet::from(["glue:CreateTable", "glue:GetTable", "glue:UpdateTable"]);
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
    assert_no_failures("Persist's catalog access", failures);
}

fn main_display(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).display().to_string()
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
