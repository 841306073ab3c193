//! The exactness check: every Parquet file a case wrote is read back by
//! `bench/check.py` (pyarrow) and compared with the page it was given —
//! rows, top-level fields kept as columns, and a sample of records value
//! for value — so the table says which tool's output holds the page.
//!
//! The comparison lives in Python, not in Rust with the workspace's
//! `parquet` crate, because Persist writes its files with that crate: a
//! check that reads them with it could share a bug with the writer, while
//! pyarrow is an independent reader (the one the read-back tests use), and
//! Python's `json` keeps integers beyond `i64` as they were sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// What `check.py` found in one Parquet file (its JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Exactness {
    /// Rows in the file (none when it could not be read).
    #[serde(default)]
    pub rows: Option<u64>,
    /// Records in the page.
    pub records: u64,
    /// Records compared value for value.
    #[serde(default)]
    pub sampled: u64,
    /// Top-level fields with values but no column.
    #[serde(default)]
    pub dropped: Vec<String>,
    /// Fields without a column whose every value is `null`, `{}` or `[]`.
    #[serde(default)]
    pub no_column: Vec<String>,
    /// Fields with a sampled value that reads back otherwise, each with
    /// how (`(text)`: as JSON text; `({}/[] as null)`).
    #[serde(default)]
    pub changed: Vec<String>,
    /// Fields whose values sat in Persist's JSON text columns (`__json`
    /// variants) and parsed back exactly.
    #[serde(default)]
    pub json_text: Vec<String>,
    /// One example per changed field: the record, what was sent, what was read.
    #[serde(default)]
    pub examples: BTreeMap<String, String>,
    /// First line of the error when the file could not be read or checked.
    #[serde(default)]
    pub error: Option<String>,
}

impl Exactness {
    /// Every record written, every field with a value kept as a column,
    /// every sampled value read back as sent.
    pub fn is_exact(&self) -> bool {
        self.error.is_none() && self.rows == Some(self.records) && self.dropped.is_empty() && self.changed.is_empty()
    }

    /// The table's cell: `exact`, or what was lost, e.g. `dropped fields
    /// [churn_score]; changed values in [tags (text), external_ref]`.
    pub fn summary(&self) -> String {
        if let Some(error) = &self.error {
            return format!("unreadable by pyarrow: {error}");
        }
        let list = |names: &[String]| names.join(", ");
        let mut parts = Vec::new();
        if self.rows != Some(self.records) {
            parts.push(format!("rows {} of {}", self.rows.unwrap_or(0), self.records));
        }
        if !self.dropped.is_empty() {
            parts.push(format!("dropped fields [{}]", list(&self.dropped)));
        }
        if !self.changed.is_empty() {
            parts.push(format!("changed values in [{}]", list(&self.changed)));
        }
        if parts.is_empty() {
            parts.push("exact".into());
            if !self.json_text.is_empty() {
                parts.push(format!("as JSON text in __json: [{}]", list(&self.json_text)));
            }
        }
        if !self.no_column.is_empty() {
            parts.push(format!("no column for null/{{}}/[]-only [{}]", list(&self.no_column)));
        }
        parts.join("; ")
    }
}

/// The checker: which Python runs which script.
#[derive(Clone, Debug)]
pub struct Checker {
    /// Python with pyarrow.
    pub python: PathBuf,
    /// `bench/check.py`.
    pub script: PathBuf,
}

impl Checker {
    /// Checks each of `outputs` against the NDJSON `page` holding
    /// `records` records, in one process (the page is read once); one
    /// verdict per output, in order. When the checker itself fails, each
    /// verdict carries its error.
    pub fn check(&self, page: &Path, records: u64, outputs: &[PathBuf]) -> Vec<Exactness> {
        if outputs.is_empty() {
            return Vec::new();
        }
        match self.run(page, outputs) {
            Ok(verdicts) if verdicts.len() == outputs.len() => verdicts,
            Ok(verdicts) => failed(records, outputs, &format!("check.py gave {} verdicts", verdicts.len())),
            Err(err) => failed(records, outputs, &format!("check.py: {err:#}")),
        }
    }

    fn run(&self, page: &Path, outputs: &[PathBuf]) -> anyhow::Result<Vec<Exactness>> {
        let mut command = Command::new(&self.python);
        command.arg(&self.script).arg(page).args(outputs);
        let finished = command.output().with_context(|| format!("starting {command:?}"))?;
        if !finished.status.success() {
            let stderr = String::from_utf8_lossy(&finished.stderr);
            anyhow::bail!("exited with {}: {}", finished.status, stderr.trim().lines().last().unwrap_or(""));
        }
        String::from_utf8_lossy(&finished.stdout)
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| serde_json::from_str(line).with_context(|| format!("reading its line {line}")))
            .collect()
    }
}

fn failed(records: u64, outputs: &[PathBuf], error: &str) -> Vec<Exactness> {
    outputs.iter().map(|_| Exactness { records, error: Some(error.to_string()), ..Exactness::default() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(line: &str) -> Exactness {
        serde_json::from_str(line).expect("a check.py line")
    }

    #[test]
    fn a_verdict_says_exact_or_what_was_lost() {
        let exact = verdict(
            r#"{"path": "a", "records": 10, "rows": 10, "sampled": 10, "dropped": [], "no_column": ["legacy_code"],
                "changed": [], "json_text": ["coupon"], "examples": {}, "error": null}"#,
        );
        assert!(exact.is_exact());
        assert_eq!(
            exact.summary(),
            "exact; as JSON text in __json: [coupon]; no column for null/{}/[]-only [legacy_code]"
        );
        let lossy = verdict(
            r#"{"records": 10, "rows": 9, "dropped": ["churn_score"], "changed": ["tags (text)", "external_ref"]}"#,
        );
        assert!(!lossy.is_exact());
        assert_eq!(
            lossy.summary(),
            "rows 9 of 10; dropped fields [churn_score]; changed values in [tags (text), external_ref]"
        );
        let unreadable = verdict(r#"{"records": 10, "error": "ArrowInvalid: bad footer"}"#);
        assert!(!unreadable.is_exact());
        assert_eq!(unreadable.summary(), "unreadable by pyarrow: ArrowInvalid: bad footer");
    }
}
