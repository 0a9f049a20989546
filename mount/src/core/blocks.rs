//! The drive's local block cache: `nimbus_blockcache::tiered` (a memory tier of whole blocks
//! for sequential readers, a read-ahead buffer, and a persistent directory tier in the
//! checksummed entry format, S3-FIFO with the byte bound enforced at admission) with the
//! gateway as its origin and `--cache-mem` shared out by [`MemBudget`].
//!
//! Blocks are immutable and addressed by BLAKE3 hash, so an entry is never stale. Every block
//! fetched from the gateway is verified against its hash before anyone sees it; concurrent
//! misses on one block, read-ahead included, make one load, which runs on its own: a reader
//! that gives up (an interrupted read, a closed file) never ends it for the others, the last
//! one to give up cancels it, and its slot is freed on every path. Failures are not remembered.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use nimbus_blockcache::Key;
use nimbus_blockcache::disk::DiskStore;
use nimbus_blockcache::tiered::{
    Config, DiskTierConfig, Fetcher, NoEvents, ReadError, ReadMode, TieredCache, WhenWritesBusy,
};
use nimbus_blockcache::verify::Verified;
use nimbus_proto::RemotePath;

use super::remote::Remote;
use super::types::{VfsError, VfsResult};

/// Block fetches from the gateway in flight at most (each holds a block in memory).
const FETCHES_IN_FLIGHT: usize = 8;
/// Read-ahead blocks held until their reader gets there, at most (the VFS's read-ahead window
/// is capped at what [`MemBudget::ahead`] grants).
const AHEAD_KEEP: usize = 8;
/// Blocks on their way to the directory tier at most. When the disk is slower than the
/// gateway, fetches wait for these rather than piling blocks up in memory.
const WRITES_IN_FLIGHT: usize = 4;

/// How `--cache-mem` is shared: every block the cache holds in memory counts against it, not
/// just the memory tier. A quarter (at least 2 blocks, at most the constants above) each for
/// fetches and read-ahead, half that for pending directory writes, the rest for the tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemBudget {
    pub fetches: usize,
    pub ahead: usize,
    pub writes: usize,
    pub tier_bytes: u64,
}

impl MemBudget {
    pub fn split(mem: u64, block_size: u64) -> Self {
        let bs = block_size.max(1);
        let quarter = usize::try_from(mem / bs / 4).unwrap_or(usize::MAX);
        let fetches = quarter.clamp(2, FETCHES_IN_FLIGHT);
        let ahead = quarter.clamp(2, AHEAD_KEEP);
        let writes = (quarter / 2).clamp(1, WRITES_IN_FLIGHT);
        let held = (fetches + ahead + writes) as u64 * bs;
        Self { fetches, ahead, writes, tier_bytes: mem.saturating_sub(held) }
    }
}

type Hash = [u8; 32];

/// Where blocks come from: the user's own space (namespace 0), or a file inside a share, whose
/// blocks the gateway gives only when asked for that file (each such file gets a namespace
/// of its own: the origin learns from the key which file to name).
#[derive(Default)]
pub struct BlockScopes {
    inner: Mutex<ScopeMap>,
}

#[derive(Default)]
struct ScopeMap {
    ids: HashMap<RemotePath, i64>,
    paths: HashMap<i64, RemotePath>,
}

impl BlockScopes {
    fn ns(&self, scope: Option<&RemotePath>) -> i64 {
        let Some(path) = scope else { return 0 };
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = m.ids.get(path) {
            return *id;
        }
        let id = m.ids.len() as i64 + 1;
        m.ids.insert(path.clone(), id);
        m.paths.insert(id, path.clone());
        id
    }

    fn path(&self, ns: i64) -> Option<RemotePath> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).paths.get(&ns).cloned()
    }
}

/// The cache's origin: `GET /blocks/{hash}` (with the shared file's path for namespaces other
/// than 0), verified.
pub struct GatewayFetcher(Arc<dyn Remote>, Arc<BlockScopes>);

impl Fetcher for GatewayFetcher {
    type Error = Arc<VfsError>;

