//! ls, mkdir, mv, cp, rm.

use anyhow::{Result, anyhow, bail};
use nimbus_client::wire::{Entry, EntryKind};
use nimbus_client::{Client, RemotePath};
use nimbus_proto::names::name_key;
use serde_json::json;

use super::{Ctx, connect, names_dir, not_a_dir, refuse_file_as_dir, remote, stat_opt};
use crate::outln;
use crate::output::{Align, human_bytes, print_json, print_table, short_time};

pub async fn ls(ctx: &Ctx, raw: &str, long: bool) -> Result<()> {
    let (_, client) = connect()?;
    let path = remote(raw)?;
    let entries = match client.list_dir(&path).await {
        Ok(entries) => entries,
        // `ls FILE` shows the file, as ls(1) does; `ls FILE/` is an error, as there.
        Err(e) if e.is_not_a_directory() => match stat_opt(&client, &path).await? {
            Some(entry) if entry.kind == EntryKind::File => {
                if names_dir(raw) {
                    return Err(not_a_dir("list", raw, &path));
                }
                vec![entry]
            }
            _ => return Err(e.into()),
        },
        Err(e) if e.is_not_found() => bail!("`{path}` does not exist"),
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        return print_json(&entries);
    }
    if !long {
        for e in &entries {
            outln!("{}", display_name(e));
        }
        return Ok(());
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            vec![
                if e.kind == EntryKind::Dir { "-".into() } else { human_bytes(e.size) },
                short_time(&e.modified),
                e.version.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
                display_name(e),
            ]
        })
        .collect();
    let header =
        [("SIZE", Align::Right), ("MODIFIED (UTC)", Align::Left), ("VERSION", Align::Right), ("NAME", Align::Left)];
    print_table(&header, &rows)
}

fn display_name(e: &Entry) -> String {
    match e.kind {
        EntryKind::Dir => format!("{}/", e.name),
        EntryKind::File => e.name.clone(),
    }
}

pub async fn mkdir(ctx: &Ctx, raw: &str) -> Result<()> {
    let (_, client) = connect()?;
    let path = remote(raw)?;
    let entry = match client.mkdir(&path).await {
        Ok(entry) => entry,
        Err(e) if e.is_conflict() => {
            bail!("cannot create `{path}`: {}", e.server_message().unwrap_or("a file is in the way"))
        }
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        print_json(&entry)?;
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Move,
    Copy,
}

/// Where `from` ends up for `mv`/`cp FROM TO`: `TO/` or an existing directory `TO` means
/// inside it (as mv(1) and cp(1) do), except when `TO` is `FROM` itself (a change of case:
/// `mv /Docs /docs`). `TO/` naming a file is refused.
async fn target_of(client: &Client, verb: &str, from: &RemotePath, to_raw: &str) -> Result<RemotePath> {
    let to = remote(to_raw)?;
    let name = from.name().ok_or_else(|| anyhow!("the root directory cannot be moved or copied"))?;
    if to_raw.ends_with('/') || to.is_root() {
        refuse_file_as_dir(client, &format!("{verb} into"), to_raw, &to).await?;
        return Ok(to.join(name)?);
    }
    match stat_opt(client, &to).await? {
        Some(t) if t.kind == EntryKind::Dir => {
            let same = match stat_opt(client, from).await? {
                Some(f) => f.id == t.id,
                None => bail!("`{from}` does not exist"),
            };
            if same { Ok(to) } else { Ok(to.join(name)?) }
        }
        _ => Ok(to),
    }
}

pub async fn mv_or_cp(ctx: &Ctx, from_raw: &str, to_raw: &str, overwrite: bool, op: Op) -> Result<()> {
    let (_, client) = connect()?;
    let from = remote(from_raw)?;
    let verb = if op == Op::Move { "move" } else { "copy" };
    refuse_file_as_dir(&client, verb, from_raw, &from).await?;
    let to = target_of(&client, verb, &from, to_raw).await?;
    let result = match op {
        Op::Move => client.move_entry(&from, &to, overwrite).await,
        Op::Copy => client.copy_entry(&from, &to, overwrite).await,
    };
    let entry = match result {
        Ok(entry) => entry,
        Err(e) if e.is_not_found() => {
            bail!("cannot {verb} `{from}`: {}", e.server_message().unwrap_or("it does not exist"))
        }
        Err(e) if e.is_conflict() && !overwrite && e.is_already_exists() => {
            bail!(
                "cannot {verb} `{from}` to `{to}`: {}; add --overwrite to replace a file there",
                e.server_message().unwrap_or("it exists")
            )
        }
        Err(e) if e.is_conflict() => {
            bail!("cannot {verb} `{from}` to `{to}`: {}", e.server_message().unwrap_or("conflict"))
        }
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        return print_json(&entry);
    }
    let done = if op == Op::Move { "moved" } else { "copied" };
    outln!("{done} {from} → {}", entry.path);
    Ok(())
}

/// `nimbus rm PATH...`, as rm(1): every path is tried. Each one that fails gets its error line
/// on stderr (what went wrong and what to do), the others still go to the trash, and the exit
/// code is 1 at the end if any failed.
pub async fn rm(ctx: &Ctx, paths: &[String]) -> Result<()> {
    let (_, client) = connect()?;
    let mut removed = Vec::new();
    let mut failed = false;
    for raw in paths {
        let path = match rm_one(&client, raw).await {
            Ok(path) => path,
            Err(e) => {
                eprintln!("{}", crate::errors::render(&e));
                failed = true;
                continue;
            }
        };
        let id = trash_id_of(&client, &path).await;
        if ctx.json {
            removed.push(json!({"path": path.to_string(), "trash_id": id}));
        } else {
            match id {
                Some(id) => outln!("moved {path} to the trash; restore it with `nimbus trash restore {id}`"),
                None => outln!("moved {path} to the trash; `nimbus trash` lists it with the id to restore it"),
            }
        }
    }
    if ctx.json {
        print_json(&removed)?;
    }
    if failed {
        return Err(crate::errors::Reported.into());
    }
    Ok(())
}

/// Moves one path of `nimbus rm` to the trash; the error says which path and why.
async fn rm_one(client: &Client, raw: &str) -> Result<RemotePath> {
    let path = remote(raw)?;
    if path.is_root() {
        bail!("refusing to delete the root directory; delete what is inside it instead");
    }
    // `rm FILE/` deletes nothing, as rm(1).
    refuse_file_as_dir(client, "remove", raw, &path).await?;
    match client.delete(&path).await {
        Ok(()) => Ok(path),
        Err(e) if e.is_not_found() => {
            let parent = path.parent().unwrap_or_else(RemotePath::root);
            bail!("cannot remove `{path}`: it does not exist (`nimbus ls {parent}` lists what is there)")
        }
        Err(e) => Err(anyhow::Error::from(e).context(format!("cannot remove `{path}`"))),
    }
}

/// The trash id of what was just deleted at `path`: the newest item with that original path
/// in the first page of the trash. Best effort: `None` if it cannot be found.
async fn trash_id_of(client: &Client, path: &RemotePath) -> Option<i64> {
    let page = client.trash_page(None, Some(1000)).await.ok()?;
    let key = name_key(&path.to_string());
    page.entries.iter().filter(|t| name_key(&t.original_path) == key).map(|t| t.id).max()
}
