//! The Request Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there, so a bad value
//! stops the cold start naming the variable instead of failing every
//! message. `main.rs` only wires what this returns.

use std::num::NonZeroU32;
use std::ops::RangeInclusive;
use std::time::Duration;

use tributary_core::env::{EnvError, LAMBDA_SECS_RANGE, LambdaEnv, SQS_MESSAGE_BYTES_RANGE, dead_letter_target};
use tributary_core::metrics::MetricsTarget;

use tributary_core::ports::NetworkAccess;

use crate::RequestConfig;
use crate::http::DEFAULT_CONNECT_TIMEOUT;
use crate::trust::{self, Trust};

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

/// Everything the Request binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: `MAX_MESSAGE_BYTES`, `HTTP_MAX_ATTEMPTS`,
    /// `HTTP_TIMEOUT_SECS`, `MAX_RETRY_AFTER_SECS`, `MAX_RESPONSE_BYTES`,
    /// `RUN_EVENTS_TOPIC_ARN`, the dead-letter target (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`), the trust settings (`REPLY_DESTINATIONS`,
    /// `SECRET_GRANTS`, `ALLOW_LOOPBACK`, `ALLOW_PRIVATE_NETWORKS`, see
    /// [`crate::trust`]), its own queue for long `Retry-After` pauses
    /// (`REQUEST_QUEUE_URL`, optional), the instances that share each
    /// pipeline's rate budget (`REQUEST_MAX_CONCURRENCY`, see
    /// [`MAX_INSTANCES_RANGE`]), metrics to stdout (CloudWatch EMF); the rest as
    /// [`RequestConfig::default`].
    pub handler: RequestConfig,
    /// The lake bucket: claim-check payloads and the ledger of `cursor` runs
    /// (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// Time to establish a vendor connection (`HTTP_CONNECT_TIMEOUT_SECS`,
    /// 1..=900 s, default [`DEFAULT_CONNECT_TIMEOUT`], 10 s).
    pub connect_timeout: Duration,
}

impl LambdaConfig {
    /// Reads and checks Request's variables.
    ///
    /// # Errors
    /// [`EnvError`] naming the variable: `LAKE_BUCKET` or
    /// `REPLY_DESTINATIONS` unset, `SECRET_GRANTS` not a JSON object of
    /// secret id to `{"hosts": [..], "pipelines": [..]}`,
    /// `ALLOW_LOOPBACK` / `ALLOW_PRIVATE_NETWORKS` not a boolean, a number that
    /// is not one, or out of its range — `MAX_MESSAGE_BYTES` 1024..=1048576
    /// (SQS `MaximumMessageSize`), `HTTP_TIMEOUT_SECS` and
    /// `HTTP_CONNECT_TIMEOUT_SECS` 1..=900 (Lambda's maximum time-out),
    /// `HTTP_MAX_ATTEMPTS` 1..=10 ([`MAX_ATTEMPTS_RANGE`]),
    /// `MAX_RETRY_AFTER_SECS` 0..=900, `MAX_RESPONSE_BYTES` 1..=10 GiB
    /// ([`MAX_RESPONSE_BYTES_RANGE`]), `MAX_RECEIVE_COUNT` 1..=1000 (the
    /// redrive policy's range), `REQUEST_MAX_CONCURRENCY` 1..=1000
    /// ([`MAX_INSTANCES_RANGE`]).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let defaults = RequestConfig::default();
        let lake_bucket = env.required("LAKE_BUCKET")?;
        let handler = RequestConfig {
            max_message_bytes: env.usize_in(
                "MAX_MESSAGE_BYTES",
                defaults.max_message_bytes,
                SQS_MESSAGE_BYTES_RANGE,
                "SQS MaximumMessageSize",
            )?,
            max_attempts: env.usize_in(
                "HTTP_MAX_ATTEMPTS",
                defaults.max_attempts,
                MAX_ATTEMPTS_RANGE,
                "at least one call; more waits would not fit an invocation",
            )?,
            timeout: env.secs_in("HTTP_TIMEOUT_SECS", defaults.timeout, LAMBDA_SECS_RANGE, "Lambda's 900 s maximum")?,
            max_retry_after: env.secs_in(
                "MAX_RETRY_AFTER_SECS",
                defaults.max_retry_after,
                MAX_RETRY_AFTER_SECS_RANGE,
                "Lambda's 900 s maximum",
            )?,
            max_response_bytes: env.u64_in(
                "MAX_RESPONSE_BYTES",
                defaults.max_response_bytes,
                MAX_RESPONSE_BYTES_RANGE,
                "Lambda's 10,240 MB memory maximum",
            )?,
            run_events_topic: env.optional("RUN_EVENTS_TOPIC_ARN")?,
            dead_letter: dead_letter_target(env)?,
            metrics: MetricsTarget::Stdout,
            trust: trust_from_env(env)?,
            own_queue: env.optional("REQUEST_QUEUE_URL")?,
            max_instances: max_instances(env)?,
            ..defaults
        };
        Ok(Self {
            handler,
            lake_bucket,
            connect_timeout: env.secs_in(
                "HTTP_CONNECT_TIMEOUT_SECS",
                DEFAULT_CONNECT_TIMEOUT,
                LAMBDA_SECS_RANGE,
                "Lambda's 900 s maximum",
            )?,
        })
    }
}

