//! What a vendor's first page shows, read without calling anything: where
//! the records are ([`find_records`]), how the vendor pages ([`detect`]:
//! the candidate strategies, most likely first, each in the spec's own
//! paging forms) and which record field looks like an update time
//! ([`update_field`]).
//!
//! Names are matched on their lower-case letters and digits only
//! (`next_cursor`, `nextCursor` and `next-cursor` are one name).

use std::collections::BTreeMap;

use serde_json::Value;

use contracts::spec::{CursorSpec, PagedSpec, StrategySpec};
use contracts::{NextPage, PageParams};

/// How deep [`find_records`] and the envelope's names are searched: a body's
/// records and paging fields sit a few levels down at most.
const MAX_DEPTH: usize = 6;

/// Body fields holding the vendor's total record count, best first.
const TOTAL_NAMES: [&str; 15] = [
    "total",
    "totalcount",
    "totalresults",
    "totalitems",
    "totalrecords",
    "totalelements",
    "totalentries",
    "totalsize",
    "totalhits",
    "numfound",
    "numresults",
    "resultcount",
    "recordcount",
    "itemcount",
    "count",
];

/// Response headers holding the total record count as a number (what
/// `strategy.total_header` reads).
const TOTAL_HEADERS: [&str; 9] = [
    "x-total-count",
    "x-total",
    "total-count",
    "x-total-results",
    "x-pagination-total-count",
    "x-wp-total",
    "x-result-count",
    "x-total-items",
    "x-total-records",
];

/// Body fields holding the next page's URL.
const NEXT_URL_NAMES: [&str; 8] =
    ["next", "nexturl", "nextpage", "nextpageurl", "nextlink", "odatanextlink", "nexthref", "nextpagelink"];

/// Body fields holding the next page's token, best first.
const TOKEN_NAMES: [&str; 14] = [
    "nextcursor",
    "nextpagecursor",
    "nexttoken",
    "nextpagetoken",
    "continuationtoken",
    "continuation",
    "nextmarker",
    "nextkey",
    "endcursor",
    "after",
    "scrollid",
    "marker",
    "cursor",
    "next",
];

/// Body fields saying whether more pages follow.
const HAS_MORE_NAMES: [&str; 9] = [
    "hasmore",
    "hasnext",
    "hasnextpage",
    "more",
    "moreresults",
    "hasmoreresults",
    "hasmoreitems",
    "hasmorepages",
    "moreavailable",
];

/// Query parameters (and body echoes) of an offset.
const OFFSET_NAMES: [&str; 6] = ["offset", "skip", "start", "from", "startindex", "startat"];
/// Query parameters (and body echoes) of a page size.
const SIZE_NAMES: [&str; 13] = [
    "limit",
    "perpage",
    "pagesize",
    "size",
    "count",
    "max",
    "rows",
    "top",
    "maxresults",
    "take",
    "pagelen",
    "num",
    "pagelimit",
];
/// Query parameters (and body echoes) of a page number.
const PAGE_NAMES: [&str; 7] = ["page", "p", "pagenumber", "pageno", "pageindex", "pg", "currentpage"];

/// Query parameters that carry a token, cursor or last key: the user's URL
/// naming one tells the token's parameter.
const TOKEN_PARAMS: [&str; 9] =
    ["cursor", "after", "startingafter", "continuation", "marker", "next", "sinceid", "afterid", "pagecursor"];

/// Record fields that look like an update time, best first.
const UPDATE_NAMES: [&str; 22] = [
    "updatedat",
    "updatedon",
    "updated",
    "updatetime",
    "updatedtime",
    "updateddate",
    "dateupdated",
    "lastupdated",
    "lastupdatedat",
    "lastupdate",
    "modifiedat",
    "modifiedon",
    "modified",
    "modifiedtime",
    "modifieddate",
    "datemodified",
    "lastmodified",
    "lastmodifiedat",
    "lastmodifieddate",
    "changedat",
    "lastchanged",
    "systemmodstamp",
];

/// A name as matched: its ASCII letters and digits, lower-cased.
pub fn norm(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// `key` as one RFC 6901 pointer segment.
fn segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Where a page's records are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordsAt {
    /// RFC 6901 pointer to the array; `None`: the body itself.
    pub pointer: Option<String>,
    /// Records on the page.
    pub count: usize,
}

/// Why no records were found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoRecords {
    /// Arrays were found, all empty.
    #[error("the first page holds no records (the array at {0} is empty): give init a URL that answers some")]
    Empty(String),
    /// The body is an array of values that are not objects.
    #[error("the body is an array of {0}, not of objects: records must be JSON objects")]
    NotObjects(&'static str),
    /// No array at all.
    #[error(
        "the body holds no array of objects (its keys: {0}): init needs a list endpoint, whose answer holds the records as an array"
    )]
    None(String),
}

