//! The `tributary` binary as a user runs it.

use std::process::Command;

fn tributary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tributary"))
}

fn write_spec(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("spec.yaml");
    std::fs::write(&path, text).expect("write spec");
    path
}

const GOOD: &str =
    "version: 1\npipeline: p\nstrategy: {kind: simple}\nrequest: {url: 'http://127.0.0.1:9/x'}\ntarget: {dataset: d}\n";

#[test]
fn invalid_specs_fail_naming_the_field_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (GOOD.replace("kind: simple", "kind: sideways"), "unknown strategy kind `sideways`"),
        (GOOD.replace("request: {url: 'http://127.0.0.1:9/x'}", "request: {method: GET}"), "missing field `url`"),
        (GOOD.replace("http://127.0.0.1:9/x", "::not a url::"), "request.url"),
        (GOOD.replace("dataset: d", "dataset: 'a/../b'"), "target.dataset"),
        (GOOD.replace("version: 1", "version: 7"), "unsupported contract version 7"),
    ];
    for (text, expected) in cases {
        let spec = write_spec(dir.path(), &text);
        let lake = dir.path().join("lake");
        let output = tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).output().expect("run tributary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{expected}: must fail");
        assert!(stderr.contains(expected), "stderr should name {expected:?}:\n{stderr}");
        assert!(!lake.exists(), "nothing may be written for an invalid spec");
    }
}

#[test]
fn replace_of_a_parquet_dataset_is_refused_naming_the_flag_and_writing_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write_spec(dir.path(), GOOD);
    let lake = dir.path().join("lake");
    let output = tributary().arg("run").arg(&spec).arg("--replace").arg("--lake").arg(&lake).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // A trial finding: it said `orchestrator event: `replace` = "<token>"`,
    // an internal token for a flag the user gave with no value.
    assert!(stderr.contains("--replace: dataset d is kept as Parquet folders"), "{stderr}");
    assert!(!stderr.contains("orchestrator event"), "{stderr}");
    assert!(!lake.exists(), "nothing is written");
}

#[test]
fn rest_options_on_a_stream_spec_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stream = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.yaml");
    let records = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.jsonl");
    let lake = dir.path().join("lake");
    for (flag, extra) in [
        ("--replace", vec!["--replace"]),
        ("--scheduled-at", vec!["--scheduled-at", "2026-12-01T00:00:00Z"]),
        ("--from/--to", vec!["--from", "2026-12-01", "--to", "2026-12-02"]),
    ] {
        let output = tributary()
            .arg("run")
            .arg(&stream)
            .arg("--records")
            .arg(&records)
            .args(&extra)
            .arg("--lake")
            .arg(&lake)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(&format!("{flag} is for a REST pipeline spec")),
            "{stderr}"
        );
        assert!(!lake.exists(), "{flag}: nothing is written");
    }
}

