//! CloudWatch metrics as Embedded Metric Format (EMF) log lines.
//!
//! A function keeps one [`Metrics`] per invocation, records counts, byte
//! totals and latency samples into it, and calls [`Metrics::flush`] at the end.
//! Each flush prints one JSON object per line on stdout; in Lambda, stdout
//! lines become CloudWatch Logs events, and CloudWatch extracts the metrics
//! from them without any API call. The same lines stay searchable in Logs
//! Insights, with the [`Metrics::property`] members (run_id, page, message_id)
//! beside the values.
//!
//! Format: <https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html>.
//! Every line is
//!
//! ```json
//! {"_aws": {"Timestamp": 1700000000000,
//!           "CloudWatchMetrics": [{"Namespace": "tributary",
//!                                  "Dimensions": [["function", "pipeline"]],
//!                                  "Metrics": [{"Name": "api_latency", "Unit": "Milliseconds"}]}]},
//!  "function": "request", "pipeline": "crm_contacts",
//!  "api_latency": [112.5, 98.0], "run_id": "..."}
//! ```
//!
//! Limits from the specification that shape the output: at most 100 values
//! per metric and at most 100 metrics per directive (a flush with more emits
//! more lines instead of dropping values), at most 30 dimensions per set (we
//! use two), metric names of 1 to 255 characters.
//!
//! No crate is used: the one maintained Rust EMF crate (`metrics_cloudwatch_embedded`)
//! is a global recorder for the `metrics` facade that drops histogram values
//! beyond 100 per flush, where this module needs a per-invocation value with
//! properties and a pure, testable rendering.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::{Map, Value, json};

/// The CloudWatch namespace every tributary metric is published under.
pub const NAMESPACE: &str = "tributary";

/// Dimension name carrying the Lambda function (`orchestrator`, `request`, ...).
pub const DIMENSION_FUNCTION: &str = "function";
/// Dimension name carrying the pipeline id from the spec.
pub const DIMENSION_PIPELINE: &str = "pipeline";

/// Records decoded from vendor API pages. [`Unit::Count`].
pub const RECORDS_FETCHED: &str = "records_fetched";
/// Records written to the lake as Parquet. [`Unit::Count`].
pub const RECORDS_PERSISTED: &str = "records_persisted";
/// Records set aside because they failed decoding or the schema. [`Unit::Count`].
pub const RECORDS_QUARANTINED: &str = "records_quarantined";
/// Bytes of Parquet put to S3. [`Unit::Bytes`].
pub const BYTES_PERSISTED: &str = "bytes_persisted";
/// Time of one vendor API request, one sample per request. [`Unit::Milliseconds`].
pub const API_LATENCY: &str = "api_latency";
/// Vendor API requests retried after a retryable failure. [`Unit::Count`].
pub const API_RETRIES: &str = "api_retries";
/// Vendor API responses that said "slow down" (HTTP 429 or the vendor's
/// equivalent). [`Unit::Count`].
pub const API_THROTTLES: &str = "api_throttles";
/// Messages given up on and left to the dead-letter queue. [`Unit::Count`].
pub const DEAD_LETTERS: &str = "dead_letters";
/// Runs the Orchestrator started: one per run plan it recorded (a
/// redelivered start, or a re-run, counts again). [`Unit::Count`].
pub const RUNS_STARTED: &str = "runs_started";
/// Runs completed: one when a run's last page, or its expected count,
/// completes it (manifest and `_SUCCESS` written), by whichever function
/// did. [`Unit::Count`].
pub const RUNS_COMPLETED: &str = "runs_completed";
/// Runs Notify alerted on as failed: one per alert on a run's dead letters
/// (one per run and function in each Notify batch, so a run whose letters
/// come in separate bursts counts once per burst). [`Unit::Count`].
pub const RUNS_FAILED: &str = "runs_failed";
/// Pages Request fetched and forwarded (one per message answered with
/// records). [`Unit::Count`].
pub const PAGES_FETCHED: &str = "pages_fetched";
/// Pages Persist wrote to the lake. [`Unit::Count`].
pub const PAGES_PERSISTED: &str = "pages_persisted";

