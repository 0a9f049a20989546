//! What can go wrong in a bench run.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A read returned bytes other than those written: the run fails.
    #[error("verification failed on {target}: {what} returned wrong data (BLAKE3 {got}, expected {expected})")]
    Verify { target: String, what: String, got: String, expected: String },
    #[error("invalid job: {0}")]
    Job(String),
    #[error("{0}")]
    Unsafe(String),
    #[error("{target}: {message}")]
    Target { target: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("gateway: {0}")]
    Gateway(#[from] nimbus_client::Error),
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }
    pub fn target(target: &str, message: impl std::fmt::Display) -> Self {
        Error::Target { target: target.to_string(), message: message.to_string() }
    }
}
