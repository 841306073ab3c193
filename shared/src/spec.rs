//! The pipeline spec: what a data team declares and a schedule fires.
//!
//! Written in YAML (or JSON) and checked strictly: unknown fields are
//! errors, every failure names the field path and the value.
//!
//! ```yaml
//! version: 1
//! pipeline: customers
//! strategy:
//!   kind: paged            # simple | paged
//!   page_size: 50
//!   total_pointer: /total
//!   params: { style: offset_limit, offset_param: offset, limit_param: limit }
//! request:
//!   url: http://127.0.0.1:8080/customers
//!   records_pointer: /items
//! target:
//!   dataset: customers
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::contracts::{HttpMethod, PersistTarget, V1};

/// Default cap on pages one count-first run may plan.
pub const DEFAULT_MAX_PAGES: u32 = 10_000;
/// Largest page size accepted (records per call).
pub const MAX_PAGE_SIZE: u32 = 100_000;

/// A declared pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// Spec version, always `1`.
    pub version: V1,
    /// Pipeline name: 1–64 characters of `a-z 0-9 _ -`, starting with a
    /// letter or digit. Part of run ids, logs and keys.
    pub pipeline: String,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How the calls are planned.
    pub strategy: StrategySpec,
    /// The vendor call every planned request starts from.
    pub request: RequestTemplate,
    /// Where the records go.
    pub target: PersistTarget,
    /// When the data must be in: a freshness check alerts when no run of the
    /// day has completed by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<FreshnessSpec>,
}

/// The pipeline's freshness promise.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreshnessSpec {
    /// Time of day (UTC, `HH:MM`) by which a run of the day must have
    /// completed, e.g. `07:30`.
    pub deadline_utc: String,
}

impl FreshnessSpec {
    /// The deadline as a time of day.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming `freshness.deadline_utc` and the value.
    pub fn deadline(&self) -> Result<chrono::NaiveTime, SpecError> {
        chrono::NaiveTime::parse_from_str(&self.deadline_utc, "%H:%M").map_err(|_| {
            invalid(
                "freshness.deadline_utc",
                &format!("{:?}", self.deadline_utc),
                "must be a UTC time of day as HH:MM, e.g. 07:30",
            )
        })
    }
}

/// The call strategy, tagged by `kind`.
///
/// Deserialised by hand (not serde's internally tagged enum, which buffers
/// the variant and loses the failing field's name): the error names both
/// `kind` values and the variant's field, e.g. `field page_size: invalid
/// type: string "fifty", expected u32`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StrategySpec {
    /// One call, one page.
    Simple {},
    /// Count first: a probe reads the total, then one call per page.
    Paged(PagedSpec),
    /// Query the lake; each result row becomes one call, its values bound
    /// into the request template's `{column}` placeholders.
    Athena(AthenaSpec),
}

/// Settings of the Athena-driven (`athena`) strategy.
///
/// ```yaml
/// strategy:
///   kind: athena
///   query: SELECT id FROM customers WHERE dt = ?
///   parameters: ["{run_date}"]
///   database: tributary_lake
/// request:
///   url: https://api.vendor.example/customers/{id}/transactions
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AthenaSpec {
    /// SQL with `?` placeholders for `parameters`. Values are bound by the
    /// engine (Athena `ExecutionParameters`), never spliced into the text.
    pub query: String,
    /// Values for the placeholders, as strings. `{run_date}` (YYYY-MM-DD)
    /// and `{run_id}` inside a value are replaced by the run's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<String>,
    /// Glue database of the tables (ignored by the local engine, where the
    /// lake is the one database).
    pub database: String,
    /// Athena workgroup; the function's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup: Option<String>,
    /// `s3://` location for Athena's result files; the workgroup's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_location: Option<String>,
}

