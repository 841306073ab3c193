//! A local run's lease: `<lake>/_runs/<pipeline>/<run_id>/running.lock`,
//! made with `O_EXCL` when `tributary run` starts a run and removed when it
//! ends, so a second `tributary run` of the same run id (two terminals, the
//! same `--scheduled-at`) is refused while the first is in flight instead of
//! mixing its pages into it.
//!
//! A stream pipeline's local run (`tributary run stream.yaml`, one poller
//! per lake) holds `<lake>/_streams/<pipeline>/<stream>.lock` the same way:
//! a second poller of the same stream, started while one runs (`--follow`
//! in another terminal), is refused. Two pollers would read the same shards
//! from the same checkpoints, each refusing the other's batches as a
//! second batch in flight.
//!
//! The lock holds the process id. A lock whose process is gone (killed,
//! crashed: the guard never ran) is stale and taken over, so a run that was
//! interrupted can always be run again. On AWS no lease is needed: the
//! Orchestrator plans a run idempotently, and a scheduler redelivery is the
//! same run, by design; an event source mapping hands a shard to one
//! invocation at a time.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The held lease; the lock is removed when it is dropped.
#[derive(Debug)]
pub struct RunLease {
    path: PathBuf,
}

/// What a lease holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    /// Run `run_id` of a REST pipeline.
    Run {
        /// Pipeline.
        pipeline: String,
        /// Run id.
        run_id: String,
    },
    /// The poller of a stream pipeline's stream.
    Stream {
        /// Pipeline.
        pipeline: String,
        /// Stream (Kinesis stream or Kafka topic).
        stream: String,
    },
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Run { pipeline, run_id } => write!(f, "run {run_id} of pipeline {pipeline}"),
            Held::Stream { pipeline, stream } => write!(f, "stream {stream} of pipeline {pipeline}"),
        }
    }
}

/// Another process holds the run (or the stream).
#[derive(Debug, thiserror::Error)]
#[error(
    "{held} is in flight in process {pid} (lock {}); {}",
    path.display(),
    match held {
        Held::Run { .. } => "wait for it, or run another time (an ad-hoc run's id has milliseconds; --scheduled-at names one)",
        Held::Stream { .. } => "one poller reads a stream at a time: stop that one (Ctrl-C) or wait for it to reach the end of the stream",
    }
)]
pub struct InFlight {
    /// What is held.
    pub held: Held,
    /// The process holding it (0: one that is still writing the lock).
    pub pid: u32,
    /// The lock file.
    pub path: PathBuf,
}

impl RunLease {
    /// Takes the lease of run `run_id` of `pipeline` in `lake`.
    ///
    /// # Errors
    /// [`InFlight`] when a live process holds it; I/O errors (as
    /// [`InFlight`] never hides them) are returned as `std::io::Error`.
    pub fn take(lake: &Path, pipeline: &str, run_id: &str) -> Result<Result<Self, InFlight>, std::io::Error> {
        let path = lake.join("_runs").join(pipeline).join(run_id).join("running.lock");
        Self::take_at(path, Held::Run { pipeline: pipeline.to_string(), run_id: run_id.to_string() })
    }

    /// Takes the lease of the poller of `stream` of stream pipeline
    /// `pipeline` in `lake` (`_streams/<pipeline>/<stream>.lock`, beside
    /// the stream's checkpoint folder, which a replay removes).
    ///
    /// # Errors
    /// As [`RunLease::take`].
    pub fn take_stream(lake: &Path, pipeline: &str, stream: &str) -> Result<Result<Self, InFlight>, std::io::Error> {
        let path = lake.join("_streams").join(pipeline).join(format!("{stream}.lock"));
        Self::take_at(path, Held::Stream { pipeline: pipeline.to_string(), stream: stream.to_string() })
    }

    /// Takes the lock at `path`, for `held`.
    fn take_at(path: PathBuf, held: Held) -> Result<Result<Self, InFlight>, std::io::Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    write!(file, "{}", std::process::id())?;
                    return Ok(Ok(Self { path }));
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse::<u32>().ok());
                    // A lock without a process id yet is being made (its
                    // maker writes the id right after creating it): held,
                    // unless it is old enough to be a crash's leftover.
                    let fresh = || {
                        std::fs::metadata(&path)
                            .and_then(|m| m.modified())
                            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < std::time::Duration::from_secs(10)))
                    };
                    match holder {
                        Some(pid) if alive(pid) => return Ok(Err(InFlight { held, pid, path })),
                        None if fresh() => return Ok(Err(InFlight { held, pid: 0, path })),
                        // Stale: its process is gone, or it never got one.
                        _ => {
                            tracing::warn!(lock = %path.display(), "taking over a stale run lock");
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(err) => return Err(err),
            }
        }
        Err(std::io::Error::other(format!("{}: cannot take the run lock", path.display())))
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a `tributary run` holds run `run_id` of `pipeline` in the
/// local lake `lake` now: its lock exists and names a live process (or is
/// being made). `false` for a lock a killed process left, and for none.
pub fn in_flight(lake: &Path, pipeline: &str, run_id: &str) -> bool {
    let path = lake.join("_runs").join(pipeline).join(run_id).join("running.lock");
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(pid) => alive(pid),
            // Created, its id not written yet.
            Err(_) => true,
        },
        Err(_) => false,
    }
}

/// Whether process `pid` exists (Linux: `/proc/<pid>`; elsewhere assumed
/// alive, so a lock is never taken from a running process).
fn alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new(&format!("/proc/{pid}")).exists() } else { true }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_run_is_refused_and_a_stale_or_released_lock_is_taken() {
        let lake = tempfile::tempdir().expect("tempdir");
        let first = RunLease::take(lake.path(), "p", "20261205T060000Z").expect("io").expect("free");
        let refused = RunLease::take(lake.path(), "p", "20261205T060000Z").expect("io").expect_err("held");
        assert_eq!(refused.pid, std::process::id());
        let text = refused.to_string();
        assert!(
            text.contains("20261205T060000Z") && text.contains("in flight") && text.contains("pipeline p"),
            "{text}"
        );
        // Another run of the pipeline is not held.
        drop(RunLease::take(lake.path(), "p", "20261205T070000Z").expect("io").expect("another run"));
        drop(first);
        let again = RunLease::take(lake.path(), "p", "20261205T060000Z").expect("io").expect("released");
        std::mem::forget(again); // as a killed process leaves it
        let lock = lake.path().join("_runs/p/20261205T060000Z/running.lock");
        std::fs::write(&lock, "4294967294").expect("a pid that is no process");
        RunLease::take(lake.path(), "p", "20261205T060000Z").expect("io").expect("stale: taken over");
    }

    #[test]
    fn a_polled_stream_is_refused_to_a_second_poller_and_another_stream_is_not() {
        let lake = tempfile::tempdir().expect("tempdir");
        let first = RunLease::take_stream(lake.path(), "orders", "orders").expect("io").expect("free");
        let refused = RunLease::take_stream(lake.path(), "orders", "orders").expect("io").expect_err("held");
        let text = refused.to_string();
        assert!(
            text.contains("stream orders of pipeline orders is in flight") && text.contains("one poller"),
            "{text}"
        );
        drop(RunLease::take_stream(lake.path(), "orders", "returns").expect("io").expect("another stream"));
        drop(first);
        drop(RunLease::take_stream(lake.path(), "orders", "orders").expect("io").expect("released"));
    }
}
