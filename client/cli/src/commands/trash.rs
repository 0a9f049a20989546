//! trash: list, restore, purge.

use anyhow::{Result, bail};
use nimbus_client::wire::EntryKind;
use serde_json::json;

use super::{Ctx, connect, remote};
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

pub async fn restore(ctx: &Ctx, id: i64, to: Option<&str>) -> Result<()> {
    let (_, client) = connect()?;
    let to = to.map(remote).transpose()?;
    let entry = match client.restore_trash(id, to.as_ref()).await {
        Ok(e) => e,
        Err(e) if e.is_not_found() => bail!("there is no item {id} in the trash; `nimbus trash` lists them"),
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

pub async fn purge(ctx: &Ctx, id: Option<i64>, yes: bool) -> Result<()> {
    let (_, client) = connect()?;
    match id {
        Some(id) => match client.purge_trash(id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => bail!("there is no item {id} in the trash; `nimbus trash` lists them"),
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