    async fn fetch(&self, (ns, hash): Key) -> Result<Verified, Arc<VfsError>> {
        let hex = blake3::Hash::from_bytes(hash).to_hex();
        let scope = if ns == 0 { None } else { self.1.path(ns) };
        let data = self.0.get_block(hex.as_str(), scope.as_ref()).await.map_err(|e| Arc::new(VfsError::from(e)))?;
        Verified::check(&hash, data)
            .ok_or_else(|| Arc::new(VfsError::Io(format!("block {hex} came back corrupt from the server"))))
    }
}

#[derive(Default, Debug, Clone, Copy, serde::Serialize)]
pub struct CacheCounters {
    pub hits_mem: u64,
    pub hits_disk: u64,
    /// Fetches from the gateway started, and the bytes they brought.
    pub fetched: u64,
    pub bytes_fetched: u64,
    pub corrupt: u64,
    pub write_errors: u64,
}

pub struct BlockCache {
    cache: TieredCache<GatewayFetcher>,
    budget: MemBudget,
    scopes: Arc<BlockScopes>,
}

pub fn parse_hash(hex: &str) -> VfsResult<Hash> {
    nimbus_blockcache::hash_from_hex(hex)
        .ok_or_else(|| VfsError::Io(format!("the server sent a malformed block hash `{hex}`")))
}

fn vfs_error(e: ReadError<Arc<VfsError>>) -> VfsError {
    match e {
        ReadError::Fetch(e) => match &*e {
            VfsError::Offline => VfsError::Offline,
            VfsError::NotFound => VfsError::NotFound,
            other => VfsError::Io(other.to_string()),
        },
        ReadError::Interrupted => VfsError::Io("a block fetch from the server was interrupted".into()),
        ReadError::Range { start, end, len } => {
            VfsError::Io(format!("read {start}..{end} outside a block of {len} bytes"))
        }
        ReadError::Corrupt => VfsError::Io("part of a block came back corrupt from the server".into()),
    }
}

impl BlockCache {
    /// Opens the cache directory (`None`: memory only). A directory another mount holds is
    /// refused with a message saying so. `mem_capacity` bounds every block held in memory
    /// (see [`MemBudget`]); `block_size` is the gateway's.
    pub fn open(
        remote: Arc<dyn Remote>,
        dir: Option<&Path>,
        disk_capacity: u64,
        mem_capacity: u64,
        block_size: u64,
    ) -> Result<Self, String> {
        let budget = MemBudget::split(mem_capacity, block_size);
        let disk = match dir {
            Some(dir) if disk_capacity > 0 => Some(DiskTierConfig {
                // What the drive reads is in its memory tier and the reader's page cache
                // already; a sequential reader reads block after block back.
                store: DiskStore::open(dir, "mount")
                    .map_err(|e| e.to_string())?
                    .with_direct_writes()
                    .with_pooled_reads(),
                capacity: disk_capacity,
            }),
            _ => None,
        };
        let config = Config {
            mem_bytes: budget.tier_bytes,
            fetches_in_flight: budget.fetches,
            disk_writes_in_flight: budget.writes,
            when_writes_busy: WhenWritesBusy::Wait,
            // Readers put what they read into memory; read-ahead waits in its own buffer.
            fetched_to_mem: false,
            ahead_blocks: budget.ahead,
            // The gateway serves whole blocks only: no part reads here.
            outboard_bytes: 0,
        };
        let scopes = Arc::new(BlockScopes::default());
        let cache = TieredCache::new(GatewayFetcher(remote, scopes.clone()), config, disk, Arc::new(NoEvents));
        Ok(Self { cache, budget, scopes })
    }

    pub fn counters(&self) -> CacheCounters {
        let s = self.cache.stats();
        CacheCounters {
            hits_mem: s.hits_mem,
            hits_disk: s.hits_disk,
            fetched: s.fetches,
            bytes_fetched: s.bytes_fetched,
            corrupt: s.corrupt_entries,
            write_errors: s.disk_errors,
        }
    }

    /// Fetches from the gateway registered now (a reader waits for them, or their block is
    /// on its way to the directory tier).
    pub fn fetches_in_flight(&self) -> usize {
        self.cache.fetches_in_flight()
    }

    /// Bytes held by the directory tier and its bound.
    pub fn disk_usage(&self) -> (u64, u64) {
        let s = self.cache.stats();
        (s.disk_used, s.disk_capacity)
    }

