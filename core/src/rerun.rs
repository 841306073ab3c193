//! Re-running a completed run at its scheduled time (a backfill of a bad
//! day) so that its new fetch *replaces* the run's rows in its Iceberg
//! table, in one `overwrite` snapshot, instead of being refused.
//!
//! A run id is its scheduled time, so a completed run asked for again is
//! normally a redelivery: its pages' new records are refused
//! (`CompletedRun`). A trigger that carries a re-run token (`tributary run
//! --replace`, `tributary trigger --replace`: the scheduler event's
//! `"replace"` field) reopens the run instead, through a [`Rerun`] record
//! at [`keys::rerun_key`] whose state moves forward only:
//!
//! 1. [`RerunState::Requested`] written (the run still complete);
//! 2. the run reopened ([`ledger::reopen_run`]: `_SUCCESS`, manifest and
//!    page receipts deleted), and its page count, sending checkpoint and
//!    commit claim deleted (the new fetch has its own);
//! 3. [`RerunState::Reopened`]: the Orchestrator plans the run as usual;
//! 4. Persist's completion finds the record, commits the run as a re-run
//!    (the table's rows of the run swapped for the new ones, or merged
//!    again, the snapshot summary carrying `tributary.rerun=<token>`),
//!    deletes the old run's raw and quarantine pages the new fetch did not
//!    rewrite, then writes [`RerunState::Committed`].
//!
//! Under at-least-once delivery: the same trigger delivered again finds its
//! token: it resumes step 2 when the record is `Requested`, starts nothing
//! when the run is complete again, and plans the run again (the usual
//! redelivery) while it is running. A completion delivered again finds the
//! snapshot by its token and commits nothing. A new token re-runs again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ports::{ObjectStore, PortError};
use crate::{keys, ledger};
use contracts::RunId;

/// A run's re-run record, `_runs/<pipeline>/<run_id>/rerun.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rerun {
    /// The trigger's re-run token (free text, at most [`MAX_TOKEN_CHARS`]).
    pub token: String,
    /// When the re-run was first asked for.
    pub requested_at: DateTime<Utc>,
    /// How far it went.
    pub state: RerunState,
}

/// Where a [`Rerun`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerunState {
    /// Asked for; the run may still be complete.
    Requested,
    /// The run was reopened: its completion commits it as a re-run.
    Reopened,
    /// The re-run's snapshot is committed.
    Committed,
}

/// Longest re-run token taken (it lands in a snapshot summary and a key's
/// JSON body; 128 is far more than a time stamp and a UUID).
pub const MAX_TOKEN_CHARS: usize = 128;

/// What [`begin`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begun {
    /// The run was not complete: nothing to replace, it runs as usual.
    NotComplete,
    /// The run was reopened for this token: plan it.
    Reopened,
    /// This token's re-run is under way (a redelivered trigger): plan it
    /// again, as any redelivered start.
    Running,
    /// This token's re-run completed already: start nothing.
    Done,
}

