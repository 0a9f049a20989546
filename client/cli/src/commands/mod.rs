//! One module per group of commands. Each command loads the session it needs, calls the
//! client and prints text (or JSON with `--json`). Errors travel up as `anyhow::Error`;
//! `main.rs` adds the hints that apply to any command (expired session, unreachable gateway).

use anyhow::{Result, anyhow};
use nimbus_client::{Client, RemotePath};

use crate::cli::{Cli, Command, KeysAction, LinkAction, ShareAction, TokensAction, TrashAction};
use crate::session::{self, Session};

mod admin;
mod auth;
mod bench;
mod files;
mod keys;
pub mod mount;
mod shares;
mod transfer;
mod trash;
mod versions;

/// What every command may look at.
pub struct Ctx {
    pub json: bool,
}

pub async fn run(cli: Cli) -> Result<()> {
    let ctx = Ctx { json: cli.json };
    match cli.command {
        Command::Login(args) => auth::login(&ctx, args).await,
        Command::Logout => auth::logout(&ctx).await,
        Command::Whoami => auth::whoami(&ctx).await,
        Command::Tokens(args) => match args.action.unwrap_or(TokensAction::List) {
            TokensAction::List => auth::tokens(&ctx).await,
            TokensAction::Revoke { id } => auth::revoke(&ctx, id).await,
        },
        Command::Keys(args) => match args.action.unwrap_or(KeysAction::List) {
            KeysAction::List => keys::list(&ctx).await,
            KeysAction::Create { name } => keys::create(&ctx, name.as_deref()).await,
            KeysAction::Revoke { id } => keys::revoke(&ctx, id).await,
        },
        Command::Ls { path, long } => files::ls(&ctx, path.as_deref().unwrap_or("/"), long).await,
        Command::Mkdir { path } => files::mkdir(&ctx, &path).await,
        Command::Mv { from, to, overwrite } => files::mv_or_cp(&ctx, &from, &to, overwrite, files::Op::Move).await,
        Command::Cp { from, to, overwrite } => files::mv_or_cp(&ctx, &from, &to, overwrite, files::Op::Copy).await,
        Command::Rm { paths } => files::rm(&ctx, &paths).await,
        Command::Put { local, remote, force } => transfer::put(&ctx, &local, remote.as_deref(), force).await,
        Command::Get { remote, local } => transfer::get(&ctx, &remote, local.as_deref()).await,
        Command::Trash(args) => match args.action.unwrap_or(TrashAction::List) {
            TrashAction::List => trash::list(&ctx).await,
            TrashAction::Restore { id, to } => trash::restore(&ctx, id, to.as_deref()).await,
            TrashAction::Purge { id, yes } => trash::purge(&ctx, id, yes).await,
        },
        Command::Versions { path, restore } => match restore {
            None => versions::list(&ctx, &path).await,
            Some(v) => versions::restore(&ctx, &path, v).await,
        },
        Command::Share(args) => match args.action.unwrap_or(ShareAction::Ls) {
            ShareAction::Ls => shares::list(&ctx).await,
            ShareAction::Add { path, user, group, permission } => {
                shares::add(&ctx, &path, user.as_deref(), group.as_deref(), permission).await
            }
            ShareAction::Incoming => shares::incoming(&ctx).await,
            ShareAction::Set { id, permission } => shares::set(&ctx, id, permission).await,
            ShareAction::Rm { id } => shares::rm(&ctx, id).await,
        },
        Command::Link(args) => match args.action.unwrap_or(LinkAction::Ls) {
            LinkAction::Ls => shares::links(&ctx).await,
            LinkAction::Create { path, mode, password_file, expires, max_downloads } => {
                shares::link_create(&ctx, &path, mode, password_file.as_deref(), expires.as_deref(), max_downloads)
                    .await
            }
            LinkAction::Set { id, mode, password_file, no_password, expires, no_expiry, max_downloads, no_limit } => {
                let change = shares::LinkChange {
                    mode,
                    password_file,
                    no_password,
                    expires,
                    no_expiry,
                    max_downloads,
                    no_limit,
                };
                shares::link_set(&ctx, id, change).await
            }
            LinkAction::Rm { id } => shares::link_rm(&ctx, id).await,
        },
        Command::Admin(cmd) => admin::run(&ctx, cmd).await,
        Command::Mount(args) => mount::background(&args).await,
        Command::Unmount { mountpoint } => mount::unmount(&mountpoint).await,
        Command::Status => mount::status(&ctx).await,
        Command::Resolve { file, action, yes } => mount::resolve(&ctx, &file, &action, yes).await,
        Command::Bench(args) => bench::bench(&args).await,
    }
}

/// Parses a remote path with the shared name rules; the error says what is wrong with it.
pub fn remote(raw: &str) -> Result<RemotePath> {
    RemotePath::parse(raw).map_err(|e| anyhow!("`{raw}` is not a valid Nimbus path: {e}"))
}

/// Whether `raw` ends in `/`: as in POSIX, it then names a folder. `RemotePath::parse` drops the
/// slash (URLs need that tolerance), so commands ask here; the root (`/`) is a folder anyway.
pub fn names_dir(raw: &str) -> bool {
    raw.len() > 1 && raw.ends_with('/')
}

/// Refuses `raw` when it ends in `/` and `path` is a file ("Not a directory", as `rm file/`
/// says), before the command changes anything. Looks `path` up only then.
pub async fn refuse_file_as_dir(client: &Client, verb: &str, raw: &str, path: &RemotePath) -> Result<()> {
    if !names_dir(raw) {
        return Ok(());
    }
    match stat_opt(client, path).await? {
        Some(e) if e.kind == nimbus_client::wire::EntryKind::File => Err(not_a_dir(verb, raw, path)),
        _ => Ok(()),
    }
}

/// The error for a file named with a trailing `/`.
pub fn not_a_dir(verb: &str, raw: &str, path: &RemotePath) -> anyhow::Error {
    anyhow!("cannot {verb} `{raw}`: not a directory (`{path}` is a file; without the trailing `/` it names the file)")
}

/// The saved session and a client using it.
pub fn connect() -> Result<(Session, Client)> {
    let session = session::require()?;
    let client = session.client()?;
    Ok((session, client))
}

/// `Ok(None)` for 404, the entry otherwise.
pub async fn stat_opt(
    client: &Client,
    path: &RemotePath,
) -> Result<Option<nimbus_client::wire::Entry>, nimbus_client::Error> {
    match client.stat(path).await {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_slash_names_a_folder() {
        for raw in ["/a/y.txt/", "a/", "/a/b/", "//"] {
            assert!(names_dir(raw), "{raw:?}");
        }
        // The root is a folder anyway; the rest name whatever is there.
        for raw in ["/", "", "/a/y.txt", "a", "/a/b"] {
            assert!(!names_dir(raw), "{raw:?}");
        }
    }
}
