//! The Notify Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there.
//! [`LambdaConfig::ENV`] is the table of those variables; `main.rs` only
//! wires what this returns.

use tributary_core::env::{self, EnvError, EnvVar, LambdaEnv};
use tributary_core::metrics::MetricsTarget;

use crate::NotifyConfig;

const ALERTS_TOPIC_ARN: EnvVar = EnvVar::required("ALERTS_TOPIC_ARN", "the alerts topic");
const LAKE_BUCKET: EnvVar = EnvVar {
    doc: "the lake bucket: dead letters are archived under `_dead_letters/`; freshness checks read its manifests",
    ..env::LAKE_BUCKET
};

impl LambdaConfig {
    /// Notify's environment: every variable [`LambdaConfig::from_env`]
    /// reads, and [`env::S3_FORCE_PATH_STYLE`] (read by the S3 client), as
    /// `infra/template.yaml` sets them (a test checks both).
    pub const ENV: &'static [EnvVar] = &[ALERTS_TOPIC_ARN, LAKE_BUCKET, env::S3_FORCE_PATH_STYLE];
}

/// Everything the Notify binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: the alerts topic ARN (`ALERTS_TOPIC_ARN`,
    /// required) and the `dead_letters` metric to stdout (CloudWatch EMF).
    pub handler: NotifyConfig,
    /// The lake bucket (`LAKE_BUCKET`, required): every dead letter is
    /// archived there before its alert (`_dead_letters/…`), and the
    /// scheduled freshness checks read its run ledger.
    pub lake_bucket: String,
}

impl LambdaConfig {
    /// Reads Notify's variables ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable: `ALERTS_TOPIC_ARN` or `LAKE_BUCKET`
    /// unset, or a value that is not UTF-8.
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        Ok(Self {
            handler: NotifyConfig { alerts_topic: env.text(&ALERTS_TOPIC_ARN)?, metrics: MetricsTarget::Stdout },
            lake_bucket: env.text(&LAKE_BUCKET)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alerts_topic_and_the_lake_are_all_it_needs() {
        let topic = "arn:aws:sns:us-east-1:1:alerts";
        let env = LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", topic), ("LAKE_BUCKET", "lake")]);
        let config = LambdaConfig::from_env(&env).expect("defaults");
        let handler = NotifyConfig { alerts_topic: topic.into(), metrics: MetricsTarget::Stdout };
        assert_eq!(config, LambdaConfig { handler, lake_bucket: "lake".into() });
    }

    #[test]
    fn without_a_lake_dead_letters_could_not_be_kept_so_it_refuses_to_start() {
        let env = LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:alerts")]);
        let err = LambdaConfig::from_env(&env).expect_err("no lake");
        assert_eq!(err.name(), "LAKE_BUCKET", "{err}");
    }

    #[test]
    fn from_env_reads_exactly_its_table() {
        let env =
            LambdaEnv::from_pairs([("ALERTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:alerts"), ("LAKE_BUCKET", "lake")]);
        // The S3 client reads TRIBUTARY_S3_FORCE_PATH_STYLE itself.
        let read_elsewhere = [env::S3_FORCE_PATH_STYLE.name];
        test_support::env::assert_reads_exactly(LambdaConfig::from_env, &env, LambdaConfig::ENV, &read_elsewhere);
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
