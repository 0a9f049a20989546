//! OpenID Connect single sign-on, the Nimbus side (docs/IDENTITY.md): the browser flow's two
//! routes, the trade of a client's one-time code for a device token (RFC 8252 loopback
//! sign-in of the CLI and desktop app), and which sign-in methods the gateway offers.
//!
//! Browser flow: `/start?return=/admin/` → the provider → `/callback` → a redirect to
//! `<return>#sso_token=<token>&expires_at=<rfc3339>` (the page reads and clears its hash), or
//! `<return>#sso_error=<message>`. A client flow (`/start?cli_redirect=http://127.0.0.1:PORT/..
//! &cli_challenge=<S256>`) ends at its loopback with `?code=<one-time code>` (or `?error=`).

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nimbus_proto::names::validate_username;
use nimbus_proto::wire::{AuthMethods, LoginResponse, OidcTokenRequest, Role, UserRef};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use rand::RngCore;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::{Via, issue_session};
use super::{Json, Query, rfc3339};
use crate::auth::oidc::OidcProvision;
use crate::auth::oidc::{CALLBACK_PATH, NO_PASSWORD, Oidc, OidcError, claim_has_any, claim_text};
use crate::auth::{ClientIp, token_hash};
use crate::error::{ApiError, ApiResult};
use crate::meta::{NewAudit, OidcFlow, UserRow, UserUpdate, now_ms};
use crate::state::AppState;

/// How long a browser has from `/start` to the callback.
const FLOW_TTL_MS: i64 = 10 * 60 * 1000;
/// Flows in progress at once, all gateways together: `/start` needs no sign-in, so this bounds
/// what anonymous callers can make the database hold. Beyond it, `/start` answers 429.
pub const MAX_FLOWS: i64 = 10_000;
/// How long a client has to trade its one-time code.
const CODE_TTL_MS: i64 = 2 * 60 * 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StartQuery {
    /// Where the browser goes afterwards: a path on this gateway (`/admin/`, `/`), default `/`.
    #[serde(rename = "return")]
    pub return_to: Option<String>,
    /// A command-line or desktop client's loopback URL (`http://127.0.0.1:PORT/...`).
    pub cli_redirect: Option<String>,
    /// With `cli_redirect`: the client's PKCE challenge (S256, base64url of SHA-256).
    pub cli_challenge: Option<String>,
    /// With `cli_redirect`: the name of the device token it will get.
    pub device: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    pub state: Option<String>,
    pub code: Option<String>,
    /// The provider's refusal (`access_denied`, ...).
    pub error: Option<String>,
    pub error_description: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/auth/methods",
    tag = "auth",
    summary = "The ways to sign in this gateway offers",
    responses((status = 200, description = "success", body = AuthMethods)),
    security(())
)]
pub async fn methods(State(st): State<AppState>) -> Json<AuthMethods> {
    Json(AuthMethods { password: true, oidc: st.oidc.is_some() })
}