#[test]
fn a_stream_run_whose_every_record_is_quarantined_fails() {
    // A producer that switched to another format (here: text that is not
    // JSON) must not pass cron or CI with exit 0.
    let dir = tempfile::tempdir().expect("tempdir");
    let stream = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.yaml");
    let records = dir.path().join("bad.jsonl");
    // "nope" in base64, three times.
    let lines: Vec<String> = (0..3)
        .map(|offset| {
            format!(r#"{{"topic": "orders", "partition": 0, "offset": {offset}, "timestamp": 1764583200000, "value": "bm9wZQ=="}}"#)
        })
        .collect();
    std::fs::write(&records, lines.join("\n") + "\n").expect("records");
    let lake = dir.path().join("lake");
    let output = tributary()
        .arg("run")
        .arg(&stream)
        .arg("--records")
        .arg(&records)
        .arg("--lake")
        .arg(&lake)
        .output()
        .expect("run");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(!output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("0 records into orders, 3 quarantined"), "{stdout}");
    assert!(stderr.contains("every record taken was quarantined (3)"), "{stderr}");
}

/// A trial finding: a `--follow` stream run (which ends no other way)
/// stopped by SIGTERM printed nothing. It says what is in the lake and
/// how the next run goes on, with the shell's code for the signal, and
/// the next run reads on from the checkpoint: every record once.
#[test]
fn a_following_stream_run_stopped_by_sigterm_says_where_it_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stream = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.yaml");
    let records = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.jsonl");
    let lake = dir.path().join("lake");
    let run = tributary()
        .arg("run")
        .arg(&stream)
        .arg("--records")
        .arg(&records)
        .arg("--follow")
        .arg("--lake")
        .arg(&lake)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the run");
    // The file's records are written and checkpointed, then it follows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while walk_files(&lake.join("_streams")).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no checkpoint written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = Command::new("kill").arg("-TERM").arg(run.id().to_string()).status().expect("kill");
    assert!(killed.success());
    let output = run.wait_with_output().expect("the run ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains("stopped: orders-stream by SIGTERM; every batch written before is in orders")
            && stderr.contains("the next run of the spec reads on from its shards' checkpoints"),
        "{stderr}"
    );
    let run_into = |lake: &std::path::Path| {
        let output =
            tributary().arg("run").arg(&stream).arg("--records").arg(&records).arg("--lake").arg(lake).output();
        let output = output.expect("run");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let count = |lake: &std::path::Path| {
        let sql = "SELECT count(*) AS n, count(DISTINCT order_id) AS ids FROM orders";
        let output = tributary().arg("query").arg("--lake").arg(lake).arg(sql).output().expect("query");
        let row: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON row");
        (row["n"].as_u64(), row["ids"].as_u64())
    };
    let stdout = run_into(&lake);
    assert!(stdout.contains("0 records into orders"), "all were in before: {stdout}");
    // The same rows as one run of the file into a fresh lake.
    let fresh = dir.path().join("fresh");
    run_into(&fresh);
    let (rows, ids) = count(&lake);
    assert_eq!((rows, ids), count(&fresh));
    assert!(rows.is_some_and(|n| n > 0) && rows == ids, "each order once: {rows:?} rows, {ids:?} orders");
}

#[test]
fn validate_accepts_the_examples() {
    for example in ["customers.yaml", "transactions.yaml", "events.yaml"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(example);
        let output = tributary().arg("validate").arg(&path).output().expect("run tributary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{example}: {stderr}");
        assert!(!stderr.contains("caution:"), "an example teaches no setting that loses records: {stderr}");
    }
    // A setting that loses records silently with some vendors is said
    // (a trial's offset-paged incremental run lost a record, a success).
    let dir = tempfile::tempdir().expect("tempdir");
    let risky = dir.path().join("risky.yaml");
    std::fs::write(
        &risky,
        "version: 1\npipeline: risky\nstrategy: {kind: paged, page_size: 50, total_pointer: /total}\n\
         request: {url: 'http://127.0.0.1:8080/customers', records_pointer: /items}\n\
         incremental: {cursor_field: /updated_at, param: since, start: '2026-01-01T00:00:00Z'}\n\
         target: {dataset: risky}\n",
    )
    .expect("write spec");
    let output = tributary().arg("validate").arg(&risky).output().expect("run tributary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "valid, with a caution: {stderr}");
    assert!(stderr.contains("caution: `incremental` with offset or page-number paging"), "{stderr}");
    // A stream spec is validated as one (a trial finding: it was refused
    // for its `source`), and its errors name its fields.
    let stream = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/streams/orders.yaml");
    let output = tributary().arg("validate").arg(&stream).output().expect("run tributary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("is a valid stream spec"), "{output:?}");
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&stream).expect("read example");
    std::fs::write(&bad, text.replace("pipeline:", "pipline:")).expect("write spec");
    let output = tributary().arg("validate").arg(&bad).output().expect("run tributary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("pipline"), "{stderr}");
    // A URL template is printed as written, its placeholders braced (a
    // trial read `/customers/%7Bid%7D/orders`).
    let athena = dir.path().join("orders.yaml");
    std::fs::write(
        &athena,
        "version: 1\npipeline: orders\nstrategy: {kind: athena, query: 'SELECT id FROM customers', database: lake}\nrequest: {url: 'http://127.0.0.1:8080/customers/{id}/orders'}\ntarget: {dataset: orders}\n",
    )
    .expect("write spec");
    let output = tributary().arg("validate").arg(&athena).output().expect("run tributary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("\"http://127.0.0.1:8080/customers/{id}/orders\""), "{stdout}");
}

#[test]
fn demo_persists_records_with_no_dead_letters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = tributary().arg("demo").arg("--lake").arg(dir.path()).output().expect("run demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("records persisted    230"), "{stdout}");
    assert!(stdout.contains("records persisted    690"), "{stdout}");
    assert_eq!(stdout.matches("messages in DLQs     0").count(), 3, "{stdout}");
    assert!(stdout.contains("strategy athena") && stdout.contains("requests made        230"), "{stdout}");
    assert!(stdout.contains("Customer 1 "), "first rows are printed:\n{stdout}");

    // The demo again as Iceberg over this Parquet lake is refused before
    // anything runs (a trial's run left 237 dead letters).
    let letters = |dir: &std::path::Path| walk_count(&dir.join("_dead_letters"));
    let before = letters(dir.path());
    let iceberg = tributary()
        .args(["demo", "--table-format", "iceberg", "--lake"])
        .arg(dir.path())
        .output()
        .expect("run demo --table-format iceberg");
    let stderr = String::from_utf8_lossy(&iceberg.stderr);
    assert!(!iceberg.status.success(), "{stderr}");
    assert!(stderr.contains("dataset demo_customers is kept as parquet"), "{stderr}");
    assert!(iceberg.stdout.is_empty(), "nothing ran: {}", String::from_utf8_lossy(&iceberg.stdout));
    assert_eq!(letters(dir.path()), before, "no dead letter");

    let status = tributary().arg("status").arg("--lake").arg(dir.path()).output().expect("run status");
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{table}");
    let line = |pipeline: &str| {
        table.lines().find(|l| l.starts_with(pipeline)).unwrap_or_else(|| panic!("{pipeline}:\n{table}")).to_string()
    };
    let customers = line("demo_customers ");
    assert!(customers.contains("complete") && customers.contains("6/6") && customers.contains("230"), "{customers}");
    let athena = line("demo_customer_transactions ");
    assert!(athena.contains("complete") && athena.contains("230/230") && athena.contains("690"), "{athena}");
    assert!(table.contains("stream checkpoints"), "{table}");

    // `status --pipeline` shows that pipeline only; an unknown name says
    // which pipelines the lake has runs of; a malformed one is refused.
    let status_of =
        |name: &str| tributary().args(["status", "--pipeline", name]).arg("--lake").arg(dir.path()).output();
    let only = status_of("demo_customers").expect("run status --pipeline");
    let only_table = String::from_utf8_lossy(&only.stdout);
    assert!(only.status.success(), "{only_table}");
    let runs: Vec<&str> = only_table.lines().skip(1).take_while(|l| !l.trim().is_empty()).collect();
    assert!(!runs.is_empty() && runs.iter().all(|l| l.starts_with("demo_customers ")), "{only_table}");
    assert!(!only_table.contains("stream checkpoints"), "another pipeline's checkpoints: {only_table}");
    let unknown = status_of("demo_customer").expect("run status --pipeline");
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(1), "{said}");
    assert!(unknown.stdout.is_empty(), "no empty table before the message: {unknown:?}");
    assert!(
        said.contains("no run of pipeline `demo_customer` in this lake; it has runs of: ")
            && said.contains("demo_customers"),
        "{said}"
    );
    let none_asked = tributary()
        .args(["status", "--pipeline", "demo_customers", "--limit", "0"])
        .arg("--lake")
        .arg(dir.path())
        .output()
        .expect("run status --limit 0");
    assert!(!String::from_utf8_lossy(&none_asked.stdout).contains("no run of pipeline"), "{none_asked:?}");
    let bad = status_of("Demo/Customers").expect("run status --pipeline");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--pipeline \"Demo/Customers\""), "{bad:?}");

    // `query --param` binds the placeholders in order.
    let query = |params: &[&str]| {
        let mut command = tributary();
        command.arg("query").arg("--lake").arg(dir.path());
        command.arg("SELECT count(*) AS n FROM demo_customers WHERE id <= ? AND id > ?");
        for param in params {
            command.arg("--param").arg(param);
        }
        command.output().expect("run query")
    };
    let counted = query(&["10", "7"]);
    let rows = String::from_utf8_lossy(&counted.stdout);
    assert!(counted.status.success(), "{rows}\n{}", String::from_utf8_lossy(&counted.stderr));
    assert_eq!(rows.trim(), r#"{"n":3}"#);
    let missing = query(&["10"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("2 `?` placeholder(s) but 1 parameter(s)"));

    // The stream pipeline: 60 Kafka records over 3 partitions, one poison.
    assert!(stdout.contains("rows landed          59\n  poison quarantined   1\n"), "{stdout}");
    for partition in 0..3 {
        let checkpoint = format!("demo_orders-{partition}                      19              20               0");
        assert!(stdout.contains(&checkpoint), "{checkpoint}:\n{stdout}");
    }
    assert_eq!(demo_orders(dir.path()), r#"{"n":59,"orders":59}"#);
    let quarantine = stream_quarantine(&dir.path().join("quarantine/demo_orders"));
    assert_eq!(quarantine.len(), 1, "{quarantine:?}");
    // Order 42 (index 41): partition 41 % 3, offset 41 / 3; its value is cut short.
    let reason = quarantine[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("record 13 (demo_orders-2): not JSON: EOF while parsing"), "{reason}");
    assert_eq!(quarantine[0]["record"]["partition"], "demo_orders-2");
    assert!(table.contains("records behind") && table.contains("demo_orders-2"), "{table}");
    // Status counts the poison record quarantined, as the demo does: the
    // quarantined column of demo_orders' runs (one per partition window).
    let quarantined: u64 = table
        .lines()
        .filter(|l| {
            l.starts_with("demo_orders ") && l.split_whitespace().nth(1).is_some_and(|run| run.starts_with("s-"))
        })
        .map(|l| l.split_whitespace().nth(5).and_then(|n| n.parse::<u64>().ok()).expect("quarantined column"))
        .sum();
    assert_eq!(quarantined, 1, "{table}");

    // Run again: the REST pipelines run again, the stream lands nothing twice.
    let again = tributary().arg("demo").arg("--lake").arg(dir.path()).output().expect("run demo again");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&again.stderr));
    assert!(stdout.contains("rows landed          0 (every partition is past its checkpoint)"), "{stdout}");
    assert_eq!(demo_orders(dir.path()), r#"{"n":59,"orders":59}"#);
    assert_eq!(stream_quarantine(&dir.path().join("quarantine/demo_orders")).len(), 1);
}

/// `demo_orders`' rows and distinct order ids, through `tributary query`.
fn demo_orders(lake: &std::path::Path) -> String {
    let output = tributary()
        .arg("query")
        .arg("--lake")
        .arg(lake)
        .arg("SELECT count(*) AS n, count(DISTINCT order_id) AS orders FROM demo_orders")
        .output()
        .expect("run query");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The quarantined stream records under `folder` (its `dt=` folders).
fn stream_quarantine(folder: &std::path::Path) -> Vec<serde_json::Value> {
    let mut lines = Vec::new();
    for day in std::fs::read_dir(folder).expect("quarantine folder") {
        for file in std::fs::read_dir(day.expect("dt folder").path()).expect("dt folder") {
            let path = file.expect("file").path();
            if path.to_string_lossy().ends_with("-stream.jsonl") {
                let text = std::fs::read_to_string(&path).expect("quarantine file");
                lines.extend(text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON line")));
            }
        }
    }
    lines
}

#[test]
fn demo_in_iceberg_mode_runs_all_three_pipelines_over_the_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output =
        tributary().args(["demo", "--table-format", "iceberg", "--lake"]).arg(dir.path()).output().expect("run demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(!stdout.contains("skipped"), "{stdout}");
    // The counts of the Parquet mode: the Athena-driven pipeline reads
    // demo_customers' table (230 customers, 3 transactions each).
    assert_eq!(stdout.matches("records persisted    230").count(), 1, "{stdout}");
    assert_eq!(stdout.matches("records persisted    690").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("messages in DLQs     0").count(), 3, "{stdout}");
    assert!(stdout.contains("strategy athena") && stdout.contains("requests made        230"), "{stdout}");
    assert!(dir.path().join("_iceberg/catalog.sqlite").is_file());

    let count = |table: &str| {
        let output = tributary()
            .arg("query")
            .arg("--lake")
            .arg(dir.path())
            .arg(format!("SELECT count(*) AS n, min(dt) = max(dt) AS one_day FROM {table}"))
            .output()
            .expect("run query");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    assert_eq!(count("demo_customers"), r#"{"n":230,"one_day":true}"#);
    assert_eq!(count("demo_customer_transactions"), r#"{"n":690,"one_day":true}"#);
    assert_eq!(count("demo_transactions"), r#"{"n":690,"one_day":true}"#);
    // The stream pipeline lands in its own Iceberg table: 60 records, one poison.
    assert!(stdout.contains("rows landed          59\n  poison quarantined   1\n"), "{stdout}");
    assert_eq!(count("demo_orders"), r#"{"n":59,"one_day":true}"#);
    assert_eq!(demo_orders(dir.path()), r#"{"n":59,"orders":59}"#);

    // `schema` names the Iceberg table, not a Hive definition it never registers.
    let schema = tributary()
        .args(["schema", "--dataset", "demo_customers", "--lake"])
        .arg(dir.path())
        .output()
        .expect("run schema");
    let text = String::from_utf8_lossy(&schema.stdout);
    assert!(schema.status.success(), "{}", String::from_utf8_lossy(&schema.stderr));
    assert!(text.contains("Iceberg table tributary.demo_customers") && !text.contains("TableInput:"), "{text}");

    // Replay re-derives the Iceberg dataset's run from its raw pages and
    // swaps its rows in one snapshot: the same rows after.
    let replay = tributary()
        .args(["replay", "--dataset", "demo_customers", "--lake"])
        .arg(dir.path())
        .output()
        .expect("run replay");
    let stdout = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{stdout}{}", String::from_utf8_lossy(&replay.stderr));
    assert!(stdout.contains("committed again in snapshot"), "{stdout}");
    assert_eq!(count("demo_customers"), r#"{"n":230,"one_day":true}"#);

    // A dataset name that is a path is refused as the option's value, not
    // as "an invalid pipeline spec" (a trial).
    let refused =
        tributary().args(["replay", "--dataset", "../lake", "--lake"]).arg(dir.path()).output().expect("run replay");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("--dataset \"../lake\": must be 1-64 characters"), "{stderr}");
    assert!(!stderr.contains("pipeline spec"), "{stderr}");
}

#[test]
fn run_exits_non_zero_when_a_message_is_dead_lettered() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Port 9 (discard) on loopback refuses connections: the request fails,
    // is redelivered, and ends in the DLQ with an alert.
    let spec = write_spec(dir.path(), GOOD);
    let lake = dir.path().join("lake");
    let output = tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).output().expect("run tributary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("messages in DLQs     1"), "{stdout}");
    assert!(stdout.contains("ALERT: request gave up on page 0 (the 1st) of run"), "{stdout}");
    let alerts = std::fs::read_to_string(lake.join("_alerts.jsonl")).expect("alerts file");
    assert_eq!(alerts.lines().count(), 1);
    let status = tributary().arg("status").arg("--lake").arg(&lake).output().expect("run status");
    let table = String::from_utf8_lossy(&status.stdout);
    let run = table.lines().find(|l| l.starts_with("p ")).unwrap_or_else(|| panic!("no run:\n{table}"));
    let columns: Vec<&str> = run.split_whitespace().collect();
    // pipeline, run, state, pages, records, quarantined, dead letters, resolved, recovered by
    assert_eq!(
        (columns[2], columns[6], columns[7], columns[8]),
        ("failed", "1", "0", "-"),
        "one open dead letter: {run}"
    );
}

#[test]
fn the_local_runtime_takes_persists_limits_from_the_environment_as_the_lambda_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write_spec(dir.path(), GOOD);
    let lake = dir.path().join("lake");
    // Read and checked as the Lambda reads it: 12 bytes is below its range.
    let output =
        tributary().env("MAX_PAGE_BYTES", "12").arg("run").arg(&spec).arg("--lake").arg(&lake).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("MAX_PAGE_BYTES") && stderr.contains("12"), "{stderr}");
    assert!(!lake.join("_runs").exists(), "refused before the run");
}

#[test]
fn scheduled_at_fixes_the_run_id_and_bad_times_or_lakes_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write_spec(dir.path(), GOOD);
    let output = tributary()
        .args(["run", "--scheduled-at", "yesterday", "--lake"])
        .arg(dir.path().join("lake"))
        .arg(&spec)
        .output()
        .expect("run tributary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--scheduled-at") && stderr.contains("RFC 3339"), "{stderr}");

    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "x").expect("write");
    let output = tributary().arg("run").arg(&spec).arg("--lake").arg(&not_a_dir).output().expect("run tributary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("lake directory"), "{stderr}");
    assert!(stderr.contains("is a file, not a directory"), "said plainly, not `File exists`: {stderr}");

    let lake = dir.path().join("lake");
    let output = tributary()
        .args(["run", "--scheduled-at", "2026-11-29T06:00:00Z", "--lake"])
        .arg(&lake)
        .arg(&spec)
        .output()
        .expect("run tributary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("run 20261129T060000Z"), "{stdout}");
}

#[test]
fn freshness_alerts_until_a_run_of_the_day_completes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    std::fs::create_dir_all(&lake).expect("lake");
    let text = GOOD.replace("target: {dataset: d}", "target: {dataset: d}\nfreshness: {deadline_utc: '07:30'}");
    let spec = write_spec(dir.path(), &text);
    let check_the_29th = |spec: &std::path::Path| {
        tributary()
            .arg("freshness")
            .arg(spec)
            .arg("--lake")
            .arg(&lake)
            .args(["--date", "2026-11-29"])
            .output()
            .expect("run")
    };
    let output = check_the_29th(&spec);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("no run of 2026-11-29 completed by the deadline 07:30 UTC"), "{stdout}");
    let alerts = std::fs::read_to_string(lake.join("_alerts.jsonl")).expect("alert published");
    assert!(alerts.contains("\"function\":\"freshness\""), "{alerts}");

    // A completed run of the day (its manifest in the ledger) makes it fresh.
    let manifest = serde_json::json!({"pipeline": "p", "run_id": "20261129T060000Z", "run_date": "2026-11-29", "pages": 0,
        "records_persisted": 0, "records_quarantined": 0, "files": [], "schema_hash": "0"});
    std::fs::create_dir_all(lake.join("_manifests/p")).expect("dir");
    std::fs::write(lake.join("_manifests/p/20261129T060000Z.json"), manifest.to_string()).expect("write");
    let output = check_the_29th(&spec);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    let bad = text.replace("07:30", "7.30am");
    let spec = write_spec(dir.path(), &bad);
    let output = tributary().arg("freshness").arg(&spec).arg("--lake").arg(&lake).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("freshness.deadline_utc"), "{stderr}");

    // A mistyped lake is an error, not a stale alert, and is not created.
    let spec = write_spec(dir.path(), &text);
    let missing = dir.path().join("lak");
    let output = tributary().arg("freshness").arg(&spec).arg("--lake").arg(&missing).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("lake directory") && stderr.contains("does not exist"),
        "{stderr}"
    );
    assert!(!missing.exists(), "the missing lake is not created");

    // A file given as the lake is named as a file, by every command that
    // reads a lake.
    let file = dir.path().join("lake.txt");
    std::fs::write(&file, "not a lake").expect("write file");
    for args in [vec!["freshness", spec.to_str().expect("utf-8 path")], vec!["status"], vec!["query", "SELECT 1"]] {
        let output = tributary().args(&args).arg("--lake").arg(&file).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains("lake.txt is a file, not a lake directory"),
            "{args:?}: {stderr}"
        );
    }
}

