//! The benchmark's results and their Markdown tables: every case, then the
//! comparison with issue 28's targets.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cases::{Cores, Tool};
use crate::check::Exactness;

/// One tool on one page.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// `customers` or `transactions`.
    pub shape: String,
    /// `clean` or `messy`.
    pub variant: String,
    /// Records in the page.
    pub records: u64,
    /// All cores, or pinned to one.
    pub cores: Cores,
    /// Tool label, e.g. `pyarrow read_json`.
    pub tool: String,
    /// Size of the input file the tool read, bytes.
    pub input_bytes: u64,
    /// What happened.
    pub outcome: Outcome,
    /// What the Parquet file holds of the page (`bench/check.py`); none
    /// when the tool failed.
    pub exactness: Option<Exactness>,
}

/// How a case ended.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The Parquet file was written.
    Ok {
        /// Rows in the Parquet file (read from its footer).
        rows: u64,
        /// Conversion time (input read to Parquet written), seconds.
        seconds: f64,
        /// The whole process, start-up and imports included, seconds.
        process_seconds: f64,
        /// Peak RSS of the process (VmHWM), KiB.
        peak_rss_kb: Option<u64>,
        /// Size of the Parquet file, bytes.
        output_bytes: u64,
    },
    /// The tool failed (expected for the peers on messy pages).
    Failed {
        /// First line of its error.
        error: String,
        /// Peak RSS of the process until it failed, KiB, when known.
        peak_rss_kb: Option<u64>,
    },
}

impl CaseResult {
    fn page(&self) -> String {
        format!("{} {}", self.shape, self.variant)
    }

    fn mb(&self) -> f64 {
        self.input_bytes as f64 / 1e6
    }

    /// Conversion seconds when the tool wrote every record.
    fn seconds(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Ok { rows, seconds, .. } if rows == self.records => Some(seconds),
            _ => None,
        }
    }

    fn peak_rss_kb(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Ok { peak_rss_kb, .. } | Outcome::Failed { peak_rss_kb, .. } => peak_rss_kb,
        }
    }

    /// The output cell: the exactness verdict, or `FAILED: <error>`.
    fn status(&self) -> String {
        match (&self.outcome, &self.exactness) {
            (Outcome::Failed { error, .. }, _) => format!("FAILED: {error}"),
            (Outcome::Ok { .. }, Some(exactness)) => exactness.summary(),
            (Outcome::Ok { rows, .. }, None) if *rows == self.records => "not checked".into(),
            (Outcome::Ok { rows, .. }, None) => format!("rows {rows} of {}", self.records),
        }
    }

    fn is(&self, tool: Tool) -> bool {
        self.tool == tool.label()
    }

    /// The same page (shape, variant, size) on the same cores.
    fn beside(&self, other: &CaseResult) -> bool {
        self.shape == other.shape
            && self.variant == other.variant
            && self.records == other.records
            && self.cores == other.cores
    }
}

/// `tool`'s result beside `of` (same page and cores).
fn find<'a>(results: &'a [CaseResult], of: &CaseResult, tool: Tool) -> Option<&'a CaseResult> {
    results.iter().find(|r| r.is(tool) && r.beside(of))
}

/// One line for the progress log.
pub fn progress_line(result: &CaseResult) -> String {
    let name = format!("{:<26} {:<4}", result.tool, result.cores.label());
    match result.seconds() {
        Some(seconds) => format!(
            "{name} {:>8.3} s {:>10.0} records/s {:>7.1} MB/s  peak {}",
            seconds,
            result.records as f64 / seconds,
            result.mb() / seconds,
            rss_mb(result.peak_rss_kb())
        ),
        None => format!("{name} {}", result.status()),
    }
}

fn rss_mb(kb: Option<u64>) -> String {
    kb.map_or_else(|| "-".into(), |kb| format!("{:.0} MB", kb as f64 / 1024.0))
}

fn cell(text: &str) -> String {
    let text = text.replace('|', "\\|");
    if text.chars().count() > 160 { format!("{}…", text.chars().take(160).collect::<String>()) } else { text }
}

