//! Configuration from the Lambda environment, read once at cold start.
//!
//! Each function declares the variables it reads in one table, a
//! `&[EnvVar]` (`LambdaConfig::ENV` in its `src/config.rs`): name, what an
//! unset variable means, the numbers allowed, and a line of doc. Its
//! `LambdaConfig::from_env` reads through that table's entries, the
//! template test checks `infra/template.yaml` sets exactly them, and
//! `infra/README.md`'s environment table is generated from them. The
//! variables several functions read ([`LAKE_BUCKET`], [`RUN_EVENTS_TOPIC_ARN`],
//! [`DLQ_URL`], [`MAX_RECEIVE_COUNT`], [`S3_FORCE_PATH_STYLE`]) are declared
//! here, once.
//!
//! Every reader names the variable in its error, so a mis-deployed function
//! fails its cold start with `environment variable PERSIST_QUEUE_URL is not
//! set` or `environment variable ZSTD_LEVEL="0" is not within 1..=22 (…)`
//! rather than somewhere deep in a handler, on every message. An empty value
//! counts as unset (SAM passes `""` for an optional parameter left blank).
//!
//! [`LambdaEnv`] reads the process environment ([`LambdaEnv::from_env`]) or a
//! fixed map ([`LambdaEnv::from_pairs`], for tests: edition 2024 makes
//! `std::env::set_var` unsafe), and remembers which variables were read
//! ([`LambdaEnv::names_read`]), so a test can check a `from_env` reads
//! exactly its table.
//!
//! Pure std: no AWS SDK, so the function libraries (which the CLI links)
//! and their unit tests use it too.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
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

/// One environment variable a function reads: a row of its table
/// (`LambdaConfig::ENV`), and what its readers ([`LambdaEnv::text`],
/// [`LambdaEnv::u64`], …) take.
///
/// A shared variable is declared once, here; a function may restate its
/// doc for what it uses it for: `EnvVar { doc: "…", ..env::LAKE_BUCKET }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable's name, e.g. `MAX_RECEIVE_COUNT`.
    pub name: &'static str,
    /// What the variable is when unset or empty.
    pub default: Unset,
    /// The numbers it may hold; `None` for a text or a boolean.
    pub range: Option<Allowed>,
    /// What it is for (one line, Markdown): the "what" of
    /// `infra/README.md`'s table.
    pub doc: &'static str,
}

/// What an unset (or empty) variable means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unset {
    /// It must be set: unset stops the cold start ([`EnvError::Missing`]).
    Required,
    /// Nothing is read: the text says what happens then, e.g. `redrive
    /// only` (the docs show `unset: redrive only`).
    Means(&'static str),
    /// This number.
    Number(u64),
    /// This boolean.
    Bool(bool),
}

/// The numbers a numeric variable may hold, and where that range comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// Least value allowed.
    pub min: u64,
    /// Greatest value allowed.
    pub max: u64,
    /// What the range follows, e.g. `SQS MaximumMessageSize`: the
    /// parenthesis of [`EnvError::OutOfRange`] and of the docs.
    pub limit: &'static str,
}

impl Allowed {
    /// `range`, following `limit`.
    pub const fn new(range: RangeInclusive<u64>, limit: &'static str) -> Self {
        Self { min: *range.start(), max: *range.end(), limit }
    }

    /// A `usize` range (as `contracts` and the functions declare some),
    /// following `limit`.
    pub const fn of_usize(range: RangeInclusive<usize>, limit: &'static str) -> Self {
        Self { min: *range.start() as u64, max: *range.end() as u64, limit }
    }
}

impl EnvVar {
    /// A text variable that must be set.
    pub const fn required(name: &'static str, doc: &'static str) -> Self {
        Self { name, default: Unset::Required, range: None, doc }
    }

    /// A text variable that may be unset, `unset` saying what happens then.
    pub const fn optional(name: &'static str, unset: &'static str, doc: &'static str) -> Self {
        Self { name, default: Unset::Means(unset), range: None, doc }
    }

    /// A number within `range`, `default` when unset.
    pub const fn number(name: &'static str, default: u64, range: Allowed, doc: &'static str) -> Self {
        Self { name, default: Unset::Number(default), range: Some(range), doc }
    }

    /// A boolean, `default` when unset.
    pub const fn flag(name: &'static str, default: bool, doc: &'static str) -> Self {
        Self { name, default: Unset::Bool(default), range: None, doc }
    }