/// A simple spec of pipeline `p` reading the demo vendor's transactions
/// on `127.0.0.1:port`.
fn transactions_spec(port: u16) -> String {
    format!(
        "version: 1\npipeline: p\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://127.0.0.1:{port}/transactions', records_pointer: /data, allow: {{loopback: true}}}}\ntarget: {{dataset: d}}\n"
    )
}

/// A loopback port nothing listens on (yet).
/// `tributary vendor` on `127.0.0.1:port`, once it accepts connections.
fn start_demo_vendor(port: u16) -> std::process::Child {
    start_demo_vendor_with(port, &[])
}

/// [`start_demo_vendor`] with more arguments (`--customers N`).
fn start_demo_vendor_with(port: u16, args: &[&str]) -> std::process::Child {
    let vendor = tributary()
        .args(["vendor", "--addr", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the vendor");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "the vendor did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    vendor
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn a_dead_letter_is_listed_shown_and_redriven_to_success_once_the_vendor_is_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let spec = write_spec(dir.path(), &transactions_spec(port));
    let lake = dir.path().join("lake");
    let run = tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).output().expect("run");
    assert_eq!(run.status.code(), Some(1), "the vendor is down: {}", String::from_utf8_lossy(&run.stdout));

    let list = tributary().args(["dlq", "list", "--lake"]).arg(&lake).output().expect("dlq list");
    let table = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success() && table.contains("1 dead letters"), "{table}");
    let row = table.lines().find(|l| l.contains("request-dlq")).unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains(" request ") && row.contains(" p "), "{row}");
    let id = row.split_whitespace().next().expect("message id").to_string();

    let show = tributary().args(["dlq", "show", &id, "--lake"]).arg(&lake).output().expect("dlq show");
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success() && shown.contains("\"body\"") && shown.contains("\"reason\""), "{shown}");
    assert!(shown.contains(&format!("127.0.0.1:{port}")), "the whole request message: {shown}");

    let refused = tributary().args(["dlq", "redrive", "--lake"]).arg(&lake).output().expect("dlq redrive");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--all"), "names the way to redrive everything");

    let mut vendor = start_demo_vendor(port);
    let redrive = tributary().args(["dlq", "redrive", "--all", "--lake"]).arg(&lake).output().expect("redrive");
    let _ = vendor.kill();
    let _ = vendor.wait();
    let report = String::from_utf8_lossy(&redrive.stdout);
    assert!(redrive.status.success(), "{report}{}", String::from_utf8_lossy(&redrive.stderr));
    assert!(report.contains(&format!("redriven {id} -> request")) && report.contains("0 new dead letters"), "{report}");

    let status = tributary().arg("status").arg("--lake").arg(&lake).output().expect("status");
    let table = String::from_utf8_lossy(&status.stdout);
    let line = table.lines().find(|l| l.starts_with("p ")).unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("complete"), "the redriven page completed the run: {line}");
    let again = tributary().args(["dlq", "redrive", &id, "--lake"]).arg(&lake).output().expect("again");
    let again = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.contains("resolved (dlq redrive)") && again.contains("--again"),
        "a second redrive skips it: {again}"
    );
}

