//! The per-message functions: a `RequestMessage` checked, called ([`crate::fetch`]) and answered —
//! a [`Decision`] taken from the message and the response alone, then applied (records forwarded,
//! next page sent, probe replied) — and an SQS batch of them ([`handle_sqs`]).

use crate::ssrf::NetworkAccess;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use bytes::Bytes;
use contracts::{
    self, CallPolicy, Continuation, Destination, HttpCall, PageRef, Payload, PersistMessage, PersistTarget,
    PlannedTotal, ProbeReply, RawRecords, RequestMessage, RequestMode, V1,
};
use serde_json::Value;
use std::borrow::Cow;
use std::time::Duration;
use tributary_core::batch::{self, RecordMeta};
use tributary_core::json::kind_of;
use tributary_core::json::tape;
use tributary_core::json::utf8::escape_invalid_utf8;
use tributary_core::keys;
use tributary_core::metrics::{self, Metrics};
use tributary_core::ports::{HttpRequest, PortError, TopicMessage};

use crate::deps::{Deps, RequestConfig};
use crate::error::RequestError;
use crate::fetch::Fetched;
use crate::page;
use crate::scrub::{self, Scrubber};
use crate::{auth, fetch, paging, pause};

/// What a handled message produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Records forwarded to Persist.
    Records {
        /// How many.
        count: usize,
        /// Whether they went by claim check.
        claim_check: bool,
    },
    /// A probe's total forwarded to the Orchestrator.
    Total(u64),
}

/// Handles an SQS batch of `RequestMessage`s, reporting only failed records.
///
/// Each record's sender is authenticated first (its `SenderId` or queue,
/// [`tributary_core::tenant`]): a sender that is not the stack nor a
/// tenant, or a tenant naming a pipeline it does not own, is refused before
/// any call, permanently (the DLQ, with the reason). Secret grants naming
/// `pipelines` then hold for authenticated pipelines only.
///
/// A vendor's pause longer than Request waits inside an invocation (a long
/// `Retry-After`) sends the message again, delayed, and the record counts
/// handled ([`crate::pause`]); a copy received with part of its pause left
/// is sent again without calling the vendor.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "request"));
    batch::for_each_message(
        event,
        deps.config.concurrency,
        dead_letters,
        |message: RequestMessage, meta: RecordMeta| async move {
            if let Err(refused) = meta.acting_for(&deps.config.tenants, &message.pipeline) {
                // Refused before any call: the sender does not own the pipeline it names.
                return Err(RequestError::from(refused));
            }
            if let Some(pause::Plan::Copy { delay, attributes }) = pause::resume(&meta.attributes)
                && send_again(&message, delay, attributes, deps).await
            {
                return Ok(());
            }
            let kept = message.clone();
            let result = handle_message(message, deps).await.map(|_| ());
            match result {
                Err(err) if err.redeliver_after().is_some() => pause_for_the_vendor(err, &kept, &meta, deps).await,
                other => other,
            }
        },
    )
    .await
}

/// A vendor asked for a pause (`Retry-After`) longer than Request waits
/// inside an invocation. The message is sent again to Request's own queue,
/// visible once the pause is over (at most 15 minutes a step), and the
/// record is handled: waiting for the vendor costs no receive
/// ([`crate::pause`]). Past 12 hours of pauses for one message, or when the
/// copy cannot be sent, the record fails and becomes visible again after
/// the pause (`ChangeMessageVisibility`, at most 12 hours) instead of after
/// the queue's visibility timeout (720 s for Request); if that change fails
/// too, the visibility timeout applies.
async fn pause_for_the_vendor(
    err: RequestError,
    message: &RequestMessage,
    meta: &RecordMeta,
    deps: Deps<'_>,
) -> Result<(), RequestError> {
    let Some(pause) = err.redeliver_after() else { return Err(err) };
    match pause::plan(&meta.attributes, pause) {
        pause::Plan::Copy { delay, attributes } => {
            if send_again(message, delay, attributes, deps).await {
                tracing::info!(
                    retry_after_secs = pause.as_secs(),
                    reason = %err,
                    "the vendor asked for a pause: the page is sent again after it (not a failure)"
                );
                return Ok(());
            }
        }
        pause::Plan::Visibility(_) => tracing::warn!(
            retry_after_secs = pause.as_secs(),
            max_paused_secs = pause::MAX_PAUSED.as_secs(),
            "the vendor has paused this page longer than it may in all: this pause counts as a failed receive"
        ),
    }
    let (Some(queue), Some(receipt)) = (deps.config.own_queue.as_deref(), meta.receipt_handle.as_deref()) else {
        return Err(err);
    };
    match deps.queue.change_visibility(queue, receipt, pause).await {
        Ok(true) => {
            tracing::info!(retry_after_secs = pause.as_secs(), "the vendor asked for a pause: redelivery after it")
        }
        Ok(false) => {}
        Err(change) => {
            tracing::warn!(error = %change, "could not change the message's visibility; redelivery after the visibility timeout")
        }
    }
    Err(err)
}

/// Sends `message` again to Request's own queue, visible after `delay`,
/// with `attributes`; whether it was sent (no own queue, a port without
/// delays or a failed send: not, and the caller falls back).
async fn send_again(
    message: &RequestMessage,
    delay: Duration,
    attributes: std::collections::BTreeMap<String, String>,
    deps: Deps<'_>,
) -> bool {
    let Some(queue) = deps.config.own_queue.as_deref() else { return false };
    let body = match serde_json::to_string(message) {
        Ok(body) => body,
        Err(err) => {
            tracing::warn!(error = %err, "could not encode the message to send it again");
            return false;
        }
    };
    let copy = tributary_core::ports::QueueMessage { body, attributes };
    match deps.queue.send_delayed(queue, copy, delay).await {
        Ok(sent) => {
            if sent {
                tracing::info!(delay_secs = delay.as_secs(), "paused: sent again to the request queue, delayed");
            }
            sent
        }
        Err(err) => {
            tracing::warn!(error = %err, "could not send the paused message again");
            false
        }
    }
}

