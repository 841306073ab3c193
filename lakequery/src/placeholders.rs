//! Athena's positional `?` placeholders rewritten as DataFusion's `$1..$n`.
//!
//! Athena (Trino) numbers `?` placeholders by position; DataFusion only binds
//! numbered ones. The rewrite is lexical: a `?` counts only outside string
//! literals (`'…'`, `''` inside), quoted identifiers (`"…"` and `` `…` ``)
//! and comments (`-- …` to the end of the line, `/* … */`), the places
//! where a `?` is text rather than a placeholder.

/// `sql` with each placeholder `?` replaced by `$1`, `$2`, … in order, and
/// the number of placeholders found.
///
/// Everything else is copied unchanged, including `?` inside string
/// literals, quoted identifiers and comments. An unterminated literal,
/// identifier or comment runs to the end of the text (the planner then
/// reports it).
///
/// ```
/// let (sql, count) = lakequery::numbered_placeholders("SELECT * FROM t WHERE a = ? AND b = '?'");
/// assert_eq!(sql, "SELECT * FROM t WHERE a = $1 AND b = '?'");
/// assert_eq!(count, 1);
/// ```
pub fn numbered_placeholders(sql: &str) -> (String, usize) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut count = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '?' => {
                count += 1;
                out.push('$');
                out.push_str(&count.to_string());
            }
            // A literal or quoted identifier; a doubled closing quote is an
            // escaped quote inside it, so the scan goes on.
            '\'' | '"' | '`' => {
                out.push(c);
                while let Some(inner) = chars.next() {
                    out.push(inner);
                    if inner == c {
                        if chars.peek() == Some(&c) {
                            out.extend(chars.next());
                        } else {
                            break;
                        }
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(c);
                out.extend(chars.next());
                let mut previous = '\0';
                for inner in chars.by_ref() {
                    out.push(inner);
                    if previous == '*' && inner == '/' {
                        break;
                    }
                    previous = inner;
                }
            }
            _ => out.push(c),
        }
    }
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::numbered_placeholders;

    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(
            numbered_placeholders("SELECT * FROM t WHERE a = ? AND b IN (?, ?)"),
            ("SELECT * FROM t WHERE a = $1 AND b IN ($2, $3)".to_string(), 3)
        );
        assert_eq!(numbered_placeholders("SELECT 1"), ("SELECT 1".to_string(), 0));
        assert_eq!(numbered_placeholders("?"), ("$1".to_string(), 1));
    }

    #[test]
    fn question_marks_in_literals_identifiers_and_comments_are_text() {
        assert_eq!(
            numbered_placeholders("SELECT * FROM t WHERE name = 'a?b' AND dt = ?"),
            ("SELECT * FROM t WHERE name = 'a?b' AND dt = $1".to_string(), 1)
        );
        // Doubled quotes stay inside the literal / identifier.
        assert_eq!(
            numbered_placeholders("SELECT 'it''s ?', \"we\"\"ird?\" FROM t WHERE x = ?"),
            ("SELECT 'it''s ?', \"we\"\"ird?\" FROM t WHERE x = $1".to_string(), 1)
        );
        assert_eq!(numbered_placeholders("SELECT `a?` FROM t"), ("SELECT `a?` FROM t".to_string(), 0));
        assert_eq!(
            numbered_placeholders("SELECT ? -- why?\n, ? /* and? */ , ?"),
            ("SELECT $1 -- why?\n, $2 /* and? */ , $3".to_string(), 3)
        );
        // A lone `-` or `/` is an operator, not the start of a comment.
        assert_eq!(numbered_placeholders("SELECT ?-1, ?/2"), ("SELECT $1-1, $2/2".to_string(), 2));
    }

    #[test]
    fn unterminated_quotes_run_to_the_end() {
        assert_eq!(numbered_placeholders("SELECT 'a?"), ("SELECT 'a?".to_string(), 0));
        assert_eq!(numbered_placeholders("SELECT ? /* ?"), ("SELECT $1 /* ?".to_string(), 1));
        // Multi-byte text is copied unchanged.
        assert_eq!(numbered_placeholders("SELECT 'é?', ?"), ("SELECT 'é?', $1".to_string(), 1));
    }
}