    /// Drops every cached block (the desktop app's "free up space").
    pub fn purge(&self) -> VfsResult<()> {
        Ok(self.cache.purge()?)
    }

    /// `from..to` of a block. `whole` reads the full block into the memory tier (sequential
    /// readers come back for the rest; only a pass's first piece of a block counts as a use);
    /// otherwise a directory hit reads and verifies only the chunks the range covers (random
    /// readers).
    /// `scope`: the file inside a share the block belongs to ([`super::remote::block_scope`]).
    pub async fn read(
        &self,
        scope: Option<&RemotePath>,
        hash: Hash,
        from: usize,
        to: usize,
        whole: bool,
    ) -> VfsResult<Bytes> {
        let mode = if whole { ReadMode::Sequential { first: from == 0 } } else { ReadMode::Range };
        self.cache.read((self.scopes.ns(scope), hash), from..to, mode).await.map_err(vfs_error)
    }

    /// Loads a block into the read-ahead buffer without returning it.
    pub async fn prefetch(&self, scope: Option<&RemotePath>, hash: Hash) -> VfsResult<()> {
        self.cache.prefetch((self.scopes.ns(scope), hash)).await.map_err(vfs_error)
    }

    /// Admits a block the mount itself just uploaded (its hash, and so its tags, computed
    /// locally: [`Verified::hash_new`]).
    pub async fn admit(&self, scope: Option<&RemotePath>, hash: Hash, block: Verified) {
        self.cache.admit((self.scopes.ns(scope), hash), block).await;
    }

    /// How `--cache-mem` was shared out.
    pub fn budget(&self) -> MemBudget {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Readers that give up on a gateway that accepts connections and never answers leave
    /// no load behind, however many there are.
    #[tokio::test]
    async fn abandoned_reads_leave_nothing_registered() -> Result<(), Box<dyn std::error::Error>> {
        // Connections complete in the kernel's backlog; nothing is ever read or answered.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let client = nimbus_client::Client::new(nimbus_client::ClientOptions {
            base_url: format!("http://{}", silent.local_addr()?),
            ..Default::default()
        })?;
        let cache = BlockCache::open(Arc::new(client), None, 0, 64 * MIB, 4 * MIB)?;
        for i in 0..3 * cache.budget().fetches as u8 {
            let hash = *blake3::hash(&[i]).as_bytes();
            // Sequential (whole-block, gated) and random readers, and read-ahead.
            let read = async {
                match i % 3 {
                    0 => cache.read(None, hash, 0, 10, true).await.map(drop),
                    1 => cache.read(None, hash, 0, 10, false).await.map(drop),
                    _ => cache.prefetch(None, hash).await,
                }
            };
            assert!(tokio::time::timeout(std::time::Duration::from_millis(20), read).await.is_err());
        }
        assert_eq!(cache.fetches_in_flight(), 0);
        Ok(())
    }

    #[test]
    fn cache_mem_bounds_every_block_held() {
        for mem in [0, 8 * MIB, 64 * MIB, 128 * MIB, 512 * MIB] {
            let b = MemBudget::split(mem, 4 * MIB);
            let held = (b.fetches + b.ahead + b.writes) as u64 * 4 * MIB + b.tier_bytes;
            // Within the bound, except for the floor of a few blocks a drive needs to work.
            assert!(held <= mem.max(5 * 4 * MIB), "{mem}: {b:?} holds {held}");
            assert!(b.fetches >= 2 && b.ahead >= 2 && b.writes >= 1, "{b:?}");
        }
        assert_eq!(
            MemBudget::split(128 * MIB, 4 * MIB),
            MemBudget { fetches: 8, ahead: 8, writes: 4, tier_bytes: 48 * MIB }
        );
        assert_eq!(
            MemBudget::split(64 * MIB, 4 * MIB),
            MemBudget { fetches: 4, ahead: 4, writes: 2, tier_bytes: 24 * MIB }
        );
        // Small blocks: the counts stop at their maximum, the tier takes the rest.
        let b = MemBudget::split(64 * MIB, 64 * 1024);
        assert_eq!((b.fetches, b.ahead, b.writes), (8, 8, 4));
        assert_eq!(b.tier_bytes, 64 * MIB - 20 * 64 * 1024);
    }
}
