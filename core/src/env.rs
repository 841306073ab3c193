//! Configuration from the Lambda environment, read once at cold start.
//!
//! Every helper names the variable in its error, so a mis-deployed function
//! fails its cold start with `environment variable PERSIST_QUEUE_URL is not
//! set` or `environment variable ZSTD_LEVEL="0" is not within 1..=22 (…)`
//! rather than somewhere deep in a handler, on every message. An empty value
//! counts as unset (SAM passes `""` for an optional parameter left blank).
//!
//! [`LambdaEnv`] reads the process environment ([`LambdaEnv::from_env`]) or a
//! fixed map ([`LambdaEnv::from_pairs`], for tests: edition 2024 makes
//! `std::env::set_var` unsafe). Each function's `LambdaConfig::from_env`
//! reads its settings through it. The free functions ([`required_env`],
//! [`optional_usize`], …) are shorthands over the process environment.
//!
//! Pure std: no AWS SDK, so the function libraries (which the CLI links)
//! and their unit tests use it too.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::time::Duration;

/// A missing, malformed or out-of-range environment variable.
///
/// `Debug` prints the same sentence as `Display`: a `main` returning this
/// error prints it with `Debug`, and that line is what the Lambda init error
/// shows in CloudWatch.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The variable is unset or empty.
    #[error("environment variable {name} is not set")]
    Missing {
        /// Variable name.
        name: String,
    },
    /// The variable's value cannot be read as the expected type.
    #[error("environment variable {name}={value:?} is not {expected}")]
    Malformed {
        /// Variable name.
        name: String,
        /// The value found (lossy UTF-8). Configuration only: secrets are
        /// referenced by id, never passed in the environment.
        value: String,
        /// What was expected, e.g. `a non-negative integer`.
        expected: &'static str,
    },
    /// The variable is a number, but outside the range the setting allows.
    #[error("environment variable {name}={value:?} is not within {min}..={max} ({limit})")]
    OutOfRange {
        /// Variable name.
        name: String,
        /// The value found.
        value: String,
        /// Least value allowed.
        min: u64,
        /// Greatest value allowed.
        max: u64,
        /// Where the range comes from, e.g. `SQS MaximumMessageSize`.
        limit: &'static str,
    },
}

impl EnvError {
    /// The variable the error is about.
    pub fn name(&self) -> &str {
        match self {
            EnvError::Missing { name } | EnvError::Malformed { name, .. } | EnvError::OutOfRange { name, .. } => name,
        }
    }
}

impl std::fmt::Debug for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Where variables are read from.
#[derive(Clone, Debug, Default)]
enum Source {
    /// `std::env`.
    #[default]
    Process,
    /// A fixed map.
    Fixed(BTreeMap<String, String>),
}

/// A source of configuration variables: the process environment, or a fixed
/// map in tests.
#[derive(Clone, Debug, Default)]
pub struct LambdaEnv {
    source: Source,
}

impl LambdaEnv {
    /// The process environment (`std::env::var_os`).
    pub fn from_env() -> Self {
        Self { source: Source::Process }
    }

