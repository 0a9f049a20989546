//! Opening the metadata database and the block store that the arguments describe: what
//! `serve` and the operator commands (`ops`) share.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::blocks::{DynStore, LocalStore, S3Config, S3Store};
use crate::config::{ServeArgs, StoreKind};
use crate::meta::Meta;

/// The metadata database `args` describe, migrated to this binary's schema.
pub async fn open_meta(args: &ServeArgs) -> anyhow::Result<Meta> {
    let url = args.database_url();
    let opts = crate::meta::MetaOptions { sqlite_synchronous: args.sqlite_synchronous };
    Meta::connect_with(&url, opts).await.with_context(|| format!("cannot open the database {}", redact(&url)))
}

/// The block store `args` describe (also what `gc` and `fsck` open).
pub async fn open_store(args: &ServeArgs) -> anyhow::Result<DynStore> {
    Ok(match args.store {
        StoreKind::Local => {
            if args.s3_direct_reads {
                anyhow::bail!(
                    "--s3-direct-reads needs --store s3: blocks in a local directory have no URL of their own"
                );
            }
            Arc::new(LocalStore::open(&args.blocks_dir()).await.context("cannot open the blocks directory")?)
        }
        StoreKind::S3 => {
            let cfg = S3Config {
                endpoint: args.s3_endpoint.clone(),
                bucket: args.s3_bucket.clone(),
                region: args.s3_region.clone(),
                path_style: !args.s3_virtual_hosted,
                access_key: args.s3_access_key.clone(),
                secret_key: args.s3_secret_key.clone(),
                prefix: args.s3_prefix.clone(),
                timeout: Duration::from_secs(args.store_timeout_secs),
                direct_reads: args.s3_direct_reads,
            };
            Arc::new(S3Store::connect(&cfg).await.context("cannot set up the S3 client")?)
        }
    })
}

/// Database URLs may carry a password; never print it.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***{}", &url[..s], &url[at..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h:5432/db"), "postgres://***@h:5432/db");
        assert_eq!(redact("sqlite:///x/y.db"), "sqlite:///x/y.db");
    }
}
