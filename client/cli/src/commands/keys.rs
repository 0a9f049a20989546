//! keys: the caller's S3 access keys.

use anyhow::{Result, bail};
use serde_json::json;

use super::{Ctx, connect};
use crate::outln;
use crate::output::{Align, print_json, print_table, short_time};

pub async fn create(ctx: &Ctx, name: Option<&str>) -> Result<()> {
    let (_, client) = connect()?;
    let key = client.create_s3_key(name).await?;
    if ctx.json {
        return print_json(&key);
    }
    outln!("Created S3 key {} ({})", key.id, key.name);
    outln!("access key id:     {}", key.access_key_id);
    outln!("secret access key: {}", key.secret_access_key);
    outln!("(the secret is shown only now; store it in your tool's configuration)");
    Ok(())
}

pub async fn list(ctx: &Ctx) -> Result<()> {
    let (_, client) = connect()?;
    let keys = client.s3_keys().await?;
    if ctx.json {
        return print_json(&json!({ "keys": keys }));
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            vec![
                k.id.to_string(),
                k.access_key_id.clone(),
                short_time(&k.created),
                k.last_used.as_deref().map(short_time).unwrap_or_else(|| "-".into()),
                k.name.clone(),
            ]
        })
        .collect();
    let header = [
        ("ID", Align::Right),
        ("ACCESS KEY ID", Align::Left),
        ("CREATED", Align::Left),
        ("LAST USED", Align::Left),
        ("NAME", Align::Left),
    ];
    print_table(&header, &rows)?;
    outln!("(times in UTC; create one with `nimbus keys create`, revoke with `nimbus keys revoke ID`)");
    Ok(())
}

pub async fn revoke(ctx: &Ctx, id: i64) -> Result<()> {
    let (_, client) = connect()?;
    match client.revoke_s3_key(id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => bail!("you have no S3 key with id {id}; `nimbus keys` lists them"),
        Err(e) => return Err(e.into()),
    }
    if ctx.json {
        print_json(&json!({ "revoked": id }))
    } else {
        outln!("Revoked S3 key {id}");
        Ok(())
    }
}