/// The records of a page: the largest array of objects in the body (the
/// shallowest on a tie), or the body itself when it is one. Arrays inside
/// arrays are not searched (they are inside records).
///
/// # Errors
/// [`NoRecords`] saying what the body holds instead.
pub fn find_records(body: &Value) -> Result<RecordsAt, NoRecords> {
    if let Value::Array(items) = body {
        if items.is_empty() {
            return Err(NoRecords::Empty("the body".into()));
        }
        if !is_records(items) {
            return Err(NoRecords::NotObjects(tributary_core::json::kind_of(&items[0])));
        }
        return Ok(RecordsAt { pointer: None, count: items.len() });
    }
    let mut found: Option<(usize, usize, String)> = None;
    let mut empty: Option<String> = None;
    walk_arrays(body, String::new(), 0, &mut |pointer, depth, items| {
        if items.is_empty() {
            empty.get_or_insert_with(|| pointer.to_string());
        } else if is_records(items)
            && found.as_ref().is_none_or(|(len, d, _)| items.len() > *len || (items.len() == *len && depth < *d))
        {
            // Larger wins; on a tie the shallower, then the one found first.
            found = Some((items.len(), depth, pointer.to_string()));
        }
    });
    match (found, empty) {
        (Some((count, _, pointer)), _) => Ok(RecordsAt { pointer: Some(pointer), count }),
        (None, Some(pointer)) => Err(NoRecords::Empty(pointer)),
        (None, None) => {
            let keys = body.as_object().map_or_else(
                || tributary_core::json::kind_of(body).to_string(),
                |map| map.keys().take(12).cloned().collect::<Vec<_>>().join(", "),
            );
            Err(NoRecords::None(keys))
        }
    }
}

/// Whether `items` are records: objects (nulls aside), at least one.
fn is_records(items: &[Value]) -> bool {
    items.iter().any(Value::is_object) && items.iter().all(|item| item.is_object() || item.is_null())
}

/// Calls `visit(pointer, depth, items)` for every array reached through
/// objects only.
fn walk_arrays(value: &Value, pointer: String, depth: usize, visit: &mut dyn FnMut(&str, usize, &[Value])) {
    let Value::Object(map) = value else { return };
    if depth >= MAX_DEPTH {
        return;
    }
    for (key, child) in map {
        let here = format!("{pointer}/{}", segment(key));
        match child {
            Value::Array(items) => visit(&here, depth + 1, items),
            Value::Object(_) => walk_arrays(child, here, depth + 1, visit),
            _ => {}
        }
    }
}

/// One member of an object in the envelope (the body without its records).
struct Member<'a> {
    pointer: String,
    name: String,
    /// The normalised name of the object holding it (`""` at the top).
    parent: String,
    depth: usize,
    value: &'a Value,
}

fn members(body: &Value) -> Vec<Member<'_>> {
    fn walk<'a>(value: &'a Value, pointer: &str, parent: &str, depth: usize, out: &mut Vec<Member<'a>>) {
        let Value::Object(map) = value else { return };
        if depth >= MAX_DEPTH {
            return;
        }
        for (key, child) in map {
            let here = format!("{pointer}/{}", segment(key));
            let name = norm(key);
            out.push(Member {
                pointer: here.clone(),
                name: name.clone(),
                parent: parent.to_string(),
                depth,
                value: child,
            });
            walk(child, &here, &name, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(body, "", "", 0, &mut out);
    out
}

/// Where the vendor's total is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Total {
    /// In the body at this pointer.
    Body {
        /// RFC 6901 pointer.
        pointer: String,
        /// The value on page 1.
        value: u64,
    },
    /// In this response header, as a number.
    Header {
        /// Header name as the vendor sent it (lower case).
        name: String,
        /// The value on page 1.
        value: u64,
    },
}

impl Total {
    fn value(&self) -> u64 {
        match self {
            Total::Body { value, .. } | Total::Header { value, .. } => *value,
        }
    }

    fn describe(&self) -> String {
        match self {
            Total::Body { pointer, value } => format!("the body's total {value} at {pointer}"),
            Total::Header { name, value } => format!("the total {value} in header {name}"),
        }
    }
}

/// Numbered pages: how they are addressed and how many records each holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numbered {
    /// The parameters.
    pub params: PageParams,
    /// The page size the vendor was asked for or showed, if any.
    pub size: Option<u32>,
    /// Where they were seen, for people.
    pub seen: &'static str,
}

impl Numbered {
    fn describe(&self) -> String {
        let names: Vec<String> = self.params.names().iter().map(|(_, name)| format!("{name}=")).collect();
        format!("?{} {}", names.join("&"), self.seen)
    }
}

/// Everything page 1 shows about paging.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// The vendor's total record count.
    pub total: Option<Total>,
    /// A total only `Content-Range` carries (`items 0-9/120`), which
    /// `strategy.total_header` cannot read (it takes a number).
    pub content_range: Option<u64>,
    /// `Link: <…>; rel="next"`.
    pub link_next: Option<url::Url>,
    /// A next URL in the body: pointer and URL.
    pub next_url: Option<(String, url::Url)>,
    /// A next token in the body: pointer, its field name, and the token.
    pub token: Option<(String, String, String)>,
    /// A has-more boolean in the body: pointer and value.
    pub has_more: Option<(String, bool)>,
    /// Page parameters in the URL init was given.
    pub url_params: Option<Numbered>,
    /// Page parameters in the next link (header or body).
    pub next_params: Option<Numbered>,
    /// Page parameters the body echoes (`"page": 1, "per_page": 10`).
    pub body_params: Option<Numbered>,
}

impl Signals {
    /// Whether page 1 says that more pages follow.
    pub fn more_expected(&self, records: usize) -> bool {
        self.total.as_ref().is_some_and(|t| t.value() > records as u64)
            || self.content_range.is_some_and(|total| total > records as u64)
            || self.link_next.is_some()
            || self.next_url.is_some()
            || self.token.is_some()
            || self.has_more.as_ref().is_some_and(|(_, more)| *more)
    }

