//! share and link: sharing with other users, and public links.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use nimbus_client::Error as ClientError;
use nimbus_proto::wire::{
    CreateLinkRequest, CreateShareRequest, EntryKind, LinkInfo, LinkMode, SharePermission, UpdateLinkRequest,
};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Ctx, connect, refuse_file_as_dir, remote};
use crate::cli::{LinkModeArg, PermissionArg};
use crate::outln;
use crate::output::{Align, print_json, print_table, read_stdin_line, short_time};

fn permission(p: PermissionArg) -> SharePermission {
    match p {
        PermissionArg::Read => SharePermission::Read,
        PermissionArg::Write => SharePermission::Write,
    }
}

fn permission_name(p: SharePermission) -> &'static str {
    match p {
        SharePermission::Read => "read",
        SharePermission::Write => "write",
    }
}

fn mode(m: LinkModeArg) -> LinkMode {
    match m {
        LinkModeArg::View => LinkMode::View,
        LinkModeArg::Upload => LinkMode::Upload,
    }
}

/// The server's message of a refusal (it says what is wrong), or the error itself.
fn said(e: ClientError) -> anyhow::Error {
    match e.server_message() {
        Some(m) if !e.is_unauthorized() => anyhow!("{m}"),
        _ => e.into(),
    }
}

/// Who a share is given to, as a listing shows it.
fn with(username: Option<&str>, group: Option<&str>) -> String {
    match (username, group) {
        (Some(u), _) => u.to_string(),
        (None, Some(g)) => format!("group {g}"),
        (None, None) => "?".into(),
    }
}

pub async fn add(ctx: &Ctx, raw: &str, user: Option<&str>, group: Option<&str>, p: PermissionArg) -> Result<()> {
    let path = remote(raw)?;
    let (_, client) = connect()?;
    refuse_file_as_dir(&client, "share", raw, &path).await?;
    let req = CreateShareRequest {
        path: path.to_string(),
        username: user.map(Into::into),
        group: group.map(Into::into),
        permission: permission(p),
    };
    let user = with(user, group);
    let share = match client.create_share(&req).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => bail!("`{path}` is not in your space"),
        Err(e) if e.is_conflict() || e.is_already_exists() => {
            bail!("`{path}` is already shared with {user}; change it with `nimbus share set ID --permission ...`")
        }
        Err(e) => return Err(said(e)),
    };
    if ctx.json {
        return print_json(&share);
    }
    outln!(
        "Shared {} with {} ({}): share {}; they find it under /Shared with me",
        share.path.as_deref().unwrap_or(&path.to_string()),
        with(share.username.as_deref(), share.group.as_deref()),
        permission_name(share.permission),
        share.id
    );
    Ok(())
}

pub async fn list(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let shares = client.shares().await?;
    if ctx.json {
        return print_json(&json!({ "shares": shares }));
    }
    let rows: Vec<Vec<String>> = shares
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                permission_name(s.permission).into(),
                with(s.username.as_deref(), s.group.as_deref()),
                short_time(&s.created),
                s.path.clone().unwrap_or_else(|| "(in the trash)".into()),
            ]
        })
        .collect();
    let header = [
        ("ID", Align::Right),
        ("PERM", Align::Left),
        ("WITH", Align::Left),
        ("CREATED", Align::Left),
        ("PATH", Align::Left),
    ];
    print_table(&header, &rows)?;
    outln!("(times in UTC; shares given to you: `nimbus share incoming`)");
    Ok(())
}

pub async fn incoming(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let shares = client.incoming_shares().await?;
    if ctx.json {
        return print_json(&json!({ "shares": shares }));
    }
    let rows: Vec<Vec<String>> = shares
        .iter()
        .map(|s| {
            let kind = if s.kind == EntryKind::Dir { "folder" } else { "file" };
            vec![
                s.id.to_string(),
                permission_name(s.permission).into(),
                match &s.group {
                    Some(g) => format!("{} (group {g})", s.owner),
                    None => s.owner.clone(),
                },
                kind.into(),
                format!("/Shared with me/{}", s.name),
            ]
        })
        .collect();
    let header = [
        ("ID", Align::Right),
        ("PERM", Align::Left),
        ("FROM", Align::Left),
        ("KIND", Align::Left),
        ("PATH", Align::Left),
    ];
    print_table(&header, &rows)?;
    outln!("(leave one with `nimbus share rm ID`)");
    Ok(())
}