    /// Whether `value` is one this variable accepts (a number within its
    /// range, a boolean, or any text), as a set variable is read.
    ///
    /// # Errors
    /// As the variable's reader would: [`EnvError::Malformed`] or
    /// [`EnvError::OutOfRange`], naming it and `value`.
    pub fn check(&self, value: &str) -> Result<(), EnvError> {
        let env = LambdaEnv::from_pairs([(self.name, value)]);
        match (self.default, self.range) {
            (_, Some(_)) => env.optional_u64(self).map(drop),
            (Unset::Bool(_), None) => env.flag(self).map(drop),
            _ => Ok(()),
        }
    }

    /// The docs' "default" cell: `required`, `unset: …`, the number (with
    /// its size in KiB, MiB or GiB for a `…_BYTES` variable) or the boolean.
    pub fn default_text(&self) -> String {
        match self.default {
            Unset::Required => "required".into(),
            Unset::Means(text) => format!("unset: {text}"),
            Unset::Number(n) => match (self.name.ends_with("_BYTES"), bytes_text(n)) {
                (true, Some(size)) => format!("{n} ({size})"),
                _ => n.to_string(),
            },
            Unset::Bool(b) => b.to_string(),
        }
    }

    /// The docs' "allowed" cell: `min–max (limit)` (`at least min (limit)`
    /// up to `u64::MAX`), `a boolean`, or empty.
    pub fn allowed_text(&self) -> String {
        match (self.range, self.default) {
            (Some(Allowed { min, max: u64::MAX, limit }), _) => format!("at least {min} ({limit})"),
            (Some(Allowed { min, max, limit }), _) => format!("{min}–{max} ({limit})"),
            (None, Unset::Bool(_)) => "a boolean".into(),
            (None, _) => String::new(),
        }
    }
}

/// `n` bytes as a whole number of GiB, MiB or KiB, if it is one.
fn bytes_text(n: u64) -> Option<String> {
    [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|(unit, _)| n >= *unit && n.is_multiple_of(*unit))
        .map(|(unit, name)| format!("{} {name}", n / unit))
}

/// The lake bucket (required by every function; each restates what it
/// keeps there).
pub const LAKE_BUCKET: EnvVar = EnvVar::required("LAKE_BUCKET", "the lake bucket");

/// The run-events topic announcing completed runs (unset: none).
pub const RUN_EVENTS_TOPIC_ARN: EnvVar =
    EnvVar::optional("RUN_EVENTS_TOPIC_ARN", "none", "the run-events topic, announcing completed runs");

/// The function's work-queue DLQ, where records given up on go with their
/// reason in message attributes (unset: failures are left to the redrive
/// policy). Read by [`dead_letter_target`].
pub const DLQ_URL: EnvVar = EnvVar::optional(
    "DLQ_URL",
    "redrive only",
    "its work queue's DLQ: records given up on go there with the reason in message attributes",
);

/// The SQS redrive policy's `maxReceiveCount` range (Amazon SQS Developer
/// Guide, dead-letter queues: 1 to 1,000).
pub const MAX_RECEIVE_COUNT_RANGE: RangeInclusive<u64> = 1..=1000;

/// The work queue's `maxReceiveCount`, default
/// [`crate::topology::MAX_RECEIVE_COUNT`], within
/// [`MAX_RECEIVE_COUNT_RANGE`]; read only with [`DLQ_URL`], by
/// [`dead_letter_target`].
pub const MAX_RECEIVE_COUNT: EnvVar = EnvVar::number(
    "MAX_RECEIVE_COUNT",
    crate::topology::MAX_RECEIVE_COUNT as u64,
    Allowed::new(MAX_RECEIVE_COUNT_RANGE, "the SQS redrive policy's maxReceiveCount"),
    "its work queue's `maxReceiveCount` (read with `DLQ_URL` only)",
);

/// S3 path-style addressing (`http://host/bucket/key`), which emulators
/// such as moto need; read by `adapters::aws::s3_client`.
pub const S3_FORCE_PATH_STYLE: EnvVar = EnvVar::flag(
    "TRIBUTARY_S3_FORCE_PATH_STYLE",
    false,
    "S3 path-style addressing, for emulators (read by `adapters::aws::s3_client`)",
);

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
/// map in tests. It remembers the names it was asked for
/// ([`LambdaEnv::names_read`]).
#[derive(Clone, Debug, Default)]
pub struct LambdaEnv {
    source: Source,
    read: RefCell<BTreeSet<&'static str>>,
}

impl LambdaEnv {
    /// The process environment (`std::env::var_os`).
    pub fn from_env() -> Self {
        Self::default()
    }

