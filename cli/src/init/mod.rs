//! `tributary init URL`: a pipeline spec from what a vendor answers.
//!
//! 1. Page 1 is fetched through Request's own HTTP caller ([`call`]): the
//!    SSRF guard (loopback only when allowed), credentials by secret id,
//!    redirects re-checked, retries with `Retry-After` honoured.
//! 2. Its records and paging are read ([`detect`]): the largest array of
//!    objects (or the body, or NDJSON lines); a total in the body or a
//!    header, a `Link: rel="next"`, a next URL or token in the body,
//!    `has_more`, page parameters in the URL: candidate strategies, each in
//!    the spec's own paging forms.
//! 3. Each candidate, most likely first, is proved ([`prove`]) as a run
//!    would use it: planned by the Orchestrator's strategy, its first two
//!    pages fetched by Request's handler; the first whose page 2 holds
//!    other records than page 1 (or that has one page, nothing
//!    contradicting it) is the spec.
//! 4. Persist's inference gives the table ([`schema`]); the spec is
//!    written as commented YAML ([`render`]) and read back to check it.
//!
//! Nothing is written here: [`init`] returns the spec and the report, or an
//! [`InitError`] of one line naming the cause. Secrets are read by id and
//! never shown.

pub mod call;
pub mod command;
pub mod detect;
pub mod prove;
pub mod render;
pub mod schema;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use contracts::spec::{PipelineSpec, RequestTemplate, StrategySpec};
use contracts::{
    Auth, CallPolicy, Destination, HttpCall, HttpMethod, NetworkPolicy, PageRef, PersistTarget, RequestMessage,
    RequestMode, ResponseRules, RunId, StatusAction, V1,
};
use request::{Fetched, RequestError};
use tributary_core::ports::PortError;

use self::call::Caller;
use self::detect::{Candidate, Detected, FirstPage, RecordsAt};
use self::prove::{Proof, Verdict, one_line};

/// At most this many candidate specs are proved (a few calls each).
const MAX_CANDIDATES: usize = 4;

/// What `tributary init` is given.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// The vendor endpoint, as a user would call it for page 1.
    pub url: String,
    /// Credentials, by secret id.
    pub auth: Option<Auth>,
    /// Pipeline and dataset name; default: from the URL's last path segment.
    pub dataset: Option<String>,
    /// Allow loopback addresses (the SSRF guard refuses them otherwise).
    pub allow_loopback: bool,
    /// Allow private addresses.
    pub allow_private: bool,
    /// Where local secrets are read when `TRIBUTARY_SECRET_<ID>` is unset.
    pub secrets_file: PathBuf,
}

/// The spec init inferred and what it says about it.
#[derive(Clone, Debug)]
pub struct Inferred {
    /// The spec.
    pub spec: PipelineSpec,
    /// It as commented YAML (read back to `spec`).
    pub yaml: String,
    /// What was seen, proved and left undecided.
    pub report: Report,
}

/// What init tells its user besides the spec.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// `GET <url>` of page 1, credentials masked.
    pub target: String,
    /// HTTP calls made.
    pub calls: usize,
    /// Where the records are.
    pub records: String,
    /// The paging chosen and what it rests on.
    pub paging: String,
    /// What proved it.
    pub proof: String,
    /// Candidates tried before it, and why each was not taken.
    pub rejected: Vec<String>,
    /// The inferred table's columns.
    pub columns: Vec<schema::Column>,
    /// Records the columns were inferred from.
    pub sampled: usize,
    /// What init could not decide, and why.
    pub undecided: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "vendor     {} ({} calls)", self.target, self.calls)?;
        writeln!(f, "records    {}", self.records)?;
        writeln!(f, "paging     {}", self.paging)?;
        writeln!(f, "proved     {}", self.proof)?;
        for rejected in &self.rejected {
            writeln!(f, "not taken  {rejected}")?;
        }
        writeln!(
            f,
            "\ntable (as Persist infers it from the {} records fetched; lineage and dt columns besides):",
            self.sampled
        )?;
        let width = self.columns.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let type_width = self.columns.iter().map(|c| c.ty.len()).max().unwrap_or(0);
        for column in &self.columns {
            let line = format!(
                "  {:width$}  {:type_width$}  {}",
                column.name,
                column.ty,
                column.note.as_deref().unwrap_or("")
            );
            writeln!(f, "{}", line.trim_end())?;
        }
        if !self.undecided.is_empty() {
            writeln!(f, "\nnot decided:")?;
            for line in &self.undecided {
                writeln!(f, "  - {line}")?;
            }
        }
        Ok(())
    }
}

