//! The Request Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there, so a bad value
//! stops the cold start naming the variable instead of failing every
//! message. [`LambdaConfig::ENV`] is the table of those variables; `main.rs`
//! only wires what this returns.

use std::num::NonZeroU32;
use std::ops::RangeInclusive;
use std::time::Duration;

use tributary_core::env::{
    self, Allowed, EnvError, EnvVar, LAMBDA_SECS_RANGE, LambdaEnv, SQS_MESSAGE_BYTES_RANGE, dead_letter_target,
};
use tributary_core::metrics::MetricsTarget;
use tributary_core::tenant::{self, Tenants};

use tributary_core::ports::NetworkAccess;

use crate::http::DEFAULT_CONNECT_TIMEOUT;
use crate::secret_ref::SecretPrefix;
use crate::trust::{self, Trust};
use crate::{DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_RESPONSE_BYTES, RequestConfig};

/// Calls per message, first included (`HTTP_MAX_ATTEMPTS`): at least one;
/// at most 10, as the backoff waits of more attempts would not fit one
/// invocation (Request's time-out is 120 s).
pub const MAX_ATTEMPTS_RANGE: RangeInclusive<usize> = 1..=10;

/// Seconds of `Retry-After` waited inside an invocation
/// (`MAX_RETRY_AFTER_SECS`): 0 (never wait, leave it to SQS's visibility
/// timeout) up to Lambda's 900 s maximum.
pub const MAX_RETRY_AFTER_SECS_RANGE: RangeInclusive<u64> = 0..=900;

/// Bytes of the largest response body read (`MAX_RESPONSE_BYTES`): at least
/// 1, at most 10 GiB, Lambda's 10,240 MB memory maximum (AWS Lambda quotas),
/// as a body is held in memory.
pub const MAX_RESPONSE_BYTES_RANGE: RangeInclusive<u64> = 1..=10_240 * 1024 * 1024;

/// Request instances that may call at once (`REQUEST_MAX_CONCURRENCY`):
/// 2..=1000 is the range of an SQS event source mapping's
/// `ScalingConfig.MaximumConcurrency`, which the stack sets from the same
/// parameter; 1 is one instance (reserved concurrency 1, `cargo lambda
/// watch`). Unset: 1.
pub const MAX_INSTANCES_RANGE: RangeInclusive<u64> = 1..=1000;

const LAKE_BUCKET: EnvVar =
    EnvVar { doc: "the lake bucket: claim-check payloads and the ledger of `cursor` runs", ..env::LAKE_BUCKET };
const MAX_MESSAGE_BYTES: EnvVar = EnvVar::number(
    "MAX_MESSAGE_BYTES",
    DEFAULT_MAX_MESSAGE_BYTES as u64,
    Allowed::of_usize(SQS_MESSAGE_BYTES_RANGE, "SQS MaximumMessageSize"),
    "largest message sent to `reply_to`: the persist queue's `MaximumMessageSize`; a larger page goes by claim check",
);
const HTTP_MAX_ATTEMPTS: EnvVar = EnvVar::number(
    "HTTP_MAX_ATTEMPTS",
    3,
    Allowed::of_usize(MAX_ATTEMPTS_RANGE, "at least one call; more waits would not fit an invocation"),
    "calls per message, the first included",
);
const HTTP_TIMEOUT_SECS: EnvVar = EnvVar::number(
    "HTTP_TIMEOUT_SECS",
    30,
    Allowed::new(LAMBDA_SECS_RANGE, "Lambda's 900 s maximum"),
    "seconds one vendor call may take",
);
const HTTP_CONNECT_TIMEOUT_SECS: EnvVar = EnvVar::number(
    "HTTP_CONNECT_TIMEOUT_SECS",
    DEFAULT_CONNECT_TIMEOUT.as_secs(),
    Allowed::new(LAMBDA_SECS_RANGE, "Lambda's 900 s maximum"),
    "seconds to establish a vendor connection",
);
const MAX_RETRY_AFTER_SECS: EnvVar = EnvVar::number(
    "MAX_RETRY_AFTER_SECS",
    30,
    Allowed::new(MAX_RETRY_AFTER_SECS_RANGE, "Lambda's 900 s maximum"),
    "longest `Retry-After` waited inside an invocation; after a longer one the page is sent again, delayed by it",
);
const MAX_RESPONSE_BYTES: EnvVar = EnvVar::number(
    "MAX_RESPONSE_BYTES",
    DEFAULT_MAX_RESPONSE_BYTES,
    Allowed::new(MAX_RESPONSE_BYTES_RANGE, "Lambda's 10,240 MB memory maximum"),
    "largest response body read (it is held in memory)",
);
const RUN_EVENTS_TOPIC_ARN: EnvVar = EnvVar {
    doc: "the run-events topic: a `cursor` run completed by Request's page count",
    ..env::RUN_EVENTS_TOPIC_ARN
};
const REPLY_DESTINATIONS: EnvVar = EnvVar::required(
    "REPLY_DESTINATIONS",
    "the queue URLs and topic ARNs answers may go to, comma-separated (docs/request.md, Trust model)",
);
const SECRET_GRANTS: EnvVar = EnvVar::optional(
    "SECRET_GRANTS",
    "no secrets",
    "JSON: the secrets messages may name, and for each the whole call it may ride on (hosts, schemes, ports, methods, path prefixes, API key placement, OAuth token URL, pipelines)",
);
const SECRET_PREFIX: EnvVar = EnvVar::optional(
    "SECRET_PREFIX",
    "no prefix: secret ids are read as written",
    "the prefix of the secrets Request reads (`<stack>/`): a `secret_id` (and a `SECRET_GRANTS` key) that starts neither with it nor with `arn:` is read as `<SECRET_PREFIX><secret_id>`, so one spec works in every stack; an ARN must name a secret under it",
);
const ALLOW_LOOPBACK: EnvVar =
    EnvVar::flag("ALLOW_LOOPBACK", false, "whether a message's `allow` may open loopback addresses");
