//! One vendor call with everything around it: credentials, the host
//! allow-list, redirects (followed here, each target re-checked), the rate
//! budget, time-outs clamped to the deadline, response rules, and retries
//! (backon's exponential backoff, full jitter and `Retry-After`, see
//! [`crate::retry`]).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use tokio::time::Instant;

use contracts::redacted_url;
use contracts::{Auth, HttpMethod, RequestMessage, StatusAction};
use tributary_core::metrics::{self, Metrics};
use tributary_core::ports::{HttpRequest, HttpResponse};

use crate::auth::{self, Credentials};
use crate::handler::excerpt;
use crate::retry::{self, RetryPolicy, Wait};
use crate::scrub;
use crate::{Deps, MAX_REDIRECTS, RequestError};

/// A successful (or `empty`-by-rule) response.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The final response (after redirects).
    pub response: HttpResponse,
    /// The final URL (after redirects), query included.
    pub url: url::Url,
    /// `METHOD url` of the first call, without query, for messages.
    pub target: String,
    /// The status matched a `status_actions` rule `empty`: no records.
    pub empty: bool,
    /// The credentials the call was made with, to scrub from whatever of
    /// the response travels on ([`Credentials::scrub`]).
    pub credentials: Option<Credentials>,
}

/// Makes the message's call, retrying what may succeed on retry.
///
/// # Errors
/// [`RequestError`]; retryable ones have already been retried up to
/// `max_attempts - 1` times, or were stopped early
/// ([`RequestError::RetryLater`]) by a long `Retry-After` or the deadline.
pub async fn fetch(
    message: &RequestMessage,
    request: HttpRequest,
    deps: Deps<'_>,
    metrics: &Mutex<Metrics>,
) -> Result<Fetched, RequestError> {
    let target = format!("{} {}", request.method, redacted_url(&request.url));
    let origin = request.url.host_str().unwrap_or_default().to_string();
    let auth = message.policy.auth.as_ref();
    let credentials = match auth {
        Some(auth) => Some(auth::credentials(auth, deps, base_for_token(&request), false).await?),
        None => None,
    };
    let state = Mutex::new(Attempts { credentials, refreshed: false, stop: None });
    let record = |f: &dyn Fn(&mut Metrics)| {
        if let Ok(mut metrics) = metrics.lock() {
            f(&mut metrics);
        }
    };
    let attempt = || async {
        if let Some(rate) = message.policy.rate {
            let deadline = deps.deadline.checked_sub(deps.config.deadline_reserve).unwrap_or(deps.deadline);
            deps.warm.rates.acquire(&message.pipeline, rate, deps.config.max_instances, deadline).await.map_err(
                |err| RequestError::Deadline {
                    target: target.clone(),
                    reason: err.to_string(),
                    source: Some(err.into()),
                },
            )?;
        }
        let started = std::time::Instant::now();
        let result = follow_redirects(message, &request, &origin, &target, deps, &state).await;
        record(&|m| m.duration_ms(metrics::API_LATENCY, started.elapsed().as_secs_f64() * 1000.0));
        let (response, url) = result?;
        if response.status == 429 {
            record(&|m| m.count(metrics::API_THROTTLES, 1));
        }
        // One fresh OAuth token on 401, then the call once more.
        let refresh = response.status == 401
            && matches!(auth, Some(Auth::OAuth2ClientCredentials { .. }))
            && state.lock().is_ok_and(|mut s| !std::mem::replace(&mut s.refreshed, true));
        if let (true, Some(auth)) = (refresh, auth) {
            tracing::info!("401 with a cached OAuth token: fetching a fresh one");
            // Its large-body turn (if any) ends before the next call.
            drop(response);
            let fresh = auth::credentials(auth, deps, base_for_token(&request), true).await?;
            if let Ok(mut s) = state.lock() {
                s.credentials = Some(fresh);
            }
            let (response, url) = follow_redirects(message, &request, &origin, &target, deps, &state).await?;
            return classify(message, response, url, &target, &state);
        }
        classify(message, response, url, &target, &state)
    };
    // Nothing a vendor sent back (an error page, a Location) carries the
    // credentials into logs, retries' notices or the dead letter.
    let attempt = || async { attempt().await.map_err(|err| scrub(err, &state)) };
    let config = deps.config;
    let policy = RetryPolicy {
        base_delay: config.base_delay,
        max_retry_after: config.max_retry_after,
        reserve: config.deadline_reserve,
    };
    let backoff = ExponentialBuilder::default()
        .with_min_delay(config.base_delay)
        .with_max_delay(config.max_delay)
        .with_max_times(config.max_attempts.saturating_sub(1));
    let result = attempt
        .retry(backoff)
        .when(RequestError::is_retryable)
        .adjust(|err, backoff| {
            let backoff = backoff?;
            let remaining = deps.deadline.saturating_duration_since(Instant::now());
            match retry::next_wait(err.retry_after(), backoff, fastrand::f64(), &policy, remaining) {
                Wait::Sleep(wait) => Some(wait),
                Wait::GiveUp(reason) => {
                    if let Ok(mut s) = state.lock() {
                        s.stop = Some(reason);
                    }
                    None
                }
            }
        })
        .notify(|err, delay| {
            record(&|m| m.count(metrics::API_RETRIES, 1));
            tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "vendor call failed; retrying");
        })
        .await;
    let stop = state.lock().ok().and_then(|mut s| s.stop.take());
    match (result, stop) {
        (Err(last), Some(reason)) => {
            tracing::warn!(error = %last, reason, "retry left to SQS redelivery");
            Err(RequestError::RetryLater { last: Box::new(last), reason })
        }
        (result, _) => result.map(|mut fetched| {
            fetched.credentials = state.lock().ok().and_then(|s| s.credentials.clone());
            fetched
        }),
    }
}

