//! infra/template.yaml's parameters, as a deployer meets them (issue 27,
//! item 7): every one is in infra/README.md's parameter table with its
//! default; Request runs in a VPC only when both `RequestSubnetIds` and
//! `RequestSecurityGroupIds` are given, and only then may manage network
//! interfaces; Request resolves secret ids under exactly the prefix its role
//! may read, so one spec works in every stack.
//!
//! The template is read with `template_topology`'s helpers (short and long
//! intrinsic forms alike).

use std::collections::{BTreeMap, BTreeSet};

use serde_norway::Value;
use tributary_core::topology::{self, Function};

use super::template_topology::{
    Template, intrinsic, mentions, prop, ref_target, repo_root, role_statements, strings, sub_text, template_env,
};

const PARAMETER_DOC: &str = "infra/README.md";
/// The book's "Deploy to AWS" chapter, with the parameters most stacks set.
const SHORT_LIST_DOC: &str = "docs/deploy.md";
const PARAMETER_TABLE_START: &str =
    "<!-- parameter table: every parameter of template.yaml; tests/tests/it/template_parameters.rs checks it -->";
const PARAMETER_TABLE_END: &str = "<!-- end of parameter table -->";

impl Template {
    fn parameter_root(&self) -> Option<&serde_norway::Mapping> {
        self.root().get("Parameters")?.as_mapping()
    }

    /// `Conditions.<name>`.
    fn condition(&self, name: &str) -> Option<&Value> {
        self.root().get("Conditions")?.get(name)
    }

    /// `Globals.Function.<name>`.
    fn global_function_property(&self, name: &str) -> Option<&Value> {
        self.root().get("Globals")?.get("Function")?.get(name)
    }
}

/// `(name, parameter)` of every parameter of the template.
fn parameters(template: &Template) -> BTreeMap<String, &Value> {
    let root = template.parameter_root().expect("template has Parameters");
    root.iter().filter_map(|(name, value)| Some((name.as_str()?.to_string(), value))).collect()
}

/// How the table writes a parameter's default: `required` without one,
/// `empty` for "", else the value in backticks.
fn default_cell(parameter: &Value) -> String {
    match parameter.get("Default") {
        None => "required".into(),
        Some(Value::String(text)) if text.is_empty() => "empty".into(),
        Some(Value::String(text)) => format!("`{text}`"),
        Some(Value::Number(n)) => format!("`{n}`"),
        Some(Value::Bool(b)) => format!("`{b}`"),
        Some(other) => format!("`{other:?}`"),
    }
}

/// The rows of the parameter table: name -> cells after the name.
fn documented_rows(text: &str) -> BTreeMap<String, Vec<String>> {
    let (Some(start), Some(end)) = (text.find(PARAMETER_TABLE_START), text.find(PARAMETER_TABLE_END)) else {
        panic!("{PARAMETER_DOC} has no `{PARAMETER_TABLE_START}` ... `{PARAMETER_TABLE_END}` section");
    };
    let mut rows = BTreeMap::new();
    for line in text[start + PARAMETER_TABLE_START.len()..end].lines().skip_while(|l| !l.starts_with('|')).skip(2) {
        let cells: Vec<String> = line.trim().trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect();
        let Some(name) = cells.first().and_then(|c| c.strip_prefix('`')).and_then(|c| c.strip_suffix('`')) else {
            panic!("{PARAMETER_DOC}: a parameter row must start with `Name`: {line}");
        };
        if rows.insert(name.to_string(), cells[1..].to_vec()).is_some() {
            panic!("{PARAMETER_DOC}: {name} has two rows");
        }
    }
    rows
}

/// Every parameter, and only those, has a row: its name, its default as the
/// template has it, what it does and when to change it.
#[test]
fn the_infra_readme_documents_every_parameter_with_its_default() {
    let template = Template::load();
    let text = std::fs::read_to_string(repo_root().join(PARAMETER_DOC)).expect("infra/README.md");
    let rows = documented_rows(&text);
    let mut failures = Vec::new();
    for (name, parameter) in parameters(&template) {
        let Some(cells) = rows.get(&name) else {
            failures.push(format!("{name}: no row"));
            continue;
        };
        let expected = default_cell(parameter);
        match cells.as_slice() {
            [default, what, when] if !what.is_empty() && !when.is_empty() => {
                // The value may be followed by a gloss: `10737418240` (10 GiB).
                if default != &expected && !default.starts_with(&format!("{expected} (")) {
                    failures.push(format!("{name}: default {default:?}, the template's is {expected}"));
                }
            }
            _ => {
                failures.push(format!("{name}: expected | default | what it does | when to change it |, got {cells:?}"))
            }
        }
    }
    let declared: BTreeSet<String> = parameters(&template).into_keys().collect();
    failures
        .extend(rows.keys().filter(|name| !declared.contains(*name)).map(|name| format!("{name}: not a parameter")));
    // The book's short list (docs/deploy.md, moved there from README.md) names real parameters only.
    let readme = std::fs::read_to_string(repo_root().join(SHORT_LIST_DOC)).expect(SHORT_LIST_DOC);
    let short: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("The parameters you are most likely to set"))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|l| l.trim_start_matches('|').split(" | ").next())
        .flat_map(|cell| cell.split(", "))
        .map(|name| name.trim().trim_matches('`'))
        .collect();
    if short.is_empty() {
        failures.push(format!("{SHORT_LIST_DOC}: no table after \"The parameters you are most likely to set\""));
    }
    failures.extend(
        short.iter().filter(|n| !declared.contains(**n)).map(|n| format!("{SHORT_LIST_DOC}: {n} is not a parameter")),
    );
    assert!(failures.is_empty(), "{PARAMETER_DOC}'s parameter table:\n  - {}", failures.join("\n  - "));
}

