//! Typed async client for the Nimbus REST API (`/api/v1`, see docs/API.md), shared by the
//! CLI, the mount and the desktop app.
//!
//! - [`Client`]: one method per endpoint, bodies are the wire types of [`nimbus_proto::wire`].
//! - [`Client::upload_file`] / [`Client::download_file`]: the block protocol, resumable and
//!   verified end to end (`upload.rs`, `download.rs`).
//! - [`private_file`]: owner-only, atomically written files (sessions, device tokens).
//! - [`Error`]: what the server said (status, code, message), transport failures, local I/O.
//!
//! ```no_run
//! # async fn demo() -> nimbus_client::Result<()> {
//! use nimbus_client::{Client, ClientOptions, RemotePath};
//! let client = Client::new(ClientOptions::new("https://nimbus.example.com:8443"))?;
//! let login = client.login("alice", "secret", Some("laptop")).await?;
//! let client = client.with_token(login.token);
//! for e in client.list_dir(&RemotePath::parse("/docs")?).await? {
//!     println!("{}", e.name);
//! }
//! # Ok(()) }
//! ```

pub mod client;
pub mod direct;
pub mod download;
pub mod error;
pub mod private_file;
pub mod sso;
pub mod tls;
pub mod upload;

pub use client::{
    AuditQuery, ByteRange, Client, ClientOptions, GetInfo, GetOptions, MAX_MISSING_BATCH, PutCondition,
    normalize_base_url,
};
pub use download::DownloadSummary;
pub use error::{Error, Result};
pub use nimbus_proto::{self as proto, RemotePath, wire};
pub use tls::{ServerCertificate, fetch_certificate};
pub use upload::{BlockReader, PARALLEL_TRANSFERS, Phase, Progress, UploadSummary, block_count, hash_blocks};