/// Makes the call of one message and forwards the outcome to `reply_to`.
///
/// # Errors
/// [`RequestError`]; retryable ones have already been retried
/// `max_attempts - 1` times.
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id, page = message.page.map(|p| p.index)))]
pub async fn handle_message(message: RequestMessage, deps: Deps<'_>) -> Result<Outcome, RequestError> {
    let metrics = std::sync::Mutex::new(Metrics::new("request", &message.pipeline));
    let outcome = call_and_forward(&message, deps, &metrics).await;
    let mut metrics = metrics.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    metrics.property("run_id", Value::String(message.run_id.to_string()));
    if let Some(page) = message.page {
        metrics.property("page", Value::from(page.index));
    }
    if let Ok(Outcome::Records { count, .. }) = &outcome {
        metrics.count(metrics::RECORDS_FETCHED, *count as u64);
        metrics.count(metrics::PAGES_FETCHED, 1);
    }
    metrics.flush_to(&deps.config.metrics);
    outcome
}

async fn call_and_forward(
    message: &RequestMessage,
    deps: Deps<'_>,
    metrics: &std::sync::Mutex<Metrics>,
) -> Result<Outcome, RequestError> {
    check_message(message)?;
    deps.config.trust.check(message)?;
    contracts::spec::check_policy(&message.policy).map_err(|err| {
        // The spec's `request.*` fields are the message's `policy.*`.
        let (reason, source) = match err {
            contracts::spec::SpecError::Invalid { field, value, reason } => {
                (format!("`{}` = {value}: {reason}", field.replacen("request.", "policy.", 1)), None)
            }
            other => (other.to_string(), Some(other.into())),
        };
        let target = format!("{} {}", message.http.method, contracts::redacted_url(&message.http.url));
        RequestError::Refused { target, reason, source }
    })?;
    let request = http_request(message, deps.config);
    let mut fetched = fetch::fetch(message, request, deps, metrics).await?;
    let credentials = fetched.credentials.take();
    let answered = answer(message, fetched, credentials.as_ref(), deps).await;
    // A vendor's body, header or next link may echo the credentials.
    answered.map_err(|err| match &credentials {
        Some(credentials) => err.scrubbed(credentials),
        None => err,
    })
}

/// Reads the response of `message`'s call and forwards what its mode asks:
/// the body normalised (gzip, NDJSON), a [`Decision`] taken from the
/// message and the response alone ([`decide`]), then applied
/// ([`apply`]).
async fn answer(
    message: &RequestMessage,
    mut fetched: Fetched,
    credentials: Option<&auth::Credentials>,
    deps: Deps<'_>,
) -> Result<Outcome, RequestError> {
    fetched.response.body = normalize_body(&fetched.response);
    let scrubber = credentials.map_or(&scrub::NONE, auth::Credentials::scrubber);
    let decision = decide(message, &fetched, scrubber)?;
    apply(message, decision, &fetched, credentials, deps).await
}

/// What a response asks of Request, decided from the message and the
/// response alone (no I/O).
enum Decision {
    /// A probe's total (`mode: probe`), to reply with.
    Total(u64),
    /// A page of records (`mode: records`).
    Records(PageAnswer),
}

/// A page of records as the response holds it.
struct PageAnswer {
    /// The page (index, count); `PageRef::SINGLE` for a one-call run.
    page: PageRef,
    /// The body without its records (the array at `records_pointer` read
    /// as `[]`): the next link, cursor or total is read from it.
    envelope: Value,
    /// How many records.
    count: usize,
    /// The last record (`last_record` paging reads the next key there).
    last: Option<Value>,
    /// The highest value at `cursor_field` (incremental runs).
    cursor_max: Option<Value>,
    cursor_min: Option<Value>,
    /// Their JSON text, as Persist gets it.
    raw: RawRecords,
    /// FNV-1a of `raw` (the next page's `previous_page`).
    digest: String,
    /// The vendor served the page before again (json-server does past the
    /// last page): the run ends here and this page is forwarded empty.
    repeats_previous: bool,
}

/// The [`Decision`] for `message`'s response.
///
/// The body is read once by the tokenizer ([`page::Doc`]), never held
/// whole as a `serde_json::Value`: its records stay text (copied once, for
/// forwarding, after the tokens are dropped), and only the envelope and the
/// last record become values. Any of the response's text an error quotes
/// is scrubbed of the credentials (`scrubber`) before it is cut.
///
/// # Errors
/// [`RequestError::NotJson`], a missing or non-array `records_pointer`, a
/// missing or non-numeric total (permanent).
fn decide(message: &RequestMessage, fetched: &Fetched, scrubber: &Scrubber) -> Result<Decision, RequestError> {
    let target = &fetched.target;
    let body = &fetched.response.body;
    let doc = match fetched.empty {
        true => None,
        false => Some(page::Doc::parse(body).map_err(|err| RequestError::NotJson {
            target: target.clone(),
            error: err,
            excerpt: excerpt(body, scrubber),
        })?),
    };
    match &message.mode {
        RequestMode::Probe { total_pointer, total_header, records_pointer, .. } => {
            let total = match (&doc, total_header) {
                (None, _) => 0,
                (Some(_), Some(name)) => header_total(&fetched.response.headers, name, target, scrubber)?,
                (Some(doc), None) => read_total(doc.value_at(total_pointer).as_ref(), total_pointer, target)?,
            };
            // The probe's page is page 0: a records pointer that finds
            // nothing here would fail every page the same way.
            if let (Some(doc), Some(pointer)) = (&doc, records_pointer)
                && total > 0
                && let Err(err) = doc.records(pointer, None)
                && (err != page::NotRecords::Null || reports_errors(doc))
            {
                return Err(not_records(doc, target, pointer, err));
            }
            Ok(Decision::Total(total))
        }
        RequestMode::Records { records_pointer, next, planned_total, cursor_field, .. } => {
            let pointer = records_pointer.as_deref().unwrap_or("");
            let (envelope, records) = match doc {
                None => (Value::Null, page::Records::NONE),
                Some(doc) => {
                    let refused = |err: page::NotRecords| not_records(&doc, target, pointer, err);
                    match doc.records(pointer, cursor_field.as_deref()) {
                        // `"data": null` for an empty list, unless the body
                        // says it failed (GraphQL's `{"data": null,
                        // "errors": [...]}`): then it is refused, not empty.
                        Err(page::NotRecords::Null) if !reports_errors(&doc) => {
                            (doc.null_as_empty(pointer), page::Records::NONE)
                        }
                        records => (doc.envelope(pointer).map_err(refused)?, records.map_err(refused)?),
                    }
                    // The tokens are dropped here, before the records' text is copied.
                }
            };
            if let Some(planned) = planned_total {
                check_drift(planned, &envelope, &fetched.response.headers, message.page);
            }
            let text = match records.range.clone() {
                Some(range) => String::from_utf8_lossy(&body[range]).into_owned(),
                None => "[]".into(),
            };
            let raw = RawRecords::from_text(text).map_err(encode_error)?;
            let raw = without_credentials(raw, scrubber, target)?;
            let digest = contracts::digest::fnv1a_hex(raw.as_str().as_bytes());
            let repeats_previous = next
                .as_ref()
                .is_some_and(|next| records.count > 0 && next.previous_page.as_deref() == Some(digest.as_str()));
            let page = message.page.unwrap_or(PageRef::SINGLE);
            let page::Records { count, last, cursor_max, cursor_min, .. } = records;
            Ok(Decision::Records(PageAnswer {
                page,
                envelope,
                count,
                last,
                cursor_max,
                cursor_min,
                raw,
                digest,
                repeats_previous,
            }))
        }
    }
}

