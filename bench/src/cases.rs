//! The benchmark run: generate the pages, run each case in its own process
//! (on all cores, and pinned to one), collect what each process reports
//! about itself, and check every Parquet file written against its page.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::check::Checker;
use crate::pages::{PageSpec, Shape, Variant};
use crate::report::{self, CaseResult, Outcome};

/// Options of `persist-bench run`.
#[derive(Debug, clap::Args)]
pub struct RunOptions {
    /// Only the 1k and 50k pages (a fast check); default also 500k.
    #[arg(long)]
    pub quick: bool,
    /// Page sizes to run instead, in records, e.g. `--records 1000,200000`.
    #[arg(long, value_delimiter = ',', conflicts_with = "quick")]
    pub records: Vec<u64>,
    /// Python with pyarrow, DuckDB and Polars (default:
    /// `$TRIBUTARY_PYTHON`, else `python3`).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The Python peer script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/peer.py"))]
    pub peer: PathBuf,
    /// The exactness checker (pyarrow), run on every Parquet file written.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/check.py"))]
    pub check: PathBuf,
    /// Run every case on all the machine's cores (`all`), pinned to one
    /// core (`1`: `taskset -c 0`), or both, in that order.
    #[arg(long, value_delimiter = ',', default_values_t = [Cores::All, Cores::One])]
    pub cores: Vec<Cores>,
    /// Where the tables go (`persist.md`, `persist.json`).
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Where the pages are generated (default: a temporary folder, removed
    /// at the end). Pages written here are kept, for profiling one case
    /// with `persist-bench run-one`.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Seed of the page generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Runs of each case (each in a fresh process), in rounds: each round
    /// runs every tool once on the page, so a slow spell of a shared
    /// machine falls on all tools alike. The table shows each case's
    /// median run by time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub repeat: u32,
}

/// What a case's process prints on its last stdout line (both the Rust
/// `run-one` and `peer.py`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ChildReport {
    /// Whether the conversion succeeded.
    pub ok: bool,
    /// Rows written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Seconds from reading the input to the Parquet file written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The process's peak resident set (VmHWM), KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_kb: Option<u64>,
    /// First line of the error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ChildReport {
    /// A successful conversion, with this process's peak RSS.
    pub fn success(rows: u64, seconds: f64) -> Self {
        Self { ok: true, rows: Some(rows), seconds: Some(seconds), peak_rss_kb: peak_rss_kb(), error: None }
    }

    /// A failed conversion: the first line of `error`.
    pub fn failure(error: &str) -> Self {
        Self { ok: false, error: Some(first_line(error)), peak_rss_kb: peak_rss_kb(), ..Self::default() }
    }
}

/// This process's peak resident set size (VmHWM in `/proc/self/status`), KiB.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn first_line(text: &str) -> String {
    text.trim().lines().next().unwrap_or("").to_string()
}

/// The cores a case may run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Cores {
    /// Every core of the machine (as many threads as each tool takes).
    #[value(name = "all")]
    #[serde(rename = "all")]
    All,
    /// The process pinned to core 0 (`taskset -c 0`), as the Persist
    /// Lambda has about one vCPU; a tool's threads then share that core.
    #[value(name = "1")]
    #[serde(rename = "1")]
    One,
}

impl Cores {
    /// Name in the tables: `all` or `1`.
    pub fn label(self) -> &'static str {
        match self {
            Cores::All => "all",
            Cores::One => "1",
        }
    }
}

impl std::fmt::Display for Cores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// The tools compared on every page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// Persist's converter on the NDJSON page.
    Tributary,
    /// Persist's converter on the JSON array page.
    TributaryArray,
    /// Persist's converter on the NDJSON page, the dataset's schema known
    /// (a daily pipeline's later pages: one pass when the page fits).
    TributaryKnown,
    /// `pyarrow.json.read_json` on the NDJSON page + `write_table`.
    ReadJson,
    /// `json.load` on the array + `Table.from_pylist` + `write_table`.
    FromPylist,
    /// DuckDB `read_json_auto` on the NDJSON page + `COPY ... TO` Parquet,
    /// `SET threads = 1`.
    DuckDbOneThread,
    /// The same with DuckDB's default threads (one per core it sees).
    DuckDbAllThreads,
    /// Polars `read_ndjson` + `write_parquet`.
    Polars,
}

impl Tool {
    /// Every tool, in table order.
    pub const ALL: [Tool; 8] = [
        Tool::Tributary,
        Tool::TributaryArray,
        Tool::TributaryKnown,
        Tool::ReadJson,
        Tool::FromPylist,
        Tool::DuckDbOneThread,
        Tool::DuckDbAllThreads,
        Tool::Polars,
    ];

