//! login, logout, whoami, tokens.

use anyhow::{Context, Result, anyhow, bail};
use nimbus_client::{Client, ClientOptions};
use nimbus_proto::wire::ErrorCode;
use serde_json::json;

use super::{Ctx, connect};
use crate::cli::LoginArgs;
use crate::outln;
use crate::output::{Align, human_bytes, print_json, print_table, read_stdin_line, short_time};
use crate::session::{self, Session, user_agent};

pub async fn login(ctx: &Ctx, args: LoginArgs) -> Result<()> {
    let url = nimbus_client::normalize_base_url(&args.url)?;
    let ca_cert = match &args.ca_cert {
        Some(p) => Some(
            std::fs::canonicalize(p).with_context(|| format!("cannot find the certificate file `{}`", p.display()))?,
        ),
        None => None,
    };
    let opts = ClientOptions {
        base_url: url.clone(),
        token: None,
        ca_cert: ca_cert.clone(),
        danger_accept_invalid_certs: args.insecure,
        user_agent: Some(user_agent()),
    };
    let client = Client::new(opts)?;
    if args.insecure {
        eprintln!(
            "warning: --insecure: the gateway's certificate is not checked; anyone on the network path can read and change your traffic"
        );
    }
    // A first request that needs no credentials: a wrong address or an untrusted
    // certificate is reported before the user types a password.
    client.info().await.with_context(|| format!("cannot reach a Nimbus gateway at {url}"))?;

    let device = args.device.clone().unwrap_or_else(default_device);
    let resp = if args.sso {
        sso_login(&client, &device, args.no_browser).await?
    } else {
        password_login(&client, &url, args.username, &device, args.totp).await?
    };
    save_session(ctx, url, resp, ca_cert, args.insecure).await
}

/// `--sso`: the system browser, a loopback redirect, a device token (nimbus_client::sso).
async fn sso_login(client: &Client, device: &str, no_browser: bool) -> Result<nimbus_client::wire::LoginResponse> {
    match client.auth_methods().await {
        Ok(m) if !m.oidc => bail!("{} does not offer single sign-on; sign in with a username", client.base_url()),
        _ => {}
    }
    let no_browser = no_browser || std::env::var_os("NIMBUS_NO_BROWSER").is_some_and(|v| !v.is_empty());
    let resp = nimbus_client::sso::sign_in(client, device, |url| {
        let opened = !no_browser && nimbus_client::sso::open_browser(url);
        if opened {
            eprintln!("Opened your browser to sign in. If it did not open, go to:\n  {url}");
        } else {
            eprintln!("Open this address in a browser on this computer to sign in:\n  {url}");
        }
        opened
    })
    .await
    .context("single sign-on failed")?;
    Ok(resp)
}

async fn password_login(
    client: &Client,
    url: &str,
    username: Option<String>,
    device: &str,
    totp: Option<String>,
) -> Result<nimbus_client::wire::LoginResponse> {
    let username = match username {
        Some(u) => u,
        None => {
            eprint!("Username: ");
            read_stdin_line()?.trim().to_string()
        }
    };
    if username.is_empty() {
        bail!("no username given: pass --username NAME");
    }
    let password = match std::env::var("NIMBUS_PASSWORD") {
        Ok(p) if !p.is_empty() => p,
        _ => rpassword::prompt_password(format!("Password for {username}: "))
            .map_err(|e| anyhow!("cannot read the password ({e}): set NIMBUS_PASSWORD or run in a terminal"))?,
    };
    let totp = totp.or_else(|| std::env::var("NIMBUS_TOTP").ok()).filter(|c| !c.trim().is_empty());
    let mut attempt = client.login_with_totp(&username, &password, Some(device), totp.as_deref()).await;
    if let Err(e) = &attempt
        && e.has_code(ErrorCode::TotpRequired)
        && totp.is_none()
        && std::io::IsTerminal::is_terminal(&std::io::stdin())
    {
        eprint!("Two-factor code (or a recovery code): ");
        let code = read_stdin_line()?.trim().to_string();
        if code.is_empty() {
            bail!("{username} signs in with two factors: pass --totp CODE (or set NIMBUS_TOTP)");
        }
        attempt = client.login_with_totp(&username, &password, Some(device), Some(&code)).await;
    }
    let resp = match attempt {
        Ok(r) => r,
        Err(e) if e.has_code(ErrorCode::TotpRequired) => {
            bail!("{username} signs in with two factors: pass --totp CODE (or set NIMBUS_TOTP)")
        }
        Err(e) if e.is_unauthorized() && totp.is_some() => {
            bail!("wrong username, password or two-factor code for {url} (or the account is disabled)")
        }
        Err(e) if e.is_unauthorized() => bail!("wrong username or password for {url} (or the account is disabled)"),
        Err(e) if e.is_too_many_requests() => {
            let wait =
                e.retry_after().map(|d| format!(" in {} seconds", d.as_secs())).unwrap_or_else(|| " later".into());
            bail!("too many login attempts: try again{wait}");
        }
        Err(e) => return Err(e).context("login failed"),
    };
    if resp.totp_setup_required {
        // This token could only set two-factor up: no use to the CLI, so give it back.
        let _ = client.clone().with_token(&resp.token).logout().await;
        bail!(
            "the gateway requires two-factor sign-in for {username}: set it up first (in the web app or the \
             admin console), then log in again with --totp CODE"
        );
    }
    Ok(resp)
}