/// Every metric name above, for dashboards and alarms declared elsewhere.
pub const ALL_METRICS: [&str; 13] = [
    RECORDS_FETCHED,
    RECORDS_PERSISTED,
    RECORDS_QUARANTINED,
    BYTES_PERSISTED,
    API_LATENCY,
    API_RETRIES,
    API_THROTTLES,
    DEAD_LETTERS,
    RUNS_STARTED,
    RUNS_COMPLETED,
    RUNS_FAILED,
    PAGES_FETCHED,
    PAGES_PERSISTED,
];

/// At most this many values per metric in one EMF line (the specification's limit).
pub const MAX_VALUES_PER_METRIC: usize = 100;
/// At most this many metrics in one EMF directive (the specification's limit).
pub const MAX_METRICS_PER_DIRECTIVE: usize = 100;
/// Metric names are 1 to this many characters (the specification's limit).
pub const MAX_NAME_CHARS: usize = 255;

/// The units tributary uses, a subset of the CloudWatch `StandardUnit` names
/// that EMF accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `Count`: a number of things.
    Count,
    /// `Bytes`.
    Bytes,
    /// `Milliseconds`.
    Milliseconds,
    /// `None`: a dimensionless value.
    None,
}

impl Unit {
    /// The EMF / CloudWatch name of the unit, as written in `Metrics[].Unit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Bytes => "Bytes",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// What has been recorded under one metric name.
#[derive(Debug, Clone, PartialEq)]
enum Values {
    /// Added up; one value per flush.
    Total(u64),
    /// Kept one by one; split into lines of [`MAX_VALUES_PER_METRIC`].
    Samples(Vec<f64>),
}

#[derive(Debug, Clone, PartialEq)]
struct Recorded {
    unit: Unit,
    values: Values,
}

impl Recorded {
    /// How many lines this metric needs.
    fn rounds(&self) -> usize {
        match &self.values {
            Values::Total(_) => 1,
            Values::Samples(samples) => samples.len().div_ceil(MAX_VALUES_PER_METRIC),
        }
    }

    /// The value this metric contributes to line `round`, if any.
    fn value_for_round(&self, round: usize) -> Option<Value> {
        match &self.values {
            Values::Total(total) => (round == 0).then(|| json!(total)),
            Values::Samples(samples) => samples.chunks(MAX_VALUES_PER_METRIC).nth(round).map(|chunk| json!(chunk)),
        }
    }
}

/// Where a function's EMF lines go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MetricsTarget {
    /// Nowhere (tests, and tools that have no use for them).
    #[default]
    Off,
    /// Standard output: in Lambda each line becomes a CloudWatch Logs event,
    /// which is how EMF is ingested.
    Stdout,
    /// Appended to a file (the local runtime's `<lake>/_metrics.jsonl`).
    File(std::path::PathBuf),
}

/// This process's function name and the target of its run counts
/// ([`count_run`]); unset, the counts go nowhere.
static RUN_COUNTS: std::sync::OnceLock<(String, MetricsTarget)> = std::sync::OnceLock::new();

/// Sends this process's run counts ([`RUNS_STARTED`], [`RUNS_COMPLETED`])
/// to `target` under the dimension `function`. The run ledger counts a run
/// where it records the run's start and completion, which several
/// functions share and where no handler's [`Metrics`] is at hand, so a
/// Lambda's `main` calls this once, at cold start, with its own name and
/// [`MetricsTarget::Stdout`]. The CLI and tests leave it unset; a second
/// call is ignored.
pub fn count_runs_to(function: &str, target: MetricsTarget) {
    let _ = RUN_COUNTS.set((function.to_owned(), target));
}

