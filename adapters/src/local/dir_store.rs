//! [`ObjectStore`] over a local directory: the lake folder is the bucket.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use tributary_core::ports::{ObjectStore, PortError};

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
            return Err(PortError::permanent_msg(
                "map key to path",
                format!("{key:?}"),
                "object keys must be relative, without '.', '..', empty segments, backslashes or control characters",
            ));
        }
        Ok(self.root.join(key))
    }
}

fn io_error(operation: &'static str, key: &str, err: std::io::Error) -> PortError {
    if err.kind() == std::io::ErrorKind::NotFound {
        PortError::NotFound { what: "object", target: key.into() }
    } else {
        PortError::transient(operation, key, err)
    }
}

/// Renames the temporary file `temp` onto `path` (the object `key`); when
/// that fails (a folder in the way, the disk full), removes `temp`, so a
/// failed write leaves no `*.tmp-<pid>-<n>` file in a dataset's folder,
/// where a reader taking every file (pyarrow's dataset) would read it.
async fn rename_into_place(temp: &Path, path: &Path, key: &str) -> Result<(), PortError> {
    match tokio::fs::rename(temp, path).await {
        Ok(()) => Ok(()),
        Err(err) => {
            let _ = tokio::fs::remove_file(temp).await;
            Err(io_error("rename object", key, err))
        }
    }
}

