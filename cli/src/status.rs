//! `tributary status`: recent runs and their state, from the lake's run
//! ledger (`_runs/`: receipts, expected page counts, completion markers)
//! and the dead-letter archive (`_dead_letters/`), on a local lake or an S3
//! one alike; with `--stack`, the subscriptions of the stack's operations
//! and alerts topics too ([`subscriptions_report`]), so an e-mail
//! subscription nobody confirmed is seen.

use std::collections::{BTreeMap, BTreeSet};

use tributary_core::dead_letters::ResolvedBy;
use tributary_core::keys;
use tributary_core::ledger::{Expected, PageReceipt};
use tributary_core::ports::{ObjectStore, PortError};

/// One run as the lake records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStatus {
    /// Pipeline.
    pub pipeline: String,
    /// Run id.
    pub run_id: String,
    /// Pages with a receipt.
    pub pages_persisted: u64,
    /// Pages planned, when the run knew it up front (not for Athena-driven
    /// runs, whose row count is only known at the end).
    pub pages_planned: Option<u64>,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records quarantined.
    pub records_quarantined: u64,
    /// Dead letters archived for the run (`_dead_letters/`), resolved ones
    /// included.
    pub dead_letters: u64,
    /// Of them, the open ones whose error was permanent
    /// ([`DeadLetter::is_permanent`]): a redrive sends the same body and
    /// fails the same way.
    ///
    /// [`DeadLetter::is_permanent`]: tributary_core::dead_letters::DeadLetter::is_permanent
    pub open_permanent: u64,
    /// Of them, the resolved ones ([`DeadLetter::resolved`]).
    ///
    /// [`DeadLetter::resolved`]: tributary_core::dead_letters::DeadLetter::resolved
    pub resolved: u64,
    /// What resolved them: how the run recovered.
    pub recovered_by: BTreeSet<ResolvedBy>,
    /// Whether the ledger marks the run complete (`_SUCCESS`, manifest
    /// written).
    pub completed: bool,
    /// Whether a completion has begun replacing the run's page files with
    /// coalesced ones (its replacement record, `replacement.json`, is
    /// written). Without `completed` the replacement is unfinished: the
    /// dataset folder may hold a coalesced file beside page files it
    /// replaces until a retry of that completion deletes them.
    pub completing: bool,
    /// Why the run stopped before the source ended, as the ledger says
    /// ([`Expected::truncated`]): `max_pages`, a cursor that cycled, ...
    pub truncated: Option<String>,
    /// Records the vendor announced ([`Expected::records`]): a complete
    /// run whose pages held fewer is truncated (a page size cap).
    pub records_announced: Option<u64>,
    /// Why the run's pages hold records more than once
    /// ([`tributary_core::ledger::duplicated`]: pages with the same records,
    /// or more records than announced), as the run's manifest and its
    /// alert say it.
    pub duplicated: Option<String>,
    /// For a run of an incremental pipeline that did not complete: the
    /// later run that moved the pipeline's cursor since. A failed run
    /// leaves the cursor where it was, so that run asked for this run's
    /// window again: redriving this run's dead letters would land its
    /// records a second time.
    pub superseded_by: Option<String>,
    /// A run of a local lake that did not complete and that no `tributary
    /// run` holds now (its process was killed, or stopped by Ctrl-C or
    /// SIGTERM): `interrupted`, not `running` (a trial's killed run showed
    /// `running` with no process left). Set by [`mark_interrupted`]; never
    /// for a stack's lake, whose runs the functions drive.
    pub interrupted: bool,
    /// Whether the run's pages wait for a table commit (an Iceberg
    /// dataset: their receipts' `table_commit`), which `--replace` can
    /// re-run.
    pub table_commit: bool,
}

