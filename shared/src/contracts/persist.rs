//! `PersistMessage`: one page of records for the Persist function.

use chrono::NaiveDate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PageRef, PersistTarget, RunId, V1};

/// Asks Persist to write one page of records to the lake as Parquet.
///
/// Sent by Request, and by other teams who use Persist as a service. The
/// output key derives from (`target.dataset`, `run_date`, `run_id`,
/// `page.index`) only, so a redelivered message overwrites the same objects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PersistMessage {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline name.
    pub pipeline: String,
    /// Run the page belongs to.
    pub run_id: RunId,
    /// Date of the run (UTC): the `dt=` partition.
    pub run_date: NaiveDate,
    /// Which page of the run this is.
    pub page: PageRef,
    /// Dataset to write to.
    pub target: PersistTarget,
    /// The records, inline or behind an object key (claim check).
    pub payload: Payload,
}

/// The records of a page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payload {
    /// Records carried in the message (JSON objects; anything else is
    /// quarantined with a reason).
    Inline {
        /// The records.
        records: Vec<serde_json::Value>,
    },
    /// Claim check: a JSON array of records stored in the lake bucket at
    /// `key`, used when the records would exceed the queue's maximum message
    /// size (SQS: 256 KiB by default, up to 1 MiB).
    Object {
        /// Object key in the lake bucket.
        key: String,
        /// How the object's records are laid out (default: detected).
        #[serde(default, skip_serializing_if = "PayloadFormat::is_default")]
        format: PayloadFormat,
    },
}

/// Layout of a claim-check object. A gzip stream (magic bytes `1f 8b`) is
/// decompressed and a UTF-8 byte-order mark skipped, whatever the layout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PayloadFormat {
    /// `json` (one JSON document), `ndjson` (one record per line) or
    /// `auto` (the default: a document starting with `[`, or with `{` when
    /// `records_pointer` is set, is `json`; otherwise `ndjson`).
    #[serde(default)]
    pub layout: Layout,
    /// RFC 6901 JSON pointer to the records array inside a `json` document,
    /// e.g. `/data/items`; absent: the document is the array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_pointer: Option<String>,
}

impl PayloadFormat {
    /// Whether this is the default (detected layout, root array).
    pub fn is_default(&self) -> bool {
        *self == PayloadFormat::default()
    }
}

/// How records are laid out in a payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Detected from the first byte (see [`PayloadFormat::layout`]).
    #[default]
    Auto,
    /// One JSON document: the array, or an object holding it at the pointer.
    Json,
    /// Newline-delimited JSON: one record per line, blank lines skipped.
    Ndjson,
}
