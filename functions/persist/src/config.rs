//! The Persist Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there: `ZSTD_LEVEL=0` or
//! `99` used to be accepted and then failed every page; now it stops the
//! cold start naming the variable. [`LambdaConfig::ENV`] is the table of
//! those variables; `main.rs` only wires what this returns.

use std::ops::RangeInclusive;

use tributary_core::env::{self, Allowed, EnvError, EnvVar, LambdaEnv, dead_letter_target};
use tributary_core::metrics::MetricsTarget;
use tributary_core::tenant::{self, Tenants};

use crate::{DEFAULT_MAX_COLUMNS, DEFAULT_MAX_PAGE_BYTES, PersistConfig};

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
const CONVERT_WORKERS: EnvVar = EnvVar::number(
    "CONVERT_WORKERS",
    0,
    Allowed::of_usize(0..=crate::convert::MAX_WORKERS, "0 (one per core) to the converter's MAX_WORKERS"),
    "threads that infer and build a page's chunks: 0 = one per core the function may use; 1 = none, the handler's \
     thread frames, builds and writes in turn (faster below 1,769 MB, less than one vCPU: infra/README.md)",
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

const TABLE_OPTIMIZERS: EnvVar = EnvVar::optional(
    "TABLE_OPTIMIZERS",
    "no Glue table optimizer is turned on",
    "Glue table optimizers turned on for each Iceberg table Persist commits to: a comma-separated list of \
     `compaction`, `retention`, `orphan_file_deletion` (needs TABLE_OPTIMIZER_ROLE_ARN)",
);
const TABLE_OPTIMIZER_ROLE_ARN: EnvVar = EnvVar::optional(
    "TABLE_OPTIMIZER_ROLE_ARN",
    "none (required when TABLE_OPTIMIZERS is set)",
    "the IAM role Glue runs the table optimizers as",
);
/// Days the `retention` and `orphan_file_deletion` optimizers take: at
/// least 1 (Glue's minimum, `CreateTableOptimizer`), at most 3,650 (our
/// own bound: ten years).
pub const OPTIMIZER_DAYS: RangeInclusive<u64> = 1..=3650;
const SNAPSHOT_RETENTION_DAYS: EnvVar = EnvVar::number(
    "SNAPSHOT_RETENTION_DAYS",
    5,
    Allowed::new(OPTIMIZER_DAYS, "Glue's minimum of 1 day, ten years"),
    "`retention`: snapshots older than this many days are expired (Glue's default 5)",
);
const SNAPSHOTS_TO_RETAIN: EnvVar = EnvVar::number(
    "SNAPSHOTS_TO_RETAIN",
    1,
    Allowed::new(1..=1000, "Glue's minimum of 1, our own bound of 1,000"),
    "`retention`: snapshots always kept, whatever their age (Glue's default 1)",
);
const ORPHAN_FILE_RETENTION_DAYS: EnvVar = EnvVar::number(
    "ORPHAN_FILE_RETENTION_DAYS",
    3,
    Allowed::new(OPTIMIZER_DAYS, "Glue's minimum of 1 day, ten years"),
    "`orphan_file_deletion`: files no snapshot references are deleted after this many days (Glue's default 3)",
);

/// Glue's table optimizer types (`TableOptimizerType`), as
/// `TABLE_OPTIMIZERS` lists them.
pub const TABLE_OPTIMIZER_KINDS: [&str; 3] = ["compaction", "retention", "orphan_file_deletion"];

/// The Glue table optimizers Persist turns on for its Iceberg tables
/// (`TABLE_OPTIMIZERS` and the variables after it; `tributary_iceberg::glue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptimizers {
    /// Of `TABLE_OPTIMIZER_KINDS`, each once, in the order listed.
    pub kinds: Vec<String>,
    /// `TABLE_OPTIMIZER_ROLE_ARN`.
    pub role_arn: String,
    /// `SNAPSHOT_RETENTION_DAYS` (default 5).
    pub snapshot_retention_days: u64,
    /// `SNAPSHOTS_TO_RETAIN` (default 1).
    pub snapshots_to_retain: u64,
    /// `ORPHAN_FILE_RETENTION_DAYS` (default 3).
    pub orphan_file_retention_days: u64,
}

