//! The gateway's block cache: `nimbus_blockcache::tiered` (a memory tier and an SSD tier in
//! front of the object store, coalesced loads, background admission, counters, purge) with the
//! store as its origin and the gateway's metrics as its events.
//!
//! Blocks are immutable and keyed by `(space, BLAKE3 hash)`, so nothing is ever invalidated.
//! The space is part of the key on purpose: a hit for a block some other user read would tell
//! a user that someone else holds that content.
//!
//! Read path: memory hit → slice; SSD hit → read and verify only the chunks of the range;
//! miss of a part of a block that is neither read sequentially nor often → a ranged GET of only
//! the 16 KiB pieces that hold it, each checked against the block's outboard (its pieces'
//! BLAKE3 chaining values, kept in memory once checked against the hash; see
//! `crate::blocks`), admitted nowhere; other misses → one coalesced, verified fetch of the
//! whole block per block however many readers wait for it (a task of its own: a reader that
//! goes away never takes it down for the others, and when every reader is gone it is
//! cancelled), then admission to memory and, in the background, to SSD. A failed, short or
//! corrupt store read never enters the cache and is not remembered. Any cache fault (disk
//! full, unwritable, files deleted underneath, corruption) degrades to a miss.

pub mod warm;

use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::{Stream, StreamExt, stream};

use crate::blocks::{BlockStream, DynStore, StoreError, get_verified_block};
use nimbus_blockcache::disk::{DiskStore, OpenError};
use nimbus_blockcache::tiered::{
    Config, DiskTierConfig, Events, Fetcher, ReadError, ReadMode, StreamedRead, Tier, TieredCache, WhenWritesBusy,
};
use nimbus_blockcache::verify::{StreamFault, Verified};

/// `(space, block hash)`.
pub use nimbus_blockcache::Key;

/// How a request wants the cache used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    Normal,
    /// Straight to the store, no admission (admins and benchmarks measuring the cold path).
    Bypass,
}

#[derive(Debug, Clone)]
pub struct CacheConfig {
    pub dir: Option<PathBuf>,
    pub disk_capacity: u64,
    pub mem_capacity: u64,
}

/// SSD writes in flight at most. Each holds a block in memory, so this bounds what admission
/// can hold back; when all are busy (the disk is slower than the reads), a block is simply
/// not admitted this time.
const DISK_WRITES_IN_FLIGHT: usize = 4;

/// Store fetches in flight across the gateway. Each holds a whole block (plus the client's
/// buffers) until it is sent, so this bounds cold-path memory; beyond it, readers queue.
const STORE_FETCHES_IN_FLIGHT: usize = 16;

/// Memory for the outboards of blocks read in parts: 8 KiB per 4 MiB block, so 16 MiB covers
/// 8 GiB of blocks.
const OUTBOARD_BYTES: u64 = 16 << 20;
/// How long a URL for reading a block straight from the store is valid. The client uses it at
/// once; the margin is for clocks that differ between the store and the gateway.
const DIRECT_URL_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// The cache's origin: verified reads from the block store.
pub struct StoreFetcher(DynStore);

impl Fetcher for StoreFetcher {
    /// `StoreError` is not `Clone`; coalesced waiters each get an equivalent one.
    type Error = Arc<StoreError>;

    async fn fetch(&self, (space, hash): Key) -> Result<Verified, Arc<StoreError>> {
        let start = Instant::now();
        let block = get_verified_block(self.0.as_ref(), space, &hash).await.map_err(Arc::new)?;
        metrics::histogram!("nimbus_store_fetch_seconds").record(start.elapsed().as_secs_f64());
        metrics::counter!("nimbus_store_bytes_read_total").increment(block.data().len() as u64);
        Ok(block)
    }

    fn ranged(&self) -> bool {
        true
    }

    async fn fetch_range(&self, (space, hash): Key, range: Range<usize>) -> Option<Result<Bytes, Arc<StoreError>>> {
        let hex = blake3::Hash::from_bytes(hash).to_hex();
        let result = self.0.get_range(space, hex.as_str(), range.start as u64..range.end as u64).await;
        metrics::counter!("nimbus_store_range_fetches_total").increment(1);
        if let Ok(b) = &result {
            metrics::counter!("nimbus_store_bytes_read_total").increment(b.len() as u64);
        }
        Some(result.map_err(Arc::new))
    }