/// The results table and the comparison against issue 28's targets.
pub fn markdown(results: &[CaseResult], settings: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Persist benchmark: JSON -> Parquet\n");
    let _ = writeln!(out, "{}. {settings}\n", machine());
    let _ = writeln!(
        out,
        "Seconds: reading the input through the Parquet file written, in the tool's own process (not the \
         interpreter start-up or imports). Peak RSS: the process's VmHWM. MB are 10^6 bytes of input. \
         ÷ tributary: the tool's seconds over `tributary`'s on the same page and cores (below 1: the tool is \
         faster). Output: what the Parquet file holds of the page, read back by `bench/check.py`: rows, the \
         page's fields kept as columns, and sampled records value for value.\n"
    );
    let _ = writeln!(
        out,
        "| page | records | input MB | cores | tool | seconds | MB/s | records/s | peak RSS | Parquet MB \
         | ÷ tributary | output |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|");
    for r in results {
        let (seconds, mb_per_second, per_second, parquet) = match (&r.outcome, r.seconds()) {
            (Outcome::Ok { output_bytes, .. }, Some(s)) => (
                format!("{s:.3}"),
                format!("{:.1}", r.mb() / s),
                format!("{:.0}", r.records as f64 / s),
                format!("{:.1}", *output_bytes as f64 / 1e6),
            ),
            _ => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let ratio = match (r.seconds(), find(results, r, Tool::Tributary).and_then(CaseResult::seconds)) {
            (Some(theirs), Some(ours)) if ours > 0.0 => format!("{:.2}", theirs / ours),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {seconds} | {mb_per_second} | {per_second} | {} | {parquet} | {ratio} | {} |",
            r.page(),
            r.records,
            r.mb(),
            r.cores.label(),
            r.tool,
            rss_mb(r.peak_rss_kb()),
            cell(&r.status()),
        );
    }
    out.push_str(&targets(results));
    out
}

/// The page size issue 28's targets are set at.
const TARGET_RECORDS: u64 = 500_000;
/// The smaller size whose peak RSS the target size's must stay level with.
const FLAT_FROM_RECORDS: u64 = 50_000;
/// "Flat": the peak at `TARGET_RECORDS` at most this multiple of the peak
/// at `FLAT_FROM_RECORDS`.
const FLAT_AT_MOST: f64 = 1.25;
/// Peak RSS allowed for any page of `TARGET_RECORDS` records, MiB.
const MAX_PEAK_MB: f64 = 80.0;

/// A throughput target: `ours` at least `at_least` times the fastest of
/// `peers` on the same page, on `cores`.
struct SpeedTarget {
    what: &'static str,
    cores: Cores,
    ours: Tool,
    peers: &'static [Tool],
    at_least: f64,
}

const SPEED_TARGETS: [SpeedTarget; 4] = [
    SpeedTarget {
        what: "1 core, first page: ≥ 1.5× DuckDB",
        cores: Cores::One,
        ours: Tool::Tributary,
        peers: &[Tool::DuckDbOneThread, Tool::DuckDbAllThreads],
        at_least: 1.5,
    },
    SpeedTarget {
        what: "1 core, first page: ≥ 2× pyarrow read_json",
        cores: Cores::One,
        ours: Tool::Tributary,
        peers: &[Tool::ReadJson],
        at_least: 2.0,
    },
    SpeedTarget {
        what: "1 core, schema known: ≥ 2× DuckDB",
        cores: Cores::One,
        ours: Tool::TributaryKnown,
        peers: &[Tool::DuckDbOneThread, Tool::DuckDbAllThreads],
        at_least: 2.0,
    },
    SpeedTarget {
        what: "all cores, first page: ahead of DuckDB all threads (≥ 1×)",
        cores: Cores::All,
        ours: Tool::Tributary,
        peers: &[Tool::DuckDbAllThreads],
        at_least: 1.0,
    },
];

/// The second table: each of issue 28's targets, per page, met or not,
/// with the figures.
fn targets(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let largest = results.iter().map(|r| r.records).max().unwrap_or(0);
    let at = if results.iter().any(|r| r.records == TARGET_RECORDS) { TARGET_RECORDS } else { largest };
    let _ = writeln!(out, "\n## Against the targets (issue 28)\n");
    let _ = writeln!(
        out,
        "Throughput: the peer's seconds over tributary's on the same page and cores (2.00× = tributary twice as \
         fast); against DuckDB on 1 core, the faster of its two rows. A peer that failed leaves its targets n/a. \
         Peak RSS: Persist's highest over its three rows and the cores run; flat: the {} peak at most {FLAT_AT_MOST}× \
         the {} one.",
        size(TARGET_RECORDS),
        size(FLAT_FROM_RECORDS)
    );
    if at != TARGET_RECORDS {
        let _ = writeln!(
            out,
            "\nThe targets are set at {}-record pages; this run's largest are {}: the rows below apply them there, \
             as a reading only.",
            size(TARGET_RECORDS),
            size(at)
        );
    }
    let _ = writeln!(out, "\n| target | page | figures | |\n|---|---|---|---|");
    let pages = pages_at(results, at);
    for target in &SPEED_TARGETS {
        for &(shape, variant) in &pages {
            let (figures, verdict) = speed_target(results, target, shape, variant, at);
            let _ = writeln!(out, "| {} | {shape} {variant} {} | {figures} | {verdict} |", target.what, size(at));
        }
    }
    for &(shape, variant) in &pages {
        let (figures, verdict) = exactness_target(results, shape, variant, at);
        let _ = writeln!(
            out,
            "| no record, field or value lost | {shape} {variant} {} | {figures} | {verdict} |",
            size(at)
        );
    }
    for &(shape, variant) in &pages {
        let (figures, verdict) = match persist_peak(results, shape, variant, at) {
            Some((kb, tool, cores)) => {
                let mb = kb as f64 / 1024.0;
                (format!("{mb:.0} MB ({tool}, {})", on_cores(cores)), met(mb <= MAX_PEAK_MB))
            }
            None => ("no Persist row succeeded".into(), "not met".into()),
        };
        let _ =
            writeln!(out, "| peak RSS ≤ {MAX_PEAK_MB} MB | {shape} {variant} {} | {figures} | {verdict} |", size(at));
    }
    for &(shape, variant) in &pages {
        let (figures, verdict) = match (
            persist_peak(results, shape, variant, FLAT_FROM_RECORDS),
            persist_peak(results, shape, variant, TARGET_RECORDS),
        ) {
            (Some((from, ..)), Some((to, ..))) if from > 0 => {
                let growth = to as f64 / from as f64;
                (
                    format!(
                        "{}: {}, {}: {} ({growth:.2}×)",
                        size(FLAT_FROM_RECORDS),
                        rss_mb(Some(from)),
                        size(TARGET_RECORDS),
                        rss_mb(Some(to))
                    ),
                    met(growth <= FLAT_AT_MOST),
                )
            }
            _ => (
                format!("needs the {} and {} pages", size(FLAT_FROM_RECORDS), size(TARGET_RECORDS)),
                "not measured".into(),
            ),
        };
        let _ = writeln!(
            out,
            "| peak RSS flat from {} to {} | {shape} {variant} | {figures} | {verdict} |",
            size(FLAT_FROM_RECORDS),
            size(TARGET_RECORDS)
        );
    }
    out
}

/// `all cores` or `1 core`.
fn on_cores(cores: Cores) -> &'static str {
    match cores {
        Cores::All => "all cores",
        Cores::One => "1 core",
    }
}

