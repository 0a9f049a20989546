//! Content-addressed block storage behind one trait: a local directory (the embedded default)
//! or an S3-compatible bucket. Keys are `spaces/<space>/blocks/<hash>`: per-space, so dedup
//! never crosses users and deleting a user removes one prefix.
//!
//! Next to a block of more than one 16 KiB piece lies its outboard, `<block key>.tags`: the
//! pieces' BLAKE3 chaining values (32 bytes per piece, 8 KiB for 4 MiB;
//! `nimbus_blockcache::verify::Outboard`), written with the block and deleted with it. With it a
//! read of a few KiB fetches and verifies only the pieces that hold them. It is derived data:
//! checked against the block's hash before use, never trusted, and rewritten by a whole read of
//! a block that lacks it (blocks stored before outboards existed).
//!
//! Blocks are immutable: `put` of a block that exists replaces the object with the same bytes
//! (how an upload repairs a damaged copy). The store never decides what is referenced: the
//! metadata database does.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use nimbus_blockcache::verify::Verified;

mod local;
mod s3;
mod s3_get;

pub use local::LocalStore;

pub use s3::{S3Config, S3Store};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("block {0} is not in the store")]
    NotFound(String),
    #[error("block {0} failed verification (its content does not match its hash)")]
    Corrupt(String),
    #[error("store I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("object store request failed: {0}")]
    Remote(String),
    #[error("object store request timed out")]
    Timeout,
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Bytes of a block object as they arrive from the store.
pub type BlockStream = futures::stream::BoxStream<'static, StoreResult<Bytes>>;

#[async_trait::async_trait]
pub trait BlockStore: Send + Sync + 'static {
    /// Stores a block whose hash the caller has already verified, replacing any object under
    /// its name; durable once this returns.
    async fn put(&self, space: i64, hash: &str, data: Bytes) -> StoreResult<()>;
    /// Reads a whole block (blocks are at most a few MiB, so this is bounded).
    async fn get(&self, space: i64, hash: &str) -> StoreResult<Bytes>;
    /// Bytes `range` of a block object, unchecked (fewer where the object ends first). This
    /// default reads the whole object; the real stores fetch only the range.
    async fn get_range(&self, space: i64, hash: &str, range: Range<u64>) -> StoreResult<Bytes> {
        let data = self.get(space, hash).await?;
        let len = data.len() as u64;
        Ok(data.slice(range.start.min(len) as usize..range.end.min(len) as usize))
    }
    /// Bytes `range` of a block object as they arrive, unchecked; `None` (this default) when
    /// the store cannot stream them, and the caller reads the block whole.
    async fn stream_range(&self, _space: i64, _hash: &str, _range: Range<u64>) -> StoreResult<Option<BlockStream>> {
        Ok(None)
    }
    /// A URL that reads the whole block object straight from the store until `ttl` has passed,
    /// for a client that checks the bytes against the hash itself; `None` (this default) when
    /// the store gives none (`--s3-direct-reads` is off, or blocks have no URL of their own).
    async fn presign_get(&self, _space: i64, _hash: &str, _ttl: std::time::Duration) -> StoreResult<Option<String>> {
        Ok(None)
    }
    /// Stores a block's outboard, replacing any; absent (this default) means reads of parts of
    /// blocks fetch them whole.
    async fn put_outboard(&self, _space: i64, _hash: &str, _data: Bytes) -> StoreResult<()> {
        Ok(())
    }
    /// A block's outboard as stored, unchecked; `None` if there is none.
    async fn get_outboard(&self, _space: i64, _hash: &str) -> StoreResult<Option<Bytes>> {
        Ok(None)
    }
    /// Removes every block of a space.
    async fn delete_space(&self, space: i64) -> StoreResult<()>;
    /// Readiness: can the store be reached right now?
    async fn check(&self) -> StoreResult<()>;
    /// For logs and /readyz.
    fn describe(&self) -> String;
    /// Removes some blocks of a space and their outboards (garbage collection, fsck repair);
    /// absent ones are fine.
    async fn delete_blocks(&self, _space: i64, _hashes: &[String]) -> StoreResult<()> {
        Err(StoreError::Remote(format!("{} cannot delete single blocks", self.describe())))
    }
    /// Removes only the outboards of some blocks (fsck, for outboards whose block is gone).
    async fn delete_outboards(&self, _space: i64, _hashes: &[String]) -> StoreResult<()> {
        Ok(())
    }
    /// Every block object and outboard in the store, for fsck's orphan check.
    async fn list_blocks(&self) -> StoreResult<Vec<StoredBlock>> {
        Err(StoreError::Remote(format!("{} cannot list its blocks", self.describe())))
    }
}

