//! Markdown references of the contracts, rendered from their JSON Schemas.
//!
//! The book's reference chapters (`docs/contracts/<contract>.v1.md`, e.g. the
//! pipeline spec's) are this module's output over [`crate::schemas`], so
//! they say what the types say: `tributary schema --out docs/contracts`
//! writes them beside the schemas, and the test that finds a stale schema
//! finds a stale chapter too.
//!
//! The walk covers the JSON Schema that schemars emits for these types:
//! `properties` with `required` and `default`, `$ref` into `$defs`, `anyOf`
//! with `null` (an optional field), `oneOf` of tagged objects (a `kind`,
//! `style` or `by` constant) or of string constants, arrays, maps
//! (`additionalProperties`, `patternProperties`), `format`, `minimum`,
//! `pattern` and `examples`.

use std::collections::{BTreeSet, VecDeque};

use serde_json::{Map, Value};

/// Renders the Markdown reference of one contract from its JSON Schema.
///
/// `schema_file` is the schema's file name beside the page (linked from
/// it); `schema` is the schema itself, a root object with `title`,
/// `description`, `properties` and `$defs`. Each definition gets a section
/// (`## Name`, anchor `#name`), in the order a reader meets them from the
/// root, and every `$ref` is a link to its section.
pub fn markdown(schema_file: &str, schema: &Value) -> String {
    let defs = schema.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    let title = schema.get("title").and_then(Value::as_str).unwrap_or("Contract");
    let stem = schema_file.trim_end_matches(".schema.json");
    let mut out = String::new();
    out.push_str(&format!("# {title} (`{stem}`)\n\n"));
    out.push_str(
        "<!-- Generated from the contract's types by `tributary schema --out docs/contracts`; \
         do not edit: a test fails when this page and the types disagree. -->\n\n",
    );
    push_paragraphs(&mut out, schema, &defs);
    out.push_str(&format!("JSON Schema: [`{schema_file}`]({schema_file}).\n\n"));
    body(&mut out, schema, &defs, 2);
    for name in reachable(schema, &defs) {
        let Some(def) = defs.get(&name) else { continue };
        out.push_str(&format!("## {name}\n\n"));
        push_paragraphs(&mut out, def, &defs);
        body(&mut out, def, &defs, 3);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// The definitions `schema` reaches, breadth first in the order of their
/// first `$ref`.
fn reachable(schema: &Value, defs: &Map<String, Value>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    let mut queue = VecDeque::new();
    let mut refs = Vec::new();
    collect_refs(schema, &mut refs, true);
    queue.extend(refs);
    while let Some(name) = queue.pop_front() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(def) = defs.get(&name) {
            let mut more = Vec::new();
            collect_refs(def, &mut more, false);
            queue.extend(more);
            order.push(name);
        }
    }
    order
}

/// Every `$ref` target under `value`, in document order; the root's own
/// `$defs` are skipped (only what is reached counts).
fn collect_refs(value: &Value, out: &mut Vec<String>, root: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if root && key == "$defs" {
                    continue;
                }
                if key == "$ref" {
                    if let Some(name) = child.as_str().and_then(ref_name) {
                        out.push(name.to_owned());
                    }
                } else {
                    collect_refs(child, out, false);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out, false)),
        _ => {}
    }
}

fn ref_name(target: &str) -> Option<&str> {
    target.strip_prefix("#/$defs/")
}

/// A schema's own content: its fields, its variants or its value's type.
fn body(out: &mut String, schema: &Value, defs: &Map<String, Value>, level: usize) {
    if schema.get("properties").is_some() {
        fields(out, schema, defs, None);
    } else if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        if variants.iter().all(|v| v.get("const").is_some()) {
            out.push_str("One of these values:\n\n| value | meaning |\n|---|---|\n");
            for variant in variants {
                let value = variant.get("const").map(compact).unwrap_or_default();
                out.push_str(&format!("| `{value}` | {} |\n", cell(&description(variant, defs))));
            }
            out.push('\n');
        } else {
            let tag = variants.iter().find_map(tag_of).map(|(name, _)| name);
            match &tag {
                Some(tag) => out.push_str(&format!("One of these forms, told apart by `{tag}`:\n\n")),
                None => out.push_str("One of these forms:\n\n"),
            }
            let hashes = "#".repeat(level);
            for (index, variant) in variants.iter().enumerate() {
                match tag_of(variant) {
                    Some((name, value)) => out.push_str(&format!("{hashes} `{name}: {value}`\n\n")),
                    None => out.push_str(&format!("{hashes} Form {}\n\n", index + 1)),
                }
                push_paragraphs(out, variant, defs);
                if variant.get("properties").is_some() {
                    fields(out, variant, defs, tag_of(variant).map(|(name, _)| name));
                } else {
                    out.push_str(&format!("Type: {}.\n\n", type_of(variant, defs)));
                }
            }
        }
    } else {
        out.push_str(&format!("Type: {}.", type_of(schema, defs)));
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            out.push_str(&format!(" Pattern: `{pattern}`."));
        }
        if let Some(examples) = schema.get("examples").and_then(Value::as_array) {
            let list: Vec<String> = examples.iter().map(|e| format!("`{}`", plain(e))).collect();
            out.push_str(&format!(" Examples: {}.", list.join(", ")));
        }
        out.push_str("\n\n");
    }
}

