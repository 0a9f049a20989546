//! Blocks in an S3-compatible bucket (MinIO, Garage, AWS). Only plain object calls are used
//! (Put/Get/List/DeleteObjects/HeadBucket/CreateBucket), so any S3 implementation works.

use std::ops::Range;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use bytes::Bytes;

use super::s3_get::FastGet;
use super::{BlockStore, BlockStream, StoreError, StoreResult, block_key, outboard_key};

#[derive(Debug, Clone)]
pub struct S3Config {
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub path_style: bool,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub prefix: String,
    /// Deadline for one request attempt.
    pub timeout: Duration,
    /// Hand out URLs for reading single blocks straight from the store (`--s3-direct-reads`).
    pub direct_reads: bool,
}

pub struct S3Store {
    client: Client,
    bucket: String,
    prefix: String,
    endpoint: String,
    /// Block reads without the SDK's per-request pipeline, when the store allows it (see
    /// `s3_get.rs`); `None` means reads go through the SDK too.
    fast_get: Option<FastGet>,
    direct_reads: bool,
}

impl S3Store {
    pub async fn connect(cfg: &S3Config) -> StoreResult<Self> {
        let mut loader =
            aws_config::defaults(BehaviorVersion::latest()).region(Region::new(cfg.region.clone())).timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(cfg.timeout)
                    .build(),
            );
        if let (Some(a), Some(s)) = (&cfg.access_key, &cfg.secret_key) {
            loader = loader.credentials_provider(Credentials::new(a, s, None, None, "nimbus-config"));
        }
        if let Some(ep) = &cfg.endpoint {
            loader = loader.endpoint_url(ep);
        }
        let sdk = loader.load().await;
        let fast_get = fast_get(cfg, &sdk).await;
        let conf = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(cfg.path_style)
            // Non-AWS stores differ in which checksum headers they accept; we verify content
            // ourselves with BLAKE3, so only send checksums where S3 requires them.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        let prefix = match cfg.prefix.trim_matches('/') {
            "" => String::new(),
            p => format!("{p}/"),
        };
        let store = Self {
            client: Client::from_conf(conf),
            bucket: cfg.bucket.clone(),
            prefix,
            endpoint: cfg.endpoint.clone().unwrap_or_else(|| "AWS".into()),
            fast_get,
            direct_reads: cfg.direct_reads,
        };
        // Creating the bucket at start is a convenience; the store may be down right now,
        // and the gateway still starts (/readyz tells why it is not ready).
        if let Err(e) = store.ensure_bucket().await {
            tracing::warn!(error = %e, "object store not reachable at start; will retry on demand");
        }
        Ok(store)
    }

    fn key(&self, space: i64, hash: &str) -> String {
        format!("{}{}", self.prefix, block_key(space, hash))
    }

    fn outboard_key(&self, space: i64, hash: &str) -> String {
        format!("{}{}", self.prefix, outboard_key(space, hash))
    }

    async fn put_object(&self, key: String, data: Bytes) -> StoreResult<()> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(map_err)?;
        Ok(())
    }

    /// Object `key` (or bytes `range` of it), through the lean GET when there is one.
    async fn get_object(&self, key: &str, hash: &str, range: Option<Range<u64>>) -> StoreResult<Bytes> {
        if let Some(fast) = &self.fast_get {
            match fast.get(key, hash, range.as_ref()).await {
                Err(StoreError::Remote(e)) => {
                    // A transport failure of the lean path (e.g. a store that just restarted)
                    // gets the SDK's own retries before the reader sees an error.
                    tracing::debug!(error = %e, "lean block GET failed; retrying through the SDK");
                }
                Err(StoreError::Timeout) => tracing::debug!("lean block GET timed out; retrying through the SDK"),
                other => return other,
            }
        }
        let mut req = self.client.get_object().bucket(&self.bucket).key(key);
        if let Some(r) = &range {
            req = req.range(format!("bytes={}-{}", r.start, r.end.saturating_sub(1)));
        }
        let out = match req.send().await {
            Ok(o) => o,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(StoreError::NotFound(hash.to_string()));
            }
            Err(e) if range.is_some() && e.raw_response().is_some_and(|r| r.status().as_u16() == 416) => {
                // The object ends before the range starts: shorter than the block it names.
                return Err(StoreError::Corrupt(hash.to_string()));
            }
            Err(e) => return Err(map_err(e)),
        };
        // A body cut short surfaces here as an error, never as a short block (and the
        // caller verifies the hash anyway).
        let body = out.body.collect().await.map_err(|e| StoreError::Remote(format!("reading block body: {e}")))?;
        Ok(body.into_bytes())
    }

    async fn ensure_bucket(&self) -> StoreResult<()> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => {
                match self.client.create_bucket().bucket(&self.bucket).send().await {
                    Ok(_) => {
                        tracing::info!(bucket = %self.bucket, "created bucket");
                        Ok(())
                    }
                    Err(e) if matches!(e.code(), Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")) => Ok(()),
                    Err(e) => Err(map_err(e)),
                }
            }
            Err(e) => Err(map_err(e)),
        }
    }
}