/// `1k`, `50k`, `500k`, or the count.
fn size(records: u64) -> String {
    if records >= 1000 && records.is_multiple_of(1000) { format!("{}k", records / 1000) } else { records.to_string() }
}

fn met(yes: bool) -> String {
    if yes { "met".into() } else { "**not met**".into() }
}

/// The pages (shape, variant) run at `records`, in the results' order.
fn pages_at(results: &[CaseResult], records: u64) -> Vec<(&str, &str)> {
    let mut pages: Vec<(&str, &str)> = Vec::new();
    for r in results.iter().filter(|r| r.records == records) {
        if !pages.contains(&(r.shape.as_str(), r.variant.as_str())) {
            pages.push((r.shape.as_str(), r.variant.as_str()));
        }
    }
    pages
}

fn speed_target(
    results: &[CaseResult],
    target: &SpeedTarget,
    shape: &str,
    variant: &str,
    records: u64,
) -> (String, String) {
    let on_page = |tool: Tool| {
        results.iter().find(|r| {
            r.is(tool) && r.shape == shape && r.variant == variant && r.records == records && r.cores == target.cores
        })
    };
    let Some(ours) = on_page(target.ours) else {
        return (format!("not run on {}", on_cores(target.cores)), "not measured".into());
    };
    let Some(our_seconds) = ours.seconds() else {
        return (format!("{} {}", ours.tool, ours.status()), "**not met**".into());
    };
    let peers: Vec<&CaseResult> = target.peers.iter().filter_map(|&tool| on_page(tool)).collect();
    let fastest = peers.iter().filter_map(|p| p.seconds().map(|s| (s, *p))).min_by(|a, b| a.0.total_cmp(&b.0));
    match fastest {
        Some((seconds, peer)) => {
            let multiple = seconds / our_seconds;
            (
                format!("{} {our_seconds:.3} s, {} {seconds:.3} s: {multiple:.2}×", ours.tool, peer.tool),
                met(multiple >= target.at_least),
            )
        }
        None if peers.is_empty() => ("the peer was not run".into(), "not measured".into()),
        None => {
            let failed = peers.iter().map(|p| p.tool.as_str()).collect::<Vec<_>>().join(" and ");
            (format!("{} {our_seconds:.3} s; {failed} failed", ours.tool), "n/a (peer failed)".into())
        }
    }
}

