//! The Lambda binary's cold start: a missing or malformed variable stops it
//! with a message naming the variable, before the runtime API is contacted.

use std::process::Command;

fn cold_start(env: &[(&str, &str)]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_persist"));
    command.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("start the persist binary");
    assert!(!output.status.success(), "the cold start must fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn missing_and_malformed_variables_are_named() {
    let stderr = cold_start(&[]);
    assert!(stderr.contains("LAKE_BUCKET"), "{stderr}");
    let stderr = cold_start(&[("LAKE_BUCKET", "lake"), ("ROW_GROUP_ROWS", "many")]);
    assert!(stderr.contains("ROW_GROUP_ROWS") && stderr.contains("many"), "{stderr}");
}