pub async fn set(ctx: &Ctx, id: i64, p: PermissionArg) -> Result<()> {
    let (_, client) = connect()?;
    let share = match client.update_share(id, permission(p)).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => bail!("you gave no share with id {id}; `nimbus share ls` lists them"),
        Err(e) if e.is_forbidden() => bail!("share {id} was given to you: only its owner changes it"),
        Err(e) => return Err(said(e)),
    };
    if ctx.json {
        return print_json(&share);
    }
    let to = with(share.username.as_deref(), share.group.as_deref());
    outln!("Share {id} with {to} is now {}", permission_name(share.permission));
    Ok(())
}

pub async fn rm(ctx: &Ctx, id: i64) -> Result<()> {
    let (_, client) = connect()?;
    match client.delete_share(id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {
            bail!(
                "no share with id {id} was given by or to you; `nimbus share ls` and `nimbus share incoming` list them"
            )
        }
        Err(e) => return Err(said(e)),
    }
    if ctx.json {
        return print_json(&json!({ "removed": id }));
    }
    outln!("Share {id} ended");
    Ok(())
}

/// A link's password from `file` (`-`: standard input): its first line.
fn password_from(file: &Path) -> Result<String> {
    let line = if file == Path::new("-") {
        read_stdin_line().context("cannot read the password from standard input")?
    } else {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
        text.lines().next().unwrap_or("").to_string()
    };
    let line = line.trim_end_matches(['\r', '\n']).to_string();
    if line.is_empty() {
        bail!("{} holds no password (the first line is empty)", file.display());
    }
    Ok(line)
}

/// `WHEN` of `--expires`: an RFC 3339 time, or a span from now (`30m`, `12h`, `7d`).
fn expiry(when: &str, now: OffsetDateTime) -> Result<String> {
    let w = when.trim();
    let span = |n: &str, unit: i64| -> Option<time::Duration> {
        let n: i64 = n.parse().ok().filter(|n| *n > 0)?;
        Some(time::Duration::seconds(n.checked_mul(unit)?))
    };
    let d = match w.char_indices().last() {
        Some((i, 'm')) => span(&w[..i], 60),
        Some((i, 'h')) => span(&w[..i], 3600),
        Some((i, 'd')) => span(&w[..i], 86_400),
        _ => None,
    };
    let at = match d {
        Some(d) => now.checked_add(d).ok_or_else(|| anyhow!("`{when}` is too far away"))?,
        None => OffsetDateTime::parse(w, &Rfc3339).map_err(|_| {
            anyhow!("`{when}` is neither a time like 2026-12-31T18:00:00Z nor a span like 30m, 12h or 7d")
        })?,
    };
    Ok(at.format(&Rfc3339)?)
}

fn print_link(l: &LinkInfo) -> Result<()> {
    outln!("{}", l.url);
    let mut about = vec![format!("link {}", l.id), l.mode.as_str().to_string(), l.path.clone()];
    if l.has_password {
        about.push("password".into());
    }
    if let Some(e) = &l.expires_at {
        about.push(format!("expires {} UTC", short_time(e)));
    }
    if let Some(m) = l.max_downloads {
        about.push(format!("{} of {m} downloads", l.downloads));
    }
    outln!("({})", about.join(", "));
    Ok(())
}

/// What the server said about a link refused, with the cases a user can fix named.
fn link_error(e: ClientError, id: Option<i64>) -> anyhow::Error {
    match (id, e.is_not_found()) {
        (Some(id), true) => anyhow!("you have no link with id {id}; `nimbus link ls` lists them"),
        (None, true) => anyhow!("{}", e.server_message().unwrap_or("no such file or folder in your space")),
        _ => said(e),
    }
}