    /// How numbered pages are addressed, by what shows it best: the URL
    /// init was given, then the next link, then the body's echo.
    fn style(&self) -> Option<&Numbered> {
        self.url_params.as_ref().or(self.next_params.as_ref()).or(self.body_params.as_ref())
    }
}

/// A strategy init may write, with the URL it starts from.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The strategy.
    pub strategy: StrategySpec,
    /// The template's URL: the one init was given, without the parameters
    /// the strategy sets itself.
    pub url: url::Url,
    /// What it rests on, for people: `count-first: the body's total 95 at /meta/total; …`.
    pub why: String,
    /// Whether it rests on a guess rather than on something the vendor showed.
    pub guessed: bool,
}

/// What page 1 says, read.
#[derive(Clone, Debug, PartialEq)]
pub struct Detected {
    /// The paging signals.
    pub signals: Signals,
    /// The strategies to try, most likely first; empty when the paging
    /// cannot be told ([`Detected::unclassified`] says why).
    pub candidates: Vec<Candidate>,
    /// Why no candidate could be made, when none was.
    pub unclassified: Option<String>,
    /// Whether page 1 says more pages follow.
    pub more_expected: bool,
    /// What init could not decide, one line each.
    pub undecided: Vec<String>,
}

/// Page 1 as the vendor answered it.
pub struct FirstPage<'a> {
    /// The URL init was given.
    pub asked: &'a url::Url,
    /// The URL that answered (after redirects).
    pub url: &'a url::Url,
    /// Response headers, names in lower case.
    pub headers: &'a BTreeMap<String, String>,
    /// The body (NDJSON read as an array).
    pub body: &'a Value,
    /// Where its records are.
    pub records: &'a RecordsAt,
}

/// The body without its records (the array read as `[]`, as Request's
/// envelope), so a record's own `next` or `total` is never taken for the
/// page's.
fn envelope(body: &Value, records: &RecordsAt) -> Value {
    let mut envelope = body.clone();
    match &records.pointer {
        None => Value::Null,
        Some(pointer) => {
            if let Some(array) = envelope.pointer_mut(pointer) {
                *array = Value::Array(Vec::new());
            }
            envelope
        }
    }
}

/// Reads page 1's paging signals and makes the candidate strategies.
pub fn detect(page: &FirstPage<'_>) -> Detected {
    let envelope = envelope(page.body, page.records);
    let members = members(&envelope);
    let count = page.records.count;
    let mut signals = Signals {
        link_next: page
            .headers
            .get("link")
            .and_then(|link| request::paging::link_next(link))
            .and_then(|next| page.url.join(&next).ok())
            .filter(|next| next != page.url),
        next_url: next_url(&members, page.url),
        has_more: members.iter().find_map(|m| match m.value {
            Value::Bool(more) if HAS_MORE_NAMES.contains(&m.name.as_str()) => Some((m.pointer.clone(), *more)),
            _ => None,
        }),
        url_params: numbered_in_query(page.asked, "in the URL"),
        body_params: numbered_in_body(&members),
        content_range: page.headers.get("content-range").and_then(|range| content_range_total(range)),
        ..Signals::default()
    };
    signals.token = token(&members, signals.next_url.as_ref().map(|(pointer, _)| pointer.as_str()));
    let next = signals.link_next.as_ref().or(signals.next_url.as_ref().map(|(_, url)| url));
    signals.next_params = next.and_then(|next| numbered_in_next(page.asked, next, count));
    let more_signs = signals.link_next.is_some()
        || signals.next_url.is_some()
        || signals.token.is_some()
        || signals.has_more.as_ref().is_some_and(|(_, more)| *more);
    signals.total = total(&members, page.headers, count, more_signs);
    let more_expected = signals.more_expected(count);
    let (candidates, unclassified) = candidates(&signals, page, more_expected);
    let mut undecided = Vec::new();
    if let Some(total) = signals.content_range.filter(|_| signals.total.is_none()) {
        undecided.push(format!(
            "the total {total} is in Content-Range only, which strategy.total_header cannot read (it takes a header \
             holding just a number), so no count-first plan is made from it"
        ));
    }
    Detected { signals, candidates, unclassified, more_expected, undecided }
}

