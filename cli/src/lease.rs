//! A local run's lease: `<lake>/_runs/<pipeline>/<run_id>/running.lock`,
//! made with `O_EXCL` when `tributary run` starts a run and removed when it
//! ends, so a second `tributary run` of the same run id (two terminals, the
//! same `--scheduled-at`) is refused while the first is in flight instead of
//! mixing its pages into it.
//!
//! The lock holds the process id. A lock whose process is gone (killed,
//! crashed: the guard never ran) is stale and taken over, so a run that was
//! interrupted can always be run again. On AWS no lease is needed: the
//! Orchestrator plans a run idempotently, and a scheduler redelivery is the
//! same run, by design.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The held lease; the lock is removed when it is dropped.
#[derive(Debug)]
pub struct RunLease {
    path: PathBuf,
}

/// Another process holds the run.
#[derive(Debug, thiserror::Error)]
#[error(
    "run {run_id} of pipeline {pipeline} is in flight in process {pid} (lock {}); wait for it, or run another \
     time (an ad-hoc run's id has milliseconds; --scheduled-at names one)",
    path.display()
)]
pub struct InFlight {
    /// Pipeline.
    pub pipeline: String,
    /// Run id.
    pub run_id: String,
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
        let dir = lake.join("_runs").join(pipeline).join(run_id);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("running.lock");
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
                        Some(pid) if alive(pid) => {
                            return Ok(Err(InFlight {
                                pipeline: pipeline.to_string(),
                                run_id: run_id.to_string(),
                                pid,
                                path,
                            }));
                        }
                        None if fresh() => {
                            return Ok(Err(InFlight {
                                pipeline: pipeline.to_string(),
                                run_id: run_id.to_string(),
                                pid: 0,
                                path,
                            }));
                        }
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
}