#[utoipa::path(
    get,
    path = "/api/v1/auth/oidc/start",
    tag = "auth",
    summary = "Begin single sign-on: redirects the browser to the identity provider",
    params(StartQuery),
    responses(
        (status = 303, description = "to the identity provider (or back with `#sso_error=`: single sign-on not configured, the provider unreachable)"),
        (status = 400, description = "a `return` that is not a path here, or a bad client redirect", body = nimbus_proto::wire::ErrorBody),
        (status = 429, description = "too many sign-ins in progress", body = nimbus_proto::wire::ErrorBody)
    ),
    security(())
)]
pub async fn start(State(st): State<AppState>, parts: Parts, Query(q): Query<StartQuery>) -> ApiResult<Response> {
    let return_to = match q.return_to.as_deref() {
        None | Some("") => "/".to_string(),
        Some(r) => same_origin_path(r)?.to_string(),
    };
    let (cli_redirect, cli_challenge, device) = match (q.cli_redirect, q.cli_challenge) {
        (None, None) => (None, None, None),
        (Some(r), Some(c)) => {
            let r = loopback_url(&r)?;
            if !(43..=128).contains(&c.len()) || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(ApiError::BadRequest("cli_challenge must be an S256 PKCE challenge (base64url)".into()));
            }
            let device = super::auth::device_name(q.device.as_deref(), "command line (single sign-on)");
            (Some(r), Some(c), Some(device))
        }
        _ => return Err(ApiError::BadRequest("cli_redirect and cli_challenge go together".into())),
    };
    let target = Target { return_to: return_to.clone(), cli_redirect: cli_redirect.clone() };
    let Some(oidc) = st.oidc.clone() else {
        return Ok(target.fail("single sign-on is not configured on this server"));
    };
    let base = super::links::base_url(&st, &parts);
    let redirect_uri = oidc.redirect_uri(&base);
    let started = match oidc.start(&redirect_uri).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "single sign-on cannot start");
            return Ok(target.fail(&e.to_string()));
        }
    };
    // The flow belongs to this browser: a cookie only it holds must come back with the callback.
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let browser_secret = URL_SAFE_NO_PAD.encode(raw);
    let cookie = format!(
        "{}={browser_secret}; Path={CALLBACK_PATH}; Max-Age={}; HttpOnly; SameSite=Lax{}",
        cookie_name(&started.state),
        FLOW_TTL_MS / 1000,
        if base.starts_with("https:") { "; Secure" } else { "" }
    );
    let flow = OidcFlow {
        browser_hash: token_hash(&browser_secret),
        state: started.state,
        pkce_verifier: started.pkce_verifier,
        nonce: started.nonce,
        redirect_uri,
        return_to,
        cli_redirect,
        cli_challenge,
        device,
        expires_at: now_ms() + FLOW_TTL_MS,
    };
    if !st.meta.insert_oidc_flow(&flow, MAX_FLOWS).await? {
        return Err(ApiError::TooManyRequests { retry_after: 60 });
    }
    let mut resp = see_other(&started.url);
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(resp)
}

/// The cookie of one flow: named after its state, so that flows begun in two tabs do not
/// overwrite each other's.
fn cookie_name(state: &str) -> String {
    format!("nimbus_sso_{}", &token_hash(state)[..16])
}

/// The value of the cookie `name` in the request's `Cookie` headers.
fn cookie_value<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}

