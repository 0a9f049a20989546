//! Blocks as files under a directory: `<root>/spaces/<space>/blocks/<ab>/<hash>`, fanned out by
//! the first two hex digits so no directory grows to millions of entries.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::{BlockStore, StoreError, StoreResult};

pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    pub async fn open(root: &Path) -> StoreResult<Self> {
        for dir in [root.join("tmp"), root.join("spaces")] {
            tokio::task::spawn_blocking(move || create_dir_durably(&dir)).await.map_err(join_error)??;
        }
        Ok(Self { root: root.to_path_buf() })
    }

    fn path(&self, space: i64, hash: &str) -> PathBuf {
        let fan = hash.get(..2).unwrap_or("00");
        self.root.join("spaces").join(space.to_string()).join("blocks").join(fan).join(hash)
    }
}

fn join_error(e: tokio::task::JoinError) -> StoreError {
    StoreError::Io(std::io::Error::other(e))
}

/// fsync of a directory: makes the entries created or renamed in it survive a power cut.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// `create_dir_all` whose every new directory is recorded durably in its parent: a block
/// renamed into it must not vanish with it on a power cut.
fn create_dir_durably(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
    create_dir_durably(parent)?;
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        // A concurrent writer made it and may not have synced the parent yet: sync it here too.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(e),
    }
    sync_dir(parent)
}

#[async_trait::async_trait]
impl BlockStore for LocalStore {
    async fn put(&self, space: i64, hash: &str, data: Bytes) -> StoreResult<()> {
        let dest = self.path(space, hash);
        let dir = dest
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| StoreError::Io(std::io::Error::other("bad block path")))?;
        {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || create_dir_durably(&dir)).await.map_err(join_error)??;
        }
        // Write to a temporary name, fsync, rename over whatever is there (an identical copy,
        // or a damaged one this upload repairs), then fsync the directory: a crash never
        // leaves a torn block under its final name, and once this returns the block survives
        // a power cut.
        let tmp = self.root.join("tmp").join(format!("{hash}.{}", uuid::Uuid::new_v4()));
        let mut f = tokio::fs::File::create(&tmp).await?;
        let result = async {
            f.write_all(&data).await?;
            f.sync_data().await?;
            drop(f);
            tokio::fs::rename(&tmp, &dest).await?;
            tokio::task::spawn_blocking(move || sync_dir(&dir)).await.map_err(std::io::Error::other)?
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        Ok(result?)
    }

    async fn get(&self, space: i64, hash: &str) -> StoreResult<Bytes> {
        match tokio::fs::read(self.path(space, hash)).await {
            Ok(v) => Ok(Bytes::from(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::NotFound(hash.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_space(&self, space: i64) -> StoreResult<()> {
        match tokio::fs::remove_dir_all(self.root.join("spaces").join(space.to_string())).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    async fn check(&self) -> StoreResult<()> {
        tokio::fs::metadata(self.root.join("spaces")).await?;
        Ok(())
    }

    fn describe(&self) -> String {
        format!("local directory {}", self.root.display())
    }

    async fn delete_blocks(&self, space: i64, hashes: &[String]) -> StoreResult<()> {
        for h in hashes {
            match tokio::fs::remove_file(self.path(space, h)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }

    async fn list_blocks(&self) -> StoreResult<Vec<super::StoredBlock>> {
        let root = self.root.join("spaces");
        tokio::task::spawn_blocking(move || walk_blocks(&root))
            .await
            .map_err(|e| StoreError::Io(std::io::Error::other(e)))?
    }
}

/// `spaces/<space>/blocks/<ab>/<hash>` files under `root`.
fn walk_blocks(root: &Path) -> StoreResult<Vec<super::StoredBlock>> {
    let mut out = Vec::new();
    for space in std::fs::read_dir(root)? {
        let space = space?;
        let Some(id) = space.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        let blocks = space.path().join("blocks");
        let Ok(fans) = std::fs::read_dir(&blocks) else { continue };
        for fan in fans {
            let fan = fan?;
            if !fan.file_type()?.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(fan.path())? {
                let f = f?;
                let Some(hash) = f.file_name().to_str().map(str::to_string) else { continue };
                if nimbus_proto::is_block_hash(&hash) {
                    let meta = f.metadata()?;
                    let modified_ms = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .and_then(|d| i64::try_from(d.as_millis()).ok());
                    out.push(super::StoredBlock { space: id, hash, size: meta.len(), modified_ms });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn put_get_delete_space() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = LocalStore::open(dir.path()).await?;
        let data = Bytes::from_static(b"hello blocks");
        let hash = blake3::hash(&data).to_hex().to_string();
        store.put(7, &hash, data.clone()).await?;
        store.put(7, &hash, data.clone()).await?; // idempotent
        assert_eq!(store.get(7, &hash).await?, data);
        assert!(matches!(store.get(8, &hash).await, Err(StoreError::NotFound(_))), "spaces are separate");
        store.delete_space(7).await?;
        assert!(matches!(store.get(7, &hash).await, Err(StoreError::NotFound(_))));
        Ok(())
    }

    #[tokio::test]
    async fn put_replaces_a_damaged_object() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = LocalStore::open(dir.path()).await?;
        let data = Bytes::from_static(b"worth keeping");
        let hash = blake3::hash(&data).to_hex().to_string();
        store.put(3, &hash, data.clone()).await?;
        tokio::fs::write(store.path(3, &hash), b"bit rot").await?;
        store.put(3, &hash, data.clone()).await?;
        assert_eq!(super::super::get_verified(&store, 3, &hash).await?, data);
        assert_eq!(std::fs::read_dir(dir.path().join("tmp"))?.count(), 0, "temporary files left behind");
        Ok(())
    }

    #[tokio::test]
    async fn corrupt_block_is_detected() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = LocalStore::open(dir.path()).await?;
        let data = Bytes::from_static(b"precious");
        let hash = blake3::hash(&data).to_hex().to_string();
        store.put(1, &hash, data).await?;
        tokio::fs::write(store.path(1, &hash), b"precioux").await?;
        assert!(matches!(super::super::get_verified(&store, 1, &hash).await, Err(StoreError::Corrupt(_))));
        Ok(())
    }
}