impl<'de> Deserialize<'de> for StrategySpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = serde_json::Value::deserialize(deserializer)?;
        let Some(map) = value.as_object_mut() else {
            return Err(D::Error::custom("expected a mapping with `kind: simple`, `kind: paged` or `kind: athena`"));
        };
        let kind = match map.remove("kind") {
            Some(serde_json::Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::custom(format!("field `kind`: expected `simple` or `paged`, found {other}")));
            }
            None => return Err(D::Error::custom("missing field `kind` (`simple` or `paged`)")),
        };
        let variant_error = |err: serde_path_to_error::Error<serde_json::Error>| {
            D::Error::custom(format!("field `{}`: {}", err.path(), err.inner()))
        };
        match kind.as_str() {
            "simple" => match map.keys().next() {
                None => Ok(StrategySpec::Simple {}),
                Some(field) => {
                    Err(D::Error::custom(format!("unknown field `{field}`: strategy `simple` takes no settings")))
                }
            },
            "paged" => serde_path_to_error::deserialize(value).map(StrategySpec::Paged).map_err(variant_error),
            "athena" => serde_path_to_error::deserialize(value).map(StrategySpec::Athena).map_err(variant_error),
            other => Err(D::Error::custom(format!(
                "unknown strategy kind `{other}`, expected `simple`, `paged` or `athena`"
            ))),
        }
    }
}

/// Settings of the count-first (`paged`) strategy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagedSpec {
    /// Records per page, 1..=100000.
    pub page_size: u32,
    /// RFC 6901 JSON pointer to the total record count in the first page's
    /// response, e.g. `/total` or `/meta/count`.
    pub total_pointer: String,
    /// How a page is addressed in the query string.
    #[serde(default)]
    pub params: PageParams,
    /// Refuse runs that would need more pages than this (default 10000).
    #[serde(default = "default_max_pages")]
    pub max_pages: u32,
}

fn default_max_pages() -> u32 {
    DEFAULT_MAX_PAGES
}

/// Query parameters that select a page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "style", rename_all = "snake_case", deny_unknown_fields)]
pub enum PageParams {
    /// `?offset=<index*page_size>&limit=<page_size>`.
    OffsetLimit {
        /// Name of the offset parameter (default `offset`).
        #[serde(default = "default_offset_param")]
        offset_param: String,
        /// Name of the limit parameter (default `limit`).
        #[serde(default = "default_limit_param")]
        limit_param: String,
    },
    /// `?page=<first_page+index>&per_page=<page_size>`.
    PageNumber {
        /// Name of the page-number parameter (default `page`).
        #[serde(default = "default_page_param")]
        page_param: String,
        /// Name of the page-size parameter (default `per_page`); `null` when
        /// the API has a fixed page size.
        #[serde(default = "default_size_param")]
        size_param: Option<String>,
        /// Number of the first page (default 1).
        #[serde(default = "default_first_page")]
        first_page: u32,
    },
}

impl Default for PageParams {
    fn default() -> Self {
        PageParams::OffsetLimit { offset_param: default_offset_param(), limit_param: default_limit_param() }
    }
}

fn default_offset_param() -> String {
    "offset".into()
}
fn default_limit_param() -> String {
    "limit".into()
}
fn default_page_param() -> String {
    "page".into()
}
fn default_size_param() -> Option<String> {
    Some("per_page".into())
}
fn default_first_page() -> u32 {
    1
}

/// The vendor call every planned request starts from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestTemplate {
    /// `GET` (default) or `POST`.
    #[serde(default)]
    pub method: HttpMethod,
    /// Absolute `http` or `https` URL.
    pub url: url::Url,
    /// Fixed query parameters; the strategy adds its page parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// Fixed headers (no credentials: those are referenced by secret id).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// JSON body for `POST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<serde_json::Value>,
    /// RFC 6901 JSON pointer to the records array; absent means the
    /// response's root is the array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_pointer: Option<String>,
}

/// A spec that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text is not valid YAML/JSON or does not match the spec's shape.
    #[error("invalid pipeline spec: at `{path}`: {message}")]
    Parse {
        /// Field path, e.g. `strategy.page_size` (`.` for the document).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A field has the right type but a value the spec does not allow.
    #[error("invalid pipeline spec: `{field}` = {value}: {reason}")]
    Invalid {
        /// Field path, e.g. `strategy.page_size`.
        field: String,
        /// The value found, as JSON text.
        value: String,
        /// Why it is refused.
        reason: String,
    },
}