    async fn fetch_outboard(&self, (space, hash): Key) -> Result<Option<Bytes>, Arc<StoreError>> {
        let hex = blake3::Hash::from_bytes(hash).to_hex();
        metrics::counter!("nimbus_store_outboard_fetches_total").increment(1);
        self.0.get_outboard(space, hex.as_str()).await.map_err(Arc::new)
    }

    async fn store_outboard(&self, (space, hash): Key, outboard: Bytes) {
        let hex = blake3::Hash::from_bytes(hash).to_hex();
        match self.0.put_outboard(space, hex.as_str(), outboard).await {
            Ok(()) => metrics::counter!("nimbus_store_outboards_written_total").increment(1),
            Err(e) => {
                tracing::debug!(error = %e, block = %hex, "cannot write a block's outboard; a later read will try again")
            }
        }
    }
}

/// The cache's events as the gateway's metrics (docs/OPERATIONS.md lists them).
struct CacheMetrics {
    /// The hit counters of each tier (`[mem, disk]`: hits, bytes), registered at the first hit
    /// (when the recorder is installed): a hit is on every cached read's path, and looking a
    /// labelled counter up in the registry each time cost more than the rest of the hit.
    hits: std::sync::OnceLock<[(metrics::Counter, metrics::Counter); 2]>,
}

impl Events for CacheMetrics {
    fn hit(&self, tier: Tier, bytes: u64) {
        let hits = self.hits.get_or_init(|| {
            [Tier::Mem, Tier::Disk].map(|t| {
                let count = metrics::counter!("nimbus_cache_hits_total", "tier" => t.label());
                let served = metrics::counter!("nimbus_cache_bytes_served_total", "tier" => t.label());
                (count, served)
            })
        });
        let (count, served) = &hits[matches!(tier, Tier::Disk) as usize];
        count.increment(1);
        served.increment(bytes);
    }
    fn miss(&self) {
        metrics::counter!("nimbus_cache_misses_total").increment(1);
    }
    fn bypassed(&self) {
        metrics::counter!("nimbus_cache_bypassed_total").increment(1);
    }
    fn evicted(&self, tier: Tier, entries: u64) {
        metrics::counter!("nimbus_cache_evictions_total", "tier" => tier.label()).increment(entries);
    }
    fn rejected(&self, tier: Tier) {
        metrics::counter!("nimbus_cache_admission_rejects_total", "tier" => tier.label()).increment(1);
    }
    fn corrupt(&self) {
        metrics::counter!("nimbus_cache_corrupt_total").increment(1);
    }
    fn disk_error(&self) {
        metrics::counter!("nimbus_cache_errors_total").increment(1);
    }
    fn size(&self, tier: Tier, bytes: u64) {
        metrics::gauge!("nimbus_cache_size_bytes", "tier" => tier.label()).set(bytes as f64);
    }
    fn fetches_in_flight(&self, n: usize) {
        metrics::gauge!("nimbus_cache_fetches_in_flight").set(n as f64);
    }
}

pub struct BlockCache {
    cache: TieredCache<StoreFetcher>,
    /// The store again, for streamed bypassing reads (which do not go through the fetcher).
    store: DynStore,
}

/// A streamed bypassing read in progress ([`BlockCache::bypass_stream`]).
struct Streamed {
    body: BlockStream,
    /// The check, and the fetch slot held while streaming.
    plan: StreamedRead,
    /// Checked bytes not yet passed on.
    ready: VecDeque<Bytes>,
    ended: bool,
    space: i64,
    hash: String,
    bytes_read: metrics::Counter,
}

/// Numbers for the admin API and the console (the wire type, so the console reads the same shape).
pub use nimbus_proto::wire::CacheStats;