/// Whether every Persist row on a page wrote an exact file, with how many
/// of the peers' rows did.
fn exactness_target(results: &[CaseResult], shape: &str, variant: &str, records: u64) -> (String, String) {
    let on_page = || results.iter().filter(move |r| r.shape == shape && r.variant == variant && r.records == records);
    let exact = |r: &CaseResult| r.seconds().is_some() && r.exactness.as_ref().is_some_and(Exactness::is_exact);
    let (ours, peers): (Vec<&CaseResult>, Vec<&CaseResult>) = on_page().partition(|r| is_persist(r));
    let ours_exact = ours.iter().filter(|r| exact(r)).count();
    let peers_exact = peers.iter().filter(|r| exact(r)).count();
    (
        format!(
            "tributary rows exact: {ours_exact} of {}; peer rows exact: {peers_exact} of {}",
            ours.len(),
            peers.len()
        ),
        met(!ours.is_empty() && ours_exact == ours.len()),
    )
}

fn is_persist(result: &CaseResult) -> bool {
    [Tool::Tributary, Tool::TributaryArray, Tool::TributaryKnown].iter().any(|&tool| result.is(tool))
}

/// Persist's highest peak RSS (KiB) on a page over its rows and cores, with
/// the row and cores that reached it.
fn persist_peak(results: &[CaseResult], shape: &str, variant: &str, records: u64) -> Option<(u64, String, Cores)> {
    results
        .iter()
        .filter(|r| r.shape == shape && r.variant == variant && r.records == records)
        .filter(|r| is_persist(r))
        .filter(|r| r.seconds().is_some())
        .filter_map(|r| r.peak_rss_kb().map(|kb| (kb, r.tool.clone(), r.cores)))
        .max_by_key(|(kb, ..)| *kb)
}