/// `REQUEST_MAX_CONCURRENCY`: how many instances share each pipeline's
/// rate budget.
fn max_instances(env: &LambdaEnv) -> Result<NonZeroU32, EnvError> {
    let n = env.u64_in(
        "REQUEST_MAX_CONCURRENCY",
        1,
        MAX_INSTANCES_RANGE,
        "an SQS event source mapping's MaximumConcurrency (2-1000), or 1 for one instance",
    )?;
    // In range, so never 0 and within u32.
    Ok(u32::try_from(n).ok().and_then(NonZeroU32::new).unwrap_or(NonZeroU32::MIN))
}

/// The trust settings: answers only to `REPLY_DESTINATIONS` (required: the
/// stack's queues and topics), secrets only as `SECRET_GRANTS` says
/// (default none), loopback and private addresses only when the stack opens
/// them.
fn trust_from_env(env: &LambdaEnv) -> Result<Trust, EnvError> {
    let destinations = env
        .required("REPLY_DESTINATIONS")?
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(String::from)
        .collect();
    let secrets = match env.optional("SECRET_GRANTS")? {
        None => Default::default(),
        Some(text) => trust::parse_grants(&text).map_err(|_| EnvError::Malformed {
            name: "SECRET_GRANTS".into(),
            value: text.clone(),
            expected: "a JSON object of secret id to {\"hosts\": [..], \"pipelines\": [..]} (docs/request.md, Trust model)",
        })?,
    };
    Ok(Trust {
        secrets: Some(secrets),
        networks: NetworkAccess {
            loopback: env.bool_or("ALLOW_LOOPBACK", false)?,
            private: env.bool_or("ALLOW_PRIVATE_NETWORKS", false)?,
        },
        destinations: Some(destinations),
    })
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
        assert_eq!(trust.secrets.as_ref().map(|s| s["tributary/a"].hosts.clone()), Some(vec!["api.a.com".to_string()]));
        assert_eq!(trust.networks, NetworkAccess { loopback: false, private: true });
        assert_eq!(config.handler.own_queue.as_deref(), Some("https://sqs/request"));
        let err =
            LambdaConfig::from_env(&LambdaEnv::from_pairs([("LAKE_BUCKET", "lake")])).expect_err("no destinations");
        assert_eq!(err.name(), "REPLY_DESTINATIONS");
        let err = LambdaConfig::from_env(&env(&[("SECRET_GRANTS", r#"{"a": {"host": []}}"#)])).expect_err("typo");
        assert_eq!(err.name(), "SECRET_GRANTS");
        let err = LambdaConfig::from_env(&env(&[("ALLOW_LOOPBACK", "yes please")])).expect_err("not a bool");
        assert_eq!(err.name(), "ALLOW_LOOPBACK");
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        for (name, value) in [
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
        ] {
            let err = LambdaConfig::from_env(&env(&[("DLQ_URL", "https://sqs/dlq"), (name, value)]))
                .expect_err(&format!("{name}={value}"));
            assert_eq!(err.name(), name, "{err}");
            assert!(err.to_string().contains(&format!("{name}={value:?}")), "{err}");
        }
    }
}
