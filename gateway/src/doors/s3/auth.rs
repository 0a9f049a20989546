//! Who is calling: s3s verifies the SigV4 signature (headers or presigned query) with the
//! secret we open from the key's sealed form; the access check then binds the request to the
//! key owner's space and refuses every bucket but theirs.
//!
//! s3s 0.14 also verifies Signature Version 2 and accepts presigned URLs of any lifetime; the
//! door accepts neither (as AWS): [`refuse_unsupported`] turns them away before s3s looks at
//! the request, and the access check refuses anything not signed with SigV4 in case a form
//! slips past it.

use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};

use super::error::internal;
use crate::meta::{SpaceId, now_ms};
use crate::state::AppState;

/// The authenticated owner of the access key, put into the request's extensions.
#[derive(Debug, Clone)]
pub struct S3User {
    pub id: i64,
    /// The key owner's space: what this authentication lets the request reach.
    pub space: SpaceId,
    pub username: String,
    /// The one bucket this user has: their username, lowercased.
    pub bucket: String,
    /// The access key the request was signed with (checked again before an upload commits).
    pub access_key: String,
}

/// The bucket that holds a user's space.
pub fn bucket_of(username: &str) -> String {
    username.to_ascii_lowercase()
}

/// The longest a presigned URL may be valid (`X-Amz-Expires`): seven days, as on AWS.
pub const MAX_PRESIGNED_SECS: u64 = 7 * 24 * 3600;

/// What AWS answers a Signature Version 2 request in a region that only takes SigV4.
const V4_ONLY: &str = "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";

/// Refuses a request signed with Signature Version 2 (header `Authorization: AWS KEY:SIG`, or
/// query `AWSAccessKeyId`/`Signature`/`Expires`): 400 `InvalidRequest`, as AWS. Refuses a
/// presigned URL whose `X-Amz-Expires` is over [`MAX_PRESIGNED_SECS`] or not a number: 403
/// `AuthorizationQueryParametersError` (AWS's code and status for it). The query is read as s3s
/// reads it; one it cannot read is left for s3s to refuse.
pub fn refuse_unsupported(headers: &HeaderMap, uri: &Uri) -> Result<(), S3Error> {
    let v2 = || S3Error::with_message(S3ErrorCode::InvalidRequest, V4_ONLY);
    for v in headers.get_all(header::AUTHORIZATION) {
        if v.as_bytes().get(..4).is_some_and(|p| p.eq_ignore_ascii_case(b"AWS ")) {
            return Err(v2());
        }
    }
    let Some(query) = uri.query() else { return Ok(()) };
    let Ok(pairs) = serde_urlencoded::from_str::<Vec<(String, String)>>(query) else { return Ok(()) };
    for (name, value) in &pairs {
        if name == "AWSAccessKeyId" || name == "Signature" {
            return Err(v2());
        }
        if name == "X-Amz-Expires" {
            let refuse = |msg: String| {
                let mut e = S3Error::with_message(S3ErrorCode::AuthorizationQueryParametersError, msg);
                e.set_status_code(StatusCode::FORBIDDEN);
                Err(e)
            };
            match value.parse::<u64>() {
                Ok(secs) if secs <= MAX_PRESIGNED_SECS => {}
                Ok(secs) => {
                    return refuse(format!(
                        "X-Amz-Expires must be at most a week ({MAX_PRESIGNED_SECS} seconds); this URL asks for {secs}"
                    ));
                }
                Err(_) => return refuse("X-Amz-Expires should be a number of seconds".into()),
            }
        }
    }
    Ok(())
}

/// s3s's bound on an XML request body (its `xml_max_body_size` default).
const XML_BODY_MAX: u64 = 20 * 1024 * 1024;

/// An XML body (DeleteObjects, CompleteMultipartUpload, a sub-resource PUT such as
/// `?tagging`) declared longer than s3s reads is refused with S3's own code before s3s reads
/// it: s3s answers such a body with a 500 `InternalError` (its size check does not recognise
/// the error of the body limit it uses). Object and part uploads (a PUT with no query other
/// than `uploadId`, `partNumber`, `x-id` or presigning parameters) stream and are not bounded here.
pub fn refuse_oversized_xml(method: &Method, headers: &HeaderMap, uri: &Uri) -> Result<(), S3Error> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let Some(len) = declared.filter(|l| *l > XML_BODY_MAX) else { return Ok(()) };
    let content_put = *method == Method::PUT
        && uri.query().is_none_or(|q| {
            q.split('&').filter(|kv| !kv.is_empty()).all(|kv| {
                let name = kv.split('=').next().unwrap_or("");
                matches!(name, "uploadId" | "partNumber" | "x-id") || name.starts_with("X-Amz-")
            })
        });
    let xml_body = *method == Method::POST || (*method == Method::PUT && !content_put);
    if !xml_body {
        return Ok(());
    }
    Err(S3Error::with_message(
        S3ErrorCode::MaxMessageLengthExceeded,
        format!("an XML request body holds at most {XML_BODY_MAX} bytes; this one declares {len}"),
    ))
}