/// Why init wrote nothing: one line, naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The URL or another option cannot make a spec.
    #[error("{0}")]
    Input(String),
    /// The vendor could not be reached (DNS, connection, time-out).
    #[error("cannot reach the vendor: {0}")]
    Unreachable(String),
    /// The SSRF guard refused the address.
    #[error("{reason}{hint}")]
    Refused {
        /// The guard's reason.
        reason: String,
        /// What to pass to allow it, if anything may.
        hint: &'static str,
    },
    /// The vendor wants credentials (401/403).
    #[error("{target} answered HTTP {status}: {why}")]
    Auth {
        /// `GET <url>`.
        target: String,
        /// 401 or 403.
        status: u16,
        /// What to do, naming the auth options.
        why: String,
    },
    /// The vendor answered with another error.
    #[error("{0}")]
    Vendor(String),
    /// An HTML page instead of JSON.
    #[error("{target} answered an HTML page{what}, not JSON: {hint}")]
    Html {
        /// `GET <url>`.
        target: String,
        /// `" (a login page)"` when it looks like one.
        what: &'static str,
        /// What to do.
        hint: &'static str,
    },
    /// A body that is not JSON (nor NDJSON).
    #[error("{target} answered a body that is not JSON ({error}); it starts {excerpt}")]
    NotJson {
        /// `GET <url>`.
        target: String,
        /// The parser's error.
        error: String,
        /// The body's first bytes, scrubbed.
        excerpt: String,
    },
    /// No records in the body.
    #[error("{target}: {source}")]
    NoRecords {
        /// `GET <url>`.
        target: String,
        /// What the body holds instead.
        source: detect::NoRecords,
    },
    /// Page 2 repeats page 1 for every way the vendor shows.
    #[error(
        "page 2 repeats page 1 whichever way the vendor shows is followed ({0}): the vendor ignores its own paging, so a run could not get past page 1"
    )]
    Repeats(String),
    /// The paging cannot be told.
    #[error("cannot classify the vendor's paging: {0}; write `strategy` by hand (docs/request.md, \"Pagination\")")]
    Unclassified(String),
    /// Local trouble (the HTTP client, a scratch directory).
    #[error("init: {0}")]
    Local(String),
}

/// Infers a spec from `options.url`: page 1, the paging proved on page 2,
/// the table; writes nothing.
///
/// # Errors
/// [`InitError`], one line naming the cause.
pub async fn init(options: &InitOptions) -> Result<Inferred, InitError> {
    let (asked, draft) = draft(options)?;
    let caller = caller(options, &draft)?;
    let target = format!("GET {}", contracts::redacted_url(&asked));
    let fetched = caller.fetch(&first_message(&draft)).await.map_err(|err| call_error(err, &target))?;
    let page = read_page(&fetched, &target, options.auth.is_some())?;
    let records =
        detect::find_records(&page.body).map_err(|source| InitError::NoRecords { target: target.clone(), source })?;
    let detected = detect::detect(&FirstPage {
        asked: &asked,
        url: &fetched.url,
        headers: &fetched.response.headers,
        body: &page.body,
        records: &records,
    });
    if let Some(why) = &detected.unclassified {
        return Err(InitError::Unclassified(why.clone()));
    }
    let (candidate, proof, rejected) = choose(&caller, &draft, &records, &detected).await?;
    let found = Found {
        target,
        calls: caller.calls(),
        headers: &fetched.response.headers,
        ndjson: page.ndjson,
        records: &records,
        detected: &detected,
        stripped: candidate.url != asked,
        candidate,
        proof: &proof,
        rejected,
    };
    write_up(spec_for(&draft, candidate, &records), found)
}