impl PipelineSpec {
    /// Parses and validates a spec from YAML (JSON is valid YAML).
    ///
    /// # Errors
    /// [`SpecError::Parse`] naming the field path for syntax and shape errors
    /// (unknown field, unknown strategy `kind`, malformed URL, wrong type);
    /// [`SpecError::Invalid`] from [`PipelineSpec::validate`].
    pub fn from_yaml(text: &str) -> Result<Self, SpecError> {
        let deserializer = serde_norway::Deserializer::from_str(text);
        let spec: PipelineSpec = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            // serde_norway prefixes its message with the path; say it once.
            let message = err.inner().to_string();
            let message = message.strip_prefix(&format!("{path}: ")).map(str::to_string).unwrap_or(message);
            SpecError::Parse { path, message }
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Parses and validates a spec from a JSON value (an event's `detail`).
    ///
    /// # Errors
    /// As [`PipelineSpec::from_yaml`].
    pub fn from_value(value: serde_json::Value) -> Result<Self, SpecError> {
        let spec: PipelineSpec = serde_path_to_error::deserialize(value)
            .map_err(|err| SpecError::Parse { path: err.path().to_string(), message: err.inner().to_string() })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the values serde cannot: names, URL scheme, pointers, sizes.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming the first offending field and its value.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_name("pipeline", &self.pipeline)?;
        self.target.validate("target")?;
        if let Some(freshness) = &self.freshness {
            freshness.deadline()?;
        }
        let url = &self.request.url;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "request.url",
                &crate::adapters::http::redacted_url(url),
                "credentials in the URL would travel in every message; reference a secret instead",
            ));
        }
        for (name, value) in &self.request.headers {
            check_header(name, value)?;
        }
        let scheme = self.request.url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(invalid("request.url", self.request.url.as_str(), "only http and https URLs are supported"));
        }
        if self.request.url.host_str().is_none() {
            return Err(invalid("request.url", self.request.url.as_str(), "the URL has no host"));
        }
        if let Some(pointer) = &self.request.records_pointer {
            check_pointer("request.records_pointer", pointer)?;
        }
        if let StrategySpec::Athena(athena) = &self.strategy {
            if athena.query.trim().is_empty() {
                return Err(invalid("strategy.query", "\"\"", "must be a SQL query"));
            }
            let placeholders = crate::strategy::athena::count_placeholders(&athena.query);
            if placeholders != athena.parameters.len() {
                return Err(invalid(
                    "strategy.parameters",
                    &format!("{:?}", athena.parameters),
                    &format!(
                        "the query has {placeholders} `?` placeholders but {} parameters are given",
                        athena.parameters.len()
                    ),
                ));
            }
            if athena.database.trim().is_empty() {
                return Err(invalid("strategy.database", "\"\"", "must name the Glue database"));
            }
        }
        if let StrategySpec::Paged(paged) = &self.strategy {
            if paged.page_size == 0 || paged.page_size > MAX_PAGE_SIZE {
                return Err(invalid(
                    "strategy.page_size",
                    &paged.page_size.to_string(),
                    &format!("must be between 1 and {MAX_PAGE_SIZE}"),
                ));
            }
            if paged.max_pages == 0 {
                return Err(invalid("strategy.max_pages", "0", "must be at least 1"));
            }
            check_pointer("strategy.total_pointer", &paged.total_pointer)?;
            if paged.total_pointer.is_empty() {
                return Err(invalid("strategy.total_pointer", "\"\"", "must point inside the response, e.g. /total"));
            }
            let names: Vec<(&str, &str)> = match &paged.params {
                PageParams::OffsetLimit { offset_param, limit_param } => {
                    vec![("strategy.params.offset_param", offset_param), ("strategy.params.limit_param", limit_param)]
                }
                PageParams::PageNumber { page_param, size_param, .. } => {
                    let mut names = vec![("strategy.params.page_param", page_param.as_str())];
                    if let Some(size) = size_param {
                        names.push(("strategy.params.size_param", size));
                    }
                    names
                }
            };
            if let [(_, first), (field, second), ..] = names.as_slice()
                && first == second
            {
                return Err(invalid(field, &format!("{second:?}"), "must differ from the other page parameter"));
            }
            for (field, name) in names {
                if name.trim().is_empty() {
                    return Err(invalid(field, &format!("{name:?}"), "must not be empty"));
                }
                if self.request.query.contains_key(name) {
                    return Err(invalid(
                        field,
                        &format!("{name:?}"),
                        "is also a fixed parameter in request.query; the strategy sets it per page",
                    ));
                }
            }
        }
        Ok(())
    }
}

fn invalid(field: &str, value: &str, reason: &str) -> SpecError {
    SpecError::Invalid { field: field.into(), value: value.into(), reason: reason.into() }
}

