//! The Persist Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there: `ZSTD_LEVEL=0` or
//! `99` used to be accepted and then failed every page; now it stops the
//! cold start naming the variable. `main.rs` only wires what this returns.

use std::ops::RangeInclusive;

use tributary_core::env::{EnvError, LambdaEnv, dead_letter_target};
use tributary_core::metrics::MetricsTarget;

use crate::{PageLimits, PersistConfig, WriterConfig};

/// The zstd levels Parquet's writer takes (`parquet::basic::ZstdLevel::try_new`
/// accepts 1 to 22; a test checks both ends).
pub const ZSTD_LEVELS: RangeInclusive<u64> = 1..=22;

/// Rows per Parquet row group (`ROW_GROUP_ROWS`): at least 1, at most
/// [`contracts::MAX_ROW_GROUP_ROWS`], the most a spec's
/// `target.files.row_group_rows` may ask for.
pub const ROW_GROUP_ROWS_RANGE: RangeInclusive<usize> = 1..=contracts::MAX_ROW_GROUP_ROWS as usize;

/// Bytes a page's payload may hold after decompression (`MAX_PAGE_BYTES`):
/// at least 1 MiB, SQS's largest message (an inline page must always fit),
/// at most 10 GiB, Lambda's largest memory (a record as large as the bound
/// is held whole). Default [`crate::DEFAULT_MAX_PAGE_BYTES`] (256 MiB, a
/// quarter of Persist's 1024 MB).
pub const MAX_PAGE_BYTES_RANGE: RangeInclusive<u64> = 1024 * 1024..=10 * 1024 * 1024 * 1024;

/// Columns a dataset may have (`MAX_COLUMNS`, counted as
/// [`crate::Ty::columns`]): at least 1, at most 10,000, half the 20,000 of
/// the page that took 905 MB of Persist's 1024 MB. Default
/// [`crate::DEFAULT_MAX_COLUMNS`] (1,000, our own limit).
pub const MAX_COLUMNS_RANGE: RangeInclusive<usize> = 1..=10_000;

/// Everything the Persist binary reads from its environment.
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaConfig {
    /// The handler's settings: the writer's `ZSTD_LEVEL` (default 1) and
    /// `ROW_GROUP_ROWS` (default 131072), the page limits `MAX_PAGE_BYTES`
    /// (default 268435456, 256 MiB) and `MAX_COLUMNS` (default 1000), the
    /// dead-letter target (`DLQ_URL`, `MAX_RECEIVE_COUNT`), metrics to
    /// stdout (CloudWatch EMF); the rest as [`PersistConfig::default`] (at
    /// most 1,000,000 records per page, [`crate::DEFAULT_MAX_PAGE_RECORDS`]).
    pub handler: PersistConfig,
    /// The lake bucket (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// The run-events topic ARN announcing runs a page completes
    /// (`RUN_EVENTS_TOPIC_ARN`; unset: completion is recorded in the lake
    /// only).
    pub run_events_topic: Option<String>,
    /// The Glue database the datasets' tables are registered in
    /// (`GLUE_DATABASE`, the template's `LakeDatabase`; a Glue database
    /// name, 1 to 255 characters). Unset: no catalog, the tables are not
    /// registered.
    pub glue_database: Option<String>,
}

