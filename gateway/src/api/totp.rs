//! Two-factor sign-in (TOTP): enrolment, confirmation, turning it off, the administrator's
//! reset, and the step of `POST /api/v1/auth/login` that asks for the second factor
//! ([`second_factor`]). How it works and why: docs/IDENTITY.md, Two-factor sign-in.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use nimbus_proto::names::name_key;
use nimbus_proto::wire::{TotpCode, TotpEnrollment, TotpRecoveryCodes};

use super::Json;
use crate::auth::totp::{self, check_code, recovery_hash, seal_id};
use crate::auth::{AdminUser, Attempt, AuthUser, ClientIp, SignedIn};
use crate::error::{ApiError, ApiResult};
use crate::meta::{NewAudit, UserRow, now_ms};
use crate::state::AppState;

fn now_secs() -> u64 {
    (now_ms().max(0) / 1000) as u64
}

fn secret_of(st: &AppState, user_id: i64, sealed: &str) -> ApiResult<Vec<u8>> {
    let b32 = st
        .s3_sealer
        .open(&seal_id(user_id), sealed)
        .map_err(|e| ApiError::internal(anyhow::Error::new(e).context("a stored TOTP secret does not open")))?;
    base32_decode(&b32)
}

fn base32_decode(b32: &str) -> ApiResult<Vec<u8>> {
    totp_rs::Secret::Encoded(b32.to_string())
        .to_bytes()
        .map_err(|e| ApiError::internal(anyhow::anyhow!("a stored TOTP secret is not base32: {e:?}")))
}

async fn audit(
    st: &AppState,
    user: &AuthUser,
    ip: Option<String>,
    action: &str,
    detail: Option<String>,
) -> ApiResult<()> {
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: action.into(),
            target: Some(user.username.clone()),
            detail,
            ip,
        })
        .await?;
    Ok(())
}

/// Whether `offered` is a right second factor for `user` now: a TOTP code of an unused step
/// (recorded as used), or an unused recovery code (used up, and audited). Wrong answers are
/// not counted here: the callers count them in the sign-in throttle.
async fn accept(st: &AppState, user: &UserRow, offered: &str, ip: Option<&str>) -> ApiResult<bool> {
    let offered = offered.trim();
    if totp::is_code(offered) {
        let Some(row) = st.meta.totp(user.id).await? else { return Ok(false) };
        let Some(sealed) = row.secret else { return Ok(false) };
        let secret = secret_of(st, user.id, &sealed)?;
        let Some(step) = check_code(&secret, offered, now_secs(), row.last_step) else { return Ok(false) };
        return Ok(st.meta.totp_use_step(user.id, step).await?);
    }
    if offered.is_empty() || offered.len() > 64 {
        return Ok(false);
    }
    if !st.meta.totp_use_recovery(user.id, &recovery_hash(user.id, offered)).await? {
        return Ok(false);
    }
    let left = st.meta.totp_recovery_left(user.id).await?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "totp_recovery_used".into(),
            target: Some(user.username.clone()),
            detail: Some(format!("{left} recovery codes left")),
            ip: ip.map(str::to_string),
        })
        .await?;
    Ok(true)
}

/// The second step of a password sign-in, after the password was found right and before any
/// token is issued. Ok(true): sign in with a token that may only set up two-factor sign-in
/// (the administrator requires it and `user` has none yet); Ok(false): a full sign-in.
/// A missing code is 401 `totp_required` (not a failure: the client asks for the code); a
/// wrong one is a failed sign-in for the throttle and 401 `unauthorized`.
pub(super) async fn second_factor(
    st: &AppState,
    user: &UserRow,
    offered: Option<&str>,
    attempt: &Attempt,
    ip: Option<&str>,
) -> ApiResult<bool> {
    if !user.totp_enabled {
        let role = nimbus_proto::wire::Role::parse(&user.role).unwrap_or_default();
        return Ok(st.settings.require_totp.applies_to(role));
    }
    let Some(offered) = offered.map(str::trim).filter(|c| !c.is_empty()) else {
        return Err(ApiError::TotpRequired);
    };
    if accept(st, user, offered, ip).await? {
        return Ok(false);
    }
    st.throttle.failed(attempt).await;
    metrics::counter!("nimbus_logins_total", "result" => "failure").increment(1);
    let _ = st
        .meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "login_failed".into(),
            ip: ip.map(str::to_string),
            detail: Some("wrong two-factor code".into()),
            ..Default::default()
        })
        .await;
    Err(ApiError::Unauthorized)
}

/// A code offered to an account endpoint (confirm, turn off) by a signed-in caller: wrong
/// codes count in the sign-in throttle like wrong passwords, so a stolen token cannot be used
/// to guess codes either.
async fn throttled_check<F, Fut>(st: &AppState, user: &AuthUser, ip: ClientIp, check: F) -> ApiResult<()>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ApiResult<bool>>,
{
    let attempt = st.throttle.begin(&name_key(&user.username), ip.0).await?;
    if check().await? {
        st.throttle.succeeded(&attempt).await;
        return Ok(());
    }
    st.throttle.failed(&attempt).await;
    Err(ApiError::BadRequest("that code is not right (or was already used); try the next one".into()))
}

