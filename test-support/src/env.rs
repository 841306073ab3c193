//! The functions' `config.rs` checks, written once: `from_env` reads
//! exactly the variables of its `ENV` table, and refuses a bad value naming
//! the variable and quoting the value.

use std::fmt::Debug;

use tributary_core::env::{EnvError, EnvVar, LambdaEnv};

/// Asserts that `from_env` accepts `env` and reads exactly the names of
/// `table`, less `read_elsewhere` (variables another part of the binary
/// reads itself, such as the S3 client's `TRIBUTARY_S3_FORCE_PATH_STYLE`).
pub fn assert_reads_exactly<T: Debug>(
    from_env: impl Fn(&LambdaEnv) -> Result<T, EnvError>,
    env: &LambdaEnv,
    table: &[EnvVar],
    read_elsewhere: &[&str],
) {
    if let Err(err) = from_env(env) {
        panic!("the defaults are refused: {err}");
    }
    let expected = table.iter().map(|var| var.name).filter(|name| !read_elsewhere.contains(name)).collect();
    assert_eq!(env.names_read(), expected, "the variables read are not the table's");
}

/// Asserts that `from_env` refuses each `(name, value)` of `cases`, in the
/// environment `with` builds around it, with an error naming `name` and
/// quoting `name="value"`.
pub fn assert_refused<'a, T: Debug>(
    from_env: impl Fn(&LambdaEnv) -> Result<T, EnvError>,
    with: impl Fn((&'static str, &'a str)) -> LambdaEnv,
    cases: &[(&'static str, &'a str)],
) {
    for &(name, value) in cases {
        let err = match from_env(&with((name, value))) {
            Ok(config) => panic!("{name}={value} was accepted: {config:?}"),
            Err(err) => err,
        };
        assert_eq!(err.name(), name, "{err}");
        assert!(err.to_string().contains(&format!("{name}={value:?}")), "{err}");
    }
}
