//! The stream small-file rule, checked over a dataset's files: each file
//! is named after its shard window's run (`<pipeline>-<run_id>…`, the run
//! id `s-` and 16 hex digits), and that run's page receipts say how many
//! bytes of batch files the window held (`docs/streams.md`, "Small files
//! and Iceberg commits").

use tributary_core::ports::ObjectStore;

/// The files among `files` (keys or paths) whose window held less than
/// `rule` bytes of batch files, each as `<name>: <bytes>`.
///
/// # Panics
/// On a file not named after a window's run, or receipts that cannot be read.
pub async fn below_the_rule(store: &dyn ObjectStore, pipeline: &str, files: &[String], rule: u64) -> Vec<String> {
    let mut below = Vec::new();
    for file in files {
        let name = file.rsplit('/').next().unwrap_or(file);
        let run = name
            .strip_prefix(&format!("{pipeline}-"))
            .and_then(|rest| rest.get(..18))
            .unwrap_or_else(|| panic!("{name}: not a window's file of {pipeline}"));
        let run_id = contracts::RunId::new(run).expect("run id");
        let receipts = tributary_core::ledger::run_receipts(store, pipeline, &run_id).await.expect("receipts");
        let bytes: u64 = receipts.iter().map(|r| r.data_bytes).sum();
        if bytes < rule {
            below.push(format!("{name}: {bytes}"));
        }
    }
    below
}