/// The URL checked, and a spec of it with the options' name, credentials
/// and network allowance (its strategy still to be found).
fn draft(options: &InitOptions) -> Result<(url::Url, PipelineSpec), InitError> {
    let asked = check_url(&options.url)?;
    let name = options.dataset.clone().unwrap_or_else(|| default_name(&asked));
    contracts::spec::check_dataset("--dataset", &name).map_err(|err| InitError::Input(err.to_string()))?;
    let allow = NetworkPolicy { hosts: Vec::new(), loopback: options.allow_loopback, private: options.allow_private };
    let draft = draft_spec(&name, &asked, options.auth.clone(), allow, StrategySpec::Simple {}, None);
    draft.validate().map_err(|err| InitError::Input(err.to_string()))?;
    Ok((asked, draft))
}

/// Request's caller for `draft`: the local runtime's trust, with only the
/// networks the options allow, and the draft's secret granted to its
/// origin, as `tributary run` grants a spec's.
fn caller(options: &InitOptions, draft: &PipelineSpec) -> Result<Caller, InitError> {
    let mut trust = crate::runtime::local_trust();
    trust.networks =
        tributary_core::ports::NetworkAccess { loopback: options.allow_loopback, private: options.allow_private };
    trust.grant_spec(draft);
    Caller::new(options.secrets_file.clone(), trust).map_err(|err| InitError::Local(err.to_string()))
}

/// What init found, for the report and the YAML's comments.
struct Found<'a> {
    target: String,
    calls: usize,
    headers: &'a BTreeMap<String, String>,
    ndjson: bool,
    records: &'a RecordsAt,
    detected: &'a Detected,
    /// The spec's URL lost paging parameters of the one given.
    stripped: bool,
    candidate: &'a Candidate,
    proof: &'a Proof,
    rejected: Vec<String>,
}

/// The report and the commented YAML of `spec`, the YAML checked to read
/// back as `spec`.
fn write_up(spec: PipelineSpec, found: Found<'_>) -> Result<Inferred, InitError> {
    let pages: Vec<&[Value]> = found.proof.pages.iter().map(|page| page.records.as_slice()).collect();
    let columns = schema::infer(&pages, &spec.target).map_err(|err| InitError::Vendor(one_line(&err.to_string())))?;
    let incremental = detect::update_field(pages.first().copied().unwrap_or_default());
    let mut report = Report {
        target: found.target.clone(),
        calls: found.calls,
        records: records_text(found.records, found.ndjson),
        paging: found.candidate.why.clone(),
        proof: proof_text(found.proof),
        rejected: found.rejected.clone(),
        sampled: pages.iter().map(|p| p.len()).sum(),
        columns,
        undecided: found.detected.undecided.clone(),
    };
    report.undecided.extend(undecided(&spec, &found, incremental.as_deref()));
    let notes = notes(&spec, &report, &found, incremental);
    let yaml = render::render(&spec, &notes);
    match PipelineSpec::from_yaml(&yaml) {
        Ok(back) if back == spec => Ok(Inferred { spec, yaml, report }),
        Ok(_) => Err(InitError::Local("the YAML written does not read back as the spec inferred (a bug)".into())),
        Err(err) => Err(InitError::Local(format!("the spec inferred is not valid ({err}) (a bug)"))),
    }
}

