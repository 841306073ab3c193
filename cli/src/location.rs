//! Where a lake is: a local directory (the local runtime's bucket) or an S3
//! bucket of a deployed stack (`s3://bucket[/prefix]`, needs the `aws`
//! feature).

use std::path::PathBuf;

/// A `--lake` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LakeLocation {
    /// A directory on this machine.
    Dir(PathBuf),
    /// An S3 bucket, with an optional key prefix (no leading or trailing
    /// `/`).
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix inside the bucket (empty: the bucket's root).
        prefix: String,
    },
}

/// What to do about a lake directory that does not exist.
pub const NO_LAKE_STEP: &str =
    "run a pipeline into it first (tributary run SPEC --lake DIR), or point --lake at a lake";

/// A `--lake` that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LocationError {
    /// `s3://` without a bucket, or a bucket name S3 refuses.
    #[error(
        "--lake {0:?}: an S3 lake is s3://<bucket>[/<prefix>], the bucket 3-63 characters of a-z 0-9 . - (the S3 bucket naming rules)"
    )]
    BadBucket(String),
    /// The directory does not exist.
    #[error("lake directory {0} does not exist: {step}", step = NO_LAKE_STEP)]
    NoDir(PathBuf),
    /// The path is a file (or something else that is not a directory).
    #[error("--lake {0} is a file, not a lake directory: point --lake at the lake's directory")]
    NotDir(PathBuf),
    /// An S3 lake in a build without the AWS adapters.
    #[error(
        "--lake {0}: this tributary was built without the `aws` feature; build it with `cargo build --release -p tributary-cli --features aws` to reach a deployed stack"
    )]
    NoAws(String),
}

/// Checks that `path` is an existing lake directory.
///
/// # Errors
/// [`LocationError::NoDir`] when nothing is there, [`LocationError::NotDir`]
/// when a file is.
pub fn require_dir(path: &std::path::Path) -> Result<(), LocationError> {
    match path.metadata() {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(LocationError::NotDir(path.to_path_buf())),
        Err(_) => Err(LocationError::NoDir(path.to_path_buf())),
    }
}

impl std::str::FromStr for LakeLocation {
    type Err = LocationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some(rest) = text.strip_prefix("s3://") else { return Ok(Self::Dir(PathBuf::from(text))) };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && bucket.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric);
        if !valid {
            return Err(LocationError::BadBucket(text.to_string()));
        }
        Ok(Self::S3 { bucket: bucket.to_string(), prefix: prefix.trim_matches('/').to_string() })
    }
}

impl std::fmt::Display for LakeLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(path) => write!(f, "{}", path.display()),
            Self::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl LakeLocation {
    /// The directory, checked to exist.
    ///
    /// # Errors
    /// [`LocationError::NoDir`], [`LocationError::NotDir`];
    /// [`LocationError::NoAws`] for an S3 lake
    /// (a command that only works on a local lake).
    pub fn existing_dir(&self) -> Result<&std::path::Path, LocationError> {
        match self {
            Self::Dir(path) => require_dir(path).map(|()| path.as_path()),
            Self::S3 { .. } => Err(LocationError::NoAws(self.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_lakes_and_directories_are_told_apart() {
        assert_eq!("lake".parse(), Ok(LakeLocation::Dir("lake".into())));
        assert_eq!(
            "s3://my-lake/env/prod/".parse(),
            Ok(LakeLocation::S3 { bucket: "my-lake".into(), prefix: "env/prod".into() })
        );
        assert_eq!("s3://my-lake".parse(), Ok(LakeLocation::S3 { bucket: "my-lake".into(), prefix: String::new() }));
        for bad in ["s3://", "s3://AB", "s3://My_Lake", "s3://-lake"] {
            let err = bad.parse::<LakeLocation>().expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert_eq!(LakeLocation::S3 { bucket: "b".repeat(3), prefix: "p".into() }.to_string(), "s3://bbb/p");
    }
}
