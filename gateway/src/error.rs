//! The one error type of the request path, and the one place that maps errors to HTTP.
//!
//! Handlers return `Result<_, ApiError>`; `IntoResponse` turns it into a status and the JSON
//! body `{"error":{"code","message"}}`. Internal details (database or store messages) are logged
//! with the request's span and never sent to the client.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nimbus_proto::NameError;
use nimbus_proto::wire::{ErrorBody, ErrorCode, ErrorDetail};
use s3s::S3ErrorCode;

use crate::blocks::StoreError;
use crate::meta::MetaError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    InvalidName(#[from] NameError),
    #[error("missing or invalid credentials")]
    Unauthorized,
    /// The password was right; the account needs its second factor (`totp` in the login).
    #[error(
        "this account has two-factor sign-in on: send the code from your authenticator app (or a recovery code) as `totp`"
    )]
    TotpRequired,
    /// A token that may only set up two-factor sign-in, used for anything else.
    #[error(
        "your administrator requires two-factor sign-in: set it up first (POST /api/v1/auth/totp, then /api/v1/auth/totp/confirm)"
    )]
    TotpSetupRequired,
    /// 401 for a door that signs in with HTTP Basic (WebDAV): the message says what to send.
    #[error("{0}")]
    BasicAuthRequired(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    NotADirectory(String),
    #[error("{0}")]
    IsADirectory(String),
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    Locked(String),
    #[error("the requested range is not satisfiable for a file of {size} bytes")]
    RangeNotSatisfiable { size: u64 },
    /// No thumbnail of this content (api/thumbnails.rs): not an image, damaged, too large.
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    HashMismatch(String),
    #[error("{0}")]
    MissingBlocks(String),
    #[error("too many failed attempts (password or code); try again in {retry_after} seconds")]
    TooManyRequests { retry_after: u64 },
    /// The password-hashing bound is reached (`auth::PasswordGate`).
    #[error("the gateway is checking too many passwords at once; try again in a moment")]
    Busy { retry_after: u64 },
    #[error("the object store is unavailable; try again shortly")]
    StoreUnavailable(#[source] StoreError),
    /// The LDAP directory does not answer: its accounts cannot sign in.
    #[error("{0}")]
    DirectoryUnavailable(String),
    /// 502: the request names a resource on another server (a WebDAV COPY or MOVE whose
    /// Destination is on another host, RFC 4918 §9.8.5). Nothing failed here: the code is
    /// `bad_request`.
    #[error("{0}")]
    OtherServer(String),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::InvalidName(_) => StatusCode::BAD_REQUEST,
            ApiError::HashMismatch(_) | ApiError::MissingBlocks(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::BasicAuthRequired(_) => StatusCode::UNAUTHORIZED,
            ApiError::TotpRequired => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::TotpSetupRequired => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) | ApiError::AlreadyExists(_) => StatusCode::CONFLICT,
            ApiError::NotADirectory(_) | ApiError::IsADirectory(_) => StatusCode::CONFLICT,
            ApiError::QuotaExceeded(_) | ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::PreconditionFailed(_) => StatusCode::PRECONDITION_FAILED,
            ApiError::Locked(_) => StatusCode::LOCKED,
            ApiError::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests { .. } | ApiError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::StoreUnavailable(_) | ApiError::DirectoryUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::OtherServer(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::BadRequest(_) | ApiError::OtherServer(_) => ErrorCode::BadRequest,
            ApiError::InvalidName(
                NameError::PathTooLong | NameError::EmptyComponent | NameError::InvalidUtf8 | NameError::BadEncoding,
            ) => ErrorCode::InvalidPath,
            ApiError::InvalidName(_) => ErrorCode::InvalidName,
            ApiError::Unauthorized | ApiError::BasicAuthRequired(_) => ErrorCode::Unauthorized,
            ApiError::TotpRequired => ErrorCode::TotpRequired,
            ApiError::TotpSetupRequired => ErrorCode::TotpSetupRequired,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::Conflict(_) => ErrorCode::Conflict,
            ApiError::AlreadyExists(_) => ErrorCode::AlreadyExists,
            ApiError::NotADirectory(_) => ErrorCode::NotADirectory,
            ApiError::IsADirectory(_) => ErrorCode::IsADirectory,
            ApiError::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::PreconditionFailed(_) => ErrorCode::PreconditionFailed,
            ApiError::Locked(_) => ErrorCode::Locked,
            ApiError::RangeNotSatisfiable { .. } => ErrorCode::RangeNotSatisfiable,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::HashMismatch(_) => ErrorCode::HashMismatch,
            ApiError::MissingBlocks(_) => ErrorCode::MissingBlocks,
            ApiError::TooManyRequests { .. } | ApiError::Busy { .. } => ErrorCode::TooManyRequests,
            ApiError::StoreUnavailable(_) => ErrorCode::StoreUnavailable,
            ApiError::DirectoryUnavailable(_) => ErrorCode::DirectoryUnavailable,
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The S3 error code this error is answered with by the S3 door, and the HTTP status
    /// where S3 has no code of its own (then the code is a custom one and the status is
    /// this error's own, e.g. 423 for a WebDAV lock, as REST answers).
    pub fn s3_code(&self) -> (S3ErrorCode, Option<StatusCode>) {
        let custom = |name: &'static str| (S3ErrorCode::Custom(name.into()), Some(self.status()));
        let code = match self {
            ApiError::NotFound(_) | ApiError::IsADirectory(_) => S3ErrorCode::NoSuchKey,
            ApiError::InvalidName(NameError::PathTooLong) => S3ErrorCode::KeyTooLongError,
            ApiError::InvalidName(_) | ApiError::BadRequest(_) | ApiError::OtherServer(_) => {
                S3ErrorCode::InvalidArgument
            }
            // A body that is not what its digest says (Content-MD5, the content hash).
            ApiError::HashMismatch(_) => S3ErrorCode::BadDigest,
            ApiError::MissingBlocks(_) => S3ErrorCode::InvalidArgument,
            ApiError::Unauthorized | ApiError::BasicAuthRequired(_) | ApiError::Forbidden(_) => {
                S3ErrorCode::AccessDenied
            }
            ApiError::TotpRequired | ApiError::TotpSetupRequired => S3ErrorCode::AccessDenied,
            ApiError::Locked(_) => return custom("Locked"),
            ApiError::PreconditionFailed(_) => S3ErrorCode::PreconditionFailed,
            // A name taken by a folder (or a file where a folder is needed): S3 has no
            // folders, so the closest is a refused write.
            ApiError::Conflict(_) | ApiError::AlreadyExists(_) | ApiError::NotADirectory(_) => {
                return custom("Conflict");
            }
            // S3 has no quota: a refusal (403) with a code of its own.
            ApiError::QuotaExceeded(_) => {
                return (S3ErrorCode::Custom("QuotaExceeded".into()), Some(StatusCode::FORBIDDEN));
            }
            ApiError::PayloadTooLarge(_) => S3ErrorCode::EntityTooLarge,
            ApiError::RangeNotSatisfiable { .. } => S3ErrorCode::InvalidRange,
            ApiError::UnsupportedMediaType(_) => return custom("UnsupportedMediaType"),
            ApiError::TooManyRequests { .. } | ApiError::Busy { .. } => S3ErrorCode::SlowDown,
            ApiError::StoreUnavailable(_) | ApiError::DirectoryUnavailable(_) => S3ErrorCode::ServiceUnavailable,
            ApiError::Internal(_) => S3ErrorCode::InternalError,
        };
        (code, None)
    }

    pub fn not_found() -> Self {
        ApiError::NotFound("no such file or directory".into())
    }

    pub fn internal(e: impl Into<anyhow::Error>) -> Self {
        ApiError::Internal(e.into())
    }
}

impl From<MetaError> for ApiError {
    fn from(e: MetaError) -> Self {
        match e {
            MetaError::NotFound => ApiError::not_found(),
            MetaError::Conflict(m) => ApiError::Conflict(m),
            MetaError::AlreadyExists(m) => ApiError::AlreadyExists(m),
            MetaError::NotADirectory(m) => ApiError::NotADirectory(m),
            MetaError::IsADirectory(m) => ApiError::IsADirectory(m),
            MetaError::QuotaExceeded(m) => ApiError::QuotaExceeded(m),
            MetaError::MissingBlocks(m) => ApiError::MissingBlocks(m),
            MetaError::Invalid(m) => ApiError::BadRequest(m),
            MetaError::Locked(m) => ApiError::Locked(m),
            MetaError::Db(e) => ApiError::Internal(e.into()),
            MetaError::Migrate(e) => ApiError::Internal(e.into()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(_) => {
                ApiError::Internal(anyhow::Error::new(e).context("a referenced block is missing from the store"))
            }
            StoreError::Corrupt(_) => ApiError::Internal(anyhow::Error::new(e)),
            other => ApiError::StoreUnavailable(other),
        }
    }
}

/// An error answer of the REST API that is not our JSON error (a framework's rejection: a
/// method a route does not take (405), a path parameter that is not UTF-8 (400), a raw body
/// over its limit (413)) as the JSON error every API answer has (docs/API.md, Conventions):
/// same status and headers (`Allow` stays), the code its status stands for, the framework's
/// short text as the message. Anything else is handed back as it is.
pub async fn as_json_error(resp: Response) -> Response {
    let status = resp.status();
    let json = resp.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return resp;
    }
    let code = match status {
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        StatusCode::FORBIDDEN => ErrorCode::Forbidden,
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::TOO_MANY_REQUESTS => ErrorCode::TooManyRequests,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    };
    let (mut parts, body) = resp.into_parts();
    // Rejections are a line of text; anything longer is not worth reading.
    let text = axum::body::to_bytes(body, 1024).await.ok().map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let message = match (status, text) {
        (StatusCode::METHOD_NOT_ALLOWED, _) => {
            let allowed = parts.headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("none");
            format!("this endpoint does not take this method; it takes: {allowed}")
        }
        (_, Some(t)) if !t.is_empty() && code != ErrorCode::Internal => t,
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let body = ErrorBody { error: ErrorDetail { code, message } };
    let fresh = axum::Json(body).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, fresh.into_body())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            ApiError::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "internal error");
                "internal error; the gateway log has details".to_string()
            }
            ApiError::StoreUnavailable(e) => {
                tracing::warn!(error = format!("{e:#}"), "object store unavailable");
                self.to_string()
            }
            _ => self.to_string(),
        };
        let body = ErrorBody { error: ErrorDetail { code: self.code(), message } };
        let mut resp = (status, axum::Json(body)).into_response();
        match self {
            ApiError::TooManyRequests { retry_after } | ApiError::Busy { retry_after } => {
                if let Ok(v) = HeaderValue::from_str(&retry_after.to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, v);
                }
            }
            ApiError::RangeNotSatisfiable { size } => {
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    resp.headers_mut().insert(header::CONTENT_RANGE, v);
                }
            }
            ApiError::Unauthorized => {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::BasicAuthRequired(_) => {
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"Nimbus\", charset=\"UTF-8\""),
                );
            }
            _ => {}
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