/// `[condition, then, else]` of `!If`.
fn if_args(value: &Value) -> Option<(&str, &Value, &Value)> {
    match intrinsic(value)? {
        (name, Value::Sequence(args)) if name == "If" && args.len() == 3 => {
            Some((args[0].as_str()?, &args[1], &args[2]))
        }
        _ => None,
    }
}

fn is_no_value(value: &Value) -> bool {
    ref_target(value) == Some("AWS::NoValue")
}

/// `X` of `!Not [!Equals [!Join ["", !Ref X], ""]]`: "list X is not empty".
fn non_empty_list(value: &Value) -> Option<&str> {
    let (not, Value::Sequence(not_args)) = intrinsic(value)? else { return None };
    let (equals, Value::Sequence(equals_args)) = intrinsic(not_args.first()?)? else { return None };
    let (join, Value::Sequence(join_args)) = intrinsic(equals_args.first()?)? else { return None };
    let empty = |v: Option<&Value>| v.and_then(Value::as_str) == Some("");
    let ok =
        not == "Not" && equals == "Equals" && join == "Join" && empty(equals_args.get(1)) && empty(join_args.first());
    ok.then(|| join_args.get(1).and_then(ref_target)).flatten()
}

/// Request runs in a VPC only with both lists given (`RequestInVpc`):
/// `VpcConfig` and the EC2 network-interface statement are both under that
/// condition, the other functions have neither, and the default is no VPC.
#[test]
fn request_joins_a_vpc_only_when_subnets_and_security_groups_are_both_given() {
    let template = Template::load();
    let mut failures = Vec::new();
    let (subnets, groups) = ("RequestSubnetIds", "RequestSecurityGroupIds");
    for name in [subnets, groups] {
        let parameter = template.parameter(name);
        let ty = parameter.and_then(|p| p.get("Type")).and_then(Value::as_str);
        let default = parameter.and_then(|p| p.get("Default")).and_then(Value::as_str);
        if (ty, default) != (Some("CommaDelimitedList"), Some("")) {
            failures
                .push(format!("{name}: Type {ty:?}, Default {default:?}; expected CommaDelimitedList, \"\" (no VPC)"));
        }
    }
    // The condition: both lists non-empty.
    let condition = template.condition("RequestInVpc");
    let both: BTreeSet<&str> = match condition.and_then(intrinsic) {
        Some((name, Value::Sequence(args))) if name == "And" && args.len() == 2 => {
            args.iter().filter_map(non_empty_list).collect()
        }
        _ => BTreeSet::new(),
    };
    if both != BTreeSet::from([subnets, groups]) {
        failures.push(format!(
            "Conditions.RequestInVpc is {condition:?}; expected !And of !Not [!Equals [!Join [\"\", !Ref P], \"\"]] for {subnets} and {groups}"
        ));
    }
    // VpcConfig: Request's only, under the condition, from the two lists.
    for decl in topology::FUNCTIONS {
        let id = template.function_id(decl.function).expect("function");
        let vpc = prop(template.resource(id).expect("exists"), "VpcConfig");
        match (decl.function, vpc.and_then(if_args)) {
            (Function::Request, Some(("RequestInVpc", then, otherwise)))
                if then.get("SubnetIds").and_then(ref_target) == Some(subnets)
                    && then.get("SecurityGroupIds").and_then(ref_target) == Some(groups)
                    && is_no_value(otherwise) => {}
            (Function::Request, _) => failures.push(format!(
                "{id}: VpcConfig is {vpc:?}; expected !If [RequestInVpc, {{SubnetIds: !Ref {subnets}, SecurityGroupIds: !Ref {groups}}}, !Ref AWS::NoValue]"
            )),
            (_, _) if vpc.is_some() => failures.push(format!("{id}: VpcConfig on a function that calls no vendor")),
            _ => {}
        }
        // EC2 rights: Request's, under the same condition, and nobody else's.
        let mut conditional = 0;
        for statement in role_statements(&template, id) {
            let ec2 = |s: &Value| strings(s.get("Action")).iter().any(|a| a.starts_with("ec2:"));
            match if_args(statement) {
                Some(("RequestInVpc", then, otherwise))
                    if decl.function == Function::Request && is_no_value(otherwise) =>
                {
                    let actions = strings(then.get("Action"));
                    let needed =
                        ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface"];
                    if !needed.iter().all(|a| actions.contains(a)) || actions.iter().any(|a| !a.starts_with("ec2:")) {
                        failures.push(format!("{id}: the VPC statement allows {actions:?}; expected EC2 network-interface actions ({needed:?}) only"));
                    }
                    conditional += 1;
                }
                Some((_, then, otherwise)) if ec2(then) || ec2(otherwise) => {
                    failures.push(format!("{id}: EC2 rights under a condition other than Request's RequestInVpc"));
                }
                _ if ec2(statement) => failures.push(format!("{id}: EC2 rights whether or not it runs in a VPC")),
                _ => {}
            }
        }
        let managed = prop(template.resource(id).expect("exists"), "Policies")
            .into_iter()
            .chain(role_of(&template, id).and_then(|role| prop(role, "ManagedPolicyArns")))
            .any(|v| mentions(v, "VPCAccess"));
        if managed {
            failures.push(format!(
                "{id}: a VPC managed policy; the template grants the EC2 actions itself, under RequestInVpc"
            ));
        }
        if decl.function == Function::Request && conditional != 1 {
            failures.push(format!("{id}: {conditional} statements under RequestInVpc; expected one"));
        }
    }
    // Globals must not put every function in the VPC.
    if template.global_function_property("VpcConfig").is_some() {
        failures.push("Globals.Function.VpcConfig: only Request may run in the VPC".into());
    }
    assert!(failures.is_empty(), "Request's VPC settings:\n  - {}", failures.join("\n  - "));
}

