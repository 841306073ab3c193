//! The contract version carried by every message as `"version": 1`.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Version 1 of tributary's message contracts.
///
/// Serialises as the integer `1`. Deserialising any other value fails with
/// an error that names the version found, so a producer that moved on to a
/// newer contract gets a clear refusal instead of a half-understood message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct V1;

impl V1 {
    /// The number this type stands for.
    pub const NUMBER: u64 = 1;
}

impl Serialize for V1 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(Self::NUMBER)
    }
}

impl<'de> Deserialize<'de> for V1 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let found = serde_json::Value::deserialize(deserializer)?;
        match found.as_u64() {
            Some(Self::NUMBER) => Ok(V1),
            // `"1"` (a quoted number) is the right version as the wrong type.
            _ if found.as_str().is_some_and(|text| text.trim() == Self::NUMBER.to_string()) => {
                Err(serde::de::Error::custom(format!(
                    "contract version {found} is text: write the number {} without quotes",
                    Self::NUMBER
                )))
            }
            _ => Err(serde::de::Error::custom(format!(
                "unsupported contract version {found}: this build reads version {}",
                Self::NUMBER
            ))),
        }
    }
}

impl JsonSchema for V1 {
    fn schema_name() -> Cow<'static, str> {
        "ContractVersion".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Contract version. This build reads and writes version 1 only.",
            "type": "integer",
            "const": 1
        })
    }
}