const ALLOW_PRIVATE_NETWORKS: EnvVar =
    EnvVar::flag("ALLOW_PRIVATE_NETWORKS", false, "whether a message's `allow` may open private networks");
const REQUEST_QUEUE_URL: EnvVar = EnvVar::optional(
    "REQUEST_QUEUE_URL",
    "the queue's visibility timeout, each pause a failed receive",
    "its own queue: after a `Retry-After` longer than `MAX_RETRY_AFTER_SECS` the page is sent there again, delayed by it (not a failure)",
);
const REQUEST_MAX_CONCURRENCY: EnvVar = EnvVar::number(
    "REQUEST_MAX_CONCURRENCY",
    1,
    Allowed::new(
        MAX_INSTANCES_RANGE,
        "an SQS event source mapping's MaximumConcurrency (2-1000), or 1 for one instance",
    ),
    "instances calling at once, the request mapping's `MaximumConcurrency`: each keeps to 1/N of every pipeline's rate budget",
);

impl LambdaConfig {
    /// Request's environment: every variable [`LambdaConfig::from_env`]
    /// reads, and [`env::S3_FORCE_PATH_STYLE`] (read by the S3 client), as
    /// `infra/template.yaml` sets them (a test checks both).
    pub const ENV: &'static [EnvVar] = &[
        LAKE_BUCKET,
        MAX_MESSAGE_BYTES,
        HTTP_TIMEOUT_SECS,
        HTTP_CONNECT_TIMEOUT_SECS,
        HTTP_MAX_ATTEMPTS,
        MAX_RETRY_AFTER_SECS,
        MAX_RESPONSE_BYTES,
        env::S3_FORCE_PATH_STYLE,
        env::DLQ_URL,
        env::MAX_RECEIVE_COUNT,
        RUN_EVENTS_TOPIC_ARN,
        REPLY_DESTINATIONS,
        SECRET_GRANTS,
        SECRET_PREFIX,
        ALLOW_LOOPBACK,
        ALLOW_PRIVATE_NETWORKS,
        REQUEST_QUEUE_URL,
        REQUEST_MAX_CONCURRENCY,
        tenant::TENANTS,
        tenant::STACK_SENDERS,
    ];
}

/// Everything the Request binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings from [`LambdaConfig::ENV`]: message and
    /// response sizes, attempts and time-outs, the run-events topic, the
    /// dead-letter target ([`dead_letter_target`]), the trust settings (see
    /// [`crate::trust`]), its own queue for long `Retry-After` pauses, the
    /// instances that share each pipeline's rate budget; metrics to stdout
    /// (CloudWatch EMF); the rest as [`RequestConfig::default`].
    pub handler: RequestConfig,
    /// The lake bucket: claim-check payloads and the ledger of `cursor` runs
    /// (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// Time to establish a vendor connection (`HTTP_CONNECT_TIMEOUT_SECS`,
    /// 1..=900 s, default [`DEFAULT_CONNECT_TIMEOUT`], 10 s).
    pub connect_timeout: Duration,
}

