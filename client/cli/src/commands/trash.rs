//! trash: list, restore, purge.

use anyhow::{Result, anyhow, bail};
use nimbus_client::wire::EntryKind;
use nimbus_client::{Client, RemotePath};
use serde_json::json;

use super::{Ctx, connect, names_dir, refuse_file_as_dir, remote};
use crate::outln;
use crate::output::{Align, confirm, human_bytes, print_json, print_table, short_time};

pub async fn list(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let entries = client.trash().await?;
    if ctx.json {
        return print_json(&entries);
    }
    if entries.is_empty() {
        outln!("The trash is empty.");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|t| {
            let shown =
                if t.kind == EntryKind::Dir { format!("{}/", t.original_path) } else { t.original_path.clone() };
            vec![t.id.to_string(), human_bytes(t.size), short_time(&t.deleted_at), shown]
        })
        .collect();
    let header =
        [("ID", Align::Right), ("SIZE", Align::Right), ("DELETED (UTC)", Align::Left), ("ORIGINAL PATH", Align::Left)];
    print_table(&header, &rows)?;
    outln!("Restore with `nimbus trash restore ID [--to PATH]`; delete for good with `nimbus trash purge [ID]`.");
    Ok(())
}

pub async fn restore(ctx: &Ctx, id: i64, to_raw: Option<&str>) -> Result<()> {
    let (_, client) = connect()?;
    let to = match to_raw {
        Some(raw) => Some(restore_target(&client, id, raw).await?),
        None => None,
    };
    let entry = match client.restore_trash(id, to.as_ref()).await {
        Ok(e) => e,
        Err(e) if e.is_not_found() => return Err(no_item(id)),
        Err(e) if e.is_conflict() => {
            let why = e.server_message().unwrap_or("the path is taken").to_string();
            bail!("cannot restore item {id}: {why}; restore it elsewhere with `nimbus trash restore {id} --to PATH`")
        }
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        return print_json(&entry);
    }
    outln!("restored {}", entry.path);
    Ok(())
}

/// Where `--to TO` puts item `id`, as `nimbus mv` treats its target: `TO/` (or `/`) means inside
/// the folder `TO`, under the item's name, and `TO/` naming a file is refused ("not a
/// directory") before anything changes; any other `TO` is the path the item takes.
async fn restore_target(client: &Client, id: i64, raw: &str) -> Result<RemotePath> {
    let to = remote(raw)?;
    if !names_dir(raw) && !to.is_root() {
        return Ok(to);
    }
    let item = client.trash().await?.into_iter().find(|t| t.id == id).ok_or_else(|| no_item(id))?;
    refuse_file_as_dir(client, "restore into", raw, &to).await?;
    Ok(to.join(&item.name)?)
}

fn no_item(id: i64) -> anyhow::Error {
    anyhow!("there is no item {id} in the trash; `nimbus trash` lists them")
}

pub async fn purge(ctx: &Ctx, id: Option<i64>, yes: bool) -> Result<()> {
    let (_, client) = connect()?;
    match id {
        Some(id) => match client.purge_trash(id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Err(no_item(id)),
            Err(e) => return Err(e.into()),
        },
        None => {
            if !yes && !confirm("Delete everything in the trash for good?", "--yes")? {
                outln!("Nothing deleted.");
                return Ok(());
            }
            client.empty_trash().await?;
        }
    }
    if ctx.json {
        return print_json(&json!({"purged": id.map_or_else(|| json!("all"), |i| json!(i))}));
    }
    match id {
        Some(id) => outln!("deleted item {id} from the trash for good"),
        None => outln!("emptied the trash"),
    }
    Ok(())
}
