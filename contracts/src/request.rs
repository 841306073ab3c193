//! `RequestMessage`: one vendor call for the Request function.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Destination, HttpMethod, NextPage, PageRef, PersistTarget, RunId, V1};

/// Asks the Request function to make one HTTP call and forward the outcome
/// to `reply_to`.
///
/// Sent by the Orchestrator to the request queue, and by other teams who use
/// Request as a service. Credentials are never carried here: only secret ids
/// (in `policy.auth`), so the message can be logged and dead-lettered safely.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestMessage {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name, as in the spec.
    pub pipeline: String,
    /// Run this call belongs to.
    pub run_id: RunId,
    /// Date of the run (UTC), the default `dt=` partition of what it writes.
    pub run_date: NaiveDate,
    /// The page this call fetches; absent for a count-first probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageRef>,
    /// The call itself.
    pub http: HttpCall,
    /// How the call is made: credentials by reference, the network
    /// allow-list, the rate budget, response rules, the time-out. Absent
    /// means no auth, only the URL's own host (no private or loopback
    /// address), no rate budget, default rules.
    #[serde(default, skip_serializing_if = "CallPolicy::is_default")]
    pub policy: CallPolicy,
    /// What to do with the response.
    pub mode: RequestMode,
    /// Where the reply goes: the persist queue for records, the orchestrator
    /// queue for a probe.
    pub reply_to: Destination,
}

/// One HTTP call: method, absolute URL, query parameters, headers, JSON body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HttpCall {
    /// `GET` (default) or `POST`.
    #[serde(default)]
    pub method: HttpMethod,
    /// Absolute `http`/`https` URL, without the parameters of `query`.
    pub url: url::Url,
    /// Query parameters appended to `url` (percent-encoded by the caller).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Request headers. Never put credentials here: they would travel in
    /// clear through queues and DLQs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// JSON body, sent with `content-type: application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
}

/// What Request does with a successful response.
// One per message, read once per call: the `Records` variant carries the
// whole `PersistTarget` by value; boxing it would change every
// constructor in the contract's Rust API for bytes that do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestMode {
    /// Extract the records and send a `PersistMessage` to `reply_to`.
    Records {
        /// RFC 6901 JSON pointer to the array of records in the response
        /// (e.g. `/items`); absent or `""` means the root is the array.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        records_pointer: Option<String>,
        /// Dataset the records go to.
        target: PersistTarget,
        /// How to find the next page when the API gives no total (the
        /// `cursor` strategy): Request itself sends the next page's message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<Box<Continuation>>,
        /// The count-first total this page was planned from: Request logs
        /// (and counts) a vendor total that drifted since the probe.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        planned_total: Option<PlannedTotal>,
        /// Incremental loading: RFC 6901 pointer to the cursor inside each
        /// record; Request records the page's highest value in the lake
        /// (`_state/<pipeline>/<run_id>/page-<page>.json`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor_field: Option<String>,
    },
    /// Read the total record count and send a `ProbeReply` to `reply_to`
    /// (the count-first strategy's probe).
    Probe {
        /// RFC 6901 JSON pointer to a non-negative integer in the response
        /// (e.g. `/total`); empty when `total_header` is set.
        #[serde(default)]
        total_pointer: String,
        /// Response header holding the total instead (e.g.
        /// `X-Total-Count`), case-insensitive.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total_header: Option<String>,
        /// Opaque data echoed unchanged in the `ProbeReply` (the Orchestrator
        /// puts the pipeline spec here, so it stays stateless).
        #[serde(default)]
        context: serde_json::Value,
        /// Where the records will be (RFC 6901; `""`: the body is the
        /// array). Set when the probe's response is the run's first page:
        /// nothing there fails the probe, naming the keys the body has, so
        /// a wrong pointer fails the run once instead of once per page.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        records_pointer: Option<String>,
    },
}

