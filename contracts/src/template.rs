//! Placeholder templates: `{name}` in request URLs, query values, headers
//! and bodies (bound from an Athena row or a run parameter), and `?` in SQL.
//!
//! The grammar is checked here, once, by validation (`spec`) and by the
//! Orchestrator's binding alike.

/// The run's values, bound into the request template (URL, query, headers,
/// body) and Athena parameters of every strategy when the run starts:
///
/// | placeholder | value, e.g. |
/// |---|---|
/// | `{run_date}` | the run's date, `2026-12-05` |
/// | `{run_id}` | the run id, `20261205T060000Z` |
/// | `{run_start}` | the run's window start, RFC 3339 UTC, `2026-12-04T06:00:00Z` |
/// | `{run_end}` | the run's window end (its scheduled time), `2026-12-05T06:00:00Z` |
/// | `{run_start_date}` | the window start's UTC date, `2026-12-04` |
/// | `{cursor}` | the incremental cursor (`incremental.start`, then the last completed run's) |
///
/// The window is the schedule's period ending at the scheduled time
/// (`tributary_core::calendar::RunWindow`). These names are reserved: an
/// Athena-driven template's `{column}` placeholders cannot use them.
pub const RUN_PLACEHOLDERS: [&str; 6] = ["run_date", "run_id", "run_start", "run_end", "run_start_date", "cursor"];

/// URL text (a `url::Url` as a string, or a part of one such as its path)
/// with its placeholders braced as written: the URL type percent-encodes
/// `{` and `}` in a path (`/customers/%7Bid%7D` is `/customers/{id}`).
pub fn braced(url: &str) -> String {
    url.replace("%7B", "{").replace("%7D", "}")
}

/// Whether `name` is one of the run's values ([`RUN_PLACEHOLDERS`]).
pub fn is_run_placeholder(name: &str) -> bool {
    RUN_PLACEHOLDERS.contains(&name)
}

/// Every `{name}` placeholder in `text`, in order.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_placeholder_name(&after[..close]) => {
                names.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    names
}

/// `{name}` when `text` is exactly one placeholder.
pub fn whole_placeholder(text: &str) -> Option<&str> {
    let name = text.strip_prefix('{')?.strip_suffix('}')?;
    is_placeholder_name(name).then_some(name)
}

/// Whether `name` can name a placeholder: one or more ASCII letters, digits
/// and `_`.
pub fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why `text` is not a well-formed URL template, if it is not: every `{`
/// must open a `{name}` placeholder (letters, digits, `_`) closed by `}`,
/// and every `}` must close one. RFC 3986 has no literal braces in a URL,
/// so a stray one is a typo, never data.
pub fn malformed_template(text: &str) -> Option<String> {
    let mut open: Option<usize> = None;
    for (at, c) in text.char_indices() {
        match (c, open) {
            ('{', None) => open = Some(at),
            ('{', Some(first)) => return Some(format!("`{{` at byte {first} is not closed before the next `{{`")),
            ('}', None) => return Some(format!("`}}` at byte {at} closes no `{{`")),
            ('}', Some(first)) => {
                let name = &text[first + 1..at];
                if !is_placeholder_name(name) {
                    return Some(format!(
                        "`{{{name}}}` at byte {first} is not a placeholder: a name is letters, digits and `_`"
                    ));
                }
                open = None;
            }
            _ => {}
        }
    }
    open.map(|first| format!("`{{` at byte {first} is never closed"))
}

/// The first `{name}` placeholder in `text`, if any.
pub fn first_placeholder(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_placeholder_name(&after[..close]) => return Some(&after[..close]),
            _ => rest = after,
        }
    }
    None
}

/// Number of `?` placeholders in `sql` outside string literals (`'…'`),
/// quoted identifiers (`"…"`) and comments (`-- …`, `/* … */`).
pub fn count_placeholders(sql: &str) -> usize {
    let mut count = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // A doubled quote inside a literal is an escaped quote: the
                // loop simply re-enters the literal on the next character.
                for inner in chars.by_ref() {
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                for inner in chars.by_ref() {
                    if previous == '*' && inner == '/' {
                        break;
                    }
                    previous = inner;
                }
            }
            '?' => count += 1,
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_in_literals_and_comments_do_not_count() {
        assert_eq!(count_placeholders("SELECT a FROM t WHERE b = ? AND c = '?' -- ?\n AND \"?\" = ? /* ? */"), 2);
        assert_eq!(count_placeholders("SELECT 'it''s ?' , ?"), 1);
    }
}