/// Counts one `name` ([`RUNS_STARTED`], [`RUNS_COMPLETED`]) of `run_id`
/// of `pipeline`, as one EMF line (with `run_id` as a property) to the
/// target [`count_runs_to`] set; nothing when it set none.
pub fn count_run(name: &'static str, pipeline: &str, run_id: &str) {
    let Some((function, target)) = RUN_COUNTS.get() else { return };
    let mut metrics = Metrics::new(function, pipeline);
    metrics.count(name, 1);
    metrics.property("run_id", Value::String(run_id.to_owned()));
    metrics.flush_to(target);
}

/// A per-invocation metric accumulator for one function and pipeline.
///
/// Counts and bytes add up under their name; durations are kept as samples
/// (CloudWatch computes percentiles from them). Every line carries the
/// dimension set `[["function", "pipeline"]]`, both as top-level string
/// members. The dimension values should be 1 to 1024 characters (CloudWatch's
/// limit on a dimension value).
///
/// A name is bound to the first kind recorded under it (count, bytes or
/// duration); a later record of another kind under the same name, an empty or
/// over-long name, or a non-finite duration is dropped with a warning rather
/// than failing the invocation.
#[derive(Debug, Clone)]
pub struct Metrics {
    function: String,
    pipeline: String,
    metrics: BTreeMap<&'static str, Recorded>,
    properties: Map<String, Value>,
}

impl Metrics {
    /// An empty accumulator for `function` (the Lambda function's short name)
    /// and `pipeline` (the spec's pipeline id).
    pub fn new(function: &str, pipeline: &str) -> Self {
        Self {
            function: function.to_owned(),
            pipeline: pipeline.to_owned(),
            metrics: BTreeMap::new(),
            properties: Map::new(),
        }
    }

    /// Adds `n` to the [`Unit::Count`] metric `name`.
    pub fn count(&mut self, name: &'static str, n: u64) {
        self.add(name, Unit::Count, n);
    }

    /// Adds `n` bytes to the [`Unit::Bytes`] metric `name`.
    pub fn bytes(&mut self, name: &'static str, n: u64) {
        self.add(name, Unit::Bytes, n);
    }

    /// Appends one sample of `ms` milliseconds to the [`Unit::Milliseconds`]
    /// metric `name`. Every sample is kept: past [`MAX_VALUES_PER_METRIC`],
    /// [`Metrics::to_lines`] spreads them over several lines.
    pub fn duration_ms(&mut self, name: &'static str, ms: f64) {
        if !ms.is_finite() {
            tracing::warn!(metric = name, ms, "duration is not a finite number; sample dropped");
            return;
        }
        let Some(recorded) = self.entry(name, Unit::Milliseconds, || Values::Samples(Vec::new())) else { return };
        if let Values::Samples(samples) = &mut recorded.values {
            samples.push(ms);
        }
    }

    /// Sets a non-metric member written on every line, such as `run_id`,
    /// `page` or `message_id`, so that Logs Insights can find the metrics of
    /// one run. A later call with the same key replaces the value. Keys that
    /// EMF or the dimensions own (`_aws`, `function`, `pipeline`) are ignored
    /// with a warning; a key equal to a recorded metric name loses to the
    /// metric.
    pub fn property(&mut self, key: &str, value: Value) {
        if key == "_aws" || key == DIMENSION_FUNCTION || key == DIMENSION_PIPELINE {
            tracing::warn!(key, "property name is reserved by EMF or a dimension; ignored");
            return;
        }
        self.properties.insert(key.to_owned(), value);
    }