#[async_trait]
impl ObjectStore for DirStore {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        let path = self.path_of(key)?;
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create folder", key, e))?;
        }
        // Write beside the target, then rename: readers never see half a file,
        // and a redelivered message replaces the object whole.
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        if let Err(err) = tokio::fs::write(&temp, &body).await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(io_error("write object", key, err));
        }
        rename_into_place(&temp, &path, key).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        let path = self.path_of(key)?;
        tokio::fs::read(&path).await.map(Bytes::from).map_err(|e| io_error("read object", key, e))
    }

    async fn get_to_file(&self, key: &str, path: &Path) -> Result<u64, PortError> {
        let source = self.path_of(key)?;
        tokio::fs::copy(&source, path).await.map_err(|e| io_error("read object", key, e))
    }

    async fn put_file(&self, key: &str, path: &Path) -> Result<(), PortError> {
        let target = self.path_of(key)?;
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create folder", key, e))?;
        }
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = target.with_extension(format!("tmp-{}-{n}", std::process::id()));
        if let Err(err) = tokio::fs::copy(path, &temp).await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(io_error("write object", key, err));
        }
        rename_into_place(&temp, &target, key).await
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
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io_error("delete object", key, err)),
            _ => Ok(()),
        }
    }

    /// The file's content and, as its version, its length and a 64-bit
    /// digest of its bytes.
    ///
    /// # Errors
    /// As [`ObjectStore::get`] (but a missing object is `Ok(None)`).
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        match self.get(key).await {
            Ok(body) => {
                let version = content_version(&body);
                Ok(Some((body, version)))
            }
            Err(PortError::NotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Compare-and-swap under a lock file `<path>.put-if-lock` (created with
    /// `O_EXCL`, so writers in other processes are excluded too; a lock
    /// older than `STALE_LOCK` is taken as left by a crashed writer).
    ///
    /// The lock is taken, the version compared, the file written and the
    /// lock released in one blocking call, so the lock is held for the
    /// microseconds of that work: held across awaits, it waited for tokio's
    /// blocking pool, which a burst of pages (each reading a shard's
    /// receipts) can fill for seconds, and the writers waiting for it gave
    /// up after `LOCK_WAIT`.
    ///
    /// # Errors
    /// As [`ObjectStore::put`]; [`PortError::Transient`] when the lock
    /// stays taken for `LOCK_WAIT`.
    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        let path = self.path_of(key)?;
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| io_error("create folder", key, e))?;
        }
        let mut lock = path.clone().into_os_string();
        lock.push(LOCK_SUFFIX);
        let lock = PathBuf::from(lock);
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        let version = version.map(str::to_string);
        let started = std::time::Instant::now();
        loop {
            let (target, lock, temp, body, version) =
                (path.clone(), lock.clone(), temp.clone(), body.clone(), version.clone());
            let attempt =
                tokio::task::spawn_blocking(move || swap_under_lock(&target, &lock, &temp, &body, version.as_deref()))
                    .await
                    .map_err(|err| PortError::transient("write object", key, err))?
                    .map_err(|err| io_error("write object", key, err))?;
            if let Some(swapped) = attempt {
                return Ok(swapped);
            }
            if started.elapsed() > LOCK_WAIT {
                return Err(PortError::transient_msg(
                    "lock object",
                    key,
                    format!("{}{LOCK_SUFFIX} held for more than {LOCK_WAIT:?}", path.display()),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Walks only the folder of the prefix's last `/` (the whole lake for
    /// a prefix without one), so listing a run's receipts does not read
    /// every other folder of the lake.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        let root = self.root.clone();
        // The prefix's folder, and the start of the names in it: a LIST of
        // one shard of a run's receipts reads the run's folder but keeps
        // only that shard's names (a 10,000-page run's folder holds 10,000
        // receipts; every page lists its shard).
        let (start, leaf) = match prefix.rsplit_once('/') {
            None => (root.clone(), prefix.to_string()),
            Some((folder, leaf)) => match self.path_of(folder) {
                Ok(folder) => (folder, leaf.to_string()),
                // No folder a key can name: every key, kept below by prefix.
                Err(_) => (root.clone(), String::new()),
            },
        };
        let prefix = prefix.to_string();
        let listed = tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            walk(&root, &start, &leaf, &mut keys)?;
            keys.retain(|k| k.starts_with(&prefix));
            keys.sort();
            Ok::<_, std::io::Error>(keys)
        })
        .await
        .map_err(|err| PortError::transient("list objects", self.root.display().to_string(), err))?;
        listed.map_err(|e| io_error("list objects", &self.root.display().to_string(), e))
    }
}

/// Suffix of [`ObjectStore::put_if`]'s lock files (never listed as keys).
const LOCK_SUFFIX: &str = ".put-if-lock";

/// How long [`ObjectStore::put_if`] waits for another writer's lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A lock file older than this was left by a writer that died holding it.
pub const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(60);

/// A version tag for [`DirStore`]: the length and a 64-bit FNV-1a digest.
fn content_version(body: &[u8]) -> String {
    format!("{:x}-{}", body.len(), contracts::digest::fnv1a_hex(body))
}

/// One attempt of [`ObjectStore::put_if`]: takes the lock file `lock`
/// (`O_EXCL`; one older than `STALE_LOCK` is removed as a crashed writer's
/// and the attempt made again later), compares the file's version with
/// `version`, writes `body` through `temp` and a rename, releases the lock.
/// `None`: the lock is held by another writer.
fn swap_under_lock(
    path: &Path,
    lock: &Path,
    temp: &Path,
    body: &[u8],
    version: Option<&str>,
) -> std::io::Result<Option<bool>> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(lock) {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            let stale = std::fs::metadata(lock)
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().unwrap_or_default() > STALE_LOCK);
            if stale {
                let _ = std::fs::remove_file(lock);
            }
            return Ok(None);
        }
        Err(err) => return Err(err),
    }
    let swapped = (|| {
        let current = match std::fs::read(path) {
            Ok(bytes) => Some(content_version(&bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => return Err(err),
        };
        if current.as_deref() != version {
            return Ok(false);
        }
        if let Err(err) = std::fs::write(temp, body).and_then(|()| std::fs::rename(temp, path)) {
            let _ = std::fs::remove_file(temp);
            return Err(err);
        }
        Ok(true)
    })();
    let _ = std::fs::remove_file(lock);
    swapped.map(Some)
}

/// Appends to `keys` the keys of the files under `dir` whose names in
/// `dir` start with `leaf` (everything under a folder that does).
fn walk(root: &Path, dir: &Path, leaf: &str, keys: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if matches!(err.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(());
        }
        Err(err) => return Err(err),
    };
    for entry in entries {
        let entry = entry?;
        if !entry.file_name().as_encoded_bytes().starts_with(leaf.as_bytes()) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(root, &path, "", keys)?;
        } else if let Ok(relative) = path.strip_prefix(root) {
            let key = relative.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
            if !key.contains(".tmp-") && !key.ends_with(LOCK_SUFFIX) {
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
        // A prefix ending inside a name, as S3 takes it.
        assert_eq!(store.list("a/dt=2026-11-2").await.expect("list"), ["a/dt=2026-11-29/x.parquet"]);
        assert_eq!(store.list("a/dt=2026-11-29/x").await.expect("list"), ["a/dt=2026-11-29/x.parquet"]);
        assert!(store.list("a/dt=2026-11-3").await.expect("list").is_empty());
        assert!(store.list("b/y.json/").await.expect("list").is_empty(), "a file is not a folder");
        assert!(store.list("c/").await.expect("list").is_empty());
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

    #[tokio::test]
    async fn put_if_swaps_only_from_the_version_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        assert!(store.get_versioned("s.json").await.expect("read").is_none());
        assert!(store.put_if("s.json", Bytes::from_static(b"v1"), None).await.expect("create"));
        assert!(!store.put_if("s.json", Bytes::from_static(b"other"), None).await.expect("exists"), "only if absent");
        let (body, v1) = store.get_versioned("s.json").await.expect("read").expect("exists");
        assert_eq!(body, Bytes::from_static(b"v1"));
        assert!(store.put_if("s.json", Bytes::from_static(b"v2"), Some(&v1)).await.expect("swap"));
        assert!(!store.put_if("s.json", Bytes::from_static(b"v3"), Some(&v1)).await.expect("stale"), "v1 is gone");
        assert_eq!(store.get("s.json").await.expect("get"), Bytes::from_static(b"v2"));
        assert_eq!(store.list("").await.expect("list"), ["s.json"], "no lock file is left or listed");
    }

    /// Eight writers each add their own line by read, append, put_if,
    /// retrying when they lose: no line is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_read_modify_writes_lose_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = std::sync::Arc::new(DirStore::new(dir.path()));
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    loop {
                        let current = store.get_versioned("log").await.expect("read");
                        let (mut text, version) = match current {
                            Some((body, version)) => (String::from_utf8(body.to_vec()).expect("utf8"), Some(version)),
                            None => (String::new(), None),
                        };
                        text.push_str(&format!("writer {i}\n"));
                        if store.put_if("log", Bytes::from(text), version.as_deref()).await.expect("put_if") {
                            break;
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.expect("writer");
        }
        let text = String::from_utf8(store.get("log").await.expect("get").to_vec()).expect("utf8");
        let mut lines: Vec<_> = text.lines().collect();
        lines.sort_unstable();
        let expected: Vec<String> = (0..8).map(|i| format!("writer {i}")).collect();
        assert_eq!(lines, expected);
    }

    #[tokio::test]
    async fn a_stale_lock_is_taken_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let lock = dir.path().join(format!("s.json{LOCK_SUFFIX}"));
        let file = std::fs::File::create(&lock).expect("lock");
        let old = std::time::SystemTime::now() - STALE_LOCK - std::time::Duration::from_secs(1);
        file.set_modified(old).expect("age the lock");
        assert!(store.put_if("s.json", Bytes::from_static(b"v1"), None).await.expect("taken over"));
        assert!(!lock.exists());
    }
}
