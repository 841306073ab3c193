//! Incremental loading state kept in the lake, per pipeline.
//!
//! | object | written by | key |
//! |---|---|---|
//! | a page's highest cursor value | Request, before it forwards the page | `_state/<pipeline>/<run_id>/page-<page>.json` |
//! | the pipeline's cursor | whoever completes the run ([`crate::ledger::record_page`], [`crate::ledger::complete_if_done`]) | `_state/<pipeline>.json` |
//!
//! A run's pages each record the highest value of the spec's
//! `incremental.cursor_field` among their records; when the run completes,
//! the highest of them replaces the pipeline's cursor if it is higher. The
//! Orchestrator binds the cursor (or `incremental.start` before the first
//! completed run) into the next run's `incremental.param`. Only completed
//! runs move the cursor, so a failed run is fetched again from the same
//! point (at-least-once: records at the boundary may come twice), and a
//! truncated run only when what it missed lies above it ([`fold_run`]).
//!
//! Values compare as numbers when both are numbers, else as text (use
//! ISO 8601 UTC timestamps or integers as cursors).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ports::{ObjectStore, PortError};
use contracts::RunId;

use crate::keys;

/// The stored cursor of a pipeline or a page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CursorState {
    /// The highest cursor value seen.
    pub max: Value,
    /// A page's lowest cursor value (absent for the pipeline's cursor, and
    /// in page states written before it was kept): whether a run's pages
    /// came in ascending cursor order ([`fold_run`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Value>,
    /// The run that set it.
    pub run_id: RunId,
}

/// What a completed run did not fetch of its window, for [`fold_run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Nothing: every page the vendor offered is in.
    Nothing,
    /// Pages after its last one (`strategy.max_pages` reached, a cursor
    /// that cycled).
    AfterItsPages,
    /// Records between its pages: the vendor served shorter pages than
    /// asked (a page-size cap), so offsets skipped records.
    BetweenItsPages,
}

/// Orders two cursor values: numerically when both are numbers, else by
/// their text (strings without quotes); but a value that reads as neither
/// a number nor a date (`2026-12-01`, and a time after it) sorts below
/// every one that does. A trial's one `"not-a-date"` among timestamps was
/// the highest as text (`n` after `2`), became the cursor, and every later
/// run asked the vendor for records since `not-a-date`: none were fetched
/// again. Such a record is persisted as any other; it only does not move
/// the cursor. A pipeline whose cursor is free text (no value reads as a
/// date or number) orders by text as before.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
        return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    }
    match (orderable(a), orderable(b)) {
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    text(a).cmp(&text(b))
}

/// Whether a cursor value reads as a number or starts with a date
/// (`YYYY-MM-DD`), the kinds that order as instants ([`compare`]).
fn orderable(value: &Value) -> bool {
    value.is_number()
        || value.as_str().is_some_and(|text| {
            text.get(..10).is_some_and(|date| chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok())
        })
}

/// A cursor value as a query parameter value.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The highest value at `pointer` among `records` (nulls and absent fields
/// skipped).
pub fn max_of<'a>(records: impl IntoIterator<Item = &'a Value>, pointer: &str) -> Option<Value> {
    records
        .into_iter()
        .filter_map(|record| record.pointer(pointer))
        .filter(|value| !value.is_null())
        .max_by(|a, b| compare(a, b))
        .cloned()
}

fn encode(key: &str, state: &CursorState) -> Result<bytes::Bytes, PortError> {
    serde_json::to_vec(state)
        .map(bytes::Bytes::from)
        .map_err(|err| PortError::permanent("encode cursor state", key.to_string(), err))
}

