//! The Notify Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there. `main.rs` only
//! wires what this returns.

use tributary_core::env::{EnvError, LambdaEnv};
use tributary_core::metrics::MetricsTarget;

use crate::NotifyConfig;

/// Everything the Notify binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: the alerts topic ARN (`ALERTS_TOPIC_ARN`,
    /// required) and the `dead_letters` metric to stdout (CloudWatch EMF).
    pub handler: NotifyConfig,
    /// The lake bucket the scheduled freshness checks read
    /// (`LAKE_BUCKET`; unset: Notify still turns dead letters into alerts,
    /// and a freshness check fails saying the variable is missing).
    pub lake_bucket: Option<String>,
}

impl LambdaConfig {
    /// Reads Notify's variables.
    ///
    /// # Errors
    /// [`EnvError`] naming the variable: `ALERTS_TOPIC_ARN` unset, or a value
    /// that is not UTF-8.
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        Ok(Self {
            handler: NotifyConfig { alerts_topic: env.required("ALERTS_TOPIC_ARN")?, metrics: MetricsTarget::Stdout },
            lake_bucket: env.optional("LAKE_BUCKET")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_need_only_the_alerts_topic() {
        let topic = "arn:aws:sns:us-east-1:1:alerts";
        let config = LambdaConfig::from_env(&LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", topic)])).expect("defaults");
        let handler = NotifyConfig { alerts_topic: topic.into(), metrics: MetricsTarget::Stdout };
        assert_eq!(config, LambdaConfig { handler, lake_bucket: None });
    }

    #[test]
    fn overrides_are_read() {
        let env =
            LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:alerts"), ("LAKE_BUCKET", "lake")]);
        assert_eq!(LambdaConfig::from_env(&env).expect("overrides").lake_bucket.as_deref(), Some("lake"));
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        for env in [
            LambdaEnv::from_pairs([("LAKE_BUCKET", "lake")]),
            LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", ""), ("LAKE_BUCKET", "lake")]),
        ] {
            let err = LambdaConfig::from_env(&env).expect_err("no alerts topic");
            assert_eq!(err.name(), "ALERTS_TOPIC_ARN", "{err}");
            assert_eq!(err.to_string(), "environment variable ALERTS_TOPIC_ARN is not set");
        }
    }
}