/// Checks a pipeline or dataset name: 1–64 of `a-z 0-9 _ -`, first a letter
/// or digit (it becomes an S3 key segment and a Glue table name).
///
/// # Errors
/// [`SpecError::Invalid`] naming `field` and the value.
pub fn check_name(field: &str, value: &str) -> Result<(), SpecError> {
    let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok = value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if value.len() > 64 || !first_ok || !rest_ok {
        return Err(invalid(
            field,
            &format!("{value:?}"),
            "must be 1-64 characters of a-z 0-9 _ -, starting with a letter or digit",
        ));
    }
    Ok(())
}

/// Folders of the lake that are not datasets.
pub const RESERVED_DATASETS: &[&str] = &["raw", "quarantine"];

/// Checks a dataset name: [`check_name`], and not one of
/// [`RESERVED_DATASETS`] (their folders hold raw pages and quarantined
/// records of every dataset).
///
/// # Errors
/// [`SpecError::Invalid`] naming `field` and the value.
pub fn check_dataset(field: &str, value: &str) -> Result<(), SpecError> {
    check_name(field, value)?;
    if RESERVED_DATASETS.contains(&value) {
        return Err(invalid(field, &format!("{value:?}"), "is a reserved folder of the lake (raw, quarantine)"));
    }
    Ok(())
}

/// Header names whose values are credentials: they must be referenced as
/// secrets, never written in a spec (they would travel in every message,
/// DLQ and alert).
pub const CREDENTIAL_HEADERS: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"];

/// Whether a header or parameter name looks like it carries a credential
/// (the names of [`CREDENTIAL_HEADERS`], or any containing `token`,
/// `secret`, `password` or `apikey`/`api_key`/`api-key`).
pub fn is_credential_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_HEADERS.contains(&name.as_str())
        || ["token", "secret", "password", "apikey", "api_key", "api-key"].iter().any(|part| name.contains(part))
}

fn check_header(name: &str, value: &str) -> Result<(), SpecError> {
    let field = format!("request.headers.{name}");
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(invalid(&field, &format!("{name:?}"), "is not a valid HTTP header name"));
    }
    if is_credential_name(name) {
        return Err(invalid(
            &field,
            "<redacted>",
            "looks like a credential; credentials are referenced by secret id, never written in a spec",
        ));
    }
    if reqwest::header::HeaderValue::from_str(value).is_err() {
        return Err(invalid(&field, &format!("{value:?}"), "is not a valid HTTP header value (no control characters)"));
    }
    Ok(())
}