/// Carries out `decision`: the probe's reply sent to `reply_to`; or the
/// page's cursor recorded, its records forwarded (inline or as a claim
/// check) and the next page sent (cursor runs), or the run ended when the
/// page repeats the one before.
///
/// # Errors
/// Queue, topic and store failures (transient); an unsafe next link
/// (permanent).
async fn apply(
    message: &RequestMessage,
    decision: Decision,
    fetched: &Fetched,
    credentials: Option<&auth::Credentials>,
    deps: Deps<'_>,
) -> Result<Outcome, RequestError> {
    match (decision, &message.mode) {
        (Decision::Total(total), RequestMode::Probe { context, .. }) => {
            let reply = ProbeReply {
                version: V1,
                pipeline: message.pipeline.clone(),
                run_id: message.run_id.clone(),
                run_date: message.run_date,
                total,
                context: context.clone(),
            };
            send(&message.reply_to, encode(&reply)?, deps).await?;
            tracing::info!(total, "probe answered");
            Ok(Outcome::Total(total))
        }
        (Decision::Records(answer), RequestMode::Records { target: dataset, next, cursor_field, .. }) => {
            let PageAnswer { page, envelope, count, last, cursor_max, cursor_min, raw, digest, repeats_previous } =
                answer;
            if cursor_field.is_some() {
                record_cursor(message, page, cursor_max, cursor_min, deps).await?;
            }
            if repeats_previous {
                tracing::warn!(
                    page = page.index,
                    "this page repeats the page before: the vendor has no more; stopping"
                );
                // A vendor that resends its last page past the end offers no
                // next page there; one that still offers one ignored this
                // page's cursor or offset, and what lies past it was not
                // fetched: the run is truncated, said (a trial's run ended
                // there as a success).
                let offers_more = next.as_ref().is_some_and(|next| {
                    // Only a next page the vendor offers (a token, a URL, a
                    // link): offset and page-number paging compute theirs.
                    let offered = matches!(
                        next.paging,
                        contracts::NextPage::BodyToken { .. }
                            | contracts::NextPage::BodyUrl { .. }
                            | contracts::NextPage::LinkHeader { .. }
                    );
                    offered
                        && !fetched.empty
                        && paging::next_call(
                            &next.paging,
                            &message.http,
                            &fetched.url,
                            &envelope,
                            &fetched.response.headers,
                            page.index,
                            count,
                            last.as_ref(),
                        )
                        .ok()
                        .flatten()
                        .is_some()
                });
                let truncated = offers_more.then(|| {
                    let before = page.index.saturating_sub(1);
                    format!(
                        "page {} (the {}) holds exactly the records of page {before} while the vendor still offers a \
                         next page: the vendor ignored the page's cursor or offset, so paging stopped and the run \
                         holds pages 0 to {before}; records past them were not fetched",
                        page.index,
                        tributary_core::ledger::ordinal(page.index.saturating_add(1))
                    )
                });
                // Offsets and page numbers: page 1 repeating a full page 0
                // is what a vendor that ignores the parameter does (a
                // parameter name the vendor does not know: a trial's run
                // ended complete with 10 of 50 records); a vendor that
                // serves its last page again past the end (json-server)
                // repeats page 1 or later, unless it holds one page only.
                // Not when page 1 was asked for as the check of a short
                // page 0 (a vendor's cap, `paging::numbered_next_size`):
                // page 0 was then called with another size, and its repeat
                // is the end of a vendor that serves its last page again
                // (json-server), not an ignored offset.
                let numbered = next.as_ref().is_some_and(|next| match &next.paging {
                    contracts::NextPage::Numbered { params, size } => {
                        let mut first = message.http.clone();
                        first.query.extend(params.page_query(*size, 0));
                        next.followed.contains(&call_digest(&first))
                    }
                    _ => false,
                });
                let truncated = truncated.or_else(|| {
                    (numbered && page.index == 1).then(|| {
                        "page 1 holds exactly the records of page 0: the vendor ignored the offset or page number \
                         asked (check strategy.next's parameter names against the vendor's documentation), or it \
                         holds one page only and serves it again past the end (json-server does: a larger size \
                         then makes the run whole); the run holds page 0 only"
                            .to_string()
                    })
                });
                // Its count is recorded first, so Persist's receipt of this
                // last page completes the run (with its coalescing or table
                // commit); a count recorded after every page is in would
                // complete it here, where no commit is made.
                end_run(message, page.index.saturating_add(1), truncated, deps).await?;
                let empty = RawRecords::from_text("[]".into()).map_err(encode_error)?;
                let claim_check = forward_records(message, page, dataset, empty, deps).await?;
                return Ok(Outcome::Records { count: 0, claim_check });
            }
            let continuation = match next {
                Some(next) => {
                    let this = ThisPage { page, records: count, last: last.as_ref(), digest: &digest };
                    continue_with(message, next, fetched, &envelope, this, credentials, deps).await?
                }
                None => None,
            };
            let claim_check = forward_records(message, page, dataset, raw, deps).await?;
            if let (Some(next_page), Some(next)) = (continuation, next) {
                send(&Destination::Queue { queue: next.queue.clone() }, encode(&next_page)?, deps).await?;
                tracing::info!(next_page = page.index + 1, "next page sent");
            }
            tracing::info!(records = count, claim_check, "page fetched");
            Ok(Outcome::Records { count, claim_check })
        }
        // `decide` answers a message's own mode.
        (Decision::Total(_), RequestMode::Records { .. }) | (Decision::Records(_), RequestMode::Probe { .. }) => {
            Err(RequestError::Refused {
                target: fetched.target.clone(),
                reason: "a decision for another mode than the message's (a bug)".into(),
                source: None,
            })
        }
    }
}

