//! The published JSON Schemas (`docs/contracts/*.schema.json`) judged by an
//! independent validator (Python's `jsonschema`, which cfn-lint brings into
//! the project's venv): a spec with declared timestamps passes, and what
//! `validate` refuses by type (a nanosecond timestamp) the schema refuses
//! too, so an editor does not offer it.

use std::process::Command;

use serde_json::{Value, json};
use tributary_e2e::readers::python;

/// `instances` checked against `docs/contracts/<schema>`: for each, `None`
/// when valid, else the validator's first message.
fn validate(schema: &str, instances: &[Value]) -> Vec<Option<String>> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let script = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
validator = jsonschema.validators.validator_for(schema)(schema)
out = []
for instance in json.loads(sys.stdin.read()):
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    out.append(errors[0].message if errors else None)
print(json.dumps(out))
"#;
    let mut child = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(format!("{root}/docs/contracts/{schema}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| {
            panic!("{}: {err} (run `scripts/cfn-lint.sh` to install jsonschema)", python().display())
        });
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(serde_json::to_string(instances).expect("json").as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("python");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("a JSON list")
}

fn spec(declared_type: &str) -> Value {
    json!({
        "version": 1,
        "pipeline": "contacts",
        "strategy": {"kind": "simple"},
        "request": {"url": "https://api.example.com/contacts", "records_pointer": "/results"},
        "target": {"dataset": "contacts", "schema": [{"name": "created_at", "type": declared_type}]}
    })
}

#[test]
fn the_spec_schema_offers_what_validate_accepts_and_no_nanosecond_timestamps() {
    let results = validate(
        "pipeline-spec.v1.schema.json",
        &[spec("timestamp(us, UTC)"), spec("timestamp(ms)"), spec("timestamp(ns)"), spec("list<timestamp(ns, UTC)>")],
    );
    assert_eq!(results[0], None, "{results:?}");
    assert_eq!(results[1], None, "{results:?}");
    for refused in &results[2..] {
        assert!(refused.as_deref().is_some_and(|m| m.contains("does not match")), "{results:?}");
    }
}
