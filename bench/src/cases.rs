//! The benchmark run: generate the pages, run each case in its own process,
//! collect what each process reports about itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

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
    /// Python with pyarrow (default: `$TRIBUTARY_PYTHON`, else `python3`).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The Python peer script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/peer.py"))]
    pub peer: PathBuf,
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
    /// Runs of each case (each in a fresh process); the table shows the
    /// median run by time, which damps other work on a shared machine.
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
}

impl Tool {
    /// Every tool, in table order.
    pub const ALL: [Tool; 5] =
        [Tool::Tributary, Tool::TributaryArray, Tool::TributaryKnown, Tool::ReadJson, Tool::FromPylist];

    /// Name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Tool::Tributary => "tributary",
            Tool::TributaryArray => "tributary (array)",
            Tool::TributaryKnown => "tributary (schema known)",
            Tool::ReadJson => "pyarrow read_json",
            Tool::FromPylist => "json + from_pylist",
        }
    }

    fn reads_ndjson(self) -> bool {
        matches!(self, Tool::Tributary | Tool::TributaryKnown | Tool::ReadJson)
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
    let me = std::env::current_exe().context("locating the persist-bench binary")?;
    let temp = tempfile::tempdir().context("creating a temporary folder")?;
    let work = options.work.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let target = contracts::PersistTarget::new("bench");
    let settings = PeerSettings {
        python,
        script: options.peer.clone(),
        row_group_rows: target.files.row_group_rows,
        zstd_level: persist::WriterConfig::default().zstd_level,
    };
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
                for tool in Tool::ALL {
                    let input = if tool.reads_ndjson() { &files.ndjson } else { &files.array };
                    let output = work.join(format!(
                        "{}-{}.parquet",
                        page.stem(),
                        tool.label().replace([' ', '(', ')', '+'], "")
                    ));
                    let mut runs = Vec::new();
                    for _ in 0..options.repeat {
                        runs.push(run_case(&me, &settings, page, tool, input, &output)?);
                    }
                    let result = median(runs);
                    eprintln!("persist-bench:   {}", report::progress_line(&result));
                    results.push(result);
                    let _ = std::fs::remove_file(&output);
                }
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
        format!("Median of {} runs per case", options.repeat)
    };
    let markdown = report::markdown(&results, &format!("{} {runs}.", settings.describe()));
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

/// How the Python peers are run, and the writer settings every tool uses.
struct PeerSettings {
    python: PathBuf,
    script: PathBuf,
    row_group_rows: u32,
    zstd_level: i32,
}

impl PeerSettings {
    fn describe(&self) -> String {
        format!(
            "Parquet: zstd level {}, row groups of {} rows, for every tool. Python: {}.",
            self.zstd_level,
            self.row_group_rows,
            self.python.display()
        )
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
    tool: Tool,
    input: &Path,
    output: &Path,
) -> anyhow::Result<CaseResult> {
    let mut command = match tool {
        Tool::Tributary | Tool::TributaryArray | Tool::TributaryKnown => {
            let mut command = Command::new(me);
            command.arg("run-one").arg("--input").arg(input).arg("--output").arg(output);
            if tool == Tool::TributaryKnown {
                command.arg("--known-schema");
            }
            command
        }
        Tool::ReadJson | Tool::FromPylist => {
            let mut command = Command::new(&settings.python);
            let peer = if tool == Tool::ReadJson { "read_json" } else { "from_pylist" };
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
        tool: tool.label().to_string(),
        input_bytes,
        outcome,
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
            tool: "tributary".into(),
            input_bytes: 1,
            outcome,
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