#[test]
fn compact_refuses_bad_input_naming_the_flag_and_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    std::fs::create_dir(&lake).expect("lake dir");
    let missing = dir.path().join("no-such-lake");
    let cases: [(Vec<&std::ffi::OsStr>, &str); 5] = [
        (
            vec!["--lake".as_ref(), missing.as_os_str(), "--dataset".as_ref(), "events".as_ref()],
            "no-such-lake does not exist",
        ),
        (
            vec!["--lake".as_ref(), lake.as_os_str(), "--dataset".as_ref(), "events".as_ref()],
            "--dataset events: not an Iceberg table",
        ),
        (
            vec![
                "--lake".as_ref(),
                lake.as_os_str(),
                "--dataset".as_ref(),
                "events".as_ref(),
                "--retain-last".as_ref(),
                "0".as_ref(),
            ],
            "invalid value '0' for '--retain-last",
        ),
        (
            vec![
                "--lake".as_ref(),
                lake.as_os_str(),
                "--dataset".as_ref(),
                "events".as_ref(),
                "--target-file-mb".as_ref(),
                "0".as_ref(),
            ],
            "invalid value '0' for '--target-file-mb",
        ),
        (
            vec![
                "--lake".as_ref(),
                lake.as_os_str(),
                "--dataset".as_ref(),
                "events".as_ref(),
                "--expire-older-than".as_ref(),
                "7 fortnights".as_ref(),
            ],
            "invalid value '7 fortnights' for '--expire-older-than",
        ),
    ];
    for (args, expected) in cases {
        let output = tributary().arg("compact").args(&args).output().expect("run tributary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{expected}: must fail");
        assert!(stderr.contains(expected), "stderr should name {expected:?}:\n{stderr}");
        assert_eq!(stderr.matches("error:").count(), 1, "one error:\n{stderr}");
    }
    // A Parquet (Hive) dataset is no Iceberg table, and no `_iceberg/` is made.
    assert!(!lake.join("_iceberg").exists(), "nothing written to the lake");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly_not_in_a_panic() {
    // `| true` closes the pipe at once: the output meets a reader that is
    // gone (EPIPE), as `| head` does after its lines.
    for args in ["validate examples/customers.yaml", "schema --help"] {
        let output = Command::new("bash")
            .arg("-c")
            .arg(format!("\"$0\" {args} | true; exit ${{PIPESTATUS[0]}}"))
            .arg(env!("CARGO_BIN_EXE_tributary"))
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .expect("bash");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args}: {stderr}");
        assert!(output.status.success(), "{args}: {:?} {stderr}", output.status);
    }
}

