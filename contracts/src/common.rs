//! Types shared by several contracts: run ids, pages, destinations, targets.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Identifies one run of a pipeline, e.g. `20261129T060000Z`.
///
/// It becomes part of object keys, so it is restricted to 1–64 characters of
/// `A-Z a-z 0-9 _ . -`, and `.`/`..` alone are refused. Runs fired by
/// EventBridge Scheduler derive it from the scheduled time, so a redelivered
/// schedule event maps to the same run and overwrites instead of duplicating.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "String")]
pub struct RunId(String);

impl RunId {
    /// Longest run id, in characters (all of them ASCII).
    pub const MAX_LEN: usize = 64;

    /// Validates a run id.
    ///
    /// # Errors
    /// [`RunIdError`] with the value and why: it is empty, `.`/`..`, holds a
    /// character outside `A-Za-z0-9_.-`, or is longer than 64 characters.
    pub fn new(value: impl Into<String>) -> Result<Self, RunIdError> {
        let value = value.into();
        let why = if value.is_empty() {
            Some(RunIdProblem::Empty)
        } else if value == "." || value == ".." {
            Some(RunIdProblem::DotSegment)
        } else if let Some(c) = value.chars().find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))) {
            Some(RunIdProblem::Character(c))
        } else if value.len() > RunId::MAX_LEN {
            Some(RunIdProblem::TooLong { length: value.len() })
        } else {
            None
        };
        match why {
            Some(why) => Err(RunIdError { value, why }),
            None => Ok(Self(value)),
        }
    }

    /// The run id derived from a scheduled time: `YYYYMMDDTHHMMSSZ` (UTC)
    /// for a whole second (every schedule's time, and `--scheduled-at`),
    /// `YYYYMMDDTHHMMSS.mmmZ` when the time has milliseconds (an ad-hoc
    /// `tributary run`, so two in one second are two runs). Finer digits
    /// are dropped.
    pub fn from_time(time: chrono::DateTime<chrono::Utc>) -> Self {
        let millis = time.timestamp_subsec_millis();
        if millis == 0 {
            Self(time.format("%Y%m%dT%H%M%SZ").to_string())
        } else {
            Self(format!("{}.{millis:03}Z", time.format("%Y%m%dT%H%M%S")))
        }
    }

    /// `time` as `--scheduled-at` takes it to name the run
    /// [`RunId::from_time`] gives it: RFC 3339 UTC with milliseconds when
    /// the time has them (an ad-hoc run's), whole seconds otherwise. A
    /// whole-second form of an ad-hoc run's time names another run (a
    /// trial followed such a hint with `--replace` and appended the run's
    /// rows a second time). Every command the CLI suggests writes its time
    /// with this.
    pub fn scheduled_at_text(time: chrono::DateTime<chrono::Utc>) -> String {
        let seconds = time.format("%Y-%m-%dT%H:%M:%S");
        match time.timestamp_subsec_millis() {
            0 => format!("{seconds}Z"),
            millis => format!("{seconds}.{millis:03}Z"),
        }
    }

    /// The scheduled time a [`RunId::from_time`] id stands for, read back
    /// (`None` for an id of another form, e.g. a queued trigger's own).
    pub fn scheduled_time(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let text = self.0.strip_suffix('Z')?;
        chrono::NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%S%.f").ok().map(|t| t.and_utc())
    }

    /// Whether this run came after `other`: both ids read as their
    /// scheduled times ([`RunId::scheduled_time`]; an ad-hoc run's has
    /// milliseconds, so text order would put `…T060000.500Z` before
    /// `…T060000Z`). `false` when either id is of another form (a queued
    /// trigger's own, a stream replay's): such runs are not ordered.
    pub fn is_after(&self, other: &RunId) -> bool {
        match (self.scheduled_time(), other.scheduled_time()) {
            (Some(this), Some(that)) => this > that,
            _ => false,
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = RunIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A text that cannot be a [`RunId`]: the value, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("run_id {value:?} {why}; it must be 1-64 characters of A-Z a-z 0-9 _ . - (it becomes part of object keys)")]
pub struct RunIdError {
    /// The text refused.
    pub value: String,
    /// What is wrong with it.
    pub why: RunIdProblem,
}

/// Why a text is not a [`RunId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunIdProblem {
    /// The text is empty.
    #[error("is empty")]
    Empty,
    /// The text is `.` or `..`, a relative path segment in a key.
    #[error("is a relative path segment")]
    DotSegment,
    /// The first character outside `A-Za-z0-9_.-`.
    #[error("holds {0:?}")]
    Character(char),
    /// More than [`RunId::MAX_LEN`] characters.
    #[error("has {length} characters")]
    TooLong {
        /// Its length.
        length: usize,
    },
}