    /// A fixed set of `(name, value)` pairs; nothing else is visible.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let map = pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
        Self { source: Source::Fixed(map), read: RefCell::default() }
    }

    /// The names of the variables read so far, set or not.
    pub fn names_read(&self) -> BTreeSet<&'static str> {
        self.read.borrow().clone()
    }

    /// The value of `var`, `None` when unset or empty (whatever its
    /// [`EnvVar::default`]).
    ///
    /// # Errors
    /// [`EnvError::Malformed`] when the value is not valid UTF-8.
    pub fn optional(&self, var: &EnvVar) -> Result<Option<String>, EnvError> {
        let name = var.name;
        self.read.borrow_mut().insert(name);
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

    /// The value of `var`, which must be set and non-empty.
    ///
    /// # Errors
    /// [`EnvError::Missing`] or [`EnvError::Malformed`] (not UTF-8).
    pub fn text(&self, var: &EnvVar) -> Result<String, EnvError> {
        self.optional(var)?.ok_or_else(|| EnvError::Missing { name: var.name.into() })
    }

    /// `var` as an integer (decimal, surrounding spaces ignored) within its
    /// range, `None` when unset (whatever its default).
    ///
    /// # Errors
    /// [`EnvError::Malformed`] when it is not a non-negative integer;
    /// [`EnvError::OutOfRange`] naming the range and what it follows.
    pub fn optional_u64(&self, var: &EnvVar) -> Result<Option<u64>, EnvError> {
        let Some(value) = self.optional(var)? else { return Ok(None) };
        let name = var.name;
        let Ok(number) = value.trim().parse::<u64>() else {
            return Err(EnvError::Malformed { name: name.into(), value, expected: "a non-negative integer" });
        };
        match var.range {
            Some(Allowed { min, max, limit }) if !(min..=max).contains(&number) => {
                Err(EnvError::OutOfRange { name: name.into(), value, min, max, limit })
            }
            _ => Ok(Some(number)),
        }
    }

    /// `var` as an integer within its range, or its default
    /// ([`Unset::Number`]) when unset.
    ///
    /// # Errors
    /// As [`LambdaEnv::optional_u64`]; [`EnvError::Missing`] when it is
    /// unset and has no numeric default.
    pub fn u64(&self, var: &EnvVar) -> Result<u64, EnvError> {
        match (self.optional_u64(var)?, var.default) {
            (Some(number), _) => Ok(number),
            (None, Unset::Number(default)) => Ok(default),
            (None, _) => Err(EnvError::Missing { name: var.name.into() }),
        }
    }

    /// [`LambdaEnv::u64`] as a `usize`.
    ///
    /// # Errors
    /// As [`LambdaEnv::u64`].
    pub fn usize(&self, var: &EnvVar) -> Result<usize, EnvError> {
        // A range of a usize setting has usize bounds, so it fits.
        Ok(usize::try_from(self.u64(var)?).unwrap_or(usize::MAX))
    }

    /// [`LambdaEnv::u64`] as whole seconds.
    ///
    /// # Errors
    /// As [`LambdaEnv::u64`].
    pub fn secs(&self, var: &EnvVar) -> Result<Duration, EnvError> {
        Ok(Duration::from_secs(self.u64(var)?))
    }

    /// `var` as a boolean (`true`/`false`/`1`/`0`/`yes`/`no`, any case), or
    /// its default ([`Unset::Bool`]) when unset.
    ///
    /// # Errors
    /// [`EnvError::Malformed`]; [`EnvError::Missing`] when it is unset and
    /// has no boolean default.
    pub fn flag(&self, var: &EnvVar) -> Result<bool, EnvError> {
        let name = var.name;
        match (self.optional(var)?, var.default) {
            (Some(value), _) => match value.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(EnvError::Malformed { name: name.into(), value, expected: "a boolean (true/false)" }),
            },
            (None, Unset::Bool(default)) => Ok(default),
            (None, _) => Err(EnvError::Missing { name: name.into() }),
        }
    }
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

