//! `tributary dlq list|show|redrive|resolve`: the dead-letter archive
//! Notify keeps in the lake (`_dead_letters/`, see
//! [`tributary_core::dead_letters`]), on a local lake or a deployed stack's
//! bucket.
//!
//! A redrive sends each chosen letter back where it failed: a work queue's
//! letter to that queue (its body and own attributes, without tributary's
//! failure attributes); a failed trigger (a Lambda asynchronous invocation
//! record of the Orchestrator, or an EventBridge Scheduler dead-letter
//! event) to the Orchestrator's queue, which starts the run it stood for.
//! Each redrive is recorded in the entry (`redriven`), and a letter already
//! redriven is skipped unless asked again. A letter is sent before it is
//! marked: if the marking fails, a second redrive sends it again, which the
//! pipeline's idempotent keys absorb (at-least-once, like everything else).
//!
//! A letter is resolved ([`DeadLetter::resolved`]) when its run recovers:
//! locally, a redrive after which the run is complete with no new dead
//! letter of it, or a re-run that completes the run
//! ([`resolve_recovered`]); anywhere, by an operator (`tributary dlq
//! resolve`, [`resolve_selected`]), which asks for the run to be complete
//! unless forced. A resolved letter is not redriven again unless asked.

use std::collections::BTreeSet;

use serde_json::Value;

use tributary_core::dead_letters::{self, DeadLetter, Redrive, ResolvedBy};
use tributary_core::ports::{ObjectStore, PortError, QueueMessage, QueueSender};
use tributary_core::topology;

/// Which letters a command acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// Message ids or archive keys; empty: every letter that matches the
    /// other filters.
    pub ids: Vec<String>,
    /// Only this DLQ (`persist-dlq`, or `<stack>-persist-dlq` on AWS).
    pub dlq: Option<String>,
    /// Only letters naming this pipeline.
    pub pipeline: Option<String>,
    /// Only letters naming this run id.
    pub run: Option<String>,
    /// Include letters already redriven or resolved.
    pub again: bool,
}

/// Archived letters matching `selection`, oldest first, with their keys.
///
/// # Errors
/// [`PortError`] from the lake; an id that matches nothing is
/// [`PortError::NotFound`] naming it.
pub async fn select(store: &dyn ObjectStore, selection: &Selection) -> Result<Vec<(String, DeadLetter)>, PortError> {
    let mut chosen = Vec::new();
    if selection.ids.is_empty() {
        for key in dead_letters::list(store, selection.dlq.as_deref()).await? {
            chosen.push((key.clone(), dead_letters::read(store, &key).await?));
        }
    } else {
        for id in &selection.ids {
            chosen.push(dead_letters::find(store, id).await?);
        }
    }
    chosen.retain(|(_, letter)| {
        selection.dlq.as_ref().is_none_or(|dlq| &letter.dlq == dlq)
            && selection.pipeline.as_ref().is_none_or(|p| letter.pipeline.as_ref() == Some(p))
            && selection.run.as_ref().is_none_or(|r| letter.run_id.as_ref() == Some(r))
    });
    Ok(chosen)
}

/// Characters of a reason `dlq list` shows; a longer one ends in `…` and
/// the command that shows it whole.
pub const LISTED_REASON_CHARS: usize = 240;

/// The reason as `dlq list` shows it: on one line, up to
/// [`LISTED_REASON_CHARS`], a cut marked as one (a cut at 80 characters,
/// unmarked, hid the cause of a merge's failure behind its context).
fn shown_reason(reason: &str) -> String {
    let line = reason.replace('\n', " ");
    if line.chars().count() <= LISTED_REASON_CHARS {
        return line;
    }
    let cut: String = line.chars().take(LISTED_REASON_CHARS).collect();
    format!("{cut}… (dlq show ID: the whole reason)")
}

