//! The places the same workloads run against. Names are part of the report contract:
//! `store`, `gateway-uncached`, `gateway-cached`, `mount-cold`, `mount-warm`, `disk`.

use std::path::PathBuf;

use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;
use nimbus_client::{ByteRange, Client, PutCondition, RemotePath};

use crate::error::{Error, Result};

pub const STORE: &str = "store";
pub const GATEWAY_UNCACHED: &str = "gateway-uncached";
pub const GATEWAY_CACHED: &str = "gateway-cached";
pub const MOUNT_COLD: &str = "mount-cold";
pub const MOUNT_WARM: &str = "mount-warm";
pub const DISK: &str = "disk";

#[derive(Clone)]
pub enum Backend {
    /// The object store directly (S3), objects under `prefix`.
    Store { s3: aws_sdk_s3::Client, bucket: String, prefix: String },
    /// The gateway's file API under `root`; `bypass` skips its cache (admins only).
    Gateway { client: Client, root: String, bypass: bool },
    /// A local directory: the mounted drive or the local disk.
    Fs { dir: PathBuf },
}

#[derive(Clone)]
pub struct Target {
    pub name: &'static str,
    pub backend: Backend,
}

impl Target {
    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::target(self.name, e)
    }

    fn remote(root: &str, name: &str) -> Result<RemotePath> {
        RemotePath::parse(&format!("{root}/{name}")).map_err(|e| Error::Job(format!("bad bench path: {e}")))
    }

    /// Makes folder `name` (and parents) where the backend needs folders.
    pub async fn mkdir(&self, name: &str) -> Result<()> {
        match &self.backend {
            Backend::Store { .. } => Ok(()),
            Backend::Gateway { client, root, .. } => {
                client.mkdir(&Self::remote(root, name)?).await?;
                Ok(())
            }
            Backend::Fs { dir } => {
                let p = dir.join(name);
                tokio::fs::create_dir_all(&p).await.map_err(|e| Error::io(format!("cannot create {}", p.display()), e))
            }
        }
    }

    /// Reads `len` bytes at `offset` of `name`, or all of it.
    pub async fn read(&self, name: &str, range: Option<(u64, u64)>) -> Result<Vec<u8>> {
        match &self.backend {
            Backend::Store { s3, bucket, prefix } => {
                let mut req = s3.get_object().bucket(bucket).key(format!("{prefix}/{name}"));
                if let Some((off, len)) = range {
                    req = req.range(format!("bytes={off}-{}", off + len - 1));
                }
                let out = req.send().await.map_err(|e| self.err(aws_sdk_s3::error::DisplayErrorContext(e)))?;
                let body = out.body.collect().await.map_err(|e| self.err(e))?;
                Ok(body.into_bytes().to_vec())
            }
            Backend::Gateway { client, root, bypass } => {
                let range = range.map(|(off, len)| ByteRange::Inclusive { start: off, end: off + len - 1 });
                Ok(client.get_bytes(&Self::remote(root, name)?, range, *bypass).await?.to_vec())
            }
            Backend::Fs { dir } => {
                let path = dir.join(name);
                tokio::task::spawn_blocking(move || fs_read(&path, range))
                    .await
                    .map_err(|e| self.err(e))?
                    .map_err(|e| self.err(e))
            }
        }
    }

    /// Stores `data` as `name` (a new object or file).
    pub async fn write(&self, name: &str, data: Bytes) -> Result<()> {
        match &self.backend {
            Backend::Store { s3, bucket, prefix } => {
                s3.put_object()
                    .bucket(bucket)
                    .key(format!("{prefix}/{name}"))
                    .body(ByteStream::from(data))
                    .send()
                    .await
                    .map_err(|e| self.err(aws_sdk_s3::error::DisplayErrorContext(e)))?;
                Ok(())
            }
            Backend::Gateway { client, root, .. } => {
                let len = data.len() as u64;
                client
                    .put_stream(&Self::remote(root, name)?, std::io::Cursor::new(data), Some(len), PutCondition::Any)
                    .await?;
                Ok(())
            }
            Backend::Fs { dir } => {
                let path = dir.join(name);
                tokio::fs::write(&path, &data)
                    .await
                    .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))
            }
        }
    }
}

fn fs_read(path: &std::path::Path, range: Option<(u64, u64)>) -> std::io::Result<Vec<u8>> {
    match range {
        None => std::fs::read(path),
        Some((off, len)) => {
            use std::io::{Read, Seek, SeekFrom};
            let mut f = std::fs::File::open(path)?;
            f.seek(SeekFrom::Start(off))?;
            let mut buf = vec![0u8; len as usize];
            f.read_exact(&mut buf)?;
            Ok(buf)
        }
    }
}

/// Deletes every object under `prefix` (the store target's data).
pub async fn store_cleanup(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> Result<()> {
    let err = |e| Error::target(STORE, e);
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(format!("{prefix}/"))
            .send()
            .await
            .map_err(|e| err(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))?;
        let keys: Vec<String> = page.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
        if keys.is_empty() {
            return Ok(());
        }
        for key in keys {
            s3.delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| err(aws_sdk_s3::error::DisplayErrorContext(e).to_string()))?;
        }
    }
}