/// The candidates, most likely first, or why there is none.
fn candidates(signals: &Signals, page: &FirstPage<'_>, more_expected: bool) -> (Vec<Candidate>, Option<String>) {
    let count = page.records.count;
    let records_size = u32::try_from(count).unwrap_or(u32::MAX).max(1);
    let mut out = Vec::new();
    let style = signals.style();
    // 1. Count first: a total and a way to address pages.
    if let (Some(total), Some(style)) = (&signals.total, style) {
        let size = style.size.unwrap_or(records_size);
        out.push(paged(page.asked, total, style.params.clone(), size, &style.describe(), false));
    }
    // 2. The vendor's own next link or token.
    if let Some(next) = &signals.link_next {
        let why = format!("cursor: the Link header's rel=\"next\" ({})", contracts::redacted_url(next));
        out.push(cursor(page.asked.clone(), NextPage::LinkHeader {}, why, false));
    }
    let has_more = signals.has_more.as_ref().map(|(pointer, _)| pointer.clone());
    if let Some((pointer, _)) = &signals.next_url {
        let why = format!("cursor: the next page's URL in the body at {pointer}");
        let next = NextPage::BodyUrl { pointer: pointer.clone(), has_more: has_more.clone() };
        out.push(cursor(page.asked.clone(), next, why, false));
    }
    if let Some((pointer, name, _)) = &signals.token {
        for param in token_params(name, page.asked) {
            let why = format!("cursor: the next page's token in the body at {pointer}, sent as ?{param}=");
            let next =
                NextPage::BodyToken { pointer: pointer.clone(), param: param.clone(), has_more: has_more.clone() };
            out.push(cursor(without(page.asked, &[param.as_str()]), next, why, false));
        }
    }
    if let (Some(has_more), None, None) = (&has_more, &signals.token, &signals.next_url)
        && let Some(key) = last_record_key(page)
    {
        let param = page
            .asked
            .query_pairs()
            .map(|(name, _)| name.into_owned())
            .find(|name| ["startingafter", "after", "sinceid", "afterid"].contains(&norm(name).as_str()))
            .unwrap_or_else(|| "starting_after".into());
        let why = format!("cursor: {has_more} says more pages follow, each after the last record's {key} (?{param}=)");
        let next = NextPage::LastRecord { pointer: key, param: param.clone(), has_more: has_more.clone() };
        out.push(cursor(without(page.asked, &[param.as_str()]), next, why, false));
    }
    // 3. Numbered pages without a total: until a short page.
    if let (None, Some(style)) = (&signals.total, style) {
        let size = style.size.unwrap_or(records_size);
        let why = format!("cursor: numbered pages ({}) until a page holds fewer than {size}", style.describe());
        let names: Vec<&str> = style.params.names().into_iter().map(|(_, name)| name).collect();
        let next = NextPage::Numbered { params: style.params.clone(), size };
        out.push(cursor(without(page.asked, &names), next, why, false));
    }
    // 4. A total but no way shown to address pages: the two usual ways, guessed.
    if let (Some(total), None) = (&signals.total, style)
        && total.value() > count as u64
    {
        let guesses = [
            PageParams::default(),
            PageParams::PageNumber { page_param: "page".into(), size_param: Some("per_page".into()), first_page: 1 },
        ];
        for params in guesses {
            let seen = Numbered { params: params.clone(), size: None, seen: "guessed" };
            out.push(paged(page.asked, total, params, records_size, &seen.describe(), true));
        }
    }
    // 5. No total and no page or offset parameter, but page 1 holds as
    //    many records as the URL's size parameter asks: more pages may
    //    follow. The two usual ways, guessed (a vendor that ignores the
    //    guessed parameter repeats page 1, and the guess is dropped), then
    //    one call, saying so. A trial's `?per_page=50` vendor was written
    //    as one call and landed 50 of 240 records.
    if out.is_empty()
        && !more_expected
        && let Some((name, size)) = size_in_query(page.asked).filter(|(_, size)| *size as usize == count)
    {
        let guesses = [
            PageParams::PageNumber { page_param: "page".into(), size_param: Some(name.clone()), first_page: 1 },
            PageParams::OffsetLimit { offset_param: "offset".into(), limit_param: name.clone() },
        ];
        for params in guesses {
            let seen = Numbered { params: params.clone(), size: Some(size), seen: "guessed" };
            let why = format!(
                "cursor: numbered pages ({}): page 1 holds {size} records, as many as ?{name}= asks, so more may follow",
                seen.describe()
            );
            let next = NextPage::Numbered { params, size };
            out.push(cursor(without(page.asked, &[name.as_str()]), next, why, true));
        }
        let why = format!(
            "simple: page 1 is full ({size} records, as ?{name}= asks), but neither ?page= nor ?offset= gave another \
             page: one call, which may miss records; find the vendor's paging parameter in its documentation"
        );
        out.push(Candidate { strategy: StrategySpec::Simple {}, url: page.asked.clone(), why, guessed: false });
    }
    if !out.is_empty() {
        return (out, None);
    }
    if more_expected {
        return (out, Some(unclassified(signals, count)));
    }
    let why = match &signals.total {
        Some(total) => {
            format!("simple: {} fits page 1, and no next link, token or page parameter is shown", total.describe())
        }
        None => "simple: no total, next link, token or page parameter is shown: one call".into(),
    };
    out.push(Candidate { strategy: StrategySpec::Simple {}, url: page.asked.clone(), why, guessed: false });
    (out, None)
}

/// Why page 1 says more pages follow but shows no way to them.
pub fn unclassified(signals: &Signals, count: usize) -> String {
    let said = match (&signals.total, signals.content_range, &signals.has_more) {
        (Some(total), _, _) => total.describe(),
        (None, Some(total), _) => format!("Content-Range's total {total}"),
        (None, None, Some((pointer, _))) => format!("{pointer} = true"),
        _ => "the vendor".into(),
    };
    let lacking = if signals.has_more.is_some() && signals.token.is_none() {
        "no next token or URL, and the records have no id-like key to start the next page after"
    } else {
        "no next link, token or page parameter in the URL or the body"
    };
    format!("{said} says page 1 ({count} records) is not all, but page 1 shows {lacking}")
}

/// A count-first candidate.
fn paged(asked: &url::Url, total: &Total, params: PageParams, size: u32, seen: &str, guessed: bool) -> Candidate {
    let (total_pointer, total_header) = match total {
        Total::Body { pointer, .. } => (pointer.clone(), None),
        Total::Header { name, .. } => (String::new(), Some(name.clone())),
    };
    let names: Vec<&str> = params.names().into_iter().map(|(_, name)| name).collect();
    let url = without(asked, &names);
    let why = format!("count-first: {}; pages addressed by {seen}", total.describe());
    let strategy = StrategySpec::Paged(PagedSpec {
        page_size: size,
        total_pointer,
        total_header,
        params,
        max_pages: contracts::spec::DEFAULT_MAX_PAGES,
    });
    Candidate { strategy, url, why, guessed }
}