async fn read(store: &dyn ObjectStore, key: &str) -> Result<Option<CursorState>, PortError> {
    match store.get(key).await {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| PortError::permanent("read cursor state", key.to_string(), err)),
        Err(PortError::NotFound { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Records a page's highest cursor value.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn record_page(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    page: u32,
    max: Value,
    min: Option<Value>,
) -> Result<(), PortError> {
    let key = keys::state_page_key(pipeline, run_id, page);
    store.put(&key, encode(&key, &CursorState { max, min, run_id: run_id.clone() })?).await
}

/// The pipeline's cursor, if a completed run set one.
///
/// # Errors
/// [`PortError`] from the store, or an unreadable state object.
pub async fn current(store: &dyn ObjectStore, pipeline: &str) -> Result<Option<CursorState>, PortError> {
    read(store, &keys::state_key(pipeline)).await
}

/// Whether run `run_id` of an incremental pipeline is superseded: it did
/// not complete (`completed` false), and the run that last moved the
/// pipeline's cursor (`cursor_run`, from [`current`]) came after it, so
/// that run asked for this run's window again. Sending the superseded
/// run's dead letters back would store its records twice (`status` says
/// so; `dlq redrive` skips them). Runs are ordered by their scheduled
/// times ([`RunId::is_after`]); a run id of another form is never
/// superseded.
pub fn superseded(run_id: &str, completed: bool, cursor_run: &RunId) -> bool {
    !completed && RunId::new(run_id).is_ok_and(|run| cursor_run.is_after(&run))
}

/// Folds a completed run's page cursors into the pipeline's cursor, when
/// higher, unless records the run did not fetch could lie below it:
/// - [`Missing::BetweenItsPages`]: never moved (the skipped records are
///   anywhere in the window);
/// - [`Missing::AfterItsPages`]: moved only when the pages came in
///   ascending cursor order (each page's lowest value at or above the
///   page before's highest), so the pages not fetched hold higher values;
///   a vendor that lists newest first would otherwise have its older
///   records skipped by every later run.
///
/// Returns the pipeline's cursor after the fold, and for a truncated run
/// a sentence for its reason: why the cursor was held back, or that it
/// moved and why that is safe.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn fold_run(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    missing: Missing,
) -> Result<(Option<CursorState>, Option<String>), PortError> {
    let mut pages: Vec<(u32, CursorState)> = Vec::new();
    for key in store.list(&keys::state_run_prefix(pipeline, run_id)).await? {
        let index =
            key.rsplit('/').next().and_then(|name| name.strip_prefix("page-")?.strip_suffix(".json")?.parse().ok());
        if let (Some(index), Some(page)) = (index, read(store, &key).await?) {
            pages.push((index, page));
        }
    }
    pages.sort_by_key(|(index, _)| *index);
    let existing = current(store, pipeline).await?;
    let Some(highest) = pages.iter().map(|(_, page)| &page.max).max_by(|a, b| compare(a, b)).cloned() else {
        return Ok((existing, None));
    };
    if existing.as_ref().is_some_and(|e| compare(&e.max, &highest) != Ordering::Less) {
        return Ok((existing, None));
    }
    let ascending = pages
        .windows(2)
        .all(|pair| pair[1].1.min.as_ref().is_some_and(|min| compare(min, &pair[0].1.max) != Ordering::Less));
    let held = match missing {
        Missing::Nothing => None,
        Missing::BetweenItsPages => Some("the vendor's pages skipped records between them"),
        Missing::AfterItsPages if ascending => None,
        Missing::AfterItsPages => {
            Some("the pages it did not fetch may hold lower values (its pages were not in ascending cursor order)")
        }
    };
    if let Some(why) = held {
        let stays = existing.as_ref().map_or_else(|| "incremental.start".to_string(), |e| text(&e.max));
        let reason = format!(
            "the incremental cursor stays at {stays} (not {}): {why}, so the next run asks for this window again",
            text(&highest)
        );
        tracing::warn!(pipeline, run_id = %run_id, reason, "incremental cursor held back");
        return Ok((existing, Some(reason)));
    }
    let state = CursorState { max: highest, min: None, run_id: run_id.clone() };
    let key = keys::state_key(pipeline);
    store.put(&key, encode(&key, &state)?).await?;
    tracing::info!(pipeline, run_id = %run_id, cursor = %text(&state.max), "incremental cursor moved");
    // A truncated run that moved it says so, and why that is safe.
    let said = (missing == Missing::AfterItsPages).then(|| {
        format!(
            "the incremental cursor moved to {}: the run's pages came in ascending cursor order, so the pages it did \
             not fetch hold higher values, which the next run asks for",
            text(&state.max)
        )
    });
    Ok((Some(state), said))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_compare_as_numbers_or_text() {
        assert_eq!(compare(&json!(10), &json!(9.5)), Ordering::Greater);
        assert_eq!(compare(&json!("2026-11-02T00:00:00Z"), &json!("2026-10-31T23:59:59Z")), Ordering::Greater);
        let records = [json!({"u": 3}), json!({"u": null}), json!({}), json!({"u": 12})];
        assert_eq!(max_of(&records, "/u"), Some(json!(12)));
        assert_eq!(max_of(&[json!({})], "/u"), None);
        // A value that reads as no date or number never takes the cursor
        // from one that does (a trial's "not-a-date" froze the pipeline).
        let records = [json!({"u": "2026-12-01T00:00:00Z"}), json!({"u": "not-a-date"}), json!({"u": "2026-12-04"})];
        assert_eq!(max_of(&records, "/u"), Some(json!("2026-12-04")));
        assert_eq!(compare(&json!("not-a-date"), &json!(5)), Ordering::Less);
        // Free text only: ordered as text.
        assert_eq!(max_of(&[json!({"u": "abc"}), json!({"u": "abd"})], "/u"), Some(json!("abd")));
    }
}