/// `err` without the credentials of `state` in any of its text.
fn scrub(err: RequestError, state: &Mutex<Attempts>) -> RequestError {
    match state.lock().ok().and_then(|s| s.credentials.clone()) {
        Some(credentials) => err.scrubbed(&credentials),
        None => err,
    }
}

struct Attempts {
    credentials: Option<Credentials>,
    refreshed: bool,
    stop: Option<String>,
}

/// The settings a token request shares with the call (network allowance,
/// time-out).
fn base_for_token(request: &HttpRequest) -> HttpRequest {
    HttpRequest { headers: Default::default(), body: None, ..request.clone() }
}

/// Sends the call, following up to [`MAX_REDIRECTS`] redirects; every
/// target must be the message's own host or in `policy.allow.hosts` (the
/// adapter then checks its addresses). Credentials go only to the
/// message's own origin: the same scheme, host and port (RFC 6454), so a
/// redirect to another host, or to another port of the same host, gets
/// none; nor does a hop the secret's grant does not admit (a path outside
/// its `path_prefixes`). A redirect from https to http, to another scheme, or to a
/// Location with user info is refused.
async fn follow_redirects(
    message: &RequestMessage,
    first: &HttpRequest,
    origin: &str,
    target: &str,
    deps: Deps<'_>,
    state: &Mutex<Attempts>,
) -> Result<(HttpResponse, url::Url), RequestError> {
    let mut request = first.clone();
    for hop in 0..=MAX_REDIRECTS {
        let host = request.url.host_str().unwrap_or_default().to_string();
        let here = format!("{} {}", request.method, redacted_url(&request.url));
        if !message.policy.allow.allows_host(origin, &host) {
            return Err(RequestError::Refused {
                target: here,
                reason: format!(
                    "host {host} is neither the message's host {origin} nor in policy.allow.hosts (SSRF guard)"
                ),
                source: None,
            });
        }
        let url = request.url.clone();
        let mut call = request.clone();
        call.timeout = clamp_timeout(call.timeout, deps, target)?;
        if url.origin() == first.url.origin()
            && granted(message, &call, deps)
            && let Ok(s) = state.lock()
            && let Some(credentials) = &s.credentials
        {
            credentials.apply(&mut call);
        }
        let response = deps.http.send(call).await.map_err(RequestError::Transport)?;
        let location = response.headers.get("location");
        let (true, Some(location)) = ((300..400).contains(&response.status), location) else {
            return Ok((response, url));
        };
        if hop == MAX_REDIRECTS {
            return Err(RequestError::Refused {
                target: target.to_string(),
                reason: format!("more than {MAX_REDIRECTS} redirects"),
                source: None,
            });
        }
        let next = url.join(location).map_err(|err| RequestError::Refused {
            target: here.clone(),
            reason: format!("redirect to an unusable Location ({err})"),
            source: Some(err.into()),
        })?;
        if !matches!(next.scheme(), "http" | "https") {
            return Err(RequestError::Refused {
                target: here,
                reason: format!("redirect to a {} URL", next.scheme()),
                source: None,
            });
        }
        if !next.username().is_empty() || next.password().is_some() {
            return Err(RequestError::Refused {
                target: here,
                reason: "redirect to a Location with user info (credentials in a URL are refused)".into(),
                source: None,
            });
        }
        if url.scheme() == "https" && next.scheme() == "http" {
            return Err(RequestError::Refused {
                target: here,
                reason: "redirect from https to plain http".into(),
                source: None,
            });
        }
        // The Location may hold the token in its path: logged scrubbed.
        let shown = match state.lock().ok().and_then(|s| s.credentials.clone()) {
            Some(credentials) => credentials.scrubber().url(&next),
            None => redacted_url(&next),
        };
        tracing::info!(status = response.status, to = %shown, "following a redirect");
        // 303, and 301/302 after a POST, become a GET without body (RFC 9110 §15.4).
        if response.status == 303 || (matches!(response.status, 301 | 302) && request.method == HttpMethod::Post) {
            request.method = HttpMethod::Get;
            request.body = None;
        }
        request.url = next;
    }
    Err(RequestError::Refused {
        target: target.to_string(),
        reason: format!("more than {MAX_REDIRECTS} redirects"),
        source: None,
    })
}

