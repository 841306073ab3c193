//! `persist-bench wide`: one record with many keys (20k to 200k by
//! default), to show that Persist's cost per key stays flat as a record
//! widens (issue 24: it was quadratic, 100k keys took a minute).
//!
//! Each page is NDJSON: the wide record (`{"field_000000": 0, …}`, about
//! 22 bytes a key), then one ordinary record (`{"id": 1}`). With the
//! default `MAX_COLUMNS` (1,000) the wide record is quarantined (its keys
//! alone pass the cap) and the ordinary one persisted, so every size runs
//! the same path: screen, infer, evolve, cap, write. Each size runs in its
//! own process (`persist-bench run-one`); the table gives the median
//! seconds, microseconds per key, and that per-key time over the smallest
//! size's: near 1.0 at every size is linear, a quadratic cost doubles it
//! with each doubling of the keys.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::cases::ChildReport;

/// Options of `persist-bench wide`.
#[derive(Debug, clap::Args)]
pub struct WideOptions {
    /// Keys of the wide record, one page per count.
    #[arg(long, value_delimiter = ',', default_values_t = [20_000u64, 50_000, 100_000, 200_000])]
    pub keys: Vec<u64>,
    /// Runs of each size (each in a fresh process); the median is shown.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub repeat: u32,
    /// Where the pages are written (default: a temporary folder, removed
    /// at the end); pages written here are kept.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// Where the table goes (`wide.md`).
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
}

/// One size's median run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WideResult {
    /// Keys of the wide record.
    keys: u64,
    /// Bytes of the page.
    bytes: u64,
    /// Median seconds of the conversion (inside the process).
    seconds: f64,
    /// Rows written (1: the ordinary record; the wide one is quarantined).
    rows: u64,
    /// Peak RSS of the median run, KiB.
    peak_rss_kb: Option<u64>,
}

/// The page of `keys` keys: the wide record's line, then `{"id": 1}`.
pub fn wide_page(keys: u64) -> String {
    let mut page = String::with_capacity(usize::try_from(keys).unwrap_or(0).saturating_mul(24) + 16);
    page.push('{');
    for key in 0..keys {
        if key > 0 {
            page.push_str(", ");
        }
        let _ = write!(page, "\"field_{key:06}\": {key}");
    }
    page.push_str("}\n{\"id\": 1}\n");
    page
}

/// Runs every size and prints (and writes) the table.
///
/// # Errors
/// A page that cannot be written, a process that cannot be started or
/// that reports a failure.
pub fn run(options: &WideOptions) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("locating the persist-bench binary")?;
    let temp = tempfile::tempdir().context("creating a temporary folder")?;
    let work = options.work.clone().unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut results = Vec::new();
    for &keys in &options.keys {
        let input = work.join(format!("wide-{keys}.ndjson"));
        let page = wide_page(keys);
        std::fs::write(&input, &page).with_context(|| format!("writing {}", input.display()))?;
        let mut runs = Vec::new();
        for _ in 0..options.repeat {
            runs.push(run_one(&me, &input, &work.join(format!("wide-{keys}.parquet")))?);
        }
        runs.sort_by(|a, b| a.seconds.unwrap_or(f64::INFINITY).total_cmp(&b.seconds.unwrap_or(f64::INFINITY)));
        let median = runs.swap_remove(runs.len() / 2);
        let result = WideResult {
            keys,
            bytes: page.len() as u64,
            seconds: median.seconds.unwrap_or(f64::NAN),
            rows: median.rows.unwrap_or(0),
            peak_rss_kb: median.peak_rss_kb,
        };
        eprintln!("persist-bench: {keys} keys: {:.3} s, {} rows written", result.seconds, result.rows);
        results.push(result);
    }
    let markdown = markdown(&results, options.repeat);
    print!("{markdown}");
    std::fs::create_dir_all(&options.out).with_context(|| format!("creating {}", options.out.display()))?;
    let path = options.out.join("wide.md");
    std::fs::write(&path, &markdown).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("persist-bench: wrote {}", path.display());
    Ok(())
}

/// Converts `input` in a child `run-one` process; its report, which must
/// say it succeeded.
fn run_one(me: &Path, input: &Path, output: &Path) -> anyhow::Result<ChildReport> {
    let mut command = Command::new(me);
    command.arg("run-one").arg("--input").arg(input).arg("--output").arg(output);
    let finished = command.output().with_context(|| format!("starting {command:?}"))?;
    let stdout = String::from_utf8_lossy(&finished.stdout);
    let report: ChildReport = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .with_context(|| format!("{} exited with {} without a report", input.display(), finished.status))?;
    if !report.ok {
        anyhow::bail!("{}: {}", input.display(), report.error.unwrap_or_default());
    }
    Ok(report)
}

/// The table: keys, page MB, seconds, µs per key, per-key time over the
/// first size's, rows written, peak RSS.
fn markdown(results: &[WideResult], repeat: u32) -> String {
    let per_key = |r: &WideResult| r.seconds * 1e6 / r.keys.max(1) as f64;
    let first = results.first().map_or(f64::NAN, per_key);
    let mut out = format!(
        "One record of N keys, then one ordinary record (NDJSON); median of {repeat} runs, each in its own \
         process.\n\n| keys | page MB | seconds | µs per key | per key / first | rows written | peak RSS MB |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in results {
        let rss = r.peak_rss_kb.map_or_else(|| "-".to_string(), |kb| format!("{:.0}", kb as f64 / 1024.0));
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.3} | {:.2} | {:.2} | {} | {rss} |",
            r.keys,
            r.bytes as f64 / 1e6,
            r.seconds,
            per_key(r),
            per_key(r) / first,
            r.rows
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wide_page_is_one_record_of_n_distinct_keys_then_an_ordinary_one() {
        let page = wide_page(1_000);
        let lines: Vec<&str> = page.lines().collect();
        assert_eq!(lines.len(), 2);
        let wide: serde_json::Map<String, serde_json::Value> = serde_json::from_str(lines[0]).expect("a JSON object");
        assert_eq!(wide.len(), 1_000, "every key distinct");
        assert_eq!(wide["field_000999"], 999);
        assert_eq!(lines[1], r#"{"id": 1}"#);
    }

    #[test]
    fn the_table_shows_time_per_key_relative_to_the_first_size() {
        let result = |keys, seconds| WideResult { keys, bytes: keys * 22, seconds, rows: 1, peak_rss_kb: Some(2048) };
        let table = markdown(&[result(10_000, 0.01), result(20_000, 0.04)], 3);
        assert!(table.contains("| 10000 | 0.22 | 0.010 | 1.00 | 1.00 | 1 | 2 |"), "{table}");
        assert!(table.contains("| 20000 | 0.44 | 0.040 | 2.00 | 2.00 | 1 | 2 |"), "{table}");
    }
}
