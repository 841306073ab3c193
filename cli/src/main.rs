//! `tributary`: run pipelines on one machine, the demo, schemas, validation.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::Timelike;
use clap::{Parser, Subcommand};

use contracts::spec::PipelineSpec;
use tributary::location::LakeLocation;
use tributary::runtime::{LocalOptions, LocalRuntime, RunSummary};
use tributary::{lake, vendor};

/// tributary: ingest vendor REST APIs into a Parquet data lake.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one pipeline to completion on this machine (local queues, the lake
    /// in a directory). Exit code 0 only when the run completed, no message
    /// ended in a DLQ, it was not truncated and not every record was
    /// quarantined.
    Run {
        /// Pipeline spec (YAML or JSON).
        spec: PathBuf,
        /// Lake directory (the bucket).
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// Batches per queue handled at once (1-64).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
        /// The scheduled time the run stands for (RFC 3339, e.g.
        /// 2026-11-29T06:00:00Z); default: now. The run id derives from it,
        /// so the same time is the same run: one that did not complete is
        /// completed, a completed one is not rewritten (a page with other
        /// records than it persisted fails, to the DLQ with an alert; use
        /// `replay` to re-derive it from its raw pages).
        #[arg(long, value_parser = parse_time, conflicts_with_all = ["from", "to"])]
        scheduled_at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        backfill: Backfill,
        /// Re-run completed runs of these times, replacing their rows in
        /// the dataset's Iceberg table in one `overwrite` snapshot per run
        /// (a backfill of bad days); a run that did not complete runs as
        /// usual. Refused for a Parquet dataset (no atomic replace).
        #[arg(long)]
        replace: bool,
        /// A stream spec (one with `source:`): read the Kafka topic from
        /// this JSON-lines file of records (the MSK event's record shape)
        /// instead of a broker. A Kinesis stream is read through the AWS
        /// SDK (build with `--features aws`; `AWS_ENDPOINT_URL` for moto).
        #[arg(long)]
        records: Option<PathBuf>,
        /// A stream spec: keep polling each shard at its tip (Ctrl-C stops);
        /// with --records, follow the file as `tail -f` does, reading the
        /// lines appended to it.
        #[arg(long)]
        follow: bool,
        /// A stream spec: a Kappa replay. The pipeline's stream files,
        /// runs and checkpoints are removed and every shard is read again
        /// from TRIM_HORIZON through the same code. An Iceberg dataset
        /// (`target.write: append`) changes in one `overwrite` snapshot
        /// replacing the pipeline's rows, once every shard is read whole.
        #[arg(long)]
        from_trim_horizon: bool,
    },
    /// Make a deployed stack's EventBridge Scheduler schedules match a folder
    /// of pipeline specs (`*.yaml`, `*.yml`, `*.json`; e.g. `pipelines/`):
    /// one run schedule per spec with a `schedule`, one freshness check per
    /// spec with a `freshness`, and schedules whose spec is gone deleted.
    /// Every spec is validated first: one invalid file stops it before any
    /// AWS call. Prints created / updated / unchanged / deleted per
    /// schedule; a second run changes nothing. Needs a build with `--features
    /// aws` and AWS credentials.
    DeploySchedules {
        /// Folder of pipeline specs.
        dir: PathBuf,
        /// CloudFormation stack of the deployment (its outputs name the
        /// functions, the schedule group, the scheduler role and DLQ).
        #[arg(long)]
        stack: String,
        /// Print the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Upload a stream spec (one with a `source` block) to a deployed stack's
    /// lake, at `_streams/_specs/<stream or topic>.json`, where the Persist
    /// Lambda finds it for each batch of that stream (docs/streams.md, On
    /// AWS). The spec is validated first. Prints created / updated /
    /// unchanged; a stream already feeding another pipeline is refused
    /// unless --replace. Needs a build with `--features aws` and AWS
    /// credentials.
    DeployStream {
        /// The stream spec (YAML or JSON).
        spec: PathBuf,
        /// CloudFormation stack of the deployment (its `LakeBucketName`
        /// output names the lake).
        #[arg(long)]
        stack: String,
        /// Print what would be written; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Replace another pipeline's spec for the same stream.
        #[arg(long)]
        replace: bool,
        /// Begin a Kappa replay of the pipeline (docs/streams.md, "Replay
        /// on AWS"): records the original windows an Iceberg dataset's
        /// replayed windows replace, one `overwrite` snapshot each, and
        /// forgets the stream's checkpoints; then create a new event source
        /// mapping at TRIM_HORIZON or AT_TIMESTAMP. Refused while a batch
        /// is in flight: disable the live mapping first.
        #[arg(long)]
        replay: bool,
    },
    /// Start runs of a pipeline on a deployed stack, now or for past times:
    /// sends run triggers to its orchestrator queue (`OrchestratorQueueUrl`
    /// output), which starts each like a scheduled run of that time (same run
    /// id, never a second run of it). A run that did not complete is
    /// completed; a completed run is never rewritten: a page holding the same
    /// records is a redelivery, a page whose records changed is dead-lettered
    /// with an alert (a backfill over completed days whose data changed is
    /// one alert per run; `tributary replay` re-derives runs from their raw
    /// pages; `--replace` re-runs them, replacing an Iceberg dataset's rows).
    /// Prints each run id.
    /// Needs a build with `--features aws`.
    Trigger {
        /// Pipeline spec (YAML or JSON).
        spec: PathBuf,
        /// CloudFormation stack of the deployment.
        #[arg(long)]
        stack: String,
        /// The scheduled time the run stands for (RFC 3339); default: now.
        #[arg(long, value_parser = parse_time, conflicts_with_all = ["from", "to"])]
        scheduled_at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        backfill: Backfill,
        /// Re-run completed runs of these times, replacing their rows in
        /// the dataset's Iceberg table (see `run --replace`).
        #[arg(long)]
        replace: bool,
    },
    /// Write a pipeline spec from what a vendor endpoint answers: its
    /// records, its paging (proved on page 2), the table Persist will make
    /// of them. A few calls, through Request's own caller and SSRF guard.
    /// Writes nothing when it cannot decide; each failure is one line.
    Init(tributary::init::command::InitArgs),
    /// Start the demo vendor API, run a paged, an Athena-driven and a simple
    /// pipeline against it, print the summaries and the first rows read back
    /// from Parquet; then a stream pipeline (a Kafka topic of orders from a
    /// file of records, one poison record among them) into its own dataset,
    /// printing what landed, what was quarantined and each partition's
    /// checkpoint. Run again, the stream lands nothing twice.
    Demo {
        /// Lake directory (the bucket).
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// The demo datasets' `target.table_format`: `parquet` (Hive-style
        /// folders) or `iceberg` (tables in the lake's local catalog,
        /// `_iceberg/`, which `tributary query` and the Athena-driven
        /// pipeline read as each table's current snapshot).
        #[arg(long, default_value = "parquet", value_parser = ["parquet", "iceberg"])]
        table_format: String,
    },
    /// Serve the demo vendor API until interrupted (for `tributary run
    /// examples/*.yaml`).
    Vendor {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: SocketAddr,
        /// Customers served by `/customers` (ids 1..=N), as many as the demo
        /// uses unless told (scripts/bench-run.sh serves 100000).
        #[arg(long, default_value_t = vendor::DemoData::default().customers)]
        customers: u32,
    },
    /// List recent runs in a lake with their state (complete, truncated,
    /// duplicated, failed, completing, incomplete, running), pages, records, dead letters, how many of
    /// them are resolved and what resolved them (how the run recovered),
    /// then why a duplicated run is one and how to recover each run with
    /// open dead letters; with
    /// `--stack`, also the subscriptions of the stack's operations and alerts
    /// topics, warning of one pending confirmation (SNS delivers nothing to
    /// it) and of a topic with no confirmed subscription, and the console
    /// link of the stack's CloudWatch dashboard.
    Status {
        /// The lake: a directory, or `s3://bucket[/prefix]` (feature `aws`).
        /// Default: the stack's lake bucket with `--stack`, else `lake`.
        #[arg(long)]
        lake: Option<LakeLocation>,
        /// A deployed stack (CloudFormation name; feature `aws`): its lake
        /// bucket is the default `--lake`.
        #[arg(long)]
        stack: Option<String>,
        /// Runs to show, newest first; then up to as many older runs that
        /// did not complete (failed, interrupted, incomplete), which need
        /// action however many runs came after them.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only this pipeline's runs, stream checkpoints and records behind
        /// (its `pipeline:` name); `--limit` counts its runs only.
        #[arg(long)]
        pipeline: Option<String>,
    },
    /// The dead letters Notify archived in the lake (`_dead_letters/`):
    /// list them, show one whole, or send them back where they failed.
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// The freshness check: alert (exit 1) when the spec's pipeline has no run
    /// of the day completed in the lake. Needs `freshness.deadline_utc` in the
    /// spec; run it at that time (cron, or the SAM stack's schedule on AWS).
    Freshness {
        /// Pipeline spec (YAML or JSON).
        spec: PathBuf,
        /// Lake directory.
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// The day to check (YYYY-MM-DD); default: today (UTC).
        #[arg(long)]
        date: Option<chrono::NaiveDate>,
    },
    /// Check a pipeline spec (REST, or a stream spec: one with `source:`); print it normalised.
    Validate {
        /// Pipeline spec (YAML or JSON).
        spec: PathBuf,
    },
    /// Re-drive a dataset's raw archived pages (`raw/<dataset>/dt=<date>/`)
    /// through Persist: same code, same keys. Exit code 0 only when every
    /// page was persisted again.
    ///
    /// With `--stack` (feature `aws`), the raw pages in the stack's bucket
    /// are sent to its persist queue instead: each completed run among them
    /// is reopened (its `_SUCCESS` marker, manifest and page receipts removed) and its
    /// pages re-sent, so the run completes, coalesces and is announced
    /// again; until then readers may see a replayed run's rows twice.
    Replay {
        /// The lake: a directory, or `s3://bucket[/prefix]` with `--stack`.
        /// Default: the stack's lake bucket with `--stack`, else `lake`.
        #[arg(long)]
        lake: Option<LakeLocation>,
        /// A deployed stack (feature `aws`): replay through its persist queue.
        #[arg(long)]
        stack: Option<String>,
        /// Dataset to replay.
        #[arg(long)]
        dataset: String,
        /// First `dt=` date replayed (YYYY-MM-DD, inclusive); default: the first.
        #[arg(long)]
        from: Option<chrono::NaiveDate>,
        /// Last `dt=` date replayed (YYYY-MM-DD, inclusive); default: the last.
        #[arg(long)]
        to: Option<chrono::NaiveDate>,
    },
    /// Compact an Iceberg dataset's table in the local lake (or, with
    /// `--stack`, in a deployed stack's Glue catalog): per partition,
    /// the data files under the target size are rewritten into files near
    /// it, in one `replace` snapshot (the same rows; `tributary.compaction`
    /// in its summary). With `--expire-older-than`, snapshots older than
    /// that are then expired (the current one and the `--retain-last`
    /// newest kept) and the files only they needed are deleted: the old
    /// snapshots can no longer be read (time travel) after that. Prints
    /// files before and after per partition, rows, the snapshot id and
    /// the files deleted.
    Compact {
        /// Lake directory.
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// Compact the table of a deployed stack instead (feature `aws`):
        /// its Glue database (`LakeDatabaseName`) and lake bucket
        /// (`LakeBucketName`), as Persist commits to them.
        #[arg(long)]
        stack: Option<String>,
        /// Dataset (an Iceberg table: `target.table_format: iceberg`).
        #[arg(long)]
        dataset: String,
        /// Target data file size in MiB (at least 1): files under it are
        /// packed into files near it.
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
        target_file_mb: u64,
        /// Expire snapshots older than this (`7d`, `12h`, `30m`, `0s`: all
        /// but the retained) after compacting.
        #[arg(long, value_parser = parse_age)]
        expire_older_than: Option<chrono::Duration>,
        /// Snapshots kept by expiry whatever their age, newest first (at
        /// least 1: the current one).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        retain_last: u64,
    },
    /// Run SQL over the lake's datasets with DataFusion (the local Athena
    /// stand-in's engine): each dataset is a table read whole with its
    /// published schema; an Iceberg dataset is its table's current snapshot
    /// (committed runs only). Prints one JSON object per row.
    /// With `--stack` (feature `aws`), the SQL runs on Athena in the
    /// stack's workgroup and Glue database instead.
    Query {
        /// The SQL (read-only: SELECT, SHOW, DESCRIBE, EXPLAIN).
        sql: String,
        /// Lake directory.
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// A deployed stack (feature `aws`): run the SQL on its Athena.
        #[arg(long)]
        stack: Option<String>,
        /// A value for the SQL's next `?` placeholder, in order (repeat
        /// it: `--param 5 --param BR`); bound as Athena's execution
        /// parameters are, as text typed by what it is compared with.
        #[arg(long = "param", value_name = "VALUE")]
        params: Vec<String>,
    },
    /// With `--dataset`: print a dataset's table schema, as the Arrow schema
    /// (also at `_schema/<dataset>.arrow`, for `pyarrow.dataset(...,
    /// schema=)`) and as the Glue `TableInput` registered on AWS. Without:
    /// write the JSON Schemas of the message contracts and their Markdown
    /// references (the book's reference chapters).
    Schema {
        /// Dataset whose table schema to print.
        #[arg(long)]
        dataset: Option<String>,
        /// Lake directory (with `--dataset`).
        #[arg(long, default_value = "lake")]
        lake: PathBuf,
        /// Bucket named in the Glue table's location (with `--dataset`);
        /// `local` is what the local catalog entries (`_catalog/`) use.
        #[arg(long, default_value = "local")]
        bucket: String,
        /// Output directory of the contracts' JSON Schemas.
        #[arg(long, default_value = "docs/contracts")]
        out: PathBuf,
    },
}