impl TableOptimizers {
    /// The optimizers the environment asks for, `None` when
    /// `TABLE_OPTIMIZERS` is unset, empty or `none`.
    fn from_env(env: &LambdaEnv) -> Result<Option<Self>, EnvError> {
        let listed = env.optional(&TABLE_OPTIMIZERS)?;
        let role_arn = env.optional(&TABLE_OPTIMIZER_ROLE_ARN)?;
        let snapshot_retention_days = env.u64(&SNAPSHOT_RETENTION_DAYS)?;
        let snapshots_to_retain = env.u64(&SNAPSHOTS_TO_RETAIN)?;
        let orphan_file_retention_days = env.u64(&ORPHAN_FILE_RETENTION_DAYS)?;
        let Some(listed) = listed.filter(|l| l.trim() != "none") else { return Ok(None) };
        let mut kinds: Vec<String> = Vec::new();
        for kind in listed.split(',').map(str::trim) {
            if !TABLE_OPTIMIZER_KINDS.contains(&kind) {
                return Err(EnvError::Malformed {
                    name: TABLE_OPTIMIZERS.name.into(),
                    value: listed.clone(),
                    expected: "a comma-separated list of compaction, retention, orphan_file_deletion (or none)",
                });
            }
            if !kinds.iter().any(|k| k == kind) {
                kinds.push(kind.to_string());
            }
        }
        let role_arn = role_arn.ok_or_else(|| EnvError::Missing { name: TABLE_OPTIMIZER_ROLE_ARN.name.into() })?;
        Ok(Some(Self { kinds, role_arn, snapshot_retention_days, snapshots_to_retain, orphan_file_retention_days }))
    }
}

impl LambdaConfig {
    /// Persist's environment: every variable [`LambdaConfig::from_env`]
    /// reads, and [`env::S3_FORCE_PATH_STYLE`] (read by the S3 client and
    /// `main.rs`), as `infra/template.yaml` sets them (a test checks both).
    pub const ENV: &'static [EnvVar] = &[
        LAKE_BUCKET,
        ZSTD_LEVEL,
        ROW_GROUP_ROWS,
        CONVERT_WORKERS,
        MAX_PAGE_BYTES,
        MAX_COLUMNS,
        env::S3_FORCE_PATH_STYLE,
        env::DLQ_URL,
        env::RUN_EVENTS_TOPIC_ARN,
        env::MAX_RECEIVE_COUNT,
        GLUE_DATABASE,
        TABLE_OPTIMIZERS,
        TABLE_OPTIMIZER_ROLE_ARN,
        SNAPSHOT_RETENTION_DAYS,
        SNAPSHOTS_TO_RETAIN,
        ORPHAN_FILE_RETENTION_DAYS,
        tenant::TENANTS,
        tenant::STACK_SENDERS,
    ];
}

/// Everything the Persist binary reads from its environment.
#[derive(Clone, Debug, PartialEq)]
pub struct LambdaConfig {
    /// The handler's settings: the writer's `ZSTD_LEVEL`,
    /// `ROW_GROUP_ROWS` and `CONVERT_WORKERS`, the page limits `MAX_PAGE_BYTES` and `MAX_COLUMNS`
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
    /// Glue's table optimizers for the Iceberg tables (`TABLE_OPTIMIZERS`;
    /// `None`: none turned on).
    pub table_optimizers: Option<TableOptimizers>,
}

impl PersistConfig {
    /// `self` with the writer and page-limit variables that are set in
    /// `env` (`ZSTD_LEVEL`, `ROW_GROUP_ROWS`, `CONVERT_WORKERS`,
    /// `MAX_PAGE_BYTES`, `MAX_COLUMNS`: the Lambda's, [`LambdaConfig::ENV`]), checked as the
    /// Lambda checks them; an unset one keeps `self`'s value. The local
    /// runtime takes them so that a page refused with "the most
    /// MAX_PAGE_BYTES allows" can be let through on a laptop as in the stack.
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: not a number, or outside
    /// its range (`ZSTD_LEVELS`, `ROW_GROUP_ROWS_RANGE`, 0 to
    /// `MAX_WORKERS` workers, `MAX_PAGE_BYTES_RANGE`, `MAX_COLUMNS_RANGE`).
    pub fn with_env_limits(mut self, env: &LambdaEnv) -> Result<Self, EnvError> {
        if env.optional(&ZSTD_LEVEL)?.is_some() {
            // Within 1..=22.
            self.writer.zstd_level = i32::try_from(env.u64(&ZSTD_LEVEL)?).unwrap_or(1);
        }
        if env.optional(&ROW_GROUP_ROWS)?.is_some() {
            self.writer.row_group_rows = env.usize(&ROW_GROUP_ROWS)?;
        }
        if env.optional(&CONVERT_WORKERS)?.is_some() {
            self.writer.workers = env.usize(&CONVERT_WORKERS)?;
        }
        if env.optional(&MAX_PAGE_BYTES)?.is_some() {
            self.limits.max_page_bytes = env.u64(&MAX_PAGE_BYTES)?;
        }
        if env.optional(&MAX_COLUMNS)?.is_some() {
            self.limits.max_columns = env.usize(&MAX_COLUMNS)?;
        }
        Ok(self)
    }
}