/// Whether the deployment's grant of the message's secret admits this hop
/// (its method and path: a redirect to a path outside the grant's
/// prefixes goes without the credentials).
fn granted(message: &RequestMessage, call: &HttpRequest, deps: Deps<'_>) -> bool {
    let Some(auth) = &message.policy.auth else { return true };
    let hop = crate::trust::Call { pipeline: &message.pipeline, method: call.method, url: &call.url, auth };
    deps.config.trust.admits(&hop)
}

/// The call's time-out within the invocation: at most the time left before
/// the deadline less the reserve kept for forwarding.
fn clamp_timeout(timeout: Duration, deps: Deps<'_>, target: &str) -> Result<Duration, RequestError> {
    let left = deps.deadline.saturating_duration_since(Instant::now()).saturating_sub(deps.config.deadline_reserve);
    if left < Duration::from_millis(100) {
        return Err(RequestError::Deadline {
            target: target.to_string(),
            reason: format!(
                "no time left in the invocation for the call (the last {} ms are kept for forwarding); SQS will redeliver",
                deps.config.deadline_reserve.as_millis()
            ),
            source: None,
        });
    }
    Ok(timeout.min(left))
}

/// Success, an `empty` page by rule, or a status error told retryable or
/// not (5xx, 408, 429 and `retry` rules are retryable; `fail` rules and
/// other codes are not), with an excerpt of the body scrubbed of the
/// credentials of `state` before it is cut ([`excerpt`]).
fn classify(
    message: &RequestMessage,
    response: HttpResponse,
    url: url::Url,
    target: &str,
    state: &Mutex<Attempts>,
) -> Result<Fetched, RequestError> {
    let rules = &message.policy.response;
    let status = response.status;
    let action = rules.status_actions.get(&status).copied();
    let fetched = |response, empty| Fetched { response, url, target: target.to_string(), empty, credentials: None };
    if action == Some(StatusAction::Empty) {
        tracing::info!(status, "status means an empty page (policy.response.status_actions)");
        return Ok(fetched(response, true));
    }
    if (200..300).contains(&status) && action.is_none() {
        if let Some(expected) = &rules.content_type {
            let found = response.headers.get("content-type").map(String::as_str).unwrap_or("");
            let media = found.split(';').next().unwrap_or("").trim();
            if !media.eq_ignore_ascii_case(expected.trim()) {
                return Err(RequestError::ContentType {
                    target: target.to_string(),
                    expected: expected.clone(),
                    found: found.to_string(),
                });
            }
        }
        return Ok(fetched(response, false));
    }
    let retryable = match action {
        Some(StatusAction::Retry) => true,
        Some(StatusAction::Fail) => false,
        _ => status >= 500 || status == 408 || status == 429,
    };
    let retry_after =
        response.headers.get("retry-after").and_then(|value| retry::parse_retry_after(value, SystemTime::now()));
    let credentials = state.lock().ok().and_then(|s| s.credentials.clone());
    let scrubber = credentials.as_ref().map_or(&scrub::NONE, Credentials::scrubber);
    Err(RequestError::Status {
        target: target.to_string(),
        status,
        excerpt: excerpt(&response.body, scrubber),
        retryable,
        retry_after,
    })
}
