//! `request-bench`: Request's peak memory on large pages, the figure the
//! template's `MemorySize` has to hold (issue 25, item 2).
//!
//! `request-bench run` starts, for each page size, a vendor in a child
//! process (`request-bench serve`, so the page it serves is not counted),
//! then runs Request's real handler (reqwest client, local queue and lake)
//! on one SQS batch of `--batch` messages for that page in a second child
//! (`request-bench run-one`), and prints each case's peak RSS (`VmHWM`) and
//! time. Records go by claim check (the pages are far above 256 KiB), as
//! on AWS.
//!
//! Run it with `cargo run --release -p persist-bench --bin request-bench -- run`.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use adapters::local::{Broker, DirStore, FileSecrets, QueueConfig};
use request::http::ReqwestClient;
use request::trust::Trust;
use request::{Deps, RequestConfig, Warm};

/// Request's memory benchmark.
#[derive(Debug, Parser)]
#[command(about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Every page size, a batch each, each in its own process.
    Run {
        /// Page sizes, in MiB of JSON.
        #[arg(long, value_delimiter = ',', default_values_t = [4usize, 16, 60])]
        mib: Vec<usize>,
        /// Messages in the SQS batch (the template's `BatchSize`).
        #[arg(long, default_value_t = 5)]
        batch: usize,
    },
    /// Serves one generated page of `mib` MiB at `GET /records`; prints
    /// the address, then serves until killed.
    Serve {
        /// Page size, MiB.
        #[arg(long)]
        mib: usize,
    },
    /// One batch of `batch` messages for `url`; prints the peak RSS.
    RunOne {
        /// The page's URL.
        #[arg(long)]
        url: String,
        /// Messages in the batch.
        #[arg(long)]
        batch: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Run { mib, batch } => run(&mib, batch),
        Cmd::Serve { mib } => serve(mib),
        Cmd::RunOne { url, batch } => run_one(&url, batch),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("request-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(sizes: &[usize], batch: usize) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("this binary's path")?;
    println!("| page | batch | peak RSS | time |");
    println!("|---:|---:|---:|---:|");
    for &mib in sizes {
        for messages in [1, batch] {
            let mut server = Command::new(&me)
                .args(["serve", "--mib", &mib.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .context("starting the vendor")?;
            let mut line = String::new();
            BufReader::new(server.stdout.take().context("the vendor's stdout")?)
                .read_line(&mut line)
                .context("the vendor's address")?;
            let url = format!("http://{}/records", line.trim());
            let started = Instant::now();
            let out = Command::new(&me)
                .args(["run-one", "--url", &url, "--batch", &messages.to_string()])
                .output()
                .context("running the batch")?;
            let elapsed = started.elapsed();
            let _ = server.kill();
            let _ = server.wait();
            if !out.status.success() {
                bail!("{mib} MiB x {messages}: {}", String::from_utf8_lossy(&out.stderr));
            }
            let peak = String::from_utf8_lossy(&out.stdout).trim().to_string();
            println!("| {mib} MiB | {messages} | {peak} | {:.2} s |", elapsed.as_secs_f64());
        }
    }
    Ok(())
}

/// A page of about `mib` MiB: `{"items": [...]}`, records of a few
/// hundred bytes with strings, numbers, a nested object and a list.
fn page(mib: usize) -> Vec<u8> {
    let target = mib << 20;
    let mut out = Vec::with_capacity(target + 1024);
    out.extend_from_slice(b"{\"meta\":{\"next\":null},\"items\":[");
    let mut i = 0u64;
    while out.len() < target {
        if i > 0 {
            out.push(b',');
        }
        let record = json!({
            "id": i,
            "name": format!("customer {i}"),
            "email": format!("customer{i}@example.com"),
            "score": i as f64 * 1.5,
            "active": i.is_multiple_of(3),
            "address": {"street": format!("{} Main Street", i % 977), "city": "Lisbon", "zip": format!("{:05}", i % 99_999)},
            "tags": ["a", "b", format!("t{}", i % 17)],
            "note": "lorem ipsum dolor sit amet, consectetur adipiscing elit",
        });
        serde_json::to_writer(&mut out, &record).expect("a generated record serialises");
        i += 1;
    }
    out.extend_from_slice(b"]}");
    out
}

fn serve(mib: usize) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let (addr, _) = test_support::vendor::serve_bytes(page(mib), "application/json").await;
        println!("{addr}");
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    Ok(())
}

fn run_one(url: &str, batch: usize) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let dir = tempfile::tempdir()?;
    runtime.block_on(async {
        let broker = Broker::new();
        broker.create_queue(QueueConfig {
            name: "persist".into(),
            visibility_timeout: Duration::from_secs(720),
            max_message_bytes: 262_144,
            redrive: None,
        });
        let store = DirStore::new(dir.path());
        let secrets = FileSecrets::new(dir.path().join("_secrets.json"));
        let http = ReqwestClient::new()?;
        let warm = Warm::default();
        let config = RequestConfig {
            trust: Trust { destinations: Some(["persist".to_string()].into()), ..Trust::unrestricted() },
            ..RequestConfig::default()
        };
        let deps = Deps {
            http: &http,
            queue: &broker,
            topics: &broker,
            store: &store,
            secrets: &secrets,
            warm: &warm,
            deadline: tokio::time::Instant::now() + Duration::from_secs(900),
            config: &config,
        };
        let event = event(url, batch)?;
        let response = request::handle_sqs(&event, deps).await;
        if !response.batch_item_failures.is_empty() {
            bail!("{} of {batch} messages failed", response.batch_item_failures.len());
        }
        let forwarded = test_support::queues::drain(&broker, "persist").len();
        if forwarded != batch {
            bail!("{forwarded} of {batch} pages forwarded");
        }
        Ok(())
    })?;
    println!("{}", peak_rss()?);
    Ok(())
}

fn event(url: &str, batch: usize) -> anyhow::Result<aws_lambda_events::event::sqs::SqsEvent> {
    let records: Vec<Value> = (0..batch)
        .map(|i| {
            let message = json!({
                "version": 1,
                "pipeline": "bench",
                "run_id": "20261204T060000Z",
                "run_date": "2026-12-04",
                "page": {"index": i, "count": batch},
                "http": {"url": url},
                "policy": {"allow": {"loopback": true}},
                "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "bench"}},
                "reply_to": {"kind": "queue", "queue": "persist"},
            });
            json!({
                "messageId": format!("m{i}"),
                "receiptHandle": format!("r{i}"),
                "body": message.to_string(),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:request",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    Ok(serde_json::from_value(json!({ "Records": records }))?)
}

/// This process's peak resident set (`VmHWM` of `/proc/self/status`), as
/// `N MB`.
fn peak_rss() -> anyhow::Result<String> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmHWM in /proc/self/status")?;
    Ok(format!("{} MB", kib * 1024 / 1_000_000))
}