fn clone_err(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(h) => StoreError::NotFound(h.clone()),
        StoreError::Corrupt(h) => StoreError::Corrupt(h.clone()),
        StoreError::Timeout => StoreError::Timeout,
        StoreError::Io(e) => StoreError::Remote(e.to_string()),
        StoreError::Remote(m) => StoreError::Remote(m.clone()),
    }
}

fn read_error(e: ReadError<Arc<StoreError>>, space: i64, hash: &str) -> StoreError {
    match e {
        ReadError::Fetch(e) => clone_err(&e),
        ReadError::Interrupted => StoreError::Remote(format!("the fetch of block {hash} was interrupted")),
        ReadError::Range { .. } => StoreError::Corrupt(hash.to_string()),
        ReadError::Corrupt => corrupt_part(space, hash),
    }
}

/// A part of a block that failed its check: as a whole block that fails its hash
/// (`get_verified_block`), never served, counted and logged.
fn corrupt_part(space: i64, hash: &str) -> StoreError {
    metrics::counter!("nimbus_store_corrupt_blocks_total").increment(1);
    tracing::warn!(space, block = %hash, "part of a block from the store failed verification against the block's hash");
    StoreError::Corrupt(hash.to_string())
}

fn stream_fault(e: StreamFault, space: i64, hash: &str) -> StoreError {
    match e {
        StreamFault::Mismatch(_) => corrupt_part(space, hash),
        StreamFault::Short | StreamFault::Long => StoreError::Remote(format!("streaming block {hash}: {e}")),
    }
}

pub fn parse_key(space: i64, hash: &str) -> Result<Key, StoreError> {
    nimbus_blockcache::hash_from_hex(hash).map(|h| (space, h)).ok_or_else(|| StoreError::Corrupt(hash.to_string()))
}

impl BlockCache {
    /// Opens the tiers. A disk tier that another gateway holds is an error (two caches on one
    /// directory would corrupt each other); any other problem with it leaves the gateway
    /// running on the memory tier and the store, with a warning.
    pub fn open(store: DynStore, cfg: &CacheConfig) -> Result<Self, String> {
        let disk = match (&cfg.dir, cfg.disk_capacity) {
            (Some(dir), capacity) if capacity > 0 => match DiskStore::open(dir, "gateway") {
                Err(OpenError::InUse(m)) => return Err(m),
                Err(OpenError::Unusable(m)) => {
                    tracing::warn!("{m}; running without the SSD cache tier");
                    None
                }
                Ok(store) => Some(DiskTierConfig { store, capacity }),
            },
            _ => None,
        };
        let config = Config {
            mem_bytes: cfg.mem_capacity,
            fetches_in_flight: STORE_FETCHES_IN_FLIGHT,
            disk_writes_in_flight: DISK_WRITES_IN_FLIGHT,
            when_writes_busy: WhenWritesBusy::Skip,
            fetched_to_mem: true,
            ahead_blocks: 0,
            outboard_bytes: OUTBOARD_BYTES,
        };
        let cache = TieredCache::new(
            StoreFetcher(store.clone()),
            config,
            disk,
            Arc::new(CacheMetrics { hits: Default::default() }),
        );
        if let Some(dir) = cache.disk_dir() {
            let s = cache.stats();
            tracing::info!(dir = %dir.display(), entries = s.disk_entries, bytes = s.disk_used, "SSD cache opened");
        }
        Ok(Self { cache, store })
    }

    /// Bytes `range` of block `hash` (of `len` bytes) in `space`, verified, through the cache.
    pub async fn read(
        &self,
        space: i64,
        hash: &str,
        range: Range<usize>,
        len: usize,
        mode: CacheMode,
    ) -> Result<Bytes, StoreError> {
        let key = parse_key(space, hash)?;
        let result = match mode {
            CacheMode::Bypass => self.cache.bypass(key, range, Some(len)).await,
            CacheMode::Normal => self.cache.read(key, range, ReadMode::Part { len }).await,
        };
        result.map_err(|e| read_error(e, space, hash))
    }