#[test]
fn two_ad_hoc_runs_in_one_second_are_two_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write_spec(dir.path(), GOOD);
    let lake = dir.path().join("lake");
    std::fs::create_dir_all(&lake).expect("lake");
    let start = || tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).output();
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(start);
        let second = scope.spawn(start);
        (first.join().expect("thread").expect("run"), second.join().expect("thread").expect("run"))
    });
    let run_id = |output: &std::process::Output| {
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let line = stdout.lines().find(|l| l.starts_with("pipeline p  run ")).unwrap_or_else(|| panic!("{stdout}"));
        line.trim_start_matches("pipeline p  run ").trim().to_string()
    };
    let (a, b) = (run_id(&first), run_id(&second));
    assert_ne!(a, b, "two runs, two ids");
    for id in [&a, &b] {
        // YYYYMMDDTHHMMSS.mmmZ: the milliseconds of an ad-hoc run.
        assert!(id.len() == 20 && id.as_bytes()[15] == b'.' && id.ends_with('Z'), "{id}");
    }
    let status = tributary().arg("status").arg("--lake").arg(&lake).output().expect("status");
    let table = String::from_utf8_lossy(&status.stdout);
    assert_eq!(table.lines().filter(|l| l.starts_with("p ") && !l.starts_with("p run ")).count(), 2, "{table}");
}

#[test]
fn a_redrive_of_an_authenticated_pipeline_grants_its_runs_spec_and_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let spec = write_spec(
        dir.path(),
        &format!(
            "version: 1\npipeline: p\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://127.0.0.1:{port}/transactions', \
             records_pointer: /data, allow: {{loopback: true}}, auth: {{kind: bearer, secret_id: tributary/token}}}}\n\
             target: {{dataset: d}}\n"
        ),
    );
    let lake = dir.path().join("lake");
    std::fs::create_dir_all(&lake).expect("lake");
    std::fs::write(lake.join("_secrets.json"), r#"{"tributary/token": "not-a-real-token"}"#).expect("secrets");
    let run = tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).output().expect("run");
    assert_eq!(run.status.code(), Some(1), "the vendor is down: {}", String::from_utf8_lossy(&run.stdout));

    let mut vendor = start_demo_vendor(port);
    // No --spec: the run's own spec, kept in the lake, grants the secret.
    let redrive = tributary().args(["dlq", "redrive", "--all", "--lake"]).arg(&lake).output().expect("redrive");
    let _ = vendor.kill();
    let _ = vendor.wait();
    let report = String::from_utf8_lossy(&redrive.stdout);
    assert!(redrive.status.success(), "{report}{}", String::from_utf8_lossy(&redrive.stderr));
    assert!(report.contains("0 new dead letters") && !report.contains("note:"), "{report}");
    assert!(!report.contains("not-a-real-token"), "no secret in the output: {report}");
    let status = tributary().arg("status").arg("--lake").arg(&lake).output().expect("status");
    let table = String::from_utf8_lossy(&status.stdout);
    let line = table.lines().find(|l| l.starts_with("p ")).unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("complete"), "the redriven page completed the run: {line}");
}