/// The checks a spec gets, for a message another team wrote: a valid
/// `pipeline` name (it names the run's `_state/` and `_runs/` keys), no
/// credentials in `http.url`'s user info nor in `http.headers` /
/// `http.query` by name (they would travel in clear through queues and
/// DLQs), an http(s) URL with a host, header values an HTTP request can
/// carry (ASCII, no control characters: `header_value_problem`).
fn check_message(message: &RequestMessage) -> Result<(), RequestError> {
    let target = || format!("{} {}", message.http.method, contracts::redacted_url(&message.http.url));
    let refuse = |field: &str, value: &str, reason: &str| RequestError::Refused {
        target: target(),
        reason: format!("`{field}` = {value}: {reason}"),
        source: None,
    };
    contracts::spec::check_name("pipeline", &message.pipeline)
        .and_then(|()| contracts::spec::check_no_userinfo("http.url", &message.http.url))
        .map_err(|err| RequestError::Refused { target: target(), reason: err.to_string(), source: Some(err.into()) })?;
    let url = &message.http.url;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(refuse("http.url", &contracts::redacted_url(url), "must be an http or https URL with a host"));
    }
    if let Some((name, why)) =
        message.http.headers.keys().find_map(|name| contracts::spec::refused_header(name).map(|why| (name, why)))
    {
        return Err(refuse("http.headers", &format!("{name:?}"), why));
    }
    let re_method = contracts::spec::METHOD_OVERRIDE_PARAM;
    if message.http.query.contains_key(re_method) || url.query_pairs().any(|(name, _)| name == re_method) {
        return Err(refuse(
            "http.query",
            &format!("{re_method:?}"),
            "would re-method the call; `http.method` is its method",
        ));
    }
    if message.http.method == contracts::HttpMethod::Get && message.http.body.is_some() {
        return Err(refuse("http.body", "(a JSON body)", "a GET sends no body (RFC 9110 §9.3.1); use `POST`"));
    }
    let credential_query =
        url.query_pairs().map(|(k, _)| k.into_owned()).find(|k| contracts::spec::is_credential_like(k));
    for (field, name) in message
        .http
        .headers
        .keys()
        .map(|name| ("http.headers", name.clone()))
        .chain(message.http.query.keys().map(|name| ("http.query", name.clone())))
        .chain(credential_query.map(|name| ("http.url", name)))
    {
        let credential = if field == "http.headers" {
            contracts::spec::is_credential_header(&name)
        } else {
            contracts::spec::is_credential_like(&name)
        };
        if credential {
            return Err(refuse(
                field,
                &format!("{name:?}"),
                "looks like a credential; reference a secret in `policy.auth` instead (messages travel in clear through queues and DLQs)",
            ));
        }
    }
    // Named, not shown: a header's value is the sender's, and may be
    // one that must not travel further.
    if let Some((name, why)) = message
        .http
        .headers
        .iter()
        .find_map(|(name, value)| contracts::spec::header_value_problem(value).map(|why| (name, why)))
    {
        return Err(refuse("http.headers", &format!("{name:?}"), &format!("its value {why}")));
    }
    if let Some(name) = message
        .http
        .headers
        .iter()
        .find_map(|(name, value)| contracts::spec::is_credential_value(value).then_some(name))
    {
        return Err(refuse(
            "http.headers",
            &format!("{name:?}"),
            "carries a credential (its value starts with an authentication scheme, `Bearer …`); reference a secret in `policy.auth` instead (messages travel in clear through queues and DLQs)",
        ));
    }
    Ok(())
}

/// Incremental loading: records the page's highest cursor value in the
/// lake before the page is forwarded, so it is there when the run
/// completes (see `tributary_core::state`).
async fn record_cursor(
    message: &RequestMessage,
    page: PageRef,
    max: Option<Value>,
    min: Option<Value>,
    deps: Deps<'_>,
) -> Result<(), RequestError> {
    let Some(max) = max else { return Ok(()) };
    tributary_core::state::record_page(deps.store, &message.pipeline, &message.run_id, page.index, max, min)
        .await
        .map_err(|source| RequestError::Forward { destination: "the incremental state".into(), source })
}

/// Logs a count-first total that drifted since the probe. The plan stands:
/// each planned page is fetched once; records past the probe's total are
/// the next run's, and a short last page is fine. A vendor that lists
/// newest first has shifted its records by the difference: this page may
/// repeat records of an earlier one and skip others, which no count shows
/// (docs/request.md).
fn check_drift(
    planned: &PlannedTotal,
    body: &Value,
    headers: &std::collections::BTreeMap<String, String>,
    page: Option<PageRef>,
) {
    let now = match &planned.total_header {
        Some(name) => headers.get(&name.to_ascii_lowercase()).and_then(|v| v.trim().parse().ok()),
        None => {
            body.pointer(&planned.total_pointer).and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
        }
    };
    if let Some(now) = now.filter(|now| *now != planned.total) {
        tracing::warn!(
            planned_total = planned.total,
            vendor_total = now,
            page = page.map(|p| p.index),
            "the vendor's total drifted since the probe; the planned pages stand (each fetched once; if the vendor lists newest first, its records shifted and this page may repeat or skip some)"
        );
    }
}

