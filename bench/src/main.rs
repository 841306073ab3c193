//! `persist-bench`: Persist's JSON -> Parquet converter against its peers
//! (pyarrow, DuckDB, Polars), on the same generated pages, in the same run.
//!
//! `persist-bench run` generates the pages (customers and transactions,
//! clean and messy, 1k/50k/500k records), then runs every case in its own
//! process, on all cores and pinned to one — our converter through
//! `persist-bench run-one`, the peers through `bench/peer.py` — so each
//! case's peak RSS is its own, and checks every Parquet file written
//! against its page (`bench/check.py`). It prints a Markdown table and
//! writes it, with the raw results as JSON, to the output folder. See
//! `docs/persist-bench.md`.

mod cases;
mod check;
mod pages;
mod report;
mod wide;
mod writer_cost;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use contracts::{PayloadFormat, PersistTarget};
use persist::page::PageSource;

use crate::cases::ChildReport;

/// Persist's benchmark: JSON -> Parquet throughput, peak RSS and
/// exactness, against pyarrow, DuckDB and Polars on the same pages.
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
    /// One record of 20k to 200k keys per page: Persist's time per key at
    /// each width (linear in the keys: flat).
    Wide(wide::WideOptions),
    /// What arrow-rs's Parquet writer costs per top-level column of a file
    /// Persist wrote (zstd level 1 and uncompressed): the writer's part of
    /// the profile, by column.
    WriterCost(writer_cost::WriterCostOptions),
    /// Convert one page with Persist's converter and print one JSON line
    /// (rows, seconds, peak RSS); used by `run`, one process per case.
    RunOne {
        /// The page (NDJSON or a JSON array; the layout is detected).
        #[arg(long)]
        input: PathBuf,
        /// Where to write the Parquet file.
        #[arg(long)]
        output: PathBuf,
        /// Infer the page's schema first, untimed, and convert with it as
        /// the dataset's schema: the steady state of a daily pipeline,
        /// where a page that fits is written in one pass.
        #[arg(long)]
        known_schema: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(options) => finish(cases::run(&options)),
        Command::Wide(options) => finish(wide::run(&options)),
        Command::WriterCost(options) => finish(writer_cost::run(&options)),
        Command::RunOne { input, output, known_schema } => {
            let report = match convert(&input, &output, known_schema) {
                Ok((rows, seconds)) => ChildReport::success(rows, seconds),
                Err(err) => ChildReport::failure(&format!("{err:#}")),
            };
            println!("{}", serde_json::to_string(&report).unwrap_or_else(|_| "{}".into()));
            if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
    }
}

/// The exit code of a `run` or `wide` command, its error printed.
fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("persist-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs Persist's whole-page converter from `input` to a Parquet file at
/// `output`, returning the rows written and the seconds it took (with
/// `known_schema`, the untimed inference of the dataset's schema first).
fn convert(input: &Path, output: &Path, known_schema: bool) -> anyhow::Result<(u64, f64)> {
    let source = PageSource::File(input.to_path_buf());
    let target = PersistTarget::new("bench");
    let lake = if known_schema {
        Some(
            persist::infer_page(&source, &PayloadFormat::default(), &target, None)
                .map_err(|err| anyhow::anyhow!("{err}"))?,
        )
    } else {
        None
    };
    let started = Instant::now();
    // Written beside `output` and renamed into place, as the peers write
    // their file: no copy.
    let stats = persist::convert_to_file(&source, &PayloadFormat::default(), &target, lake.as_ref(), output)
        // The converter's own message (its source chain repeats it).
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    Ok((stats.rows_written, started.elapsed().as_secs_f64()))
}
