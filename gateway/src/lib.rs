//! Nimbus gateway: users, per-user spaces stored as content-addressed blocks, the REST API.
//! See docs/ARCHITECTURE.md for the map.

pub mod access;
pub mod api;
pub mod auth;
pub mod backends;
pub mod blocks;
pub mod browser;
pub mod cache;
pub mod config;
pub mod conn_limits;
pub mod describe;
pub mod doors;
pub mod envelope;
pub mod error;
pub mod headers;
pub mod ldap;
pub mod logfmt;
pub mod meta;
pub mod metrics;
pub mod ops;
pub mod server;
pub mod space;
pub mod state;
pub mod thumbs;
pub mod timefmt;
pub mod tls_client;