/// The letters as a text table: message id, DLQ, function, pipeline, run,
/// page, sent time, redrives, what resolved it (`-`: open), and the reason
/// (one line, up to [`LISTED_REASON_CHARS`], a cut marked).
pub fn table(letters: &[(String, DeadLetter)]) -> String {
    let mut text = format!(
        "{:<38} {:<18} {:<12} {:<24} {:<20} {:>5} {:<24} {:>8} {:<11}  reason\n",
        "message id", "dlq", "function", "pipeline", "run", "page", "sent", "redriven", "resolved"
    );
    for (_, letter) in letters {
        let reason = shown_reason(letter.reason.as_deref().unwrap_or("(none recorded)"));
        let resolved = letter.resolved.as_ref().map_or_else(|| "-".to_string(), |r| r.by.to_string());
        text.push_str(&format!(
            "{:<38} {:<18} {:<12} {:<24} {:<20} {:>5} {:<24} {:>8} {:<11}  {}\n",
            letter.message_id,
            letter.dlq,
            letter.function,
            letter.pipeline.as_deref().unwrap_or("-"),
            letter.run_id.as_deref().unwrap_or("-"),
            letter.page.map_or_else(|| "-".to_string(), |p| p.to_string()),
            letter.sent_at.as_deref().unwrap_or("-"),
            letter.redriven.len(),
            resolved,
            reason
        ));
    }
    text
}

/// Where a letter goes back to: a logical queue of the topology and the
/// message to send.
///
/// # Errors
/// A sentence saying why the letter cannot be sent back (a freshness
/// check, which its schedule runs again; a letter from an unknown queue).
pub fn redrive_target(letter: &DeadLetter) -> Result<(&'static str, QueueMessage), String> {
    let parsed: Option<Value> = serde_json::from_str(&letter.body).ok();
    if parsed.as_ref().is_some_and(|v| v.get("oversize_row").is_some()) {
        return Err("a query row too wide for one message cannot be sent again: select fewer or narrower columns and re-run the pipeline".into());
    }
    // A Lambda asynchronous invocation record: its requestPayload is the trigger.
    if let Some(payload) =
        parsed.as_ref().filter(|v| v.get("requestContext").is_some()).and_then(|v| v.get("requestPayload"))
    {
        return trigger(payload, letter);
    }
    // An EventBridge Scheduler dead-letter event: the body is the input.
    if letter.function == "scheduler"
        && let Some(input) = &parsed
    {
        return trigger(input, letter);
    }
    match letter.source_queue_logical() {
        Some(queue) => Ok((queue, letter.redrive_message())),
        None => Err(format!(
            "its source queue {:?} is not one of tributary's work queues; send its body by hand if it is yours",
            letter.source_queue
        )),
    }
}

fn trigger(payload: &Value, letter: &DeadLetter) -> Result<(&'static str, QueueMessage), String> {
    if payload.get("freshness_check").is_some() || payload.pointer("/detail/freshness_check").is_some() {
        return Err("a failed freshness check is run again by its own schedule, not redriven".into());
    }
    if payload.get("source").and_then(Value::as_str) != Some("aws.scheduler") {
        return Err(format!(
            "the {} trigger is not a scheduler event (source \"aws.scheduler\"); run the pipeline with `tributary trigger`",
            letter.function
        ));
    }
    Ok((topology::ORCHESTRATOR_QUEUE, QueueMessage { body: payload.to_string(), attributes: Default::default() }))
}

/// What happened to one letter of a redrive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Archive key.
    pub key: String,
    /// Message id.
    pub message_id: String,
    /// Where it went (queue URL or name), or why not.
    pub result: Result<String, String>,
    /// Not sent because it was resolved or redriven already (not a
    /// failure: `--again` sends it).
    pub skipped: bool,
}

