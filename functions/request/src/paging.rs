//! The next page of a `cursor` run, from the page just fetched: pure, so
//! every pagination kind is unit-tested.

use std::collections::BTreeMap;

use serde_json::Value;

use contracts::{HttpCall, NextPage};

/// The next page cannot be found in a response, naming `strategy.next`'s
/// field and the value there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PagingError {
    /// The value at `strategy.next.pointer` is of the wrong kind.
    #[error("`strategy.next.pointer` {pointer:?} leads to {found}, not {expected}")]
    Pointer {
        /// The JSON pointer.
        pointer: String,
        /// What is there (`an array`, `an object`, …).
        found: &'static str,
        /// What was expected (`a string or number token`, `a URL string`).
        expected: &'static str,
    },
    /// The first page of a run has records but nothing at all at
    /// `strategy.next.pointer` (not even `null`): most likely a wrong
    /// pointer, which would end the run after one page as if complete.
    #[error(
        "`strategy.next.pointer` {pointer:?} is not in the first page's response (which has {records} records): check the pointer; a vendor ends a run with null or \"\" there"
    )]
    Missing {
        /// The JSON pointer.
        pointer: String,
        /// Records on the page.
        records: usize,
    },
    /// The body says more pages follow (`strategy.next.has_more` is true)
    /// but gives no way to them: no token or URL at `strategy.next.pointer`,
    /// or (`last_record`) an empty page or a last record without the key.
    #[error("`strategy.next.has_more` {has_more:?} is true but {what}: the run would end early as if complete")]
    NoNext {
        /// The `has_more` pointer.
        has_more: String,
        /// What is missing, naming `strategy.next.pointer`.
        what: String,
    },
    /// A kind of paging newer than this build (`NextPage` is
    /// non-exhaustive): it cannot say where the next page is.
    #[error("`strategy.next` is a kind of paging this build does not know")]
    Unsupported,
    /// The value at `strategy.next.has_more` is not a boolean.
    #[error("`strategy.next.has_more` {has_more:?} leads to {found}, not true or false")]
    HasMore {
        /// The pointer.
        has_more: String,
        /// What is there.
        found: &'static str,
    },
    /// The next page's URL (from the body or the `Link` header) does not
    /// resolve against the page's URL.
    #[error("next page URL {url:?} is not a URL: {source}")]
    Url {
        /// The text found.
        url: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
}

/// The call of page `index + 1`, or `None` when page `index` was the last.
///
/// - `body_token`: the token at `pointer` (a string or a number) becomes
///   query parameter `param`; absent, `null` or `""` ends.
/// - `body_url`: the URL at `pointer`, resolved against `url` (the page's
///   final URL); absent, `null` or `""` ends.
/// - a next page that is this page again (the token it was fetched with,
///   its own URL, the same last record) is returned as it is: the caller's
///   cycle check ends the run there **truncated**, since the vendor still
///   offers a next page (it ended a trial's run as complete, the pages
///   past it never fetched).
/// - for both, a pointer that finds nothing (not even `null`) on the first
///   page while it has records is an error ([`PagingError::Missing`]):
///   vendors that end with an absent key still do so after page 0.
/// - `link_header`: the `Link` header's `rel="next"` target (RFC 8288),
///   resolved likewise.
/// - `has_more` (with `body_token`, `body_url`; required by
///   `last_record`): `false` ends; `true` with nothing to go on is an
///   error ([`PagingError::NoNext`]); absent or `null` leaves it to the
///   token (`last_record`: ends).
/// - `last_record` (Stripe): the value at `pointer` in the page's last
///   record becomes query parameter `param` while `has_more` is true.
/// - `offset`, `page_number`: the next offset or number; a page with fewer
///   records than the page size ends.
///
/// # Errors
/// [`PagingError`] naming `strategy.next.pointer` when the value there is
/// neither a string nor a number, or a next URL that is not a URL.
#[allow(clippy::too_many_arguments)]
pub fn next_call(
    paging: &NextPage,
    current: &HttpCall,
    url: &url::Url,
    body: &Value,
    headers: &BTreeMap<String, String>,
    index: u32,
    records: usize,
    last: Option<&Value>,
) -> Result<Option<HttpCall>, PagingError> {
    let more = match paging {
        NextPage::BodyToken { has_more, .. } | NextPage::BodyUrl { has_more, .. } => has_more_of(body, has_more)?,
        NextPage::LastRecord { has_more, .. } => has_more_of(body, &Some(has_more.clone()))?,
        _ => None,
    };
    if more == Some(false) {
        return Ok(None);
    }
    let page = ThisPage { current, url, body, index, records, more };
    match paging {
        NextPage::BodyToken { pointer, param, has_more } => page.body_token(pointer, param, has_more),
        NextPage::LastRecord { pointer, param, has_more } => page.after_last_record(last, pointer, param, has_more),
        NextPage::BodyUrl { pointer, has_more } => page.body_url(pointer, has_more),
        NextPage::LinkHeader {} => match headers.get("link").and_then(|link| link_next(link)) {
            Some(next) => page.with_url(&next),
            None => Ok(None),
        },
        NextPage::Numbered { params, size } => {
            let Some(size) = numbered_next_size(*size, index, records) else { return Ok(None) };
            let mut next = current.clone();
            next.query.extend(params.page_query(size, index.saturating_add(1)));
            Ok(Some(next))
        }
        // A kind newer than this build (the enum is non-exhaustive).
        _ => Err(PagingError::Unsupported),
    }
}

