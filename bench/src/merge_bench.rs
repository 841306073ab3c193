//! `merge-bench`: the cost of a `write: merge` run on an Iceberg table
//! (issue 26): a run of `--changed` keys merged into a table of `--rows`
//! rows in `--partitions` partitions, its wall time, its peak RSS, and the
//! table files it read and rewrote.
//!
//! `merge-bench run` builds the table in one child process
//! (`merge-bench build`: one run per partition through Persist's handler and
//! the local Iceberg committer), then merges in a second
//! (`merge-bench merge`), so that the merge's `VmHWM` is its own: the
//! process stages the run's pages, then its last page completes the run and
//! commits the merge. The figures are that last call's wall time and the
//! process's peak RSS (staging included, which is small beside the merge).
//! The merge child then reads the table back with iceberg-rust's scan and
//! fails unless every row is right.
//!
//! Layouts (`--keys`): `sequential`, partition `p` holds the contiguous ids
//! `[p·R/P, (p+1)·R/P)`, so key bounds prune every file of an untouched
//! partition; `random`, partition `p` holds the ids `i` with
//! `i mod P = p`, so every file's bounds span the table and every file is
//! read (the worst case for pruning; only touched files are rewritten).
//!
//! Run it with `cargo run --release -p persist-bench --bin merge-bench -- run`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use arrow_array::{Array, Int64Array, StringArray};
use clap::{Parser, Subcommand, ValueEnum};
use futures::TryStreamExt;
use iceberg::table::Table;
use serde::{Deserialize, Serialize};

use adapters::local::{Broker, DirStore};
use contracts::{Granularity, Partitioning, PersistTarget, TableFormat, WriteDisposition};
use test_support::logs::LogBuffer;
use test_support::runs;
use tributary_iceberg::{IcebergCommitter, local_committer, table_ident};

const PIPELINE: &str = "bench-accounts";
const DATASET: &str = "accounts";
/// Records per page of every run.
const PAGE_RECORDS: usize = 25_000;
/// `updated_at` of the table's rows, and of the merge run's updates.
const BUILT_AT: &str = "2026-11-01T00:00:00Z";
const CHANGED_AT: &str = "2026-11-02T00:00:00Z";