/// The lean block GET needs a fixed path-style URL and credentials that never change; with
/// virtual-host addressing or rotating (session) credentials the SDK keeps serving reads.
async fn fast_get(cfg: &S3Config, sdk: &aws_config::SdkConfig) -> Option<FastGet> {
    use aws_credential_types::provider::ProvideCredentials;
    let endpoint = cfg.endpoint.as_deref().filter(|_| cfg.path_style)?;
    // The URL is built unescaped: only plain bucket and prefix spellings qualify.
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b));
    if !plain(&cfg.bucket) || !plain(&cfg.prefix) {
        return None;
    }
    let creds = sdk.credentials_provider()?.provide_credentials().await.ok()?;
    if creds.session_token().is_some() || creds.expiry().is_some() {
        return None;
    }
    match FastGet::new(
        endpoint,
        &cfg.bucket,
        &cfg.region,
        creds.access_key_id(),
        creds.secret_access_key(),
        cfg.timeout,
    ) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(error = %e, "lean block reads unavailable; reading blocks through the SDK");
            None
        }
    }
}

impl S3Store {
    /// Every key (and size) under `prefix`.
    /// Keys under `prefix` with their size and last-modified time (Unix ms).
    async fn list(&self, prefix: &str) -> StoreResult<Vec<(String, u64, Option<i64>)>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(map_err)?;
            for o in page.contents() {
                if let Some(k) = o.key() {
                    let modified = o.last_modified().map(|t| t.secs().saturating_mul(1000));
                    out.push((k.to_string(), o.size().unwrap_or(0).max(0) as u64, modified));
                }
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => return Ok(out),
            }
        }
    }

    /// DeleteObjects in pages of 1000 (the S3 limit).
    async fn delete_keys(&self, keys: Vec<String>) -> StoreResult<()> {
        for chunk in keys.chunks(1000) {
            let ids: Vec<ObjectIdentifier> =
                chunk.iter().filter_map(|k| ObjectIdentifier::builder().key(k).build().ok()).collect();
            let delete = Delete::builder()
                .set_objects(Some(ids))
                .quiet(true)
                .build()
                .map_err(|e| StoreError::Remote(e.to_string()))?;
            self.client.delete_objects().bucket(&self.bucket).delete(delete).send().await.map_err(map_err)?;
        }
        Ok(())
    }
}

fn map_err<E, R>(e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    match &e {
        SdkError::TimeoutError(_) => StoreError::Timeout,
        SdkError::ServiceError(s) => StoreError::Remote(format!(
            "{}: {}",
            s.err().code().unwrap_or("error"),
            s.err().message().unwrap_or("no message")
        )),
        _ => StoreError::Remote(format!("{}", aws_smithy_types::error::display::DisplayErrorContext(&e))),
    }
}

#[async_trait::async_trait]
impl BlockStore for S3Store {
    async fn put(&self, space: i64, hash: &str, data: Bytes) -> StoreResult<()> {
        self.put_object(self.key(space, hash), data).await
    }

    async fn get(&self, space: i64, hash: &str) -> StoreResult<Bytes> {
        self.get_object(&self.key(space, hash), hash, None).await
    }

    async fn get_range(&self, space: i64, hash: &str, range: Range<u64>) -> StoreResult<Bytes> {
        self.get_object(&self.key(space, hash), hash, Some(range)).await
    }

    async fn stream_range(&self, space: i64, hash: &str, range: Range<u64>) -> StoreResult<Option<BlockStream>> {
        let Some(fast) = &self.fast_get else { return Ok(None) };
        match fast.get_stream(&self.key(space, hash), hash, &range).await {
            // The whole read that follows retries through the SDK.
            Err(StoreError::Remote(_) | StoreError::Timeout) => Ok(None),
            other => other,
        }
    }

    async fn presign_get(&self, space: i64, hash: &str, ttl: Duration) -> StoreResult<Option<String>> {
        if !self.direct_reads {
            return Ok(None);
        }
        let cfg = PresigningConfig::expires_in(ttl).map_err(|e| StoreError::Remote(format!("presigning: {e}")))?;
        let req = self.client.get_object().bucket(&self.bucket).key(self.key(space, hash)).presigned(cfg).await;
        Ok(Some(req.map_err(map_err)?.uri().to_string()))
    }

    async fn put_outboard(&self, space: i64, hash: &str, data: Bytes) -> StoreResult<()> {
        self.put_object(self.outboard_key(space, hash), data).await
    }

    async fn get_outboard(&self, space: i64, hash: &str) -> StoreResult<Option<Bytes>> {
        match self.get_object(&self.outboard_key(space, hash), hash, None).await {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn delete_space(&self, space: i64) -> StoreResult<()> {
        let prefix = format!("{}spaces/{space}/", self.prefix);
        let keys: Vec<String> = self.list(&prefix).await?.into_iter().map(|(k, _, _)| k).collect();
        self.delete_keys(keys).await
    }

    async fn delete_blocks(&self, space: i64, hashes: &[String]) -> StoreResult<()> {
        self.delete_keys(hashes.iter().flat_map(|h| [self.key(space, h), self.outboard_key(space, h)]).collect()).await
    }

    async fn delete_outboards(&self, space: i64, hashes: &[String]) -> StoreResult<()> {
        self.delete_keys(hashes.iter().map(|h| self.outboard_key(space, h)).collect()).await
    }

    async fn list_blocks(&self) -> StoreResult<Vec<super::StoredBlock>> {
        let prefix = format!("{}spaces/", self.prefix);
        Ok(self
            .list(&prefix)
            .await?
            .into_iter()
            .filter_map(|(k, size, modified_ms)| {
                let (space, hash, kind) = super::parse_block_key(k.strip_prefix(&self.prefix)?)?;
                Some(super::StoredBlock { space, hash, size, modified_ms, kind })
            })
            .collect())
    }

    async fn check(&self) -> StoreResult<()> {
        self.ensure_bucket().await
    }

    fn describe(&self) -> String {
        format!("S3 bucket `{}` at {}", self.bucket, self.endpoint)
    }
}