/// The constant property that tells a variant apart (`kind: paged`).
fn tag_of(variant: &Value) -> Option<(String, String)> {
    variant.get("properties")?.as_object()?.iter().find_map(|(name, prop)| {
        let value = prop.get("const")?;
        Some((name.clone(), plain(value)))
    })
}

/// The field table of an object schema, `skip` (the variant's tag) left out.
fn fields(out: &mut String, schema: &Value, defs: &Map<String, Value>, skip: Option<String>) {
    let required: BTreeSet<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let props = schema.get("properties").and_then(Value::as_object);
    let rows: Vec<(&String, &Value)> =
        props.into_iter().flatten().filter(|(name, _)| Some(*name) != skip.as_ref()).collect();
    if rows.is_empty() {
        out.push_str("No other fields.\n\n");
        return;
    }
    out.push_str("| field | type | required | default | meaning |\n|---|---|---|---|---|\n");
    for (name, prop) in rows {
        let default = prop.get("default").map(|d| format!("`{}`", compact(d))).unwrap_or_default();
        let mut meaning = description(prop, defs);
        if let Some(pattern) = prop.get("pattern").and_then(Value::as_str) {
            meaning.push_str(&format!(" Pattern: `{pattern}`."));
        }
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} | {} |\n",
            cell(&type_of(prop, defs)),
            if required.contains(name.as_str()) { "yes" } else { "" },
            cell(&default),
            cell(&meaning)
        ));
    }
    out.push('\n');
    let others = match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => "Other fields are refused.",
        _ => "Other fields are ignored (a newer sender's additions).",
    };
    out.push_str(others);
    out.push_str("\n\n");
}

/// A schema's type in words, `$ref`s as links to their sections.
fn type_of(schema: &Value, defs: &Map<String, Value>) -> String {
    if let Some(name) = schema.get("$ref").and_then(Value::as_str).and_then(ref_name) {
        return if defs.contains_key(name) { format!("[{name}](#{})", anchor(name)) } else { name.to_owned() };
    }
    if let Some(value) = schema.get("const") {
        return format!("`{}`", compact(value));
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let list: Vec<String> = values.iter().map(|v| format!("`{}`", compact(v))).collect();
        return format!("one of {}", list.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let nullable = options.iter().any(is_null);
            let types: Vec<String> = options.iter().filter(|o| !is_null(o)).map(|o| type_of(o, defs)).collect();
            let mut text = types.join(" or ");
            if nullable {
                text.push_str(" or null");
            }
            return text;
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => return "any JSON value".into(),
    };
    let words: Vec<String> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "array" => match schema.get("items") {
                Some(items) => format!("array of {}", type_of(items, defs)),
                None => "array".into(),
            },
            "object" => object_type(schema, defs),
            "integer" | "number" | "string" => {
                let mut word = (*t).to_owned();
                let mut notes = Vec::new();
                if let Some(format) = schema.get("format").and_then(Value::as_str) {
                    notes.push(format.to_owned());
                }
                if let Some(min) = schema.get("minimum").filter(|m| m.as_f64() != Some(0.0)) {
                    notes.push(format!(">= {}", compact(min)));
                }
                if !notes.is_empty() {
                    word.push_str(&format!(" ({})", notes.join(", ")));
                }
                word
            }
            other => other.to_owned(),
        })
        .collect();
    let mut text = words.join(" or ");
    if types.contains(&"null") {
        text.push_str(if text.is_empty() { "null" } else { " or null" });
    }
    text
}

