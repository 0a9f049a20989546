//! Who is calling: s3s verifies the SigV4 signature (headers or presigned query) with the
//! secret we open from the key's sealed form; the access check then binds the request to the
//! key owner's space and refuses every bucket but theirs.

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{S3Result, s3_error};

use super::error::internal;
use crate::meta::now_ms;
use crate::state::AppState;

/// The authenticated owner of the access key, put into the request's extensions.
#[derive(Debug, Clone)]
pub struct S3User {
    pub id: i64,
    pub username: String,
    /// The one bucket this user has: their username, lowercased.
    pub bucket: String,
}

/// The bucket that holds a user's space.
pub fn bucket_of(username: &str) -> String {
    username.to_ascii_lowercase()
}

pub struct KeyAuth {
    pub state: AppState,
}

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        // Read on every request (no cache): a revoked key or a disabled user stops at once.
        let row = self.state.meta.s3_key_auth(access_key).await.map_err(internal)?;
        let row = match row {
            Some(r) if r.usable() => r,
            _ => return Err(s3_error!(InvalidAccessKeyId, "the access key does not exist or was revoked")),
        };
        let secret = self.state.s3_sealer.open(access_key, &row.secret_sealed).map_err(|e| {
            tracing::error!(error = %e, "an S3 secret does not open: wrong --s3-key-file?");
            s3_error!(InvalidAccessKeyId, "the access key cannot be used; ask an administrator")
        })?;
        Ok(SecretKey::from(secret))
    }
}

pub struct SpaceAccess {
    pub state: AppState,
}

#[async_trait::async_trait]
impl S3Access for SpaceAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let Some(cred) = cx.credentials() else {
            return Err(s3_error!(AccessDenied, "anonymous requests are not allowed; sign with an access key"));
        };
        let row = self.state.meta.s3_key_auth(&cred.access_key).await.map_err(internal)?;
        let row = match row {
            Some(r) if r.usable() => r,
            _ => return Err(s3_error!(InvalidAccessKeyId, "the access key does not exist or was revoked")),
        };
        let user = S3User { id: row.user_id, bucket: bucket_of(&row.username), username: row.username };
        // Another user's bucket and a bucket that does not exist get the same answer, so
        // bucket names cannot be probed.
        let bucket = match cx.s3_path() {
            S3Path::Root => None,
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => Some(bucket.as_ref()),
        };
        if let Some(b) = bucket
            && b != user.bucket
        {
            return Err(s3_error!(AccessDenied, "access denied: your bucket is `{}`", user.bucket));
        }
        // "Last used" is for people: refreshing it once a minute is enough and spares a write
        // per request.
        if row.last_used_at.is_none_or(|t| now_ms() - t > 60_000) {
            let (key_id, meta) = (row.id, self.state.meta.clone());
            tokio::spawn(async move {
                if let Err(e) = meta.touch_s3_key(key_id).await {
                    tracing::debug!(error = %e, "could not record S3 key use");
                }
            });
        }
        cx.extensions_mut().insert(user);
        Ok(())
    }
}
