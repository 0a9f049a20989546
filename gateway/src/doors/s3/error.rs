//! The one place the S3 door turns our errors into S3 error codes. Internal details are
//! logged, never sent.

use axum::http::StatusCode;
use s3s::{S3Error, S3ErrorCode, s3_error};

use crate::error::ApiError;
use crate::meta::MetaError;

pub fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "S3 door: internal error");
    s3_error!(InternalError, "internal error; the gateway log has details")
}

/// An error of the shared content path in its S3 form: the code and status are the error's
/// own (`ApiError::s3_code`); here only what is logged and what is withheld.
pub fn s3(e: ApiError) -> S3Error {
    match e {
        ApiError::Internal(e) => internal(format!("{e:#}")),
        other => {
            if let ApiError::StoreUnavailable(e) = &other {
                tracing::warn!(error = %e, "S3 door: object store unavailable");
            }
            let (code, status) = other.s3_code();
            let mut err = S3Error::with_message(code, other.to_string());
            if let Some(status) = status {
                err.set_status_code(status);
            }
            err
        }
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
