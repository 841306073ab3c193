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
//! point (at-least-once: records at the boundary may come twice).
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
    /// The run that set it.
    pub run_id: RunId,
}

/// Orders two cursor values: numerically when both are numbers, else by
/// their text (strings without quotes).
pub fn compare(a: &Value, b: &Value) -> Ordering {
    if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
        return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    }
    text(a).cmp(&text(b))
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
) -> Result<(), PortError> {
    let key = keys::state_page_key(pipeline, run_id, page);
    store.put(&key, encode(&key, &CursorState { max, run_id: run_id.clone() })?).await
}

/// The pipeline's cursor, if a completed run set one.
///
/// # Errors
/// [`PortError`] from the store, or an unreadable state object.
pub async fn current(store: &dyn ObjectStore, pipeline: &str) -> Result<Option<CursorState>, PortError> {
    read(store, &keys::state_key(pipeline)).await
}

/// Folds a completed run's page cursors into the pipeline's cursor, when
/// higher. Returns the pipeline's cursor after the fold.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn fold_run(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Option<CursorState>, PortError> {
    let mut highest: Option<Value> = None;
    for key in store.list(&keys::state_run_prefix(pipeline, run_id)).await? {
        if let Some(page) = read(store, &key).await?
            && highest.as_ref().is_none_or(|h| compare(&page.max, h) == Ordering::Greater)
        {
            highest = Some(page.max);
        }
    }
    let existing = current(store, pipeline).await?;
    let Some(highest) = highest else { return Ok(existing) };
    if existing.as_ref().is_some_and(|e| compare(&e.max, &highest) != Ordering::Less) {
        return Ok(existing);
    }
    let state = CursorState { max: highest, run_id: run_id.clone() };
    let key = keys::state_key(pipeline);
    store.put(&key, encode(&key, &state)?).await?;
    tracing::info!(pipeline, run_id = %run_id, cursor = %text(&state.max), "incremental cursor moved");
    Ok(Some(state))
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
    }
}