/// A continuation: after forwarding this page's records, Request sends the
/// next page's `RequestMessage` (page index + 1, the same run) to `queue`, or,
/// on the last page, records the run's page count in the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Continuation {
    /// Where the next page is.
    pub paging: NextPage,
    /// Pages the run may have (page indexes `0..max_pages`); reaching the
    /// cap ends the run with a warning.
    pub max_pages: u32,
    /// Queue the next page's message goes to (the request queue).
    pub queue: String,
    /// Digest (FNV-1a 64, hex) of the records of the page before this
    /// one, set by Request on each next page's message. A page whose
    /// records have the same digest repeats it (json-server, for one,
    /// serves its last page again for any page past the end): the run ends
    /// there and the repeat is not forwarded. Absent on the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_page: Option<String>,
    /// Digests (FNV-1a 64, hex, of the call's JSON: method, URL, query,
    /// headers, body) of the calls this run's pages were fetched with,
    /// oldest first, at most [`Continuation::MAX_FOLLOWED`] (the most
    /// recent), set by Request on each next page's message. A next page
    /// whose call is among them, or is this page's own, would fetch an
    /// earlier page again and every page after it, in a loop: the vendor's
    /// cursor cycled, and the run ends there, truncated. Absent on the
    /// first page.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followed: Vec<String>,
}

impl Continuation {
    /// Calls [`Continuation::followed`] keeps: a cycle longer than this is
    /// not seen while paging (the run then ends at `max_pages`, and its
    /// completion reports the repeated pages as `duplicated`). 1,000 digests
    /// are about 19 KB of the message (SQS allows 1 MiB, "Amazon SQS
    /// message quotas").
    pub const MAX_FOLLOWED: usize = 1_000;
}

/// The count-first total a page was planned from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannedTotal {
    /// RFC 6901 pointer to the total in every page's response (empty when
    /// `total_header` is set).
    #[serde(default)]
    pub total_pointer: String,
    /// Response header holding the total instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_header: Option<String>,
    /// The total the probe reported.
    pub total: u64,
}

/// How Request makes a call, beside the call itself. Every part is optional;
/// the default is no auth, only the URL's own host on public addresses, no
/// rate budget and the default response rules.
///
/// Sub-objects refuse unknown fields: a misspelt security setting must fail
/// loudly (the message goes to the DLQ with an alert), not be ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CallPolicy {
    /// Credentials, by secret id only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<Auth>,
    /// Hosts and address ranges the call (and its redirects) may reach.
    #[serde(default, skip_serializing_if = "NetworkPolicy::is_default")]
    pub allow: NetworkPolicy,
    /// Requests per second and concurrent calls for the pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateBudget>,
    /// What statuses mean, the expected content type, the size cap.
    #[serde(default, skip_serializing_if = "ResponseRules::is_default")]
    pub response: ResponseRules,
    /// Total time for one HTTP call, in seconds (connection, headers and
    /// body), capped by Request's own `HTTP_TIMEOUT_SECS` and always below
    /// the invocation's remaining time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl CallPolicy {
    /// Whether every setting is the default (then it is not serialised).
    pub fn is_default(&self) -> bool {
        self == &CallPolicy::default()
    }
}

/// Credentials of a call. Only secret ids travel: Request reads the values
/// from the secret store (Secrets Manager on AWS; locally
/// `TRIBUTARY_SECRET_<ID>` or `<lake>/_secrets.json`) and never logs them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Auth {
    /// An API key in a header or a query parameter (exactly one of the two).
    ApiKey {
        /// Secret holding the key.
        secret_id: String,
        /// Header carrying the key, e.g. `x-api-key`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header: Option<String>,
        /// Query parameter carrying the key, e.g. `api_key`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query_param: Option<String>,
    },
    /// `Authorization: Bearer <token>` (RFC 6750), or `<scheme> <token>`
    /// for a vendor with its own scheme word (Django REST Framework's
    /// `Authorization: Token <key>`).
    Bearer {
        /// Secret holding the token.
        secret_id: String,
        /// The word before the token (an RFC 9110 auth-scheme: a token of
        /// letters, digits and ``!#$%&'*+-.^_`|~``, at most 64): `Token` for
        /// Django REST Framework; default `Bearer`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scheme: Option<String>,
    },
    /// `Authorization: Basic …` (RFC 7617).
    Basic {
        /// Secret holding `user:password`.
        secret_id: String,
    },
    /// OAuth 2.0 client credentials grant (RFC 6749 §4.4): a token from
    /// `token_url`, cached until it expires (less a margin), refreshed once
    /// when the API answers 401.
    #[serde(rename = "oauth2_client_credentials")]
    OAuth2ClientCredentials {
        /// Token endpoint (checked by the same network guard as the call).
        token_url: url::Url,
        /// Client id (not a secret).
        client_id: String,
        /// Secret holding the client secret.
        secret_id: String,
        /// Space-separated scopes, if the provider needs them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
    },
}

