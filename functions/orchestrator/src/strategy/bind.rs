//! Binding `{name}` placeholders of a request template: a query row's
//! columns (the `athena` strategy) and the run's values (every strategy,
//! `contracts::template::RUN_PLACEHOLDERS`).
//!
//! In the URL a value is percent-encoded as one path segment; in query and
//! header values and JSON body strings it is spliced as text; a body string
//! that is exactly `{name}` takes the value with its JSON type.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use contracts::HttpMethod;
use contracts::spec::RequestTemplate;
use contracts::template::{braced, is_placeholder_name, whole_placeholder};

/// Values that cannot be bound into the request template (a query row's, or
/// the run's), naming the template field (`request.url`, `request.query.<name>`,
/// `request.headers.<name>`, `request.body.<path>`) and the placeholder.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The row has no column of the placeholder's name.
    #[error("{field}: placeholder {{{placeholder}}} has no value: the row's columns are {columns:?}")]
    Missing {
        /// Template field.
        field: String,
        /// Placeholder name, without braces.
        placeholder: String,
        /// The row's column names.
        columns: Vec<String>,
    },
    /// The column's value is `null`, an object or an array where text is
    /// needed.
    #[error("{field}: placeholder {{{placeholder}}} has {found} in the row, not a value that fits in text")]
    NotText {
        /// Template field.
        field: String,
        /// Placeholder name, without braces.
        placeholder: String,
        /// The value's JSON kind (`null`, `an object`, `an array`).
        found: &'static str,
    },
    /// A value bound as a whole path segment is empty, `.` or `..`: the
    /// URL would call another path (`/customers/../orders` is `/orders`,
    /// and the WHATWG URL rules read `%2E%2E` as `..` too, so it cannot be
    /// sent as a segment) or leave an empty segment (`/customers//orders`).
    #[error(
        "{field}: placeholder {{{placeholder}}} is {value:?} in the row: as a whole path segment that would call {effect}; the row is not called"
    )]
    Segment {
        /// Always `request.url`.
        field: &'static str,
        /// Placeholder name, without braces.
        placeholder: String,
        /// The value: empty, `.` or `..`.
        value: String,
        /// What the URL would call instead.
        effect: &'static str,
    },
    /// The URL with the values bound has a path the URL rules change (a
    /// dot segment made of two values, `{a}{b}` bound to `.` and `.`).
    #[error("{field} {url:?} after binding: the URL rules would call path {path:?} instead; the row is not called")]
    Rewritten {
        /// Always `request.url`.
        field: &'static str,
        /// The URL text after binding.
        url: String,
        /// The path that would be called.
        path: String,
    },
    /// The URL with the values bound is no URL.
    #[error("{field} {url:?} after binding: {source}")]
    Url {
        /// Always `request.url`.
        field: &'static str,
        /// The URL text after binding.
        url: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
}

impl BindError {
    /// The template field the error is about, e.g. `request.query.region`.
    pub fn field(&self) -> &str {
        match self {
            BindError::Missing { field, .. } | BindError::NotText { field, .. } => field,
            BindError::Url { field, .. } | BindError::Segment { field, .. } | BindError::Rewritten { field, .. } => {
                field
            }
        }
    }

    /// The placeholder without a usable value (`None` for a URL that does
    /// not parse).
    pub fn placeholder(&self) -> Option<&str> {
        match self {
            BindError::Missing { placeholder, .. }
            | BindError::NotText { placeholder, .. }
            | BindError::Segment { placeholder, .. } => Some(placeholder),
            BindError::Url { .. } | BindError::Rewritten { .. } => None,
        }
    }
}

/// What a placeholder without a value does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unbound {
    /// Fails with [`BindError::Missing`] (a query row must fill every one).
    Fail,
    /// Stays as written, for a later binding (the run's values are bound
    /// first; an Athena-driven template's `{column}`s stay for the rows).
    Keep,
}

/// The call parts of a template with `values` bound.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundTemplate {
    /// Method, unchanged.
    pub method: HttpMethod,
    /// URL with path values percent-encoded.
    pub url: url::Url,
    /// Query values.
    pub query: BTreeMap<String, String>,
    /// Header values.
    pub headers: BTreeMap<String, String>,
    /// JSON body.
    pub body: Option<Value>,
}