/// CPU model, core count and date, for the table's header.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    // Other work on the machine skews wall-clock figures: say how busy it was.
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| {
            text.split_whitespace().next().map(|one_minute| format!(", load average {one_minute} at the end"))
        })
        .unwrap_or_default();
    format!("{}, {cpu}, {cores} cores (nproc){load}", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(tool: Tool, records: u64, cores: Cores, outcome: Outcome) -> CaseResult {
        CaseResult {
            shape: "customers".into(),
            variant: "messy".into(),
            records,
            cores,
            tool: tool.label().into(),
            input_bytes: 2_000 * records,
            outcome,
            exactness: Some(Exactness { rows: Some(records), records, ..Exactness::default() }),
        }
    }

    fn ok(records: u64, seconds: f64, kb: u64) -> Outcome {
        Outcome::Ok {
            rows: records,
            seconds,
            process_seconds: seconds + 0.1,
            peak_rss_kb: Some(kb),
            output_bytes: 10_000,
        }
    }

    #[test]
    fn the_table_gives_each_tools_time_over_tributarys_and_what_its_file_holds() {
        let mut lossy = case(Tool::DuckDbAllThreads, 1000, Cores::All, ok(1000, 0.25, 40_960));
        lossy.exactness = Some(Exactness {
            rows: Some(1000),
            records: 1000,
            dropped: vec!["churn_score".into()],
            changed: vec!["tags (text)".into()],
            ..Exactness::default()
        });
        let results = [
            case(Tool::Tributary, 1000, Cores::All, ok(1000, 0.5, 10_240)),
            lossy,
            case(
                Tool::ReadJson,
                1000,
                Cores::All,
                Outcome::Failed { error: "ArrowInvalid: a | b".into(), peak_rss_kb: None },
            ),
        ];
        let text = markdown(&results, "settings");
        assert!(
            text.contains(
                "| customers messy | 1000 | 2.0 | all | tributary | 0.500 | 4.0 | 2000 | 10 MB | 0.0 | 1.00 | exact |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| all | duckdb all threads | 0.250 | 8.0 | 4000 | 40 MB | 0.0 | 0.50 | dropped fields [churn_score]; \
                 changed values in [tags (text)] |"
            ),
            "{text}"
        );
        assert!(text.contains("FAILED: ArrowInvalid: a \\| b"), "{text}");
        assert!(text.contains("this run's largest are 1k"), "{text}");
    }

    #[test]
    fn the_targets_are_read_at_500k_on_one_core_against_the_fastest_duckdb() {
        let (small, big) = (50_000, 500_000);
        let results = [
            case(Tool::Tributary, small, Cores::One, ok(small, 0.1, 40 * 1024)),
            case(Tool::Tributary, big, Cores::One, ok(big, 1.0, 60 * 1024)),
            case(Tool::TributaryKnown, big, Cores::One, ok(big, 0.5, 70 * 1024)),
            case(Tool::DuckDbOneThread, big, Cores::One, ok(big, 1.2, 300 * 1024)),
            case(Tool::DuckDbAllThreads, big, Cores::One, ok(big, 1.4, 300 * 1024)),
            case(
                Tool::ReadJson,
                big,
                Cores::One,
                Outcome::Failed { error: "ArrowInvalid: x".into(), peak_rss_kb: None },
            ),
            case(Tool::Tributary, big, Cores::All, ok(big, 0.6, 62 * 1024)),
            case(Tool::DuckDbAllThreads, big, Cores::All, ok(big, 0.9, 300 * 1024)),
        ];
        let text = targets(&results);
        let row = |what: &str| {
            text.lines()
                .find(|line| line.starts_with(&format!("| {what}")))
                .unwrap_or_else(|| panic!("{what} in {text}"))
                .to_string()
        };
        assert_eq!(
            row("1 core, first page: ≥ 1.5× DuckDB"),
            "| 1 core, first page: ≥ 1.5× DuckDB | customers messy 500k | tributary 1.000 s, duckdb 1 thread 1.200 s: \
             1.20× | **not met** |"
        );
        assert!(
            row("1 core, first page: ≥ 2× pyarrow")
                .ends_with("| tributary 1.000 s; pyarrow read_json failed | n/a (peer failed) |"),
            "{text}"
        );
        assert!(row("1 core, schema known").contains("2.40× | met |"), "{text}");
        assert!(row("all cores").contains("1.50× | met |"), "{text}");
        assert!(row("peak RSS ≤ 80").contains("| 70 MB (tributary (schema known), 1 core) | met |"), "{text}");
        assert!(row("peak RSS flat").contains("50k: 40 MB, 500k: 70 MB (1.75×) | **not met** |"), "{text}");
        assert!(!text.contains("largest are"), "{text}");
        assert!(row("no record").contains("tributary rows exact: 3 of 3; peer rows exact: 3 of 4 | met |"), "{text}");
    }
}