    /// Name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Tool::Tributary => "tributary",
            Tool::TributaryArray => "tributary (array)",
            Tool::TributaryKnown => "tributary (schema known)",
            Tool::ReadJson => "pyarrow read_json",
            Tool::FromPylist => "json + from_pylist",
            Tool::DuckDbOneThread => "duckdb 1 thread",
            Tool::DuckDbAllThreads => "duckdb all threads",
            Tool::Polars => "polars read_ndjson",
        }
    }

    /// `bench/peer.py`'s name for a Python peer; `None` for Persist's rows.
    fn peer(self) -> Option<&'static str> {
        match self {
            Tool::Tributary | Tool::TributaryArray | Tool::TributaryKnown => None,
            Tool::ReadJson => Some("read_json"),
            Tool::FromPylist => Some("from_pylist"),
            Tool::DuckDbOneThread => Some("duckdb_1"),
            Tool::DuckDbAllThreads => Some("duckdb_all"),
            Tool::Polars => Some("polars"),
        }
    }

    fn reads_ndjson(self) -> bool {
        !matches!(self, Tool::TributaryArray | Tool::FromPylist)
    }
}

/// Runs the whole benchmark and writes the tables.
///
/// # Errors
/// When a page cannot be generated, a process cannot be started, or the
/// tables cannot be written. A case that fails is a result, not an error.
pub fn run(options: &RunOptions) -> anyhow::Result<()> {
    let python = options
        .python
        .clone()
        .or_else(|| std::env::var_os("TRIBUTARY_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let temp = tempfile::tempdir().context("creating a temporary folder")?;
    let work = options.work.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let me = own_copy(&work)?;
    let target = contracts::PersistTarget::new("bench");
    let settings = PeerSettings {
        python: python.clone(),
        script: options.peer.clone(),
        row_group_rows: target.files.row_group_rows,
        zstd_level: persist::WriterConfig::default().zstd_level,
    };
    let checker = Checker { python, script: options.check.clone() };
    let cores = distinct(&options.cores);
    if cores.contains(&Cores::One) {
        require_taskset()?;
    }
    let sizes: &[u64] = match (options.quick, options.records.as_slice()) {
        (true, _) => &[1_000, 50_000],
        (false, []) => &[1_000, 50_000, 500_000],
        (false, sizes) => sizes,
    };
    let mut results = Vec::new();
    for &records in sizes {
        for shape in [Shape::Customers, Shape::Transactions] {
            for variant in [Variant::Clean, Variant::Messy] {
                let page = PageSpec { shape, variant, records };
                eprintln!("persist-bench: generating {}", page.stem());
                let files = page.write(&work, options.seed)?;
                // The files to check (with their result's index), once all the page's cases ran.
                let mut written = Vec::new();
                for &on in &cores {
                    // Rounds, not one tool's runs back to back: in each round
                    // every tool runs once, so a slow spell of a shared
                    // machine falls on every tool alike, not on one.
                    let mut runs: Vec<Vec<CaseResult>> = Tool::ALL.iter().map(|_| Vec::new()).collect();
                    for _ in 0..options.repeat {
                        for (tool, runs) in Tool::ALL.into_iter().zip(&mut runs) {
                            let input = if tool.reads_ndjson() { &files.ndjson } else { &files.array };
                            runs.push(run_case(
                                &me,
                                &settings,
                                page,
                                on,
                                tool,
                                input,
                                &case_output(&work, page, on, tool),
                            )?);
                        }
                    }
                    for (tool, runs) in Tool::ALL.into_iter().zip(runs) {
                        let output = case_output(&work, page, on, tool);
                        let result = median(runs);
                        eprintln!("persist-bench:   {}", report::progress_line(&result));
                        if matches!(result.outcome, Outcome::Ok { .. }) {
                            written.push((results.len(), output));
                        } else {
                            let _ = std::fs::remove_file(&output);
                        }
                        results.push(result);
                    }
                }
                check_outputs(&checker, page, &files.ndjson, &written, &mut results);
                if options.work.is_none() {
                    let _ = std::fs::remove_file(&files.ndjson);
                    let _ = std::fs::remove_file(&files.array);
                }
            }
        }
    }
    let runs = if options.repeat == 1 {
        "One run per case".to_string()
    } else {
        format!("Median of {} runs per case, in rounds (each round runs every tool once)", options.repeat)
    };
    let markdown = report::markdown(&results, &format!("{} {runs}.", settings.describe(&cores)));
    print!("{markdown}");
    std::fs::create_dir_all(&options.out).with_context(|| format!("creating {}", options.out.display()))?;
    let md_path = options.out.join("persist.md");
    std::fs::write(&md_path, &markdown).with_context(|| format!("writing {}", md_path.display()))?;
    let json_path = options.out.join("persist.json");
    let json = serde_json::to_string_pretty(&results).context("encoding the results")?;
    std::fs::write(&json_path, json).with_context(|| format!("writing {}", json_path.display()))?;
    eprintln!("persist-bench: wrote {} and {}", md_path.display(), json_path.display());
    Ok(())
}

/// Where a case writes its Parquet file (the last round's run is checked).
fn case_output(work: &Path, page: PageSpec, on: Cores, tool: Tool) -> PathBuf {
    work.join(format!("{}-{}-{}cores.parquet", page.stem(), tool.label().replace([' ', '(', ')', '+'], ""), on.label()))
}

/// How the Python peers are run, and the writer settings every tool uses.
struct PeerSettings {
    python: PathBuf,
    script: PathBuf,
    row_group_rows: u32,
    zstd_level: i32,
}

impl PeerSettings {
    fn describe(&self, cores: &[Cores]) -> String {
        let cores = cores.iter().map(|c| c.label()).collect::<Vec<_>>().join(" and ");
        format!(
            "Cores: {cores} (1: pinned with `taskset -c 0`). Parquet: zstd level {}, row groups of {} rows, for every \
             tool that has the setting. Python: {} ({}).",
            self.zstd_level,
            self.row_group_rows,
            self.python.display(),
            self.versions()
        )
    }

    /// The peers' versions, as `bench/peer.py versions` reports them.
    fn versions(&self) -> String {
        let reported = Command::new(&self.python).arg(&self.script).arg("versions").output();
        let line = reported.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string()).unwrap_or_default();
        match serde_json::from_str::<std::collections::BTreeMap<String, Option<String>>>(&line) {
            Ok(versions) => versions
                .iter()
                .map(|(tool, version)| format!("{tool} {}", version.as_deref().unwrap_or("missing")))
                .collect::<Vec<_>>()
                .join(", "),
            Err(_) => "versions unknown".into(),
        }
    }
}

/// A copy of this binary in `work`, which runs Persist's cases: with a
/// target dir shared with others, a rebuild during the run would otherwise
/// change the converter half-way (or remove the file the cases run).
fn own_copy(work: &Path) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("locating the persist-bench binary")?;
    let copy = work.join("persist-bench-run");
    std::fs::copy(&me, &copy).with_context(|| format!("copying {} to {}", me.display(), copy.display()))?;
    Ok(copy)
}