#[utoipa::path(
    get,
    path = "/api/v1/auth/oidc/callback",
    tag = "auth",
    summary = "End single sign-on (the identity provider sends the browser here)",
    params(CallbackQuery),
    responses(
        (status = 303, description = "to the page that started the sign-in, with `#sso_token=` or `#sso_error=` (a client's loopback: `?code=` or `?error=`)"),
        (status = 400, description = "an unknown, used or expired sign-in (state), one from another browser, or single sign-on not configured: an HTML page that says so")
    ),
    security(())
)]
pub async fn callback(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: axum::http::HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> ApiResult<Response> {
    let Some(oidc) = st.oidc.clone() else {
        return Ok(page(StatusCode::BAD_REQUEST, "Single sign-on is not configured on this server."));
    };
    let flow = match q.state.as_deref() {
        Some(s) if !s.is_empty() && s.len() <= 256 => st.meta.take_oidc_flow(s).await?,
        _ => None,
    };
    let Some(flow) = flow else {
        return Ok(page(
            StatusCode::BAD_REQUEST,
            "This sign-in is unknown, was already used or has expired (its state does not match a sign-in \
             started here). Go back and sign in again.",
        ));
    };
    let from_starter = cookie_value(&headers, &cookie_name(&flow.state)).is_some_and(|c| {
        bool::from(subtle::ConstantTimeEq::ct_eq(token_hash(c).as_bytes(), flow.browser_hash.as_bytes()))
    });
    if !from_starter {
        return Ok(page(
            StatusCode::BAD_REQUEST,
            "This sign-in was started in another browser (or this browser refused its cookie), so it \
             cannot end here. Start the sign-in again in this browser.",
        ));
    }
    let target = Target { return_to: flow.return_to.clone(), cli_redirect: flow.cli_redirect.clone() };
    let audit_ip = ip.map(|i| i.to_string());
    let fail = |actor: Option<(i64, String)>, why: String| {
        let st = st.clone();
        let ip = audit_ip.clone();
        async move {
            metrics::counter!("nimbus_logins_total", "result" => "failure").increment(1);
            let _ = st
                .meta
                .audit(NewAudit {
                    actor_id: actor.as_ref().map(|a| a.0),
                    actor: actor.map(|a| a.1),
                    action: "login_failed".into(),
                    ip,
                    detail: Some(format!("single sign-on: {why}")),
                    ..Default::default()
                })
                .await;
        }
    };
    if let Some(err) = q.error.as_deref() {
        let why = format!(
            "the identity provider did not sign you in: {}{}",
            short(err),
            q.error_description.as_deref().map(|d| format!(" ({})", short(d))).unwrap_or_default()
        );
        fail(None, why.clone()).await;
        return Ok(target.fail(&why));
    }
    let Some(code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        let why = "the identity provider sent no authorization code".to_string();
        fail(None, why.clone()).await;
        return Ok(target.fail(&why));
    };
    let verified = match oidc.finish(code, &flow.pkce_verifier, &flow.nonce, &flow.redirect_uri).await {
        Ok(v) => v,
        Err(e) => {
            match &e {
                OidcError::Unavailable(_) | OidcError::Config(_) => tracing::warn!(error = %e, "single sign-on failed"),
                OidcError::Refused(_) => tracing::info!(error = %e, "single sign-on refused"),
            }
            fail(None, e.to_string()).await;
            return Ok(target.fail(&e.to_string()));
        }
    };
    let user = match account(&st, &oidc, &verified.claims, audit_ip.as_deref()).await? {
        Ok(u) => u,
        Err((who, why)) => {
            fail(who, why.clone()).await;
            return Ok(target.fail(&why));
        }
    };
    tracing::debug!(user = %user.username, subject = %verified.subject, "single sign-on");
    if let (Some(redirect), Some(challenge)) = (&flow.cli_redirect, &flow.cli_challenge) {
        // A client's flow: a one-time code for its loopback; the device token comes when it
        // trades the code with its PKCE verifier (`POST /api/v1/auth/oidc/token`).
        let mut raw = [0u8; 32];
        rand::rng().fill_bytes(&mut raw);
        let code = URL_SAFE_NO_PAD.encode(raw);
        let device = flow.device.as_deref().unwrap_or("command line (single sign-on)");
        st.meta.insert_oidc_code(&token_hash(&code), user.id, challenge, device, now_ms() + CODE_TTL_MS).await?;
        return Ok(see_other(&with_query(redirect, "code", &code)));
    }
    let device = "web browser (single sign-on)";
    let (token, expires_at) = issue_session(&st, &user, device, audit_ip.as_deref(), Via::SingleSignOn).await?;
    let fragment = format!(
        "sso_token={}&expires_at={}",
        utf8_percent_encode(&token, NON_ALPHANUMERIC),
        utf8_percent_encode(&rfc3339(expires_at), NON_ALPHANUMERIC)
    );
    Ok(see_other(&format!("{}#{fragment}", flow.return_to)))
}

#[utoipa::path(
    post,
    path = "/api/v1/auth/oidc/token",
    tag = "auth",
    summary = "Trade a client's one-time single sign-on code for a device token",
    request_body = OidcTokenRequest,
    responses(
        (status = 200, description = "success", body = LoginResponse),
        (status = 400, description = "an unknown, used or expired code, or a verifier that does not match", body = nimbus_proto::wire::ErrorBody)
    ),
    security(())
)]
pub async fn token(
    State(st): State<AppState>,
    ClientIp(ip): ClientIp,
    Json(req): Json<OidcTokenRequest>,
) -> ApiResult<Json<LoginResponse>> {
    configured(&st)?;
    let refused = || ApiError::BadRequest("the sign-in code is unknown, used or expired; sign in again".into());
    if req.code.is_empty() || req.code.len() > 256 || req.code_verifier.len() > 256 {
        return Err(refused());
    }
    let code = st.meta.take_oidc_code(&token_hash(&req.code)).await?.ok_or_else(refused)?;
    let challenge = pkce_s256(&req.code_verifier);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(challenge.as_bytes(), code.cli_challenge.as_bytes())) {
        return Err(refused());
    }
    let user = st.meta.user(code.user_id).await?.filter(|u| !u.disabled).ok_or_else(refused)?;
    let audit_ip = ip.map(|i| i.to_string());
    let (token, expires_at) = issue_session(&st, &user, &code.device, audit_ip.as_deref(), Via::SingleSignOn).await?;
    Ok(Json(LoginResponse {
        token,
        expires_at: rfc3339(expires_at),
        user: UserRef { id: user.id, username: user.username, role: Role::parse(&user.role).unwrap_or_default() },
        // The identity provider is the second factor's place for single sign-on: a Nimbus TOTP
        // is asked only after a Nimbus password (docs/IDENTITY.md).
        totp_setup_required: false,
    }))
}