impl LambdaConfig {
    /// Reads and checks Request's variables ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: `LAKE_BUCKET` or
    /// `REPLY_DESTINATIONS` unset, `SECRET_GRANTS` not a JSON object of
    /// secret id to `{"hosts": [..], "pipelines": [..]}`, a boolean or a
    /// number that is not one, or a number outside its entry's range.
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let defaults = RequestConfig::default();
        let lake_bucket = env.text(&LAKE_BUCKET)?;
        let handler = RequestConfig {
            max_message_bytes: env.usize(&MAX_MESSAGE_BYTES)?,
            max_attempts: env.usize(&HTTP_MAX_ATTEMPTS)?,
            timeout: env.secs(&HTTP_TIMEOUT_SECS)?,
            max_retry_after: env.secs(&MAX_RETRY_AFTER_SECS)?,
            max_response_bytes: env.u64(&MAX_RESPONSE_BYTES)?,
            run_events_topic: env.optional(&RUN_EVENTS_TOPIC_ARN)?,
            dead_letter: dead_letter_target(env)?,
            metrics: MetricsTarget::Stdout,
            trust: trust_from_env(env)?,
            tenants: Tenants::from_env(env)?,
            own_queue: env.optional(&REQUEST_QUEUE_URL)?,
            max_instances: max_instances(env)?,
            ..defaults
        };
        grants_name_pipelines(&handler)?;
        Ok(Self { handler, lake_bucket, connect_timeout: env.secs(&HTTP_CONNECT_TIMEOUT_SECS)? })
    }
}

/// With tenants listed, a grant must name its `pipelines`: one without them
/// would let every tenant use the secret.
fn grants_name_pipelines(handler: &RequestConfig) -> Result<(), EnvError> {
    let (Tenants::Listed { .. }, Some(secrets)) = (&handler.tenants, &handler.trust.secrets) else { return Ok(()) };
    match secrets.iter().find(|(_, grants)| grants.iter().any(|grant| grant.pipelines.is_empty())) {
        Some((id, _)) => Err(EnvError::Malformed {
            name: SECRET_GRANTS.name.into(),
            value: format!("{id}: a grant without \"pipelines\""),
            expected: "a grant naming its `pipelines` while TENANTS or STACK_SENDERS is set (without them every tenant could use the secret)",
        }),
        None => Ok(()),
    }
}

/// `REQUEST_MAX_CONCURRENCY`: how many instances share each pipeline's
/// rate budget.
fn max_instances(env: &LambdaEnv) -> Result<NonZeroU32, EnvError> {
    let n = env.u64(&REQUEST_MAX_CONCURRENCY)?;
    // In range, so never 0 and within u32.
    Ok(u32::try_from(n).ok().and_then(NonZeroU32::new).unwrap_or(NonZeroU32::MIN))
}