/// Reopens `pipeline`'s completed run `run_id` for the re-run `token`
/// (steps 1 to 3 of the module documentation); idempotent per token. A
/// run that is not complete but stuck (a receipt for every page, its
/// completion refused: [`ledger::reopen_stuck_run`]) is reopened the same
/// way; any other incomplete run is [`Begun::NotComplete`].
///
/// # Errors
/// [`PortError`] from the store; a token that is empty or longer than
/// [`MAX_TOKEN_CHARS`] is [`PortError::Permanent`].
pub async fn begin(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Begun, PortError> {
    let key = keys::rerun_key(pipeline, run_id);
    if token.is_empty() || token.chars().count() > MAX_TOKEN_CHARS {
        return Err(PortError::permanent_msg(
            "re-run a completed run",
            key,
            format!("the re-run token must be 1 to {MAX_TOKEN_CHARS} characters, found {}", token.chars().count()),
        ));
    }
    let complete = store.get(&keys::success_key(pipeline, run_id)).await.is_ok();
    let mut record = match read(store, pipeline, run_id).await? {
        Some(found) if found.token == token => match (found.state, complete) {
            (RerunState::Requested, _) => found,
            (_, true) => return Ok(Begun::Done),
            (_, false) => return Ok(Begun::Running),
        },
        // A run stuck with every page in and its completion refused
        // (a trial: a `primary_key` naming no column, fixed in the spec)
        // is fetched again too; any other incomplete run runs as usual
        // (its missing pages are sent again).
        _ if !complete && !ledger::is_stuck(store, pipeline, run_id).await? => return Ok(Begun::NotComplete),
        _ => Rerun { token: token.to_string(), requested_at: now, state: RerunState::Requested },
    };
    write(store, pipeline, run_id, &record).await?;
    if !ledger::reopen_run(store, pipeline, run_id).await? {
        ledger::reopen_stuck_run(store, pipeline, run_id).await?;
    }
    // The new fetch has its own page count and sends its pages anew: the
    // old count would complete it early (or late), the old sending
    // checkpoint would send none; the old commit claim would hold it off.
    for key in [
        keys::expected_key(pipeline, run_id),
        keys::pages_sent_key(pipeline, run_id),
        keys::table_commit_claim_key(pipeline, run_id),
    ] {
        store.delete(&key).await?;
    }
    record.state = RerunState::Reopened;
    write(store, pipeline, run_id, &record).await?;
    tracing::info!(pipeline, %run_id, token, "the completed run was reopened to be re-run");
    Ok(Begun::Reopened)
}

/// Reopens `pipeline`'s completed run `run_id` so that its raw pages,
/// sent again through Persist's queue (`tributary replay --stack`),
/// commit as a re-run of token `token`: the record written
/// [`RerunState::Reopened`] first, then [`ledger::reopen_run`] (the page
/// count kept: the same pages come back) and the old commit claim deleted.
/// Returns whether the run was complete (an incomplete one is left alone).
///
/// # Errors
/// [`PortError`] from the store.
pub async fn reopen_for_replay(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    token: &str,
    now: DateTime<Utc>,
) -> Result<bool, PortError> {
    if store.get(&keys::success_key(pipeline, run_id)).await.is_err() {
        return Ok(false);
    }
    let record = Rerun { token: token.to_string(), requested_at: now, state: RerunState::Reopened };
    write(store, pipeline, run_id, &record).await?;
    ledger::reopen_run(store, pipeline, run_id).await?;
    store.delete(&keys::table_commit_claim_key(pipeline, run_id)).await?;
    Ok(true)
}

/// The run's re-run token while it is reopened (state
/// [`RerunState::Reopened`]): its completion commits it as a re-run.
///
/// # Errors
/// [`PortError`] from the store; an unreadable record is permanent.
pub async fn reopened_token(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Option<String>, PortError> {
    Ok(read(store, pipeline, run_id)
        .await?
        .filter(|record| record.state == RerunState::Reopened)
        .map(|record| record.token))
}

/// Marks the re-run `token` committed (step 4's end); a record of another
/// token is left alone.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn mark_committed(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    token: &str,
) -> Result<(), PortError> {
    match read(store, pipeline, run_id).await? {
        Some(mut record) if record.token == token && record.state != RerunState::Committed => {
            record.state = RerunState::Committed;
            write(store, pipeline, run_id, &record).await
        }
        _ => Ok(()),
    }
}

/// Deletes the run's objects under `prefix` (a [`keys::run_pages_prefix`])
/// whose page is not one of `pages`: what the old fetch wrote that the
/// re-run did not rewrite. Returns the keys deleted.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn drop_pages_not_in(
    store: &dyn ObjectStore,
    prefix: &str,
    pages: &std::collections::BTreeSet<u32>,
) -> Result<Vec<String>, PortError> {
    let mut dropped = Vec::new();
    for key in store.list(prefix).await? {
        let rest = key.get(prefix.len()..).unwrap_or_default();
        let digits = rest.find(|c: char| !c.is_ascii_digit()).map_or(rest, |end| &rest[..end]);
        let page = digits.parse::<u32>().ok();
        if page.is_some_and(|page| !pages.contains(&page)) {
            store.delete(&key).await?;
            dropped.push(key);
        }
    }
    Ok(dropped)
}

async fn read(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<Option<Rerun>, PortError> {
    ledger::read_record(store, &keys::rerun_key(pipeline, run_id)).await
}

async fn write(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId, record: &Rerun) -> Result<(), PortError> {
    ledger::write_record(store, &keys::rerun_key(pipeline, run_id), record).await
}
