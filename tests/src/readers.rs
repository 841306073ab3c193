//! The independent-reader harness, `tests/readers/readers.py`, from Rust:
//! one dataset of a lake read by pyspark (mergeSchema, and the published
//! schema), DuckDB (with and without `union_by_name`) and pyarrow, every
//! row rebuilt into its source record and compared with the records
//! expected. The Python tools come from `scripts/python-tools.sh install`
//! (pyspark also needs Java 17+); the interpreter is `TRIBUTARY_PYTHON`, or
//! the repo's `.venv/bin/python`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

/// The Python interpreter the readers run with: `TRIBUTARY_PYTHON`, else
/// the repo's `.venv/bin/python`.
pub fn python() -> PathBuf {
    std::env::var_os("TRIBUTARY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"))
}

/// The Python interpreter with DuckDB 1.4.4 and its iceberg extension (the
/// Iceberg tests read the lake's tables with it):
/// `TRIBUTARY_DUCKDB_ICEBERG_PYTHON`, else the venv `scripts/python-tools.sh
/// install` makes for it, `.tools/duckdb-iceberg/bin/python`.
pub fn duckdb_iceberg_python() -> PathBuf {
    std::env::var_os("TRIBUTARY_DUCKDB_ICEBERG_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/duckdb-iceberg/bin/python"))
}

/// The harness script, `tests/readers/readers.py`.
pub fn harness() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("readers/readers.py")
}

/// What one reader made of the dataset (a value of the harness's JSON).
#[derive(Clone, Debug, Deserialize)]
pub struct ReaderResult {
    /// Rows read; `None` when the read failed or the reader was skipped.
    pub rows: Option<u64>,
    /// With expected records: as many rows as records, every row matching
    /// one. False for a skipped reader (see `skipped`).
    pub ok: bool,
    /// The first lines of the reader's error, when the read failed.
    pub error: Option<String>,
    /// Why the reader did not run (`spark_schema` without a published
    /// schema); a skipped reader is not a failure.
    #[serde(default)]
    pub skipped: Option<String>,
    /// The first five differences, readable (`record id=7: amount: read
    /// null, expected "n/a"`).
    #[serde(default)]
    pub mismatches: Vec<String>,
    /// Expected records no row matched.
    #[serde(default)]
    pub missing: u64,
    /// Rows that matched no expected record.
    #[serde(default)]
    pub unexpected: u64,
    /// What the comparison did not check, or columns outside the published
    /// schema.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The columns the reader saw, with its own type names.
    #[serde(default)]
    pub columns: BTreeMap<String, String>,
}

/// Every reader's result, by reader name (`spark_merge`, `spark_schema`,
/// `duckdb`, `duckdb_union`, `pyarrow`).
#[derive(Clone, Debug)]
pub struct ReaderReport {
    /// The results by reader name.
    pub readers: BTreeMap<String, ReaderResult>,
    /// The harness's JSON as it printed it.
    pub json: String,
}

impl ReaderReport {
    /// Panics, with the whole report, unless every reader that was not
    /// skipped is ok and read `expected_rows` rows.
    ///
    /// # Panics
    /// As said: a failed read, a mismatch, another row count.
    pub fn assert_all_read(&self, expected_rows: u64) {
        let failed: Vec<&str> = self
            .readers
            .iter()
            .filter(|(_, result)| result.skipped.is_none() && !(result.ok && result.rows == Some(expected_rows)))
            .map(|(name, _)| name.as_str())
            .collect();
        assert!(
            failed.is_empty() && !self.readers.is_empty(),
            "readers {failed:?} did not read the {expected_rows} expected rows:\n{self}"
        );
    }
}

impl fmt::Display for ReaderReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json)
    }
}

/// [`read_with_every_reader_lines`] with the expected records as values
/// (integers up to u64/i64 keep their digits; larger ones need raw lines).
///
/// # Panics
/// See [`read_with_every_reader_lines`].
pub fn read_with_every_reader(dataset_dir: &Path, schema: Option<&Path>, expected: &[Value]) -> ReaderReport {
    let lines: Vec<String> = expected.iter().map(Value::to_string).collect();
    read_with_every_reader_lines(dataset_dir, schema, &lines)
}

/// Runs the harness on `dataset_dir` (`<lake>/<dataset>`), with the
/// published Arrow schema when given (`<lake>/_schema/<dataset>.arrow`),
/// against the expected records, each a JSON object on one line as the
/// vendor sent it (so integers beyond u64 keep their digits).
///
/// # Panics
/// When a line holds a newline, the interpreter cannot run (install the
/// tools with `scripts/python-tools.sh install` or set `TRIBUTARY_PYTHON`),
/// or the harness fails without printing its report.
pub fn read_with_every_reader_lines(dataset_dir: &Path, schema: Option<&Path>, expected: &[String]) -> ReaderReport {
    let mut jsonl = tempfile::NamedTempFile::new().expect("a temp file for the expected records");
    for line in expected {
        assert!(!line.contains('\n'), "an expected record must be one line: {line}");
        writeln!(jsonl, "{line}").expect("write the expected records");
    }
    jsonl.flush().expect("flush the expected records");
    let python = python();
    let mut command = Command::new(&python);
    command.arg(harness()).arg("--dataset").arg(dataset_dir).arg("--expected").arg(jsonl.path());
    if let Some(schema) = schema {
        command.arg("--schema").arg(schema);
    }
    let output = command.output().unwrap_or_else(|err| {
        panic!("cannot run {} ({err}): run `scripts/python-tools.sh install` or set TRIBUTARY_PYTHON", python.display())
    });
    let json = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the readers harness failed (tools: `scripts/python-tools.sh install`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let readers = serde_json::from_str(&json).unwrap_or_else(|err| {
        panic!("the harness printed no report ({err}):\n{json}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    ReaderReport { readers, json }
}

/// Rows of `sql` over the lake directory `lake`, through the engine
/// `tributary query` uses (lakequery): the first result page (1,000 rows
/// at most), each row a JSON object.
///
/// # Panics
/// When the lake path cannot be resolved or the query does not succeed.
pub async fn query_lake(lake: &std::path::Path, sql: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    use tributary_core::ports::{Query, QueryEngine, QueryState};
    let engine = lakequery::LakeEngine::new(lake.canonicalize().expect("lake path"));
    let query = Query {
        sql: sql.into(),
        parameters: Vec::new(),
        database: "lake".into(),
        workgroup: None,
        output_location: None,
    };
    let id = engine.start(&query).await.expect("start");
    let state = engine.wait(&id, tokio::time::Instant::now()).await.expect("wait");
    assert_eq!(state, QueryState::Succeeded, "{sql}");
    engine.page(&id, None).await.expect("page").rows
}