#[test]
fn the_dead_letters_of_two_runs_have_their_own_message_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = write_spec(dir.path(), GOOD);
    let lake = dir.path().join("lake");
    // Two runs, each its own process and local runtime: each dead-letters its request.
    for time in ["2026-11-29T06:00:00Z", "2026-11-30T06:00:00Z"] {
        let run =
            tributary().args(["run", "--scheduled-at", time, "--lake"]).arg(&lake).arg(&spec).output().expect("run");
        assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stdout));
    }
    let list = tributary().args(["dlq", "list", "--lake"]).arg(&lake).output().expect("dlq list");
    let table = String::from_utf8_lossy(&list.stdout);
    let ids: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("request-dlq"))
        .map(|l| l.split_whitespace().next().expect("message id"))
        .collect();
    assert_eq!(ids.len(), 2, "{table}");
    assert_ne!(ids[0], ids[1], "two runs, two message ids: {table}");
    for (id, run) in ids.iter().zip(["20261129T060000Z", "20261130T060000Z"]) {
        let show = tributary().args(["dlq", "show", id, "--lake"]).arg(&lake).output().expect("dlq show");
        let shown = String::from_utf8_lossy(&show.stdout);
        assert!(show.status.success(), "{id} names one letter: {}", String::from_utf8_lossy(&show.stderr));
        assert!(shown.contains(&format!("\"run_id\": \"{run}\"")), "{shown}");
    }
}

/// The columns of `pipeline`'s row for `run` in `tributary status`.
fn status_row(lake: &std::path::Path, run: &str) -> (Vec<String>, String) {
    let status = tributary().arg("status").arg("--lake").arg(lake).output().expect("status");
    let table = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.status.success(), "{table}");
    let row = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(run))
        .unwrap_or_else(|| panic!("no run {run}:\n{table}"));
    (row.split_whitespace().map(str::to_string).collect(), table)
}

#[test]
fn a_recovered_runs_dead_letters_are_resolved_and_status_says_how() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let spec = write_spec(dir.path(), &transactions_spec(port));
    let lake = dir.path().join("lake");
    let runs = [
        ("2026-11-27T06:00:00Z", "20261127T060000Z"),
        ("2026-11-28T06:00:00Z", "20261128T060000Z"),
        ("2026-11-29T06:00:00Z", "20261129T060000Z"),
    ];
    let run_at = |time: &str| {
        tributary().args(["run", "--scheduled-at", time, "--lake"]).arg(&lake).arg(&spec).output().expect("run")
    };
    // The vendor is down: each run dead-letters its request.
    for (time, _) in runs {
        assert_eq!(run_at(time).status.code(), Some(1));
    }
    let (row, table) = status_row(&lake, runs[0].1);
    assert_eq!((row[2].as_str(), row[6].as_str(), row[7].as_str()), ("failed", "1", "0"), "{table}");
    // Status says how to recover each failed run.
    assert!(
        table.contains(&format!("tributary dlq redrive --all --run {} --lake {}", runs[0].1, lake.display())),
        "{table}"
    );
    assert!(table.contains(&format!("tributary run SPEC --scheduled-at {} --lake", runs[0].0)), "{table}");

    // --run and --pipeline pick one run's letters.
    let list = |filters: &[&str]| {
        let output = tributary().args(["dlq", "list", "--lake"]).arg(&lake).args(filters).output().expect("list");
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let one = list(&["--run", runs[1].1]);
    assert!(one.contains("\n1 dead letters") && one.contains(runs[1].1) && !one.contains(runs[0].1), "{one}");
    assert!(list(&["--pipeline", "p"]).contains("\n3 dead letters"));
    assert!(list(&["--pipeline", "other"]).contains("\n0 dead letters"));

    // An operator cannot resolve the letter of a run that is not complete, unless forced.
    let resolve =
        |args: &[&str]| tributary().args(["dlq", "resolve", "--lake"]).arg(&lake).args(args).output().expect("resolve");
    let refused = resolve(&["--all", "--run", runs[2].1]);
    let text = String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success() && text.contains("is not complete") && text.contains("0 of 1"), "{text}");

    let mut vendor = start_demo_vendor(port);
    // Recovery by redrive of one run's letters (the others are left alone) ...
    let redrive = tributary()
        .args(["dlq", "redrive", "--all", "--run", runs[0].1, "--lake"])
        .arg(&lake)
        .output()
        .expect("redrive");
    let report = String::from_utf8_lossy(&redrive.stdout);
    assert!(redrive.status.success() && report.contains("1 of 1 dead letters redriven"), "{report}");
    assert!(report.contains("1 dead letters resolved"), "{report}");
    // Asked again, the resolved letter is skipped: nothing failed, exit 0.
    let again = tributary()
        .args(["dlq", "redrive", "--all", "--run", runs[0].1, "--lake"])
        .arg(&lake)
        .output()
        .expect("redrive again");
    let report = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success() && report.contains("skipped"), "a skipped letter is no failure: {report}");
    // ... and by a re-run of the other.
    let rerun = run_at(runs[1].0);
    assert!(rerun.status.success(), "{}", String::from_utf8_lossy(&rerun.stdout));
    let _ = vendor.kill();
    let _ = vendor.wait();

    for ((_, run), how) in runs.iter().zip(["dlq redrive", "re-run"]) {
        let (row, table) = status_row(&lake, run);
        assert_eq!((row[2].as_str(), row[6].as_str(), row[7].as_str()), ("complete", "1", "1"), "{table}");
        assert_eq!(row[8..].join(" "), how, "{table}");
        assert!(!table.contains(&format!("--run {run} ")), "no recovery hint for a recovered run: {table}");
    }
    let listed = list(&["--run", runs[1].1]);
    assert!(listed.contains(" re-run "), "{listed}");

    // Forced, with a note: the run is no longer failed, only incomplete.
    let forced = resolve(&["--all", "--run", runs[2].1, "--force", "--note", "vendor retired the endpoint"]);
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stdout));
    let (row, table) = status_row(&lake, runs[2].1);
    assert_eq!(
        (row[2].as_str(), row[7].as_str(), row[8..].join(" ")),
        ("incomplete", "1", "by hand".to_string()),
        "{table}"
    );
    let id =
        list(&["--run", runs[2].1]).lines().nth(1).and_then(|l| l.split_whitespace().next()).expect("id").to_string();
    let shown = tributary().args(["dlq", "show", &id, "--lake"]).arg(&lake).output().expect("show");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("\"by\": \"operator\"") && shown.contains("vendor retired the endpoint"), "{shown}");
    // A resolved letter is not sent back by a redrive of everything.
    let all = tributary().args(["dlq", "redrive", "--all", "--lake"]).arg(&lake).output().expect("redrive");
    let report = String::from_utf8_lossy(&all.stdout);
    assert!(report.contains("0 of 3 dead letters redriven"), "{report}");
}

