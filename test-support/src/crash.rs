//! A lake that dies part-way: [`CrashingStore`] wraps any [`ObjectStore`]
//! (the directory lake, S3 on moto), logs every call, and from a chosen
//! call on fails every call, as if the function had been killed there
//! (a Lambda time-out). A test runs a step once healthy to learn its
//! calls, then again killed after each of them in turn, and delivers the
//! message again on the healthy store: what a killed invocation leaves
//! behind is what the retry must finish.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tributary_core::ports::{ObjectStore, PortError};

/// One store call: the method's name and the key (or prefix, or `from ->
/// to` for a copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `put`, `get`, `list`, `get_to_file`, `put_file`, `copy`, `delete`,
    /// `get_versioned` or `put_if`.
    pub method: &'static str,
    /// The key, prefix, or `from -> to`.
    pub key: String,
}

/// Which calls count toward the kill.
type Counted<'a> = Box<dyn Fn(&Call) -> bool + Send + Sync + 'a>;

/// An [`ObjectStore`] that forwards calls to `inner` until `allowed` of
/// them (of the kind [`CrashingStore::counting`] names; by default every
/// call) have been made, and fails every later call with
/// [`PortError::Transient`] (operation `killed`) without reaching `inner`:
/// nothing is written after the kill. Every call, failed or not, is logged
/// ([`CrashingStore::calls`]).
pub struct CrashingStore<'a> {
    inner: &'a dyn ObjectStore,
    allowed: usize,
    counted: Counted<'a>,
    made: AtomicUsize,
    dead: std::sync::atomic::AtomicBool,
    calls: Mutex<Vec<Call>>,
}

impl<'a> CrashingStore<'a> {
    /// `inner`, killed after `allowed` calls (`usize::MAX`: never).
    pub fn new(inner: &'a dyn ObjectStore, allowed: usize) -> Self {
        CrashingStore {
            inner,
            allowed,
            counted: Box::new(|_| true),
            made: AtomicUsize::new(0),
            dead: Default::default(),
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Counts only the calls `counted` accepts toward the kill: killed
    /// after `allowed` deletes of page files, say; the next such call and
    /// every call after it fail.
    #[must_use]
    pub fn counting(mut self, counted: impl Fn(&Call) -> bool + Send + Sync + 'a) -> Self {
        self.counted = Box::new(counted);
        self
    }

    /// `inner`, never killed: to log a healthy run's calls.
    pub fn healthy(inner: &'a dyn ObjectStore) -> Self {
        Self::new(inner, usize::MAX)
    }

    /// Every call so far, in order (the failed ones included).
    ///
    /// # Panics
    /// When a thread panicked while logging.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("call log").clone()
    }

    /// Logs the call; `Err` when it comes at or after the kill.
    fn enter(&self, method: &'static str, key: &str) -> Result<(), PortError> {
        let call = Call { method, key: key.to_string() };
        let counted = (self.counted)(&call);
        let n = {
            let mut calls = self.calls.lock().expect("call log");
            calls.push(call);
            calls.len()
        };
        if counted && self.made.fetch_add(1, Ordering::SeqCst) >= self.allowed {
            self.dead.store(true, Ordering::SeqCst);
        }
        if self.dead.load(Ordering::SeqCst) {
            return Err(PortError::transient_msg(
                "killed",
                key.to_string(),
                format!("the store is dead (call {n}: {method})"),
            ));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl ObjectStore for CrashingStore<'_> {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.enter("put", key)?;
        self.inner.put(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        self.enter("get", key)?;
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        self.enter("list", prefix)?;
        self.inner.list(prefix).await
    }

    async fn get_to_file(&self, key: &str, path: &Path) -> Result<u64, PortError> {
        self.enter("get_to_file", key)?;
        self.inner.get_to_file(key, path).await
    }

    async fn put_file(&self, key: &str, path: &Path) -> Result<(), PortError> {
        self.enter("put_file", key)?;
        self.inner.put_file(key, path).await
    }

    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        self.enter("copy", &format!("{from} -> {to}"))?;
        self.inner.copy(from, to).await
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.enter("delete", key)?;
        self.inner.delete(key).await
    }

    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        self.enter("get_versioned", key)?;
        self.inner.get_versioned(key).await
    }

    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        self.enter("put_if", key)?;
        self.inner.put_if(key, body, version).await
    }
}

/// An [`ObjectStore`] whose writes (`put`, `put_file`, `put_if`) to keys
/// holding a chosen text fail a few times after letting some through, then
/// succeed again: a consumer that died at that write and was started again
/// (a stream batch retried), where [`CrashingStore`] stays dead. Deletes
/// fail alike when asked ([`FlakyWrites::fail_deletes`]).
pub struct FlakyWrites<S> {
    inner: S,
    /// (text in the key, writes to let through first, writes to fail).
    faults: Mutex<Vec<(String, usize, usize)>>,
    /// The same for deletes.
    delete_faults: Mutex<Vec<(String, usize, usize)>>,
    failed: AtomicUsize,
}

impl<S: ObjectStore> FlakyWrites<S> {
    /// `inner` with no fault yet.
    pub fn new(inner: S) -> Self {
        FlakyWrites {
            inner,
            faults: Mutex::new(Vec::new()),
            delete_faults: Mutex::new(Vec::new()),
            failed: AtomicUsize::new(0),
        }
    }

    /// Fails `times` writes to keys containing `text`, after `skip` of them.
    ///
    /// # Panics
    /// When a thread panicked while holding the fault list.
    pub fn fail(&self, text: &str, skip: usize, times: usize) {
        self.faults.lock().expect("faults").push((text.to_string(), skip, times));
    }

    /// Fails `times` deletes of keys containing `text`, after `skip` of
    /// them: a function that died between a write and the deletes that
    /// follow it.
    ///
    /// # Panics
    /// When a thread panicked while holding the fault list.
    pub fn fail_deletes(&self, text: &str, skip: usize, times: usize) {
        self.delete_faults.lock().expect("faults").push((text.to_string(), skip, times));
    }

    /// Writes (and deletes) failed so far.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    fn write(&self, key: &str) -> Result<(), PortError> {
        self.check(&self.faults, key)
    }

    fn check(&self, faults: &Mutex<Vec<(String, usize, usize)>>, key: &str) -> Result<(), PortError> {
        let mut faults = faults.lock().map_err(|_| PortError::transient_msg("put", key, "fault list poisoned"))?;
        for (text, skip, times) in faults.iter_mut().filter(|(text, ..)| key.contains(text.as_str())) {
            if *skip > 0 {
                *skip -= 1;
            } else if *times > 0 {
                *times -= 1;
                self.failed.fetch_add(1, Ordering::SeqCst);
                return Err(PortError::transient_msg("put", key, format!("injected: the writer died at {text}")));
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl<S: ObjectStore> ObjectStore for FlakyWrites<S> {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.write(key)?;
        self.inner.put(key, body).await
    }
    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        self.inner.list(prefix).await
    }
    async fn put_file(&self, key: &str, path: &Path) -> Result<(), PortError> {
        self.write(key)?;
        self.inner.put_file(key, path).await
    }
    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.check(&self.delete_faults, key)?;
        self.inner.delete(key).await
    }
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        self.inner.get_versioned(key).await
    }
    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        self.write(key)?;
        self.inner.put_if(key, body, version).await
    }
}
