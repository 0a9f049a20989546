use crate::api::{CommandError, ErrorCode};
use crate::token::TokenError;

/// Why a command failed; [`CommandError`] is what the front end receives.
#[derive(Debug, thiserror::Error)]
pub enum DesktopError {
    #[error("wrong username or password (or the account is disabled)")]
    BadCredentials,
    #[error("cannot reach a Nimbus server at {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error(
        "the server's certificate changed: it now has the fingerprint {fingerprint}; if that is expected, trust it again"
    )]
    CertificateChanged { fingerprint: String },
    #[error("not signed in")]
    NotSignedIn,
    #[error("already mounted at {0}")]
    AlreadyMounted(String),
    #[error("the drive is not mounted")]
    NotMounted,
    #[error("{0}")]
    Invalid(String),
    #[error("cannot store the sign-in: {0}")]
    Storage(String),
    #[error("{0}")]
    Mount(String),
    #[error("the server refused: {0}")]
    Server(String),
}

impl From<TokenError> for DesktopError {
    fn from(e: TokenError) -> Self {
        DesktopError::Storage(e.to_string())
    }
}

impl DesktopError {
    pub fn code(&self) -> ErrorCode {
        match self {
            DesktopError::BadCredentials => ErrorCode::BadCredentials,
            DesktopError::Unreachable { .. } => ErrorCode::Unreachable,
            DesktopError::CertificateChanged { .. } => ErrorCode::CertificateChanged,
            DesktopError::NotSignedIn => ErrorCode::NotSignedIn,
            DesktopError::AlreadyMounted(_) => ErrorCode::AlreadyMounted,
            DesktopError::NotMounted => ErrorCode::NotMounted,
            DesktopError::Invalid(_) => ErrorCode::Invalid,
            DesktopError::Storage(_) => ErrorCode::Storage,
            DesktopError::Mount(_) => ErrorCode::Mount,
            DesktopError::Server(_) => ErrorCode::Server,
        }
    }
}

impl From<DesktopError> for CommandError {
    fn from(e: DesktopError) -> Self {
        CommandError { code: e.code(), message: e.to_string() }
    }
}