impl LambdaConfig {
    /// Reads and checks Persist's variables ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: `LAKE_BUCKET` unset, a
    /// number that is not one, or outside its entry's range (`ZSTD_LEVELS`,
    /// `ROW_GROUP_ROWS_RANGE`, `MAX_PAGE_BYTES_RANGE`,
    /// `MAX_COLUMNS_RANGE`, the redrive policy's 1..=1000).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let defaults = PersistConfig::default().with_env_limits(env)?;
        let handler = PersistConfig {
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
            table_optimizers: TableOptimizers::from_env(env)?,
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
    fn the_limits_set_in_the_environment_override_a_config_and_unset_ones_keep_it() {
        let mut base = PersistConfig::default();
        base.limits.max_page_bytes = 5 << 20;
        base.writer.row_group_rows = 1_000;
        let env = LambdaEnv::from_pairs([("MAX_PAGE_BYTES", "1073741824"), ("ZSTD_LEVEL", "3")]);
        let config = base.clone().with_env_limits(&env).expect("in range");
        assert_eq!((config.limits.max_page_bytes, config.writer.zstd_level), (1 << 30, 3));
        assert_eq!(config.writer.row_group_rows, 1_000, "unset: kept");
        assert_eq!(config.limits.max_columns, base.limits.max_columns);
        let err =
            base.clone().with_env_limits(&LambdaEnv::from_pairs([("MAX_COLUMNS", "0")])).expect_err("out of range");
        assert!(err.to_string().contains("MAX_COLUMNS"), "{err}");
        // The converter's threads: 1 (the template's), or 0 for one per core.
        let one = base.clone().with_env_limits(&LambdaEnv::from_pairs([("CONVERT_WORKERS", "1")])).expect("in range");
        assert_eq!((one.writer.workers, base.writer.workers), (1, 0));
        let err = base.with_env_limits(&LambdaEnv::from_pairs([("CONVERT_WORKERS", "9")])).expect_err("past 4");
        assert!(err.to_string().contains("CONVERT_WORKERS") && err.to_string().contains('9'), "{err}");
    }

    #[test]
    fn defaults_need_only_the_lake_bucket() {
        let config = LambdaConfig::from_env(&env(&[])).expect("defaults");
        let handler = PersistConfig { metrics: MetricsTarget::Stdout, ..PersistConfig::default() };
        assert_eq!(
            config,
            LambdaConfig {
                handler,
                lake_bucket: "lake".into(),
                run_events_topic: None,
                glue_database: None,
                table_optimizers: None
            }
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
            ("TABLE_OPTIMIZERS", "compaction, retention,compaction"),
            ("TABLE_OPTIMIZER_ROLE_ARN", "arn:aws:iam::123456789012:role/optimizer"),
            ("SNAPSHOT_RETENTION_DAYS", "7"),
        ]))
        .expect("overrides");
        let optimizers = config.table_optimizers.clone().expect("optimizers");
        assert_eq!(optimizers.kinds, ["compaction", "retention"], "each once, in the order listed");
        assert_eq!(
            (optimizers.snapshot_retention_days, optimizers.snapshots_to_retain, optimizers.orphan_file_retention_days),
            (7, 1, 3)
        );
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
                ("TABLE_OPTIMIZERS", "compaction,vacuum"),
                ("SNAPSHOT_RETENTION_DAYS", "0"),
                ("ORPHAN_FILE_RETENTION_DAYS", "3651"),
            ],
        );
    }

    #[test]
    fn table_optimizers_need_their_role() {
        let err = LambdaConfig::from_env(&env(&[("TABLE_OPTIMIZERS", "retention")])).expect_err("no role");
        assert_eq!(err.name(), "TABLE_OPTIMIZER_ROLE_ARN");
        let none = LambdaConfig::from_env(&env(&[("TABLE_OPTIMIZERS", "none")])).expect("none");
        assert_eq!(none.table_optimizers, None);
    }

    #[test]
    fn the_zstd_levels_are_parquets() {
        let (first, last) = (*ZSTD_LEVELS.start() as i32, *ZSTD_LEVELS.end() as i32);
        assert!(ZstdLevel::try_new(first).is_ok() && ZstdLevel::try_new(last).is_ok());
        assert!(ZstdLevel::try_new(first - 1).is_err() && ZstdLevel::try_new(last + 1).is_err());
    }
}