/// `map of string to X` for maps; `object` for others.
fn object_type(schema: &Value, defs: &Map<String, Value>) -> String {
    if let Some(patterns) = schema.get("patternProperties").and_then(Value::as_object)
        && let Some((pattern, value)) = patterns.iter().next()
    {
        return format!("map of keys matching `{pattern}` to {}", type_of(value, defs));
    }
    match schema.get("additionalProperties") {
        Some(value @ Value::Object(_)) => format!("map of string to {}", type_of(value, defs)),
        _ => "object".into(),
    }
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// A schema's description with rustdoc's `` [`Name`] `` links made
/// Markdown links to the page's sections (or plain code when the name has
/// no section here).
fn description(schema: &Value, defs: &Map<String, Value>) -> String {
    let text = schema.get("description").and_then(Value::as_str).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("`]") {
            Some(end) if !after[end + 2..].starts_with('(') && !after[..end].contains('`') => {
                let name = &after[..end];
                let short = name.rsplit("::").next().unwrap_or(name);
                if defs.contains_key(short) {
                    out.push_str(&format!("[`{short}`](#{})", anchor(short)));
                } else {
                    out.push_str(&format!("`{name}`"));
                }
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str("[`");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    strip_rust_paths(&out)
}

/// Rustdoc links to Rust paths, `[text](crate::x::Y)`, as their text: the
/// path means nothing on a web page.
fn strip_rust_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(middle) = rest.find("](") {
        let after = &rest[middle + 2..];
        let open = rest[..middle].rfind('[');
        match (open, after.find(')')) {
            (Some(open), Some(close)) if after[..close].contains("::") && !after[..close].contains("://") => {
                out.push_str(&rest[..open]);
                out.push_str(&rest[open + 1..middle]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push_str(&rest[..middle + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The description as written, then a blank line (doc comments are
/// Markdown already: paragraphs, code blocks, lists).
fn push_paragraphs(out: &mut String, schema: &Value, defs: &Map<String, Value>) {
    let text = escape_html(&description(schema, defs));
    let text = text.trim();
    if !text.is_empty() {
        out.push_str(text);
        out.push_str("\n\n");
    }
}

/// `<` outside code spans and fenced blocks as `&lt;`, so prose such as
/// `list<T>` reads as text, not as an HTML tag left open.
fn escape_html(text: &str) -> String {
    fn prose(out: &mut String, text: &str) {
        for (index, piece) in text.split('`').enumerate() {
            if index > 0 {
                out.push('`');
            }
            if index % 2 == 0 {
                out.push_str(&piece.replace('<', "&lt;"));
            } else {
                out.push_str(piece);
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut pending = String::new();
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            prose(&mut out, &std::mem::take(&mut pending));
            fenced = !fenced;
            out.push_str(line);
        } else if fenced {
            out.push_str(line);
        } else {
            pending.push_str(line);
        }
    }
    prose(&mut out, &pending);
    out
}

/// Text for one table cell: one line, paragraphs kept apart, `|` escaped.
fn cell(text: &str) -> String {
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    escape_html(&paragraphs.join("\n\n")).replace("\n\n", "<br><br>").replace('|', "\\|")
}

/// mdBook's (and GitHub's) anchor of a heading that is one plain word.
fn anchor(name: &str) -> String {
    name.to_lowercase()
}

/// JSON on one line.
fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A string without its quotes; other values as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => compact(other),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::markdown;

    #[test]
    fn fields_variants_and_values_link_their_definitions() {
        let schema = json!({
            "title": "Thing",
            "description": "A thing.\n\nSecond paragraph.",
            "type": "object",
            "properties": {
                "kind": {"description": "Which, see [`Kind`].", "$ref": "#/$defs/Kind"},
                "size": {"description": "Bytes | items.", "type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []}
            },
            "required": ["kind"],
            "additionalProperties": false,
            "$defs": {
                "Kind": {"oneOf": [
                    {"description": "A.", "type": "object", "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind"]},
                    {"description": "B.", "type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}
                ]},
                "Unused": {"type": "string"}
            }
        });
        let page = markdown("thing.v1.schema.json", &schema);
        assert!(page.starts_with("# Thing (`thing.v1`)\n"), "{page}");
        assert!(page.contains("A thing.\n\nSecond paragraph.\n\n"), "{page}");
        assert!(page.contains("| `kind` | [Kind](#kind) | yes |  | Which, see [`Kind`](#kind). |"), "{page}");
        assert!(page.contains("| `size` | integer (uint32) or null |  |  | Bytes \\| items. |"), "{page}");
        assert!(page.contains("| `tags` | array of string |  | `[]` |  |"), "{page}");
        assert!(page.contains("Other fields are refused."), "{page}");
        assert!(
            page.contains("## Kind\n\nOne of these forms, told apart by `kind`:\n\n### `kind: a`\n\nA.\n\n"),
            "{page}"
        );
        assert!(page.contains("### `kind: b`\n\nB.\n\nNo other fields."), "{page}");
        assert!(!page.contains("Unused"), "only reachable definitions: {page}");
    }

    #[test]
    fn angle_brackets_in_prose_are_text_and_code_is_left_alone() {
        let schema = json!({
            "title": "T",
            "description": "A list<T>, or `Vec<u8>`, see [the list](crate::x::LIST).\n\n```yaml\nx: <y>\n```",
            "type": "object",
            "properties": {"f": {"description": "Maps<K, V> and `Map<K>`.", "type": "string"}}
        });
        let page = markdown("t.v1.schema.json", &schema);
        assert!(page.contains("A list&lt;T>, or `Vec<u8>`, see the list.\n\n```yaml\nx: <y>\n```\n"), "{page}");
        assert!(page.contains("| Maps&lt;K, V> and `Map<K>`. |"), "{page}");
        assert!(page.contains("Other fields are ignored"), "{page}");
    }
}