#[test]
fn a_spec_takes_its_host_and_port_from_the_environment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let text = transactions_spec(port)
        .replace(&format!("127.0.0.1:{port}"), "${VENDOR_HOST}:${VENDOR_PORT:-9}")
        .replace("pipeline: p\n", "pipeline: p\ndescription: 'costs $$5, written $${NOT_SUBSTITUTED}'\n");
    let spec = write_spec(dir.path(), &format!("# needs ${{VENDOR_HOST}}\n{text}"));
    let lake = dir.path().join("lake");
    let with_env = |command: &mut Command| {
        command.env("VENDOR_HOST", "127.0.0.1").env("VENDOR_PORT", port.to_string());
    };

    let mut validate = tributary();
    validate.arg("validate").arg(&spec);
    with_env(&mut validate);
    let output = validate.output().expect("validate");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(shown.contains(&format!("http://127.0.0.1:{port}/transactions")), "{shown}");
    assert!(shown.contains("costs $$5, written ${NOT_SUBSTITUTED}"), "`$${{` is a literal `${{`: {shown}");

    let mut vendor = start_demo_vendor(port);
    let mut run = tributary();
    run.arg("run").arg(&spec).arg("--lake").arg(&lake);
    with_env(&mut run);
    let output = run.output().expect("run");
    let _ = vendor.kill();
    let _ = vendor.wait();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("records persisted    690"), "{stdout}");

    // Unset without a default: the error names the variable and the file; nothing is written.
    let lake = dir.path().join("other-lake");
    let output =
        tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).env_remove("VENDOR_HOST").output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains(&spec.display().to_string()) && stderr.contains("VENDOR_HOST is not set"), "{stderr}");
    assert!(stderr.contains("line 6") && stderr.contains("${VENDOR_HOST:-value}"), "{stderr}");
    assert!(!lake.exists(), "nothing is written for a spec that cannot be read");

    // A credential never comes from the environment.
    let leaky = write_spec(dir.path(), &text.replace("${VENDOR_HOST}", "${VENDOR_TOKEN}"));
    let output = tributary().arg("validate").arg(&leaky).env("VENDOR_TOKEN", "s3cr3t-value").output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("`${VENDOR_TOKEN}` looks like a credential"), "{stderr}");
    assert!(!stderr.contains("s3cr3t-value"), "{stderr}");
}

/// Issue 30, item 4: a failure is said once. A run whose vendor refuses
/// every connection retries, dead-letters the page and alerts; the reason
/// is in its summary once (the ALERT line), with no log line on stderr
/// repeating it per retry and receive (the functions' logs are
/// `RUST_LOG`'s to turn on). An error is one `error:` line with its next step.
#[test]
fn a_failure_is_said_once_with_its_next_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let spec = write_spec(
        dir.path(),
        &format!(
            "version: 1\npipeline: refused\nstrategy: {{kind: simple}}\n\
             request: {{url: 'http://127.0.0.1:{port}/x', allow: {{loopback: true}}}}\ntarget: {{dataset: d}}\n"
        ),
    );
    let lake = dir.path().join("lake");
    let output =
        tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).env_remove("RUST_LOG").output().expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a dead letter fails the run:\n{stdout}");
    let reason = format!("127.0.0.1:{port}");
    assert_eq!(stdout.matches(&reason).count(), 1, "the vendor's failure once, in the ALERT line:\n{stdout}");
    assert!(stdout.contains("ALERT: request gave up"), "{stdout}");
    assert!(!stderr.contains("WARN") && !stderr.contains("ERROR") && !stderr.contains(&reason), "{stderr}");
    // Asked for, the functions' logs are there.
    let traced = tributary()
        .arg("run")
        .arg(&spec)
        .arg("--lake")
        .arg(dir.path().join("traced"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&traced.stderr).contains("WARN"), "RUST_LOG=warn shows the retries");

    // An error: one line, what is wrong and what to do.
    let output = tributary().arg("status").arg("--lake").arg(dir.path().join("nowhere")).output().expect("status");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: lake directory") && stderr.contains("tributary run SPEC --lake DIR"),
        "{stderr}"
    );
    let output = tributary().arg("validate").arg(dir.path().join("missing.yaml")).output().expect("validate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("missing.yaml") && stderr.contains("tributary init URL --out FILE"), "{stderr}");
}

/// Issue 30, item 4: without AWS credentials, `--stack` says so in one
/// line, naming what to set, instead of the SDK's provider chain; the
/// SDK's own warning on the way (an instance metadata service refusing)
/// is not printed before it. A profile that is set but unknown is named.
/// (A source that is set up and fails, such as an expired SSO session,
/// says the SDK's reason in one line: not reproducible without AWS.)
#[cfg(feature = "aws")]
#[test]
fn without_aws_credentials_the_error_is_one_line_naming_what_to_set() {
    const NO_CREDENTIALS: &str =
        "error: no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run aws configure\n";
    let home = tempfile::tempdir().expect("tempdir");
    // An instance metadata service that refuses every call, as one off EC2
    // behind a proxy does: the SDK warns, then the chain fails.
    let imds = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", imds.local_addr().expect("addr"));
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in imds.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0_u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    let bare = |args: &[&str]| {
        let mut command = tributary();
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("AWS_REGION", "us-east-1");
        command
    };
    let cases: [(&[&str], Option<&str>); 3] = [
        (&["status", "--stack", "prod"], None),
        (&["status", "--stack", "prod"], Some(endpoint.as_str())),
        (&["dlq", "list", "--lake", "s3://tributary-prod-lake"], None),
    ];
    for (args, metadata) in cases {
        let mut command = bare(args);
        match metadata {
            Some(endpoint) => command.env("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint),
            None => command.env("AWS_EC2_METADATA_DISABLED", "true"),
        };
        let output = command.output().expect("run tributary");
        assert!(!output.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), NO_CREDENTIALS, "{args:?} with metadata {metadata:?}");
    }
    let output = bare(&["status", "--stack", "prod"])
        .env("AWS_PROFILE", "nope")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run tributary");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: no AWS credentials in profile nope (AWS_PROFILE): check its name in ~/.aws/config, \
         or run aws configure --profile nope\n"
    );
}

/// A trial finding: Ctrl-C during `tributary run` printed nothing. It now
/// names the run and the command that finishes it, exits 130, and that
/// command completes the run with every record once.
#[test]
fn ctrl_c_names_the_run_and_the_command_that_finishes_it() {
    stopped_run_names_itself_and_its_command_finishes_it("-INT", 130);
}