/// The URL as a spec takes it: http(s), no user info, no credential in
/// its query (those are given by secret id).
fn check_url(text: &str) -> Result<url::Url, InitError> {
    let url: url::Url = text.parse().map_err(|err| InitError::Input(format!("URL {text:?} is not a URL: {err}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(InitError::Input(format!(
            "URL {}: only http and https URLs with a host are called",
            contracts::redacted_url(&url)
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InitError::Input(
            "the URL holds user info (user:password@): give credentials by secret id instead: --auth basic --secret ID"
                .into(),
        ));
    }
    if let Some((name, _)) = url.query_pairs().find(|(name, _)| contracts::is_credential_param(name)) {
        return Err(InitError::Input(format!(
            "the URL's query holds a credential ({name}=…): give it by secret id instead: --auth api_key --secret ID --query-param {name}"
        )));
    }
    Ok(url)
}

/// A pipeline name from the URL's last path segment (`/v1/customers` ->
/// `customers`), else `vendor`.
pub fn default_name(url: &url::Url) -> String {
    let segment =
        url.path_segments().and_then(|mut s| s.rfind(|s| !s.is_empty()).map(str::to_string)).unwrap_or_default();
    let mut name = String::new();
    for c in segment.chars() {
        let c = if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' };
        if !(c == '_' && (name.is_empty() || name.ends_with('_'))) {
            name.push(c);
        }
    }
    let name: String = name.trim_end_matches('_').chars().take(64).collect();
    if name.is_empty() || contracts::spec::check_dataset("dataset", &name).is_err() { "vendor".into() } else { name }
}

/// A spec of `strategy` for the vendor at `url`.
fn draft_spec(
    name: &str,
    url: &url::Url,
    auth: Option<Auth>,
    allow: NetworkPolicy,
    strategy: StrategySpec,
    records_pointer: Option<String>,
) -> PipelineSpec {
    PipelineSpec {
        version: V1,
        pipeline: name.to_string(),
        description: None,
        strategy,
        request: RequestTemplate {
            method: HttpMethod::Get,
            url: url.clone(),
            query: BTreeMap::new(),
            headers: BTreeMap::new(),
            body: None,
            records_pointer,
            policy: CallPolicy { auth, allow, ..CallPolicy::default() },
        },
        target: PersistTarget::new(name),
        freshness: None,
        incremental: None,
        schedule: None,
    }
}

/// `draft` with `candidate`'s strategy and URL and the records' pointer.
fn spec_for(draft: &PipelineSpec, candidate: &Candidate, records: &RecordsAt) -> PipelineSpec {
    let mut spec = draft.clone();
    spec.strategy = candidate.strategy.clone();
    spec.request.url = candidate.url.clone();
    spec.request.records_pointer = records.pointer.clone();
    spec
}

/// Page 1's call: the URL as given, its 401 and 403 read as answers (so
/// init can say what the vendor asks for) rather than failures.
fn first_message(draft: &PipelineSpec) -> RequestMessage {
    let now = chrono::Utc::now();
    let mut policy = draft.request.policy.clone();
    policy.response = ResponseRules {
        status_actions: [(401, StatusAction::Empty), (403, StatusAction::Empty)].into_iter().collect(),
        ..ResponseRules::default()
    };
    RequestMessage {
        version: V1,
        pipeline: draft.pipeline.clone(),
        run_id: RunId::from_time(now),
        run_date: now.date_naive(),
        page: Some(PageRef::SINGLE),
        http: HttpCall {
            method: HttpMethod::Get,
            url: draft.request.url.clone(),
            query: BTreeMap::new(),
            headers: BTreeMap::new(),
            body: None,
        },
        policy,
        mode: RequestMode::Records {
            records_pointer: None,
            target: draft.target.clone(),
            next: None,
            planned_total: None,
            cursor_field: None,
        },
        reply_to: Destination::Queue { queue: tributary_core::topology::PERSIST_QUEUE.into() },
    }
}

/// A failed call as init reports it.
fn call_error(err: RequestError, target: &str) -> InitError {
    let text = one_line(&err.to_string());
    if text.contains("SSRF guard") {
        let hint = if text.contains("loopback") {
            " (pass --allow-loopback to call a vendor on this machine)"
        } else if text.contains("private") {
            " (pass --allow-private to call a vendor in your network)"
        } else {
            ""
        };
        return InitError::Refused { reason: text, hint };
    }
    let transport = match &err {
        RequestError::Transport(port) => Some(port),
        RequestError::RetryLater { last, .. } => match last.as_ref() {
            RequestError::Transport(port) => Some(port),
            _ => None,
        },
        _ => None,
    };
    match (transport, &err) {
        (Some(PortError::TooLarge { .. }), _) => {
            InitError::Vendor(format!("{text}: give init a URL answering a smaller page (a page size parameter)"))
        }
        (Some(_), _) if text.contains(&format!("at most {}", call::MAX_CALLS)) => InitError::Vendor(text),
        (Some(_), _) => InitError::Unreachable(text),
        (None, RequestError::RetryLater { reason, .. }) => InitError::Vendor(format!(
            "the vendor asked {target} to wait ({reason}): {text}; try init again after the pause it asks for"
        )),
        _ => InitError::Vendor(text),
    }
}

/// Page 1's body, read.
struct PageBody {
    /// The body (NDJSON lines as one array).
    body: Value,
    /// Whether it was NDJSON.
    ndjson: bool,
}

/// Page 1's body as JSON, or why it is not: the vendor's 401/403 (naming
/// the auth options), an HTML page, a body that is not JSON.
fn read_page(fetched: &Fetched, target: &str, with_auth: bool) -> Result<PageBody, InitError> {
    let response = &fetched.response;
    if fetched.empty {
        return Err(auth_error(response.status, target, &response.headers, with_auth));
    }
    let raw = response.body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&response.body);
    let media = response.headers.get("content-type").and_then(|t| t.split(';').next()).unwrap_or("").trim();
    let media = media.to_ascii_lowercase();
    let start = String::from_utf8_lossy(&raw[..raw.len().min(64 * 1024)]).to_lowercase();
    if media.contains("html")
        || start.trim_start().starts_with("<!doctype html")
        || start.trim_start().starts_with("<html")
    {
        let login = ["password", "login", "log in", "sign in", "signin"].iter().any(|word| start.contains(word));
        return Err(if login {
            InitError::Html {
                target: target.to_string(),
                what: " (a login page)",
                hint: "the endpoint wants credentials: give them by secret id (--auth bearer|api_key|basic|oauth2_client_credentials --secret ID), and give init the vendor's API URL, not its web page",
            }
        } else {
            InitError::Html {
                target: target.to_string(),
                what: "",
                hint: "give init the vendor's API URL (one answering JSON), not a web page",
            }
        });
    }
    let normalized = request::normalize_body(response);
    match serde_json::from_slice::<Value>(&normalized).or_else(|err| representable(&normalized).ok_or(err)) {
        Ok(body) => {
            let ndjson = media.contains("ndjson")
                || media.contains("jsonl")
                || media.contains("json-seq")
                || serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_err();
            Ok(PageBody { body, ndjson })
        }
        Err(err) => {
            let scrubber = fetched.credentials.as_ref().map_or(&request::scrub::NONE, |c| c.scrubber());
            Err(InitError::NotJson {
                target: target.to_string(),
                error: one_line(&err.to_string()),
                excerpt: format!("{:?}", scrubber.excerpt(raw, 60)),
            })
        }
    }
}

