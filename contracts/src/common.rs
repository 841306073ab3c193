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
    /// Validates a run id.
    ///
    /// # Errors
    /// A message naming the offending value when it is empty, longer than 64
    /// characters, `.`/`..`, or holds a character outside `A-Za-z0-9_.-`.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        let ok_chars = value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if value.is_empty() || value.len() > 64 || !ok_chars || value == "." || value == ".." {
            return Err(format!(
                "run_id {value:?} must be 1-64 characters of A-Z a-z 0-9 _ . - (it becomes part of object keys)"
            ));
        }
        Ok(Self(value))
    }

    /// The run id derived from a scheduled time: `YYYYMMDDTHHMMSSZ` (UTC).
    pub fn from_time(time: chrono::DateTime<chrono::Utc>) -> Self {
        Self(time.format("%Y%m%dT%H%M%SZ").to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = String;
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

/// The URL without query string or user info, safe to log.
pub fn redacted_url(url: &url::Url) -> String {
    let mut url = url.clone();
    let had_query = url.query().is_some();
    url.set_query(None);
    let _ = url.set_password(None);
    let _ = url.set_username("");
    if had_query { format!("{url}?…") } else { url.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_url_drops_query_and_credentials() {
        let url = url::Url::parse("https://user:pw@api.example.com/v1/x?api_key=SECRET&a=1").expect("url");
        let shown = redacted_url(&url);
        assert_eq!(shown, "https://api.example.com/v1/x?…");
        assert!(!shown.contains("SECRET") && !shown.contains("pw"));
    }
}