/// Where a page sits in its run: page `index` (0-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PageRef {
    /// 0-based page index; part of every output key.
    pub index: u32,
    /// Pages planned for the run (1 for a single call; 0 when unknown up
    /// front, as for the rows of an Athena-driven run).
    pub count: u32,
}

impl PageRef {
    /// The only page of a single-call run.
    pub const SINGLE: PageRef = PageRef { index: 0, count: 1 };
}

/// Where a reply goes.
///
/// `queue` is an SQS queue URL on AWS (a queue name in the local runtime);
/// `topic` is an SNS topic ARN on AWS (a topic name locally).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Destination {
    /// Send to an SQS queue.
    Queue {
        /// Queue URL (AWS) or name (local).
        queue: String,
    },
    /// Publish to an SNS topic.
    Topic {
        /// Topic ARN (AWS) or name (local).
        topic: String,
    },
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Queue { queue } => write!(f, "queue {queue}"),
            Destination::Topic { topic } => write!(f, "topic {topic}"),
        }
    }
}

/// HTTP method of a vendor call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// `GET` (the default).
    #[default]
    Get,
    /// `POST`, usually with a JSON body.
    Post,
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
        })
    }
}

/// What replaces a credential's value in a URL shown in logs, errors and
/// alerts ([`redacted_url`]).
pub const REDACTED_VALUE: &str = "***";

/// Whether a query parameter's value is a credential by its name, as
/// vendors and signing schemes name them: the names of
/// [`crate::spec::is_credential_name`] (`*token*`, `*secret*`,
/// `*password*`, `api_key`, …) and any containing `auth`, `signature`,
/// `credential`, `session` or `passw`, or ending in `key` (`key`,
/// `apiKey`, `access_key`), or `sig`, `pwd`, `pass`, `jwt` (case
/// ignored). Generous on purpose: a masked harmless value costs nothing.
pub fn is_credential_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    crate::spec::is_credential_name(&name)
        || ["auth", "signature", "credential", "session", "passw"].iter().any(|part| name.contains(part))
        || name.ends_with("key")
        || ["sig", "pwd", "pass", "jwt"].contains(&name.as_str())
}