/// A backfill: every run a date range stands for.
#[derive(Debug, clap::Args)]
struct Backfill {
    /// First day of a backfill (YYYY-MM-DD, inclusive). One run per time the
    /// spec's `schedule` fires in the range (the dates read in the schedule's
    /// time zone; a `rate(...)` counts from this day at 00:00); a spec
    /// without a schedule: one run per day at 00:00 UTC.
    #[arg(long, requires = "to")]
    from: Option<chrono::NaiveDate>,
    /// Last day of a backfill (YYYY-MM-DD, inclusive).
    #[arg(long, requires = "from")]
    to: Option<chrono::NaiveDate>,
    /// Refuse a backfill of more runs than this.
    #[arg(long, default_value_t = tributary::pipelines::DEFAULT_MAX_RUNS)]
    max_runs: usize,
}

/// An ad-hoc run's time: now, to the millisecond, so two runs started in
/// one second get two run ids (`RunId::from_time`); a scheduled run's
/// time (`--scheduled-at`) stays the deterministic whole second.
fn ad_hoc_time() -> chrono::DateTime<chrono::Utc> {
    let now = chrono::Utc::now();
    // A whole millisecond, never .000 (which would read as a scheduled time).
    let millis = now.timestamp_subsec_millis().max(1);
    now.with_nanosecond(millis * 1_000_000).unwrap_or(now)
}

impl Backfill {
    /// The scheduled times to run: the range's, or `single` (default now).
    fn times(
        &self,
        spec: &PipelineSpec,
        single: Option<chrono::DateTime<chrono::Utc>>,
    ) -> anyhow::Result<Vec<chrono::DateTime<chrono::Utc>>> {
        match (self.from, self.to) {
            (Some(from), Some(to)) => Ok(tributary::pipelines::backfill_times(spec, from, to, self.max_runs)?),
            _ => Ok(vec![single.unwrap_or_else(ad_hoc_time)]),
        }
    }
}

#[derive(Debug, Subcommand)]
enum DlqAction {
    /// One line per archived dead letter, oldest first: message id, DLQ,
    /// function, pipeline, run, page, sent time, redrives, what resolved
    /// it (`-`: open), reason.
    List {
        #[command(flatten)]
        place: Place,
        #[command(flatten)]
        filters: Filters,
    },
    /// One dead letter whole, as JSON: body, attributes, reason, redrives.
    Show {
        /// Its message id (or archive key).
        id: String,
        #[command(flatten)]
        place: Place,
    },
    /// Send dead letters back to the queue they failed on (a failed
    /// trigger: to the Orchestrator's queue) and mark them redriven.
    /// Locally, the local runtime then drains every queue, as a run does,
    /// and the letters of each run that is then complete, with no new dead
    /// letter, are marked resolved. Letters already redriven or resolved
    /// are skipped unless `--again`.
    Redrive {
        #[command(flatten)]
        chosen: Chosen,
        /// Send letters already redriven (or resolved) once more.
        #[arg(long)]
        again: bool,
        /// Locally: also grant what this spec grants (its secret, hosts),
        /// for runs whose spec the lake does not keep (runs started before
        /// `tributary run` kept it); each run's kept spec is granted anyway.
        #[arg(long)]
        spec: Vec<PathBuf>,
    },
    /// Mark dead letters resolved (`tributary status` counts them apart
    /// from the open ones; a redrive skips them): by default only letters
    /// whose run is complete, as after a recovery on AWS, where the
    /// completion is not seen by the CLI. Locally, a redrive or a re-run
    /// that completes the run marks them itself.
    Resolve {
        #[command(flatten)]
        chosen: Chosen,
        /// Why, kept with each letter (e.g. "vendor fixed the record").
        #[arg(long)]
        note: Option<String>,
        /// Mark letters whose run is not complete (or names no run) too:
        /// their data is not in the lake.
        #[arg(long)]
        force: bool,
    },
}