    /// A fixed set of `(name, value)` pairs; nothing else is visible.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self { source: Source::Fixed(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect()) }
    }

    /// The value of `name`, `None` when unset or empty.
    ///
    /// # Errors
    /// [`EnvError::Malformed`] when the value is not valid UTF-8.
    pub fn optional(&self, name: &str) -> Result<Option<String>, EnvError> {
        let value = match &self.source {
            Source::Process => match std::env::var_os(name) {
                None => None,
                Some(raw) => Some(raw.into_string().map_err(|raw| EnvError::Malformed {
                    name: name.into(),
                    value: raw.to_string_lossy().into_owned(),
                    expected: "valid UTF-8",
                })?),
            },
            Source::Fixed(map) => map.get(name).cloned(),
        };
        Ok(value.filter(|v| !v.is_empty()))
    }

    /// The value of `name`, which must be set and non-empty.
    ///
    /// # Errors
    /// [`EnvError::Missing`] or [`EnvError::Malformed`] (not UTF-8).
    pub fn required(&self, name: &str) -> Result<String, EnvError> {
        self.optional(name)?.ok_or_else(|| EnvError::Missing { name: name.into() })
    }

    /// `name` as a non-negative integer (decimal, surrounding spaces
    /// ignored), or `default` when unset.
    ///
    /// # Errors
    /// [`EnvError::Malformed`].
    pub fn usize_or(&self, name: &str, default: usize) -> Result<usize, EnvError> {
        self.parsed_or(name, default, "a non-negative integer", |v| v.parse().ok())
    }

    /// `name` as a non-negative integer (`u64`), or `default` when unset.
    ///
    /// # Errors
    /// [`EnvError::Malformed`].
    pub fn u64_or(&self, name: &str, default: u64) -> Result<u64, EnvError> {
        self.parsed_or(name, default, "a non-negative integer", |v| v.parse().ok())
    }

    /// `name` as an integer within `range`, or `default` when unset (the
    /// default is not checked: it is the code's own).
    ///
    /// # Errors
    /// [`EnvError::Malformed`] when it is not a non-negative integer;
    /// [`EnvError::OutOfRange`] naming the range and `limit`, what it follows.
    pub fn u64_in(
        &self,
        name: &str,
        default: u64,
        range: RangeInclusive<u64>,
        limit: &'static str,
    ) -> Result<u64, EnvError> {
        let Some(value) = self.optional(name)? else { return Ok(default) };
        let Ok(number) = value.trim().parse::<u64>() else {
            return Err(EnvError::Malformed { name: name.into(), value, expected: "a non-negative integer" });
        };
        if range.contains(&number) {
            Ok(number)
        } else {
            Err(EnvError::OutOfRange { name: name.into(), value, min: *range.start(), max: *range.end(), limit })
        }
    }

    /// [`LambdaEnv::u64_in`] as a `usize`.
    ///
    /// # Errors
    /// As [`LambdaEnv::u64_in`].
    pub fn usize_in(
        &self,
        name: &str,
        default: usize,
        range: RangeInclusive<usize>,
        limit: &'static str,
    ) -> Result<usize, EnvError> {
        let widen = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let range = widen(*range.start())..=widen(*range.end());
        let number = self.u64_in(name, widen(default), range, limit)?;
        // Within a range of usize bounds, so it fits.
        Ok(usize::try_from(number).unwrap_or(usize::MAX))
    }

    /// `name` as a whole number of seconds within `range_secs`, or `default`
    /// when unset.
    ///
    /// # Errors
    /// As [`LambdaEnv::u64_in`].
    pub fn secs_in(
        &self,
        name: &str,
        default: Duration,
        range_secs: RangeInclusive<u64>,
        limit: &'static str,
    ) -> Result<Duration, EnvError> {
        match self.optional(name)? {
            None => Ok(default),
            Some(_) => Ok(Duration::from_secs(self.u64_in(name, 0, range_secs, limit)?)),
        }
    }

    /// `name` as a boolean (`true`/`false`/`1`/`0`/`yes`/`no`, any case), or
    /// `default` when unset.
    ///
    /// # Errors
    /// [`EnvError::Malformed`].
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, EnvError> {
        self.parsed_or(name, default, "a boolean (true/false)", |v| match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        })
    }

    /// `name` as a whole number of seconds, or `default` when unset.
    ///
    /// # Errors
    /// [`EnvError::Malformed`].
    pub fn secs_or(&self, name: &str, default: Duration) -> Result<Duration, EnvError> {
        match self.optional(name)? {
            None => Ok(default),
            Some(_) => Ok(Duration::from_secs(self.u64_or(name, 0)?)),
        }
    }

    fn parsed_or<T>(
        &self,
        name: &str,
        default: T,
        expected: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, EnvError> {
        match self.optional(name)? {
            None => Ok(default),
            Some(value) => parse(value.trim()).ok_or(EnvError::Malformed { name: name.into(), value, expected }),
        }
    }
}

/// [`LambdaEnv::required`] over the process environment, e.g.
/// `required_env("PERSIST_QUEUE_URL")`.
///
/// # Errors
/// [`EnvError`] naming the variable.
pub fn required_env(name: &str) -> Result<String, EnvError> {
    LambdaEnv::from_env().required(name)
}

/// [`LambdaEnv::optional`] over the process environment.
///
/// # Errors
/// [`EnvError::Malformed`] (not UTF-8).
pub fn optional_env(name: &str) -> Result<Option<String>, EnvError> {
    LambdaEnv::from_env().optional(name)
}

/// [`LambdaEnv::usize_or`] over the process environment, e.g.
/// `optional_usize("MAX_MESSAGE_BYTES", 262_144)`.
///
/// # Errors
/// [`EnvError::Malformed`] naming the variable.
pub fn optional_usize(name: &str, default: usize) -> Result<usize, EnvError> {
    LambdaEnv::from_env().usize_or(name, default)
}

/// [`LambdaEnv::bool_or`] over the process environment.
///
/// # Errors
/// [`EnvError::Malformed`] naming the variable.
pub fn optional_bool(name: &str, default: bool) -> Result<bool, EnvError> {
    LambdaEnv::from_env().bool_or(name, default)
}

/// [`LambdaEnv::secs_or`] over the process environment.
///
/// # Errors
/// [`EnvError::Malformed`] naming the variable.
pub fn optional_secs(name: &str, default: Duration) -> Result<Duration, EnvError> {
    LambdaEnv::from_env().secs_or(name, default)
}

/// Bytes of one SQS message, and of one `SendMessageBatch` call all
/// entries together: a queue's `MaximumMessageSize` is 1,024 bytes (1 KiB)
/// to 1,048,576 (1 MiB; the default is 262,144), and a batch's total payload
/// may not exceed 1 MiB either (Amazon SQS API reference,
/// `SetQueueAttributes` and `SendMessageBatch`).
pub const SQS_MESSAGE_BYTES_RANGE: RangeInclusive<usize> = 1024..=1_048_576;

/// Seconds a setting bounded by one invocation may take: at least 1, at
/// most Lambda's 900 s maximum function time-out (AWS Lambda quotas), the
/// range of a spec's `request.timeout_secs` too.
pub const LAMBDA_SECS_RANGE: RangeInclusive<u64> = 1..=900;