fn check_pointer(field: &str, pointer: &str) -> Result<(), SpecError> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(invalid(
            field,
            &format!("{pointer:?}"),
            "must be an RFC 6901 JSON pointer: empty or starting with '/' (e.g. /items)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGED: &str = r#"
version: 1
pipeline: customers
strategy:
  kind: paged
  page_size: 50
  total_pointer: /total
request:
  url: http://127.0.0.1:8080/customers
  records_pointer: /items
target:
  dataset: customers
"#;

    #[test]
    fn paged_spec_parses_with_defaults() {
        let spec = PipelineSpec::from_yaml(PAGED).expect("valid spec");
        let StrategySpec::Paged(paged) = &spec.strategy else { panic!("expected paged, got {:?}", spec.strategy) };
        assert_eq!(paged.page_size, 50);
        assert_eq!(paged.max_pages, DEFAULT_MAX_PAGES);
        assert_eq!(
            paged.params,
            PageParams::OffsetLimit { offset_param: "offset".into(), limit_param: "limit".into() }
        );
        assert_eq!(spec.request.method, HttpMethod::Get);
    }

    fn parse_err(text: &str) -> String {
        PipelineSpec::from_yaml(text).expect_err("spec must be refused").to_string()
    }

    #[test]
    fn unknown_strategy_kind_names_the_field() {
        let err = parse_err(&PAGED.replace("kind: paged", "kind: scatter"));
        assert!(err.contains("`strategy`") && err.contains("unknown strategy kind `scatter`"), "{err}");
    }

    #[test]
    fn missing_url_names_the_field() {
        let err = parse_err(&PAGED.replace("  url: http://127.0.0.1:8080/customers\n", ""));
        assert!(err.contains("`request`") && err.contains("url"), "{err}");
    }

    #[test]
    fn malformed_url_names_the_field_and_value() {
        let err = parse_err(&PAGED.replace("http://127.0.0.1:8080/customers", "not a url"));
        assert!(err.contains("request.url"), "{err}");
        let err = parse_err(&PAGED.replace("http://127.0.0.1:8080/customers", "ftp://example.com/x"));
        assert!(err.contains("request.url") && err.contains("ftp://example.com/x"), "{err}");
    }

    #[test]
    fn malformed_values_name_the_field() {
        let err = parse_err(&PAGED.replace("page_size: 50", "page_size: fifty"));
        assert!(err.contains("`strategy`") && err.contains("field `page_size`") && err.contains("fifty"), "{err}");
        let err = parse_err(&PAGED.replace("page_size: 50", "page_size: 0"));
        assert!(err.contains("strategy.page_size") && err.contains("= 0"), "{err}");
        let err = parse_err(&PAGED.replace("total_pointer: /total", "total_pointer: total"));
        assert!(err.contains("strategy.total_pointer") && err.contains("\"total\""), "{err}");
        let err = parse_err(&PAGED.replace("dataset: customers", "dataset: ../etc"));
        assert!(err.contains("target.dataset"), "{err}");
        let err = parse_err(&PAGED.replace("pipeline: customers", "pipeline: customers\ncolour: red"));
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn credentials_reserved_names_and_bad_headers_are_refused() {
        let with =
            |extra: &str| PAGED.replace("  records_pointer: /items", &format!("  records_pointer: /items\n{extra}"));
        let err = parse_err(&with("  headers: { Authorization: 'Bearer SECRET123' }"));
        assert!(err.contains("request.headers.Authorization") && !err.contains("SECRET123"), "{err}");
        let err = parse_err(&with("  headers: { x-good: \"a\\nb\" }"));
        assert!(err.contains("request.headers.x-good") && err.contains("not a valid HTTP header value"), "{err}");
        let err = parse_err(&PAGED.replace("http://127.0.0.1:8080/customers", "http://user:pw@127.0.0.1:8080/c"));
        assert!(err.contains("request.url") && !err.contains("pw@"), "{err}");
        let err = parse_err(&PAGED.replace("dataset: customers", "dataset: raw"));
        assert!(err.contains("target.dataset") && err.contains("reserved"), "{err}");
        let err = parse_err(&PAGED.replace("dataset: customers", "dataset: customers\n  format: csv"));
        assert!(err.contains("format"), "{err}");
        let err = parse_err(&PAGED.replace(
            "  total_pointer: /total",
            "  total_pointer: /total\n  params: { style: offset_limit, offset_param: x, limit_param: x }",
        ));
        assert!(err.contains("strategy.params.limit_param") && err.contains("must differ"), "{err}");
    }

    #[test]
    fn freshness_deadline_must_be_a_time_of_day() {
        let ok = PipelineSpec::from_yaml(&format!("{PAGED}freshness: {{ deadline_utc: '07:30' }}\n")).expect("valid");
        assert_eq!(ok.freshness.expect("set").deadline().expect("time").to_string(), "07:30:00");
        let err = parse_err(&format!("{PAGED}freshness: {{ deadline_utc: 'half past seven' }}\n"));
        assert!(err.contains("freshness.deadline_utc") && err.contains("half past seven"), "{err}");
    }

    #[test]
    fn unknown_version_is_refused() {
        let err = parse_err(&PAGED.replace("version: 1", "version: 2"));
        assert!(err.contains("version") && err.contains("unsupported contract version 2"), "{err}");
    }

    #[test]
    fn page_parameter_clashing_with_fixed_query_is_refused() {
        let text = PAGED.replace("  records_pointer: /items", "  records_pointer: /items\n  query: { limit: '10' }");
        let err = parse_err(&text);
        assert!(err.contains("strategy.params.limit_param"), "{err}");
    }

    #[test]
    fn simple_spec_and_page_number_params_parse() {
        let text = r#"{"version":1,"pipeline":"fx","strategy":{"kind":"simple"},
            "request":{"url":"https://api.example.com/rates"},"target":{"dataset":"fx_rates"}}"#;
        let spec = PipelineSpec::from_yaml(text).expect("valid simple spec");
        assert_eq!(spec.strategy, StrategySpec::Simple {});
        let text =
            PAGED.replace("  total_pointer: /total", "  total_pointer: /total\n  params: { style: page_number }");
        let spec = PipelineSpec::from_yaml(&text).expect("valid");
        let StrategySpec::Paged(paged) = spec.strategy else { panic!("paged") };
        assert_eq!(
            paged.params,
            PageParams::PageNumber { page_param: "page".into(), size_param: Some("per_page".into()), first_page: 1 }
        );
    }
}