/// A later trial: SIGTERM (`kill`, a CI timeout) stopped a run with no
/// word and `tributary status` showed it running; it is said as Ctrl-C
/// is, with the shell's code for SIGTERM.
#[test]
fn sigterm_names_the_run_and_the_command_that_finishes_it() {
    stopped_run_names_itself_and_its_command_finishes_it("-TERM", 143);
}

fn stopped_run_names_itself_and_its_command_finishes_it(signal: &str, code: i32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut vendor = start_demo_vendor_with(port, &["--customers", "20000"]);
    let (spec, lake) = customers_spec_and_lake(dir.path(), port);
    // Interrupted once some of its 1,000 pages are persisted.
    let (exit, stderr) = run_stopped_after(&spec, &lake, &[], 5, signal);
    assert_eq!(exit, Some(code), "{signal}: {stderr}");
    assert!(stderr.contains("interrupted: run ") && stderr.contains(" of pipeline p did not complete"), "{stderr}");
    let finish = stderr.lines().find(|line| line.trim_start().starts_with("tributary run ")).expect("the command");
    let at = finish.split("--scheduled-at ").nth(1).expect("its time").trim();
    assert!(receipts(&lake) < 1_000, "interrupted before the end: {} pages", receipts(&lake));
    // `status` says the run is interrupted, not running, and how to finish it.
    let status = tributary().arg("status").arg("--lake").arg(&lake).output().expect("status");
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.contains(" interrupted ") && shown.contains(&format!("finish:   tributary run SPEC --scheduled-at {at}")),
        "{shown}"
    );

    let again = tributary()
        .arg("run")
        .arg(&spec)
        .arg("--lake")
        .arg(&lake)
        .arg("--scheduled-at")
        .arg(at)
        .output()
        .expect("finish the run");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&again.stderr));
    let runs: std::collections::BTreeSet<_> =
        std::fs::read_dir(lake.join("_runs/p")).expect("runs").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(runs.len(), 1, "the same run, not a second one: {runs:?}");
    let counted = rows_and_ids(&lake);
    let _ = vendor.kill();
    let _ = vendor.wait();
    assert_eq!(counted, (Some(20_000), Some(20_000)));
}

/// A trial finding: an interrupted `--from/--to` backfill named only the
/// run it stopped in, not the runs after it that never started. It now
/// says how many did not start and the range that runs them, and that
/// command finishes the backfill: the interrupted run completed once,
/// every day's run complete.
#[test]
fn an_interrupted_backfill_names_the_runs_left_and_the_range_that_finishes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut vendor = start_demo_vendor_with(port, &["--customers", "2000"]);
    let (spec, lake) = customers_spec_and_lake(dir.path(), port);
    let range = ["--from", "2026-11-01", "--to", "2026-11-03"];
    let (exit, stderr) = run_stopped_after(&spec, &lake, &range, 3, "-TERM");
    assert_eq!(exit, Some(143), "{stderr}");
    assert!(stderr.contains("the backfill stopped at run 1 of 3: 2 run(s) after it did not start"), "{stderr}");
    let finish = stderr.lines().find(|line| line.contains(" --from ")).expect("the range's command").trim();
    assert!(finish.ends_with("--from 2026-11-01 --to 2026-11-03"), "{finish}");

    let again = tributary().arg("run").arg(&spec).arg("--lake").arg(&lake).args(range).output().expect("finish");
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let runs: std::collections::BTreeSet<_> =
        std::fs::read_dir(lake.join("_runs/p")).expect("runs").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(runs.len(), 3, "one run per day, the interrupted one finished: {runs:?}");
    for run in &runs {
        assert!(lake.join("_runs/p").join(run).join("_SUCCESS").exists(), "{run:?} complete");
    }
    let counted = rows_and_ids(&lake);
    let _ = vendor.kill();
    let _ = vendor.wait();
    assert_eq!(counted, (Some(6_000), Some(2_000)), "each day's run holds every customer once");
}

/// A paged customers spec against the demo vendor on `port` (dataset `d`,
/// 20 records a page), and an empty lake beside it.
fn customers_spec_and_lake(dir: &std::path::Path, port: u16) -> (std::path::PathBuf, std::path::PathBuf) {
    let spec = write_spec(
        dir,
        &format!(
            "version: 1\npipeline: p\nstrategy: {{kind: paged, page_size: 20, total_pointer: /total}}\n\
             request: {{url: 'http://127.0.0.1:{port}/customers', records_pointer: /items, allow: {{loopback: true}}}}\n\
             target: {{dataset: d}}\n"
        ),
    );
    let lake = dir.join("lake");
    std::fs::create_dir_all(&lake).expect("lake");
    (spec, lake)
}

/// Starts `tributary run SPEC --lake LAKE ARGS`, waits until `pages` of
/// pipeline `p`'s pages are persisted, and stops it with `signal`; its
/// exit code and standard error.
fn run_stopped_after(
    spec: &std::path::Path,
    lake: &std::path::Path,
    args: &[&str],
    pages: usize,
    signal: &str,
) -> (Option<i32>, String) {
    let run = tributary()
        .arg("run")
        .arg(spec)
        .arg("--lake")
        .arg(lake)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while receipts(lake) < pages {
        assert!(std::time::Instant::now() < deadline, "no page persisted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let killed = Command::new("kill").arg(signal).arg(run.id().to_string()).status().expect("kill");
    assert!(killed.success());
    let output = run.wait_with_output().expect("the run ends");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Page receipts of pipeline `p` in `lake`.
fn receipts(lake: &std::path::Path) -> usize {
    walk_files(&lake.join("_runs/p")).into_iter().filter(|path| path.to_string_lossy().contains("/receipts-")).count()
}

/// `SELECT count(*), count(DISTINCT id) FROM d` on `lake`.
fn rows_and_ids(lake: &std::path::Path) -> (Option<u64>, Option<u64>) {
    let count = tributary()
        .arg("query")
        .arg("--lake")
        .arg(lake)
        .arg("SELECT count(*) AS n, count(DISTINCT id) AS ids FROM d")
        .output()
        .expect("query");
    let counted: serde_json::Value = serde_json::from_slice(&count.stdout).expect("one JSON row");
    (counted["n"].as_u64(), counted["ids"].as_u64())
}

/// Every file under `dir`, recursively.
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() { walk_files(&path) } else { vec![path] }
        })
        .collect()
}

/// Files under `dir`, at any depth (0 when it does not exist).
fn walk_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries.flatten().map(|entry| if entry.path().is_dir() { walk_count(&entry.path()) } else { 1 }).sum()
    })
}
