//! `persist-bench`: Persist's JSON -> Parquet converter against the pyarrow
//! peers, on the same generated pages, in the same run.
//!
//! `persist-bench run` generates the pages (customers and transactions,
//! clean and messy, 1k/50k/500k records), then runs every case in its own
//! process — our converter through `persist-bench run-one`, the Python peers
//! through `bench/peer.py` — so each case's peak RSS is its own. It prints a
//! Markdown table and writes it, with the raw results as JSON, to the output
//! folder. See `docs/persist-bench.md`.

mod cases;
mod pages;
mod report;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use persist::page::{PageSource, convert_to_writer};
use shared::contracts::{PayloadFormat, PersistTarget};

use crate::cases::ChildReport;

/// Persist's benchmark: JSON -> Parquet throughput and peak RSS, against
/// pyarrow on the same pages.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate the pages, run every case, print and write the tables.
    Run(cases::RunOptions),
    /// Convert one page with Persist's converter and print one JSON line
    /// (rows, seconds, peak RSS); used by `run`, one process per case.
    RunOne {
        /// The page (NDJSON or a JSON array; the layout is detected).
        #[arg(long)]
        input: PathBuf,
        /// Where to write the Parquet file.
        #[arg(long)]
        output: PathBuf,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(options) => match cases::run(&options) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("persist-bench: {err:#}");
                ExitCode::FAILURE
            }
        },
        Command::RunOne { input, output } => {
            let started = Instant::now();
            let report = match convert(&input, &output) {
                Ok(rows) => ChildReport::success(rows, started.elapsed().as_secs_f64()),
                Err(err) => ChildReport::failure(&format!("{err:#}")),
            };
            println!("{}", serde_json::to_string(&report).unwrap_or_else(|_| "{}".into()));
            if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
    }
}

/// Runs Persist's whole-page converter from `input` to a Parquet file at
/// `output`, returning the rows written.
fn convert(input: &Path, output: &Path) -> anyhow::Result<u64> {
    let file = std::fs::File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    let stats = convert_to_writer(
        &PageSource::File(input.to_path_buf()),
        &PayloadFormat::default(),
        &PersistTarget::new("bench"),
        &mut writer,
    )
    // The converter's own message (its source chain repeats it).
    .map_err(|err| anyhow::anyhow!("{err}"))?;
    writer.flush().with_context(|| format!("writing {}", output.display()))?;
    Ok(stats.rows_written)
}
