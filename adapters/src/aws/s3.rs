//! [`ObjectStore`] over Amazon S3: `PutObject`, `GetObject`,
//! `ListObjectsV2`.

use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;

use super::error::port_error;
use tributary_core::ports::{ObjectStore, PortError};

/// Keys in one bucket, optionally under a key prefix.
///
/// Keys given to and returned by the [`ObjectStore`] methods are relative
/// to the prefix: with prefix `lake/`, `put("a/b.parquet")` writes
/// `s3://<bucket>/lake/a/b.parquet` and `list("a/")` returns
/// `["a/b.parquet"]`. A `PutObject` replaces the object atomically (S3 has
/// strong read-after-write consistency), as the port asks.
///
/// The client must use path-style addressing against emulators
/// ([`super::s3_client`]).
#[derive(Clone, Debug)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
    page_size: Option<i32>,
}

impl S3Store {
    /// The whole of `bucket`.
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self { client, bucket: bucket.into(), prefix: String::new(), page_size: None }
    }

    /// Keys under `prefix` only; a `/` is appended if missing, an empty
    /// prefix means the whole bucket.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        self.prefix = prefix;
        self
    }

    /// Keys per `ListObjectsV2` page (`MaxKeys`, 1..=1000; S3 returns at most
    /// 1,000 whatever is asked). Unset, S3's default of 1,000 applies.
    /// <https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html>
    pub fn with_page_size(mut self, max_keys: i32) -> Self {
        self.page_size = Some(max_keys.clamp(1, 1000));
        self
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix (empty, or ending in `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn target(&self, key: &str) -> String {
        format!("s3://{}/{}{key}", self.bucket, self.prefix)
    }

    /// `GetObject`, its body not read yet; `NoSuchKey` is [`PortError::NotFound`].
    async fn get_object(&self, key: &str) -> Result<aws_sdk_s3::operation::get_object::GetObjectOutput, PortError> {
        self.client.get_object().bucket(&self.bucket).key(self.full_key(key)).send().await.map_err(|err| {
            if err.as_service_error().is_some_and(|e| e.is_no_such_key()) {
                PortError::NotFound { what: "object", target: self.target(key) }
            } else {
                port_error("GetObject", &self.target(key), err)
            }
        })
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    /// `PutObject` of the whole body (single request: S3 takes up to 5 GiB
    /// that way; Persist's Parquet pages are far smaller).
    ///
    /// # Errors
    /// [`PortError::Transient`] / [`PortError::Permanent`] by the SDK error.
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|err| port_error("PutObject", &self.target(key), err))?;
        Ok(())
    }

    /// `GetObject` with the object's `ETag` as its version.
    ///
    /// # Errors
    /// As [`ObjectStore::get`] (but a missing object is `Ok(None)`).
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        let output = match self.get_object(key).await {
            Ok(output) => output,
            Err(PortError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err),
        };
        let etag = output.e_tag().unwrap_or_default().to_string();
        let body = output
            .body
            .collect()
            .await
            .map_err(|err| PortError::transient("GetObject (read body)", self.target(key), err))?;
        Ok(Some((body.into_bytes(), etag)))
    }

    /// `PutObject` with `If-Match` (the `ETag` read) or `If-None-Match: *`.
    ///
    /// # Errors
    /// As [`ObjectStore::put`]; 412 and 409 are `Ok(false)`, not errors.
    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        let request =
            self.client.put_object().bucket(&self.bucket).key(self.full_key(key)).body(ByteStream::from(body));
        let request = match version {
            Some(etag) => request.if_match(etag),
            None => request.if_none_match("*"),
        };
        match request.send().await {
            Ok(_) => Ok(true),
            Err(err) if err.raw_response().is_some_and(|raw| matches!(raw.status().as_u16(), 409 | 412)) => Ok(false),
            Err(err) => Err(port_error("PutObject (conditional)", &self.target(key), err)),
        }
    }

    /// `GetObject`, the whole body read into memory.
    ///
    /// # Errors
    /// [`PortError::NotFound`] for `NoSuchKey`; [`PortError::Transient`] when
    /// the body stream breaks; others by the SDK error.
    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        let output = self.get_object(key).await?;
        let body = output
            .body
            .collect()
            .await
            .map_err(|err| PortError::transient("GetObject (read body)", self.target(key), err))?;
        Ok(body.into_bytes())
    }

    /// `GetObject` streamed to the file chunk by chunk.
    ///
    /// # Errors
    /// As [`ObjectStore::get`]; [`PortError::Transient`] for a local write failure.
    async fn get_to_file(&self, key: &str, path: &std::path::Path) -> Result<u64, PortError> {
        use tokio::io::AsyncWriteExt;
        let mut output = self.get_object(key).await?;
        let local = |err: std::io::Error| PortError::transient("write local file", path.display().to_string(), err);
        let mut file = tokio::fs::File::create(path).await.map_err(local)?;
        let mut written = 0u64;
        while let Some(chunk) = output
            .body
            .try_next()
            .await
            .map_err(|err| PortError::transient("GetObject (read body)", self.target(key), err))?
        {
            file.write_all(&chunk).await.map_err(local)?;
            written += chunk.len() as u64;
        }
        file.flush().await.map_err(local)?;
        Ok(written)
    }

    /// `PutObject` streaming the file's body (single request: up to 5 GiB,
    /// the S3 `PutObject` limit).
    ///
    /// # Errors
    /// As [`ObjectStore::put`].
    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<(), PortError> {
        let body = ByteStream::from_path(path)
            .await
            .map_err(|err| PortError::transient("read local file", path.display().to_string(), err))?;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .body(body)
            .send()
            .await
            .map_err(|err| port_error("PutObject", &self.target(key), err))?;
        Ok(())
    }

    /// `CopyObject`, server-side (up to 5 GiB, the `CopyObject` limit).
    ///
    /// # Errors
    /// [`PortError::NotFound`] when `from` is missing; others by the SDK error.
    async fn copy(&self, from: &str, to: &str) -> Result<(), PortError> {
        let source = format!("{}/{}", self.bucket, urlencode_key(&self.full_key(from)));
        self.client
            .copy_object()
            .bucket(&self.bucket)
            .key(self.full_key(to))
            .copy_source(source)
            .send()
            .await
            .map_err(|err| {
                if err.raw_response().is_some_and(|r| r.status().as_u16() == 404) {
                    PortError::NotFound { what: "object", target: self.target(from) }
                } else {
                    port_error("CopyObject", &self.target(to), err)
                }
            })?;
        Ok(())
    }

    /// `DeleteObject` (S3 answers success for a missing key too).
    ///
    /// # Errors
    /// By the SDK error.
    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .send()
            .await
            .map_err(|err| port_error("DeleteObject", &self.target(key), err))?;
        Ok(())
    }

    /// `ListObjectsV2` over every page (following `NextContinuationToken`),
    /// keys relative to the store's prefix, sorted.
    ///
    /// # Errors
    /// By the SDK error of any page; nothing is returned on a failure.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        let full_prefix = self.full_key(prefix);
        let target = self.target(prefix);
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let output = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .set_max_keys(self.page_size)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|err| port_error("ListObjectsV2", &target, err))?;
            keys.extend(
                output.contents().iter().filter_map(|object| {
                    object.key().and_then(|key| key.strip_prefix(&self.prefix)).map(str::to_string)
                }),
            );
            let truncated = output.is_truncated().unwrap_or(false);
            match output.next_continuation_token() {
                Some(next) if truncated && !next.is_empty() => token = Some(next.to_string()),
                _ if truncated => {
                    // Stopping here would return part of the listing as
                    // if it were all of it.
                    return Err(PortError::permanent_msg(
                        "ListObjectsV2",
                        target,
                        "listing truncated without a NextContinuationToken",
                    ));
                }
                _ => break,
            }
        }
        keys.sort();
        Ok(keys)
    }
}

/// A key percent-encoded for `x-amz-copy-source` (`/` kept).
fn urlencode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