/// Offset and page-number paging: the page size the page after page
/// `index` (which held `records` records) is asked with, or `None` when
/// page `index` was the last.
///
/// A page with fewer records than `size` is the last, but for one case: a
/// first page that is short, not empty, and holds a count a vendor caps
/// pages at ([`looks_like_a_cap`]: 100 when 500 were asked). Such a vendor
/// serves every page short, so ending there would lose every record past
/// the first page, silently (a trial's run ended there as a success).
/// The next page is asked for with that count as the
/// size (offset 100, limit 100; or page 2, per_page 100): empty, the run
/// ends with one call more than it needed; not empty, the vendor capped,
/// and the run pages on with the cap as its size (the caller carries it
/// into the next pages' `NextPage`).
pub fn numbered_next_size(size: u32, index: u32, records: usize) -> Option<u32> {
    if records >= size as usize {
        return Some(size);
    }
    (index == 0 && looks_like_a_cap(records)).then(|| u32::try_from(records).unwrap_or(size))
}

/// Whether `records`, a short first page's count, is a count vendors cap
/// pages at: a multiple of 10 or 25 (GitHub's 100, Zendesk's 100,
/// HubSpot's 100 and Shopify's 250 are), or a power of two from 16 (64,
/// 128). About one short page in seven of any other size matches, and
/// costs one call ([`numbered_next_size`]).
pub fn looks_like_a_cap(records: usize) -> bool {
    records > 0
        && (records.is_multiple_of(10) || records.is_multiple_of(25) || (records >= 16 && records.is_power_of_two()))
}

/// The boolean at `has_more` in the body: `None` without a pointer, or
/// when the body has nothing (or `null`) there.
fn has_more_of(body: &Value, pointer: &Option<String>) -> Result<Option<bool>, PagingError> {
    let Some(has_more) = pointer else { return Ok(None) };
    match body.pointer(has_more) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(more)) => Ok(Some(*more)),
        Some(other) => {
            Err(PagingError::HasMore { has_more: has_more.clone(), found: tributary_core::json::kind_of(other) })
        }
    }
}

/// `has_more` said true, but the page gives nothing to go on.
fn no_next(has_more: &Option<String>, what: String) -> PagingError {
    PagingError::NoNext { has_more: has_more.clone().unwrap_or_default(), what }
}

/// What [`next_call`] reads of the page just fetched.
struct ThisPage<'a> {
    current: &'a HttpCall,
    url: &'a url::Url,
    body: &'a Value,
    index: u32,
    records: usize,
    /// The body's `has_more`, when the paging has one.
    more: Option<bool>,
}