/// Marks [`RunStatus::interrupted`] the runs of the local lake `lake` that
/// did not complete, had no dead letter (a failure says its own cause) and
/// are not held by a live `tributary run` ([`crate::lease::in_flight`]).
pub fn mark_interrupted(runs: &mut [RunStatus], lake: &std::path::Path) {
    for run in runs.iter_mut().filter(|run| !run.completed && run.dead_letters == 0 && !run.completing) {
        run.interrupted = !crate::lease::in_flight(lake, &run.pipeline, &run.run_id);
    }
}

impl RunStatus {
    /// Dead letters not resolved.
    pub fn open_dead_letters(&self) -> u64 {
        self.dead_letters.saturating_sub(self.resolved)
    }

    /// `complete` (the ledger's marker: every page persisted, even when
    /// an earlier attempt dead-lettered some and a re-run fixed them; the
    /// dead letters are still counted), `failed` (open dead letters),
    /// `completing` (every page in, the page files being replaced by the
    /// coalesced ones: never `complete` while the folder may hold a row
    /// twice), `interrupted` (a local run no process holds now:
    /// [`RunStatus::interrupted`]), `incomplete` (pages missing) or
    /// `running` (total not known yet);
    /// `quarantined` for a complete run whose records were all quarantined
    /// (nothing reached the table); `duplicated` for a run whose pages hold
    /// records more than once ([`RunStatus::duplicated`]: not a success,
    /// complete or not); `truncated` for a complete run that
    /// stopped at `strategy.max_pages` with more pages offered, or whose
    /// pages held fewer records than the vendor announced.
    pub fn state(&self) -> &'static str {
        let short = self
            .records_announced
            .is_some_and(|announced| self.records_persisted + self.records_quarantined < announced);
        match self.pages_planned {
            _ if self.completed && self.records_persisted == 0 && self.records_quarantined > 0 => "quarantined",
            _ if self.duplicated.is_some() => "duplicated",
            _ if self.completed && (self.truncated.is_some() || short) => "truncated",
            _ if self.completed => "complete",
            _ if self.open_dead_letters() > 0 => "failed",
            _ if self.completing => "completing",
            _ if self.interrupted => "interrupted",
            Some(_) => "incomplete",
            None => "running",
        }
    }
}