/// Which dead letters a `dlq` command acts on.
#[derive(Debug, clap::Args)]
struct Filters {
    /// Only this DLQ (e.g. `persist-dlq`).
    #[arg(long)]
    dlq: Option<String>,
    /// Only letters of this pipeline.
    #[arg(long)]
    pipeline: Option<String>,
    /// Only letters of this run (its id, as `tributary status` shows it).
    #[arg(long)]
    run: Option<String>,
}

impl Filters {
    /// The selection of these filters and `ids`.
    fn select(self, ids: Vec<String>, again: bool) -> tributary::dlq::Selection {
        tributary::dlq::Selection { ids, dlq: self.dlq, pipeline: self.pipeline, run: self.run, again }
    }
}

/// The dead letters a `dlq redrive` or `dlq resolve` acts on.
#[derive(Debug, clap::Args)]
struct Chosen {
    /// Message ids (or archive keys); none: every letter the filters
    /// match, which needs `--all`.
    ids: Vec<String>,
    #[command(flatten)]
    place: Place,
    /// Every matching letter (without ids).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    filters: Filters,
}

impl Chosen {
    /// The lake and the selection; refused without ids or `--all` (`verb`:
    /// what the command does to them).
    fn select(self, verb: &str, again: bool) -> anyhow::Result<(Place, tributary::dlq::Selection)> {
        if self.ids.is_empty() && !self.all {
            anyhow::bail!("name the dead letters to {verb} (message ids, see `tributary dlq list`) or pass --all");
        }
        Ok((self.place, self.filters.select(self.ids, again)))
    }
}

/// Where the lake (and, on AWS, the queues) are.
#[derive(Debug, clap::Args)]
struct Place {
    /// The lake: a directory, or `s3://bucket[/prefix]` (feature `aws`).
    /// Default: the stack's lake bucket with `--stack`, else `lake`.
    #[arg(long)]
    lake: Option<LakeLocation>,
    /// A deployed stack (CloudFormation name; feature `aws`).
    #[arg(long)]
    stack: Option<String>,
}

/// The CLI's log lines unless `RUST_LOG` says otherwise: its own warnings
/// only. What fails is said once, by the command: an error as one `error:`
/// line, a run's failures in its summary (each dead letter's reason, its
/// alert). The functions running in-process and the AWS SDK log the same
/// failures on their way (each retry, each receive, the SDK's credential
/// chain), which read as the error twice or ten times over; `RUST_LOG=warn`
/// (or `info`) shows them when tracing a run. (A directive's target is a
/// prefix: `tributary` alone would take in `tributary_core` too.)
const CLI_LOGS: &str = "off,tributary=warn,tributary_core=off,tributary_contracts=off,tributary_iceberg=off";

