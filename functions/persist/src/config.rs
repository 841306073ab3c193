//! The Persist Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there: `ZSTD_LEVEL=0` or
//! `99` used to be accepted and then failed every page; now it stops the
//! cold start naming the variable. [`LambdaConfig::ENV`] is the table of
//! those variables; `main.rs` only wires what this returns.

use std::ops::RangeInclusive;

use tributary_core::env::{self, Allowed, EnvError, EnvVar, LambdaEnv, dead_letter_target};
use tributary_core::metrics::MetricsTarget;
use tributary_core::tenant::{self, Tenants};

use crate::{DEFAULT_MAX_COLUMNS, DEFAULT_MAX_PAGE_BYTES, PageLimits, PersistConfig, WriterConfig};

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

const LAKE_BUCKET: EnvVar = EnvVar { doc: "the lake bucket: datasets, raw pages, the run ledger", ..env::LAKE_BUCKET };
const ZSTD_LEVEL: EnvVar = EnvVar::number(
    "ZSTD_LEVEL",
    1,
    Allowed::new(ZSTD_LEVELS, "Parquet's zstd levels"),
    "the Parquet files' zstd level",
);
const ROW_GROUP_ROWS: EnvVar = EnvVar::number(
    "ROW_GROUP_ROWS",
    131_072,
    Allowed::of_usize(ROW_GROUP_ROWS_RANGE, "contracts::MAX_ROW_GROUP_ROWS"),
    "rows per Parquet row group, unless a spec's `target.files.row_group_rows` says",
);
const MAX_PAGE_BYTES: EnvVar = EnvVar::number(
    "MAX_PAGE_BYTES",
    DEFAULT_MAX_PAGE_BYTES,
    Allowed::new(MAX_PAGE_BYTES_RANGE, "1 MiB, SQS's largest message, to 10 GiB, Lambda's largest memory"),
    "bytes of a page after decompression (a quarter of Persist's 1024 MB by default); more fails the page",
);
const MAX_COLUMNS: EnvVar = EnvVar::number(
    "MAX_COLUMNS",
    DEFAULT_MAX_COLUMNS as u64,
    Allowed::of_usize(MAX_COLUMNS_RANGE, "columns of a dataset; 20,000 took 905 MB of Persist's 1024 MB"),
    "columns of a dataset (every field at any depth); records that would pass it are quarantined",
);
const GLUE_DATABASE: EnvVar = EnvVar::optional(
    "GLUE_DATABASE",
    "no catalog, and pages of Iceberg datasets fail naming `target.table_format`",
    "the lake's Glue database: each Parquet dataset's Hive table is created or updated there when its schema changes, \
     each Iceberg dataset's table committed there once per run (files under `s3://<lake>/_iceberg/warehouse/`)",
);

impl LambdaConfig {
    /// Persist's environment: every variable [`LambdaConfig::from_env`]
    /// reads, and [`env::S3_FORCE_PATH_STYLE`] (read by the S3 client and
    /// `main.rs`), as `infra/template.yaml` sets them (a test checks both).
    pub const ENV: &'static [EnvVar] = &[
        LAKE_BUCKET,
        ZSTD_LEVEL,
        ROW_GROUP_ROWS,
        MAX_PAGE_BYTES,
        MAX_COLUMNS,
        env::S3_FORCE_PATH_STYLE,
        env::DLQ_URL,
        env::RUN_EVENTS_TOPIC_ARN,
        env::MAX_RECEIVE_COUNT,
        GLUE_DATABASE,
        tenant::TENANTS,
        tenant::STACK_SENDERS,
    ];
}

/// Everything the Persist binary reads from its environment.
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaConfig {
    /// The handler's settings: the writer's `ZSTD_LEVEL` and
    /// `ROW_GROUP_ROWS`, the page limits `MAX_PAGE_BYTES` and `MAX_COLUMNS`
    /// (defaults in [`LambdaConfig::ENV`]), the dead-letter target
    /// ([`dead_letter_target`]), metrics to stdout (CloudWatch EMF); the rest
    /// as [`PersistConfig::default`] (at most 1,000,000 records per page,
    /// [`crate::DEFAULT_MAX_PAGE_RECORDS`]).
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
    /// Reads and checks Persist's variables ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: `LAKE_BUCKET` unset, a
    /// number that is not one, or outside its entry's range ([`ZSTD_LEVELS`],
    /// [`ROW_GROUP_ROWS_RANGE`], [`MAX_PAGE_BYTES_RANGE`],
    /// [`MAX_COLUMNS_RANGE`], the redrive policy's 1..=1000).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let defaults = PersistConfig::default();
        let writer = WriterConfig {
            // Within 1..=22.
            zstd_level: i32::try_from(env.u64(&ZSTD_LEVEL)?).unwrap_or(1),
            row_group_rows: env.usize(&ROW_GROUP_ROWS)?,
            ..defaults.writer
        };
        let limits = PageLimits {
            max_page_bytes: env.u64(&MAX_PAGE_BYTES)?,
            max_columns: env.usize(&MAX_COLUMNS)?,
            ..defaults.limits
        };
        let handler = PersistConfig {
            writer,
            limits,
            dead_letter: dead_letter_target(env)?,
            metrics: MetricsTarget::Stdout,
            tenants: Tenants::from_env(env)?,
            ..defaults
        };
        Ok(Self {
            handler,
            lake_bucket: env.text(&LAKE_BUCKET)?,
            run_events_topic: env.optional(&env::RUN_EVENTS_TOPIC_ARN)?,
            glue_database: env.optional(&GLUE_DATABASE)?,
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
    fn from_env_reads_exactly_its_table() {
        // The S3 client and main.rs (the Glue committer's FileIO) read
        // TRIBUTARY_S3_FORCE_PATH_STYLE themselves.
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
            ],
        );
    }

    #[test]
    fn the_zstd_levels_are_parquets() {
        let (first, last) = (*ZSTD_LEVELS.start() as i32, *ZSTD_LEVELS.end() as i32);
        assert!(ZstdLevel::try_new(first).is_ok() && ZstdLevel::try_new(last).is_ok());
        assert!(ZstdLevel::try_new(first - 1).is_err() && ZstdLevel::try_new(last + 1).is_err());
    }
}
