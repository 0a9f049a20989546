//! versions: list and restore.

use anyhow::{Result, bail};

use super::{Ctx, connect, refuse_file_as_dir, remote};
use crate::outln;
use crate::output::{Align, human_bytes, print_json, print_table, short_time};

pub async fn list(ctx: &Ctx, raw: &str) -> Result<()> {
    let (_, client) = connect()?;
    let path = remote(raw)?;
    refuse_file_as_dir(&client, "list the versions of", raw, &path).await?;
    let versions = match client.versions(&path).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => bail!("`{path}` does not exist"),
        Err(e) if e.is_a_directory() => bail!("`{path}` is a directory; only files have versions"),
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        return print_json(&versions);
    }
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            vec![
                if v.current { format!("{} *", v.version) } else { v.version.to_string() },
                human_bytes(v.size),
                short_time(&v.created),
                v.device.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let header =
        [("VERSION", Align::Right), ("SIZE", Align::Right), ("CREATED (UTC)", Align::Left), ("DEVICE", Align::Left)];
    print_table(&header, &rows)?;
    outln!("(* = current; bring one back with `nimbus versions {path} --restore VERSION`)");
    Ok(())
}

pub async fn restore(ctx: &Ctx, raw: &str, version: i64) -> Result<()> {
    let (_, client) = connect()?;
    let path = remote(raw)?;
    refuse_file_as_dir(&client, "restore a version of", raw, &path).await?;
    let entry = match client.restore_version(&path, version).await {
        Ok(e) => e,
        Err(e) if e.is_not_found() => {
            bail!("`{path}` has no version {version}; `nimbus versions {path}` lists them")
        }
        Err(e) => return Err(e.into()),
    };
    if ctx.json {
        return print_json(&entry);
    }
    let now = entry.version.map(|v| format!(" as version {v}")).unwrap_or_default();
    outln!("restored version {version} of {}{now}", entry.path);
    Ok(())
}