/// A line to stderr that, unlike `eprintln!`, does not panic when stderr's
/// reader has gone (`2>&1 | head -1`): the message is lost, the exit code
/// stays the command's.
macro_rules! err_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // init reports what Request met itself, on one line.
    tributary_core::telemetry::init_cli(if matches!(cli.command, Command::Init(_)) { "off" } else { CLI_LOGS });
    // Worker threads with 8 MiB stacks, as a main thread has: deeply nested
    // vendor JSON is parsed and serialised recursively.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(8 << 20).build() {
        Ok(runtime) => runtime,
        Err(err) => {
            err_raw!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(execute(cli.command)) {
        Ok(code) => code,
        Err(err) if closed_stdout(&err) => ExitCode::SUCCESS,
        Err(err) => {
            err_raw!("error: {}{}", report(&err), next_step(&err).unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}

/// The next step after an error that comes from below the CLI and cannot
/// know it (the CLI's own errors say theirs), as the `error:` line's end.
fn next_step(err: &anyhow::Error) -> Option<&'static str> {
    use tributary_core::ports::PortError;
    err.chain().find_map(|cause| match cause.downcast_ref::<PortError>()? {
        PortError::NotFound { what: "dead letter", .. } => {
            Some(" (tributary dlq list shows the archived letters' ids)")
        }
        _ => None,
    })
}

/// `err` and its causes joined by `: `, as anyhow's `{:#}` does, but each
/// text once: our errors show their source's text in their own (and keep
/// the source), so a cause already said is not said again; anyhow's
/// context layers do not, so a cause below one of them still is.
/// `println!` that returns the write's error instead of panicking: a
/// closed stdout (`tributary schema ... | head`) ends the command quietly
/// ([`closed_stdout`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` as [`out!`] does `println!`.
macro_rules! out_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// Whether `err` is a write to a stdout whose reader has gone (`| head`):
/// not a failure of the command, which ends as the shell's other tools do.
fn closed_stdout(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn report(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

/// The local runtime's defaults for `lake`, with the Persist settings
/// that are set in the environment as the Lambda reads them (`ZSTD_LEVEL`,
/// `ROW_GROUP_ROWS`, `MAX_PAGE_BYTES`, `MAX_COLUMNS`).
fn local_options(lake: impl Into<PathBuf>) -> anyhow::Result<LocalOptions> {
    let mut options = LocalOptions::new(lake);
    options.persist =
        options.persist.with_env_limits(&tributary_core::env::LambdaEnv::from_env()).context("Persist's settings")?;
    Ok(options)
}

/// Waits for Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `kill`, systemd,
/// a container runtime or a CI job's timeout sends): the exit code a shell
/// reports for each, 128 + the signal (130, 143). A run stopped by SIGTERM
/// printed nothing and left `tributary status` showing it running (a
/// trial); both now print which run to finish and how.
///
/// # Errors
/// When the signal handlers cannot be installed.
async fn stop_signal() -> anyhow::Result<u8> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
        tokio::select! {
            interrupted = tokio::signal::ctrl_c() => {
                interrupted.context("waiting for Ctrl-C")?;
                Ok(130)
            }
            _ = term.recv() => Ok(143),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
        Ok(130)
    }
}

/// A spec's cautions ([`PipelineSpec::cautions`]) on stderr, one line each:
/// valid settings that lose records silently with some vendors.
fn print_cautions(spec: &PipelineSpec) {
    for caution in spec.cautions() {
        err_raw!("caution: {caution}");
    }
}

/// What `tributary run` prints when Ctrl-C stops it: the run it stopped
/// and the command that finishes it (the same scheduled time is the same
/// run: its persisted pages stay, the rest are requested).
///
/// In a backfill (`--from`/`--to`) it also says how many of the range's
/// runs had not started and the command that runs the rest of the range
/// (a trial's interrupted backfill named only the day it stopped in).
fn interrupted_message(
    run: Option<&tributary::runtime::InFlight>,
    rest: Option<&BackfillRest>,
    spec: &Path,
    lake: &Path,
) -> String {
    let Some(run) = run else { return "interrupted before a run started: nothing was requested".into() };
    let at = contracts::RunId::scheduled_at_text(run.scheduled_at);
    let mut text = format!(
        "interrupted: run {} of pipeline {} did not complete; the pages it persisted stay in the lake.\n\
         finish it (the same scheduled time is the same run; it completes it, storing nothing twice):\n  \
         tributary run {} --lake {} --scheduled-at {at}\n",
        run.run_id,
        run.pipeline,
        spec.display(),
        lake.display(),
    );
    if let Some(rest) = rest {
        let replace = if rest.replace { " --replace" } else { "" };
        let again = if rest.replace {
            "runs of that day before this one are fetched again"
        } else {
            "runs already complete start nothing"
        };
        text.push_str(&format!(
            "the backfill stopped at run {} of {}: {} run(s) after it did not start.\n\
             finish the backfill ({again}):\n  \
             tributary run {} --lake {} --from {} --to {}{replace}\n",
            rest.at + 1,
            rest.of,
            rest.of - rest.at - 1,
            spec.display(),
            lake.display(),
            rest.from,
            rest.to,
        ));
    }
    text.push_str(&format!("see it: tributary status --lake {}", lake.display()));
    text
}

/// Where an interrupted backfill stood: run `at` (from 0) of `of`, and the
/// `--from`/`--to` range that runs it and every run after it.
struct BackfillRest {
    at: usize,
    of: usize,
    from: chrono::NaiveDate,
    to: chrono::NaiveDate,
    replace: bool,
}

async fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run { spec, lake, records, follow, from_trim_horizon, scheduled_at, backfill, replace, .. }
            if tributary::stream::is_stream_spec(&spec) =>
        {
            // REST options on a stream spec would be ignored: say so rather
            // than run something else than asked (a trial finding).
            let rest_only = [
                ("--scheduled-at", scheduled_at.is_some()),
                ("--from/--to", backfill.from.is_some() || backfill.to.is_some()),
                ("--replace", replace),
            ];
            if let Some((flag, _)) = rest_only.iter().find(|(_, given)| *given) {
                anyhow::bail!(
                    "{flag} is for a REST pipeline spec; {} is a stream spec (a stream's history is replayed with \
                     --from-trim-horizon)",
                    spec.display()
                );
            }
            run_stream(&spec, &lake, records, follow, from_trim_horizon).await
        }
        Command::Run {
            spec: path,
            lake,
            concurrency,
            scheduled_at,
            backfill,
            replace,
            records,
            follow,
            from_trim_horizon,
        } => {
            // Stream options on a REST spec would be ignored: say so rather
            // than run something else than asked (a trial finding).
            let stream_only =
                [("--records", records.is_some()), ("--follow", follow), ("--from-trim-horizon", from_trim_horizon)];
            if let Some((flag, _)) = stream_only.iter().find(|(_, given)| *given) {
                anyhow::bail!(
                    "{flag} is for a stream spec (one with `source:`); {} is a REST pipeline spec",
                    path.display()
                );
            }
            let spec = load_spec(&path)?;
            print_cautions(&spec);
            if replace && spec.target.table_format != contracts::TableFormat::Iceberg {
                anyhow::bail!("--replace: {}", orchestrator::no_atomic_replace(&spec.target.dataset));
            }
            let ad_hoc = scheduled_at.is_none() && backfill.from.is_none();
            let times = backfill.times(&spec, scheduled_at)?;
            let mut options = local_options(&lake)?;
            options.concurrency = usize::from(concurrency);
            let runtime = LocalRuntime::new(options)?;
            let token = replace.then(rerun_token);
            let mut summaries = Vec::new();
            let count = times.len();
            for (at, time) in times.into_iter().enumerate() {
                let rest = backfill.to.filter(|_| count > 1).map(|to| BackfillRest {
                    at,
                    of: count,
                    from: tributary::pipelines::backfill_day(&spec, time),
                    to,
                    replace,
                });
                let run = async {
                    match (ad_hoc, token.as_deref()) {
                        (true, None) => runtime.run_ad_hoc(&spec, time).await,
                        (_, token) => runtime.run_replacing(&spec, time, token).await,
                    }
                };
                let summary = tokio::select! {
                    summary = run => summary?,
                    code = stop_signal() => {
                        let code = code?;
                        let message = interrupted_message(runtime.in_flight().as_ref(), rest.as_ref(), &path, &lake);
                        err_raw!("{message}");
                        return Ok(ExitCode::from(code));
                    }
                };
                print_summary(&summary)?;
                summaries.push(summary);
            }
            Ok(exit_code(&summaries))
        }
        Command::DeploySchedules { dir, stack, dry_run } => deploy_schedules(&dir, &stack, dry_run).await,
        Command::DeployStream { spec, stack, dry_run, replace, replay } => {
            deploy_stream(&spec, &stack, dry_run, replace, replay).await
        }
        Command::Trigger { spec: path, stack, scheduled_at, backfill, replace } => {
            let spec = load_spec(&path)?;
            let times = backfill.times(&spec, scheduled_at)?;
            trigger(&spec, &stack, &times, replace.then(rerun_token).as_deref()).await
        }
        Command::Init(args) => tributary::init::command::run(args).await,
        Command::Demo { lake, table_format } => demo(&lake, table_format == "iceberg").await,
        Command::Vendor { addr, customers } => {
            let data = vendor::DemoData { customers, ..vendor::DemoData::default() };
            let bound = vendor::spawn(addr, data)
                .await
                .with_context(|| format!("binding {addr} (another server there? pick a free port with --addr)"))?;
            out!(
                "demo vendor API on http://{bound} (GET /customers?offset=&limit=, /transactions, /customers/{{id}}/transactions, /events?cursor=&limit=&updated_since=, /secure/events, POST /oauth/token); Ctrl-C stops it"
            )?;
            tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { lake, stack, limit, pipeline } => {
            if let Some(name) = &pipeline
                && contracts::spec::check_name("pipeline", name).is_err()
            {
                anyhow::bail!(
                    "--pipeline {name:?}: a pipeline's name is 1-64 characters of a-z 0-9 _ -, starting with a letter \
                     or digit (its spec's `pipeline:`)"
                );
            }
            let place = match (&stack, &lake) {
                (Some(stack), _) => tributary::status::Place::Stack(stack.clone()),
                (None, lake) => {
                    tributary::status::Place::Lake(lake.as_ref().map_or("lake".into(), ToString::to_string))
                }
            };
            // A local lake's runs are held by `tributary run`'s locks there.
            let local_dir = match (&lake, &stack) {
                (Some(LakeLocation::Dir(dir)), _) => Some(dir.clone()),
                (None, None) => Some(std::path::PathBuf::from("lake")),
                _ => None,
            };
            let (store, handle) = open_lake(lake, stack.as_deref()).await?;
            let only = pipeline.as_deref();
            let mut runs = tributary::status::recent_runs(store.as_ref(), only, limit).await?;
            if let Some(dir) = &local_dir {
                tributary::status::mark_interrupted(&mut runs, dir);
            }
            let checkpoints = tributary::stream::checkpoints_table(store.as_ref(), only, chrono::Utc::now()).await?;
            // (`--limit 0` shows no run, and says nothing of there being none.)
            // A pipeline with no run is a failure, so that a mistyped name in
            // a script does not pass for an empty history.
            if let Some(name) = only
                && limit > 0
                && runs.is_empty()
                && checkpoints.is_empty()
            {
                err_raw!("{}", tributary::status::no_runs_of(store.as_ref(), name).await?.trim());
                return Ok(ExitCode::FAILURE);
            }
            out_raw!("{}", tributary::status::table(&runs))?;
            out_raw!("{checkpoints}")?;
            out_raw!("{}", tributary::stream::records_behind_table(store.as_ref(), only).await?)?;
            out_raw!("{}", tributary::status::recovery_hints(&runs, &place))?;
            if let Some(handle) = &handle {
                out_raw!("{}", subscriptions(handle).await?)?;
                out_raw!("{}", dashboard(handle))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Dlq { action } => dlq(action).await,
        Command::Freshness { spec, lake, date } => {
            // A mistyped lake must not read as "no run completed" (and an
            // alert), nor be created by the alert it would write.
            require_lake(&lake)?;
            if tributary::stream::is_stream_spec(&spec) {
                anyhow::bail!(
                    "{} is a stream spec: freshness checks a REST pipeline's runs of the day; a stream's lag and \
                     records behind are in `tributary status`",
                    spec.display()
                );
            }
            let spec = load_spec(&spec)?;
            let Some(freshness) = &spec.freshness else {
                anyhow::bail!(
                    "spec {} declares no freshness.deadline_utc: add `freshness: {{deadline_utc: \"07:30\"}}` \
                     (the time of day, UTC, by which a run should have completed)",
                    spec.pipeline
                );
            };
            let runtime = LocalRuntime::new(local_options(&lake)?)?;
            let check = notify::FreshnessCheck {
                pipeline: spec.pipeline.clone(),
                deadline_utc: freshness.deadline_utc.clone(),
            };
            let config = notify::NotifyConfig {
                alerts_topic: tributary_core::topology::ALERTS_TOPIC.into(),
                metrics: tributary_core::metrics::MetricsTarget::Off,
            };
            let deps = notify::FreshnessDeps {
                store: runtime.store().as_ref(),
                topics: runtime.broker().as_ref(),
                config: &config,
            };
            let date = date.unwrap_or_else(|| chrono::Utc::now().date_naive());
            match notify::check_freshness(&check, date, deps).await? {
                None => {
                    out!("{}: fresh (a run of {date} completed)", spec.pipeline)?;
                    Ok(ExitCode::SUCCESS)
                }
                Some(alert) => {
                    out!("ALERT: {}", alert.summary)?;
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        Command::Validate { spec } if tributary::stream::is_stream_spec(&spec) => {
            let parsed = tributary::stream::load_stream_spec(&spec)?;
            out!("{} is a valid stream spec:", spec.display())?;
            out!("{}", serde_json::to_string_pretty(&parsed)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate { spec } => {
            let parsed = load_spec(&spec)?;
            print_cautions(&parsed);
            out!("{} is valid:", spec.display())?;
            // The template as written (`{id}`, not `%7Bid%7D`).
            let mut shown = serde_json::to_value(&parsed)?;
            shown["request"]["url"] = contracts::template::braced(parsed.request.url.as_str()).into();
            out!("{}", serde_json::to_string_pretty(&shown)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay { lake, stack, dataset, from, to } => {
            let range = tributary::replay::DateRange { from, to };
            if let Some(stack) = stack {
                return replay_on_stack(lake, &stack, &dataset, range).await;
            }
            let lake = lake.unwrap_or_else(|| LakeLocation::Dir("lake".into()));
            let summary = tributary::replay::replay_lake(lake.existing_dir()?, &dataset, range).await?;
            out_raw!("{summary}")?;
            Ok(if summary.succeeded() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Compact { lake, stack, dataset, target_file_mb, expire_older_than, retain_last } => {
            let retain_last = usize::try_from(retain_last).context("--retain-last")?;
            contracts::spec::check_dataset("--dataset", &dataset)?;
            let (catalog, ident) = match stack {
                Some(name) => stack_table(&name, &dataset).await?,
                None => local_table(&lake, &dataset).await?,
            };
            compact(catalog.as_ref(), &ident, target_file_mb, expire_older_than, retain_last).await
        }
        Command::Query { sql, stack: Some(stack), params, .. } => query_on_stack(&stack, sql, params).await,
        Command::Query { sql, lake, stack: None, params } => {
            require_lake(&lake)?;
            query(&lake, sql, params).await
        }
        Command::Schema { dataset: Some(dataset), lake, bucket, .. } => {
            require_lake(&lake)?;
            contracts::spec::check_dataset("--dataset", &dataset)?;
            let store = adapters::local::DirStore::new(&lake);
            let key = tributary_core::keys::schema_key(&dataset);
            let Some((table, _)) = persist::read_schema(&store, &key).await? else {
                anyhow::bail!(
                    "dataset {dataset} has no table schema in {} (no {key}: nothing persisted yet); \
                     run a pipeline whose target.dataset is {dataset} first",
                    lake.display()
                );
            };
            let arrow = table.arrow_schema();
            out!(
                "Arrow schema (version {}; {}):",
                table.version,
                lake.join(tributary_core::keys::arrow_schema_key(&dataset)).display()
            )?;
            for field in arrow.fields() {
                let mut notes: Vec<String> = field.metadata().iter().map(|(k, v)| format!("{k}={v}")).collect();
                notes.sort();
                out!("  {}: {}  {}", field.name(), field.data_type(), notes.join(" "))?;
            }
            if table.table_format == Some(contracts::TableFormat::Iceberg) {
                // No Hive definition is registered for an Iceberg dataset:
                // its table is the Iceberg catalog's.
                out!(
                    "\nIceberg table tributary.{dataset} (local catalog {}; on AWS, the stack's Glue database): \
                     no Hive TableInput is registered for it",
                    lake.join(tributary_core::keys::iceberg_catalog_key()).display()
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            out!("\nGlue TableInput:")?;
            out!("{}", serde_json::to_string_pretty(&table.table_def(&dataset).glue_table_input(&bucket))?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Schema { out, .. } => {
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let schemas = contracts::schemas().into_iter().map(|(name, text)| (name.to_owned(), text));
            for (name, text) in schemas.chain(contracts::references()) {
                let path = out.join(name);
                std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
                out!("wrote {}", path.display())?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `tributary compact`: compacts the dataset's table in the lake's local
/// catalog, then expires its old snapshots when asked.
/// The local lake's catalog and `dataset`'s table in it.
///
/// # Errors
/// A lake that does not exist, or `dataset` not an Iceberg table in it
/// (naming `--dataset` and why).
async fn local_table(lake: &Path, dataset: &str) -> anyhow::Result<(Box<dyn iceberg::Catalog>, iceberg::TableIdent)> {
    require_lake(lake)?;
    let root = std::fs::canonicalize(lake).with_context(|| format!("reading {}", lake.display()))?;
    let not_iceberg = || {
        anyhow::anyhow!(
            "--dataset {dataset}: not an Iceberg table in {} (no table tributary.{dataset} in its local catalog; \
             only datasets with target.table_format: iceberg can be compacted)",
            lake.display()
        )
    };
    // Opening the catalog would create `_iceberg/` in a lake without one.
    if !root.join(tributary_core::keys::iceberg_catalog_key()).is_file() {
        return Err(not_iceberg());
    }
    let catalog = tributary_iceberg::local_catalog(&root).await.context("opening the lake's Iceberg catalog")?;
    let ident = tributary_iceberg::table_ident(dataset);
    if !iceberg::Catalog::table_exists(&catalog, &ident).await.context("looking the table up")? {
        return Err(not_iceberg());
    }
    Ok((Box::new(catalog), ident))
}

/// The stack's Glue catalog and `dataset`'s table in it.
#[cfg(feature = "aws")]
async fn stack_table(stack: &str, dataset: &str) -> anyhow::Result<(Box<dyn iceberg::Catalog>, iceberg::TableIdent)> {
    let (catalog, ident) = connect(stack).await?.iceberg_table(dataset).await?;
    if !catalog.table_exists(&ident).await.context("looking the table up in Glue")? {
        anyhow::bail!(
            "--dataset {dataset}: stack {stack}'s Glue database {} has no Iceberg table {dataset} (only datasets \
             with target.table_format: iceberg can be compacted)",
            ident.namespace().to_url_string()
        );
    }
    Ok((catalog, ident))
}

#[cfg(not(feature = "aws"))]
async fn stack_table(stack: &str, _dataset: &str) -> anyhow::Result<(Box<dyn iceberg::Catalog>, iceberg::TableIdent)> {
    match connect(stack).await? {}
}

/// Compacts `ident`'s table in `catalog`, then expires its snapshots when
/// asked; prints both summaries.
async fn compact(
    catalog: &dyn iceberg::Catalog,
    ident: &iceberg::TableIdent,
    target_file_mb: u64,
    expire_older_than: Option<chrono::Duration>,
    retain_last: usize,
) -> anyhow::Result<ExitCode> {
    let compacted = tributary_iceberg::compact::compact_table(catalog, ident, target_file_mb << 20).await?;
    out_raw!("{compacted}")?;
    if let Some(older_than) = expire_older_than {
        let expired = tributary_iceberg::compact::expire_snapshots(catalog, ident, older_than, retain_last).await?;
        out_raw!("{expired}")?;
        if !expired.failed.is_empty() {
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `sql` on the lake's local engine and prints its rows as JSON lines;
/// a failed query is an error naming DataFusion's reason.
async fn query(lake: &std::path::Path, sql: String, parameters: Vec<String>) -> anyhow::Result<ExitCode> {
    use tributary_core::ports::Query;
    let root = std::fs::canonicalize(lake).with_context(|| format!("reading {}", lake.display()))?;
    let engine = lakequery::LakeEngine::new(root).with_nested_values();
    let query = Query { sql, parameters, database: "lake".into(), workgroup: None, output_location: None };
    print_query(&engine, &query).await
}

/// What to look at after a failed query, by its reason: a dataset's columns
/// for an unknown column, the datasets for an unknown table, nothing for a
/// syntax error (the reason says where).
fn query_hint(reason: &str) -> &'static str {
    let lower = reason.to_ascii_lowercase();
    if lower.contains("no field named") || (lower.contains("column") && lower.contains("not found")) {
        " (tributary schema --dataset NAME lists a dataset's columns)"
    } else if lower.contains("table") && lower.contains("not found") {
        " (a dataset is queried by its target.dataset name, once a run has persisted it: tributary status lists \
         the lake's runs)"
    } else {
        ""
    }
}

/// Runs `query` on `engine` and prints its rows as JSON lines; a failed
/// query is an error naming the engine's reason.
async fn print_query(
    engine: &dyn tributary_core::ports::QueryEngine,
    query: &tributary_core::ports::Query,
) -> anyhow::Result<ExitCode> {
    use tributary_core::ports::QueryState;
    let id = engine.start(query).await?;
    // Athena's own limit on a query is 30 minutes (DML); a CLI waits 10.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(600);
    match engine.wait(&id, deadline).await? {
        QueryState::Succeeded => {}
        QueryState::Failed { reason, .. } => anyhow::bail!("query failed: {reason}{}", query_hint(&reason)),
        other => anyhow::bail!("query did not finish: {other:?}"),
    }
    let mut token = None;
    loop {
        let page = engine.page(&id, token.as_deref()).await?;
        for row in &page.rows {
            out!("{}", serde_json::to_string(row)?)?;
        }
        match page.next_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "aws")]
async fn deploy_schedules(dir: &Path, stack: &str, dry_run: bool) -> anyhow::Result<ExitCode> {
    // Every spec is read and checked before the SDK is even configured.
    tributary::pipelines::load_dir(dir)?;
    let sdk = tributary::aws::sdk_config().await?;
    let report = tributary::schedules::deploy_schedules(&sdk, stack, dir, dry_run).await?;
    out_raw!("{report}")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "aws")]
async fn deploy_stream(
    path: &Path,
    stack: &str,
    dry_run: bool,
    replace: bool,
    replay: bool,
) -> anyhow::Result<ExitCode> {
    // The spec is read and checked before the SDK is even configured.
    let spec = load_stream_spec_for_deploy(path)?;
    let key = persist::stream::spec_key(spec.source_name());
    let connected = tributary::aws::Stack::connect(stack).await?;
    let bucket = connected.lake_bucket()?.to_string();
    if dry_run {
        out!("would upload {} (pipeline {}) to s3://{bucket}/{key}", path.display(), spec.pipeline)?;
        if replay {
            let record = persist::stream_replay::replay_key(&spec.pipeline, spec.source_name());
            out!("would begin a replay: s3://{bucket}/{record}, the stream's checkpoints and window ledgers removed")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let store = tributary::aws::s3_store(&bucket, "").await?;
    let outcome = tributary::stream_specs::upload_spec(&spec, &store, replace).await?;
    out!("s3://{bucket}/{key}: {outcome} (pipeline {}, dataset {})", spec.pipeline, spec.target.dataset)?;
    if replay {
        out_raw!("{}", tributary::stream_specs::begin_replay(&spec, &store, chrono::Utc::now()).await?)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "aws"))]
async fn deploy_stream(
    path: &Path,
    _stack: &str,
    _dry_run: bool,
    _replace: bool,
    _replay: bool,
) -> anyhow::Result<ExitCode> {
    // The spec is still checked, so it can be validated anywhere.
    let spec = load_stream_spec_for_deploy(path)?;
    anyhow::bail!(
        "{} (pipeline {}) is valid, but this build has no AWS support: build the CLI with `--features aws` (cargo build -p tributary-cli --features aws)",
        path.display(),
        spec.pipeline
    )
}

/// The stream spec at `path`, refusing a REST spec with what to use instead.
fn load_stream_spec_for_deploy(path: &Path) -> anyhow::Result<contracts::stream::StreamSpec> {
    if !tributary::stream::is_stream_spec(path) && path.exists() {
        anyhow::bail!(
            "{}: not a stream spec (no `source` block); a REST pipeline's spec is deployed with `tributary deploy-schedules`",
            path.display()
        );
    }
    Ok(tributary::stream::load_stream_spec(path)?)
}

/// A new re-run token: the time asked and a random suffix, so that each
/// `--replace` re-runs once, however often its trigger is delivered.
fn rerun_token() -> String {
    format!("{}-{}", chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"), &uuid::Uuid::new_v4().simple().to_string()[..8])
}

#[cfg(feature = "aws")]
async fn trigger(
    spec: &PipelineSpec,
    stack: &str,
    times: &[chrono::DateTime<chrono::Utc>],
    replace: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let sdk = tributary::aws::sdk_config().await?;
    let runs = tributary::schedules::trigger(&sdk, stack, spec, times, replace).await?;
    for run in &runs {
        out!(
            "queued run {} of {} (scheduled {})",
            run.run_id,
            spec.pipeline,
            contracts::RunId::scheduled_at_text(run.time)
        )?;
    }
    out!("{} run(s) of {} sent to stack {stack}'s orchestrator queue", runs.len(), spec.pipeline)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "aws"))]
async fn deploy_schedules(dir: &Path, _stack: &str, _dry_run: bool) -> anyhow::Result<ExitCode> {
    // The specs are still checked, so a folder can be validated anywhere.
    let files = tributary::pipelines::load_dir(dir)?;
    anyhow::bail!(
        "{} spec(s) in {} are valid, but this build has no AWS support: build the CLI with `--features aws` (cargo build -p tributary-cli --features aws)",
        files.len(),
        dir.display()
    )
}

#[cfg(not(feature = "aws"))]
async fn trigger(
    _spec: &PipelineSpec,
    _stack: &str,
    _times: &[chrono::DateTime<chrono::Utc>],
    _replace: Option<&str>,
) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this build has no AWS support: build the CLI with `--features aws` (cargo build -p tributary-cli --features aws)"
    )
}

/// The object store of `lake` (default: the stack's lake bucket with
/// `stack`, else the directory `lake`), and the stack when one is named.
async fn open_lake(
    lake: Option<LakeLocation>,
    stack: Option<&str>,
) -> anyhow::Result<(Box<dyn tributary_core::ports::ObjectStore>, Option<StackHandle>)> {
    let stack = match stack {
        Some(name) => Some(connect(name).await?),
        None => None,
    };
    let lake = match (lake, &stack) {
        (Some(lake), _) => lake,
        (None, Some(stack)) => stack_lake(stack)?,
        (None, None) => LakeLocation::Dir("lake".into()),
    };
    let store: Box<dyn tributary_core::ports::ObjectStore> = match &lake {
        LakeLocation::Dir(_) => Box::new(adapters::local::DirStore::new(lake.existing_dir()?)),
        LakeLocation::S3 { bucket, prefix } => s3_store(bucket, prefix, &lake).await?,
    };
    Ok((store, stack))
}

#[cfg(feature = "aws")]
type StackHandle = tributary::aws::Stack;
#[cfg(not(feature = "aws"))]
type StackHandle = std::convert::Infallible;

#[cfg(feature = "aws")]
async fn connect(name: &str) -> anyhow::Result<StackHandle> {
    // Its errors name the stack and the next step.
    Ok(tributary::aws::Stack::connect(name).await?)
}

#[cfg(not(feature = "aws"))]
async fn connect(name: &str) -> anyhow::Result<StackHandle> {
    anyhow::bail!(
        "--stack {name}: this tributary was built without the `aws` feature; build it with `cargo build --release -p tributary-cli --features aws`"
    )
}

/// The stack's topic subscriptions as `status` prints them, warnings
/// included (a subscription pending confirmation, a topic nobody receives).
#[cfg(feature = "aws")]
async fn subscriptions(stack: &StackHandle) -> anyhow::Result<String> {
    let topics = stack.topic_subscriptions().await.context("the stack's topic subscriptions")?;
    Ok(tributary::status::subscriptions_report(&topics).0)
}

#[cfg(not(feature = "aws"))]
async fn subscriptions(stack: &StackHandle) -> anyhow::Result<String> {
    match *stack {}
}

/// Where the stack's CloudWatch dashboard is, as `status` prints it.
#[cfg(feature = "aws")]
fn dashboard(stack: &StackHandle) -> String {
    tributary::status::dashboard_line(&stack.outputs.stack, stack.dashboard_url())
}

#[cfg(not(feature = "aws"))]
fn dashboard(stack: &StackHandle) -> String {
    match *stack {}
}

#[cfg(feature = "aws")]
fn stack_lake(stack: &StackHandle) -> anyhow::Result<LakeLocation> {
    Ok(LakeLocation::S3 { bucket: stack.lake_bucket()?.to_string(), prefix: String::new() })
}

#[cfg(not(feature = "aws"))]
fn stack_lake(stack: &StackHandle) -> anyhow::Result<LakeLocation> {
    match *stack {}
}

#[cfg(feature = "aws")]
async fn s3_store(
    bucket: &str,
    prefix: &str,
    _lake: &LakeLocation,
) -> anyhow::Result<Box<dyn tributary_core::ports::ObjectStore>> {
    Ok(Box::new(tributary::aws::s3_store(bucket, prefix).await?))
}

#[cfg(not(feature = "aws"))]
async fn s3_store(
    _bucket: &str,
    _prefix: &str,
    lake: &LakeLocation,
) -> anyhow::Result<Box<dyn tributary_core::ports::ObjectStore>> {
    Err(tributary::location::LocationError::NoAws(lake.to_string()).into())
}

/// `tributary dlq …`.
async fn dlq(action: DlqAction) -> anyhow::Result<ExitCode> {
    use tributary::dlq;
    match action {
        DlqAction::List { place, filters } => {
            let (store, _) = open_lake(place.lake, place.stack.as_deref()).await?;
            let selection = filters.select(Vec::new(), false);
            let letters = dlq::select(store.as_ref(), &selection).await?;
            out_raw!("{}", dlq::table(&letters))?;
            out!("{} dead letters", letters.len())?;
            Ok(ExitCode::SUCCESS)
        }
        DlqAction::Show { id, place } => {
            let (store, _) = open_lake(place.lake, place.stack.as_deref()).await?;
            let (key, letter) = tributary_core::dead_letters::find(store.as_ref(), &id).await?;
            out!("{key}")?;
            out!("{}", serde_json::to_string_pretty(&letter)?)?;
            Ok(ExitCode::SUCCESS)
        }
        DlqAction::Resolve { chosen, note, force } => {
            let (place, selection) = chosen.select("resolve", false)?;
            let (store, _) = open_lake(place.lake, place.stack.as_deref()).await?;
            let outcomes = dlq::resolve_selected(store.as_ref(), &selection, note.as_deref(), force).await?;
            out_raw!("{}", dlq::resolve_report(&outcomes))?;
            Ok(if outcomes.iter().all(|o| o.result.is_ok()) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        DlqAction::Redrive { chosen, again, spec: specs } => {
            let (place, selection) = chosen.select("redrive", again)?;
            let local = place.stack.is_none();
            let (store, stack) = open_lake(place.lake.clone(), place.stack.as_deref()).await?;
            let outcomes = if local {
                let lake = place.lake.unwrap_or_else(|| LakeLocation::Dir("lake".into()));
                let runtime = LocalRuntime::new(local_options(lake.existing_dir()?)?)?;
                // Request grants secrets per spec: grant each letter's run's
                // spec (kept with the run) and the ones named.
                for path in &specs {
                    runtime.grant(&load_spec(path)?);
                }
                let mut runs = std::collections::BTreeSet::new();
                for (_, letter) in dlq::select(store.as_ref(), &selection).await? {
                    if let (Some(pipeline), Some(run_id)) = (letter.pipeline, letter.run_id) {
                        runs.insert((pipeline, run_id));
                    }
                }
                for (pipeline, run_id) in &runs {
                    if !runtime.grant_run(pipeline, run_id).await? && specs.is_empty() {
                        out!(
                            "note: run {run_id} of {pipeline} has no spec kept in the lake; if its requests use a \
                             secret, pass --spec FILE so Request may use it"
                        )?;
                    }
                }
                let mut complete_before = std::collections::BTreeSet::new();
                for (pipeline, run_id) in &runs {
                    if dlq::run_complete(store.as_ref(), pipeline, run_id).await? {
                        complete_before.insert((pipeline.clone(), run_id.clone()));
                    }
                }
                let address = |queue: &'static str| Ok(queue.to_string());
                let outcomes = dlq::redrive(store.as_ref(), runtime.broker().as_ref(), &address, &selection).await?;
                out_raw!("{}", dlq::report(&outcomes))?;
                let before = dlq::archive_keys(store.as_ref()).await?;
                runtime.drain().await;
                let after = dlq::archive_keys(store.as_ref()).await?;
                out!("the local runtime drained every queue: {} new dead letters", after.difference(&before).count())?;
                // A run complete now, with no new dead letter, has recovered:
                // its letters are resolved (only the ones sent back, for a run
                // that was complete before).
                let sent: std::collections::BTreeSet<String> =
                    outcomes.iter().filter(|o| o.result.is_ok()).map(|o| o.key.clone()).collect();
                let mut resolved = 0;
                for (pipeline, run_id) in &runs {
                    let only = complete_before.contains(&(pipeline.clone(), run_id.clone())).then_some(&sent);
                    let by = tributary_core::dead_letters::ResolvedBy::Redrive;
                    resolved += dlq::resolve_recovered(store.as_ref(), pipeline, run_id, &before, only, by).await?;
                }
                if resolved > 0 {
                    out!("{resolved} dead letters resolved: their runs completed (see `tributary status`)")?;
                }
                // Complete is not whole: a run that completed truncated or
                // duplicated says so here too (a trial read "complete" for
                // a run holding 40 of 50 records).
                for (pipeline, run_id) in &runs {
                    let Ok(id) = contracts::RunId::new(run_id.as_str()) else { continue };
                    let totals = tributary_core::ledger::run_totals(store.as_ref(), pipeline, &id).await?;
                    if let Some(reason) = &totals.truncated {
                        out!("run {run_id} of {pipeline} completed truncated: {reason}")?;
                    }
                    if let Some(reason) = &totals.duplicated {
                        out!("run {run_id} of {pipeline} completed duplicated: {reason}")?;
                    }
                }
                if after.len() > before.len() {
                    return Ok(ExitCode::FAILURE);
                }
                outcomes
            } else {
                redrive_on_stack(store.as_ref(), stack, &selection).await?
            };
            // A letter skipped as resolved or redriven already is no failure.
            Ok(if outcomes.iter().all(|o| o.result.is_ok() || o.skipped) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// A redrive from an S3 lake without `--stack`: where would the letters go?
const REDRIVE_NEEDS_STACK: &str = "a redrive on AWS needs --stack NAME: the stack whose queues the letters go back to (with its lake, --lake is not needed)";

#[cfg(feature = "aws")]
async fn redrive_on_stack(
    store: &dyn tributary_core::ports::ObjectStore,
    stack: Option<StackHandle>,
    selection: &tributary::dlq::Selection,
) -> anyhow::Result<Vec<tributary::dlq::Outcome>> {
    let stack = stack.context(REDRIVE_NEEDS_STACK)?;
    let queues = stack.queues();
    let address = |queue: &'static str| stack.queue_url(queue);
    let outcomes = tributary::dlq::redrive(store, &queues, &address, selection).await?;
    out_raw!("{}", tributary::dlq::report(&outcomes))?;
    Ok(outcomes)
}

#[cfg(not(feature = "aws"))]
async fn redrive_on_stack(
    _store: &dyn tributary_core::ports::ObjectStore,
    stack: Option<StackHandle>,
    _selection: &tributary::dlq::Selection,
) -> anyhow::Result<Vec<tributary::dlq::Outcome>> {
    match stack {
        Some(never) => match never {},
        None => anyhow::bail!(REDRIVE_NEEDS_STACK),
    }
}

#[cfg(feature = "aws")]
async fn replay_on_stack(
    lake: Option<LakeLocation>,
    stack: &str,
    dataset: &str,
    range: tributary::replay::DateRange,
) -> anyhow::Result<ExitCode> {
    let (store, stack) = open_lake(lake, Some(stack)).await?;
    let stack = stack.context("stack")?;
    let queue = stack.persist_queue()?;
    let summary = tributary::replay::resend(store.as_ref(), &stack.queues(), &queue, dataset, range).await?;
    out_raw!("{summary}")?;
    Ok(if summary.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(not(feature = "aws"))]
async fn replay_on_stack(
    _lake: Option<LakeLocation>,
    stack: &str,
    _dataset: &str,
    _range: tributary::replay::DateRange,
) -> anyhow::Result<ExitCode> {
    connect(stack).await.map(|never| match never {})
}

#[cfg(feature = "aws")]
async fn query_on_stack(stack: &str, sql: String, parameters: Vec<String>) -> anyhow::Result<ExitCode> {
    let stack = connect(stack).await?;
    let (engine, database) = stack.athena()?;
    let query = tributary_core::ports::Query { sql, parameters, database, workgroup: None, output_location: None };
    print_query(&engine, &query).await
}

#[cfg(not(feature = "aws"))]
async fn query_on_stack(stack: &str, _sql: String, _parameters: Vec<String>) -> anyhow::Result<ExitCode> {
    connect(stack).await.map(|never| match never {})
}

fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|err| format!("{text:?} is not an RFC 3339 time such as 2026-11-29T06:00:00Z: {err}"))
}

/// An age such as `7d`, `12h`, `30m` or `0s` (humantime's syntax).
fn parse_age(text: &str) -> Result<chrono::Duration, String> {
    let bad = |why: String| format!("{text:?} is not an age such as 7d, 12h or 30m: {why}");
    let age = humantime::parse_duration(text).map_err(|err| bad(err.to_string()))?;
    chrono::Duration::from_std(age).map_err(|err| bad(err.to_string()))
}

/// `tributary run` of a stream spec (see [`tributary::stream::run_local`]).
async fn run_stream(
    spec: &Path,
    lake: &Path,
    records: Option<PathBuf>,
    follow: bool,
    from_trim_horizon: bool,
) -> anyhow::Result<ExitCode> {
    use tributary::stream::{LocalSource, PollOptions, load_stream_spec, run_local};
    let spec = load_stream_spec(spec)?;
    let source = records.map_or(LocalSource::Kinesis, LocalSource::File);
    let options = PollOptions { follow, max_batches_per_shard: None };
    // Ctrl-C or SIGTERM (a `--follow` run ends no other way) stops the
    // poll between two awaits, as a crash would: every batch written so
    // far is in the lake with its shards' checkpoints, and the next run
    // goes on from them (a trial's SIGTERM printed nothing).
    let report = tokio::select! {
        report = run_local(&spec, lake, &source, options, from_trim_horizon) => report?,
        code = stop_signal() => {
            let code = code?;
            let again = if from_trim_horizon {
                "the replay stopped before its commit: run the same command again to finish it"
            } else {
                "the next run of the spec reads on from its shards' checkpoints"
            };
            err_raw!(
                "stopped: {} by {}; every batch written before is in {} with its shard's checkpoint, and {again}",
                spec.pipeline,
                if code == 130 { "Ctrl-C" } else { "SIGTERM" },
                spec.target.dataset
            );
            return Ok(ExitCode::from(code));
        }
    };
    let quarantined = report.records_quarantined();
    let rows = report.rows_persisted();
    out!("{}: {rows} records into {}, {quarantined} quarantined", spec.pipeline, spec.target.dataset)?;
    out!("{report}")?;
    for note in report.notes.iter().chain(report.shards.values().flat_map(|s| &s.notes)) {
        out!("  NOTE: {note}")?;
    }
    for alert in &report.alerts {
        out!("  ALERT: {alert}")?;
    }
    if report.on_failure() > 0 {
        // As the event source mapping does, the poller went on past them:
        // the next run starts after them, so say how to get them back.
        err_raw!(
            "{} batch(es) given up after their retries: their records were skipped, as Lambda's event source mapping \
             skips them (each is a dead letter: tributary dlq list; the alerts are in _alerts.jsonl). Once the cause \
             is fixed, read the stream again from its start, which writes {} anew from every record: tributary run \
             <spec> --records <file> --lake <lake> --from-trim-horizon",
            report.on_failure(),
            spec.target.dataset
        );
    }
    // As for a REST run: every record quarantined is no success (a
    // producer that switched to another format must not pass cron or CI).
    let all_quarantined = rows == 0 && quarantined > 0;
    if all_quarantined {
        err_raw!(
            "every record taken was quarantined ({quarantined}): nothing reached {}; see the reasons under \
             quarantine/{}/",
            spec.target.dataset,
            spec.target.dataset
        );
    }
    Ok(if report.on_failure() == 0 && !all_quarantined { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn load_spec(path: &Path) -> anyhow::Result<PipelineSpec> {
    Ok(tributary::pipelines::load_spec(path)?)
}

fn print_summary(summary: &RunSummary) -> std::io::Result<()> {
    out!("{summary}")?;
    for alert in &summary.alerts {
        out!("  ALERT: {}", alert.summary)?;
    }
    Ok(())
}

fn exit_code(summaries: &[RunSummary]) -> ExitCode {
    if summaries.iter().all(RunSummary::succeeded) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// The demo: three pipelines against the demo vendor API, then a stream
/// pipeline (a Kafka topic from a file of records,
/// [`tributary::demo_stream`]), writing Iceberg tables with `iceberg` (the
/// Athena-driven one reads `demo_customers`' table).
async fn demo(lake: &Path, iceberg: bool) -> anyhow::Result<ExitCode> {
    let format = if iceberg { ", table_format: iceberg" } else { "" };
    if lake.is_dir() {
        let datasets = ["demo_customers", "demo_customer_transactions", "demo_transactions"];
        tributary::demo_stream::refuse_other_formats(lake, &datasets, iceberg).await?;
    }
    let data = vendor::DemoData::default();
    let addr = vendor::spawn("127.0.0.1:0".parse()?, data).await.context("starting the demo vendor API")?;
    out!(
        "demo vendor API on http://{addr}: {} customers, {} transactions each\n",
        data.customers,
        data.transactions_per_customer
    )?;
    let specs = [
        format!(
            r#"
version: 1
pipeline: demo_customers
description: Customers, count-first paging with offset/limit.
strategy: {{ kind: paged, page_size: 40, total_pointer: /total, params: {{ style: offset_limit }} }}
request: {{ url: "http://{addr}/customers", records_pointer: /items, allow: {{ loopback: true }} }}
target: {{ dataset: demo_customers{format} }}
"#
        ),
        format!(
            r#"
version: 1
pipeline: demo_customer_transactions
description: For each customer in the lake, that customer's transactions (Athena-driven).
strategy:
  kind: athena
  query: SELECT DISTINCT id FROM demo_customers WHERE dt = ? ORDER BY id
  parameters: ["{{run_date}}"]
  database: lake
request: {{ url: "http://{addr}/customers/{{id}}/transactions", records_pointer: /data, allow: {{ loopback: true }} }}
target: {{ dataset: demo_customer_transactions{format} }}
"#
        ),
        format!(
            r#"
version: 1
pipeline: demo_transactions
description: All transactions in one call.
strategy: {{ kind: simple }}
request: {{ url: "http://{addr}/transactions", records_pointer: /data, allow: {{ loopback: true }} }}
target: {{ dataset: demo_transactions{format} }}
"#
        ),
    ];
    let runtime = LocalRuntime::new(local_options(lake)?)?;
    let mut summaries = Vec::new();
    for text in &specs {
        let spec = PipelineSpec::from_yaml(text).context("demo spec")?;
        let summary = runtime.run(&spec, chrono::Utc::now()).await?;
        out!("strategy {}", orchestrator::strategy::strategy_for(&spec.strategy).kind())?;
        print_summary(&summary)?;
        let (table, rows) = lake::preview(lake, &summary.data_keys, 3)?;
        let kind = if iceberg { "data files this run added to the Iceberg table" } else { "Parquet files" };
        out!(
            "  first rows of {} (this run: {rows} rows in {} {kind} under {}):",
            spec.target.dataset,
            summary.data_keys.len(),
            lake.display()
        )?;
        out!("{table}\n")?;
        summaries.push(summary);
    }
    let stream = tributary::demo_stream::run(lake, iceberg).await.context("the demo's stream pipeline")?;
    out!("{stream}")?;
    let stream_ok = stream.report.on_failure() == 0;
    Ok(if stream_ok { exit_code(&summaries) } else { ExitCode::FAILURE })
}

/// Refuses a `--lake` that is not an existing directory.
fn require_lake(lake: &std::path::Path) -> anyhow::Result<()> {
    Ok(tributary::location::require_dir(lake)?)
}

#[cfg(test)]
mod tests {
    use super::query_hint;

    /// A trial finding: the schema hint followed every failed query, a
    /// syntax error included.
    #[test]
    fn a_failed_query_gets_the_hint_its_reason_needs() {
        let column = "Schema error: No field named nope. Valid fields are d.id.";
        assert!(query_hint(column).contains("tributary schema --dataset"));
        let table = "Error during planning: table 'datafusion.public.missing' not found";
        assert!(query_hint(table).contains("target.dataset"));
        let syntax = r#"SQL error: ParserError("Expected: an SQL statement, found: selec at Line: 1, Column: 1")"#;
        assert_eq!(query_hint(syntax), "");
    }
}