/// For a `cursor` page: the next page's message, or `None` on the last page
/// (then the run's page count goes to the ledger, before this page is
/// forwarded, so Persist's receipt of it completes the run).
async fn continue_with(
    message: &RequestMessage,
    next: &Continuation,
    fetched: &Fetched,
    body: &Value,
    this: ThisPage<'_>,
    credentials: Option<&auth::Credentials>,
    deps: Deps<'_>,
) -> Result<Option<RequestMessage>, RequestError> {
    let ThisPage { page, records, last, digest } = this;
    let call = if fetched.empty {
        None
    } else {
        paging::next_call(
            &next.paging,
            &message.http,
            &fetched.url,
            body,
            &fetched.response.headers,
            page.index,
            records,
            last,
        )
        .map_err(|problem| RequestError::Paging { target: fetched.target.clone(), problem })?
    };
    let call = match call {
        Some(call) => Some(safe_next(message, call, credentials, &fetched.target)?),
        None => None,
    };
    let index = page.index.saturating_add(1);
    // The calls of this run's pages so far, this one's last: a next call
    // among them starts the same pages over (the cursor cycled).
    let mut followed = next.followed.clone();
    followed.push(call_digest(&message.http));
    let next_digest = call.as_ref().map(call_digest);
    if let Some(next_digest) = &next_digest
        && let Some(at) = followed.iter().rposition(|d| d == next_digest)
    {
        // Where the repeated call was made: its page index, counted back
        // from this page (the list keeps the most recent calls).
        let earlier = page.index.saturating_sub((followed.len() - 1 - at) as u32);
        let reason = format!(
            "the vendor's cursor cycled: page {}'s next page is page {earlier} again (the same call); paging \
             stopped, the run holds pages 0 to {} (what the vendor would have served after the cycle, if \
             anything, was not reached)",
            page.index, page.index
        );
        tracing::warn!(page = page.index, earlier, reason, "run truncated");
        end_run(message, index, Some(reason), deps).await?;
        return Ok(None);
    }
    match call {
        Some(http) if index < next.max_pages => {
            let mut following = message.clone();
            following.http = http;
            following.page = Some(PageRef { index, count: 0 });
            if let RequestMode::Records { next: Some(next), .. } = &mut following.mode {
                next.previous_page = Some(digest.to_string());
                // A first page short by a vendor's cap: the next pages are
                // asked for, and judged short, by the cap.
                if let contracts::NextPage::Numbered { size, .. } = &mut next.paging
                    && let Some(cap) = paging::numbered_next_size(*size, page.index, records)
                    && cap != *size
                {
                    tracing::warn!(
                        asked = *size,
                        served = cap,
                        "the vendor served {cap} records on the first page for a page size of {size}: it caps its \
                         pages; the run pages on with {cap} (write that size in the spec)",
                        size = *size
                    );
                    *size = cap;
                }
                let drop = followed.len().saturating_sub(contracts::Continuation::MAX_FOLLOWED);
                followed.drain(..drop);
                next.followed = followed;
            }
            Ok(Some(following))
        }
        more => {
            let truncated = more.is_some().then(|| {
                format!(
                    "strategy.max_pages {} reached while the vendor still offered a next page: the run holds only the first {} pages",
                    next.max_pages, next.max_pages
                )
            });
            if let Some(reason) = &truncated {
                tracing::warn!(max_pages = next.max_pages, reason, "run truncated");
            }
            end_run(message, index, truncated, deps).await?;
            Ok(None)
        }
    }
}

/// FNV-1a 64 (hex) of a call's JSON (method, URL, query, headers, body):
/// what [`contracts::Continuation::followed`] holds. The query and headers
/// are ordered maps, so the same call always has the same digest.
fn call_digest(call: &HttpCall) -> String {
    contracts::digest::fnv1a_hex(&serde_json::to_vec(call).unwrap_or_default())
}

/// The next page's call, made safe to travel and to send: the credential's
/// own query parameter and any parameter holding a credential (a vendor
/// echoing `api_key=` in its next link) are dropped from the URL (Request
/// adds the credential again when it sends the call), and a next page on
/// another origin is refused when the run has credentials (they go only to
/// the run's scheme, host and port), or when its host is neither this one
/// nor in `policy.allow.hosts`, or it goes from https to http, or its URL
/// has user info.
///
/// A next link that still holds a credential after that, in any spelling
/// ([`crate::scrub`]): in its path, inside another parameter, in a
/// token, anywhere in the call, is refused (permanent), naming the field
/// `next link`, where the credential is and the URL scrubbed: forwarded,
/// it would travel in clear in the next page's SQS message, and from
/// there to the dead-letter archive and the alert. Request cannot tell
/// which part of it the vendor needs, so it does not guess a rewrite.
fn safe_next(
    message: &RequestMessage,
    mut call: HttpCall,
    credentials: Option<&auth::Credentials>,
    target: &str,
) -> Result<HttpCall, RequestError> {
    let here = &message.http.url;
    let next = &call.url;
    let refuse = |reason: String| RequestError::Refused { target: target.to_string(), reason, source: None };
    let shown = contracts::redacted_url(next);
    if !next.username().is_empty() || next.password().is_some() {
        return Err(refuse(format!("the next page's URL {shown} has user info (credentials in a URL are refused)")));
    }
    if here.scheme() == "https" && next.scheme() == "http" {
        return Err(refuse(format!("the next page's URL {shown} goes from https to plain http")));
    }
    if next.origin() != here.origin() {
        if message.policy.auth.is_some() {
            return Err(refuse(format!(
                "the next page's URL {shown} is on another origin than {}: the run's credentials go only to its own scheme, host and port",
                here.origin().ascii_serialization()
            )));
        }
        let host = next.host_str().unwrap_or_default();
        if !message.policy.allow.allows_host(here.host_str().unwrap_or_default(), host) {
            return Err(refuse(format!(
                "the next page's host {host} is neither this page's nor in policy.allow.hosts (SSRF guard)"
            )));
        }
    }
    let own_param = match &message.policy.auth {
        Some(contracts::Auth::ApiKey { query_param: Some(param), .. }) => Some(param.as_str()),
        _ => None,
    };
    let drop_pair =
        |name: &str, value: &str| own_param == Some(name) || credentials.is_some_and(|c| c.is_credential(value));
    if call.url.query_pairs().any(|(name, value)| drop_pair(&name, &value)) {
        let kept: Vec<(String, String)> = call
            .url
            .query_pairs()
            .filter(|(name, value)| !drop_pair(name, value))
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        call.url.set_query(None);
        if !kept.is_empty() {
            call.url.query_pairs_mut().extend_pairs(kept);
        }
    }
    call.query.retain(|name, value| !drop_pair(name, value));
    if let Some(credentials) = credentials {
        refuse_credentials_in(&call, credentials.scrubber()).map_err(refuse)?;
    }
    Ok(call)
}

