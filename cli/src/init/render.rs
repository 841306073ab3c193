//! The spec init writes, as commented YAML: each field as the spec's JSON
//! has it (so the text reads back to the same spec, which [`render`]'s
//! caller checks), with a comment saying where init got it.

use std::collections::BTreeMap;

use serde_json::Value;

use contracts::spec::PipelineSpec;

/// What the YAML says besides the spec.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    /// Lines of the comment at the top.
    pub header: Vec<String>,
    /// Comments of fields, by path (`strategy.page_size`, `request.url`).
    pub fields: BTreeMap<String, String>,
    /// An incremental cursor field to suggest, commented out.
    pub incremental: Option<String>,
}

/// The order fields are written in, at the top, within each section and
/// within flow mappings (others after): the order the spec's types declare
/// them in, as its documentation writes them.
const ORDER: &[&str] = &[
    "version",
    "pipeline",
    "description",
    "strategy",
    "request",
    "target",
    "kind",
    "style",
    "page_size",
    "total_pointer",
    "total_header",
    "params",
    "next",
    "max_pages",
    "method",
    "url",
    "query",
    "records_pointer",
    "auth",
    "allow",
    "pointer",
    "param",
    "has_more",
    "offset_param",
    "limit_param",
    "limit",
    "page_param",
    "size_param",
    "size",
    "first_page",
    "secret_id",
    "header",
    "query_param",
    "scheme",
    "token_url",
    "client_id",
    "scope",
    "hosts",
    "loopback",
    "private",
];

/// `spec` as commented YAML.
pub fn render(spec: &PipelineSpec, notes: &Notes) -> String {
    let value = serde_json::to_value(spec).unwrap_or(Value::Null);
    let mut out = String::new();
    for line in &notes.header {
        out.push_str(&format!("# {line}\n").replace("# \n", "#\n"));
    }
    for (key, value) in ordered(&value) {
        match value {
            Value::Object(_) if key != "schedule" => {
                out.push_str(&format!("{key}:\n"));
                let section: Vec<(String, String)> = ordered(value)
                    .into_iter()
                    .filter(|(field, value)| !skipped(&key, field, value))
                    .map(|(field, value)| (format!("  {field}: {}", flow(value)), format!("{key}.{field}")))
                    .collect();
                let width = section.iter().map(|(line, _)| line.len()).max().unwrap_or(0);
                for (line, path) in section {
                    match notes.fields.get(&path) {
                        Some(note) => out.push_str(&format!("{line:width$}   # {note}\n")),
                        None => out.push_str(&format!("{line}\n")),
                    }
                }
            }
            other => out.push_str(&format!("{key}: {}\n", flow(other))),
        }
    }
    if let Some(field) = &notes.incremental {
        out.push_str(&incremental(field));
    }
    out
}

/// Defaults written out by serde that the spec reads the same without.
fn skipped(section: &str, field: &str, value: &Value) -> bool {
    matches!((section, field, value), ("request", "method", Value::String(m)) if m == "GET")
        || matches!((section, field, value), ("strategy", "total_pointer", Value::String(p)) if p.is_empty())
}

/// The incremental block, commented out: the vendor's filter parameter
/// cannot be seen in its answers.
fn incremental(field: &str) -> String {
    format!(
        "# Incremental loading: {field} looks like an update time. To fetch only what changed since the last\n\
         # completed run, name the vendor's \"changed since\" query parameter and uncomment (docs/request.md,\n\
         # \"Incremental loading\"):\n\
         # incremental:\n\
         #   cursor_field: {field}\n\
         #   param: updated_since             # the vendor's name for it: not seen in its answers\n\
         #   start: \"1970-01-01T00:00:00Z\"    # what the first run asks for\n"
    )
}

/// An object's members, the known fields in [`ORDER`] first.
fn ordered(value: &Value) -> Vec<(String, &Value)> {
    let Value::Object(map) = value else { return Vec::new() };
    let mut members: Vec<(String, &Value)> = map.iter().map(|(k, v)| (k.clone(), v)).collect();
    members.sort_by_key(|(key, _)| ORDER.iter().position(|known| known == key).unwrap_or(ORDER.len()));
    members
}

/// `value` as YAML flow text: mappings `{a: 1}`, sequences `[1]`, strings
/// plain when YAML reads them back as the same string, else quoted as JSON
/// strings are (which YAML's double-quoted strings read the same).
pub fn flow(value: &Value) -> String {
    match value {
        Value::Object(_) => {
            let members: Vec<String> =
                ordered(value).into_iter().map(|(k, v)| format!("{}: {}", text(&k), flow(v))).collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(flow).collect::<Vec<_>>().join(", ")),
        Value::String(s) => text(s),
        other => other.to_string(),
    }
}

/// A string, plain when that is safe: letters, digits, `_ - . /`, not
/// starting with `-` or `.`, and not a word YAML reads as another type.
fn text(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        && !s.starts_with(['-', '.'])
        && !s.chars().next().is_some_and(|c| c.is_ascii_digit())
        && !["true", "false", "null", "yes", "no", "on", "off", "y", "n"].contains(&s.to_ascii_lowercase().as_str());
    if plain { s.to_string() } else { Value::String(s.to_string()).to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_reads_back_as_the_same_spec() {
        let specs = [
            "version: 1\npipeline: items\nstrategy: {kind: paged, page_size: 10, total_header: X-Total-Count, params: {style: page_number, page_param: page, size_param: null}}\nrequest: {url: 'http://127.0.0.1:9/items?status=a b', records_pointer: /data/x~1y, allow: {loopback: true}, auth: {kind: bearer, secret_id: vendor-token, scheme: Token}}\ntarget: {dataset: items}\n",
            "version: 1\npipeline: '1-yes'\nstrategy: {kind: cursor, next: {kind: body_token, pointer: /meta/next, param: 'on', has_more: /more}}\nrequest: {url: 'https://v.example/e'}\ntarget: {dataset: 'null'}\n",
            "version: 1\npipeline: p\nstrategy: {kind: simple}\nrequest: {url: 'https://v.example/e'}\ntarget: {dataset: p}\n",
        ];
        for text in specs {
            let spec = PipelineSpec::from_yaml(text).expect("valid");
            let mut notes = Notes { header: vec!["a header".into(), String::new()], ..Notes::default() };
            notes.fields.insert("strategy.kind".into(), "a note: with # and 'quotes'".into());
            notes.incremental = Some("/updated_at".into());
            let rendered = render(&spec, &notes);
            let back = PipelineSpec::from_yaml(&rendered).unwrap_or_else(|err| panic!("{err}\n{rendered}"));
            assert_eq!(back, spec, "{rendered}");
            assert!(rendered.starts_with("# a header\n#\n"), "{rendered}");
            assert!(rendered.contains("# incremental:\n"), "{rendered}");
        }
    }
}
