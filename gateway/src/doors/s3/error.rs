//! The one place the S3 door turns our errors into S3 error codes. Internal details are
//! logged, never sent.

use axum::http::StatusCode;
use nimbus_proto::NameError;
use s3s::{S3Error, S3ErrorCode, s3_error};

use crate::error::ApiError;
use crate::meta::MetaError;

pub fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "S3 door: internal error");
    s3_error!(InternalError, "internal error; the gateway log has details")
}

/// Maps an error of the shared content path to its S3 form.
pub fn s3(e: ApiError) -> S3Error {
    let msg = e.to_string();
    let with = |code: S3ErrorCode| S3Error::with_message(code, msg.clone());
    match e {
        ApiError::NotFound(_) | ApiError::IsADirectory(_) => with(S3ErrorCode::NoSuchKey),
        ApiError::InvalidName(NameError::PathTooLong) => with(S3ErrorCode::KeyTooLongError),
        ApiError::InvalidName(_) | ApiError::BadRequest(_) | ApiError::HashMismatch(_) => {
            with(S3ErrorCode::InvalidArgument)
        }
        ApiError::MissingBlocks(_) => with(S3ErrorCode::InvalidArgument),
        ApiError::Unauthorized | ApiError::BasicAuthRequired(_) => with(S3ErrorCode::AccessDenied),
        // Locked through WebDAV (an Office document being edited): the same 423 as REST.
        ApiError::Locked(_) => {
            let mut err = with(S3ErrorCode::Custom("Locked".into()));
            err.set_status_code(StatusCode::LOCKED);
            err
        }
        ApiError::Forbidden(_) => with(S3ErrorCode::AccessDenied),
        ApiError::PreconditionFailed(_) => with(S3ErrorCode::PreconditionFailed),
        // A name taken by a folder (or a file where a folder is needed): S3 has no folders,
        // so the closest is a refused write.
        ApiError::Conflict(_) | ApiError::AlreadyExists(_) | ApiError::NotADirectory(_) => conflict(msg),
        ApiError::QuotaExceeded(_) => {
            let mut err = with(S3ErrorCode::Custom("QuotaExceeded".into()));
            err.set_status_code(StatusCode::FORBIDDEN);
            err
        }
        ApiError::PayloadTooLarge(_) => with(S3ErrorCode::EntityTooLarge),
        ApiError::RangeNotSatisfiable { .. } => with(S3ErrorCode::InvalidRange),
        ApiError::TooManyRequests { .. } | ApiError::Busy { .. } => with(S3ErrorCode::SlowDown),
        ApiError::StoreUnavailable(e) => {
            tracing::warn!(error = %e, "S3 door: object store unavailable");
            with(S3ErrorCode::ServiceUnavailable)
        }
        ApiError::Internal(e) => internal(format!("{e:#}")),
    }
}

/// A write refused because a folder (or a file where a folder is needed) holds the name.
pub fn conflict(msg: String) -> S3Error {
    let mut err = S3Error::with_message(S3ErrorCode::Custom("Conflict".into()), msg);
    err.set_status_code(StatusCode::CONFLICT);
    err
}

/// For writes: a folder in the way is a conflict, not a missing key.
pub fn write(e: ApiError) -> S3Error {
    match e {
        ApiError::IsADirectory(m) => conflict(m),
        other => s3(other),
    }
}

pub fn meta(e: MetaError) -> S3Error {
    s3(e.into())
}