/// Runs found in the lake, newest first (by run id): the `limit` most
/// recent, then up to `limit` older ones that did not complete (failed,
/// interrupted or incomplete: they need action however many runs came
/// after them); with `pipeline`, that pipeline's only (its
/// `_runs/<pipeline>/` folder is all that is listed).
///
/// # Errors
/// [`PortError`] from the store; an unreadable receipt is skipped with a
/// warning.
pub async fn recent_runs(
    store: &dyn ObjectStore,
    pipeline: Option<&str>,
    limit: usize,
) -> Result<Vec<RunStatus>, PortError> {
    let mut runs: BTreeMap<(String, String), RunStatus> = BTreeMap::new();
    let mut receipts: BTreeMap<(String, String), Vec<PageReceipt>> = BTreeMap::new();
    let prefix = pipeline.map_or_else(|| keys::RUNS_PREFIX.to_string(), keys::pipeline_runs_prefix);
    let listed = store.list(&prefix).await?;
    // A page delivered before and after receipts moved into shard folders
    // has a receipt in each layout: it counts once, as the later says.
    let in_shard_folders: std::collections::BTreeSet<(&str, u32)> = listed
        .iter()
        .filter(|key| key.contains("/receipts-"))
        .filter_map(|key| Some((key.split("/receipts-").next()?, keys::receipt_page(key)?)))
        .collect();
    for key in &listed {
        // _runs/<pipeline>/<run_id>/<object>
        let parts: Vec<&str> = key.splitn(4, '/').collect();
        let [_, pipeline, run_id, object] = parts.as_slice() else { continue };
        let superseded = keys::receipt_page(key).is_some_and(|page| {
            !object.contains('/') && in_shard_folders.contains(&(key.rsplit_once('/').map_or("", |(run, _)| run), page))
        });
        if superseded {
            continue;
        }
        let run = runs.entry((run_id.to_string(), pipeline.to_string())).or_insert_with(|| RunStatus {
            pipeline: pipeline.to_string(),
            run_id: run_id.to_string(),
            ..RunStatus::default()
        });
        if *object == keys::SUCCESS_MARKER {
            run.completed = true;
            continue;
        }
        if *object == keys::REPLACEMENT_FILE {
            run.completing = true;
            continue;
        }
        if *object == keys::EXPECTED_FILE {
            let bytes = store.get(key).await?;
            match serde_json::from_slice::<Expected>(&bytes) {
                Ok(expected) => {
                    run.pages_planned = Some(expected.pages);
                    run.truncated = expected.truncated;
                    run.records_announced = expected.records;
                }
                Err(_) => tracing::warn!(key, "unreadable expected page count skipped"),
            }
            continue;
        }
        // Receipts only: not the probe and query records or the shard
        // summaries beside them.
        if keys::receipt_page(key).is_none() {
            continue;
        }
        let bytes = store.get(key).await?;
        let Ok(receipt) = serde_json::from_slice::<PageReceipt>(&bytes) else {
            tracing::warn!(key, "unreadable page receipt skipped");
            continue;
        };
        run.pages_persisted += 1;
        run.records_persisted += receipt.records_persisted;
        run.records_quarantined += receipt.records_quarantined;
        run.table_commit |= receipt.table_commit;
        receipts.entry((run_id.to_string(), pipeline.to_string())).or_default().push(receipt);
    }
    for (id, run) in &mut runs {
        let landed = run.records_persisted + run.records_quarantined;
        // A completed run that holds fewer records than announced (a page
        // size cap, found at completion): its reason is the manifest's
        // (one GET, for such runs only), and says whether the incremental
        // cursor stayed.
        // So does a run without a count whose empty page came before
        // records (the incremental cursor may have been held back for it).
        let gap = || {
            run.records_announced.is_none()
                && tributary_core::ledger::empty_page_before_records(receipts.get(id).map_or(&[][..], Vec::as_slice))
                    .is_some()
        };
        if run.completed
            && (run.records_announced.is_some_and(|announced| landed < announced) || gap())
            && let Ok(run_id) = contracts::RunId::new(run.run_id.clone())
        {
            match store.get(&keys::manifest_key(&run.pipeline, &run_id)).await {
                Ok(bytes) => match serde_json::from_slice::<tributary_core::ledger::Manifest>(&bytes) {
                    Ok(manifest) => run.truncated = manifest.truncated.or(run.truncated.take()),
                    Err(_) => tracing::warn!(run = %run_id, "unreadable manifest skipped"),
                },
                Err(PortError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        run.duplicated = tributary_core::ledger::duplicated(
            receipts.get(id).map_or(&[][..], Vec::as_slice),
            run.records_announced,
            landed,
        );
    }
    for key in tributary_core::dead_letters::list(store, None).await? {
        let Ok(letter) = tributary_core::dead_letters::read(store, &key).await else {
            tracing::warn!(key, "unreadable dead letter skipped");
            continue;
        };
        let open_permanent = letter.resolved.is_none() && letter.is_permanent();
        let (Some(of), Some(run_id)) = (letter.pipeline, letter.run_id) else { continue };
        if pipeline.is_some_and(|p| p != of) {
            continue;
        }
        let pipeline = of;
        let run = runs.entry((run_id.clone(), pipeline.clone())).or_insert_with(|| RunStatus {
            pipeline,
            run_id,
            ..RunStatus::default()
        });
        run.dead_letters += 1;
        if open_permanent {
            run.open_permanent += 1;
        }
        if let Some(resolution) = letter.resolved {
            run.resolved += 1;
            run.recovered_by.insert(resolution.by);
        }
    }
    // Incremental pipelines: one GET of the cursor per pipeline listed.
    let pipelines: BTreeSet<String> = runs.values().map(|run| run.pipeline.clone()).collect();
    for pipeline in pipelines {
        let Some(cursor) = tributary_core::state::current(store, &pipeline).await? else { continue };
        for run in runs.values_mut().filter(|run| run.pipeline == pipeline) {
            run.superseded_by = superseded_by(run, &cursor.run_id);
        }
    }
    // The `limit` most recent runs, then older runs that did not complete,
    // at most `limit` of them: a run that needs action is listed however
    // many came after it (a trial's interrupted run was hidden behind 20
    // stream windows, and with it the command that finishes it).
    let mut newest_first = runs.into_values().rev();
    let mut listed: Vec<RunStatus> = newest_first.by_ref().take(limit).collect();
    listed.extend(newest_first.filter(|run| !run.completed).take(limit));
    Ok(listed)
}

/// What `tributary status --pipeline NAME` says when the lake has no run
/// and no stream checkpoint of `name`: that, and the pipelines it has runs
/// of (a mistyped name reads as such, not as an empty history).
///
/// # Errors
/// [`PortError`] from listing `_runs/`.
pub async fn no_runs_of(store: &dyn ObjectStore, name: &str) -> Result<String, PortError> {
    let listed = store.list(keys::RUNS_PREFIX).await?;
    let known: std::collections::BTreeSet<&str> =
        listed.iter().filter_map(|key| key.strip_prefix(keys::RUNS_PREFIX)?.split('/').next()).collect();
    let known: Vec<&str> = known.into_iter().collect();
    Ok(if known.is_empty() {
        format!("\nno run of pipeline `{name}`: this lake has no runs yet\n")
    } else {
        format!("\nno run of pipeline `{name}` in this lake; it has runs of: {}\n", known.join(", "))
    })
}

/// SNS's `SubscriptionArn` of a subscription whose endpoint has not
/// confirmed it yet (`ListSubscriptionsByTopic`): SNS delivers nothing to it.
pub const PENDING_CONFIRMATION: &str = "PendingConfirmation";

/// A subscription of one of the stack's topics: `(protocol, endpoint,
/// subscription ARN)` as `ListSubscriptionsByTopic` lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// `email`, `sms`, `sqs`, …
    pub protocol: String,
    /// The address, number, ARN or URL.
    pub endpoint: String,
    /// Its ARN once confirmed, else [`PENDING_CONFIRMATION`].
    pub subscription_arn: String,
}

impl Subscription {
    /// Whether SNS delivers to it: it has an ARN (not
    /// [`PENDING_CONFIRMATION`], nor `Deleted`).
    pub fn confirmed(&self) -> bool {
        self.subscription_arn.starts_with("arn:")
    }
}

/// The subscriptions of the stack's topics (`topic`, its subscriptions) as
/// text, and whether each topic has at least one confirmed subscription
/// with none pending: a line per subscription, then a line per problem —
/// a subscription pending confirmation (confirm it from the e-mail AWS
/// sent; until then SNS drops what it would deliver there), a topic nobody
/// receives.
pub fn subscriptions_report(topics: &[(String, Vec<Subscription>)]) -> (String, bool) {
    let mut text = format!("\n{:<12} {:<8} {:<40} {}\n", "topic", "protocol", "endpoint", "subscription");
    let mut problems = Vec::new();
    for (topic, subscriptions) in topics {
        for s in subscriptions {
            let state = if s.confirmed() { "confirmed" } else { s.subscription_arn.as_str() };
            text.push_str(&format!("{topic:<12} {:<8} {:<40} {state}\n", s.protocol, s.endpoint));
            if s.subscription_arn == PENDING_CONFIRMATION {
                problems.push(format!(
                    "{topic}: {} {} is pending confirmation: follow the link in the e-mail AWS sent (SNS drops what it would deliver there until then)",
                    s.protocol, s.endpoint
                ));
            }
        }
        if !subscriptions.iter().any(Subscription::confirmed) {
            problems.push(format!("{topic}: no confirmed subscription: what it carries reaches nobody"));
        }
    }
    let ok = problems.is_empty();
    for problem in problems {
        text.push_str(&format!("WARNING {problem}\n"));
    }
    (text, ok)
}

/// The line `status --stack` ends with: where the stack's CloudWatch
/// dashboard is (its `DashboardUrl` output), or, for a stack deployed
/// before the template had one, how to get it.
pub fn dashboard_line(stack: &str, url: Option<&str>) -> String {
    match url {
        Some(url) => format!("\ndashboard: {url}\n"),
        None => format!(
            "\ndashboard: stack {stack} has no DashboardUrl output (deployed from an older template); \
             deploy infra/template.yaml again (sam build && sam deploy) to add it\n"
        ),
    }
}

/// The runs as a text table: pipeline, run, state, pages, records,
/// quarantined records, dead letters, of them resolved, and how the run
/// recovered (what resolved its letters; `-` for none).
pub fn table(runs: &[RunStatus]) -> String {
    let mut text = format!(
        "{:<28} {:<20} {:<11} {:>9} {:>9} {:>11} {:>12} {:>8}  {}\n",
        "pipeline", "run", "state", "pages", "records", "quarantined", "dead letters", "resolved", "recovered by"
    );
    for run in runs {
        let pages = match run.pages_planned {
            Some(planned) => format!("{}/{planned}", run.pages_persisted),
            None => run.pages_persisted.to_string(),
        };
        let recovered: Vec<String> = run.recovered_by.iter().map(ToString::to_string).collect();
        text.push_str(&format!(
            "{:<28} {:<20} {:<11} {:>9} {:>9} {:>11} {:>12} {:>8}  {}\n",
            run.pipeline,
            run.run_id,
            run.state(),
            pages,
            run.records_persisted,
            run.records_quarantined,
            run.dead_letters,
            run.resolved,
            if recovered.is_empty() { "-".to_string() } else { recovered.join(", ") }
        ));
    }
    text
}

/// Where the commands of [`recovery_hints`] act: a local lake or a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// `--lake <dir>`.
    Lake(String),
    /// `--stack <name>`.
    Stack(String),
}

/// The run that moved an incremental pipeline's cursor (`cursor_run`), when
/// it came after `run` and `run` did not complete ([`RunStatus::superseded_by`]).
fn superseded_by(run: &RunStatus, cursor_run: &contracts::RunId) -> Option<String> {
    tributary_core::state::superseded(&run.run_id, run.completed, cursor_run).then(|| cursor_run.to_string())
}

/// A line per run with open dead letters saying how to recover it: read
/// why (`dlq list --run`), then send its letters back (`dlq redrive`) or
/// run it again for its scheduled time (`run`/`trigger --scheduled-at`);
/// for a run complete despite them (letters of a later attempt, or a
/// recovery on AWS, which the CLI does not see), how to mark them resolved
/// once read (`dlq resolve`); and for a run whose pages hold records
/// more than once, or truncated, why (and for the former what to do).
/// Empty when no run has any of these.
pub fn recovery_hints(runs: &[RunStatus], place: &Place) -> String {
    let flag = match place {
        Place::Lake(dir) => format!("--lake {dir}"),
        Place::Stack(stack) => format!("--stack {stack}"),
    };
    let mut text = String::new();
    for run in runs {
        if let Some(reason) = &run.duplicated {
            text.push_str(&format!("\n{} run {}: duplicated: {reason}\n", run.pipeline, run.run_id));
        }
        if let Some(reason) = &run.truncated {
            text.push_str(&format!("\n{} run {}: truncated: {reason}\n", run.pipeline, run.run_id));
        }
    }
    for run in runs.iter().filter(|run| run.interrupted) {
        text.push_str(&format!(
            "\n{} run {}: interrupted (no `tributary run` holds it now; its persisted pages stay)\n",
            run.pipeline, run.run_id
        ));
        if let Some(time) = contracts::RunId::new(run.run_id.as_str()).ok().and_then(|id| id.scheduled_time()) {
            let time = contracts::RunId::scheduled_at_text(time);
            text.push_str(&format!("  finish:   tributary run SPEC --scheduled-at {time} {flag}\n"));
        }
    }
    for run in runs.iter().filter(|run| run.open_dead_letters() > 0) {
        let (pipeline, run_id, open) = (&run.pipeline, &run.run_id, run.open_dead_letters());
        text.push_str(&format!("\n{pipeline} run {run_id}: {open} open dead letter(s)\n"));
        text.push_str(&format!("  why:      tributary dlq list --run {run_id} {flag}\n"));
        if run.completed {
            text.push_str(&format!(
                "  the run is complete: once read, mark them resolved with tributary dlq resolve --all --run {run_id} {flag}\n"
            ));
            continue;
        }
        if let Some(later) = &run.superseded_by {
            text.push_str(&format!(
                "  the pipeline is incremental and run {later} moved its cursor since: that run asked for this \
                 run's window again, so a redrive would land its records twice; once read, mark them resolved with \
                 tributary dlq resolve --all --force --run {run_id} {flag}\n"
            ));
            continue;
        }
        // Every page in and still not complete: its completion was
        // refused (a commit's cause in the spec or the vendor's answers),
        // which a redrive repeats and a plain re-run does not retry; a
        // re-run with `--replace` fetches it again (a trial followed the
        // plain re-run this said).
        let stuck = run.table_commit
            && tributary_core::ledger::holds_every_page_but_incomplete(
                run.completed,
                run.pages_planned,
                run.pages_persisted,
            );
        // Every open letter permanent: the spec or the vendor's answers
        // caused them, and a redrive re-sends the same body (a trial
        // followed the redrive this said and got a second letter).
        let permanent = run.open_permanent == open;
        if stuck {
            text.push_str(
                "  every page is in: its completion failed; if the letter's cause is in the spec or the vendor's \
                 answers, fix it and re-run with --replace (a redrive would fail the same way)\n",
            );
        } else if permanent {
            text.push_str(
                "  its letters are permanent (the spec or the vendor's answers caused them): a redrive re-sends the \
                 same message and fails the same way; fix the cause, then run its time again\n",
            );
        } else {
            text.push_str(&format!("  recover:  tributary dlq redrive --all --run {run_id} {flag}\n"));
        }
        if let Some(time) = contracts::RunId::new(run_id.as_str()).ok().and_then(|id| id.scheduled_time()) {
            let time = contracts::RunId::scheduled_at_text(time);
            let command = match place {
                Place::Lake(_) => "run",
                Place::Stack(_) => "trigger",
            };
            let replace = if stuck { " --replace" } else { "" };
            let label = if stuck || permanent { "re-run:" } else { "or:    " };
            text.push_str(&format!("  {label}   tributary {command} SPEC --scheduled-at {time}{replace} {flag}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(endpoint: &str, arn: &str) -> Subscription {
        Subscription { protocol: "email".into(), endpoint: endpoint.into(), subscription_arn: arn.into() }
    }

    #[test]
    fn pending_subscriptions_and_topics_nobody_receives_are_reported() {
        let confirmed = "arn:aws:sns:us-east-1:123456789012:tributary-operations:6f1c2d3e-0000-4000-8000-000000000001";
        let topics = vec![
            ("operations".to_string(), vec![subscription("ops@example.com", confirmed)]),
            ("alerts".to_string(), vec![subscription("data@example.com", PENDING_CONFIRMATION)]),
        ];
        let (text, ok) = subscriptions_report(&topics);
        assert!(!ok);
        assert!(text.contains("operations   email    ops@example.com"), "{text}");
        assert!(text.contains("WARNING alerts: email data@example.com is pending confirmation"), "{text}");
        assert!(text.contains("WARNING alerts: no confirmed subscription"), "{text}");
        assert!(!text.contains("WARNING operations"), "{text}");
    }

    #[test]
    fn a_failed_run_of_an_incremental_pipeline_whose_cursor_moved_since_is_resolved_not_redriven() {
        let failed = RunStatus {
            pipeline: "orders".into(),
            run_id: "20261201T060000Z".into(),
            dead_letters: 2,
            ..RunStatus::default()
        };
        let later = contracts::RunId::new("20261202T060000Z").expect("id");
        let earlier = contracts::RunId::new("20261130T060000Z").expect("id");
        assert_eq!(superseded_by(&failed, &later).as_deref(), Some("20261202T060000Z"));
        assert_eq!(superseded_by(&failed, &earlier), None, "the cursor is older: the run's window is not covered");
        let done = RunStatus { completed: true, ..failed.clone() };
        assert_eq!(superseded_by(&done, &later), None);

        let place = Place::Lake("lake".into());
        let plain = recovery_hints(std::slice::from_ref(&failed), &place);
        assert!(plain.contains("tributary dlq redrive --all --run 20261201T060000Z"), "{plain}");
        let superseded = RunStatus { superseded_by: superseded_by(&failed, &later), ..failed };
        let hints = recovery_hints(&[superseded], &place);
        assert!(
            hints.contains("a redrive would land its records twice") && hints.contains("dlq resolve --all"),
            "{hints}"
        );
        assert!(!hints.contains("dlq redrive"), "{hints}");
    }

    /// A trial finding: status said to redrive a run whose one letter was
    /// permanent (a wrong `records_pointer`); the redrive re-sent the same
    /// message and failed the same way. Such a run is re-run once fixed;
    /// a run with a letter that may pass on a retry is still redriven.
    #[test]
    fn a_run_whose_open_letters_are_all_permanent_is_re_run_not_redriven() {
        let failed = RunStatus {
            pipeline: "orders".into(),
            run_id: "20261201T060000Z".into(),
            dead_letters: 1,
            open_permanent: 1,
            ..RunStatus::default()
        };
        let place = Place::Lake("lake".into());
        let hints = recovery_hints(std::slice::from_ref(&failed), &place);
        assert!(hints.contains("its letters are permanent") && !hints.contains("dlq redrive"), "{hints}");
        assert!(
            hints.contains("re-run:   tributary run SPEC --scheduled-at 2026-12-01T06:00:00Z --lake lake"),
            "{hints}"
        );
        let mixed = RunStatus { dead_letters: 2, ..failed };
        let hints = recovery_hints(&[mixed], &place);
        assert!(hints.contains("recover:  tributary dlq redrive --all --run 20261201T060000Z"), "{hints}");
    }

    #[test]
    fn every_topic_confirmed_is_no_warning() {
        let arn = "arn:aws:sns:us-east-1:123456789012:t:1";
        let topics =
            vec![("operations".to_string(), vec![subscription("a@x.io", arn), subscription("b@x.io", "Deleted")])];
        let (text, ok) = subscriptions_report(&topics);
        assert!(ok, "{text}");
        assert!(!text.contains("WARNING"), "{text}");
        let (text, ok) = subscriptions_report(&[("alerts".to_string(), Vec::new())]);
        assert!(!ok && text.contains("alerts: no confirmed subscription"), "{text}");
    }

    #[test]
    fn the_dashboard_line_links_it_or_says_how_to_get_it() {
        let url = "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards/dashboard/prod";
        assert_eq!(dashboard_line("prod", Some(url)), format!("\ndashboard: {url}\n"));
        let old = dashboard_line("prod", None);
        assert!(old.contains("stack prod has no DashboardUrl output") && old.contains("sam deploy"), "{old}");
    }
}