/// The URL as logs, errors and alerts show it: without user info, its
/// query kept (the vendor's page parameters say which page failed:
/// `?page=7&per_page=100`) with the value of each credential-named
/// parameter ([`is_credential_param`]) replaced by [`REDACTED_VALUE`].
/// A value that is a credential under another name is not known here:
/// Request scrubs the URLs it shows of the secrets it holds as well.
pub fn redacted_url(url: &url::Url) -> String {
    let mut url = url.clone();
    let _ = url.set_password(None);
    let _ = url.set_username("");
    if url.query_pairs().any(|(name, _)| is_credential_param(&name)) {
        let pairs: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        url.query_pairs_mut().clear().extend_pairs(pairs.iter().map(|(name, value)| {
            (name.as_str(), if is_credential_param(name) { REDACTED_VALUE } else { value.as_str() })
        }));
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a suggested `--scheduled-at` says names the same run: an
    /// ad-hoc run's milliseconds are kept (a trial's hint dropped them and
    /// its `--replace` appended a second run).
    #[test]
    fn the_scheduled_at_text_names_the_same_run() {
        let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&chrono::Utc);
        for (time, text) in [
            ("2026-12-07T14:35:25.168Z", "2026-12-07T14:35:25.168Z"),
            ("2026-12-07T14:35:25.008Z", "2026-12-07T14:35:25.008Z"),
            ("2026-12-07T14:35:25Z", "2026-12-07T14:35:25Z"),
            ("2026-12-07T14:35:25.000Z", "2026-12-07T14:35:25Z"),
        ] {
            assert_eq!(RunId::scheduled_at_text(at(time)), text);
            assert_eq!(RunId::from_time(at(&RunId::scheduled_at_text(at(time)))), RunId::from_time(at(time)));
        }
    }

    #[test]
    fn runs_are_ordered_by_their_scheduled_times_and_ids_of_another_form_not_at_all() {
        let id = |text: &str| RunId::new(text).expect("a run id");
        assert!(id("20261202T060000Z").is_after(&id("20261201T060000Z")));
        assert!(!id("20261201T060000Z").is_after(&id("20261202T060000Z")));
        assert!(!id("20261201T060000Z").is_after(&id("20261201T060000Z")), "not after itself");
        // Milliseconds: later than the whole second, though its text sorts before.
        assert!(id("20261201T060000.500Z").is_after(&id("20261201T060000Z")));
        for other in ["replay-20261201T060000Z", "trigger-7f3a", "x"] {
            assert!(!id(other).is_after(&id("20261201T060000Z")), "{other}");
            assert!(!id("20261201T060000Z").is_after(&id(other)), "{other}");
        }
    }

    #[test]
    fn run_ids_are_refused_naming_value_and_why() {
        assert_eq!(RunId::new("20261129T060000Z").map(|id| id.to_string()), Ok("20261129T060000Z".to_string()));
        let why = |value: &str| RunId::new(value).expect_err("refused").why;
        assert_eq!(why(""), RunIdProblem::Empty);
        assert_eq!(why(".."), RunIdProblem::DotSegment);
        assert_eq!(why("a/b"), RunIdProblem::Character('/'));
        assert_eq!(why("é"), RunIdProblem::Character('é'));
        assert_eq!(why(&"x".repeat(65)), RunIdProblem::TooLong { length: 65 });
        RunId::new("x".repeat(RunId::MAX_LEN)).expect("64 characters");
        let err = RunId::new("../etc").expect_err("a slash").to_string();
        assert!(err.contains(r#""../etc""#) && err.contains("'/'") && err.contains("1-64 characters"), "{err}");
    }

    #[test]
    fn a_time_based_run_id_reads_back_as_its_scheduled_time() {
        for text in ["2026-11-29T06:00:00Z", "2026-12-05T16:37:12.345Z"] {
            let time = chrono::DateTime::parse_from_rfc3339(text).expect("time").to_utc();
            assert_eq!(RunId::from_time(time).scheduled_time(), Some(time), "{text}");
        }
        assert_eq!(RunId::new("backfill-7").expect("id").scheduled_time(), None);
        assert_eq!(RunId::new("20261399T060000Z").expect("id").scheduled_time(), None);
    }

    #[test]
    fn redacted_url_keeps_the_page_parameters_and_masks_credentials() {
        let url =
            url::Url::parse("https://user:pw@api.example.com/v1/x?api_key=SECRET&page=7&per_page=100").expect("url");
        let shown = redacted_url(&url);
        assert_eq!(shown, "https://api.example.com/v1/x?api_key=***&page=7&per_page=100");
        assert!(!shown.contains("SECRET") && !shown.contains("pw"));
        let plain = url::Url::parse("http://h/x?page=7&per_page=100").expect("url");
        assert_eq!(redacted_url(&plain), "http://h/x?page=7&per_page=100", "untouched, as sent");
        for name in
            ["key", "apiKey", "access_key", "token", "access_token", "client_secret", "password", "passwd", "sig"]
                .into_iter()
                .chain(["signature", "X-Amz-Signature", "X-Amz-Credential", "auth", "oauth_nonce", "session_id", "jwt"])
        {
            let url = url::Url::parse(&format!("http://h/x?{name}=S3CRET&page=2")).expect("url");
            let shown = redacted_url(&url);
            assert!(!shown.contains("S3CRET") && shown.ends_with("=***&page=2"), "{name}: {shown}");
        }
        for name in ["page", "per_page", "offset", "limit", "cursor", "updated_since", "q"] {
            assert!(!is_credential_param(name), "{name}");
        }
    }
}