impl Auth {
    /// The secret id the auth reads.
    pub fn secret_id(&self) -> &str {
        match self {
            Auth::ApiKey { secret_id, .. }
            | Auth::Bearer { secret_id, .. }
            | Auth::Basic { secret_id }
            | Auth::OAuth2ClientCredentials { secret_id, .. } => secret_id,
        }
    }
}

/// Where a call may go (SSRF guard). The URL's own host is always allowed
/// by name; after DNS resolution, loopback, private (RFC 1918, RFC 6598),
/// unique-local (`fc00::/7`), link-local (`169.254.0.0/16`, `fe80::/10`,
/// which holds the cloud metadata endpoint 169.254.169.254), unspecified,
/// multicast, broadcast and documentation addresses are refused unless
/// allowed here; link-local and the rest are never allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Further hosts that redirects may reach: exact names, or
    /// `*.example.com` for any subdomain. (The OAuth `token_url` is allowed
    /// by name as declared; its addresses are checked like every call's.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Allow loopback addresses (`127.0.0.0/8`, `::1`): the local demo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loopback: bool,
    /// Allow private addresses (RFC 1918, `100.64.0.0/10`, `fc00::/7`): a
    /// vendor reached through a VPC.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

impl NetworkPolicy {
    /// Whether every setting is the default.
    pub fn is_default(&self) -> bool {
        self == &NetworkPolicy::default()
    }

    /// Whether `host` may be called when the message's URL host is
    /// `origin`: the origin itself, or a listed host (`*.x` matches any
    /// subdomain of `x`, not `x` itself). Names compare case-insensitively.
    pub fn allows_host(&self, origin: &str, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host == origin.trim_end_matches('.').to_ascii_lowercase() {
            return true;
        }
        self.hosts.iter().any(|allowed| {
            let allowed = allowed.to_ascii_lowercase();
            match allowed.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => host == allowed,
            }
        })
    }
}

/// A pipeline's rate budget, honoured across the concurrent records of one
/// invocation (and across the local runtime's workers). On AWS each warm
/// Lambda instance keeps its own budget: cap the function's concurrency to
/// keep the total.
///
/// The rate is given in exactly one of `requests_per_second` and
/// `requests_per_minute` (a vendor's `100/min`, Django REST Framework's
/// throttle, is `requests_per_minute: 100`: one call every 0.6 s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateBudget {
    /// Calls started per second (at least 1), without bursts; exactly one
    /// of this and `requests_per_minute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<u32>,
    /// Calls started per minute (at least 1), evenly spaced (`100`: one
    /// call every 0.6 s), without bursts; exactly one of this and
    /// `requests_per_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    /// Calls in flight at once (default: no limit besides the batch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

impl RateBudget {
    /// `n` calls a second.
    pub fn per_second(n: u32) -> Self {
        Self { requests_per_second: Some(n), ..Self::default() }
    }

    /// `n` calls a minute.
    pub fn per_minute(n: u32) -> Self {
        Self { requests_per_minute: Some(n), ..Self::default() }
    }

    /// The rate as `(calls, per seconds)`: `(n, 1)` for
    /// `requests_per_second: n`, `(n, 60)` for `requests_per_minute: n`.
    /// A budget that names neither, or a rate of 0, reads as one call a
    /// second (the spec's validation refuses both before a message is
    /// sent; see `spec::check_policy`); with both, the per-second rate.
    pub fn calls_per_secs(&self) -> (u32, u32) {
        match (self.requests_per_second, self.requests_per_minute) {
            (Some(n), _) => (n.max(1), 1),
            (None, Some(n)) => (n.max(1), 60),
            (None, None) => (1, 1),
        }
    }
}

/// What a status means when it is not a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StatusAction {
    /// An empty page: zero records, not a failure (e.g. 404 for "no data").
    Empty,
    /// Retry with backoff, like a 5xx (e.g. a vendor's 409 "busy").
    Retry,
    /// Fail at once, permanently (to the DLQ with an alert).
    Fail,
}

/// Rules for reading responses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseRules {
    /// Actions by status code, e.g. `{404: empty}`. Without an entry, 2xx
    /// succeed, 5xx, 408 and 429 are retried and other codes fail
    /// permanently.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status_actions: BTreeMap<u16, StatusAction>,
    /// Media type a successful response must declare (`Content-Type`
    /// without parameters, e.g. `application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Largest body read, in bytes; the read stops past it and the record
    /// fails permanently (default: Request's `MAX_RESPONSE_BYTES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl ResponseRules {
    /// Whether every rule is the default.
    pub fn is_default(&self) -> bool {
        self == &ResponseRules::default()
    }
}