/// `body` read as Request reads a page's envelope when serde_json cannot
/// hold a value of it (a number beyond `f64`'s range such as `1e400`, a
/// lone UTF-16 surrogate): those values as `null`
/// (`tributary_core::json::tape::without_unrepresentable`), so init
/// samples the page as `tributary run` fetches it, where Persist
/// quarantines the records holding them, naming the value. `None` when
/// `body` is not JSON at all.
pub(crate) fn representable(body: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    let cleaned = tributary_core::json::tape::without_unrepresentable(text).ok()??;
    tracing::warn!(
        "the sample holds values JSON readers cannot hold (a number beyond a 64-bit float such as 1e400, or a lone \
         UTF-16 surrogate): init reads them as null; `tributary run` quarantines the records holding them"
    );
    serde_json::from_str(&cleaned).ok()
}

/// A 401 or 403, naming what to give.
fn auth_error(status: u16, target: &str, headers: &BTreeMap<String, String>, with_auth: bool) -> InitError {
    let scheme = headers
        .get("www-authenticate")
        .and_then(|challenge| challenge.split_whitespace().next())
        .map(str::to_ascii_lowercase);
    let asked = match scheme.as_deref() {
        Some("basic") => {
            "it asks for Basic auth (WWW-Authenticate): --auth basic --secret ID, the secret holding user:password; "
        }
        Some("bearer") => "it asks for a bearer token (WWW-Authenticate): --auth bearer --secret ID; ",
        Some("token") => "it asks for a token (WWW-Authenticate: Token): --auth bearer --scheme Token --secret ID; ",
        _ => "",
    };
    let options = "the kinds are --auth bearer [--scheme WORD], --auth api_key --header NAME (or --query-param NAME), \
                   --auth basic, --auth oauth2_client_credentials --token-url URL --client-id ID, each with --secret ID, \
                   whose value is read from TRIBUTARY_SECRET_<ID> or <lake>/_secrets.json";
    let why = match (with_auth, status) {
        (false, 401) => format!("it wants credentials; {asked}{options}"),
        (false, _) => format!("it refuses the call (forbidden), which credentials may open; {asked}{options}"),
        (true, 401) => {
            format!("the credentials given were refused: check the secret's value and the kind; {asked}{options}")
        }
        (true, _) => format!(
            "the credentials given may not read this endpoint (forbidden): check the secret and its scopes; {options}"
        ),
    };
    InitError::Auth { target: target.to_string(), status, why }
}