/// The dead-letter target of a function from [`DLQ_URL`] (its work queue's
/// DLQ; unset: leave failures to the redrive policy alone) and
/// [`MAX_RECEIVE_COUNT`] (read only with `DLQ_URL`).
///
/// # Errors
/// [`EnvError::Malformed`] or [`EnvError::OutOfRange`] for a
/// `MAX_RECEIVE_COUNT` that is not a number within
/// [`MAX_RECEIVE_COUNT_RANGE`] (the SQS redrive policy's range).
pub fn dead_letter_target(env: &LambdaEnv) -> Result<Option<crate::batch::DeadLetterTarget>, EnvError> {
    let Some(dlq) = env.optional(&DLQ_URL)? else { return Ok(None) };
    let count = env.u64(&MAX_RECEIVE_COUNT)?;
    // Within 1..=1000.
    let max_receive_count = u32::try_from(count).unwrap_or(u32::MAX);
    Ok(Some(crate::batch::DeadLetterTarget { dlq, max_receive_count }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn any(name: &'static str, default: u64) -> EnvVar {
        EnvVar::number(name, default, Allowed::new(0..=u64::MAX, "any number"), "a test number")
    }

    #[test]
    fn missing_and_malformed_variables_are_named() {
        let env = LambdaEnv::from_pairs([
            ("PERSIST_QUEUE_URL", "https://sqs/q"),
            ("EMPTY", ""),
            ("MAX_MESSAGE_BYTES", "lots"),
            ("FORCE", "TRUE"),
            ("TTL_SECS", " 30 "),
        ]);
        assert_eq!(env.text(&EnvVar::required("PERSIST_QUEUE_URL", "a queue")).unwrap(), "https://sqs/q");
        let missing = env.text(&EnvVar::required("EMPTY", "set to nothing")).unwrap_err();
        assert_eq!(missing.to_string(), "environment variable EMPTY is not set");
        let malformed = env.usize(&any("MAX_MESSAGE_BYTES", 262_144)).unwrap_err();
        assert!(malformed.to_string().contains("MAX_MESSAGE_BYTES"), "{malformed}");
        assert_eq!(env.usize(&any("UNSET", 262_144)).unwrap(), 262_144);
        assert!(env.flag(&EnvVar::flag("FORCE", false, "a test flag")).unwrap());
        assert_eq!(env.secs(&any("TTL_SECS", 300)).unwrap(), Duration::from_secs(30));
        assert!(env.flag(&EnvVar::flag("MAX_MESSAGE_BYTES", false, "not a flag")).is_err());
        assert_eq!(
            env.names_read(),
            BTreeSet::from(["EMPTY", "FORCE", "MAX_MESSAGE_BYTES", "PERSIST_QUEUE_URL", "TTL_SECS", "UNSET"])
        );
    }

    #[test]
    fn numbers_outside_their_range_are_refused_naming_variable_value_and_limit() {
        let env = LambdaEnv::from_pairs([("LEVEL", "0"), ("ROWS", " 7 "), ("SECS", "901"), ("WORD", "x")]);
        let level = EnvVar::number("LEVEL", 1, Allowed::new(1..=22, "zstd levels"), "a level");
        let err = env.u64(&level).expect_err("0");
        assert_eq!(
            err,
            EnvError::OutOfRange { name: "LEVEL".into(), value: "0".into(), min: 1, max: 22, limit: "zstd levels" }
        );
        assert_eq!(err.to_string(), r#"environment variable LEVEL="0" is not within 1..=22 (zstd levels)"#);
        assert_eq!(err.name(), "LEVEL");
        let rows = |name| EnvVar::number(name, 3, Allowed::of_usize(1..=10, "rows"), "rows");
        assert_eq!(env.usize(&rows("ROWS")).expect("7"), 7);
        assert_eq!(env.usize(&rows("UNSET")).expect("default"), 3);
        let secs = EnvVar::number("SECS", 30, Allowed::new(1..=900, "Lambda's 900 s"), "seconds");
        let err = env.secs(&secs).expect_err("901");
        assert!(err.to_string().contains("SECS=\"901\"") && err.to_string().contains("1..=900"), "{err}");
        let word = EnvVar::number("WORD", 1, Allowed::new(1..=2, "x"), "a word");
        assert!(matches!(env.u64(&word), Err(EnvError::Malformed { .. })));
        assert_eq!(level.check("22"), Ok(()));
        assert_eq!(level.check("23").map_err(|e| e.name().to_string()), Err("LEVEL".into()));
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

    #[test]
    fn the_docs_cells_say_the_default_and_the_range() {
        assert_eq!(LAKE_BUCKET.default_text(), "required");
        assert_eq!((DLQ_URL.default_text(), DLQ_URL.allowed_text()), ("unset: redrive only".into(), String::new()));
        assert_eq!(MAX_RECEIVE_COUNT.default_text(), "5");
        assert_eq!(MAX_RECEIVE_COUNT.allowed_text(), "1–1000 (the SQS redrive policy's maxReceiveCount)");
        assert_eq!(
            (S3_FORCE_PATH_STYLE.default_text(), S3_FORCE_PATH_STYLE.allowed_text()),
            ("false".into(), "a boolean".into())
        );
        assert_eq!(any("MAX_PAGE_BYTES", 256 << 20).default_text(), "268435456 (256 MiB)");
        assert_eq!(any("MAX_PAGE_BYTES", 1000).default_text(), "1000");
        assert_eq!(any("ROWS", 1).allowed_text(), "at least 0 (any number)");
        assert_eq!(any("ZSTD_LEVEL", 1024).default_text(), "1024", "not a size");
        assert!(S3_FORCE_PATH_STYLE.check("maybe").is_err() && LAKE_BUCKET.check("anything").is_ok());
    }
}
