//! Login, logout, tokens, and the caller's own account.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::names::name_key;
use nimbus_proto::wire::{IdentitySource, LoginRequest, LoginResponse, Me, Role, TokenInfo, TokenList, UserRef};

use super::{Json, rfc3339};
use crate::auth::{AuthUser, ClientIp, SignedIn, new_token, verify_password_or_dummy};
use crate::error::{ApiError, ApiResult};
use crate::meta::{NewAudit, TokenRow, UserRow, now_ms};
use crate::state::AppState;

#[utoipa::path(
    post,
    path = "/api/v1/auth/login",
    tag = "auth",
    summary = "Sign in; returns a bearer token",
    request_body = LoginRequest,
    responses(
        (status = 200, description = "success", body = LoginResponse),
        (status = 401, description = "wrong credentials (`unauthorized`), or the account's second factor is missing (`totp_required`)"),
        (status = 429, description = "too many failed sign-ins here")
    ),
    security(())
)]
pub async fn login(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    Json(req): Json<LoginRequest>,
) -> ApiResult<Json<LoginResponse>> {
    // Locked (this name at this address, or this address): 429 before any work.
    let attempt = st.throttle.begin(&name_key(&req.username), ip).await?;
    let user = if req.username.len() <= 64 { st.meta.user_by_name(&req.username).await? } else { None };
    let (user, ok) = match &st.ldap {
        // Not a local account: the directory checks the password (and makes the account).
        Some(dir) if user.as_ref().is_none_or(|u| u.source == crate::ldap::SOURCE) => {
            crate::ldap::sign_in(&st.meta, st.settings.default_quota, dir, &req.username, &req.password, user).await?
        }
        _ => {
            let stored = user.as_ref().map(|u| u.password_hash.clone());
            let password = req.password.clone();
            // Bounded: beyond the hashing limit this is a quick 429 `too_many_requests`, not a queue.
            (user, st.passwords.run(move || verify_password_or_dummy(&password, stored.as_deref())).await?)
        }
    };
    let audit_ip = ip.map(|i| i.to_string());
    let user = match user {
        Some(u) if ok && !u.disabled => u,
        other => {
            st.throttle.failed(&attempt).await;
            metrics::counter!("nimbus_logins_total", "result" => "failure").increment(1);
            let _ = st
                .meta
                .audit(NewAudit {
                    actor_id: other.as_ref().map(|u| u.id),
                    actor: Some(req.username.chars().take(64).collect()),
                    action: "login_failed".into(),
                    ip: audit_ip,
                    detail: other.filter(|u| u.disabled).map(|_| "account disabled".to_string()),
                    ..Default::default()
                })
                .await;
            return Err(ApiError::Unauthorized);
        }
    };
    // Second factor: after the password, before any token (docs/IDENTITY.md, Two-factor).
    let totp_setup_only =
        super::totp::second_factor(&st, &user, req.totp.as_deref(), &attempt, audit_ip.as_deref()).await?;
    st.throttle.succeeded(&attempt).await;
    let device = device_name(req.device.as_deref(), "unnamed device");
    let (token, expires_at) =
        issue_session(&st, &user, &device, audit_ip.as_deref(), Via::Password { totp_setup_only }).await?;
    Ok(Json(LoginResponse {
        token,
        expires_at: rfc3339(expires_at),
        user: UserRef { id: user.id, username: user.username, role: Role::parse(&user.role).unwrap_or_default() },
        totp_setup_required: totp_setup_only,
    }))
}

/// A device's name as the device list shows it: what the client sent without control
/// characters (they would reach terminals and pages as they are), trimmed, at most 100
/// characters; `default` if nothing is left.
pub(super) fn device_name(raw: Option<&str>, default: &str) -> String {
    let clean: String = raw.unwrap_or("").chars().filter(|c| !c.is_control()).collect();
    let name: String = clean.trim().chars().take(100).collect();
    if name.is_empty() { default.to_string() } else { name }
}

/// How a sign-in was made, for the audit entry of the session it opens.
pub(super) enum Via {
    /// `POST /api/v1/auth/login` (LDAP or local password, and the second factor if on);
    /// `totp_setup_only`: the token may only set up two-factor sign-in.
    Password { totp_setup_only: bool },
    /// The end of an OpenID Connect flow (browser or CLI).
    SingleSignOn,
}