    /// Bytes `range` of block `hash` (of `len` bytes) in `space`, bypassing the cache, as a
    /// stream of checked pieces straight from the store: no block-sized buffer. `None` when the
    /// block cannot be read so (no outboard yet, a block of one piece, a store that does not
    /// stream): [`BlockCache::read`] then reads it whole. A piece that fails its check ends
    /// the stream with `Corrupt`, before any of its bytes is passed on.
    pub async fn bypass_stream(
        &self,
        space: i64,
        hash: &str,
        range: Range<usize>,
        len: usize,
    ) -> Result<Option<impl Stream<Item = Result<Bytes, StoreError>> + Send + 'static>, StoreError> {
        let key = parse_key(space, hash)?;
        let plan = self.cache.bypass_streamed(key, range, len).await.map_err(|e| read_error(e, space, hash))?;
        let Some(plan) = plan else { return Ok(None) };
        let span = plan.span.start as u64..plan.span.end as u64;
        let Some(body) = self.store.stream_range(space, hash, span).await? else { return Ok(None) };
        metrics::counter!("nimbus_store_range_fetches_total").increment(1);
        let state = Streamed {
            body,
            plan,
            ready: VecDeque::new(),
            ended: false,
            space,
            hash: hash.to_string(),
            // Registered once: each chunk is then one atomic add.
            bytes_read: metrics::counter!("nimbus_store_bytes_read_total"),
        };
        Ok(Some(stream::try_unfold(state, |mut s| async move {
            loop {
                if let Some(b) = s.ready.pop_front() {
                    return Ok(Some((b, s)));
                }
                if s.ended {
                    return Ok(None);
                }
                match s.body.next().await {
                    Some(chunk) => {
                        let chunk = chunk?;
                        s.bytes_read.increment(chunk.len() as u64);
                        let checked = s.plan.check.push(chunk).map_err(|e| stream_fault(e, s.space, &s.hash))?;
                        s.ready.extend(checked);
                    }
                    None => {
                        s.plan.check.finish().map_err(|e| stream_fault(e, s.space, &s.hash))?;
                        s.ended = true;
                    }
                }
            }
        })))
    }

    /// A URL that reads block `hash` of `space` straight from the store, for a caller that
    /// checks it against the hash itself: when the store gives one (`--s3-direct-reads`) and no
    /// tier here holds the block (serving it from here costs less than the client's extra trip).
    pub async fn direct_url(&self, space: i64, hash: &str) -> Result<Option<String>, StoreError> {
        if self.cache.holds(&parse_key(space, hash)?) {
            return Ok(None);
        }
        self.store.presign_get(space, hash, DIRECT_URL_TTL).await
    }

    /// Store fetches registered now (running, or handing their block over to the SSD).
    pub fn fetches_in_flight(&self) -> usize {
        self.cache.fetches_in_flight()
    }

    /// Empties both tiers.
    pub fn purge(&self) -> Result<(), String> {
        self.cache.purge().map_err(|e| format!("cannot empty the SSD cache: {e}"))
    }

    pub fn stats(&self) -> CacheStats {
        let s = self.cache.stats();
        let total = s.hits_mem + s.hits_disk + s.misses;
        CacheStats {
            mem_capacity_bytes: s.mem_capacity,
            mem_used_bytes: s.mem_used,
            mem_entries: s.mem_entries,
            disk_enabled: s.disk_enabled,
            disk_dir: self.cache.disk_dir().map(|d| d.display().to_string()),
            disk_capacity_bytes: s.disk_capacity,
            disk_used_bytes: s.disk_used,
            disk_entries: s.disk_entries,
            hits_mem: s.hits_mem,
            hits_disk: s.hits_disk,
            misses: s.misses,
            bypassed: s.bypassed,
            hit_ratio: if total == 0 { 0.0 } else { (s.hits_mem + s.hits_disk) as f64 / total as f64 },
            bytes_served_mem: s.bytes_served_mem,
            bytes_served_disk: s.bytes_served_disk,
            bytes_fetched_store: s.bytes_fetched,
            // Every GET of block bytes: whole blocks and ranges of pieces.
            store_fetches: s.fetches + s.range_fetches,
            admission_rejects: s.admission_rejects,
            evictions_mem: s.evictions_mem,
            evictions_disk: s.evictions_disk,
            corrupt_entries: s.corrupt_entries,
            write_errors: s.disk_errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::{BlockStore, LocalStore};
    use nimbus_blockcache::disk::entry_size;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    struct Counting {
        inner: LocalStore,
        gets: AtomicU64,
        /// Ranged reads of blocks.
        ranges: AtomicU64,
        /// Reads never answer (a store that went silent).
        stall: AtomicBool,
        /// Reads that fail before the store answers normally again.
        failures: AtomicU64,
    }

    #[async_trait::async_trait]
    impl BlockStore for Counting {
        async fn put(&self, space: i64, hash: &str, data: Bytes) -> crate::blocks::StoreResult<()> {
            self.inner.put(space, hash, data).await
        }
        async fn get(&self, space: i64, hash: &str) -> crate::blocks::StoreResult<Bytes> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            // Slow enough that concurrent readers overlap.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            if self.stall.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            if self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                return Err(StoreError::Timeout);
            }
            self.inner.get(space, hash).await
        }
        async fn get_range(&self, space: i64, hash: &str, range: Range<u64>) -> crate::blocks::StoreResult<Bytes> {
            self.ranges.fetch_add(1, Ordering::SeqCst);
            self.inner.get_range(space, hash, range).await
        }
        async fn put_outboard(&self, space: i64, hash: &str, data: Bytes) -> crate::blocks::StoreResult<()> {
            self.inner.put_outboard(space, hash, data).await
        }
        async fn get_outboard(&self, space: i64, hash: &str) -> crate::blocks::StoreResult<Option<Bytes>> {
            self.inner.get_outboard(space, hash).await
        }
        async fn delete_space(&self, space: i64) -> crate::blocks::StoreResult<()> {
            self.inner.delete_space(space).await
        }
        async fn check(&self) -> crate::blocks::StoreResult<()> {
            Ok(())
        }
        fn describe(&self) -> String {
            "counting".into()
        }
    }

    async fn setup(dir: &std::path::Path, disk: u64, mem: u64) -> anyhow::Result<(Arc<Counting>, BlockCache)> {
        let store = Arc::new(Counting {
            inner: LocalStore::open(&dir.join("store")).await?,
            gets: AtomicU64::new(0),
            ranges: AtomicU64::new(0),
            stall: AtomicBool::new(false),
            failures: AtomicU64::new(0),
        });
        let cfg = CacheConfig { dir: Some(dir.join("cache")), disk_capacity: disk, mem_capacity: mem };
        let cache = BlockCache::open(store.clone(), &cfg).map_err(anyhow::Error::msg)?;
        Ok((store, cache))
    }

    /// Stores a block as an upload does: with its outboard.
    async fn put(store: &Counting, space: i64, data: &[u8]) -> anyhow::Result<String> {
        let (hash, block) = Verified::hash_new(Bytes::copy_from_slice(data));
        let hash = blake3::Hash::from_bytes(hash).to_hex().to_string();
        crate::blocks::put_verified(store, space, &hash, &block).await?;
        Ok(hash)
    }

    async fn settle() {
        // Background SSD writes run on the blocking pool.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_cold_reads_fetch_once() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        let data = vec![3u8; 1 << 20];
        let hash = put(&store, 1, &data).await?;
        let cache = Arc::new(cache);
        let mut tasks = Vec::new();
        for _ in 0..100 {
            let (c, h) = (cache.clone(), hash.clone());
            tasks.push(tokio::spawn(async move { c.read(1, &h, 0..1 << 20, 1 << 20, CacheMode::Normal).await }));
        }
        for t in tasks {
            assert_eq!(t.await??.len(), 1 << 20);
        }
        assert_eq!(store.gets.load(Ordering::SeqCst), 1);
        settle().await;
        assert_eq!(cache.fetches_in_flight(), 0, "the SSD handover ended with the write");
        Ok(())
    }

    /// Readers that give up while their blocks are fetched (a download dropped mid-body) leave
    /// no fetch and no slot behind: more of them than there are slots, then a read still works.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_reads_never_wedge_the_cache() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        let mut hashes = Vec::new();
        for i in 0..2 * STORE_FETCHES_IN_FLIGHT {
            hashes.push(put(&store, 1, &[i as u8; 1000]).await?);
        }
        let later = put(&store, 1, b"read after the others gave up").await?;
        store.stall.store(true, Ordering::SeqCst);
        for h in &hashes {
            let read = cache.read(1, h, 0..1000, 1000, CacheMode::Normal);
            assert!(tokio::time::timeout(std::time::Duration::from_millis(20), read).await.is_err());
        }
        assert_eq!(cache.fetches_in_flight(), 0);
        store.stall.store(false, Ordering::SeqCst);
        let read = cache.read(1, &later, 0..29, 29, CacheMode::Normal);
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), read).await??;
        assert_eq!(&got[..], b"read after the others gave up");
        // An abandoned block is fetched again by its next reader.
        assert_eq!(cache.read(1, &hashes[0], 0..1000, 1000, CacheMode::Normal).await?.len(), 1000);
        settle().await;
        assert_eq!(cache.fetches_in_flight(), 0);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn store_failures_are_not_remembered() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        let hash = put(&store, 1, &[7u8; 5000]).await?;
        store.failures.store(1, Ordering::SeqCst);
        let first = cache.read(1, &hash, 0..5000, 5000, CacheMode::Normal).await;
        assert!(matches!(first, Err(StoreError::Timeout)), "{first:?}");
        assert_eq!(cache.fetches_in_flight(), 0);
        assert_eq!(cache.read(1, &hash, 0..5000, 5000, CacheMode::Normal).await?.len(), 5000);
        assert_eq!(store.gets.load(Ordering::SeqCst), 2);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tiers_serve_identical_bytes_and_survive_restart() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
        let hash;
        {
            let (store, cache) = setup(dir.path(), 1 << 30, 0).await?;
            hash = put(&store, 5, &data).await?;
            let cold = cache.read(5, &hash, 1000..200_000, data.len(), CacheMode::Normal).await?;
            assert_eq!(&cold[..], &data[1000..200_000]);
            settle().await;
            let warm = cache.read(5, &hash, 1000..200_000, data.len(), CacheMode::Normal).await?;
            assert_eq!(cold, warm);
            assert_eq!(cache.stats().hits_disk, 1);
            let bypass = cache.read(5, &hash, 1000..200_000, data.len(), CacheMode::Bypass).await?;
            assert_eq!(cold, bypass);
        }
        let (store, cache) = setup(dir.path(), 1 << 30, 0).await?;
        let again = cache.read(5, &hash, 0..data.len(), data.len(), CacheMode::Normal).await?;
        assert_eq!(&again[..], &data[..]);
        assert_eq!(store.gets.load(Ordering::SeqCst), 0, "warm after restart");
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn corrupt_or_deleted_entries_are_refetched() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 0).await?;
        let data = vec![9u8; 100_000];
        let hash = put(&store, 2, &data).await?;
        cache.read(2, &hash, 0..10, data.len(), CacheMode::Normal).await?;
        settle().await;
        let file = dir.path().join("cache/blocks/2").join(&hash[..2]).join(&hash);
        let mut raw = std::fs::read(&file)?;
        let last = raw.len() - 1;
        raw[last] ^= 0xff;
        std::fs::write(&file, &raw)?;
        let got = cache.read(2, &hash, 90_000..100_000, data.len(), CacheMode::Normal).await?;
        assert_eq!(&got[..], &data[90_000..100_000]);
        assert_eq!(cache.stats().corrupt_entries, 1);
        settle().await;
        std::fs::remove_dir_all(dir.path().join("cache/blocks"))?;
        let got = cache.read(2, &hash, 0..100_000, data.len(), CacheMode::Normal).await?;
        assert_eq!(&got[..], &data[..]);
        // The read past the damaged entry took only its pieces; the others, whole blocks.
        assert_eq!((store.gets.load(Ordering::SeqCst), store.ranges.load(Ordering::SeqCst)), (2, 1));
        Ok(())
    }

    /// Regression: an SSD read starting at offset 0 was promoted to memory as if it were the
    /// whole block, and every later read past its end failed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ssd_prefix_read_is_not_promoted_as_whole_block() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let hash;
        {
            let (store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
            hash = put(&store, 6, &data).await?;
            cache.read(6, &hash, 0..data.len(), data.len(), CacheMode::Normal).await?;
            settle().await;
        }
        // After a restart the block is on SSD only.
        let (_store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        assert_eq!(&cache.read(6, &hash, 0..4096, data.len(), CacheMode::Normal).await?[..], &data[..4096]);
        assert_eq!(
            &cache.read(6, &hash, 500_000..504_096, data.len(), CacheMode::Normal).await?[..],
            &data[500_000..504_096]
        );
        assert_eq!(&cache.read(6, &hash, 0..data.len(), data.len(), CacheMode::Normal).await?[..], &data[..]);
        // Now whole in memory: any range works from there.
        assert_eq!(
            &cache.read(6, &hash, 999_000..1_000_000, data.len(), CacheMode::Normal).await?[..],
            &data[999_000..]
        );
        assert!(cache.stats().hits_mem >= 1);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unwritable_cache_still_serves() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 0).await?;
        let data = vec![1u8; 50_000];
        let hash = put(&store, 3, &data).await?;
        // Replace the directory entries are written into with a file: every write fails.
        std::fs::remove_dir_all(dir.path().join("cache/tmp"))?;
        std::fs::write(dir.path().join("cache/tmp"), b"not a dir")?;
        for _ in 0..3 {
            assert_eq!(cache.read(3, &hash, 0..50_000, 50_000, CacheMode::Normal).await?.len(), 50_000);
            settle().await;
        }
        assert!(cache.stats().write_errors >= 1);
        assert_eq!(cache.stats().disk_used_bytes, 0);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn disk_bound_is_never_exceeded() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let cap = 5 * entry_size(100_000);
        let (store, cache) = setup(dir.path(), cap, 0).await?;
        for i in 0..20u32 {
            let data = vec![i as u8; 100_000];
            let hash = put(&store, 4, &data).await?;
            cache.read(4, &hash, 0..100_000, data.len(), CacheMode::Normal).await?;
            assert!(cache.stats().disk_used_bytes <= cap);
        }
        settle().await;
        let on_disk: u64 = walk(&dir.path().join("cache/blocks"));
        assert!(on_disk <= cap, "{on_disk} bytes on disk, bound {cap}");
        Ok(())
    }

    fn walk(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        let path = e.path();
                        if path.is_dir() { walk(&path) } else { e.metadata().map(|m| m.len()).unwrap_or(0) }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }

    /// A random part of a block is one ranged GET of its pieces, verified, admitted nowhere;
    /// bit rot in a piece is refused and counted, the other pieces still read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_random_part_is_one_ranged_get() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let (store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let hash = put(&store, 7, &data).await?;
        let len = data.len();
        for mode in [CacheMode::Bypass, CacheMode::Normal] {
            let got = cache.read(7, &hash, 1_000_000..1_004_096, len, mode).await?;
            assert_eq!(&got[..], &data[1_000_000..1_004_096]);
        }
        assert_eq!((store.gets.load(Ordering::SeqCst), store.ranges.load(Ordering::SeqCst)), (0, 2));
        assert_eq!(cache.stats().mem_entries, 0);
        let file = dir.path().join("store/spaces/7/blocks").join(&hash[..2]).join(&hash);
        let mut raw = std::fs::read(&file)?;
        raw[2_000_123] ^= 1;
        std::fs::write(&file, &raw)?;
        let bad = cache.read(7, &hash, 2_000_000..2_000_200, len, CacheMode::Bypass).await;
        assert!(matches!(bad, Err(StoreError::Corrupt(_))), "{bad:?}");
        let good = cache.read(7, &hash, 2_100_000..2_100_200, len, CacheMode::Bypass).await?;
        assert_eq!(&good[..], &data[2_100_000..2_100_200]);
        Ok(())
    }
}
