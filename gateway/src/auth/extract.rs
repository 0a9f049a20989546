//! Request identity. A handler that takes `AuthUser` cannot run for an anonymous caller, and
//! one that takes `AdminUser` cannot run for a non-admin.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use nimbus_proto::wire::Role;

use super::AuthState;
use super::token::token_key;
use crate::access::SignInAgain;
use crate::error::ApiError;
use crate::meta::{SpaceId, now_ms};

/// Refresh `last_used_at` at most this often per token (it costs a write).
const TOUCH_INTERVAL_MS: i64 = 60_000;

#[derive(Debug, Clone)]
pub struct AuthUser {
    pub id: i64,
    /// The user's space: what this authentication lets the request reach.
    pub space: SpaceId,
    pub username: String,
    pub role: Role,
    pub token_id: i64,
    pub device: String,
    /// The client's address (behind trusted proxies, the one they name), for the audit log.
    pub ip: Option<IpAddr>,
}

impl AuthUser {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

impl<S: AuthState> FromRequestParts<S> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let SignedIn { user, totp_setup_only } = SignedIn::from_request_parts(parts, state).await?;
        if totp_setup_only {
            return Err(ApiError::TotpSetupRequired);
        }
        Ok(user)
    }
}

/// Any signed-in caller, also one whose token may only set up two-factor sign-in (the
/// administrator requires it and the account has none yet: `--require-totp`). Only the
/// handlers that such a caller needs take this (`/api/v1/me`, `/api/v1/auth/totp*`, logout);
/// everything else takes [`AuthUser`], which refuses such a token with 403
/// `totp_setup_required`.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub user: AuthUser,
    pub totp_setup_only: bool,
}

impl<S: AuthState> FromRequestParts<S> for SignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers).ok_or(ApiError::Unauthorized)?;
        let ip = ClientIp::of(parts, state).0;
        AuthUser::from_token_any(state, token, ip, true).await
    }
}

/// The token of an `Authorization: Bearer` header. The scheme's name is case-insensitive
/// (RFC 9110 §11.1).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok())?;
    header
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty() && t.len() <= 256)
}

impl AuthUser {
    /// The user a bearer token stands for: refused if it is unknown, expired, revoked, or its
    /// user is disabled. Shared by every door that takes tokens (REST, WebDAV). `ip` (the
    /// client's address) is recorded with the token's last use for the device list. Never
    /// throttled: a token is 256 random bits, there is nothing to guess.
    pub async fn from_token(state: &impl AuthState, token: &str, ip: Option<IpAddr>) -> Result<AuthUser, ApiError> {
        let SignedIn { user, totp_setup_only } = Self::from_token_any(state, token, ip, true).await?;
        if totp_setup_only {
            return Err(ApiError::TotpSetupRequired);
        }
        Ok(user)
    }

    /// The caller of a request authenticated by `Authorization: Bearer`, signed in again at an
    /// upload's end (see [`crate::access::StillAllowed`]): the token must still be valid and
    /// its user enabled. Records no use. The headers are read now, the token checked when the
    /// returned future runs.
    pub fn again<S: AuthState + Clone + Send + Sync + 'static>(state: &S, headers: &HeaderMap) -> SignInAgain {
        let (state, token) = (state.clone(), bearer(headers).map(str::to_string));
        Box::pin(async move {
            let token = token.ok_or(ApiError::Unauthorized)?;
            let SignedIn { user, totp_setup_only } = Self::from_token_any(&state, &token, None, false).await?;
            if totp_setup_only {
                return Err(ApiError::TotpSetupRequired);
            }
            Ok(user.space)
        })
    }

    /// [`AuthUser::from_token`], also for a token that may only set up two-factor sign-in,
    /// from the client address `ip`. With `record`, the token's use is recorded.
    async fn from_token_any(
        state: &impl AuthState,
        token: &str,
        ip: Option<IpAddr>,
        record: bool,
    ) -> Result<SignedIn, ApiError> {
        if token.is_empty() || token.len() > 256 {
            return Err(ApiError::Unauthorized);
        }
        // Found by the hash of the secret; the secret itself is never compared or logged.
        let key = token_key(token);
        let row = state.meta().token_auth(&key).await?.ok_or(ApiError::Unauthorized)?;
        let now = now_ms();
        if row.revoked_at.is_some() || row.expires_at <= now || row.disabled {
            return Err(ApiError::Unauthorized);
        }
        if record && row.last_used_at.is_none_or(|t| now - t > TOUCH_INTERVAL_MS) {
            let ip = ip.map(|i| i.to_string());
            state.meta().mark_token_used(&key, now, ip.as_deref());
            let meta = state.meta().clone();
            let id = row.token_id;
            tokio::spawn(async move {
                if let Err(e) = meta.touch_token(id, ip.as_deref()).await {
                    tracing::debug!(error = %e, "could not record token use");
                }
            });
        }
        let user = AuthUser {
            id: row.user_id,
            space: SpaceId::authenticated(row.user_id),
            username: row.username.clone(),
            role: Role::parse(&row.role).unwrap_or(Role::User),
            token_id: row.token_id,
            device: row.device.clone(),
            ip,
        };
        Ok(SignedIn { user, totp_setup_only: row.totp_setup_only })
    }
}

/// An authenticated administrator.
#[derive(Debug, Clone)]
pub struct AdminUser(pub AuthUser);

impl<S: AuthState> FromRequestParts<S> for AdminUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let user = AuthUser::from_request_parts(parts, state).await?;
        if !user.is_admin() {
            return Err(ApiError::Forbidden("this needs an administrator account".into()));
        }
        Ok(AdminUser(user))
    }
}

/// The client's address (for throttling, the audit log and the device list): the peer of the
/// connection, or behind a trusted proxy (`--trusted-proxies`) the client it forwarded for
/// (see `forwarded.rs`). None only without a socket (tests driving the router directly).
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub Option<IpAddr>);

impl ClientIp {
    pub fn of(parts: &Parts, state: &impl AuthState) -> ClientIp {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        ClientIp(peer.map(|p| state.trusted_proxies().client_address(p, &parts.headers)))
    }
}

impl<S: AuthState> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientIp::of(parts, state))
    }
}
