//! Authentication: argon2id passwords (hashed under a concurrency bound), opaque bearer tokens
//! stored hashed, sign-in throttling per client address, the client address itself (behind
//! trusted proxies), two-factor sign-in (TOTP), and the extractors (`AuthUser`, `AdminUser`) that make a handler
//! impossible to reach without a valid identity.

mod extract;
mod forwarded;
pub mod oidc;
mod password;
pub mod s3key;
pub mod throttle;
mod token;
pub mod totp;

pub use extract::{AdminUser, AuthUser, ClientIp, SignedIn};

/// What the extractors need from the application's state. A trait so that `auth` does not
/// depend on `state`, which holds auth's parts (`state` implements it for `AppState`).
pub trait AuthState: Send + Sync {
    fn meta(&self) -> &crate::meta::Meta;
    fn trusted_proxies(&self) -> &TrustedProxies;
}
pub use forwarded::{TrustedProxies, client_key};
pub use password::{
    GateError, MIN_PASSWORD_LEN, PasswordError, PasswordGate, generate_password, hash_password, verify_password,
    verify_password_or_dummy,
};
pub use throttle::{Attempt, Throttle};
pub use token::{TOKEN_PREFIX, new_token, token_hash, token_key};
