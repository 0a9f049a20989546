//! Blocks as files under a directory: `<root>/spaces/<space>/blocks/<ab>/<hash>`, fanned out by
//! the first two hex digits so no directory grows to millions of entries; a block's outboard
//! beside it as `<hash>.tags`.

use std::path::{Path, PathBuf};

use std::ops::Range;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

use super::{BlockStore, BlockStream, OUTBOARD_SUFFIX, StoreError, StoreResult};

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

    fn outboard_path(&self, space: i64, hash: &str) -> PathBuf {
        self.path(space, &format!("{hash}{OUTBOARD_SUFFIX}"))
    }

    /// Writes `data` as `dest` durably: to a temporary name, fsync, rename over whatever is
    /// there (an identical copy, or a damaged one this write repairs), then fsync the
    /// directory. A crash never leaves a torn file under its final name, and once this returns
    /// the file survives a power cut.
    async fn write_durably(&self, dest: PathBuf, data: Bytes) -> StoreResult<()> {
        let dir = dest
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| StoreError::Io(std::io::Error::other("bad block path")))?;
        {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || create_dir_durably(&dir)).await.map_err(join_error)??;
        }
        let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("block");
        let tmp = self.root.join("tmp").join(format!("{name}.{}", uuid::Uuid::new_v4()));
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
}

/// Removes a file; one that is not there is fine.
async fn remove_if_there(path: PathBuf) -> StoreResult<()> {
    match tokio::fs::remove_file(path).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
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
        self.write_durably(self.path(space, hash), data).await
    }

    async fn get(&self, space: i64, hash: &str) -> StoreResult<Bytes> {
        match tokio::fs::read(self.path(space, hash)).await {
            Ok(v) => Ok(Bytes::from(v)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::NotFound(hash.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    async fn get_range(&self, space: i64, hash: &str, range: Range<u64>) -> StoreResult<Bytes> {
        let mut f = match tokio::fs::File::open(self.path(space, hash)).await {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StoreError::NotFound(hash.to_string())),
            Err(e) => return Err(e.into()),
        };
        f.seek(std::io::SeekFrom::Start(range.start)).await?;
        let want = range.end.saturating_sub(range.start);
        let mut buf = Vec::with_capacity(want.min(64 << 20) as usize);
        // Fewer bytes where the file ends first; the caller checks the length.
        f.take(want).read_to_end(&mut buf).await?;
        Ok(Bytes::from(buf))
    }

    async fn stream_range(&self, space: i64, hash: &str, range: Range<u64>) -> StoreResult<Option<BlockStream>> {
        // A local file is read at once (there is no network to overlap with): one chunk, checked
        // piece by piece like a store's stream.
        let data = self.get_range(space, hash, range).await?;
        Ok(Some(Box::pin(futures::stream::once(async move { Ok(data) }))))
    }

    async fn put_outboard(&self, space: i64, hash: &str, data: Bytes) -> StoreResult<()> {
        self.write_durably(self.outboard_path(space, hash), data).await
    }

    async fn get_outboard(&self, space: i64, hash: &str) -> StoreResult<Option<Bytes>> {
        match tokio::fs::read(self.outboard_path(space, hash)).await {
            Ok(v) => Ok(Some(Bytes::from(v))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
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
            remove_if_there(self.path(space, h)).await?;
            remove_if_there(self.outboard_path(space, h)).await?;
        }
        Ok(())
    }

    async fn delete_outboards(&self, space: i64, hashes: &[String]) -> StoreResult<()> {
        for h in hashes {
            remove_if_there(self.outboard_path(space, h)).await?;
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

/// `spaces/<space>/blocks/<ab>/<hash>` files (and `<hash>.tags` outboards) under `root`.
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
                let Some((hash, kind)) = f.file_name().to_str().and_then(super::parse_block_name) else { continue };
                {
                    let meta = f.metadata()?;
                    let modified_ms = meta
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .and_then(|d| i64::try_from(d.as_millis()).ok());
                    out.push(super::StoredBlock { space: id, hash, size: meta.len(), modified_ms, kind });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nimbus_blockcache::verify::Verified;

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

    #[tokio::test]
    async fn outboards_live_and_go_with_their_blocks() -> anyhow::Result<()> {
        use super::super::{ObjectKind, put_verified};
        let dir = tempfile::tempdir()?;
        let store = LocalStore::open(dir.path()).await?;
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let (hash, block) = Verified::hash_new(Bytes::from(data.clone()));
        let hash = blake3::Hash::from_bytes(hash).to_hex().to_string();
        put_verified(&store, 4, &hash, &block).await?;
        let small = Bytes::from_static(b"one piece");
        let small_hash = blake3::hash(&small).to_hex().to_string();
        let (_, small_block) = Verified::hash_new(small);
        put_verified(&store, 4, &small_hash, &small_block).await?;
        // A block of one piece has none; a larger one has its tags beside it.
        let tags = store.get_outboard(4, &hash).await?;
        assert_eq!(tags.map(|t| t.len()), Some(7 * 32));
        assert_eq!(store.get_outboard(4, &small_hash).await?, None);
        assert_eq!(&store.get_range(4, &hash, 500..600).await?[..], &data[500..600]);
        assert_eq!(&store.get_range(4, &hash, 99_990..100_100).await?[..], &data[99_990..], "cut at the end");
        let mut listed: Vec<(String, ObjectKind)> =
            store.list_blocks().await?.into_iter().map(|b| (b.hash, b.kind)).collect();
        listed.sort_by_key(|(h, k)| (h.clone(), *k == ObjectKind::Outboard));
        let mut want = vec![(hash.clone(), ObjectKind::Block), (hash.clone(), ObjectKind::Outboard)];
        want.push((small_hash.clone(), ObjectKind::Block));
        want.sort_by_key(|(h, k)| (h.clone(), *k == ObjectKind::Outboard));
        assert_eq!(listed, want);
        store.delete_blocks(4, std::slice::from_ref(&hash)).await?;
        assert_eq!(store.get_outboard(4, &hash).await?, None, "the outboard outlived its block");
        assert_eq!(store.list_blocks().await?.len(), 1);
        Ok(())
    }
}
