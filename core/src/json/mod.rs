//! JSON helpers: describing values in error messages ([`kind_of`]), a
//! tokenizer that keeps numbers' text ([`tape`]), shared by Request (which
//! forwards a response's records as the vendor wrote them) and Persist, and
//! the escaping of bytes that are not UTF-8 inside strings ([`utf8`]).

pub mod tape;
#[cfg(test)]
mod tape_props;
pub mod utf8;

use serde_json::Value;

/// The kind of a JSON value with its article, for messages such as
/// "leads to a string, not an array": `null`, `a boolean`, `a number`,
/// `a string`, `an array`, `an object`.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