/// Proves the candidates in order; the first that works, its proof, and
/// why each one before it was not taken.
async fn choose<'a>(
    caller: &Caller,
    draft: &PipelineSpec,
    records: &RecordsAt,
    detected: &'a Detected,
) -> Result<(&'a Candidate, Proof, Vec<String>), InitError> {
    let mut rejected = Vec::new();
    let mut repeats = Vec::new();
    for candidate in detected.candidates.iter().take(MAX_CANDIDATES) {
        if caller.spent() {
            rejected.push(format!("{}: not tried, the call budget is spent", candidate.why));
            continue;
        }
        let spec = spec_for(draft, candidate, records);
        if let Err(err) = spec.validate() {
            rejected.push(format!("{}: {err}", candidate.why));
            continue;
        }
        let proof = prove::prove(caller, &spec, detected.more_expected).await;
        match &proof.verdict {
            Verdict::Proven | Verdict::Unproven(_) => return Ok((candidate, proof, rejected)),
            Verdict::Repeats(why) => {
                if !candidate.guessed {
                    repeats.push(format!("{}: {why}", candidate.why));
                }
                rejected.push(format!("{}: {why}", candidate.why));
            }
            Verdict::Failed(why) => rejected.push(format!("{}: {why}", candidate.why)),
        }
    }
    let tried = rejected.join("; ");
    if !repeats.is_empty() {
        return Err(InitError::Repeats(repeats.join("; ")));
    }
    if detected.candidates.iter().all(|candidate| candidate.guessed) {
        let said = detect::unclassified(&detected.signals, records.count);
        return Err(InitError::Unclassified(format!("{said}; guessed ways gave no page 2 of other records ({tried})")));
    }
    Err(InitError::Vendor(format!("no paging shown by the vendor works: {tried}")))
}

fn records_text(records: &RecordsAt, ndjson: bool) -> String {
    match (&records.pointer, ndjson) {
        (_, true) => format!("NDJSON, one record a line ({} on page 1; records_pointer empty)", records.count),
        (None, false) => format!("the body itself, an array of {} objects", records.count),
        (Some(pointer), false) => {
            format!("{pointer}, the largest array of objects on page 1 ({} records)", records.count)
        }
    }
}

fn proof_text(proof: &Proof) -> String {
    let total = proof.total.map(|total| format!("; the probe read the total {total}")).unwrap_or_default();
    match (&proof.verdict, proof.pages.as_slice()) {
        (Verdict::Proven, [first, second, ..]) => format!(
            "page 2 ({}) holds {} records, none of page 1's {}{total}",
            second.call,
            second.records.len(),
            first.records.len()
        ),
        (Verdict::Unproven(why), _) => format!("not proved: {why}{total}"),
        (_, _) => format!("not proved{total}"),
    }
}

/// What init could not decide, beside what detection said.
fn undecided(spec: &PipelineSpec, found: &Found<'_>, incremental: Option<&str>) -> Vec<String> {
    let Found { detected, proof, headers, .. } = found;
    let mut out = Vec::new();
    let size = match &spec.strategy {
        StrategySpec::Paged(paged) => Some(("strategy.page_size", paged.page_size)),
        StrategySpec::Cursor(cursor) => match &cursor.next {
            contracts::NextPage::Numbered { params: contracts::PageParams::OffsetLimit { .. }, size } => {
                Some(("strategy.next.limit", *size))
            }
            contracts::NextPage::Numbered { size, .. } => Some(("strategy.next.size", *size)),
            _ => None,
        },
        _ => None,
    };
    if let Some((field, size)) = size {
        out.push(format!(
            "{field} {size}: what page 1 asked for or held; the vendor's largest page size is not shown (a larger one \
             means fewer calls, one above the vendor's cap ends a count-first run truncated)"
        ));
    }
    if let Some(field) = incremental {
        out.push(format!(
            "incremental: {field} looks like an update time, but the vendor's \"changed since\" parameter is not in \
             its answers, so the block is written commented out"
        ));
    }
    if let Some(limit) = headers.get("x-ratelimit-limit").or_else(|| headers.get("ratelimit-limit")) {
        out.push(format!(
            "request.rate: the vendor says its rate limit is {limit} but not over what time; set request.rate to it \
             (docs/request.md, \"Rate budget\")"
        ));
    }
    if matches!(proof.verdict, Verdict::Unproven(_)) && !matches!(spec.strategy, StrategySpec::Simple {}) {
        out.push("the paging: page 1 is all the vendor has now, so page 2 could not be fetched to prove it".into());
    }
    if detected.candidates.len() > MAX_CANDIDATES {
        out.push(format!(
            "{} more ways the vendor may page were not tried",
            detected.candidates.len() - MAX_CANDIDATES
        ));
    }
    out.push(
        "schedule: when the pipeline runs on AWS is yours to say (schedule.expression); tributary run runs it now"
            .into(),
    );
    out
}

