//! [`ObjectStore`] over a local directory: the lake folder is the bucket.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::ports::{ObjectStore, PortError};

/// A directory standing in for the S3 bucket. Keys map to relative paths.
#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
    temp_counter: AtomicU64,
}

impl DirStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), temp_counter: AtomicU64::new(0) }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file path of `key`.
    ///
    /// # Errors
    /// [`PortError::Permanent`] for keys that are empty, absolute, contain
    /// `..`, `.` or empty segments, backslashes or control characters — keys
    /// that would escape the root or mean different things on S3 and disk.
    pub fn path_of(&self, key: &str) -> Result<PathBuf, PortError> {
        let bad = key.is_empty()
            || key.starts_with('/')
            || key.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..")
            || key.contains('\\')
            || key.chars().any(char::is_control)
            || Path::new(key).components().any(|c| !matches!(c, Component::Normal(_)));
        if bad {
            return Err(PortError::Permanent {
                operation: "map key to path",
                target: format!("{key:?}"),
                message:
                    "object keys must be relative, without '.', '..', empty segments, backslashes or control characters"
                        .into(),
            });
        }
        Ok(self.root.join(key))
    }
}

fn io_error(operation: &'static str, key: &str, err: &std::io::Error) -> PortError {
    if err.kind() == std::io::ErrorKind::NotFound {
        PortError::NotFound { what: "object", target: key.into() }
    } else {
        PortError::Transient { operation, target: key.into(), message: err.to_string() }
    }
}

#[async_trait]
impl ObjectStore for DirStore {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        let path = self.path_of(key)?;
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create folder", key, &e))?;
        }
        // Write beside the target, then rename: readers never see half a file,
        // and a redelivered message replaces the object whole.
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        tokio::fs::write(&temp, &body).await.map_err(|e| io_error("write object", key, &e))?;
        tokio::fs::rename(&temp, &path).await.map_err(|e| io_error("rename object", key, &e))
    }

    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        let path = self.path_of(key)?;
        tokio::fs::read(&path).await.map(Bytes::from).map_err(|e| io_error("read object", key, &e))
    }

    async fn get_to_file(&self, key: &str, path: &Path) -> Result<u64, PortError> {
        let source = self.path_of(key)?;
        tokio::fs::copy(&source, path).await.map_err(|e| io_error("read object", key, &e))
    }

    async fn put_file(&self, key: &str, path: &Path) -> Result<(), PortError> {
        let target = self.path_of(key)?;
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create folder", key, &e))?;
        }
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = target.with_extension(format!("tmp-{}-{n}", std::process::id()));
        tokio::fs::copy(path, &temp).await.map_err(|e| io_error("write object", key, &e))?;
        tokio::fs::rename(&temp, &target).await.map_err(|e| io_error("rename object", key, &e))
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        let source = self.path_of(from)?;
        if !tokio::fs::try_exists(&source).await.unwrap_or(false) {
            return Err(PortError::NotFound { what: "object", target: from.to_string() });
        }
        self.put_file(to, &source).await
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        match tokio::fs::remove_file(self.path_of(key)?).await {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io_error("delete object", key, &err)),
            _ => Ok(()),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        let listed = tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            walk(&root, &root, &mut keys)?;
            keys.retain(|k| k.starts_with(&prefix));
            keys.sort();
            Ok::<_, std::io::Error>(keys)
        })
        .await
        .map_err(|err| PortError::Transient {
            operation: "list objects",
            target: self.root.display().to_string(),
            message: err.to_string(),
        })?;
        listed.map_err(|e| io_error("list objects", &self.root.display().to_string(), &e))
    }
}

fn walk(root: &Path, dir: &Path, keys: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(root, &path, keys)?;
        } else if let Ok(relative) = path.strip_prefix(root) {
            let key = relative.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
            if !key.contains(".tmp-") {
                keys.push(key);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_list_and_overwrite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        store.put("a/dt=2026-11-29/x.parquet", Bytes::from_static(b"one")).await.expect("put");
        store.put("a/dt=2026-11-29/x.parquet", Bytes::from_static(b"two")).await.expect("overwrite");
        store.put("b/y.json", Bytes::from_static(b"{}")).await.expect("put");
        assert_eq!(store.get("a/dt=2026-11-29/x.parquet").await.expect("get"), Bytes::from_static(b"two"));
        assert_eq!(store.list("a/").await.expect("list"), ["a/dt=2026-11-29/x.parquet"]);
        assert_eq!(store.list("").await.expect("list").len(), 2);
        assert!(matches!(store.get("nope").await, Err(PortError::NotFound { .. })));
    }

    #[tokio::test]
    async fn keys_that_escape_the_root_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        for key in ["../x", "/etc/passwd", "a/../../x", "a//b", "a/./b", ""] {
            let err = store.put(key, Bytes::new()).await.expect_err(key);
            assert!(err.to_string().contains("object keys must be relative"), "{key}: {err}");
        }
    }
}
