//! The one paging vocabulary: how a run's pages are addressed.
//!
//! Used by the spec (`strategy.params` of `paged`, `strategy.next` of
//! `cursor`), by the [`RequestMessage`](crate::RequestMessage)
//! (`mode.next.paging`), by the Orchestrator (page 0 of a cursor run, every
//! page of a count-first plan) and by Request (the next page of a cursor
//! run).
//!
//! - [`PageParams`]: how a *numbered* page is addressed in the query string
//!   (offset/limit or page number), and [`PageParams::page_query`], the one
//!   function that builds a numbered page's query parameters.
//! - [`NextPage`]: every way a cursor run finds its next page: a token or
//!   URL in the body, the `Link` header, the last record's key, or numbered
//!   pages ([`NextPage::Numbered`], a [`PageParams`] and the page size).
//!
//! The parameter names default to [`DEFAULT_OFFSET_PARAM`],
//! [`DEFAULT_LIMIT_PARAM`], [`DEFAULT_PAGE_PARAM`] and
//! [`DEFAULT_FIRST_PAGE`] wherever they are written. One default differs by
//! where it is written, and both are kept as they were (they are wire
//! format): the page-size parameter of page-number paging is
//! [`DEFAULT_PAGED_SIZE_PARAM`] (`per_page`) in a `paged` strategy's
//! `params`, and none in a `cursor` strategy's `next` (nor in a message's
//! `mode.next.paging`), where the API's fixed page size is the default.
//!
//! The two places keep their own spelling too: `paged` writes
//! `params: {style: offset_limit | page_number, …}` beside `page_size`,
//! `cursor` writes `next: {kind: offset, …, limit}` or
//! `next: {kind: page_number, …, size}`. [`NextPage`] reads and writes the
//! latter through a private wire type, so its JSON and its JSON Schema are
//! those of version 1.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default name of the offset parameter of offset/limit paging: `offset`.
pub const DEFAULT_OFFSET_PARAM: &str = "offset";
/// Default name of the limit parameter of offset/limit paging: `limit`.
pub const DEFAULT_LIMIT_PARAM: &str = "limit";
/// Default name of the page-number parameter: `page`.
pub const DEFAULT_PAGE_PARAM: &str = "page";
/// Default page-size parameter of page-number paging in a `paged`
/// strategy's `params`: `per_page` (a `cursor` strategy's `next` has none
/// by default: see the module's documentation).
pub const DEFAULT_PAGED_SIZE_PARAM: &str = "per_page";
/// Default number of the first page of page-number paging: 1.
pub const DEFAULT_FIRST_PAGE: u32 = 1;

fn default_offset_param() -> String {
    DEFAULT_OFFSET_PARAM.into()
}
fn default_limit_param() -> String {
    DEFAULT_LIMIT_PARAM.into()
}
fn default_page_param() -> String {
    DEFAULT_PAGE_PARAM.into()
}
fn default_paged_size_param() -> Option<String> {
    Some(DEFAULT_PAGED_SIZE_PARAM.into())
}
fn default_first_page() -> u32 {
    DEFAULT_FIRST_PAGE
}

/// Query parameters that select a page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "style", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum PageParams {
    /// `?offset=<index*page_size>&limit=<page_size>`.
    OffsetLimit {
        /// Name of the offset parameter (default `offset`).
        #[serde(default = "default_offset_param")]
        offset_param: String,
        /// Name of the limit parameter (default `limit`).
        #[serde(default = "default_limit_param")]
        limit_param: String,
    },
    /// `?page=<first_page+index>&per_page=<page_size>`.
    PageNumber {
        /// Name of the page-number parameter (default `page`).
        #[serde(default = "default_page_param")]
        page_param: String,
        /// Name of the page-size parameter (default `per_page`); `null` when
        /// the API has a fixed page size.
        #[serde(default = "default_paged_size_param")]
        size_param: Option<String>,
        /// Number of the first page (default 1).
        #[serde(default = "default_first_page")]
        first_page: u32,
    },
}

