//! What every request handler shares.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::auth::{PasswordGate, Throttle, TrustedProxies};
use crate::blocks::DynStore;
use crate::cache::BlockCache;
use crate::cache::warm::Warmer;
use crate::meta::Meta;

/// What every handler shares. A handle: axum clones the state for every extractor of every
/// request, and one reference count is far cheaper than one per field (a profile of hot 4 KiB
/// reads spent about 8 % of the gateway's time cloning and dropping the fields one by one).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    pub meta: Meta,
    pub store: DynStore,
    pub cache: Arc<BlockCache>,
    pub warmer: Arc<Warmer>,
    pub throttle: Arc<Throttle>,
    /// Bounds concurrent password hashing (sign-ins, WebDAV passwords, admin password sets).
    pub passwords: Arc<PasswordGate>,
    pub metrics: PrometheusHandle,
    /// The last hour of request rate and cache hit ratio, for the console's charts.
    pub history: Arc<crate::metrics::history::History>,
    pub settings: Arc<Settings>,
    /// Seals and opens stored S3 secrets (the server key never enters the database).
    pub s3_sealer: Arc<crate::auth::s3key::SecretSealer>,
    /// The LDAP directory whose accounts sign in here (`--ldap-url`), if any.
    pub ldap: Option<crate::ldap::DynDirectory>,
    /// OpenID Connect single sign-on, when `--oidc-issuer` is set.
    pub oidc: Option<Arc<crate::auth::oidc::Oidc>>,
    /// Bounds the thumbnails made at once (api/thumbnails.rs): each holds its source (at most
    /// `thumbs::MAX_SOURCE_BYTES`) and a decode (at most `thumbs::MAX_ALLOC`).
    pub thumbnails: Arc<tokio::sync::Semaphore>,
    /// Cancelled when graceful shutdown starts. Requests that only wait (the change feed's long
    /// poll) answer at once on it: the drain is for transfers, and would otherwise be held to
    /// its limit by a poll that ends only at its own `wait`.
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl crate::auth::AuthState for AppState {
    fn meta(&self) -> &Meta {
        &self.meta
    }

    fn trusted_proxies(&self) -> &TrustedProxies {
        &self.settings.trusted_proxies
    }
}

/// Runtime settings derived from the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub block_size: u64,
    pub token_ttl_secs: u64,
    /// `--link-max-expiry`: the longest a public link may live.
    pub link_max_expiry: Option<std::time::Duration>,
    pub default_quota: Option<u64>,
    /// Block uploads in flight per streaming PUT (memory: this many blocks + one buffering).
    pub upload_parallelism: usize,
    /// Where the admin console's built files are (`--admin-ui-dir`); None: inside the binary.
    pub admin_ui_dir: Option<std::path::PathBuf>,
    /// Where the users' web app's built files are (`--web-ui-dir`); None: inside the binary.
    pub web_ui_dir: Option<std::path::PathBuf>,
    /// The gateway itself serves TLS: the WebDAV door accepts account passwords only then.
    pub tls: bool,
    /// How long older versions and trash items are kept (shown in `/api/v1/info`).
    pub retention: crate::meta::Retention,
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxies`).
    pub trusted_proxies: TrustedProxies,
    /// Who must use two-factor sign-in (`--require-totp`).
    pub require_totp: crate::auth::totp::RequireTotp,
}