    /// True when no metric has been recorded since creation or the last flush.
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }

    /// Renders what has been recorded as EMF lines stamped `timestamp_ms`
    /// (milliseconds since the Unix epoch). Pure: nothing is printed or cleared.
    ///
    /// Returns no line when no metric has been recorded (properties alone are
    /// not worth a line). Counts and bytes appear once, in the first line;
    /// samples are cut into runs of [`MAX_VALUES_PER_METRIC`], run `i` in line
    /// `i`; a line that would hold more than [`MAX_METRICS_PER_DIRECTIVE`]
    /// metrics is split further. Properties and dimensions are on every line.
    pub fn to_lines(&self, timestamp_ms: u64) -> Vec<String> {
        let rounds = self.metrics.values().map(Recorded::rounds).max().unwrap_or(0);
        let mut lines = Vec::new();
        for round in 0..rounds {
            let entries: Vec<(&str, Unit, Value)> = self
                .metrics
                .iter()
                .filter_map(|(name, recorded)| recorded.value_for_round(round).map(|v| (*name, recorded.unit, v)))
                .collect();
            for group in entries.chunks(MAX_METRICS_PER_DIRECTIVE) {
                lines.push(self.line(timestamp_ms, group));
            }
        }
        lines
    }

    /// Prints [`Metrics::to_lines`] for the current time on stdout, one line
    /// per write, then clears metrics and properties for the next invocation.
    ///
    /// Writes through a locked stdout rather than `println!`, which panics if
    /// stdout is closed; a failed write is logged and the metrics are lost.
    pub fn flush(&mut self) {
        self.flush_to(&MetricsTarget::Stdout);
    }

    /// Writes [`Metrics::to_lines`] for the current time to `target`, then
    /// clears metrics and properties.
    pub fn flush_to(&mut self, target: &MetricsTarget) {
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or_default();
        let lines = self.to_lines(now_ms);
        let result = match target {
            MetricsTarget::Off => Ok(()),
            MetricsTarget::Stdout => {
                let mut stdout = std::io::stdout().lock();
                lines.iter().try_for_each(|line| writeln!(stdout, "{line}")).and_then(|()| stdout.flush())
            }
            MetricsTarget::File(path) => {
                std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(|mut file| {
                    file.write_all(lines.iter().map(|l| format!("{l}\n")).collect::<String>().as_bytes())
                })
            }
        };
        if let Err(error) = result {
            tracing::warn!(%error, "could not write EMF lines; these metrics are lost");
        }
        self.metrics.clear();
        self.properties.clear();
    }

    /// Adds to a summed metric.
    fn add(&mut self, name: &'static str, unit: Unit, n: u64) {
        let Some(recorded) = self.entry(name, unit, || Values::Total(0)) else { return };
        if let Values::Total(total) = &mut recorded.values {
            *total = total.saturating_add(n);
        }
    }

    /// The entry for `name`, created with `empty` if new; `None` (with a
    /// warning) when the name is invalid or already holds another unit.
    fn entry(&mut self, name: &'static str, unit: Unit, empty: impl FnOnce() -> Values) -> Option<&mut Recorded> {
        let chars = name.chars().count();
        if chars == 0 || chars > MAX_NAME_CHARS {
            tracing::warn!(metric = name, chars, "metric name must be 1 to 255 characters; value dropped");
            return None;
        }
        let recorded = self.metrics.entry(name).or_insert_with(|| Recorded { unit, values: empty() });
        if recorded.unit != unit {
            tracing::warn!(
                metric = name,
                recorded = recorded.unit.as_str(),
                given = unit.as_str(),
                "metric already recorded with another unit; value dropped"
            );
            return None;
        }
        Some(recorded)
    }

    /// One EMF object holding `group` (at most [`MAX_METRICS_PER_DIRECTIVE`] metrics).
    fn line(&self, timestamp_ms: u64, group: &[(&str, Unit, Value)]) -> String {
        let mut root: Map<String, Value> = self
            .properties
            .iter()
            .filter(|(key, _)| !self.metrics.contains_key(key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        root.insert(DIMENSION_FUNCTION.to_owned(), json!(self.function));
        root.insert(DIMENSION_PIPELINE.to_owned(), json!(self.pipeline));
        let definitions: Vec<Value> =
            group.iter().map(|(name, unit, _)| json!({ "Name": name, "Unit": unit.as_str() })).collect();
        for (name, _, value) in group {
            root.insert((*name).to_owned(), value.clone());
        }
        root.insert(
            "_aws".to_owned(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": [[DIMENSION_FUNCTION, DIMENSION_PIPELINE]],
                    "Metrics": definitions,
                }],
            }),
        );
        Value::Object(root).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: u64 = 1_700_000_000_000;

    /// Every unit the EMF specification accepts.
    const EMF_UNITS: [&str; 27] = [
        "Seconds",
        "Microseconds",
        "Milliseconds",
        "Bytes",
        "Kilobytes",
        "Megabytes",
        "Gigabytes",
        "Terabytes",
        "Bits",
        "Kilobits",
        "Megabits",
        "Gigabits",
        "Terabits",
        "Percent",
        "Count",
        "Bytes/Second",
        "Kilobytes/Second",
        "Megabytes/Second",
        "Gigabytes/Second",
        "Terabytes/Second",
        "Bits/Second",
        "Kilobits/Second",
        "Megabits/Second",
        "Gigabits/Second",
        "Terabits/Second",
        "Count/Second",
        "None",
    ];

    fn valid_name(name: &str) -> bool {
        (1..=MAX_NAME_CHARS).contains(&name.chars().count())
    }

    /// Parses `line` and checks it against the EMF rules; returns the object.
    fn check_emf(line: &str) -> Map<String, Value> {
        assert!(!line.contains('\n'), "an EMF event must be one line: {line}");
        let root = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(root)) => root,
            other => panic!("not a JSON object: {other:?} from {line}"),
        };
        let aws = root["_aws"].as_object().expect("_aws is an object");
        assert!(aws["Timestamp"].is_u64(), "Timestamp is a non-negative integer: {}", aws["Timestamp"]);
        let directives = aws["CloudWatchMetrics"].as_array().expect("CloudWatchMetrics is an array");
        assert!(!directives.is_empty());
        for directive in directives {
            let namespace = directive["Namespace"].as_str().expect("Namespace is a string");
            assert!(valid_name(namespace));
            let dimension_sets = directive["Dimensions"].as_array().expect("Dimensions is an array");
            for set in dimension_sets {
                let set = set.as_array().expect("a dimension set is an array");
                assert!(!set.is_empty() && set.len() <= 30, "1 to 30 dimensions per set: {set:?}");
                for dimension in set {
                    let dimension = dimension.as_str().expect("a dimension name is a string");
                    assert!(valid_name(dimension));
                    assert!(
                        root.get(dimension).is_some_and(Value::is_string),
                        "dimension {dimension} is a top-level string"
                    );
                }
            }
            let metrics = directive["Metrics"].as_array().expect("Metrics is an array");
            assert!(!metrics.is_empty() && metrics.len() <= MAX_METRICS_PER_DIRECTIVE, "1 to 100 metrics");
            for metric in metrics {
                let name = metric["Name"].as_str().expect("Name is a string");
                assert!(valid_name(name), "metric name of 1 to 255 characters: {name:?}");
                let unit = metric["Unit"].as_str().expect("Unit is a string");
                assert!(EMF_UNITS.contains(&unit), "valid unit: {unit}");
                match root.get(name) {
                    Some(Value::Number(_)) => {}
                    Some(Value::Array(values)) => {
                        assert!(!values.is_empty() && values.len() <= MAX_VALUES_PER_METRIC, "1 to 100 values");
                        assert!(values.iter().all(Value::is_number), "every value is a number: {values:?}");
                    }
                    other => panic!("metric {name} must be a top-level number or array, got {other:?}"),
                }
            }
        }
        root
    }

    fn metric_names(root: &Map<String, Value>) -> Vec<String> {
        root["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .map(|metrics| metrics.iter().filter_map(|m| m["Name"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }

    fn unit_of(root: &Map<String, Value>, name: &str) -> Option<String> {
        root["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()?
            .iter()
            .find(|m| m["Name"] == name)
            .and_then(|m| m["Unit"].as_str().map(str::to_owned))
    }

    #[test]
    fn counts_and_bytes_add_up_in_one_valid_line() {
        let mut metrics = Metrics::new("persist", "crm_contacts");
        metrics.count(RECORDS_PERSISTED, 3);
        metrics.count(RECORDS_PERSISTED, 4);
        metrics.count(RECORDS_QUARANTINED, 0);
        metrics.bytes(BYTES_PERSISTED, 1_000);
        metrics.bytes(BYTES_PERSISTED, 24);

        let lines = metrics.to_lines(TS);
        assert_eq!(lines.len(), 1);
        let root = check_emf(&lines[0]);
        assert_eq!(root[RECORDS_PERSISTED], json!(7));
        assert_eq!(root[RECORDS_QUARANTINED], json!(0));
        assert_eq!(root[BYTES_PERSISTED], json!(1_024));
        assert_eq!(unit_of(&root, RECORDS_PERSISTED).as_deref(), Some("Count"));
        assert_eq!(unit_of(&root, BYTES_PERSISTED).as_deref(), Some("Bytes"));
        assert_eq!(root["_aws"]["Timestamp"], json!(TS));
        assert_eq!(root["_aws"]["CloudWatchMetrics"][0]["Namespace"], json!(NAMESPACE));
        assert_eq!(root["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["function", "pipeline"]]));
        assert_eq!(root["function"], json!("persist"));
        assert_eq!(root["pipeline"], json!("crm_contacts"));
    }

    #[test]
    fn latency_samples_past_100_spread_over_lines_without_loss() {
        let mut metrics = Metrics::new("request", "crm_contacts");
        let samples: Vec<f64> = (0..250).map(|i| f64::from(i) + 0.5).collect();
        for &ms in &samples {
            metrics.duration_ms(API_LATENCY, ms);
        }
        metrics.count(API_RETRIES, 2);

        let lines = metrics.to_lines(TS);
        assert_eq!(lines.len(), 3);
        let mut seen = Vec::new();
        let mut retries_total = 0;
        for line in &lines {
            let root = check_emf(line);
            assert_eq!(unit_of(&root, API_LATENCY).as_deref(), Some("Milliseconds"));
            let values = root[API_LATENCY].as_array().expect("latency is an array");
            assert!(values.len() <= MAX_VALUES_PER_METRIC);
            seen.extend(values.iter().filter_map(Value::as_f64));
            // The count is written once, not repeated (CloudWatch would add it up again).
            if let Some(n) = root.get(API_RETRIES) {
                assert!(metric_names(&root).contains(&API_RETRIES.to_owned()));
                retries_total += n.as_u64().expect("retries is an integer");
            }
        }
        assert_eq!(seen, samples);
        assert_eq!(retries_total, 2);
    }

    #[test]
    fn more_than_100_metrics_split_into_directives_of_100() {
        let mut metrics = Metrics::new("request", "p");
        let names: Vec<&'static str> = (0..150).map(|i| &*Box::leak(format!("m{i:03}").into_boxed_str())).collect();
        for name in &names {
            metrics.count(name, 1);
        }
        let lines = metrics.to_lines(TS);
        assert_eq!(lines.len(), 2);
        let mut all: Vec<String> = lines.iter().flat_map(|line| metric_names(&check_emf(line))).collect();
        all.sort();
        assert_eq!(all, names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_recorded_gives_no_line_even_with_properties() {
        let mut metrics = Metrics::new("notify", "p");
        assert!(metrics.to_lines(TS).is_empty());
        metrics.property("run_id", json!("r-1"));
        assert!(metrics.to_lines(TS).is_empty());
        assert!(metrics.is_empty());
    }

    #[test]
    fn properties_are_on_every_line_and_reserved_keys_are_kept_out() {
        let mut metrics = Metrics::new("request", "crm_contacts");
        metrics.property("run_id", json!("2024-06-01T00:00:00Z#crm_contacts"));
        metrics.property("page", json!(3));
        metrics.property("message_id", json!("m-1"));
        metrics.property("pipeline", json!("spoofed"));
        metrics.property("_aws", json!({}));
        metrics.property(API_LATENCY, json!("shadowed"));
        for i in 0..150 {
            metrics.duration_ms(API_LATENCY, f64::from(i));
        }

        let lines = metrics.to_lines(TS);
        assert_eq!(lines.len(), 2);
        for line in &lines {
            let root = check_emf(line);
            assert_eq!(root["run_id"], json!("2024-06-01T00:00:00Z#crm_contacts"));
            assert_eq!(root["page"], json!(3));
            assert_eq!(root["message_id"], json!("m-1"));
            assert_eq!(root["pipeline"], json!("crm_contacts"));
            assert!(root[API_LATENCY].is_array());
        }
    }

    #[test]
    fn invalid_records_are_dropped_not_emitted() {
        let mut metrics = Metrics::new("request", "p");
        metrics.duration_ms(API_LATENCY, f64::NAN);
        metrics.duration_ms(API_LATENCY, f64::INFINITY);
        metrics.count("", 1);
        let long: &'static str = Box::leak("x".repeat(256).into_boxed_str());
        metrics.count(long, 1);
        assert!(metrics.to_lines(TS).is_empty());

        metrics.count(API_THROTTLES, 1);
        metrics.duration_ms(API_THROTTLES, 5.0);
        metrics.bytes(API_THROTTLES, 9);
        let lines = metrics.to_lines(TS);
        assert_eq!(lines.len(), 1);
        let root = check_emf(&lines[0]);
        assert_eq!(root[API_THROTTLES], json!(1));
        assert_eq!(unit_of(&root, API_THROTTLES).as_deref(), Some("Count"));
    }

    #[test]
    fn flush_clears_metrics_and_properties() {
        let mut metrics = Metrics::new("orchestrator", "p");
        metrics.count(DEAD_LETTERS, 1);
        metrics.property("run_id", json!("r-1"));
        metrics.flush();
        assert!(metrics.is_empty());
        assert!(metrics.to_lines(TS).is_empty());
        metrics.count(RECORDS_FETCHED, 1);
        let root = check_emf(&metrics.to_lines(TS)[0]);
        assert!(root.get("run_id").is_none(), "properties of the last invocation are gone");
        assert!(root.get(DEAD_LETTERS).is_none());
    }

    #[test]
    fn metric_name_constants_are_valid_and_distinct() {
        let mut names = ALL_METRICS.to_vec();
        assert!(names.iter().all(|n| valid_name(n)));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL_METRICS.len());
        assert!(!names.contains(&DIMENSION_FUNCTION) && !names.contains(&DIMENSION_PIPELINE));
        assert!(
            [Unit::Count, Unit::Bytes, Unit::Milliseconds, Unit::None].iter().all(|u| EMF_UNITS.contains(&u.as_str()))
        );
    }

    #[test]
    fn run_counts_go_where_the_process_sends_them_and_nowhere_before() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("emf.jsonl");
        count_run(RUNS_STARTED, "crm", "r-0");
        assert!(!path.exists(), "no target set: nothing written");
        count_runs_to("persist", MetricsTarget::File(path.clone()));
        count_run(RUNS_COMPLETED, "crm", "r-1");
        let text = std::fs::read_to_string(&path).expect("EMF lines written");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1);
        let root = check_emf(lines[0]);
        assert_eq!(root[RUNS_COMPLETED], json!(1));
        assert_eq!(root["function"], json!("persist"));
        assert_eq!(root["pipeline"], json!("crm"));
        assert_eq!(root["run_id"], json!("r-1"));
    }
}