fn configured(st: &AppState) -> ApiResult<std::sync::Arc<Oidc>> {
    st.oidc.clone().ok_or_else(|| ApiError::NotFound("single sign-on is not configured on this server".into()))
}

/// The Nimbus account for these claims, created, updated or refused per the configuration.
/// `Err((who, why))`: refused, `why` in words for the person signing in.
async fn account(
    st: &AppState,
    oidc: &Oidc,
    claims: &serde_json::Map<String, serde_json::Value>,
    ip: Option<&str>,
) -> ApiResult<Result<UserRow, (Option<(i64, String)>, String)>> {
    let cfg = &oidc.config;
    let Some(username) = claim_text(claims, &cfg.username_claim) else {
        return Ok(Err((None, format!("the identity provider sent no `{}` claim to name you by", cfg.username_claim))));
    };
    if let Err(e) = validate_username(&username) {
        return Ok(Err((
            None,
            format!("`{}` (the `{}` claim) is not a valid Nimbus username: {e}", short(&username), cfg.username_claim),
        )));
    }
    let admin = cfg.admin.as_ref().map(|(claim, values)| claim_has_any(claims, claim, values));
    let who = |u: &UserRow| Some((u.id, u.username.clone()));
    let user = match st.meta.user_by_name(&username).await? {
        Some(u) if u.source != "oidc" => {
            return Ok(Err((
                who(&u),
                format!(
                    "an account named `{}` already exists here and signs in another way ({}); an administrator \
                     must resolve this (single sign-on never takes over an existing account)",
                    u.username, u.source
                ),
            )));
        }
        Some(u) if u.disabled => return Ok(Err((who(&u), "this account is disabled".into()))),
        Some(u) => u,
        None if cfg.provision == OidcProvision::Existing => {
            return Ok(Err((
                None,
                format!("there is no account named `{username}` here; ask an administrator to create it"),
            )));
        }
        None => {
            let role = if admin == Some(true) { Role::Admin } else { Role::User };
            let quota = st.settings.default_quota.map(|q| q.min(i64::MAX as u64) as i64);
            let created = match st.meta.create_user_from(&username, NO_PASSWORD, role.as_str(), quota, "oidc").await {
                Ok(u) => u,
                // Another sign-in created it a moment ago: use that one (it is an `oidc` account
                // only if that sign-in made it; check again).
                Err(crate::meta::MetaError::AlreadyExists(_)) => {
                    return Box::pin(account(st, oidc, claims, ip)).await;
                }
                Err(e) => return Err(e.into()),
            };
            st.meta
                .audit(NewAudit {
                    actor_id: Some(created.id),
                    actor: Some(created.username.clone()),
                    action: "user_create".into(),
                    target: Some(created.username.clone()),
                    detail: Some(format!("at the first single sign-on, role {}", created.role)),
                    ip: ip.map(str::to_string),
                })
                .await?;
            created
        }
    };
    let wanted = match admin {
        Some(true) => Role::Admin,
        Some(false) => Role::User,
        None => return Ok(Ok(user)),
    };
    if user.role == wanted.as_str() {
        return Ok(Ok(user));
    }
    let updated =
        st.meta.update_user(user.id, &UserUpdate { role: Some(wanted.as_str().into()), ..Default::default() }).await?;
    st.meta
        .audit(NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "user_update".into(),
            target: Some(user.username.clone()),
            detail: Some(format!(
                "role {} from the identity provider's `{}` claim",
                wanted.as_str(),
                cfg.admin_claim()
            )),
            ip: ip.map(str::to_string),
        })
        .await?;
    Ok(Ok(updated))
}

/// Where a flow ends: the browser page's path, or a client's loopback URL.
struct Target {
    return_to: String,
    cli_redirect: Option<String>,
}