fn cursor(url: url::Url, next: NextPage, why: String, guessed: bool) -> Candidate {
    let strategy = StrategySpec::Cursor(CursorSpec { next, max_pages: contracts::spec::DEFAULT_MAX_PAGES });
    Candidate { strategy, url, why, guessed }
}

/// `url` without the query parameters `names`.
pub fn without(url: &url::Url, names: &[&str]) -> url::Url {
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(name, _)| !names.contains(&name.as_ref()))
        .map(|(n, v)| (n.into(), v.into()))
        .collect();
    let mut url = url.clone();
    url.set_query(None);
    if !kept.is_empty() {
        url.query_pairs_mut().extend_pairs(kept);
    }
    url
}

/// The total: a number in a total-named body field (the shallowest; a
/// `count` no larger than the page while more pages are signalled is the
/// page's own count), else a total header.
fn total(members: &[Member<'_>], headers: &BTreeMap<String, String>, count: usize, more_signs: bool) -> Option<Total> {
    let number = |value: &Value| match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    let plausible = |value: u64| value >= count as u64 && !(more_signs && value == count as u64);
    let body = members
        .iter()
        .filter_map(|m| {
            let rank = TOTAL_NAMES.iter().position(|name| *name == m.name)?;
            let value = number(m.value).filter(|v| plausible(*v))?;
            Some(((m.depth, rank), Total::Body { pointer: m.pointer.clone(), value }))
        })
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, total)| total);
    body.or_else(|| {
        TOTAL_HEADERS.iter().find_map(|name| {
            let value = headers.get(*name)?.trim().parse().ok().filter(|v| plausible(*v))?;
            Some(Total::Header { name: (*name).to_string(), value })
        })
    })
}

/// The total of `Content-Range: items 0-9/120` (none for `*`).
fn content_range_total(range: &str) -> Option<u64> {
    range.rsplit_once('/')?.1.trim().parse().ok()
}