impl ThisPage<'_> {
    /// The call to `next` resolved against this page's URL (this page's
    /// own URL included: a cycle the caller catches).
    fn with_url(&self, next: &str) -> Result<Option<HttpCall>, PagingError> {
        let next = self.url.join(next).map_err(|source| PagingError::Url { url: next.to_string(), source })?;
        // The URL carries the whole query of the next page.
        Ok(Some(HttpCall { url: next, query: BTreeMap::new(), ..self.current.clone() }))
    }

    /// A pointer that finds nothing: the end, except on a first page with
    /// records (a mistyped pointer would end every run after one page).
    fn missing(&self, pointer: &str) -> Result<Option<HttpCall>, PagingError> {
        if self.index == 0 && self.records > 0 {
            return Err(PagingError::Missing { pointer: pointer.to_string(), records: self.records });
        }
        Ok(None)
    }

    /// `body_token`: the token at `pointer` becomes query parameter `param`.
    fn body_token(
        &self,
        pointer: &str,
        param: &str,
        has_more: &Option<String>,
    ) -> Result<Option<HttpCall>, PagingError> {
        let more = self.more;
        let token = match self.body.pointer(pointer) {
            None | Some(Value::Null) if more == Some(true) => {
                return Err(no_next(has_more, format!("`strategy.next.pointer` {pointer:?} holds no token")));
            }
            None => return self.missing(pointer),
            Some(Value::Null) => return Ok(None),
            Some(Value::String(token)) => token.clone(),
            Some(Value::Number(token)) => token.to_string(),
            Some(other) => {
                return Err(PagingError::Pointer {
                    pointer: pointer.to_string(),
                    found: tributary_core::json::kind_of(other),
                    expected: "a string or number token",
                });
            }
        };
        if token.is_empty() && more == Some(true) {
            return Err(no_next(has_more, format!("`strategy.next.pointer` {pointer:?} holds an empty token")));
        }
        if token.is_empty() {
            return Ok(None);
        }
        let mut next = self.current.clone();
        next.query.insert(param.to_string(), token);
        Ok(Some(next))
    }

    /// `last_record` (Stripe): the key at `pointer` of the page's last
    /// record becomes query parameter `param` while `has_more` is true.
    fn after_last_record(
        &self,
        last: Option<&Value>,
        pointer: &str,
        param: &str,
        has_more: &str,
    ) -> Result<Option<HttpCall>, PagingError> {
        if self.more != Some(true) {
            return Ok(None);
        }
        let has_more = Some(has_more.to_string());
        let Some(last) = last else {
            return Err(no_next(&has_more, "the page has no records to start the next one after".into()));
        };
        let token = match last.pointer(pointer) {
            Some(Value::String(token)) if !token.is_empty() => token.clone(),
            Some(Value::Number(token)) => token.to_string(),
            other => {
                let found = other.map_or("nothing", tributary_core::json::kind_of);
                return Err(no_next(
                    &has_more,
                    format!("the last record has {found} at `strategy.next.pointer` {pointer:?}, not a key"),
                ));
            }
        };
        let mut next = self.current.clone();
        next.query.insert(param.to_string(), token);
        Ok(Some(next))
    }

    /// `body_url`: the URL at `pointer`, resolved against this page's.
    fn body_url(&self, pointer: &str, has_more: &Option<String>) -> Result<Option<HttpCall>, PagingError> {
        let more = self.more;
        match self.body.pointer(pointer) {
            None | Some(Value::Null) if more == Some(true) => {
                Err(no_next(has_more, format!("`strategy.next.pointer` {pointer:?} holds no URL")))
            }
            Some(Value::String(next)) if next.is_empty() && more == Some(true) => {
                Err(no_next(has_more, format!("`strategy.next.pointer` {pointer:?} holds an empty URL")))
            }
            None => self.missing(pointer),
            Some(Value::Null) => Ok(None),
            Some(Value::String(next)) if next.is_empty() => Ok(None),
            Some(Value::String(next)) => self.with_url(next),
            Some(other) => Err(PagingError::Pointer {
                pointer: pointer.to_string(),
                found: tributary_core::json::kind_of(other),
                expected: "a URL string",
            }),
        }
    }
}