async fn save_session(
    ctx: &Ctx,
    url: String,
    resp: nimbus_client::wire::LoginResponse,
    ca_cert: Option<std::path::PathBuf>,
    insecure: bool,
) -> Result<()> {
    // The previous session's token would stay valid until it expires: sign it out.
    if let Ok(Some(old)) = session::load()
        && let Ok(old_client) = old.client()
    {
        let _ = old_client.logout().await;
    }

    let session =
        Session { url: url.clone(), token: resp.token, username: resp.user.username.clone(), ca_cert, insecure };
    let path = session::save(&session)?;
    if ctx.json {
        print_json(&json!({"url": url, "user": resp.user, "expires_at": resp.expires_at, "session_file": path}))?;
    } else {
        outln!("Logged in to {url} as {}", resp.user.username);
    }
    Ok(())
}

fn default_device() -> String {
    let host = ["HOSTNAME", "COMPUTERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "unknown host".into());
    format!("nimbus-cli on {host}")
}

pub async fn logout(ctx: &Ctx) -> Result<()> {
    let Some(session) = session::load()? else {
        outln!("Not logged in.");
        return Ok(());
    };
    let mut warning = None;
    match session.client() {
        Ok(client) => match client.logout().await {
            Ok(()) => {}
            // Already expired or revoked: nothing left to revoke.
            Err(e) if e.is_unauthorized() => {}
            Err(e) => {
                warning =
                    Some(format!("could not revoke the token on the server ({e}); it stays valid until it expires"))
            }
        },
        Err(e) => warning = Some(format!("{e:#}")),
    }
    session::remove()?;
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    if ctx.json {
        print_json(&json!({"url": session.url, "revoked": warning.is_none()}))?;
    } else {
        outln!("Logged out of {}", session.url);
    }
    Ok(())
}

pub async fn whoami(ctx: &Ctx) -> Result<()> {
    let (session, client) = connect()?;
    let me = client.me().await?;
    if ctx.json {
        print_json(
            &json!({"url": session.url, "id": me.id, "username": me.username, "role": me.role, "quota_bytes": me.quota_bytes, "used_bytes": me.used_bytes, "usage": me.usage}),
        )?;
        return Ok(());
    }
    outln!("{} ({}) on {}", me.username, me.role.as_str(), session.url);
    match me.quota_bytes {
        Some(q) if q > 0 => {
            let pct = me.used_bytes as f64 * 100.0 / q as f64;
            outln!("used {} of {} ({pct:.0}%)", human_bytes(me.used_bytes), human_bytes(q));
        }
        Some(q) => outln!("used {} of {}", human_bytes(me.used_bytes), human_bytes(q)),
        None => outln!("used {} (no quota)", human_bytes(me.used_bytes)),
    }
    let u = me.usage;
    outln!(
        "  files {}, older versions {}, trash {}, uploads in progress {}",
        human_bytes(u.current),
        human_bytes(u.versions),
        human_bytes(u.trash),
        human_bytes(u.pending)
    );
    Ok(())
}

pub async fn tokens(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let tokens = client.tokens().await?;
    if ctx.json {
        return print_json(&tokens);
    }
    let rows: Vec<Vec<String>> = tokens
        .iter()
        .map(|t| {
            vec![
                t.id.to_string(),
                short_time(&t.created),
                t.last_used.as_deref().map(short_time).unwrap_or_else(|| "-".into()),
                t.last_ip.clone().unwrap_or_else(|| "-".into()),
                short_time(&t.expires_at),
                if t.current { format!("{} (this device)", t.device) } else { t.device.clone() },
            ]
        })
        .collect();
    let header = [
        ("ID", Align::Right),
        ("CREATED", Align::Left),
        ("LAST USED", Align::Left),
        ("FROM", Align::Left),
        ("EXPIRES", Align::Left),
        ("DEVICE", Align::Left),
    ];
    print_table(&header, &rows)?;
    outln!("(times in UTC; sign a device out with `nimbus tokens revoke ID`)");
    Ok(())
}

pub async fn revoke(ctx: &Ctx, id: i64) -> Result<()> {
    let (_, client) = connect()?;
    match client.revoke_token(id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => bail!("you have no token with id {id}; `nimbus tokens` lists them"),
        Err(e) => return Err(e.into()),
    }
    if ctx.json {
        print_json(&json!({"revoked": id}))
    } else {
        outln!("Signed out token {id}");
        Ok(())
    }
}