impl Default for PageParams {
    /// Offset/limit paging with the default names: `?offset=…&limit=…`.
    fn default() -> Self {
        PageParams::OffsetLimit { offset_param: default_offset_param(), limit_param: default_limit_param() }
    }
}

impl PageParams {
    /// The query parameters selecting page `index` (0-based) of `size`
    /// records per page, in order:
    ///
    /// - offset/limit: `[(offset_param, index * size), (limit_param, size)]`;
    /// - page number: `[(page_param, first_page + index)]`, then
    ///   `(size_param, size)` when there is a size parameter.
    ///
    /// Computed in `u64`, so no index or size overflows. The one builder of
    /// numbered pages: the Orchestrator's count-first plan and cursor page 0,
    /// and Request's next page, all call it.
    pub fn page_query(&self, size: u32, index: u32) -> Vec<(String, String)> {
        match self {
            PageParams::OffsetLimit { offset_param, limit_param } => vec![
                (offset_param.clone(), (u64::from(index) * u64::from(size)).to_string()),
                (limit_param.clone(), size.to_string()),
            ],
            PageParams::PageNumber { page_param, size_param, first_page } => {
                let mut params = vec![(page_param.clone(), (u64::from(*first_page) + u64::from(index)).to_string())];
                params.extend(size_param.iter().map(|name| (name.clone(), size.to_string())));
                params
            }
        }
    }

    /// The parameter names, each with its field name (`offset_param`,
    /// `limit_param`, `page_param`, `size_param`), for validation messages.
    pub fn names(&self) -> Vec<(&'static str, &str)> {
        match self {
            PageParams::OffsetLimit { offset_param, limit_param } => {
                vec![("offset_param", offset_param.as_str()), ("limit_param", limit_param.as_str())]
            }
            PageParams::PageNumber { page_param, size_param, .. } => {
                let mut names = vec![("page_param", page_param.as_str())];
                names.extend(size_param.as_deref().map(|name| ("size_param", name)));
                names
            }
        }
    }
}