impl LambdaConfig {
    /// Reads and checks Persist's variables.
    ///
    /// # Errors
    /// [`EnvError`] naming the variable: `LAKE_BUCKET` unset, a number that
    /// is not one, `ZSTD_LEVEL` outside 1..=22 ([`ZSTD_LEVELS`]),
    /// `ROW_GROUP_ROWS` outside 1..=1048576 ([`ROW_GROUP_ROWS_RANGE`]),
    /// `MAX_PAGE_BYTES` outside 1 MiB..=10 GiB ([`MAX_PAGE_BYTES_RANGE`]),
    /// `MAX_COLUMNS` outside 1..=10000 ([`MAX_COLUMNS_RANGE`]),
    /// `MAX_RECEIVE_COUNT` outside 1..=1000 (the redrive policy's range).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let defaults = PersistConfig::default();
        let zstd_level = env.u64_in(
            "ZSTD_LEVEL",
            u64::try_from(defaults.writer.zstd_level).unwrap_or(1),
            ZSTD_LEVELS,
            "Parquet's zstd levels",
        )?;
        let writer = WriterConfig {
            // Within 1..=22.
            zstd_level: i32::try_from(zstd_level).unwrap_or(1),
            row_group_rows: env.usize_in(
                "ROW_GROUP_ROWS",
                defaults.writer.row_group_rows,
                ROW_GROUP_ROWS_RANGE,
                "contracts::MAX_ROW_GROUP_ROWS",
            )?,
            ..defaults.writer
        };
        let limits = PageLimits {
            max_page_bytes: env.u64_in(
                "MAX_PAGE_BYTES",
                defaults.limits.max_page_bytes,
                MAX_PAGE_BYTES_RANGE,
                "1 MiB, SQS's largest message, to 10 GiB, Lambda's largest memory",
            )?,
            max_columns: env.usize_in(
                "MAX_COLUMNS",
                defaults.limits.max_columns,
                MAX_COLUMNS_RANGE,
                "columns of a dataset; 20,000 took 905 MB of Persist's 1024 MB",
            )?,
            ..defaults.limits
        };
        let handler = PersistConfig {
            writer,
            limits,
            dead_letter: dead_letter_target(env)?,
            metrics: MetricsTarget::Stdout,
            ..defaults
        };
        Ok(Self {
            handler,
            lake_bucket: env.required("LAKE_BUCKET")?,
            run_events_topic: env.optional("RUN_EVENTS_TOPIC_ARN")?,
            glue_database: env.optional("GLUE_DATABASE")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use parquet::basic::ZstdLevel;

    use super::*;

    fn env(extra: &[(&str, &str)]) -> LambdaEnv {
        LambdaEnv::from_pairs([("LAKE_BUCKET", "lake")].iter().chain(extra).copied())
    }

    #[test]
    fn defaults_need_only_the_lake_bucket() {
        let config = LambdaConfig::from_env(&env(&[])).expect("defaults");
        let handler = PersistConfig { metrics: MetricsTarget::Stdout, ..PersistConfig::default() };
        assert_eq!(
            config,
            LambdaConfig { handler, lake_bucket: "lake".into(), run_events_topic: None, glue_database: None }
        );
        assert_eq!((config.handler.writer.zstd_level, config.handler.writer.row_group_rows), (1, 131_072));
        let limits = config.handler.limits;
        assert_eq!(
            (limits.max_page_bytes, limits.max_page_records, limits.max_columns),
            (256 * 1024 * 1024, 1_000_000, 1_000),
            "a quarter of Persist's 1024 MB; ten times Request's largest page; our own column cap"
        );
        let err = LambdaConfig::from_env(&LambdaEnv::from_pairs([("ZSTD_LEVEL", "3")])).expect_err("no bucket");
        assert_eq!(err.name(), "LAKE_BUCKET");
    }

    #[test]
    fn overrides_are_read() {
        let config = LambdaConfig::from_env(&env(&[
            ("ZSTD_LEVEL", "22"),
            ("ROW_GROUP_ROWS", "1048576"),
            ("RUN_EVENTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:run-events"),
            ("DLQ_URL", "https://sqs/persist-dlq"),
            ("MAX_RECEIVE_COUNT", "7"),
            ("GLUE_DATABASE", "tributary_lake"),
            ("MAX_PAGE_BYTES", "10737418240"),
            ("MAX_COLUMNS", "10000"),
        ]))
        .expect("overrides");
        assert_eq!((config.handler.limits.max_page_bytes, config.handler.limits.max_columns), (10 << 30, 10_000));
        assert_eq!(config.glue_database.as_deref(), Some("tributary_lake"));
        assert_eq!((config.handler.writer.zstd_level, config.handler.writer.row_group_rows), (22, 1_048_576));
        assert_eq!(config.run_events_topic.as_deref(), Some("arn:aws:sns:us-east-1:1:run-events"));
        assert_eq!(config.handler.dead_letter.map(|d| d.max_receive_count), Some(7));
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        for (name, value) in [
            ("ZSTD_LEVEL", "0"),
            ("ZSTD_LEVEL", "23"),
            ("ZSTD_LEVEL", "99"),
            ("ZSTD_LEVEL", "-1"),
            ("ROW_GROUP_ROWS", "0"),
            ("ROW_GROUP_ROWS", "1048577"),
            ("MAX_RECEIVE_COUNT", "1001"),
            ("MAX_PAGE_BYTES", "1048575"),
            ("MAX_PAGE_BYTES", "10737418241"),
            ("MAX_PAGE_BYTES", "256MiB"),
            ("MAX_COLUMNS", "0"),
            ("MAX_COLUMNS", "10001"),
        ] {
            let err = LambdaConfig::from_env(&env(&[("DLQ_URL", "https://sqs/dlq"), (name, value)]))
                .expect_err(&format!("{name}={value}"));
            assert_eq!(err.name(), name, "{err}");
            assert!(err.to_string().contains(&format!("{name}={value:?}")), "{err}");
        }
    }

    #[test]
    fn the_zstd_levels_are_parquets() {
        let (first, last) = (*ZSTD_LEVELS.start() as i32, *ZSTD_LEVELS.end() as i32);
        assert!(ZstdLevel::try_new(first).is_ok() && ZstdLevel::try_new(last).is_ok());
        assert!(ZstdLevel::try_new(first - 1).is_err() && ZstdLevel::try_new(last + 1).is_err());
    }
}