/// The SQS redrive policy's `maxReceiveCount` range (Amazon SQS Developer
/// Guide, dead-letter queues: 1 to 1,000).
pub const MAX_RECEIVE_COUNT_RANGE: RangeInclusive<u64> = 1..=1000;

/// The dead-letter target of a function from `DLQ_URL` (its work queue's
/// DLQ; unset: leave failures to the redrive policy alone) and
/// `MAX_RECEIVE_COUNT` (the work queue's `maxReceiveCount`, default
/// [`crate::topology::MAX_RECEIVE_COUNT`]; read only with `DLQ_URL`).
///
/// # Errors
/// [`EnvError::Malformed`] or [`EnvError::OutOfRange`] for a
/// `MAX_RECEIVE_COUNT` that is not a number within
/// [`MAX_RECEIVE_COUNT_RANGE`] (the SQS redrive policy's range).
pub fn dead_letter_target(env: &LambdaEnv) -> Result<Option<crate::batch::DeadLetterTarget>, EnvError> {
    let Some(dlq) = env.optional("DLQ_URL")? else { return Ok(None) };
    let count = env.u64_in(
        "MAX_RECEIVE_COUNT",
        u64::from(crate::topology::MAX_RECEIVE_COUNT),
        MAX_RECEIVE_COUNT_RANGE,
        "the SQS redrive policy's maxReceiveCount",
    )?;
    // Within 1..=1000.
    let max_receive_count = u32::try_from(count).unwrap_or(u32::MAX);
    Ok(Some(crate::batch::DeadLetterTarget { dlq, max_receive_count }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_malformed_variables_are_named() {
        let env = LambdaEnv::from_pairs([
            ("PERSIST_QUEUE_URL", "https://sqs/q"),
            ("EMPTY", ""),
            ("MAX_MESSAGE_BYTES", "lots"),
            ("FORCE", "TRUE"),
            ("TTL_SECS", " 30 "),
        ]);
        assert_eq!(env.required("PERSIST_QUEUE_URL").unwrap(), "https://sqs/q");
        let missing = env.required("EMPTY").unwrap_err();
        assert_eq!(missing.to_string(), "environment variable EMPTY is not set");
        let malformed = env.usize_or("MAX_MESSAGE_BYTES", 262_144).unwrap_err();
        assert!(malformed.to_string().contains("MAX_MESSAGE_BYTES"), "{malformed}");
        assert_eq!(env.usize_or("UNSET", 262_144).unwrap(), 262_144);
        assert!(env.bool_or("FORCE", false).unwrap());
        assert_eq!(env.secs_or("TTL_SECS", Duration::from_secs(300)).unwrap(), Duration::from_secs(30));
        assert!(env.bool_or("MAX_MESSAGE_BYTES", false).is_err());
    }

    #[test]
    fn numbers_outside_their_range_are_refused_naming_variable_value_and_limit() {
        let env = LambdaEnv::from_pairs([("LEVEL", "0"), ("ROWS", " 7 "), ("SECS", "901"), ("WORD", "x")]);
        let err = env.u64_in("LEVEL", 1, 1..=22, "zstd levels").expect_err("0");
        assert_eq!(
            err,
            EnvError::OutOfRange { name: "LEVEL".into(), value: "0".into(), min: 1, max: 22, limit: "zstd levels" }
        );
        assert_eq!(err.to_string(), r#"environment variable LEVEL="0" is not within 1..=22 (zstd levels)"#);
        assert_eq!(err.name(), "LEVEL");
        assert_eq!(env.usize_in("ROWS", 1, 1..=10, "rows").expect("7"), 7);
        assert_eq!(env.usize_in("UNSET", 3, 1..=10, "rows").expect("default"), 3);
        let err = env.secs_in("SECS", Duration::from_secs(30), 1..=900, "Lambda's 900 s").expect_err("901");
        assert!(err.to_string().contains("SECS=\"901\"") && err.to_string().contains("1..=900"), "{err}");
        assert!(matches!(env.u64_in("WORD", 1, 1..=2, "x"), Err(EnvError::Malformed { .. })));
    }

    #[test]
    fn the_dead_letter_target_needs_a_dlq_and_a_receive_count_in_the_redrive_range() {
        assert_eq!(dead_letter_target(&LambdaEnv::from_pairs([("MAX_RECEIVE_COUNT", "0")])), Ok(None));
        let target = dead_letter_target(&LambdaEnv::from_pairs([("DLQ_URL", "https://sqs/dlq")])).expect("default");
        assert_eq!(target.map(|t| t.max_receive_count), Some(crate::topology::MAX_RECEIVE_COUNT));
        for bad in ["0", "1001", "five"] {
            let env = LambdaEnv::from_pairs([("DLQ_URL", "https://sqs/dlq"), ("MAX_RECEIVE_COUNT", bad)]);
            let err = dead_letter_target(&env).expect_err(bad);
            assert!(err.name() == "MAX_RECEIVE_COUNT" && err.to_string().contains(bad), "{err}");
        }
    }
}