/// A next page URL in the body: a next-named string, or the `href` of a
/// next-named object (HAL's `_links.next.href`).
fn next_url(members: &[Member<'_>], base: &url::Url) -> Option<(String, url::Url)> {
    members.iter().find_map(|m| {
        let Value::String(text) = m.value else { return None };
        let named = NEXT_URL_NAMES.contains(&m.name.as_str())
            || (["href", "url", "link", "uri"].contains(&m.name.as_str())
                && NEXT_URL_NAMES.contains(&m.parent.as_str()));
        if !named || !url_like(text) {
            return None;
        }
        let url = base.join(text).ok().filter(|url| matches!(url.scheme(), "http" | "https") && url != base)?;
        Some((m.pointer.clone(), url))
    })
}

fn url_like(text: &str) -> bool {
    text.starts_with("http://") || text.starts_with("https://") || text.starts_with('/') || text.starts_with('?')
}

/// A next page token in the body (not a URL): pointer, field name, token.
fn token(members: &[Member<'_>], next_url: Option<&str>) -> Option<(String, String, String)> {
    members
        .iter()
        .filter_map(|m| {
            let rank = TOKEN_NAMES.iter().position(|name| *name == m.name)?;
            let token = match m.value {
                Value::String(text) if !text.is_empty() && !url_like(text) => text.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            if Some(m.pointer.as_str()) == next_url {
                return None;
            }
            let key = m.pointer.rsplit('/').next().unwrap_or_default().replace("~1", "/").replace("~0", "~");
            Some(((rank, m.depth), (m.pointer.clone(), key, token)))
        })
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, token)| token)
}

/// The query parameters a token named `field` is likely sent back as, at
/// most two: the token parameter of the URL init was given, then the name
/// without its `next` (`next_cursor` -> `cursor`, `nextMarker` ->
/// `marker`), then `cursor`. Names Request would refuse as credentials
/// (`page_token`) are left out.
fn token_params(field: &str, asked: &url::Url) -> Vec<String> {
    let mut params: Vec<String> = asked
        .query_pairs()
        .map(|(name, _)| name.into_owned())
        .filter(|name| TOKEN_PARAMS.contains(&norm(name).as_str()))
        .collect();
    let stripped = field
        .strip_prefix("next_")
        .or_else(|| field.strip_prefix("next-"))
        .map(str::to_string)
        .or_else(|| {
            let rest = field.strip_prefix("next")?;
            let mut chars = rest.chars();
            let first = chars.next()?.to_ascii_lowercase();
            Some(std::iter::once(first).chain(chars).collect())
        })
        .filter(|rest| !rest.is_empty());
    let derived = match norm(field).as_str() {
        "endcursor" => Some("after".to_string()),
        "next" => None,
        _ => Some(stripped.unwrap_or_else(|| field.to_string())),
    };
    params.extend(derived);
    params.push("cursor".into());
    let mut seen = Vec::new();
    for param in params {
        if !seen.contains(&param) && !contracts::spec::is_credential_name(&param) {
            seen.push(param);
        }
    }
    seen.truncate(2);
    seen
}

/// The key each page's last record gives the next page (`last_record`):
/// `id`, else an id-like key holding a string or number.
fn last_record_key(page: &FirstPage<'_>) -> Option<String> {
    let records = page.body.pointer(page.records.pointer.as_deref().unwrap_or(""))?.as_array()?;
    let last = records.iter().rev().find_map(Value::as_object)?;
    let keyish = |value: &Value| matches!(value, Value::String(_) | Value::Number(_));
    let key = last
        .iter()
        .filter(|(_, value)| keyish(value))
        .map(|(key, _)| key)
        .find(|key| key.as_str() == "id")
        .or_else(|| {
            last.iter()
                .filter(|(_, v)| keyish(v))
                .map(|(k, _)| k)
                .find(|k| ["id", "uuid", "key"].contains(&norm(k).as_str()))
        })
        .or_else(|| last.iter().filter(|(_, v)| keyish(v)).map(|(k, _)| k).find(|k| norm(k).ends_with("id")))?;
    Some(format!("/{}", segment(key)))
}

/// Page parameters in `url`'s query: an offset (with its size parameter,
/// or `limit`), else a page number (with its size parameter, if any).
/// A page size parameter of `url` ([`SIZE_NAMES`]) and its value.
fn size_in_query(url: &url::Url) -> Option<(String, u32)> {
    url.query_pairs().find_map(|(name, value)| {
        let size = value.trim().parse::<u32>().ok().filter(|size| *size > 0)?;
        SIZE_NAMES.contains(&norm(&name).as_str()).then(|| (name.into_owned(), size))
    })
}

fn numbered_in_query(url: &url::Url, seen: &'static str) -> Option<Numbered> {
    let pairs: Vec<(String, String)> = url.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    numbered_in(&pairs, seen)
}

fn numbered_in(pairs: &[(String, String)], seen: &'static str) -> Option<Numbered> {
    let find = |names: &[&str]| {
        pairs.iter().find(|(name, value)| names.contains(&norm(name).as_str()) && value.trim().parse::<u64>().is_ok())
    };
    let size = find(&SIZE_NAMES);
    let size_value = size.and_then(|(_, value)| value.trim().parse::<u32>().ok()).filter(|size| *size > 0);
    if let Some((offset, _)) = find(&OFFSET_NAMES) {
        let limit_param = size.map_or_else(|| contracts::paging::DEFAULT_LIMIT_PARAM.to_string(), |(n, _)| n.clone());
        return Some(Numbered {
            params: PageParams::OffsetLimit { offset_param: offset.clone(), limit_param },
            size: size_value,
            seen,
        });
    }
    let (page, value) = find(&PAGE_NAMES)?;
    // A URL asking for page 0 shows pages counted from 0.
    let first_page = if value.trim() == "0" { 0 } else { contracts::paging::DEFAULT_FIRST_PAGE };
    Some(Numbered {
        params: PageParams::PageNumber {
            page_param: page.clone(),
            size_param: size.map(|(name, _)| name.clone()),
            first_page,
        },
        size: size_value,
        seen,
    })
}

/// Page parameters of a next link: an offset parameter at `offset +
/// records`, or a page parameter one past the current page (the first
/// page being the current one when the URL init was given names none).
fn numbered_in_next(asked: &url::Url, next: &url::Url, records: usize) -> Option<Numbered> {
    let here: BTreeMap<String, String> = asked.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    let pairs: Vec<(String, String)> = next.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    let found = numbered_in(&pairs, "in the next link")?;
    let value_of = |name: &str| pairs.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.trim().parse::<u64>().ok());
    match &found.params {
        PageParams::OffsetLimit { offset_param, .. } => {
            let now = here.get(offset_param).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0);
            (value_of(offset_param) == Some(now + records as u64)).then_some(found)
        }
        PageParams::PageNumber { page_param, size_param, .. } => {
            let next_page = value_of(page_param)?;
            let first_page = match here.get(page_param).and_then(|v| v.trim().parse::<u64>().ok()) {
                Some(now) if now + 1 == next_page => u32::try_from(now).ok()?,
                None if next_page >= 1 => u32::try_from(next_page - 1).ok()?,
                _ => return None,
            };
            let params =
                PageParams::PageNumber { page_param: page_param.clone(), size_param: size_param.clone(), first_page };
            Some(Numbered { params, ..found })
        }
        // A style newer than this build (the enum is non-exhaustive): not
        // one `numbered_in` finds.
        _ => None,
    }
}