/// The target of the first `rel="next"` link in a `Link` header value
/// (RFC 8288 §3: `<uri>; rel="next"`, several links comma-separated, `rel`
/// possibly unquoted or holding several space-separated types).
pub fn link_next(header: &str) -> Option<String> {
    let mut rest = header;
    while let Some(start) = rest.find('<') {
        let end = start + rest[start..].find('>')?;
        let target = &rest[start + 1..end];
        let params_end = rest[end..].find('<').map_or(rest.len(), |next| end + next);
        // The link's parameters, without the comma before the next link.
        let params = rest[end + 1..params_end].trim_end().trim_end_matches(',');
        let is_next = params.split(';').any(|param| {
            let Some((name, value)) = param.split_once('=') else { return false };
            name.trim().eq_ignore_ascii_case("rel")
                && value.trim().trim_matches('"').split_ascii_whitespace().any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        if is_next {
            return Some(target.trim().to_string());
        }
        rest = &rest[params_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use contracts::PageParams;
    use serde_json::json;

    fn call(query: &[(&str, &str)]) -> HttpCall {
        HttpCall {
            method: Default::default(),
            url: url::Url::parse("https://api.example.com/v1/events").expect("url"),
            query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            headers: BTreeMap::new(),
            body: None,
        }
    }

    fn next(
        paging: &NextPage,
        current: &HttpCall,
        body: Value,
        link: Option<&str>,
        records: usize,
    ) -> Option<HttpCall> {
        let headers = link.map(|l| [("link".to_string(), l.to_string())].into()).unwrap_or_default();
        let url = current.url.clone();
        // A page after the first (page 0 has its own rule for a missing pointer).
        next_call(paging, current, &url, &body, &headers, 1, records, None).expect("next")
    }

    #[test]
    fn a_pointer_missing_from_a_first_page_with_records_is_an_error() {
        let first = call(&[]);
        let url = first.url.clone();
        for paging in [
            NextPage::BodyToken { pointer: "/meta/next_cusor".into(), param: "cursor".into(), has_more: None },
            NextPage::BodyUrl { pointer: "/links/nxt".into(), has_more: None },
        ] {
            let body = json!({"meta": {"next_cursor": "abc"}, "links": {"next": "/x"}});
            let err = next_call(&paging, &first, &url, &body, &BTreeMap::new(), 0, 25, None).expect_err("a typo");
            let text = err.to_string();
            assert!(text.contains("strategy.next.pointer") && text.contains("25 records"), "{text}");
            // An empty first page, or null there, ends the run as before.
            assert_eq!(next_call(&paging, &first, &url, &body, &BTreeMap::new(), 0, 0, None), Ok(None));
            let ended = json!({"meta": {"next_cusor": null}, "links": {"nxt": null}});
            assert_eq!(next_call(&paging, &first, &url, &ended, &BTreeMap::new(), 0, 25, None), Ok(None));
        }
    }

    #[test]
    fn has_more_ends_or_demands_a_next_page() {
        let paging =
            NextPage::BodyToken { pointer: "/next".into(), param: "cursor".into(), has_more: Some("/has_more".into()) };
        let first = call(&[]);
        let url = first.url.clone();
        let at = |body: Value| next_call(&paging, &first, &url, &body, &BTreeMap::new(), 1, 10, None);
        assert_eq!(at(json!({"has_more": false, "next": "abc"})), Ok(None), "false ends whatever the token");
        assert!(at(json!({"has_more": true, "next": "abc"})).expect("next").is_some());
        for body in
            [json!({"has_more": true}), json!({"has_more": true, "next": null}), json!({"has_more": true, "next": ""})]
        {
            let err = at(body).expect_err("no token").to_string();
            assert!(err.contains("strategy.next.has_more") && err.contains("/next"), "{err}");
        }
        assert!(at(json!({"has_more": "yes"})).expect_err("not a bool").to_string().contains("a string"));
        let paging = NextPage::BodyUrl { pointer: "/next".into(), has_more: Some("/more".into()) };
        let err = next_call(&paging, &first, &url, &json!({"more": true}), &BTreeMap::new(), 1, 10, None);
        assert!(matches!(err, Err(PagingError::NoNext { .. })), "{err:?}");
    }

    #[test]
    fn last_record_paging_starts_after_the_last_record() {
        let paging = NextPage::LastRecord {
            pointer: "/id".into(),
            param: "starting_after".into(),
            has_more: "/has_more".into(),
        };
        let first = call(&[("limit", "3")]);
        let url = first.url.clone();
        let last = json!({"id": "cus_3"});
        let at =
            |body: Value, last: Option<&Value>| next_call(&paging, &first, &url, &body, &BTreeMap::new(), 0, 3, last);
        let next = at(json!({"has_more": true}), Some(&last)).expect("next").expect("a next page");
        assert_eq!((next.query["starting_after"].as_str(), next.query["limit"].as_str()), ("cus_3", "3"));
        assert_eq!(at(json!({"has_more": false}), Some(&last)), Ok(None));
        assert_eq!(at(json!({}), Some(&last)), Ok(None), "no has_more: ends");
        assert!(at(json!({"has_more": true}), None).expect_err("empty page").to_string().contains("no records"));
        let err = at(json!({"has_more": true}), Some(&json!({"key": 1}))).expect_err("no id").to_string();
        assert!(err.contains("/id") && err.contains("nothing"), "{err}");
        assert_eq!(
            at(json!({"has_more": true}), Some(&json!({"id": 7}))).expect("n").expect("p").query["starting_after"],
            "7"
        );
    }

    #[test]
    fn link_header_parsing() {
        assert_eq!(link_next(r#"<https://a/x?page=2>; rel="next""#).as_deref(), Some("https://a/x?page=2"));
        assert_eq!(
            link_next(r#"<https://a/x?page=1>; rel="prev", <https://a/x?page=3>; rel=next"#).as_deref(),
            Some("https://a/x?page=3")
        );
        assert_eq!(link_next(r#"</x?page=4>; title="a, b"; rel="last next""#).as_deref(), Some("/x?page=4"));
        assert_eq!(
            link_next(r#"<https://a/x?page=3>; rel="next", <https://a/x?page=1>; rel="first""#).as_deref(),
            Some("https://a/x?page=3")
        );
        assert_eq!(link_next(r#"<https://a/x?page=1>; rel="prev""#), None);
        assert_eq!(link_next("garbage"), None);
    }

    #[test]
    fn body_token_sets_the_parameter_and_stops_without_one() {
        let paging = NextPage::BodyToken { pointer: "/meta/next".into(), param: "cursor".into(), has_more: None };
        let first = call(&[("status", "active")]);
        let second = next(&paging, &first, json!({"meta": {"next": "abc"}}), None, 10).expect("page 2");
        assert_eq!(second.query["cursor"], "abc");
        assert_eq!(second.query["status"], "active");
        assert_eq!(
            next(&paging, &second, json!({"meta": {"next": 42}}), None, 10).expect("page 3").query["cursor"],
            "42"
        );
        assert!(next(&paging, &second, json!({"meta": {"next": null}}), None, 10).is_none());
        assert!(next(&paging, &second, json!({"meta": {}}), None, 10).is_none());
        let again = next(&paging, &second, json!({"meta": {"next": "abc"}}), None, 10).expect("the same call");
        assert_eq!(again, second, "the same token: the same call, which the handler's cycle check ends truncated");
        let url = second.url.clone();
        let err = next_call(&paging, &second, &url, &json!({"meta": {"next": [1]}}), &BTreeMap::new(), 1, 1, None)
            .expect_err("an array is no token")
            .to_string();
        assert!(err.contains("strategy.next.pointer"), "{err}");
    }

    #[test]
    fn body_url_and_link_header_resolve_relative_urls() {
        let paging = NextPage::BodyUrl { pointer: "/next".into(), has_more: None };
        let page = next(&paging, &call(&[("a", "1")]), json!({"next": "/v1/events?after=9"}), None, 3).expect("next");
        assert_eq!(page.url.as_str(), "https://api.example.com/v1/events?after=9");
        assert!(page.query.is_empty(), "the URL carries the query");
        assert!(next(&paging, &call(&[]), json!({"next": ""}), None, 3).is_none());
        let link = NextPage::LinkHeader {};
        let page = next(&link, &call(&[]), json!([]), Some(r#"<?page=2>; rel="next""#), 3).expect("next");
        assert_eq!(page.url.as_str(), "https://api.example.com/v1/events?page=2");
        assert!(next(&link, &call(&[]), json!([]), None, 3).is_none());
    }

    #[test]
    fn numeric_paging_stops_on_a_short_page() {
        let paging = NextPage::Numbered {
            params: PageParams::OffsetLimit { offset_param: "offset".into(), limit_param: "limit".into() },
            size: 10,
        };
        let first = call(&[("offset", "0"), ("limit", "10")]);
        // `next` answers for page 1: the following one is page 2.
        let third = next(&paging, &first, json!([]), None, 10).expect("a full page goes on");
        assert_eq!((third.query["offset"].as_str(), third.query["limit"].as_str()), ("20", "10"));
        assert!(next(&paging, &first, json!([]), None, 9).is_none(), "short page");
        assert!(next(&paging, &first, json!([]), None, 0).is_none(), "empty page");
        // A short page past the first ends, whatever its count.
        assert!(next(&paging, &first, json!([]), None, 5).is_none(), "short page 1");
        let paging = NextPage::Numbered {
            params: PageParams::PageNumber { page_param: "page".into(), size_param: None, first_page: 1 },
            size: 5,
        };
        assert_eq!(next(&paging, &call(&[("page", "2")]), json!([]), None, 5).expect("next").query["page"], "3");
    }

    #[test]
    fn a_short_first_page_of_a_count_vendors_cap_at_asks_for_the_next_with_that_size() {
        let paging = NextPage::Numbered {
            params: PageParams::OffsetLimit { offset_param: "offset".into(), limit_param: "limit".into() },
            size: 500,
        };
        let first = call(&[("offset", "0"), ("limit", "500")]);
        let url = first.url.clone();
        let page = |records: usize| next_call(&paging, &first, &url, &json!({}), &BTreeMap::new(), 0, records, None);
        let capped = page(100).expect("no error").expect("a probe of page 1");
        assert_eq!((capped.query["offset"].as_str(), capped.query["limit"].as_str()), ("100", "100"));
        assert!(page(37).expect("no error").is_none(), "37 is no cap: the last page");
        assert!(page(0).expect("no error").is_none(), "an empty first page ends");
        assert_eq!(numbered_next_size(500, 0, 250), Some(250));
        assert_eq!(numbered_next_size(500, 0, 128), Some(128));
        assert_eq!(numbered_next_size(500, 0, 500), Some(500));
        assert_eq!(numbered_next_size(500, 1, 100), None, "past the first page a short page ends");
        assert_eq!(numbered_next_size(500, 0, 7), None);
        assert_eq!(numbered_next_size(500, 0, 48), None);
        let by_page = NextPage::Numbered {
            params: PageParams::PageNumber {
                page_param: "page".into(),
                size_param: Some("per_page".into()),
                first_page: 1,
            },
            size: 500,
        };
        let first = call(&[("page", "1"), ("per_page", "500")]);
        let capped = next_call(&by_page, &first, &first.url, &json!({}), &BTreeMap::new(), 0, 100, None)
            .expect("no error")
            .expect("a probe");
        assert_eq!((capped.query["page"].as_str(), capped.query["per_page"].as_str()), ("2", "100"));
    }
}
