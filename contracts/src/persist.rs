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
    /// When the records were fetched from the vendor (Request's clock,
    /// UTC): the rows' `_tributary_loaded_at`. Absent: Persist sets it on
    /// receipt, in the raw copy too, so a replay writes the same rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The records of a page.
///
/// (De)serialised by hand through a plain struct rather than serde's
/// internally tagged enum, which buffers its content and so could not keep
/// the records' text ([`RawRecords`]). The JSON shape is the tagged one.
#[derive(Clone, Debug, PartialEq, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Payload {
    /// Records carried in the message (JSON objects; anything else is
    /// quarantined with a reason).
    Inline {
        /// The records: a JSON array, kept as the text it arrived as.
        records: RawRecords,
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

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PayloadKind {
    Inline,
    Object,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PayloadWire {
    kind: PayloadKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    records: Option<RawRecords>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    format: Option<PayloadFormat>,
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            Payload::Inline { records } => {
                PayloadWire { kind: PayloadKind::Inline, records: Some(records.clone()), key: None, format: None }
            }
            Payload::Object { key, format } => PayloadWire {
                kind: PayloadKind::Object,
                records: None,
                key: Some(key.clone()),
                format: (!format.is_default()).then(|| format.clone()),
            },
        };
        wire.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let wire = PayloadWire::deserialize(deserializer)?;
        match (wire.kind, wire.records, wire.key) {
            (PayloadKind::Inline, Some(records), None) if wire.format.is_none() => Ok(Payload::Inline { records }),
            (PayloadKind::Inline, None, _) => Err(D::Error::missing_field("records")),
            (PayloadKind::Inline, ..) => Err(D::Error::custom("an inline payload takes only `records`")),
            (PayloadKind::Object, None, Some(key)) => {
                Ok(Payload::Object { key, format: wire.format.unwrap_or_default() })
            }
            (PayloadKind::Object, _, None) => Err(D::Error::missing_field("key")),
            (PayloadKind::Object, ..) => {
                Err(D::Error::custom("an object payload takes `key` and `format`, not `records`"))
            }
        }
    }
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

/// A JSON array of records kept as its text: numbers keep their digits
/// (an integer beyond `i64`, `12.50`), repeated keys stay, so Persist sees
/// exactly what the vendor sent. Its JSON Schema is an array.
#[derive(Clone)]
pub struct RawRecords(Box<serde_json::value::RawValue>);

impl RawRecords {
    /// Records from JSON values (their text is serde_json's).
    ///
    /// # Errors
    /// `serde_json::Error` if a value cannot be written as JSON.
    pub fn from_values(records: &[serde_json::Value]) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(records).map(RawRecords)
    }

    /// Records from the text of a JSON array, kept as it is.
    ///
    /// # Errors
    /// `serde_json::Error` if the text is not JSON, or not an array.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        if !text.trim_start().starts_with('[') {
            return Err(serde::de::Error::custom("records must be a JSON array"));
        }
        serde_json::value::RawValue::from_string(text).map(RawRecords)
    }

    /// The array's text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The array's text, owned (no copy: a claim check uploads it as it is).
    pub fn into_string(self) -> String {
        let text: Box<str> = self.0.into();
        text.into_string()
    }

    /// The records as JSON values (numbers beyond `f64` lose digits here).
    ///
    /// # Errors
    /// `serde_json::Error` if the text is not an array.
    pub fn to_values(&self) -> Result<Vec<serde_json::Value>, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }
}

impl PartialEq for RawRecords {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl std::fmt::Debug for RawRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.as_str();
        let cut = text.floor_char_boundary(text.len().min(120));
        write!(f, "RawRecords({}{})", &text[..cut], if cut < text.len() { "…" } else { "" })
    }
}

impl Serialize for RawRecords {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawRecords {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        if !raw.get().trim_start().starts_with('[') {
            return Err(serde::de::Error::custom("records must be a JSON array"));
        }
        Ok(RawRecords(raw))
    }
}

impl JsonSchema for RawRecords {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Records".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "array",
            "description": "Records: JSON objects (anything else is quarantined with a reason)."
        })
    }
}