/// `wanted` without repeats, in its order.
fn distinct(wanted: &[Cores]) -> Vec<Cores> {
    let mut cores: Vec<Cores> = Vec::new();
    for &c in wanted {
        if !cores.contains(&c) {
            cores.push(c);
        }
    }
    cores
}

/// Fails, saying what to install, unless `taskset` (util-linux) runs.
fn require_taskset() -> anyhow::Result<()> {
    match Command::new("taskset").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => anyhow::bail!("--cores 1 pins each case with `taskset -c 0`, which is not on PATH (util-linux)"),
    }
}

/// Checks the page's Parquet files (`written`: the index of its result
/// and the path), attaches each verdict to its result and removes the files.
fn check_outputs(
    checker: &Checker,
    page: PageSpec,
    ndjson: &Path,
    written: &[(usize, PathBuf)],
    results: &mut [CaseResult],
) {
    eprintln!("persist-bench:   checking {} Parquet files against {}", written.len(), page.stem());
    let paths: Vec<PathBuf> = written.iter().map(|(_, path)| path.clone()).collect();
    for ((index, path), verdict) in written.iter().zip(checker.check(ndjson, page.records, &paths)) {
        if let Some(result) = results.get_mut(*index) {
            eprintln!("persist-bench:   {:<26} {:<4} {}", result.tool, result.cores.label(), verdict.summary());
            result.exactness = Some(verdict);
        }
        let _ = std::fs::remove_file(path);
    }
}