#[utoipa::path(
    post,
    path = "/api/v1/auth/totp",
    tag = "auth",
    summary = "Start setting up two-factor sign-in: returns the secret for an authenticator app",
    responses(
        (status = 200, description = "enrolment pending until confirmed", body = TotpEnrollment),
        (status = 409, description = "two-factor sign-in is already on")
    )
)]
pub async fn enroll(State(st): State<AppState>, caller: SignedIn) -> ApiResult<Json<TotpEnrollment>> {
    let user = caller.user;
    let row = st.meta.user(user.id).await?.ok_or(ApiError::Unauthorized)?;
    if row.totp_enabled {
        return Err(ApiError::Conflict("two-factor sign-in is already on; turn it off first to set it up anew".into()));
    }
    let secret = totp::new_secret();
    let (b32, url) = totp::provisioning(&secret, &user.username);
    st.meta.totp_set_pending(user.id, &st.s3_sealer.seal(&seal_id(user.id), &b32)).await?;
    Ok(Json(TotpEnrollment { secret: b32, otpauth_url: url }))
}

#[utoipa::path(
    post,
    path = "/api/v1/auth/totp/confirm",
    tag = "auth",
    summary = "Confirm the enrolment with a first code: two-factor sign-in is on; returns recovery codes",
    request_body = TotpCode,
    responses(
        (status = 200, description = "on from now; the recovery codes are shown this once", body = TotpRecoveryCodes),
        (status = 400, description = "wrong code"),
        (status = 409, description = "no enrolment pending, or already on")
    )
)]
pub async fn confirm(
    State(st): State<AppState>,
    caller: SignedIn,
    ip: ClientIp,
    Json(req): Json<TotpCode>,
) -> ApiResult<Json<TotpRecoveryCodes>> {
    let user = caller.user;
    let row = st.meta.user(user.id).await?.ok_or(ApiError::Unauthorized)?;
    if row.totp_enabled {
        return Err(ApiError::Conflict("two-factor sign-in is already on".into()));
    }
    let pending = st
        .meta
        .totp(user.id)
        .await?
        .and_then(|t| t.pending_secret)
        .ok_or_else(|| ApiError::Conflict("no enrolment is pending: POST /api/v1/auth/totp first".into()))?;
    let secret = secret_of(&st, user.id, &pending)?;
    // Checking is free of side effects here (nothing is used up), so it may come first.
    let step = check_code(&secret, req.code.trim(), now_secs(), None);
    throttled_check(&st, &user, ip, || async { Ok(step.is_some()) }).await?;
    let step = step.ok_or_else(|| ApiError::internal(anyhow::anyhow!("a checked code has no step")))?;
    let codes = totp::new_recovery_codes();
    let hashes: Vec<String> = codes.iter().map(|c| recovery_hash(user.id, c)).collect();
    // The first code is used up here: it cannot sign in a second time.
    st.meta.totp_enable(user.id, &pending, step, &hashes).await?;
    if caller.totp_setup_only {
        // This sign-in has now shown both factors: the token becomes a full one.
        st.meta.token_lift_totp_setup(user.token_id).await?;
    }
    audit(&st, &user, ip.0.map(|i| i.to_string()), "totp_enabled", None).await?;
    Ok(Json(TotpRecoveryCodes { recovery_codes: codes }))
}

#[utoipa::path(
    delete,
    path = "/api/v1/auth/totp",
    tag = "auth",
    summary = "Turn two-factor sign-in off (with a current code or a recovery code)",
    request_body = TotpCode,
    responses(
        (status = 204, description = "off"),
        (status = 400, description = "wrong code"),
        (status = 403, description = "the administrator requires two-factor sign-in for this account"),
        (status = 409, description = "it is not on")
    )
)]
pub async fn disable(
    State(st): State<AppState>,
    caller: SignedIn,
    ip: ClientIp,
    Json(req): Json<TotpCode>,
) -> ApiResult<StatusCode> {
    let user = caller.user;
    let row = st.meta.user(user.id).await?.ok_or(ApiError::Unauthorized)?;
    if !row.totp_enabled {
        // Drops a pending enrolment, if any.
        st.meta.totp_disable(user.id).await?;
        return Err(ApiError::Conflict("two-factor sign-in is not on".into()));
    }
    if st.settings.require_totp.applies_to(user.role) {
        return Err(ApiError::Forbidden(
            "your administrator requires two-factor sign-in for your account; it cannot be turned off".into(),
        ));
    }
    let audit_ip = ip.0.map(|i| i.to_string());
    throttled_check(&st, &user, ip, || accept(&st, &row, &req.code, audit_ip.as_deref())).await?;
    st.meta.totp_disable(user.id).await?;
    audit(&st, &user, audit_ip, "totp_disabled", None).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    delete,
    path = "/api/v1/admin/users/{id}/totp",
    tag = "admin",
    summary = "Reset a user's two-factor sign-in (lost phone): off, secrets and recovery codes deleted",
    params(("id" = i64, Path, description = "The user's id")),
    responses((status = 204, description = "reset (also when it was not on)"), (status = 404, description = "no such user"))
)]
pub async fn admin_reset(
    State(st): State<AppState>,
    admin: AdminUser,
    ip: ClientIp,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = super::admin::user_id(&id)?;
    let user = st.meta.user(id).await?.ok_or_else(|| ApiError::NotFound("no such user".into()))?;
    let was_on = st.meta.totp_disable(id).await?;
    let detail = if was_on { "two-factor sign-in was on" } else { "two-factor sign-in was not on" };
    super::admin::audit(&st, &admin, ip, "totp_reset", user.username, Some(detail.into())).await?;
    Ok(StatusCode::NO_CONTENT)
}