impl Target {
    /// Ends the flow with `why`: `<return>#sso_error=...` or `<loopback>?error=...`.
    fn fail(&self, why: &str) -> Response {
        match &self.cli_redirect {
            Some(r) => see_other(&with_query(r, "error", why)),
            None => see_other(&format!("{}#sso_error={}", self.return_to, utf8_percent_encode(why, NON_ALPHANUMERIC))),
        }
    }
}

/// A `return` that stays on this origin: an absolute path, not `//host` nor `/\host` (which
/// browsers read as another host), without control characters.
fn same_origin_path(r: &str) -> ApiResult<&str> {
    let bad = !r.starts_with('/')
        || r.starts_with("//")
        || r.starts_with("/\\")
        || r.len() > 512
        || r.chars().any(|c| c.is_control() || c == '#');
    if bad {
        return Err(ApiError::BadRequest("return must be a path on this server, such as /admin/".into()));
    }
    Ok(r)
}

/// A client's loopback redirect (RFC 8252 section 7.3): `http` to 127.0.0.1, [::1] or localhost
/// with a port; anything else would hand the code to another machine.
fn loopback_url(raw: &str) -> ApiResult<String> {
    let bad = || ApiError::BadRequest("cli_redirect must be http://127.0.0.1:PORT/... (a loopback address)".into());
    let url = url::Url::parse(raw).map_err(|_| bad())?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() != "http" || !loopback || url.port().is_none() || url.fragment().is_some() || raw.len() > 512 {
        return Err(bad());
    }
    Ok(url.to_string())
}

fn with_query(base: &str, key: &str, value: &str) -> String {
    match url::Url::parse(base) {
        Ok(mut u) => {
            u.query_pairs_mut().append_pair(key, value);
            u.to_string()
        }
        Err(_) => base.to_string(),
    }
}

/// RFC 7636's S256: base64url(SHA-256(verifier)).
fn pkce_s256(verifier: &str) -> String {
    use sha2::Digest;
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// Text from the provider, cut to a length fit for a message.
fn short(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn see_other(location: &str) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    // The location may carry a token in its fragment: nothing keeps it.
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    resp
}

/// A small page for an ending that has nowhere to go back to (no flow is known).
fn page(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign-in failed · Nimbus</title></head>\
         <body><h1>Sign-in failed</h1><p>{}</p><p><a href=\"/\">Back to Nimbus</a></p></body></html>",
        super::public_links::escape(message)
    );
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_paths_stay_here() {
        for ok in ["/", "/admin/", "/files/a%20b?x=1"] {
            assert!(same_origin_path(ok).is_ok(), "{ok}");
        }
        for bad in ["", "admin", "//evil.example", "/\\evil.example", "https://evil.example/", "/a\nb", "/a#b"] {
            assert!(same_origin_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn client_redirects_are_loopback_only() {
        for ok in ["http://127.0.0.1:4321/callback", "http://[::1]:4321/", "http://localhost:9/x"] {
            assert!(loopback_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1:4321/",
            "http://127.0.0.1/",
            "http://evil.example:80/",
            "http://127.0.0.1.evil.example:80/",
            "http://10.0.0.1:80/",
            "http://127.0.0.1:80/#x",
            "javascript:alert(1)",
        ] {
            assert!(loopback_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pkce_s256_matches_the_oauth_library() {
        // The check of a native client's verifier must agree with how clients make challenges.
        let v = openidconnect::PkceCodeVerifier::new("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gXk-uLNkA".into());
        let c = openidconnect::PkceCodeChallenge::from_code_verifier_sha256(&v);
        assert_eq!(pkce_s256(v.secret()), c.as_str());
        assert_ne!(pkce_s256("another verifier"), c.as_str());
    }

    #[test]
    fn failures_go_back_where_the_flow_began() {
        let browser = Target { return_to: "/admin/".into(), cli_redirect: None };
        let r = browser.fail("no such account");
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()[header::LOCATION], "/admin/#sso_error=no%20such%20account");
        let cli = Target { return_to: "/".into(), cli_redirect: Some("http://127.0.0.1:5000/cb".into()) };
        assert_eq!(cli.fail("no").headers()[header::LOCATION], "http://127.0.0.1:5000/cb?error=no");
    }
}