/// One block object (or outboard) as the store lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlock {
    pub space: i64,
    pub hash: String,
    pub size: u64,
    /// When the object was last written (Unix ms), if the store says.
    pub modified_ms: Option<i64>,
    pub kind: ObjectKind,
}

/// What a store object under `spaces/<space>/blocks/` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Block,
    /// The outboard of the block of the same name (`<hash>.tags`).
    Outboard,
}

/// The suffix of an outboard's key after its block's.
pub const OUTBOARD_SUFFIX: &str = ".tags";

/// `spaces/<space>/blocks/<hash>[.tags]` (after any prefix) back into its parts; other keys are
/// not ours.
pub fn parse_block_key(key: &str) -> Option<(i64, String, ObjectKind)> {
    let rest = key.strip_prefix("spaces/")?;
    let (space, rest) = rest.split_once('/')?;
    let hash = rest.strip_prefix("blocks/")?;
    // Local stores fan out by the first two hex digits; S3 keys have no fan-out.
    let (hash, kind) = parse_block_name(hash.rsplit('/').next()?)?;
    Some((space.parse().ok()?, hash, kind))
}

/// A block object's file or key name, `<hash>` or `<hash>.tags`, into its parts.
pub fn parse_block_name(name: &str) -> Option<(String, ObjectKind)> {
    let (hash, kind) = match name.strip_suffix(OUTBOARD_SUFFIX) {
        Some(h) => (h, ObjectKind::Outboard),
        None => (name, ObjectKind::Block),
    };
    nimbus_proto::is_block_hash(hash).then(|| (hash.to_string(), kind))
}

pub type DynStore = Arc<dyn BlockStore>;

pub fn block_key(space: i64, hash: &str) -> String {
    format!("spaces/{space}/blocks/{hash}")
}

pub fn outboard_key(space: i64, hash: &str) -> String {
    format!("{}{OUTBOARD_SUFFIX}", block_key(space, hash))
}

/// Stores a verified block and, if it has more than one piece, its outboard (at once: an
/// outboard without its block is never read, and fsck removes one left alone).
pub async fn put_verified(store: &dyn BlockStore, space: i64, hash: &str, block: &Verified) -> StoreResult<()> {
    let data = block.data().clone();
    match block.outboard() {
        Some(o) => {
            tokio::try_join!(store.put(space, hash, data), store.put_outboard(space, hash, o.encode()))?;
        }
        None => store.put(space, hash, data).await?,
    }
    Ok(())
}

/// Reads a block and checks its BLAKE3 hash, so a reader never gets bytes that differ from
/// what was written (bitrot, a truncated object, a wrong key).
pub async fn get_verified(store: &dyn BlockStore, space: i64, hash: &str) -> StoreResult<Bytes> {
    let key = nimbus_blockcache::hash_from_hex(hash).ok_or_else(|| StoreError::Corrupt(hash.to_string()))?;
    get_verified_block(store, space, &key).await.map(Verified::into_data)
}

/// [`get_verified`] for the cache: the same check, in the one pass that also yields the tags
/// its SSD entry keeps (`nimbus_blockcache::verify`).
pub async fn get_verified_block(store: &dyn BlockStore, space: i64, hash: &[u8; 32]) -> StoreResult<Verified> {
    let hex = blake3::Hash::from_bytes(*hash).to_hex();
    let data = store.get(space, hex.as_str()).await?;
    check_block(*hash, data).await.ok_or_else(|| {
        metrics::counter!("nimbus_store_corrupt_blocks_total").increment(1);
        StoreError::Corrupt(hex.to_string())
    })
}

/// Blocks from this size on are hashed on a blocking thread: a 4 MiB block is about a
/// millisecond of BLAKE3, which would hold up every other request on a request thread (there
/// may be only one, `--worker-threads`), while a small one costs less than the hand-over.
const HASH_ELSEWHERE: usize = 256 << 10;

/// [`Verified::check`], off the request threads for large blocks.
pub async fn check_block(hash: [u8; 32], data: Bytes) -> Option<Verified> {
    if data.len() < HASH_ELSEWHERE {
        return Verified::check(&hash, data);
    }
    let again = data.clone();
    match tokio::task::spawn_blocking(move || Verified::check(&hash, data)).await {
        Ok(v) => v,
        // The blocking pool is shutting down: hash here rather than fail the read.
        Err(_) => Verified::check(&hash, again),
    }
}

/// [`Verified::hash_new`], off the request threads for large blocks.
pub async fn hash_block(data: Bytes) -> ([u8; 32], Verified) {
    if data.len() < HASH_ELSEWHERE {
        return Verified::hash_new(data);
    }
    let again = data.clone();
    match tokio::task::spawn_blocking(move || Verified::hash_new(data)).await {
        Ok(v) => v,
        Err(_) => Verified::hash_new(again),
    }
}