/// The merge benchmark.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The table's shape, shared by every subcommand.
#[derive(Clone, Debug, clap::Args)]
struct Shape {
    /// Rows of the table before the merge (ids `0..rows`).
    #[arg(long, default_value_t = 2_000_000)]
    rows: usize,
    /// Partitions (`region=r00`, `region=r01`, …).
    #[arg(long, default_value_t = 20)]
    partitions: usize,
    /// Keys of the merge run: 90 % updates of existing ids (newer
    /// `updated_at`), 10 % new ids.
    #[arg(long, default_value_t = 100_000)]
    changed: usize,
    /// Partitions whose ids the merge run changes (the first ones).
    #[arg(long, default_value_t = 2)]
    touched: usize,
    /// How ids are spread over the partitions.
    #[arg(long, value_enum, default_value_t = Keys::Sequential)]
    keys: Keys,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Keys {
    /// Partition `p` holds a contiguous id range.
    Sequential,
    /// Partition `p` holds the ids `i mod partitions = p`.
    Random,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Builds the table, then merges, each in its own process; prints the figures.
    Run {
        #[command(flatten)]
        shape: Shape,
        /// The lake's folder (default: a new temporary folder, removed after).
        #[arg(long)]
        lake: Option<PathBuf>,
    },
    /// Builds the table in `lake` (one run per partition).
    Build {
        #[command(flatten)]
        shape: Shape,
        #[arg(long)]
        lake: PathBuf,
    },
    /// Merges the run into the table in `lake`; prints its figures as JSON.
    Merge {
        #[command(flatten)]
        shape: Shape,
        #[arg(long)]
        lake: PathBuf,
    },
}

/// What `merge` measured and checked.
#[derive(Debug, Serialize, Deserialize)]
struct Figures {
    rows_before: u64,
    rows_after: u64,
    files_before: usize,
    files_after: usize,
    files_read: u64,
    files_rewritten: usize,
    partitions_touched: usize,
    merge_secs: f64,
    peak_rss_mb: f64,
    staged_rss_mb: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Run { shape, lake } => run(&shape, lake),
        Cmd::Build { shape, lake } => runtime().and_then(|rt| rt.block_on(build(&shape, &lake))),
        Cmd::Merge { shape, lake } => runtime().and_then(|rt| rt.block_on(merge(&shape, &lake))).map(|figures| {
            println!("{}", serde_json::to_string(&figures).unwrap_or_default());
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("merge-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A current-thread runtime, so the captured log sees every task.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")
}

fn run(shape: &Shape, lake: Option<PathBuf>) -> anyhow::Result<()> {
    let temp = tempfile::tempdir().context("temporary lake")?;
    let lake = lake.unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&lake).context("the lake folder")?;
    let me = std::env::current_exe().context("this binary's path")?;
    let args = shape_args(shape, &lake);
    let started = Instant::now();
    let built = Command::new(&me).arg("build").args(&args).status().context("building the table")?;
    ensure!(built.success(), "building the table failed");
    let build_secs = started.elapsed().as_secs_f64();
    let out = Command::new(&me).arg("merge").args(&args).output().context("merging")?;
    if !out.status.success() {
        bail!("the merge failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let f: Figures = serde_json::from_str(line.trim()).context("the merge's figures")?;
    println!("table built in {build_secs:.1} s; merge verified (row count, every changed key's value)");
    println!(
        "| layout | rows | changed | files before → after | files read | files rewritten | partitions touched | wall s | peak RSS MB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {:?} | {} → {} | {} | {} → {} | {} | {} | {} | {:.2} | {:.0} (staged: {:.0}) |",
        shape.keys,
        f.rows_before,
        f.rows_after,
        shape.changed,
        f.files_before,
        f.files_after,
        f.files_read,
        f.files_rewritten,
        f.partitions_touched,
        f.merge_secs,
        f.peak_rss_mb,
        f.staged_rss_mb,
    );
    Ok(())
}

fn shape_args(shape: &Shape, lake: &Path) -> Vec<String> {
    let keys = match shape.keys {
        Keys::Sequential => "sequential",
        Keys::Random => "random",
    };
    [
        ("--rows", shape.rows.to_string()),
        ("--partitions", shape.partitions.to_string()),
        ("--changed", shape.changed.to_string()),
        ("--touched", shape.touched.to_string()),
        ("--keys", keys.to_string()),
        ("--lake", lake.display().to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// The ids of partition `p` before the merge.
fn partition_ids(shape: &Shape, p: usize) -> Vec<usize> {
    match shape.keys {
        Keys::Sequential => {
            let per = shape.rows.div_ceil(shape.partitions);
            (p * per..((p + 1) * per).min(shape.rows)).collect()
        }
        Keys::Random => (p..shape.rows).step_by(shape.partitions).collect(),
    }
}

/// One record of the table (`version` `v1`) or of the merge run (`v2`).
fn rendered(id: usize, region: usize, version: &str, at: &str) -> String {
    let amount = (id % 100_000) as f64 / 100.0;
    format!(
        r#"{{"id":{id},"region":"r{region:02}","name":"account-{id}-{version}","amount":{amount},"updated_at":"{at}"}}"#
    )
}

/// The merge run's records: `(id, region)`, updates first, then new ids.
fn changes(shape: &Shape) -> Vec<(usize, usize)> {
    let inserts = shape.changed / 10;
    let updates = shape.changed - inserts;
    let touched = shape.touched.clamp(1, shape.partitions);
    let per_partition = updates.div_ceil(touched);
    let mut out = Vec::with_capacity(shape.changed);
    for p in 0..touched {
        let ids = partition_ids(shape, p);
        let step = (ids.len() / per_partition.max(1)).max(1);
        out.extend(ids.iter().step_by(step).take(per_partition).map(|&id| (id, p)));
    }
    out.truncate(updates);
    out.extend((0..inserts).map(|i| (shape.rows + i, i % touched)));
    out
}

struct Lake {
    store: Arc<DirStore>,
    committer: IcebergCommitter,
    queue: Broker,
    config: persist::PersistConfig,
}

impl Lake {
    async fn open(dir: &Path) -> anyhow::Result<Self> {
        let store = Arc::new(DirStore::new(dir));
        let committer = local_committer(dir, store.clone()).await.context("local catalog")?;
        Ok(Self { store, committer, queue: Broker::new(), config: persist::PersistConfig::default() })
    }

    fn target() -> PersistTarget {
        PersistTarget {
            table_format: TableFormat::Iceberg,
            partition: Partitioning::Field {
                field: "/region".into(),
                granularity: Granularity::Value,
                column: "region".into(),
            },
            write: WriteDisposition::Merge,
            primary_key: vec!["/id".into()],
            order_by: Some("/updated_at".into()),
            ..PersistTarget::new(DATASET)
        }
    }

    /// Sends run `run`'s `records` to Persist's handler, `PAGE_RECORDS` a
    /// page; returns the wall seconds of the last page's call (the one
    /// that completes the run and commits it) and `VmHWM` before it.
    async fn persist_run(&self, run: &str, records: &[String]) -> anyhow::Result<(f64, f64)> {
        let pages = records.len().div_ceil(PAGE_RECORDS).max(1);
        runs::expect_pages(self.store.as_ref(), PIPELINE, run, pages as u64).await;
        let deps = persist::Deps {
            store: self.store.as_ref(),
            queue: &self.queue,
            run_events: None,
            catalog: None,
            tables: Some(&self.committer),
            config: &self.config,
        };
        let mut last = (0.0, 0.0);
        for (index, chunk) in records.chunks(PAGE_RECORDS).enumerate() {
            let text = format!("[{}]", chunk.join(","));
            let message = runs::page(PIPELINE, Self::target(), run, index as u32, pages as u32, &text);
            let rss = peak_rss_mb()?;
            let started = Instant::now();
            persist::persist_page(message, deps).await.with_context(|| format!("run {run} page {index}"))?;
            last = (started.elapsed().as_secs_f64(), rss);
        }
        Ok(last)
    }

    async fn table(&self) -> anyhow::Result<Table> {
        Ok(self.committer.catalog().load_table(&table_ident(DATASET)).await?)
    }
}

async fn build(shape: &Shape, dir: &Path) -> anyhow::Result<()> {
    let lake = Lake::open(dir).await?;
    for p in 0..shape.partitions {
        let records: Vec<String> =
            partition_ids(shape, p).into_iter().map(|id| rendered(id, p, "v1", BUILT_AT)).collect();
        lake.persist_run(&format!("build-{p:02}"), &records).await?;
    }
    let rows = table_rows(&lake.table().await?);
    ensure!(rows == shape.rows as u64, "the built table holds {rows} rows, not {}", shape.rows);
    Ok(())
}

async fn merge(shape: &Shape, dir: &Path) -> anyhow::Result<Figures> {
    let lake = Lake::open(dir).await?;
    let before = lake.table().await?;
    let files_before = live_files(&before).await?;
    let changes = changes(shape);
    let records: Vec<String> = changes.iter().map(|&(id, region)| rendered(id, region, "v2", CHANGED_AT)).collect();
    let logs = LogBuffer::new();
    let (merge_secs, staged_rss_mb) = {
        let _guard = logs.capture();
        lake.persist_run("merge", &records).await?
    };
    drop(records);
    let peak_rss_mb = peak_rss_mb()?;
    let files_read = logs
        .lines()
        .iter()
        .find(|line| line["message"] == "the run merged by primary key")
        .and_then(|line| line["table_files"].as_u64())
        .context("the merge's log line (table_files)")?;
    let after = lake.table().await?;
    let files_after = live_files(&after).await?;
    let rewritten: Vec<&String> = files_before.difference(&files_after).collect();
    let partitions: BTreeSet<&str> =
        rewritten.iter().filter_map(|path| path.rsplit_once('/').map(|(folder, _)| folder)).collect();
    let figures = Figures {
        rows_before: table_rows(&before),
        rows_after: table_rows(&after),
        files_before: files_before.len(),
        files_after: files_after.len(),
        files_read,
        files_rewritten: rewritten.len(),
        partitions_touched: partitions.len(),
        merge_secs,
        peak_rss_mb,
        staged_rss_mb,
    };
    verify(shape, &after, &changes).await?;
    Ok(figures)
}

/// Reads the table back (iceberg-rust's scan) and fails unless it holds
/// `rows + inserts` rows, one per id, each changed id with its new name.
async fn verify(shape: &Shape, table: &Table, changes: &[(usize, usize)]) -> anyhow::Result<()> {
    let changed: BTreeSet<i64> = changes.iter().map(|&(id, _)| id as i64).collect();
    let batches: Vec<_> =
        table.scan().select(["id", "name"]).build()?.to_arrow().await?.try_collect::<Vec<_>>().await?;
    let mut seen = vec![false; shape.rows + shape.changed / 10];
    let mut wrong = BTreeMap::new();
    for batch in &batches {
        let ids = batch.column_by_name("id").context("id")?;
        let ids = ids.as_any().downcast_ref::<Int64Array>().context("id is int64")?;
        let names = batch.column_by_name("name").context("name")?;
        let names = names.as_any().downcast_ref::<StringArray>().context("name is text")?;
        for i in 0..batch.num_rows() {
            let id = ids.value(i);
            let slot = usize::try_from(id).ok().and_then(|id| seen.get_mut(id)).with_context(|| format!("id {id}"))?;
            ensure!(!*slot, "id {id} twice");
            *slot = true;
            let version = if changed.contains(&id) { "v2" } else { "v1" };
            let expected = format!("account-{id}-{version}");
            if !names.is_valid(i) || names.value(i) != expected {
                wrong.insert(id, names.is_valid(i).then(|| names.value(i).to_string()));
            }
        }
    }
    let missing = seen.iter().filter(|s| !**s).count();
    ensure!(missing == 0, "{missing} ids missing after the merge");
    ensure!(wrong.is_empty(), "{} ids with the wrong name, e.g. {:?}", wrong.len(), wrong.iter().next());
    Ok(())
}

/// The paths of the table's live data files.
async fn live_files(table: &Table) -> anyhow::Result<BTreeSet<String>> {
    let tasks: Vec<_> = table.scan().build()?.plan_files().await?.try_collect().await?;
    Ok(tasks.iter().map(|task| task.data_file_path.clone()).collect())
}

/// `total-records` of the current snapshot's summary.
fn table_rows(table: &Table) -> u64 {
    table
        .metadata()
        .current_snapshot()
        .and_then(|s| s.summary().additional_properties.get("total-records").and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// This process's peak resident set (`VmHWM` of /proc/self/status), MiB.
fn peak_rss_mb() -> anyhow::Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmHWM")?;
    Ok(kib / 1024.0)
}
