//! `${VAR}` in a spec file: the CLI replaces it by the environment
//! variable's value when it loads the file ([`super::load_spec`]), before
//! the YAML is parsed, so one spec serves hosts and ports that differ by
//! machine (`url: http://${VENDOR_HOST}:${VENDOR_PORT}/v1/contacts`).
//!
//! - `${VAR}`: the value of `VAR`; unset (or empty) is an error naming
//!   the variable and the line ([`EnvError::Unset`]).
//! - `${VAR:-default}`: `default` when `VAR` is unset or empty.
//! - `$${`: a literal `${`. A `$` anywhere else, `$VAR` included, is
//!   itself.
//! - A line whose first non-blank character is `#` (a whole-line YAML
//!   comment) is left as it is.
//!
//! The text is replaced as it is, before parsing: quote the scalar when a
//! value may hold YAML's own characters (`: `, ` #`). Secrets are never
//! substituted: a spec references them by id (`request.auth.secret_id`),
//! and a variable named like a credential
//! ([`contracts::spec::is_credential_field`]: the names whose values logs
//! and alerts mask, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*AUTH*`,
//! `*SESSION*`, `*KEY`, `*PWD`, and `*_PAT`, `*CREDS*`, `*PRIVATE*`, …) or one of the local runtime's secrets
//! (`TRIBUTARY_SECRET_*`) is refused ([`EnvError::Credential`]), since its
//! value would travel in every message, dead letter and alert.

/// Prefix of the environment variables the local runtime reads secrets
/// from (`TRIBUTARY_SECRET_<ID>`): never substituted into a spec.
pub const SECRET_VARIABLE_PREFIX: &str = "TRIBUTARY_SECRET_";

/// Why a spec's `${…}` could not be replaced; each names the 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The variable is unset (or empty) and has no default.
    #[error(
        "line {line}: environment variable {name} is not set (`${{{name}}}`); set it, or give a default: `${{{name}:-value}}`"
    )]
    Unset {
        /// The variable.
        name: String,
        /// Line of the file.
        line: usize,
    },
    /// `${` with no `}` on its line.
    #[error("line {line}: `${{` without a closing `}}` on the line; write `$${{` for a literal `${{`")]
    Unclosed {
        /// Line of the file.
        line: usize,
    },
    /// What stands between `${` and `}` (before any `:-`) is no variable
    /// name.
    #[error(
        "line {line}: `${{{text}}}` is not an environment variable name (letters, digits and _, not starting with a digit)"
    )]
    BadName {
        /// The text between the braces.
        text: String,
        /// Line of the file.
        line: usize,
    },
    /// The variable is named like a credential, or is a local secret.
    #[error(
        "line {line}: `${{{name}}}` looks like a credential: a spec references secrets by id (`request.auth.secret_id`), never by value, which would travel in every message, dead letter and alert"
    )]
    Credential {
        /// The variable.
        name: String,
        /// Line of the file.
        line: usize,
    },
}

/// `text` with each `${VAR}` and `${VAR:-default}` replaced by what
/// `lookup(VAR)` gives (an empty value counts as unset), `$${` by `${`,
/// whole-line comments left alone (see the module docs).
///
/// # Errors
/// The first [`EnvError`], naming the line.
pub fn substitute(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, EnvError> {
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        substitute_line(line, index + 1, &lookup, &mut out)?;
    }
    Ok(out)
}

fn substitute_line(
    line: &str,
    number: usize,
    lookup: &impl Fn(&str) -> Option<String>,
    out: &mut String,
) -> Result<(), EnvError> {
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let end = tail.find('}').ok_or(EnvError::Unclosed { line: number })?;
            out.push_str(&value(&tail[..end], number, lookup)?);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(())
}

/// The value of the reference `inner` (`VAR` or `VAR:-default`).
fn value(inner: &str, line: usize, lookup: &impl Fn(&str) -> Option<String>) -> Result<String, EnvError> {
    let (name, default) = match inner.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inner, None),
    };
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(EnvError::BadName { text: inner.to_string(), line });
    }
    if contracts::spec::is_credential_field(name) || name.to_ascii_uppercase().starts_with(SECRET_VARIABLE_PREFIX) {
        return Err(EnvError::Credential { name: name.to_string(), line });
    }
    match (lookup(name).filter(|v| !v.is_empty()), default) {
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_string()),
        (None, None) => Err(EnvError::Unset { name: name.to_string(), line }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "VENDOR_HOST" => Some("10.0.0.7".into()),
            "VENDOR_PORT" => Some("8443".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_and_defaults_are_replaced_and_dollar_dollar_brace_is_a_literal() {
        let text = "url: http://${VENDOR_HOST}:${VENDOR_PORT}/x\n\
                    size: ${PAGE_SIZE:-100}\nempty: ${EMPTY:-fallback}\n\
                    note: costs $5, literal $${NOT_A_VAR} and $HOME\n";
        assert_eq!(
            substitute(text, env).expect("substituted"),
            "url: http://10.0.0.7:8443/x\nsize: 100\nempty: fallback\n\
             note: costs $5, literal ${NOT_A_VAR} and $HOME\n"
        );
        assert_eq!(substitute("a: ${X:-}", env).expect("empty default"), "a: ");
    }

    #[test]
    fn a_whole_line_comment_is_left_alone() {
        let text = "# set ${VENDOR_HOST} first\n  # ${UNSET}\nhost: ${VENDOR_HOST} # ${VENDOR_PORT}\n";
        assert_eq!(
            substitute(text, env).expect("substituted"),
            "# set ${VENDOR_HOST} first\n  # ${UNSET}\nhost: 10.0.0.7 # 8443\n"
        );
    }

    #[test]
    fn errors_name_the_variable_and_the_line() {
        let err = substitute("a: 1\nurl: http://${VENDOR_HOST}:${PORT}/x\n", env).expect_err("unset");
        assert_eq!(err, EnvError::Unset { name: "PORT".into(), line: 2 });
        assert!(err.to_string().contains("${PORT:-value}"), "{err}");
        assert_eq!(substitute("x: ${EMPTY}", env), Err(EnvError::Unset { name: "EMPTY".into(), line: 1 }));
        assert_eq!(substitute("x: ${VENDOR_HOST", env), Err(EnvError::Unclosed { line: 1 }));
        assert_eq!(substitute("x: ${1X}", env), Err(EnvError::BadName { text: "1X".into(), line: 1 }));
        assert_eq!(substitute("x: ${}", env), Err(EnvError::BadName { text: String::new(), line: 1 }));
    }

    #[test]
    fn a_credential_is_never_substituted() {
        for name in [
            "VENDOR_TOKEN",
            "api_key",
            "DB_PASSWORD",
            "CLIENT_SECRET",
            "TRIBUTARY_SECRET_VENDOR",
            "VENDOR_KEY",
            "VENDOR_AUTH",
            "SESSION_ID",
        ] {
            let err = substitute(&format!("h: ${{{name}:-x}}"), |_| Some("s3cr3t".into())).expect_err(name);
            assert_eq!(err, EnvError::Credential { name: name.into(), line: 1 });
            assert!(!err.to_string().contains("s3cr3t"), "{err}");
        }
    }
}