/// Sends each selected letter back through `queue` (to the address
/// `address` gives for its logical queue: a name locally, the stack's URL
/// on AWS) and records the redrive in its entry. Letters already redriven
/// are skipped unless `selection.again`, and so is an open letter of a
/// page (same function, pipeline, run and page) that a newer open letter
/// of the selection stands for: each attempt of a run that failed on a
/// page leaves a letter for it, and sending them all sent the page that
/// many times (a trial: 5 open letters became 10, a redrive of all of
/// them 16). The older ones are resolved with the run.
///
/// # Errors
/// [`PortError`] from selecting; a letter that cannot be sent is an
/// [`Outcome`] with the reason, not an error.
pub async fn redrive(
    store: &dyn ObjectStore,
    queue: &dyn QueueSender,
    address: &dyn Fn(&'static str) -> Result<String, String>,
    selection: &Selection,
) -> Result<Vec<Outcome>, PortError> {
    let mut outcomes = Vec::new();
    // Incremental pipelines' cursors, read once each.
    let mut cursors: std::collections::BTreeMap<String, Option<contracts::RunId>> = std::collections::BTreeMap::new();
    let selected = select(store, selection).await?;
    let newest = newest_open_per_page(&selected);
    for (key, mut letter) in selected {
        let outcome =
            |result| Outcome { key: key.clone(), message_id: letter.message_id.clone(), result, skipped: false };
        let skip = |why| Outcome { skipped: true, ..outcome(Err(why)) };
        if !selection.again
            && let Some(newer) = page_of(&letter).and_then(|page| newest.get(&page)).filter(|newer| **newer != key)
        {
            outcomes.push(skip(format!(
                "a newer open dead letter of the same page stands for it ({newer}): the page is sent once; this \
                 one is resolved with the run (--again sends it too)"
            )));
            continue;
        }
        if !selection.again
            && let (Some(pipeline), Some(run_id)) = (&letter.pipeline, &letter.run_id)
        {
            if !cursors.contains_key(pipeline) {
                let cursor = tributary_core::state::current(store, pipeline).await?.map(|state| state.run_id);
                cursors.insert(pipeline.clone(), cursor);
            }
            if let Some(later) = cursors[pipeline].as_ref()
                && tributary_core::state::superseded(run_id, run_complete(store, pipeline, run_id).await?, later)
            {
                outcomes.push(skip(format!(
                    "run {run_id} of incremental pipeline {pipeline} is superseded: run {later} moved its cursor \
                     since, asking for this run's window again, so a redrive would store its records twice \
                     (once read: tributary dlq resolve --force --run {run_id}; --again sends it anyway)"
                )));
                continue;
            }
        }
        if let Some(resolution) = letter.resolved.as_ref().filter(|_| !selection.again) {
            outcomes.push(skip(format!("resolved ({}) at {} (--again sends it anyway)", resolution.by, resolution.at)));
            continue;
        }
        if letter.is_redriven() && !selection.again {
            outcomes.push(skip(format!(
                "already redriven to {} at {} (--again sends it once more)",
                letter.redriven.last().map_or("", |r| r.queue.as_str()),
                letter.redriven.last().map_or("", |r| r.at.as_str())
            )));
            continue;
        }
        let (logical, message) = match redrive_target(&letter) {
            Ok(target) => target,
            Err(reason) => {
                outcomes.push(outcome(Err(reason)));
                continue;
            }
        };
        let to = match address(logical) {
            Ok(to) => to,
            Err(reason) => {
                outcomes.push(outcome(Err(reason)));
                continue;
            }
        };
        if let Err(err) = queue.send_messages(&to, vec![message]).await {
            outcomes.push(outcome(Err(format!("sending to {to}: {err}"))));
            continue;
        }
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        letter.redriven.push(Redrive { at, queue: to.clone() });
        let result = match dead_letters::archive(store, &letter).await {
            Ok(_) => Ok(to),
            Err(err) => Err(format!("sent to {to}, but the archive entry could not be marked: {err}")),
        };
        outcomes.push(Outcome { key, message_id: letter.message_id.clone(), result, skipped: false });
    }
    Ok(outcomes)
}

/// A page a letter failed on: its function, pipeline, run and page
/// index; `None` for a letter that names no page (a trigger, a query row).
type PageOf = (String, String, String, u32);

fn page_of(letter: &DeadLetter) -> Option<PageOf> {
    Some((letter.function.clone(), letter.pipeline.clone()?, letter.run_id.clone()?, letter.page?))
}

/// For each page with open letters among `letters`, the key of the newest
/// (by the time it was sent to its DLQ, else archived).
fn newest_open_per_page(letters: &[(String, DeadLetter)]) -> std::collections::HashMap<PageOf, String> {
    let mut newest: std::collections::HashMap<PageOf, (&str, &str)> = std::collections::HashMap::new();
    for (key, letter) in letters.iter().filter(|(_, letter)| letter.resolved.is_none()) {
        let Some(page) = page_of(letter) else { continue };
        let at = letter.sent_at.as_deref().unwrap_or(&letter.archived_at);
        let entry = newest.entry(page).or_insert((at, key));
        if (at, key.as_str()) > *entry {
            *entry = (at, key);
        }
    }
    newest.into_iter().map(|(page, (_, key))| (page, key.to_string())).collect()
}

/// The outcomes as lines: `redriven <id> -> <queue>` or `skipped <id>: why`.
pub fn report(outcomes: &[Outcome]) -> String {
    lines(outcomes, "redriven", |id, to| format!("redriven {id} -> {to}"))
}

/// A line per outcome (`done(message id, result)`, or `skipped <id>:
/// why`), then how many of them were `verb`.
fn lines(outcomes: &[Outcome], verb: &str, done: impl Fn(&str, &str) -> String) -> String {
    let mut text = String::new();
    for outcome in outcomes {
        match &outcome.result {
            Ok(result) => text.push_str(&format!("{}\n", done(&outcome.message_id, result))),
            Err(why) => text.push_str(&format!("skipped  {}: {why}\n", outcome.message_id)),
        }
    }
    let ok = outcomes.iter().filter(|o| o.result.is_ok()).count();
    text.push_str(&format!("{ok} of {} dead letters {verb}\n", outcomes.len()));
    text
}

/// Whether run `run_id` of `pipeline` is complete (its `_SUCCESS` marker);
/// `false` for a text that is no run id.
///
/// # Errors
/// [`PortError`] from the lake, other than the marker not being there.
pub async fn run_complete(store: &dyn ObjectStore, pipeline: &str, run_id: &str) -> Result<bool, PortError> {
    let Ok(run_id) = contracts::RunId::new(run_id) else { return Ok(false) };
    match store.get(&tributary_core::keys::success_key(pipeline, &run_id)).await {
        Ok(_) => Ok(true),
        Err(PortError::NotFound { .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// The archive's keys now: what a recovery attempt compares the archive
/// with afterwards ([`resolve_recovered`]).
///
/// # Errors
/// [`PortError`] from the lake.
pub async fn archive_keys(store: &dyn ObjectStore) -> Result<BTreeSet<String>, PortError> {
    Ok(dead_letters::list(store, None).await?.into_iter().collect())
}

/// After a local attempt to recover run `run_id` of `pipeline` (a redrive
/// of its letters, or a re-run of it), with `before` the archive's keys
/// when the attempt began: when the run is complete and the attempt added
/// no dead letter of it, marks its open letters resolved by `by` (only
/// those in `only`, when given: the letters a redrive sent back to a run
/// that was already complete). Returns how many it marked.
///
/// # Errors
/// [`PortError`] from the lake.
pub async fn resolve_recovered(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &str,
    before: &BTreeSet<String>,
    only: Option<&BTreeSet<String>>,
    by: ResolvedBy,
) -> Result<usize, PortError> {
    if !run_complete(store, pipeline, run_id).await? {
        return Ok(0);
    }
    let mut open = Vec::new();
    for key in dead_letters::list(store, None).await? {
        let Ok(letter) = dead_letters::read(store, &key).await else { continue };
        if !letter.is_of_run(pipeline, run_id) {
            continue;
        }
        if !before.contains(&key) {
            // The attempt failed again somewhere: the run has not recovered.
            return Ok(0);
        }
        if !letter.is_resolved() && only.is_none_or(|only| only.contains(&key)) {
            open.push((key, letter));
        }
    }
    for (key, letter) in &mut open {
        dead_letters::resolve(store, key, letter, by, None).await?;
    }
    Ok(open.len())
}

/// Marks each selected letter resolved by an operator (`tributary dlq
/// resolve`), with `note`. Unless `force`, a letter is marked only when it
/// names a run and that run is complete: otherwise its data is not in the
/// lake, and the outcome says how to recover it. A letter already
/// resolved is left as it is.
///
/// # Errors
/// [`PortError`] from the lake; a letter that is not marked is an
/// [`Outcome`] with the reason.
pub async fn resolve_selected(
    store: &dyn ObjectStore,
    selection: &Selection,
    note: Option<&str>,
    force: bool,
) -> Result<Vec<Outcome>, PortError> {
    let mut outcomes = Vec::new();
    for (key, mut letter) in select(store, selection).await? {
        let message_id = letter.message_id.clone();
        let refused = match (&letter.resolved, letter.pipeline.as_deref(), letter.run_id.as_deref()) {
            (Some(resolution), _, _) => Some(format!("already resolved ({}) at {}", resolution.by, resolution.at)),
            _ if force => None,
            (None, Some(pipeline), Some(run_id)) => (!run_complete(store, pipeline, run_id).await?).then(|| {
                format!(
                    "run {run_id} of {pipeline} is not complete: recover it first (`tributary dlq redrive`, or \
                     run it again with --scheduled-at), or --force marks the letter resolved anyway"
                )
            }),
            (None, _, _) => {
                Some("it names no run whose completion could be checked; --force marks it resolved anyway".into())
            }
        };
        let result = match refused {
            Some(why) => Err(why),
            None => dead_letters::resolve(store, &key, &mut letter, ResolvedBy::Operator, note.map(str::to_string))
                .await
                .map(|()| "resolved".to_string())
                .map_err(|err| format!("the archive entry could not be marked: {err}")),
        };
        outcomes.push(Outcome { key, message_id, result, skipped: false });
    }
    Ok(outcomes)
}

/// [`resolve_selected`]'s outcomes as lines: `resolved <id>` or `skipped
/// <id>: why`.
pub fn resolve_report(outcomes: &[Outcome]) -> String {
    lines(outcomes, "resolved", |id, _| format!("resolved {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(function: &str, source_queue: &str, body: Value) -> DeadLetter {
        DeadLetter {
            function: function.into(),
            source_queue: source_queue.into(),
            body: body.to_string(),
            ..DeadLetter::default()
        }
    }

    /// A trial finding: status said not to redrive a failed run of an
    /// incremental pipeline a later run had superseded, but the redrive
    /// went ahead and stored every record twice.
    #[tokio::test]
    async fn a_superseded_run_of_an_incremental_pipeline_is_not_redriven_unless_asked_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        let mut failed = letter("request", "request", serde_json::json!({"pipeline": "orders"}));
        (failed.pipeline, failed.run_id, failed.message_id, failed.dlq) =
            (Some("orders".into()), Some("20261201T060000Z".into()), "m-1".into(), "request-dlq".into());
        failed.sent_at = Some("2026-12-01T06:00:05Z".into());
        tributary_core::dead_letters::archive(&store, &failed).await.expect("archive");
        let broker = adapters::local::Broker::new();
        let address = |queue: &'static str| Ok::<String, String>(queue.to_string());
        // A later run moved the pipeline's cursor.
        let later = contracts::RunId::new("20261202T060000Z").expect("id");
        tributary_core::state::record_page(&store, "orders", &later, 0, serde_json::json!(7), None)
            .await
            .expect("page");
        tributary_core::state::fold_run(&store, "orders", &later, tributary_core::state::Missing::Nothing)
            .await
            .expect("fold");
        let outcomes = redrive(&store, &broker, &address, &Selection::default()).await.expect("redrive");
        assert_eq!(outcomes.len(), 1);
        let why = outcomes[0].result.as_ref().expect_err("skipped");
        assert!(outcomes[0].skipped && why.contains("superseded") && why.contains("20261202T060000Z"), "{why}");
        let again = Selection { again: true, ..Selection::default() };
        let outcomes = redrive(&store, &broker, &address, &again).await.expect("redrive");
        assert!(!outcomes[0].skipped, "--again sends it: {:?}", outcomes[0].result);
    }

    /// A trial finding: each attempt of a run left a letter for its failed
    /// page, and a redrive of them all sent the page once per attempt.
    #[tokio::test]
    async fn only_the_newest_open_letter_of_a_page_is_redriven() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        for (id, sent_at, page) in [
            ("m-old", "2026-12-01T06:00:05Z", 3),
            ("m-new", "2026-12-01T07:00:05Z", 3),
            ("m-other", "2026-12-01T06:00:06Z", 4),
        ] {
            let mut failed = letter("persist", "persist", serde_json::json!({"pipeline": "orders", "page": page}));
            (failed.pipeline, failed.run_id, failed.page, failed.message_id, failed.dlq) =
                (Some("orders".into()), Some("20261201T060000Z".into()), Some(page), id.into(), "persist-dlq".into());
            failed.sent_at = Some(sent_at.into());
            tributary_core::dead_letters::archive(&store, &failed).await.expect("archive");
        }
        let broker = adapters::local::Broker::new();
        broker.create_queue(adapters::local::QueueConfig {
            name: "persist".into(),
            visibility_timeout: std::time::Duration::from_secs(30),
            max_message_bytes: 256 * 1024,
            redrive: None,
        });
        let address = |queue: &'static str| Ok::<String, String>(queue.to_string());
        let outcomes = redrive(&store, &broker, &address, &Selection::default()).await.expect("redrive");
        assert_eq!(broker.depth("persist"), 2, "one message per page");
        let sent: Vec<&str> = outcomes.iter().filter(|o| o.result.is_ok()).map(|o| o.message_id.as_str()).collect();
        assert_eq!(sent.len(), 2, "{outcomes:?}");
        assert!(sent.contains(&"m-new") && sent.contains(&"m-other"), "{sent:?}");
        let old = outcomes.iter().find(|o| o.message_id == "m-old").expect("the older letter");
        let why = old.result.as_ref().expect_err("skipped");
        assert!(old.skipped && why.contains("newer open dead letter of the same page"), "{why}");
        // --again sends the older one too (the newer ones are redriven
        // already, and --again sends them once more).
        let again = Selection { again: true, ..Selection::default() };
        let outcomes = redrive(&store, &broker, &address, &again).await.expect("redrive");
        assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
    }

    #[test]
    fn the_listed_reason_is_one_line_and_a_cut_says_so() {
        let short = "resolve target.primary_key failed:\n/deleted names no column";
        assert_eq!(shown_reason(short), "resolve target.primary_key failed: /deleted names no column");
        let long = format!("{}: the cause", "context ".repeat(40));
        let shown = shown_reason(&long);
        assert!(shown.ends_with("… (dlq show ID: the whole reason)"), "{shown}");
        assert_eq!(shown.chars().count(), LISTED_REASON_CHARS + "… (dlq show ID: the whole reason)".chars().count());
        let mut letter = letter("persist", "persist", Value::Null);
        letter.reason = Some(short.into());
        let table = table(&[("k".into(), letter)]);
        assert!(table.lines().nth(1).is_some_and(|line| line.ends_with("/deleted names no column")), "{table}");
    }

    #[test]
    fn a_work_queue_letter_goes_back_to_its_queue_and_a_failed_trigger_to_the_orchestrator() {
        let page = letter("persist", "stack-persist", serde_json::json!({"pipeline": "p"}));
        assert_eq!(redrive_target(&page).expect("work queue").0, "persist");

        let spec =
            serde_json::json!({"source": "aws.scheduler", "time": "2026-11-29T06:00:00Z", "detail": {"pipeline": "p"}});
        let record = serde_json::json!({"requestContext": {"functionArn": "arn:aws:lambda:us-east-1:1:function:s-Orchestrator"},
            "requestPayload": spec, "responsePayload": {"errorMessage": "boom"}});
        let (queue, message) = redrive_target(&letter("orchestrator", "", record)).expect("async record");
        assert_eq!((queue, message.body), ("orchestrator", spec.to_string()));
        assert_eq!(redrive_target(&letter("scheduler", "", spec.clone())).expect("scheduler").0, "orchestrator");

        let freshness = serde_json::json!({"time": "2026-11-29T07:30:00Z", "freshness_check": {"pipeline": "p"}});
        let why = redrive_target(&letter("scheduler", "", freshness)).expect_err("freshness");
        assert!(why.contains("freshness"), "{why}");
        let why = redrive_target(&letter("unknown", "someone-elses", serde_json::json!({}))).expect_err("unknown");
        assert!(why.contains("someone-elses"), "{why}");
    }
}