/// The role `function_id` runs as (`Role: !GetAtt <role>.Arn`).
fn role_of<'a>(template: &'a Template, function_id: &str) -> Option<&'a Value> {
    let role = prop(template.resource(function_id)?, "Role")?;
    let (name, arg) = intrinsic(role)?;
    let role_id = match arg {
        Value::String(text) if name == "GetAtt" => text.split_once('.')?.0,
        Value::Sequence(seq) if name == "GetAtt" => seq.first()?.as_str()?,
        _ => return None,
    };
    template.resource(role_id)
}

/// Request resolves secret ids under `SECRET_PREFIX` = `<stack>/`, exactly
/// the names its role may read: a spec's relative id, a full id and a JSON
/// key of either all land inside `secret:<stack>/*`, and one stack's ARN is
/// refused in another, so one spec moves between stacks unchanged.
#[test]
fn request_reads_secret_ids_relative_to_the_stack_its_role_may_read() {
    let template = Template::load();
    let request = template.function_id(Function::Request).expect("request function");
    let env = template_env(&template, request);
    let prefix = env.get("SECRET_PREFIX").and_then(|v| sub_text(v));
    assert_eq!(prefix, Some("${AWS::StackName}/"), "{request}: SECRET_PREFIX must be !Sub \"${{AWS::StackName}}/\"");
    let readable: Vec<&str> = role_statements(&template, request)
        .into_iter()
        .filter(|s| strings(s.get("Action")).contains(&"secretsmanager:GetSecretValue"))
        .flat_map(|s| match s.get("Resource") {
            Some(Value::Sequence(seq)) => seq.iter().filter_map(sub_text).collect::<Vec<_>>(),
            Some(single) => sub_text(single).into_iter().collect(),
            None => Vec::new(),
        })
        .collect();
    let [pattern] = readable.as_slice() else { panic!("{request}: reads secrets {readable:?}; expected one pattern") };
    let name_glob = pattern.rsplit_once(":secret:").map(|(_, glob)| glob).expect("a secret ARN pattern");
    for stack in ["tributary-dev", "tributary-prod"] {
        let prefix = request::secret_ref::SecretPrefix::new(&format!("{stack}/")).expect("a stack prefix");
        let readable_prefix = name_glob.replace("${AWS::StackName}", stack);
        let readable_prefix = readable_prefix.strip_suffix('*').expect("a prefix glob");
        for reference in ["vendor-key", "crm/login#password", "tributary-prod/vendor-key", "tributary-dev/vendor-key"] {
            let id = prefix.resolve(reference).expect("resolves").id;
            assert!(id.starts_with(readable_prefix), "{stack}: {reference} reads {id}, outside {pattern}");
        }
        let other = if stack == "tributary-dev" { "tributary-prod" } else { "tributary-dev" };
        let arn = format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{other}/vendor-key-AbC123");
        assert!(prefix.resolve(&arn).is_err(), "{stack} must refuse {other}'s secret {arn}");
    }
    // The grants parameter's default is a valid SECRET_GRANTS that grants nothing.
    let default = template.parameter("RequestSecretGrants").and_then(|p| p.get("Default")).and_then(Value::as_str);
    let grants = request::trust::parse_grants(default.expect("a default")).expect("valid SECRET_GRANTS");
    assert!(grants.is_empty(), "RequestSecretGrants grants nothing by default: {grants:?}");
    assert_eq!(env.get("SECRET_GRANTS").and_then(|v| ref_target(v)), Some("RequestSecretGrants"));
}