/// Declares a `kind`-tagged next-page enum: first the variants the Rust
/// type and its version 1 wire form share (`body_token`, `body_url`,
/// `last_record`, `link_header`), declared here once, then the form's own
/// numbered variants (one [`NextPage::Numbered`] in Rust; `offset` and
/// `page_number` on the wire). The serde attributes matter on the wire
/// form only: the Rust type is read and written through it.
macro_rules! next_page_enum {
    ($(#[$attr:meta])* $vis:vis enum $name:ident { $($numbered:tt)* }) => {
        $(#[$attr])*
        $vis enum $name {
            /// A cursor (next token) in the body at `pointer`, sent as query
            /// parameter `param` of the next call; absent, `null` or `""` ends.
            BodyToken {
                /// RFC 6901 pointer to the token, e.g. `/meta/next_cursor`.
                pointer: String,
                /// Query parameter of the next call, e.g. `cursor`.
                param: String,
                /// RFC 6901 pointer to a boolean saying whether more pages follow
                /// (e.g. `/has_more`): `false` ends whatever the token; `true` with
                /// no token is an error naming both pointers.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                has_more: Option<String>,
            },
            /// The next page's URL in the body at `pointer` (absolute, or relative
            /// to the current URL); absent, `null` or `""` ends.
            BodyUrl {
                /// RFC 6901 pointer to the URL, e.g. `/links/next`.
                pointer: String,
                /// As for `body_token`: a boolean saying whether more pages follow.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                has_more: Option<String>,
            },
            /// Stripe-style: the next page starts after the page's last record.
            /// The value at `pointer` in the last record (e.g. `/id`) becomes query
            /// parameter `param` (e.g. `starting_after`) of the next call, while the
            /// boolean at `has_more` in the body (e.g. `/has_more`) is `true`.
            LastRecord {
                /// RFC 6901 pointer into each record to its key, e.g. `/id`.
                pointer: String,
                /// Query parameter of the next call, e.g. `starting_after`.
                param: String,
                /// RFC 6901 pointer to the body's boolean saying whether more pages
                /// follow, e.g. `/has_more`.
                has_more: String,
            },
            /// The `Link` header's `rel="next"` target (RFC 8288); none ends.
            LinkHeader {},
            $($numbered)*
        }
    };
}

next_page_enum! {
    /// Where the next page is, for APIs that give no total up front.
    ///
    /// Serialised as the version 1 `kind`-tagged object: `body_token`,
    /// `body_url`, `last_record`, `link_header`, and for [`NextPage::Numbered`]
    /// `offset` (`offset_param`, `limit_param`, `limit`) or `page_number`
    /// (`page_param`, `size_param`, `size`, `first_page`). Unknown fields are
    /// refused.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(from = "wire::NextPage", into = "wire::NextPage")]
    #[schemars(description = "Where the next page is, for APIs that give no total up front.")]
    #[non_exhaustive]
    pub enum NextPage {
        /// Numbered pages of `size` records, addressed by `params` (written
        /// `kind: offset` with `limit`, or `kind: page_number` with `size`); a
        /// page with fewer than `size` records ends.
        Numbered {
            /// How a page is addressed. Written in a `cursor` strategy or a
            /// message, page-number paging has no size parameter by default.
            params: PageParams,
            /// Records per page, 1..=100000 (the API's, when it is fixed).
            size: u32,
        },
    }
}

/// The version 1 JSON of [`NextPage`], kept apart so that the Rust type can
/// hold numbered paging as one [`PageParams`].
mod wire {
    use super::*;

    next_page_enum! {
        /// Where the next page is, for APIs that give no total up front.
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum NextPage {
            /// `offset`/`limit` parameters; a page with fewer than `limit` records
            /// ends.
            Offset {
                /// Offset parameter (default `offset`).
                #[serde(default = "default_offset_param")]
                offset_param: String,
                /// Limit parameter (default `limit`).
                #[serde(default = "default_limit_param")]
                limit_param: String,
                /// Records per page, 1..=100000.
                limit: u32,
            },
            /// Page-number parameters; a page with fewer than `size` records ends.
            PageNumber {
                /// Page parameter (default `page`).
                #[serde(default = "default_page_param")]
                page_param: String,
                /// Page-size parameter (default none: the API's fixed size).
                #[serde(default, skip_serializing_if = "Option::is_none")]
                size_param: Option<String>,
                /// Records per page, 1..=100000 (the API's, when it is fixed).
                size: u32,
                /// Number of the first page (default 1).
                #[serde(default = "default_first_page")]
                first_page: u32,
            },
        }
    }

    impl From<NextPage> for super::NextPage {
        fn from(wire: NextPage) -> Self {
            match wire {
                NextPage::BodyToken { pointer, param, has_more } => Self::BodyToken { pointer, param, has_more },
                NextPage::BodyUrl { pointer, has_more } => Self::BodyUrl { pointer, has_more },
                NextPage::LastRecord { pointer, param, has_more } => Self::LastRecord { pointer, param, has_more },
                NextPage::LinkHeader {} => Self::LinkHeader {},
                NextPage::Offset { offset_param, limit_param, limit } => {
                    Self::Numbered { params: PageParams::OffsetLimit { offset_param, limit_param }, size: limit }
                }
                NextPage::PageNumber { page_param, size_param, size, first_page } => {
                    Self::Numbered { params: PageParams::PageNumber { page_param, size_param, first_page }, size }
                }
            }
        }
    }

    impl From<super::NextPage> for NextPage {
        fn from(next: super::NextPage) -> Self {
            use super::NextPage as Next;
            match next {
                Next::BodyToken { pointer, param, has_more } => Self::BodyToken { pointer, param, has_more },
                Next::BodyUrl { pointer, has_more } => Self::BodyUrl { pointer, has_more },
                Next::LastRecord { pointer, param, has_more } => Self::LastRecord { pointer, param, has_more },
                Next::LinkHeader {} => Self::LinkHeader {},
                Next::Numbered { params: PageParams::OffsetLimit { offset_param, limit_param }, size } => {
                    Self::Offset { offset_param, limit_param, limit: size }
                }
                Next::Numbered { params: PageParams::PageNumber { page_param, size_param, first_page }, size } => {
                    Self::PageNumber { page_param, size_param, size, first_page }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn numbered(params: PageParams, size: u32) -> NextPage {
        NextPage::Numbered { params, size }
    }

    #[test]
    fn page_query_addresses_offsets_and_page_numbers() {
        assert_eq!(
            PageParams::default().page_query(50, 2),
            [("offset".to_string(), "100".to_string()), ("limit".to_string(), "50".to_string())]
        );
        let numbers = PageParams::PageNumber { page_param: "p".into(), size_param: None, first_page: 1 };
        assert_eq!(numbers.page_query(10, 2), [("p".to_string(), "3".to_string())]);
        let sized = PageParams::PageNumber { page_param: "p".into(), size_param: Some("n".into()), first_page: 0 };
        assert_eq!(sized.page_query(10, 0), [("p".to_string(), "0".to_string()), ("n".to_string(), "10".to_string())]);
        let far = PageParams::default().page_query(u32::MAX, u32::MAX);
        assert_eq!(far[0].1, (u64::from(u32::MAX) * u64::from(u32::MAX)).to_string(), "no overflow");
    }

    #[test]
    fn each_place_keeps_its_default_page_size_parameter() {
        let paged: PageParams = serde_json::from_value(json!({"style": "page_number"})).expect("paged params");
        assert_eq!(
            paged,
            PageParams::PageNumber { page_param: "page".into(), size_param: Some("per_page".into()), first_page: 1 }
        );
        assert_eq!(serde_json::to_value(&paged).expect("json")["size_param"], "per_page");
        let fixed = PageParams::PageNumber { page_param: "page".into(), size_param: None, first_page: 1 };
        assert_eq!(serde_json::to_value(&fixed).expect("json")["size_param"], json!(null), "null, not absent");
        let next: NextPage = serde_json::from_value(json!({"kind": "page_number", "size": 10})).expect("next");
        assert_eq!(next, numbered(fixed, 10));
    }

    #[test]
    fn next_page_keeps_its_version_1_json() {
        for text in [
            json!({"kind": "offset", "offset_param": "offset", "limit_param": "limit", "limit": 100}),
            json!({"kind": "page_number", "page_param": "page", "size_param": "per_page", "size": 100, "first_page": 0}),
            json!({"kind": "page_number", "page_param": "page", "size": 5, "first_page": 1}),
            json!({"kind": "body_token", "pointer": "/next", "param": "cursor", "has_more": "/more"}),
            json!({"kind": "body_url", "pointer": "/links/next"}),
            json!({"kind": "last_record", "pointer": "/id", "param": "starting_after", "has_more": "/has_more"}),
            json!({"kind": "link_header"}),
        ] {
            let next: NextPage = serde_json::from_value(text.clone()).expect("reads");
            assert_eq!(serde_json::to_value(&next).expect("writes"), text);
        }
        let offset: NextPage = serde_json::from_value(json!({"kind": "offset", "limit": 25})).expect("defaults");
        assert_eq!(offset, numbered(PageParams::default(), 25));
        let err = serde_json::from_value::<NextPage>(json!({"kind": "offset", "limit": 25, "size": 3}))
            .expect_err("an unknown field")
            .to_string();
        assert!(err.contains("size"), "{err}");
    }
}
