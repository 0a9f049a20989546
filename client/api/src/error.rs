//! One error type for every call of the client: what the server said (status + its stable
//! `code` + its message for people), what went wrong on the way there, and local failures.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use nimbus_proto::NameError;
use nimbus_proto::wire::ErrorCode;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error: `{"error":{"code","message"}}` and an HTTP status.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        status: u16,
        /// The server's stable code as sent (`not_found`, `conflict`, ...; [`Error::error_code`]
        /// gives it typed). Kept as a string so a code added by a newer gateway still reaches
        /// the user; when the body was not the JSON error shape (a proxy's HTML page, say),
        /// `http_<status>`.
        code: String,
        message: String,
        /// From `Retry-After` on 429 and 503 answers.
        retry_after: Option<Duration>,
    },

    /// The request did not get an answer: DNS, connect, TLS, reset connection, timeout, or a
    /// response body that could not be read or decoded. The message includes the causes
    /// (so `source()` is not set: a reporter walking the chain would print them twice).
    #[error("{}", transport_message(.0))]
    Transport(reqwest::Error),

    /// A local file operation failed. The message includes the I/O error (see `Transport`
    /// for why it is not also the `source()`); [`Error::io_error`] gives it.
    #[error("{context}: {err}")]
    Io { context: String, err: io::Error },

    /// The server answered something the contract does not allow (bad hash, wrong sizes...).
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),

    /// A downloaded block did not match the hash or size its manifest promised.
    #[error("block {index} of `{path}` is corrupt: expected {expected}, got {actual}")]
    Integrity { path: String, index: usize, expected: String, actual: String },

    /// The local file was modified while it was being uploaded; nothing was committed.
    #[error("`{}` changed while it was being uploaded; nothing was committed, run the upload again", .path.display())]
    LocalFileChanged { path: PathBuf },

    /// A name or path that the shared rules reject (detected before any request).
    #[error(transparent)]
    Name(#[from] NameError),

    /// The client was given options or arguments it cannot work with (bad URL, unreadable CA
    /// file, a string that is not a block hash...); detected before any request.
    #[error("{0}")]
    Invalid(String),
}

fn transport_message(e: &reqwest::Error) -> String {
    // reqwest's Display stops at the outermost layer ("error sending request"); the cause
    // (connection refused, certificate unknown...) is what the user needs to see.
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        Error::Transport(e)
    }
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), err: source }
    }

    /// The HTTP status of a server error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's error code (`not_found`, `conflict`, `quota_exceeded`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The server's message for people.
    pub fn server_message(&self) -> Option<&str> {
        match self {
            Error::Api { message, .. } => Some(message),
            _ => None,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The server's error code as the shared enum; None for a local error, a non-JSON answer
    /// or a code this build does not know.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.code().and_then(ErrorCode::parse)
    }

    /// Whether the server answered with `code`.
    pub fn has_code(&self, code: ErrorCode) -> bool {
        self.error_code() == Some(code)
    }

    /// 404: no such file, directory, trash item, user, token or block (in this space).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Any 409: a stale `base_version` (`conflict`), a taken name (`already_exists`), ...
    /// Use [`Error::code`] to tell them apart.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// 409 `conflict`: the file changed on the server since the version an edit started from.
    pub fn is_stale_base(&self) -> bool {
        self.is_conflict() && self.has_code(ErrorCode::Conflict)
    }

    pub fn is_already_exists(&self) -> bool {
        self.has_code(ErrorCode::AlreadyExists)
    }

    /// 401: missing, invalid, expired or revoked token (or wrong credentials at login).
    pub fn is_unauthorized(&self) -> bool {
        self.status() == Some(401)
    }

    /// 403: the caller is not allowed (admin endpoints for non-admins).
    pub fn is_forbidden(&self) -> bool {
        self.status() == Some(403)
    }

    /// 412: an `If-Match` / `If-None-Match` condition failed.
    pub fn is_precondition_failed(&self) -> bool {
        self.status() == Some(412)
    }

    pub fn is_quota_exceeded(&self) -> bool {
        self.has_code(ErrorCode::QuotaExceeded)
    }

    pub fn is_too_many_requests(&self) -> bool {
        self.status() == Some(429)
    }

    pub fn is_not_a_directory(&self) -> bool {
        self.has_code(ErrorCode::NotADirectory)
    }

    pub fn is_a_directory(&self) -> bool {
        self.has_code(ErrorCode::IsADirectory)
    }

    /// The I/O error of a local failure (to tell a closed pipe from a full disk).
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Error::Io { err, .. } => Some(err),
            _ => None,
        }
    }

    /// The request never got an answer (network, TLS, timeout).
    pub fn is_transport(&self) -> bool {
        matches!(self, Error::Transport(_))
    }

    /// Worth trying again as is: no answer, a reset connection, 429, 502, 503, 504.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Transport(e) => e.is_connect() || e.is_timeout() || e.is_request() || e.is_body(),
            Error::Api { status, .. } => matches!(status, 429 | 502 | 503 | 504),
            _ => false,
        }
    }

    /// The TLS handshake failed because the server's certificate is not trusted (self-signed
    /// gateways: pass its certificate as an extra root, or accept invalid certificates).
    pub fn is_certificate_problem(&self) -> bool {
        match self {
            Error::Transport(_) => {
                let text = self.to_string().to_ascii_lowercase();
                text.contains("certificate") || text.contains("unknownissuer") || text.contains("invalid peer")
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, code: &str) -> Error {
        Error::Api { status, code: code.into(), message: "m".into(), retry_after: None }
    }

    #[test]
    fn classifies_server_errors() {
        assert!(api(404, "not_found").is_not_found());
        assert!(api(409, "conflict").is_stale_base());
        assert!(api(409, "already_exists").is_conflict());
        assert!(!api(409, "already_exists").is_stale_base());
        assert!(api(413, "quota_exceeded").is_quota_exceeded());
        assert!(api(503, "store_unavailable").is_transient());
        assert!(!api(400, "bad_request").is_transient());
        assert_eq!(api(401, "unauthorized").to_string(), "m (unauthorized, HTTP 401)");
        assert_eq!(api(400, "missing_blocks").error_code(), Some(ErrorCode::MissingBlocks));
        // A code from a newer gateway or a proxy's page: kept as text, not typed.
        assert_eq!(api(409, "some_new_code").error_code(), None);
        assert_eq!(api(502, "http_502").code(), Some("http_502"));
        assert!(!api(409, "some_new_code").is_stale_base());
    }
}