/// Whether the request carries a SigV4 signature (header or presigned query), the only kind
/// the door accepts.
fn signed_with_v4(headers: &HeaderMap, uri: &Uri) -> bool {
    let header = headers.get(header::AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS4-HMAC-SHA256 "));
    let query = uri
        .query()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .is_some_and(|pairs| pairs.iter().any(|(k, v)| k == "X-Amz-Algorithm" && v == "AWS4-HMAC-SHA256"));
    header || query
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

/// The caller of a signed S3 request signed in again at an upload's end (see
/// [`crate::access::StillAllowed`]): its access key must still be usable (not revoked, its
/// user not disabled).
pub fn again(state: &AppState, access_key: &str) -> crate::access::SignInAgain {
    let (state, key) = (state.clone(), access_key.to_string());
    Box::pin(async move {
        match state.meta.s3_key_auth(&key).await? {
            Some(r) if r.usable() => Ok(SpaceId::authenticated(r.user_id)),
            _ => Err(crate::error::ApiError::Forbidden(
                "the access key was revoked, or its user disabled, during the upload".into(),
            )),
        }
    })
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
        // The door's own checks again, after s3s: what it verified must be SigV4.
        refuse_unsupported(cx.headers(), cx.uri())?;
        if cx.s3_op().name() == "PostObject" {
            return Err(s3_error!(NotImplemented, "browser form uploads (POST Object) are not supported"));
        }
        if !signed_with_v4(cx.headers(), cx.uri()) {
            return Err(S3Error::with_message(S3ErrorCode::InvalidRequest, V4_ONLY));
        }
        let row = self.state.meta.s3_key_auth(&cred.access_key).await.map_err(internal)?;
        let row = match row {
            Some(r) if r.usable() => r,
            _ => return Err(s3_error!(InvalidAccessKeyId, "the access key does not exist or was revoked")),
        };
        let user = S3User {
            id: row.user_id,
            space: SpaceId::authenticated(row.user_id),
            bucket: bucket_of(&row.username),
            username: row.username,
            access_key: cred.access_key.clone(),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(auth: Option<&str>, uri: &str) -> Result<(), (S3ErrorCode, Option<StatusCode>)> {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(
                header::AUTHORIZATION,
                axum::http::HeaderValue::from_str(a).map_err(|_| (S3ErrorCode::InternalError, None))?,
            );
        }
        let uri: Uri = uri.parse().map_err(|_| (S3ErrorCode::InternalError, None))?;
        refuse_unsupported(&h, &uri).map_err(|e| (e.code().clone(), e.status_code()))
    }

    #[test]
    fn oversized_xml_bodies_are_refused_before_s3s_reads_them() {
        let check = |method: Method, uri: &str, len: u64| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_LENGTH, axum::http::HeaderValue::from(len));
            let uri: Uri = uri.parse().map_err(|_| S3ErrorCode::InternalError)?;
            refuse_oversized_xml(&method, &h, &uri).map_err(|e| e.code().clone())
        };
        let big = XML_BODY_MAX + 1;
        let refused = Err(S3ErrorCode::MaxMessageLengthExceeded);
        assert_eq!(check(Method::POST, "/b?delete", big), refused);
        assert_eq!(check(Method::POST, "/b/k?uploadId=u", big), refused);
        assert_eq!(check(Method::PUT, "/b/k?tagging", big), refused);
        assert_eq!(check(Method::POST, "/b?delete", XML_BODY_MAX), Ok(()));
        // Content streams: objects and parts, presigned or not.
        assert_eq!(check(Method::PUT, "/b/k", big), Ok(()));
        assert_eq!(check(Method::PUT, "/b/k?partNumber=1&uploadId=u", big), Ok(()));
        assert_eq!(check(Method::PUT, "/b/k?x-id=PutObject", big), Ok(()));
        assert_eq!(check(Method::PUT, "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=60", big), Ok(()));
        assert_eq!(check(Method::GET, "/b?list-type=2", big), Ok(()));
    }

    #[test]
    fn sigv2_refused() {
        let v2 = Err((S3ErrorCode::InvalidRequest, Some(StatusCode::BAD_REQUEST)));
        assert_eq!(check(Some("AWS AKIAIOSFODNN7EXAMPLE:qgk2+6Sv9/oM7G3qLEjTH1a1l1g="), "/b/k"), v2);
        assert_eq!(check(Some("aws k:s"), "/b/k"), v2);
        assert_eq!(check(None, "/b/k?AWSAccessKeyId=k&Expires=1&Signature=s"), v2);
        assert_eq!(check(None, "/b/k?Signature=s"), v2);
        assert_eq!(check(Some("AWS4-HMAC-SHA256 Credential=k/20250101/us-east-1/s3/aws4_request"), "/b/k"), Ok(()));
        assert_eq!(check(None, "/b/k?list-type=2&prefix=Signature"), Ok(()));
    }

    #[test]
    fn presigned_at_most_a_week() {
        let week = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604800&X-Amz-Signature=x";
        assert_eq!(check(None, week), Ok(()));
        let forbidden = Err((S3ErrorCode::AuthorizationQueryParametersError, Some(StatusCode::FORBIDDEN)));
        assert_eq!(check(None, "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604801"), forbidden);
        assert_eq!(check(None, "/b/k?X-Amz-Expires=99999999999999999999999"), forbidden);
        assert_eq!(check(None, "/b/k?X-Amz-Expires=-1"), forbidden);
        assert_eq!(check(None, "/b/k?X-Amz-Expires=1w"), forbidden);
    }
}