/// The run of median time; a failed run if any failed (the first).
fn median(mut runs: Vec<CaseResult>) -> CaseResult {
    if let Some(failed) = runs.iter().position(|run| !matches!(run.outcome, Outcome::Ok { .. })) {
        return runs.swap_remove(failed);
    }
    let seconds = |run: &CaseResult| match run.outcome {
        Outcome::Ok { seconds, .. } => seconds,
        Outcome::Failed { .. } => f64::INFINITY,
    };
    runs.sort_by(|a, b| seconds(a).total_cmp(&seconds(b)));
    let middle = runs.len() / 2;
    runs.swap_remove(middle)
}

/// Runs one case in its own process and reads its report.
fn run_case(
    me: &Path,
    settings: &PeerSettings,
    page: PageSpec,
    cores: Cores,
    tool: Tool,
    input: &Path,
    output: &Path,
) -> anyhow::Result<CaseResult> {
    let command = match tool.peer() {
        None => {
            let mut command = Command::new(me);
            command.arg("run-one").arg("--input").arg(input).arg("--output").arg(output);
            if tool == Tool::TributaryKnown {
                command.arg("--known-schema");
            }
            command
        }
        Some(peer) => {
            let mut command = Command::new(&settings.python);
            command
                .arg(&settings.script)
                .arg(peer)
                .arg(input)
                .arg(output)
                .arg(settings.row_group_rows.to_string())
                .arg(settings.zstd_level.to_string());
            command
        }
    };
    let mut command = match cores {
        Cores::All => command,
        Cores::One => {
            let mut pinned = Command::new("taskset");
            pinned.arg("-c").arg("0").arg(command.get_program()).args(command.get_args());
            pinned
        }
    };
    let input_bytes = std::fs::metadata(input).with_context(|| format!("reading {}", input.display()))?.len();
    let started = Instant::now();
    let finished = command.output().with_context(|| format!("starting {command:?}"))?;
    let process_seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&finished.stdout);
    let child: Option<ChildReport> = stdout.lines().rev().find_map(|line| serde_json::from_str(line).ok());
    let outcome = match child {
        Some(ChildReport { ok: true, seconds: Some(seconds), peak_rss_kb, .. }) => match parquet_rows(output) {
            Ok(rows) => Outcome::Ok {
                rows,
                seconds,
                process_seconds,
                peak_rss_kb,
                output_bytes: std::fs::metadata(output).map(|m| m.len()).unwrap_or(0),
            },
            Err(err) => Outcome::Failed { error: format!("wrote an unreadable Parquet file: {err:#}"), peak_rss_kb },
        },
        Some(ChildReport { error: Some(error), peak_rss_kb, .. }) => Outcome::Failed { error, peak_rss_kb },
        _ => Outcome::Failed {
            error: format!(
                "exited with {} without a report: {}",
                finished.status,
                first_line(&String::from_utf8_lossy(&finished.stderr))
            ),
            peak_rss_kb: None,
        },
    };
    Ok(CaseResult {
        shape: page.shape.to_string(),
        variant: page.variant.to_string(),
        records: page.records,
        cores,
        tool: tool.label().to_string(),
        input_bytes,
        outcome,
        exactness: None,
    })
}

/// Rows in the Parquet file at `path`, from its footer: the count is checked
/// on the file, not taken from the tool's word.
fn parquet_rows(path: &Path) -> anyhow::Result<u64> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let reader =
        SerializedFileReader::new(file).with_context(|| format!("reading the footer of {}", path.display()))?;
    Ok(u64::try_from(reader.metadata().file_metadata().num_rows())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seconds: Option<f64>) -> CaseResult {
        let outcome = match seconds {
            Some(seconds) => {
                Outcome::Ok { rows: 1, seconds, process_seconds: seconds, peak_rss_kb: None, output_bytes: 1 }
            }
            None => Outcome::Failed { error: "boom".into(), peak_rss_kb: None },
        };
        CaseResult {
            shape: "customers".into(),
            variant: "clean".into(),
            records: 1,
            cores: Cores::All,
            tool: "tributary".into(),
            input_bytes: 1,
            outcome,
            exactness: None,
        }
    }

    fn seconds_of(result: &CaseResult) -> Option<f64> {
        match result.outcome {
            Outcome::Ok { seconds, .. } => Some(seconds),
            Outcome::Failed { .. } => None,
        }
    }

    #[test]
    fn the_median_run_stands_for_the_case_and_a_failed_run_fails_it() {
        assert_eq!(seconds_of(&median(vec![run(Some(3.0)), run(Some(1.0)), run(Some(2.0))])), Some(2.0));
        assert_eq!(seconds_of(&median(vec![run(Some(3.0))])), Some(3.0));
        assert_eq!(seconds_of(&median(vec![run(Some(1.0)), run(None), run(Some(2.0))])), None);
    }
}
