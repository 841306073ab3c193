//! The benchmark's results and their Markdown tables.

use std::fmt::Write as _;

use serde::Serialize;

/// One tool on one page.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// `customers` or `transactions`.
    pub shape: String,
    /// `clean` or `messy`.
    pub variant: String,
    /// Records in the page.
    pub records: u64,
    /// Tool label, e.g. `pyarrow read_json`.
    pub tool: String,
    /// Size of the input file the tool read, bytes.
    pub input_bytes: u64,
    /// What happened.
    pub outcome: Outcome,
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

    fn status(&self) -> String {
        match &self.outcome {
            Outcome::Ok { rows, .. } if *rows == self.records => "ok".into(),
            Outcome::Ok { rows, .. } => format!("WRONG: {rows} rows of {}", self.records),
            Outcome::Failed { error, .. } => format!("FAILED: {error}"),
        }
    }
}

/// One line for the progress log.
pub fn progress_line(result: &CaseResult) -> String {
    match result.seconds() {
        Some(seconds) => format!(
            "{:<20} {:>8.3} s {:>10.0} records/s {:>7.1} MB/s  peak {}",
            result.tool,
            seconds,
            result.records as f64 / seconds,
            result.mb() / seconds,
            rss_mb(result.peak_rss_kb())
        ),
        None => format!("{:<20} {}", result.tool, result.status()),
    }
}

fn rss_mb(kb: Option<u64>) -> String {
    kb.map_or_else(|| "-".into(), |kb| format!("{:.0} MB", kb as f64 / 1024.0))
}

fn cell(text: &str) -> String {
    let text = text.replace('|', "\\|");
    if text.chars().count() > 110 { format!("{}…", text.chars().take(110).collect::<String>()) } else { text }
}

/// The results table and the comparison against the targets.
pub fn markdown(results: &[CaseResult], settings: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Persist benchmark: JSON -> Parquet\n");
    let _ = writeln!(out, "{}. {settings}\n", machine());
    let _ = writeln!(
        out,
        "Seconds: reading the input through writing the Parquet file, in the tool's own process (not the \
         interpreter start-up or imports). Peak RSS: the process's VmHWM. MB are 10^6 bytes of input.\n"
    );
    let _ = writeln!(
        out,
        "| page | records | input MB | tool | result | seconds | records/s | MB/s | peak RSS | Parquet MB |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---|---:|---:|---:|---:|---:|");
    for r in results {
        let (seconds, per_second, mb_per_second, parquet) = match (&r.outcome, r.seconds()) {
            (Outcome::Ok { output_bytes, .. }, Some(s)) => (
                format!("{s:.3}"),
                format!("{:.0}", r.records as f64 / s),
                format!("{:.1}", r.mb() / s),
                format!("{:.1}", *output_bytes as f64 / 1e6),
            ),
            _ => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {seconds} | {per_second} | {mb_per_second} | {} | {parquet} |",
            r.page(),
            r.records,
            r.mb(),
            r.tool,
            cell(&r.status()),
            rss_mb(r.peak_rss_kb()),
        );
    }
    let _ = writeln!(out, "\n## Against the targets\n");
    let _ = writeln!(
        out,
        "Speed is tributary's records/s (NDJSON) over the peer's; RSS is tributary's peak over \
         read_json's. Targets: ≥ 2× read_json, ≥ 10× from_pylist, RSS ≤ 1/3 of read_json's at 500k.\n"
    );
    let _ = writeln!(out, "| page | records | × read_json | × from_pylist | RSS / read_json's |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let ours = results.iter().filter(|r| r.tool == crate::cases::Tool::Tributary.label());
    for r in ours {
        let peer = |tool: crate::cases::Tool| {
            results.iter().find(|p| p.tool == tool.label() && p.page() == r.page() && p.records == r.records)
        };
        let read_json = peer(crate::cases::Tool::ReadJson);
        let from_pylist = peer(crate::cases::Tool::FromPylist);
        let speed = |other: Option<&CaseResult>| match (r.seconds(), other.and_then(CaseResult::seconds)) {
            (Some(ours), Some(theirs)) => format!("{:.2}×", theirs / ours),
            (None, _) => "tributary failed".into(),
            (_, None) => "peer failed".into(),
        };
        let rss = match (
            r.peak_rss_kb(),
            read_json.and_then(CaseResult::seconds),
            read_json.and_then(CaseResult::peak_rss_kb),
        ) {
            (Some(ours), Some(_), Some(theirs)) if theirs > 0 => format!("{:.2}", ours as f64 / theirs as f64),
            _ => "-".into(),
        };
        let _ =
            writeln!(out, "| {} | {} | {} | {} | {rss} |", r.page(), r.records, speed(read_json), speed(from_pylist));
    }
    out
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
    format!("{}, {cpu}, {cores} cores{load}", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(tool: &str, outcome: Outcome) -> CaseResult {
        CaseResult {
            shape: "customers".into(),
            variant: "messy".into(),
            records: 1000,
            tool: tool.into(),
            input_bytes: 2_000_000,
            outcome,
        }
    }

    #[test]
    fn the_tables_compare_tributary_with_each_peer_and_show_failures() {
        let ok = |seconds, kb| Outcome::Ok {
            rows: 1000,
            seconds,
            process_seconds: seconds + 0.1,
            peak_rss_kb: Some(kb),
            output_bytes: 10_000,
        };
        let results = [
            case("tributary", ok(0.5, 10_240)),
            case("pyarrow read_json", ok(1.0, 40_960)),
            case("json + from_pylist", Outcome::Failed { error: "ArrowInvalid: a | b".into(), peak_rss_kb: None }),
        ];
        let text = markdown(&results, "settings");
        assert!(
            text.contains("| customers messy | 1000 | 2.0 | tributary | ok | 0.500 | 2000 | 4.0 | 10 MB | 0.0 |"),
            "{text}"
        );
        assert!(text.contains("FAILED: ArrowInvalid: a \\| b"), "{text}");
        assert!(text.contains("| customers messy | 1000 | 2.00× | peer failed | 0.25 |"), "{text}");
    }
}