/// `Err` with the reason when a next page's `call` holds a credential of
/// `scrubber` anywhere (URL, query, headers, body), naming where.
fn refuse_credentials_in(call: &HttpCall, scrubber: &Scrubber) -> Result<(), String> {
    let place = scrubber.found_in_url(&call.url).or_else(|| {
        call.query
            .iter()
            .find(|(name, value)| scrubber.contains(name) || scrubber.contains(value))
            .map(|(name, _)| format!("query parameter `{}`", scrubber.scrub(name)))
    });
    let place = match place {
        Some(place) => place,
        // Headers and body come from the message; checked all the same,
        // since the whole call travels in the next message.
        None => match serde_json::to_string(call) {
            Ok(text) if !scrubber.contains(&text) => return Ok(()),
            _ => "the call".into(),
        },
    };
    Err(format!(
        "`next link` {} holds a credential in {place}: refused, since the next page's call would carry it in clear through the request queue, the dead-letter archive and alerts (Request adds the credential itself to each call)",
        scrubber.url(&call.url)
    ))
}

/// The page just fetched, as [`continue_with`] needs it.
struct ThisPage<'a> {
    page: PageRef,
    /// Records on it.
    records: usize,
    /// Its last record (`last_record` paging starts after it).
    last: Option<&'a Value>,
    /// Digest of its records ([`Continuation::previous_page`] of the next).
    digest: &'a str,
}

/// Records that the cursor run of `message` has `pages` pages (and why it
/// stopped short, if it did), completing it when they are all persisted.
async fn end_run(
    message: &RequestMessage,
    pages: u32,
    truncated: Option<String>,
    deps: Deps<'_>,
) -> Result<(), RequestError> {
    let expected = tributary_core::ledger::Expected {
        pipeline: message.pipeline.clone(),
        run_id: message.run_id.clone(),
        run_date: message.run_date,
        pages: u64::from(pages),
        truncated,
        records: None,
    };
    let ledger = tributary_core::ledger::RunLedger {
        store: deps.store,
        events: deps.config.run_events_topic.as_deref().map(|topic| (deps.topics, topic)),
    };
    ledger
        .record_expected(&expected)
        .await
        .map_err(|source| RequestError::Forward { destination: "the run ledger".into(), source })?;
    tracing::info!(pages, "last page: page count recorded");
    Ok(())
}

/// The HTTP request of a message: its URL with the query parameters added,
/// the time-out and body cap of its policy within Request's own.
pub fn http_request(message: &RequestMessage, config: &RequestConfig) -> HttpRequest {
    let mut url = message.http.url.clone();
    if !message.http.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&message.http.query);
    }
    let mut headers = message.http.headers.clone();
    headers.entry("accept".into()).or_insert_with(|| "application/json".into());
    let policy: &CallPolicy = &message.policy;
    let timeout = policy.timeout_secs.map_or(config.timeout, |secs| config.timeout.min(Duration::from_secs(secs)));
    let max_body_bytes =
        policy.response.max_bytes.map_or(config.max_response_bytes, |max| max.min(config.max_response_bytes));
    HttpRequest {
        method: message.http.method,
        url,
        headers,
        body: message.http.body.as_ref().map(|b| Bytes::from(b.to_string())),
        timeout,
        access: NetworkAccess { loopback: policy.allow.loopback, private: policy.allow.private },
        max_body_bytes: Some(max_body_bytes),
    }
}

/// A [`RequestError::Pointer`] maker for `field` = `pointer` on `target`.
/// `records_pointer` found no array in `doc`: what is there instead, and
/// the keys of the object that should hold it, arrays first as "did you
/// mean" (`/results`), so a wrong pointer is fixed from the message alone.
fn not_records(doc: &page::Doc<'_>, target: &str, pointer: &str, err: page::NotRecords) -> RequestError {
    let problem = pointer_problem(target, "records_pointer", pointer);
    let parent = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
    let hint = match doc.value_at(parent) {
        Some(Value::Object(map)) => {
            let at = |key: &str| format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"));
            let arrays: Vec<String> = map.iter().filter(|(_, v)| v.is_array()).map(|(k, _)| at(k)).take(5).collect();
            let keys: Vec<&str> = map.keys().map(String::as_str).take(20).collect();
            let place = if parent.is_empty() { "the body".to_string() } else { format!("{parent:?}") };
            let mean = if arrays.is_empty() {
                " (none holds an array)".to_string()
            } else {
                format!("; did you mean {}?", arrays.join(" or "))
            };
            format!("; {place} has keys {}{mean}", keys.join(", "))
        }
        Some(Value::Array(_)) if parent.is_empty() => "; the body itself is an array: use records_pointer \"\"".into(),
        _ => String::new(),
    };
    // What the vendor said, when its body carries an error member: shown
    // redacted and cut (a trial's `{"error": "internal vendor error, try
    // later"}` was reported only as a missing pointer).
    let said = |members: &[&str]| {
        members
            .iter()
            .find_map(|pointer| doc.value_at(pointer).map(|value| (pointer.trim_start_matches('/'), value)))
            .map(|(member, value)| {
                let text = contracts::spec::redact_credentials_in_text(&value.to_string()).into_owned();
                let text = match text.char_indices().nth(200) {
                    Some((at, _)) => format!("{}…", &text[..at]),
                    None => text,
                };
                format!("; the vendor's `{member}`: {text}")
            })
            .unwrap_or_default()
    };
    match err {
        page::NotRecords::Missing => {
            let said = said(&["/errors", "/error", "/message", "/detail", "/error_description", "/fault"]);
            problem(format!("is not in the response{hint}{said}"))
        }
        page::NotRecords::Other(kind) => problem(format!("leads to {kind}, not an array of records{hint}")),
        page::NotRecords::Null => {
            let said = said(&["/errors", "/error"]);
            problem(format!(
                "leads to null beside the body's `errors`/`error` member: the vendor reports a failure, not an empty \
                 page{said}"
            ))
        }
    }
}