/// Page parameters the body echoes at its top or under one object:
/// `"offset": 0, "limit": 10` or `"page": 1, "per_page": 10`
/// (`current_page` is taken as parameter `page`).
fn numbered_in_body(members: &[Member<'_>]) -> Option<Numbered> {
    let pairs: Vec<(String, String)> = members
        .iter()
        .filter(|m| m.depth <= 1 && m.value.as_u64().is_some())
        .map(|m| {
            let key = m.pointer.rsplit('/').next().unwrap_or_default().to_string();
            let key = if m.name == "currentpage" { "page".to_string() } else { key };
            (key, m.value.to_string())
        })
        .collect();
    let found = numbered_in(&pairs, "as the body echoes them")?;
    // An offset echoed without its size, or a page number without one, is
    // too little to go on (`"page": 1` alone may be a page count).
    found.size.map(|_| found)
}

/// A record field that looks like an update time: named like one, holding
/// RFC 3339 text (or a date) or a number in most records; its pointer.
pub fn update_field(records: &[Value]) -> Option<String> {
    let first = records.iter().find_map(Value::as_object)?;
    let mut named: Vec<(usize, &String)> = first
        .keys()
        .filter_map(|key| UPDATE_NAMES.iter().position(|name| *name == norm(key)).map(|rank| (rank, key)))
        .collect();
    named.sort();
    named
        .into_iter()
        .map(|(_, key)| key)
        .find(|key| {
            let timely = records
                .iter()
                .filter_map(|record| record.get(key.as_str()))
                .filter(|value| match value {
                    Value::String(text) => looks_like_time(text),
                    Value::Number(_) => true,
                    _ => false,
                })
                .count();
            timely * 2 > records.len()
        })
        .map(|key| format!("/{}", segment(key)))
}

fn looks_like_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit)
        && bytes[7] == b'-'
        && bytes[8..10].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Page {
        asked: url::Url,
        headers: BTreeMap<String, String>,
        body: Value,
    }

    fn page(url: &str, headers: &[(&str, &str)], body: Value) -> Page {
        Page {
            asked: url.parse().expect("url"),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body,
        }
    }

    fn detected(page: &Page) -> Detected {
        let records = find_records(&page.body).expect("records");
        detect(&FirstPage {
            asked: &page.asked,
            url: &page.asked,
            headers: &page.headers,
            body: &page.body,
            records: &records,
        })
    }

    fn rows(n: u32) -> Vec<Value> {
        (0..n).map(|i| json!({"id": i, "name": format!("r{i}")})).collect()
    }

    fn first(page: &Page) -> (StrategySpec, String) {
        let detected = detected(page);
        let candidate = detected.candidates.first().unwrap_or_else(|| panic!("a candidate: {detected:?}"));
        (candidate.strategy.clone(), candidate.url.to_string())
    }

    #[test]
    fn records_are_the_largest_array_of_objects_or_the_body() {
        let body = json!({"meta": {"tags": [{"a": 1}]}, "results": rows(3), "errors": []});
        assert_eq!(find_records(&body), Ok(RecordsAt { pointer: Some("/results".into()), count: 3 }));
        let nested = json!({"data": {"items": rows(2)}, "links": [{"rel": "self"}]});
        assert_eq!(find_records(&nested), Ok(RecordsAt { pointer: Some("/data/items".into()), count: 2 }));
        assert_eq!(find_records(&json!(rows(4))), Ok(RecordsAt { pointer: None, count: 4 }));
        let odd = json!({"a/b": rows(2)});
        assert_eq!(find_records(&odd).expect("found").pointer.as_deref(), Some("/a~1b"));
        assert!(matches!(find_records(&json!({"results": []})), Err(NoRecords::Empty(p)) if p == "/results"));
        assert!(matches!(find_records(&json!([1, 2])), Err(NoRecords::NotObjects("a number"))));
        assert!(matches!(find_records(&json!({"id": 1})), Err(NoRecords::None(keys)) if keys == "id"));
    }

    #[test]
    fn a_total_and_offsets_in_the_url_are_count_first() {
        let body = json!({"meta": {"total": 95}, "results": rows(10)});
        let (strategy, url) = first(&page("http://v.test/records?offset=0&limit=10&status=a", &[], body));
        let StrategySpec::Paged(paged) = strategy else { panic!("paged: {strategy:?}") };
        assert_eq!((paged.page_size, paged.total_pointer.as_str(), paged.total_header), (10, "/meta/total", None));
        assert_eq!(paged.params, PageParams::default());
        assert_eq!(url, "http://v.test/records?status=a", "the strategy sets offset and limit");
    }

    #[test]
    fn a_total_header_and_page_numbers_are_count_first() {
        let body = json!(rows(10));
        let page = page("http://v.test/items?page=1&per_page=10", &[("x-total-count", "42")], body);
        let (strategy, url) = first(&page);
        let StrategySpec::Paged(paged) = strategy else { panic!("paged: {strategy:?}") };
        assert_eq!(paged.total_header.as_deref(), Some("x-total-count"));
        assert_eq!(
            paged.params,
            PageParams::PageNumber { page_param: "page".into(), size_param: Some("per_page".into()), first_page: 1 }
        );
        assert_eq!(url, "http://v.test/items");
    }

    #[test]
    fn django_rest_framework_is_count_first_by_its_next_links_page_number() {
        let body =
            json!({"count": 120, "next": "http://v.test/contacts/?page=2", "previous": null, "results": rows(50)});
        let (strategy, _) = first(&page("http://v.test/contacts/", &[], body));
        let StrategySpec::Paged(paged) = strategy else { panic!("paged: {strategy:?}") };
        assert_eq!((paged.page_size, paged.total_pointer.as_str()), (50, "/count"));
        assert_eq!(paged.params, PageParams::PageNumber { page_param: "page".into(), size_param: None, first_page: 1 });
    }

    #[test]
    fn link_headers_next_urls_and_tokens_are_cursors() {
        let link = page(
            "http://v.test/repos",
            &[("link", "<http://v.test/repos?page=2>; rel=\"next\", <http://v.test/repos?page=5>; rel=\"last\"")],
            json!(rows(30)),
        );
        assert_eq!(
            first(&link).0,
            StrategySpec::Cursor(CursorSpec { next: NextPage::LinkHeader {}, max_pages: 10_000 })
        );

        let hal = json!({"_embedded": {"items": rows(5)}, "_links": {"next": {"href": "/items?after=5"}}});
        let (strategy, _) = first(&page("http://v.test/items", &[], hal));
        assert!(
            matches!(&strategy, StrategySpec::Cursor(c) if c.next == NextPage::BodyUrl { pointer: "/_links/next/href".into(), has_more: None }),
            "{strategy:?}"
        );

        let token = json!({"items": rows(5), "meta": {"next_cursor": "abc"}});
        let (strategy, _) = first(&page("http://v.test/events?limit=5", &[], token));
        let expected =
            NextPage::BodyToken { pointer: "/meta/next_cursor".into(), param: "cursor".into(), has_more: None };
        assert!(matches!(&strategy, StrategySpec::Cursor(c) if c.next == expected), "{strategy:?}");
    }

    #[test]
    fn has_more_without_a_token_pages_after_the_last_record() {
        let stripe = json!({"object": "list", "url": "/v1/customers", "has_more": true, "data": [{"id": "cus_1"}, {"id": "cus_2"}]});
        let (strategy, url) = first(&page("http://v.test/v1/customers?limit=2", &[], stripe));
        let expected = NextPage::LastRecord {
            pointer: "/id".into(),
            param: "starting_after".into(),
            has_more: "/has_more".into(),
        };
        assert!(matches!(&strategy, StrategySpec::Cursor(c) if c.next == expected), "{strategy:?}");
        assert_eq!(url, "http://v.test/v1/customers?limit=2", "the fixed limit stays");
    }

    #[test]
    fn a_token_named_like_a_credential_is_not_sent_by_that_name() {
        let google = json!({"items": rows(3), "nextPageToken": "CAE"});
        let detected = detected(&page("http://v.test/things", &[], google));
        let params: Vec<String> = detected
            .candidates
            .iter()
            .filter_map(|c| match &c.strategy {
                StrategySpec::Cursor(CursorSpec { next: NextPage::BodyToken { param, .. }, .. }) => Some(param.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(params, ["cursor"], "pageToken would be refused as a credential name");
    }

    #[test]
    fn page_parameters_without_a_total_page_until_a_short_page() {
        let (strategy, url) = first(&page("http://v.test/lines?offset=0&limit=25", &[], json!(rows(25))));
        let expected = NextPage::Numbered { params: PageParams::default(), size: 25 };
        assert!(matches!(&strategy, StrategySpec::Cursor(c) if c.next == expected), "{strategy:?}");
        assert_eq!(url, "http://v.test/lines");
    }

    #[test]
    fn a_total_without_a_way_to_pages_is_guessed_and_nothing_at_all_is_unclassified() {
        let guessed = detected(&page("http://v.test/x", &[], json!({"total": 50, "items": rows(10)})));
        assert!(guessed.candidates.iter().all(|c| c.guessed) && guessed.candidates.len() == 2, "{guessed:?}");
        let range = detected(&page("http://v.test/x", &[("content-range", "items 0-9/50")], json!(rows(10))));
        assert!(range.candidates.is_empty(), "{range:?}");
        assert!(range.unclassified.as_deref().is_some_and(|why| why.contains("Content-Range")), "{range:?}");
        assert!(range.undecided[0].contains("Content-Range"), "{range:?}");
    }

    #[test]
    fn a_full_page_of_the_size_the_url_asks_guesses_page_and_offset_then_one_call() {
        let full = detected(&page("http://v.test/short?per_page=50", &[], json!(rows(50))));
        let kinds: Vec<(bool, String)> =
            full.candidates.iter().map(|c| (c.guessed, c.why.split(':').next().unwrap_or("").to_string())).collect();
        assert_eq!(kinds, [(true, "cursor".into()), (true, "cursor".into()), (false, "simple".into())], "{full:?}");
        let expected = NextPage::Numbered {
            params: PageParams::PageNumber {
                page_param: "page".into(),
                size_param: Some("per_page".into()),
                first_page: 1,
            },
            size: 50,
        };
        assert!(matches!(&full.candidates[0].strategy, StrategySpec::Cursor(c) if c.next == expected), "{full:?}");
        assert_eq!(full.candidates[0].url.as_str(), "http://v.test/short");
        assert!(full.candidates[2].why.contains("which may miss records"), "{full:?}");
        // A short page is all there is.
        let short = detected(&page("http://v.test/short?per_page=50", &[], json!(rows(12))));
        assert!(
            matches!(short.candidates.as_slice(), [c] if matches!(c.strategy, StrategySpec::Simple {})),
            "{short:?}"
        );
    }

    #[test]
    fn one_page_with_nothing_more_is_simple() {
        let (strategy, _) = first(&page("http://v.test/all", &[], json!({"total": 3, "data": rows(3)})));
        assert_eq!(strategy, StrategySpec::Simple {});
        let (strategy, _) = first(&page("http://v.test/all", &[], json!(rows(3))));
        assert_eq!(strategy, StrategySpec::Simple {});
    }

    #[test]
    fn a_page_count_is_not_a_total_when_more_pages_are_signalled() {
        let body = json!({"count": 10, "next_cursor": "n", "items": rows(10)});
        let detected = detected(&page("http://v.test/x", &[], body));
        assert_eq!(detected.signals.total, None, "{detected:?}");
    }

    #[test]
    fn update_times_are_suggested_as_the_incremental_cursor() {
        let records = vec![
            json!({"id": 1, "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-02-01T00:00:00Z"}),
            json!({"id": 2, "createdAt": "2026-01-02T00:00:00Z", "updatedAt": "2026-02-02T10:00:00+01:00"}),
        ];
        assert_eq!(update_field(&records).as_deref(), Some("/updatedAt"));
        assert_eq!(update_field(&[json!({"updated": "yes"})]), None, "not a time");
        assert_eq!(update_field(&[json!({"modified": 1_767_225_600})]).as_deref(), Some("/modified"));
    }
}