/// `template`'s URL, query and header values and body with `values` bound.
///
/// # Errors
/// [`BindError`] naming the template field and the placeholder when a value
/// is missing (with [`Unbound::Fail`]) or is `null`, an object or an array
/// (except as a whole body value), when a whole path segment's value is
/// empty, `.` or `..` ([`BindError::Segment`]), or when the URL stops being
/// valid (a path that the URL rules change, as two placeholders of one
/// segment bound to `.` each would, is not valid here either).
pub fn bind_template(
    template: &RequestTemplate,
    values: &Map<String, Value>,
    unbound: Unbound,
) -> Result<BoundTemplate, BindError> {
    let url_text = braced(template.url.as_str());
    check_segments(&url_text, values)?;
    let url_text = substitute("request.url", &url_text, values, unbound, encode_path_segment)?;
    let url = url::Url::parse(&url_text).map_err(|source| BindError::Url {
        field: "request.url",
        url: url_text.clone(),
        source,
    })?;
    // Values are encoded to unreserved characters and `%XX`, so parsing
    // changes the path only where it removes a dot segment (or encodes a
    // placeholder kept for later).
    if braced(url.path()) != path_of(&url_text) {
        return Err(BindError::Rewritten { field: "request.url", url: url_text, path: url.path().to_string() });
    }
    let mut query = template.query.clone();
    for (name, value) in query.iter_mut() {
        *value = substitute(&format!("request.query.{name}"), value, values, unbound, str::to_string)?;
    }
    let mut headers = template.headers.clone();
    for (name, value) in headers.iter_mut() {
        *value = substitute(&format!("request.headers.{name}"), value, values, unbound, str::to_string)?;
    }
    let body = match &template.body {
        Some(body) => Some(bind_json("request.body", body, values, unbound)?),
        None => None,
    };
    Ok(BoundTemplate { method: template.method, url, query, headers, body })
}

fn bind_json(field: &str, value: &Value, values: &Map<String, Value>, unbound: Unbound) -> Result<Value, BindError> {
    Ok(match value {
        Value::String(text) => match whole_placeholder(text) {
            Some(name) => match (values.get(name), unbound) {
                (Some(value), _) => value.clone(),
                (None, Unbound::Keep) => Value::String(text.clone()),
                (None, Unbound::Fail) => return Err(missing(field, name, values)),
            },
            None => Value::String(substitute(field, text, values, unbound, str::to_string)?),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| bind_json(&format!("{field}[{i}]"), item, values, unbound))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| Ok((key.clone(), bind_json(&format!("{field}.{key}"), item, values, unbound)?)))
                .collect::<Result<_, BindError>>()?,
        ),
        other => other.clone(),
    })
}

/// Replaces every `{name}` in `text` with its value, passed through
/// `encode`. Braces around anything that is not a name are kept as they
/// are, and so is a name without a value under [`Unbound::Keep`].
pub fn substitute(
    field: &str,
    text: &str,
    values: &Map<String, Value>,
    unbound: Unbound,
    encode: fn(&str) -> String,
) -> Result<String, BindError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_placeholder_name(&after[..close]) => {
                let name = &after[..close];
                let Some(value) = values.get(name) else {
                    if unbound == Unbound::Fail {
                        return Err(missing(field, name, values));
                    }
                    out.push_str(&rest[open..open + close + 2]);
                    rest = &after[close + 1..];
                    continue;
                };
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(BindError::NotText {
                            field: field.to_string(),
                            placeholder: name.to_string(),
                            found: tributary_core::json::kind_of(other),
                        });
                    }
                };
                out.push_str(&encode(&text));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The path of URL text `url` as written (from the `/` after the
/// authority to the query or fragment; `/` when there is none, as the URL
/// rules make it).
fn path_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[after_scheme..];
    let Some(start) = rest.find(['/', '?', '#']) else { return "/" };
    let path = &rest[start..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    if path.is_empty() { "/" } else { path }
}

/// [`BindError::Segment`] for the first placeholder of `url`'s path that is
/// a whole segment (between `/` and `/`, `?`, `#` or the end) and whose
/// value is empty, `.` or `..`.
fn check_segments(url: &str, values: &Map<String, Value>) -> Result<(), BindError> {
    for segment in path_of(url).split('/').skip(1) {
        let Some(name) = segment.strip_prefix('{').and_then(|rest| rest.strip_suffix('}')) else { continue };
        if !is_placeholder_name(name) {
            continue;
        }
        let effect = match values.get(name).and_then(Value::as_str) {
            Some("") => "an empty segment (`//`)",
            Some(".") => "the path without this segment",
            Some("..") => "the parent path",
            _ => continue,
        };
        return Err(BindError::Segment {
            field: "request.url",
            placeholder: name.to_string(),
            value: values.get(name).and_then(Value::as_str).unwrap_or_default().to_string(),
            effect,
        });
    }
    Ok(())
}

fn missing(field: &str, name: &str, values: &Map<String, Value>) -> BindError {
    BindError::Missing {
        field: field.to_string(),
        placeholder: name.to_string(),
        columns: values.keys().cloned().collect(),
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so a value
/// stays one path segment (`a/b` -> `a%2Fb`).
fn encode_path_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