/// Whether the body's top level has a non-empty `errors` or `error`
/// member (GraphQL's `errors`, many REST APIs' `error`): a page whose
/// records are `null` beside it failed; it is not an empty list.
fn reports_errors(doc: &page::Doc<'_>) -> bool {
    ["/errors", "/error"].iter().any(|pointer| {
        doc.value_at(pointer).is_some_and(|value| match value {
            Value::Null | Value::Bool(false) => false,
            Value::Array(items) => !items.is_empty(),
            Value::Object(members) => !members.is_empty(),
            Value::String(text) => !text.is_empty(),
            _ => true,
        })
    })
}

fn pointer_problem<'a>(target: &'a str, field: &'static str, pointer: &'a str) -> impl Fn(String) -> RequestError + 'a {
    move |problem| RequestError::Pointer { target: target.to_string(), field, pointer: pointer.to_string(), problem }
}

/// The total in response header `name` (headers are lower-cased); a value
/// that is not one is quoted scrubbed, then cut to 64 bytes.
fn header_total(
    headers: &std::collections::BTreeMap<String, String>,
    name: &str,
    target: &str,
    scrubber: &Scrubber,
) -> Result<u64, RequestError> {
    let problem = pointer_problem(target, "total_header", name);
    match headers.get(&name.to_ascii_lowercase()) {
        Some(value) => value
            .trim()
            .parse()
            .map_err(|_| problem(format!("holds {:?}, not a non-negative integer", scrubber.cut(value, 64)))),
        None => Err(problem("is not in the response".into())),
    }
}

/// A JSON number as a count of records: an integer, or a float with no
/// fraction (`1200.0`, `1.2e3`: some vendors' serializers write counts so)
/// up to `u64::MAX`; otherwise why not (negative, a fraction, too large).
fn count_of(n: &serde_json::Number) -> Result<u64, String> {
    if let Some(count) = n.as_u64() {
        return Ok(count);
    }
    let value = n.as_f64().unwrap_or(f64::NAN);
    if value < 0.0 {
        Err("a negative number, not a count of records".into())
    } else if value.fract() != 0.0 {
        Err("not a whole number of records".into())
    } else if value >= u64::MAX as f64 {
        Err(format!("more records than a run can count (at most {})", u64::MAX))
    } else {
        // Whole and in range: exact up to 2^53, the nearest integer above.
        Ok(value as u64)
    }
}

fn read_total(found: Option<&Value>, pointer: &str, target: &str) -> Result<u64, RequestError> {
    let problem = pointer_problem(target, "total_pointer", pointer);
    match found {
        Some(Value::Number(n)) => count_of(n).map_err(|why| problem(format!("leads to {n}, {why}"))),
        Some(Value::String(s)) => {
            s.trim().parse().map_err(|_| problem(format!("leads to {s:?}, not a non-negative integer")))
        }
        Some(other) => Err(problem(format!("leads to {}, not a non-negative integer", kind_of(other)))),
        None => Err(problem("is not in the response".into())),
    }
}

/// Media types of newline-delimited JSON (one record per line).
const NDJSON_TYPES: [&str; 5] = [
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
];

/// The body as JSON text the rest of Request reads: without a UTF-8 byte
/// order mark (some Windows-hosted vendors send one; JSON parsers refuse
/// it); each byte that is not UTF-8 inside a string written as the escape
/// `\udcNN` (a lone surrogate: Persist quarantines the record holding it,
/// alone, instead of the page failing; see [`escape_invalid_utf8`]); and
/// newline-delimited JSON (by its content type, or a body whose first line
/// is a whole JSON value but the whole is not) turned into one array of the
/// lines' values, `records_pointer` empty. Anything else is left as it is
/// (a byte that is not UTF-8 outside a string then fails the page as not
/// JSON).
pub fn normalize_body(response: &tributary_core::ports::HttpResponse) -> Bytes {
    let body = match response.body.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => response.body.slice(response.body.len() - rest.len()..),
        None => response.body.clone(),
    };
    let body = match escape_invalid_utf8(&body) {
        Ok((Cow::Owned(text), escaped)) => {
            tracing::warn!(
                escaped_bytes = escaped,
                "the response holds bytes that are not UTF-8 inside strings: each is forwarded as \\udcNN, and \
                 Persist quarantines the records holding one"
            );
            Bytes::from(text)
        }
        Ok((Cow::Borrowed(_), _)) | Err(_) => body,
    };
    let media = response.headers.get("content-type").and_then(|t| t.split(';').next()).unwrap_or("").trim();
    let declared = NDJSON_TYPES.iter().any(|t| media.eq_ignore_ascii_case(t));
    if declared || looks_like_ndjson(&body) {
        let mut array = Vec::with_capacity(body.len() + 2);
        array.push(b'[');
        for line in body.split(|&b| b == b'\n') {
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            if array.len() > 1 {
                array.push(b',');
            }
            array.extend_from_slice(line);
        }
        array.push(b']');
        return Bytes::from(array);
    }
    body
}