/// A new device token for `user` after a complete sign-in: stored (hashed) with its lifetime,
/// counted and audited. Every way of signing in opens its session here. Returns the token and
/// when it expires (ms).
pub(super) async fn issue_session(
    st: &AppState,
    user: &UserRow,
    device: &str,
    ip: Option<&str>,
    via: Via,
) -> ApiResult<(String, i64)> {
    let (token, hash) = new_token();
    let expires_at = now_ms() + (st.settings.token_ttl_secs as i64).saturating_mul(1000);
    let setup_only = matches!(via, Via::Password { totp_setup_only: true });
    st.meta.insert_token_with(user.id, &hash, device, expires_at, ip, setup_only).await?;
    metrics::counter!("nimbus_logins_total", "result" => "success").increment(1);
    let detail = match via {
        Via::Password { totp_setup_only: false } => format!("device: {device}"),
        Via::Password { totp_setup_only: true } => format!("device: {device}; may only set up two-factor sign-in"),
        Via::SingleSignOn => format!("single sign-on, device: {device}"),
    };
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "login".into(),
            detail: Some(detail),
            ip: ip.map(str::to_string),
            ..Default::default()
        })
        .await?;
    Ok((token, expires_at))
}

#[utoipa::path(
    post,
    path = "/api/v1/auth/logout",
    tag = "auth",
    summary = "Revoke the calling token",
    responses((status = 204, description = "revoked"))
)]
pub async fn logout(State(st): State<AppState>, caller: SignedIn, ClientIp(ip): ClientIp) -> ApiResult<StatusCode> {
    let user = caller.user;
    st.meta.revoke_token(user.id, user.token_id).await?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username),
            action: "logout".into(),
            detail: Some(format!("device: {}", user.device)),
            ip: ip.map(|i| i.to_string()),
            ..Default::default()
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/api/v1/auth/tokens",
    tag = "auth",
    summary = "List your live tokens",
    responses((status = 200, description = "success", body = TokenList))
)]
pub async fn list_tokens(State(st): State<AppState>, user: AuthUser) -> ApiResult<Json<TokenList>> {
    let tokens = st.meta.list_tokens(user.id).await?.into_iter().map(|t| token_info(t, Some(user.token_id))).collect();
    Ok(Json(TokenList { tokens }))
}

/// A token as its owner or an administrator sees it; `current` marks the caller's own.
pub(super) fn token_info(t: TokenRow, caller_token: Option<i64>) -> TokenInfo {
    TokenInfo {
        id: t.id,
        device: t.device,
        created: rfc3339(t.created_at),
        expires_at: rfc3339(t.expires_at),
        last_used: t.last_used_at.map(rfc3339),
        last_ip: t.last_ip,
        current: Some(t.id) == caller_token,
    }
}

#[utoipa::path(
    delete,
    path = "/api/v1/auth/tokens/{id}",
    tag = "auth",
    summary = "Revoke one of your tokens",
    params(("id" = i64, Path, description = "The token's id")),
    responses((status = 204, description = "revoked"))
)]
pub async fn revoke_token(State(st): State<AppState>, user: AuthUser, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id: i64 = id.parse().map_err(|_| ApiError::NotFound("no such token".into()))?;
    if st.meta.revoke_token(user.id, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("no such token".into()))
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/me",
    tag = "auth",
    summary = "Your account and usage",
    responses((status = 200, description = "success", body = Me))
)]
pub async fn me(State(st): State<AppState>, caller: SignedIn) -> ApiResult<Json<Me>> {
    let user = caller.user;
    let u = st.meta.user(user.id).await?.ok_or(ApiError::Unauthorized)?;
    let usage = super::usage_breakdown(&u);
    // The same rule `DELETE /api/v1/auth/totp` applies, so a page can say so before trying.
    let required = st.settings.require_totp.applies_to(user.role);
    Ok(Json(Me {
        id: u.id,
        username: u.username,
        role: user.role,
        quota_bytes: u.quota_bytes.map(|q| q.max(0) as u64),
        used_bytes: u.used_bytes.max(0) as u64,
        usage,
        totp: u.totp_enabled,
        source: IdentitySource::parse(&u.source).unwrap_or_default(),
        totp_setup_required: !u.totp_enabled && required,
        totp_required: required,
        email: u.email,
        display_name: u.display_name,
    }))
}

#[cfg(test)]
mod tests {
    use super::device_name;

    #[test]
    fn device_names_lose_control_characters_and_keep_to_100() {
        assert_eq!(device_name(Some("  laptop  "), "d"), "laptop");
        assert_eq!(device_name(Some("\u{0}\u{1b}[31mred\r\n"), "d"), "[31mred");
        assert_eq!(device_name(Some("\u{7}\t\n"), "d"), "d");
        assert_eq!(device_name(None, "d"), "d");
        assert_eq!(device_name(Some(&"é".repeat(150)), "d").chars().count(), 100);
    }
}