pub async fn link_create(
    ctx: &Ctx,
    path: &str,
    m: LinkModeArg,
    password_file: Option<&Path>,
    expires: Option<&str>,
    max_downloads: Option<u64>,
) -> Result<()> {
    let raw = path;
    let path = remote(raw)?;
    let password = password_file.map(password_from).transpose()?;
    let expires_at = expires.map(|w| expiry(w, OffsetDateTime::now_utc())).transpose()?;
    let (_, client) = connect()?;
    refuse_file_as_dir(&client, "link", raw, &path).await?;
    let req = CreateLinkRequest { path: path.to_string(), mode: mode(m), password, expires_at, max_downloads };
    let link = client.create_link(&req).await.map_err(|e| link_error(e, None))?;
    if ctx.json {
        return print_json(&link);
    }
    print_link(&link)
}

pub async fn links(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let links = client.links().await?;
    if ctx.json {
        return print_json(&json!({ "links": links }));
    }
    let rows: Vec<Vec<String>> = links
        .iter()
        .map(|l| {
            let mut state = Vec::new();
            if !l.active {
                state.push("inactive".to_string());
            }
            if l.has_password {
                state.push("password".into());
            }
            if let Some(e) = &l.expires_at {
                state.push(format!("until {}", short_time(e)));
            }
            if let Some(m) = l.max_downloads {
                state.push(format!("{}/{m} downloads", l.downloads));
            }
            vec![l.id.to_string(), l.mode.as_str().into(), l.path.clone(), state.join(", "), l.url.clone()]
        })
        .collect();
    let header = [
        ("ID", Align::Right),
        ("MODE", Align::Left),
        ("PATH", Align::Left),
        ("LIMITS", Align::Left),
        ("URL", Align::Left),
    ];
    print_table(&header, &rows)?;
    outln!("(times in UTC; revoke one with `nimbus link rm ID`)");
    Ok(())
}

/// What `nimbus link set` changes.
pub struct LinkChange {
    pub mode: Option<LinkModeArg>,
    pub password_file: Option<PathBuf>,
    pub no_password: bool,
    pub expires: Option<String>,
    pub no_expiry: bool,
    pub max_downloads: Option<u64>,
    pub no_limit: bool,
}

pub async fn link_set(ctx: &Ctx, id: i64, c: LinkChange) -> Result<()> {
    let password = match (c.password_file, c.no_password) {
        (Some(f), _) => Some(Some(password_from(&f)?)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let expires_at = match (c.expires, c.no_expiry) {
        (Some(w), _) => Some(Some(expiry(&w, OffsetDateTime::now_utc())?)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let max_downloads = match (c.max_downloads, c.no_limit) {
        (Some(n), _) => Some(Some(n)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let req = UpdateLinkRequest { mode: c.mode.map(mode), password, expires_at, max_downloads };
    if req.mode.is_none() && req.password.is_none() && req.expires_at.is_none() && req.max_downloads.is_none() {
        bail!(
            "nothing to change: give --mode, --password-file, --no-password, --expires, --no-expiry, --max-downloads or --no-limit"
        );
    }
    let (_, client) = connect()?;
    let link = client.update_link(id, &req).await.map_err(|e| link_error(e, Some(id)))?;
    if ctx.json {
        return print_json(&link);
    }
    print_link(&link)
}

pub async fn link_rm(ctx: &Ctx, id: i64) -> Result<()> {
    let (_, client) = connect()?;
    client.delete_link(id).await.map_err(|e| link_error(e, Some(id)))?;
    if ctx.json {
        return print_json(&json!({ "revoked": id }));
    }
    outln!("Link {id} revoked: it answers 404 from now on");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_takes_times_and_spans() {
        let now = OffsetDateTime::parse("2026-01-02T03:04:05Z", &Rfc3339).expect("time");
        assert_eq!(expiry("30m", now).expect("30m"), "2026-01-02T03:34:05Z");
        assert_eq!(expiry("12h", now).expect("12h"), "2026-01-02T15:04:05Z");
        assert_eq!(expiry("7d", now).expect("7d"), "2026-01-09T03:04:05Z");
        assert_eq!(expiry("2026-12-31T18:00:00Z", now).expect("time"), "2026-12-31T18:00:00Z");
        for bad in ["", "7", "0d", "-1d", "x", "7y", "tomorrow", "99999999999999999d"] {
            assert!(expiry(bad, now).is_err(), "{bad}");
        }
    }
}