/// A body of several lines whose first line alone is a JSON value while
/// the whole body is not one. Read with the tokenizer, which follows
/// nesting to [`MAX_PARSE_DEPTH`](tape::MAX_PARSE_DEPTH) levels and takes
/// lone surrogates (what Persist quarantines a record for), so such a first
/// line is still seen as a record.
fn looks_like_ndjson(body: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(body.trim_ascii_start()) else { return false };
    let Some(end) = text.find('\n') else { return false };
    let (first, rest) = text.split_at(end);
    let mut tape = tape::Tape::default();
    !rest.trim_ascii().is_empty() && tape.parse(first).is_ok() && tape.parse(text).is_err()
}

/// The records as forwarded: a credential of the call that the vendor
/// echoed into them (a `self` link carrying the API key, the
/// `Authorization` header reflected) is replaced by `<redacted>` in every
/// spelling ([`Scrubber::scrub`]), so neither the sender's dataset or inbox
/// nor the lake's raw copy ever holds it.
///
/// # Errors
/// [`RequestError::Refused`] (permanent) when the credential stands where
/// no text can replace it (outside a JSON string: a numeric token written
/// as a number); nothing is forwarded then.
fn without_credentials(raw: RawRecords, scrubber: &Scrubber, target: &str) -> Result<RawRecords, RequestError> {
    if !scrubber.contains(raw.as_str()) {
        return Ok(raw);
    }
    tracing::warn!("the vendor echoed a credential of the call into its records; forwarded redacted");
    RawRecords::from_text(scrubber.scrub(raw.as_str())).map_err(|_| RequestError::Refused {
        target: target.to_string(),
        reason: "the records hold a credential of the call outside a JSON string, where it cannot be redacted; nothing is forwarded".into(),
        source: None,
    })
}

async fn forward_records(
    message: &RequestMessage,
    page: PageRef,
    target: &PersistTarget,
    records: RawRecords,
    deps: Deps<'_>,
) -> Result<bool, RequestError> {
    let mut persist = PersistMessage {
        version: V1,
        pipeline: message.pipeline.clone(),
        run_id: message.run_id.clone(),
        run_date: message.run_date,
        page,
        target: target.clone(),
        payload: Payload::Inline { records },
        fetched_at: Some(chrono::Utc::now()),
    };
    // Records larger than a message go by claim check without being
    // encoded inline first (a copy of the page for nothing).
    let inline = match &persist.payload {
        Payload::Inline { records } if records.as_str().len() < deps.config.max_message_bytes => {
            Some(encode(&persist)?).filter(|body| body.len() <= deps.config.max_message_bytes)
        }
        _ => None,
    };
    let claim_check = inline.is_none();
    let body = match inline {
        Some(body) => body,
        None => {
            // Claim check: the records go to the lake, the message carries the key.
            let key = keys::claim_key(&message.pipeline, &message.run_id, page.index);
            let payload = std::mem::replace(
                &mut persist.payload,
                Payload::Object { key: key.clone(), format: Default::default() },
            );
            let records = match payload {
                Payload::Inline { records } => records.into_string().into_bytes(),
                Payload::Object { .. } => b"[]".to_vec(),
            };
            deps.store
                .put(&key, Bytes::from(records))
                .await
                .map_err(|source| RequestError::Forward { destination: format!("object {key}"), source })?;
            encode(&persist)?
        }
    };
    send(&message.reply_to, body, deps).await?;
    Ok(claim_check)
}

async fn send(destination: &Destination, body: String, deps: Deps<'_>) -> Result<(), RequestError> {
    let result = match destination {
        Destination::Queue { queue } => deps.queue.send(queue, vec![body]).await,
        Destination::Topic { topic } => {
            deps.topics.publish(topic, vec![TopicMessage { body, ..TopicMessage::default() }]).await
        }
        // A kind newer than this build (the enum is non-exhaustive).
        other => {
            Err(PortError::permanent_msg("send", other.to_string(), "a kind of destination this build cannot send to"))
        }
    };
    result.map_err(|source| RequestError::Forward { destination: destination.to_string(), source })
}

fn encode<T: serde::Serialize>(message: &T) -> Result<String, RequestError> {
    contracts::encode(message).map_err(encode_error)
}

fn encode_error(err: serde_json::Error) -> RequestError {
    RequestError::Forward {
        destination: "(encoding)".into(),
        source: PortError::permanent("encode message", "reply", err),
    }
}

/// Bytes of a body an error quotes: 200.
pub(crate) const EXCERPT_BYTES: usize = 200;

/// The first [`EXCERPT_BYTES`] of a body as quoted text (`{:?}`), safe to
/// show: scrubbed of `scrubber`'s credentials first, then cut on a
/// character boundary, then any credential fragment longer than 8
/// characters left at its edges redacted ([`Scrubber::excerpt`]).
pub(crate) fn excerpt(body: &[u8], scrubber: &Scrubber) -> String {
    format!("{:?}", scrubber.excerpt(body, EXCERPT_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial finding: `1e20` was "not a non-negative integer", which it
    /// is; each refusal now says what is wrong, and a whole float is taken.
    #[test]
    fn a_total_is_taken_or_refused_saying_why() {
        let total = |text: &str| {
            let value: Value = serde_json::from_str(text).expect("JSON");
            read_total(Some(&value), "/total", "GET https://vendor.example/items").map_err(|err| err.to_string())
        };
        assert_eq!(total("1200"), Ok(1200));
        assert_eq!(total("1200.0"), Ok(1200), "a serializer's float of a count");
        assert_eq!(total("1.2e3"), Ok(1200));
        assert_eq!(total("\"1200\""), Ok(1200));
        let err = total("1e20").expect_err("too large");
        assert!(err.contains("leads to 1e+20") && err.contains("more records than a run can count"), "{err}");
        assert!(total("-3").expect_err("negative").contains("a negative number"));
        assert!(total("12.5").expect_err("fraction").contains("not a whole number"));
        assert!(total("null").expect_err("null").contains("not a non-negative integer"));
    }
}