/// The YAML's comments.
fn notes(spec: &PipelineSpec, report: &Report, found: &Found<'_>, incremental: Option<String>) -> render::Notes {
    let Found { candidate, records, ndjson, stripped, .. } = found;
    let mut notes = render::Notes {
        header: vec![
            format!(
                "Written by `tributary init` from what {} answered ({}).",
                report.target,
                chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
            ),
            format!("Records: {}.", report.records),
            format!("Paging: {}.", candidate.why),
            format!("Proved: {}.", report.proof),
            "Check it: tributary validate FILE; run it: tributary run FILE --lake lake".into(),
            String::new(),
        ],
        incremental,
        ..render::Notes::default()
    };
    let mut note = |field: &str, text: String| {
        notes.fields.insert(field.to_string(), one_line(&text));
    };
    match &spec.strategy {
        StrategySpec::Paged(paged) => {
            note("strategy.kind", "count first: a probe reads the total, then one call per page".into());
            note("strategy.page_size", "records per page".into());
            let total = if paged.total_header.is_some() { "strategy.total_header" } else { "strategy.total_pointer" };
            note(total, "where the vendor says how many records there are".into());
            note("strategy.params", "how a page is asked for".into());
        }
        StrategySpec::Cursor(cursor) => {
            note("strategy.kind", "each page says where the next one is (no total up front)".into());
            let next = match &cursor.next {
                contracts::NextPage::LinkHeader {} => "the Link header's rel=\"next\"; none ends the run",
                contracts::NextPage::BodyUrl { .. } => "the next page's URL in the body; null or absent ends the run",
                contracts::NextPage::BodyToken { .. } => "the next page's token, sent back as param; none ends the run",
                contracts::NextPage::LastRecord { .. } => {
                    "the next page starts after the last record's key, while has_more is true"
                }
                contracts::NextPage::Numbered { params: contracts::PageParams::OffsetLimit { .. }, .. } => {
                    "pages by offset; a page with fewer records ends the run"
                }
                contracts::NextPage::Numbered { .. } => "numbered pages; a page with fewer records ends the run",
                // A kind newer than this build (the enum is non-exhaustive).
                _ => "where the vendor says the next page is",
            };
            note("strategy.next", next.into());
        }
        _ => note("strategy.kind", "one call: the vendor shows no paging".into()),
    }
    if !matches!(spec.strategy, StrategySpec::Simple {}) {
        note("strategy.max_pages", "a run stops there, truncated".into());
    }
    let url = if *stripped { "page 1's URL, without the paging parameters the strategy sets" } else { "page 1's URL" };
    note("request.url", url.into());
    if records.pointer.is_some() && !*ndjson {
        note("request.records_pointer", "the largest array of objects on page 1".into());
    }
    if spec.request.policy.auth.is_some() {
        note(
            "request.auth",
            "the value is read by id (locally TRIBUTARY_SECRET_<ID> or <lake>/_secrets.json; on AWS Secrets Manager), never written here".into(),
        );
    }
    if !spec.request.policy.allow.is_default() {
        note("request.allow", "as init was told (--allow-loopback / --allow-private)".into());
    }
    note("target.dataset", "the lake's folder and table".into());
    notes
}