/// The trust settings: answers only to `REPLY_DESTINATIONS` (required: the
/// stack's queues and topics), secrets only as `SECRET_GRANTS` says
/// (default none), loopback and private addresses only when the stack opens
/// them.
fn trust_from_env(env: &LambdaEnv) -> Result<Trust, EnvError> {
    let destinations =
        env.text(&REPLY_DESTINATIONS)?.split(',').map(str::trim).filter(|d| !d.is_empty()).map(String::from).collect();
    let prefix = env.optional(&SECRET_PREFIX)?.unwrap_or_default();
    let secret_prefix = SecretPrefix::new(&prefix).map_err(|expected| EnvError::Malformed {
        name: SECRET_PREFIX.name.into(),
        value: prefix.clone(),
        expected,
    })?;
    let grants = match env.optional(&SECRET_GRANTS)? {
        None => Default::default(),
        Some(text) => trust::parse_grants(&text).map_err(|_| EnvError::Malformed {
            name: SECRET_GRANTS.name.into(),
            value: text.clone(),
            expected: "a JSON object of secret id to a grant {\"hosts\": [..], \"pipelines\": [..], \"schemes\", \"ports\", \"methods\", \"path_prefixes\", \"api_key\", \"token_url\"} or an array of grants (docs/request.md, Trust model)",
        })?,
    };
    let mut trust = Trust {
        secrets: Some(Default::default()),
        networks: NetworkAccess { loopback: env.flag(&ALLOW_LOOPBACK)?, private: env.flag(&ALLOW_PRIVATE_NETWORKS)? },
        destinations: Some(destinations),
        secret_prefix,
    };
    for (id, grants) in grants {
        if let Err(err) = trust.secret_prefix.resolve(&id) {
            return Err(EnvError::Malformed {
                name: SECRET_GRANTS.name.into(),
                value: format!("{id:?}: {err}"),
                expected: "keys that are secret references as specs write them: `<name>`, `<name>#<json key>` or a secret ARN under SECRET_PREFIX (docs/request.md, Credentials)",
            });
        }
        grants.into_iter().for_each(|grant| trust.grant(&id, grant));
    }
    Ok(trust)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(extra: &[(&str, &str)]) -> LambdaEnv {
        LambdaEnv::from_pairs([("LAKE_BUCKET", "lake"), ("REPLY_DESTINATIONS", "q1, q2")].iter().chain(extra).copied())
    }

    #[test]
    fn defaults_need_only_the_lake_bucket_and_the_reply_destinations() {
        let config = LambdaConfig::from_env(&env(&[])).expect("defaults");
        let trust = Trust { destinations: Some(["q1".to_string(), "q2".to_string()].into()), ..Trust::default() };
        let expected = RequestConfig { metrics: MetricsTarget::Stdout, trust, ..RequestConfig::default() };
        assert_eq!(
            config,
            LambdaConfig { handler: expected, lake_bucket: "lake".into(), connect_timeout: DEFAULT_CONNECT_TIMEOUT }
        );
        assert_eq!(config.handler.max_message_bytes, 262_144);
        assert_eq!(config.handler.max_attempts, 3);
        assert_eq!(config.handler.max_instances, NonZeroU32::MIN, "one instance unless told");
        let err = LambdaConfig::from_env(&LambdaEnv::from_pairs([("HTTP_MAX_ATTEMPTS", "2")])).expect_err("no bucket");
        assert_eq!(err.name(), "LAKE_BUCKET");
    }

    #[test]
    fn overrides_are_read() {
        let config = LambdaConfig::from_env(&env(&[
            ("MAX_MESSAGE_BYTES", "1048576"),
            ("HTTP_TIMEOUT_SECS", "900"),
            ("HTTP_CONNECT_TIMEOUT_SECS", "1"),
            ("HTTP_MAX_ATTEMPTS", "10"),
            ("MAX_RETRY_AFTER_SECS", "0"),
            ("MAX_RESPONSE_BYTES", "1"),
            ("RUN_EVENTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:run-events"),
            ("DLQ_URL", "https://sqs/request-dlq"),
            ("MAX_RECEIVE_COUNT", "1000"),
            ("REQUEST_MAX_CONCURRENCY", "10"),
        ]))
        .expect("overrides");
        assert_eq!(config.handler.max_instances.get(), 10);
        let handler = &config.handler;
        assert_eq!((handler.max_message_bytes, handler.max_attempts), (1_048_576, 10));
        assert_eq!((handler.timeout, handler.max_retry_after), (Duration::from_secs(900), Duration::ZERO));
        assert_eq!((handler.max_response_bytes, config.connect_timeout), (1, Duration::from_secs(1)));
        assert_eq!(handler.run_events_topic.as_deref(), Some("arn:aws:sns:us-east-1:1:run-events"));
        assert_eq!(handler.dead_letter.as_ref().map(|d| d.max_receive_count), Some(1000));
    }

    #[test]
    fn trust_settings_are_read_and_checked() {
        let config = LambdaConfig::from_env(&env(&[
            ("SECRET_GRANTS", r#"{"tributary/a": {"hosts": ["api.a.com"], "pipelines": ["a"]}}"#),
            ("REQUEST_QUEUE_URL", "https://sqs/request"),
            ("ALLOW_PRIVATE_NETWORKS", "true"),
        ]))
        .expect("trust");
        let trust = &config.handler.trust;
        assert_eq!(
            trust.secrets.as_ref().map(|s| s["tributary/a"][0].hosts.clone()),
            Some(vec!["api.a.com".to_string()])
        );
        assert_eq!(trust.networks, NetworkAccess { loopback: false, private: true });
        assert_eq!(config.handler.own_queue.as_deref(), Some("https://sqs/request"));
        let err =
            LambdaConfig::from_env(&LambdaEnv::from_pairs([("LAKE_BUCKET", "lake")])).expect_err("no destinations");
        assert_eq!(err.name(), "REPLY_DESTINATIONS");
        let err = LambdaConfig::from_env(&env(&[("SECRET_GRANTS", r#"{"a": {"host": []}}"#)])).expect_err("typo");
        assert_eq!(err.name(), "SECRET_GRANTS");
        let err = LambdaConfig::from_env(&env(&[("ALLOW_LOOPBACK", "yes please")])).expect_err("not a bool");
        assert_eq!(err.name(), "ALLOW_LOOPBACK");
        // With tenants, a grant open to every pipeline would be open to every tenant.
        let open = r#"{"tributary/a": {"hosts": ["api.a.com"]}}"#;
        LambdaConfig::from_env(&env(&[("SECRET_GRANTS", open)])).expect("one team: any pipeline");
        let err = LambdaConfig::from_env(&env(&[("SECRET_GRANTS", open), ("STACK_SENDERS", "AROASTACK:*")]))
            .expect_err("tenants");
        assert_eq!(err.name(), "SECRET_GRANTS");
        assert!(err.to_string().contains("tributary/a") && err.to_string().contains("pipelines"), "{err}");
    }

    #[test]
    fn grants_are_keyed_by_secret_ids_resolved_under_the_stack_prefix() {
        // Relative and full keys are one secret: their grants add up.
        let grants = r#"{"vendor-key": {"hosts": ["api.a.com"]}, "tributary-prod/vendor-key": {"hosts": ["api.b.com"]},
            "crm/login#password": {"hosts": ["crm.example"]}}"#;
        let config = LambdaConfig::from_env(&env(&[("SECRET_PREFIX", "tributary-prod/"), ("SECRET_GRANTS", grants)]))
            .expect("prefix");
        let trust = &config.handler.trust;
        assert_eq!(trust.secret_prefix.as_str(), "tributary-prod/");
        let secrets = trust.secrets.as_ref().expect("grants");
        let keys: Vec<&str> = secrets.keys().map(String::as_str).collect();
        assert_eq!(keys, ["tributary-prod/crm/login#password", "tributary-prod/vendor-key"]);
        let mut hosts: Vec<&str> =
            secrets["tributary-prod/vendor-key"].iter().flat_map(|g| &g.hosts).map(String::as_str).collect();
        hosts.sort_unstable();
        assert_eq!(hosts, ["api.a.com", "api.b.com"]);
        // Unset: ids as written.
        let config = LambdaConfig::from_env(&env(&[("SECRET_GRANTS", grants)])).expect("no prefix");
        assert!(config.handler.trust.secrets.as_ref().is_some_and(|s| s.contains_key("vendor-key")));
        // A grant of another stack's secret by ARN, or a malformed prefix, stops the cold start.
        let foreign = r#"{"arn:aws:secretsmanager:eu-west-1:1:secret:tributary-dev/k-AbC123": {"hosts": ["a.com"]}}"#;
        let err = LambdaConfig::from_env(&env(&[("SECRET_PREFIX", "tributary-prod/"), ("SECRET_GRANTS", foreign)]))
            .expect_err("outside the prefix");
        assert_eq!(err.name(), "SECRET_GRANTS");
        assert!(
            err.to_string().contains("tributary-dev/k-AbC123") && err.to_string().contains("SECRET_PREFIX"),
            "{err}"
        );
        let err = LambdaConfig::from_env(&env(&[("SECRET_PREFIX", "my stack/")])).expect_err("a space");
        assert_eq!(err.name(), "SECRET_PREFIX");
        assert!(err.to_string().contains("\"my stack/\""), "{err}");
    }

    #[test]
    fn from_env_reads_exactly_its_table() {
        // The S3 client reads TRIBUTARY_S3_FORCE_PATH_STYLE itself.
        let env = env(&[("DLQ_URL", "https://sqs/dlq")]);
        test_support::env::assert_reads_exactly(
            LambdaConfig::from_env,
            &env,
            LambdaConfig::ENV,
            &[env::S3_FORCE_PATH_STYLE.name],
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        test_support::env::assert_refused(
            LambdaConfig::from_env,
            |case| env(&[("DLQ_URL", "https://sqs/dlq"), case]),
            &[
                ("MAX_MESSAGE_BYTES", "1023"),
                ("MAX_MESSAGE_BYTES", "1048577"),
                ("HTTP_TIMEOUT_SECS", "0"),
                ("HTTP_TIMEOUT_SECS", "901"),
                ("HTTP_CONNECT_TIMEOUT_SECS", "0"),
                ("HTTP_CONNECT_TIMEOUT_SECS", "901"),
                ("HTTP_MAX_ATTEMPTS", "0"),
                ("HTTP_MAX_ATTEMPTS", "11"),
                ("MAX_RETRY_AFTER_SECS", "901"),
                ("MAX_RESPONSE_BYTES", "0"),
                ("MAX_RESPONSE_BYTES", "10737418241"),
                ("MAX_RECEIVE_COUNT", "0"),
                ("HTTP_TIMEOUT_SECS", "30s"),
                ("REQUEST_MAX_CONCURRENCY", "0"),
                ("REQUEST_MAX_CONCURRENCY", "1001"),
                ("REQUEST_MAX_CONCURRENCY", "-2"),
                ("REQUEST_MAX_CONCURRENCY", "ten"),
            ],
        );
    }
}
