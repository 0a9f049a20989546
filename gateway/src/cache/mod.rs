//! The gateway's block cache: a small memory tier and an SSD tier in front of the object store.
//!
//! Blocks are immutable and keyed by `(space, BLAKE3 hash)`, so nothing is ever invalidated;
//! what matters is admission, eviction and speed (`nimbus_blockcache::policy`: S3-FIFO, scan-resistant).
//! The space is part of the key on purpose: a hit for a block some other user read would tell
//! a user that someone else holds that content.
//!
//! Read path: memory hit → slice; SSD hit → read and verify only the chunks of the range
//! (`nimbus_blockcache::disk`); miss → one coalesced, verified fetch from the store per block however many
//! readers wait for it, then admission to memory and (in the background) to SSD. A failed or
//! short store read never enters the cache. Any cache fault (disk full, unwritable, files
//! deleted underneath, corruption) degrades to a miss: the store keeps serving.
//!
//! A fetch runs as its own task (`nimbus_blockcache::coalesce`): a reader that goes away (a
//! client that hung up, the read-ahead of an aborted download) never takes the fetch down for
//! the others, and when every reader of a block is gone the fetch is cancelled and its slot
//! freed. Failures are not remembered: the next reader fetches again.

pub mod warm;

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use crate::blocks::{DynStore, StoreError, get_verified};
use nimbus_blockcache::coalesce::{Coalescer, Failure, Linger};
use nimbus_blockcache::disk::{DiskError, DiskStore, OpenError, entry_size};
use nimbus_blockcache::policy::{Admission, S3Fifo};

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

struct MemTier {
    policy: S3Fifo<Key>,
    data: HashMap<Key, Bytes>,
}

/// SSD writes in flight at most. Each holds a block in memory, so this bounds what admission
/// can hold back; when all are busy (the disk is slower than the reads), a block is simply
/// not admitted this time.
const DISK_WRITES_IN_FLIGHT: usize = 4;

struct DiskTier {
    store: DiskStore,
    writes: Arc<tokio::sync::Semaphore>,
    /// Entries in the index whose file is written (admitted entries are reserved first, so
    /// the byte bound holds while writes are in flight).
    policy: Mutex<(S3Fifo<Key>, HashMap<Key, bool>)>,
    warned: AtomicBool,
}

/// Store fetches in flight across the gateway. Each holds a whole block (plus the client's
/// buffers) until it is sent, so this bounds cold-path memory; beyond it, readers queue.
const STORE_FETCHES_IN_FLIGHT: usize = 16;

#[derive(Default)]
struct Counters {
    hits_mem: AtomicU64,
    hits_disk: AtomicU64,
    misses: AtomicU64,
    bypassed: AtomicU64,
    bytes_mem: AtomicU64,
    bytes_disk: AtomicU64,
    bytes_store: AtomicU64,
    rejects: AtomicU64,
    evictions_mem: AtomicU64,
    evictions_disk: AtomicU64,
    corrupt: AtomicU64,
    write_errors: AtomicU64,
    store_fetches: AtomicU64,
}

pub struct BlockCache {
    store: DynStore,
    /// One store fetch per block in flight, at most [`STORE_FETCHES_IN_FLIGHT`] (bypassed
    /// reads take their slots too).
    fetches: Coalescer<Key, Bytes, Arc<StoreError>>,
    tiers: Arc<Tiers>,
}

/// What a fetch's admission step (run by the fetch's own task) needs.
struct Tiers {
    mem: Mutex<MemTier>,
    disk: Option<Arc<DiskTier>>,
    counters: Arc<Counters>,
}

/// Numbers for the admin API and the console (the wire type, so the console reads the same shape).
pub use nimbus_proto::wire::CacheStats;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `StoreError` is not `Clone`; coalesced waiters each get an equivalent one.
fn clone_err(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(h) => StoreError::NotFound(h.clone()),
        StoreError::Corrupt(h) => StoreError::Corrupt(h.clone()),
        StoreError::Timeout => StoreError::Timeout,
        StoreError::Io(e) => StoreError::Remote(e.to_string()),
        StoreError::Remote(m) => StoreError::Remote(m.clone()),
    }
}

pub fn parse_key(space: i64, hash: &str) -> Result<Key, StoreError> {
    blake3::Hash::from_hex(hash).map(|h| (space, *h.as_bytes())).map_err(|_| StoreError::Corrupt(hash.to_string()))
}

impl BlockCache {
    /// Opens the tiers. A disk tier that another gateway holds is an error (two caches on one
    /// directory would corrupt each other); any other problem with it leaves the gateway
    /// running on the memory tier and the store, with a warning.
    pub fn open(store: DynStore, cfg: &CacheConfig) -> Result<Self, String> {
        let disk = match (&cfg.dir, cfg.disk_capacity) {
            (Some(dir), cap) if cap > 0 => match DiskStore::open(dir, "gateway") {
                Err(OpenError::InUse(m)) => return Err(m),
                Err(OpenError::Unusable(m)) => {
                    tracing::warn!("{m}; running without the SSD cache tier");
                    None
                }
                Ok(store) => {
                    let mut policy = S3Fifo::new(cap);
                    let mut ready = HashMap::new();
                    let found = store.scan();
                    let count = found.len();
                    for (key, size) in found {
                        match policy.insert(key, size) {
                            Admission::Admitted(evicted) => {
                                for k in evicted {
                                    ready.remove(&k);
                                    store.remove(&k);
                                }
                                ready.insert(key, true);
                            }
                            Admission::Present => {}
                            Admission::TooLarge => store.remove(&key),
                        }
                    }
                    tracing::info!(dir = %dir.display(), entries = count, bytes = policy.used(), "SSD cache opened");
                    Some(Arc::new(DiskTier {
                        store,
                        writes: Arc::new(tokio::sync::Semaphore::new(DISK_WRITES_IN_FLIGHT)),
                        policy: Mutex::new((policy, ready)),
                        warned: AtomicBool::new(false),
                    }))
                }
            },
            _ => None,
        };
        let fetches = Coalescer::with_observer(STORE_FETCHES_IN_FLIGHT, |n| {
            metrics::gauge!("nimbus_cache_fetches_in_flight").set(n as f64);
        });
        let cache = Self {
            store,
            fetches,
            tiers: Arc::new(Tiers {
                mem: Mutex::new(MemTier { policy: S3Fifo::new(cfg.mem_capacity), data: HashMap::new() }),
                disk,
                counters: Arc::new(Counters::default()),
            }),
        };
        metrics::gauge!("nimbus_cache_fetches_in_flight").set(0.0);
        cache.publish_sizes();
        Ok(cache)
    }

    /// Bytes `range` of block `hash` in `space`, verified, through the cache.
    pub async fn read(
        &self,
        space: i64,
        hash: &str,
        range: Range<usize>,
        mode: CacheMode,
    ) -> Result<Bytes, StoreError> {
        let c = &self.tiers.counters;
        if mode == CacheMode::Bypass {
            c.bypassed.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("nimbus_cache_bypassed_total").increment(1);
            let data = self.fetch_store(space, hash).await?;
            return slice(data, range, hash);
        }
        let key = parse_key(space, hash)?;
        if let Some(data) = self.tiers.mem_get(&key) {
            c.hits_mem.fetch_add(1, Ordering::Relaxed);
            let out = slice(data, range, hash)?;
            c.bytes_mem.fetch_add(out.len() as u64, Ordering::Relaxed);
            metrics::counter!("nimbus_cache_hits_total", "tier" => "mem").increment(1);
            metrics::counter!("nimbus_cache_bytes_served_total", "tier" => "mem").increment(out.len() as u64);
            return Ok(out);
        }
        if let Some(out) = self.tiers.disk_get(&key, range.clone()).await {
            c.hits_disk.fetch_add(1, Ordering::Relaxed);
            c.bytes_disk.fetch_add(out.len() as u64, Ordering::Relaxed);
            metrics::counter!("nimbus_cache_hits_total", "tier" => "disk").increment(1);
            metrics::counter!("nimbus_cache_bytes_served_total", "tier" => "disk").increment(out.len() as u64);
            return Ok(out);
        }
        c.misses.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("nimbus_cache_misses_total").increment(1);
        let data = self.fetch_coalesced(key, space, hash).await?;
        slice(data, range, hash)
    }

    async fn fetch_store(&self, space: i64, hash: &str) -> Result<Bytes, StoreError> {
        let _slot = self.fetches.slot().await;
        fetch(self.store.clone(), self.tiers.counters.clone(), space, hash.to_string()).await
    }

    /// One store fetch per block however many readers miss on it at once; it lives on its own,
    /// whatever happens to the readers (see the module comment).
    async fn fetch_coalesced(&self, key: Key, space: i64, hash: &str) -> Result<Bytes, StoreError> {
        let (store, counters, hash_owned) = (self.store.clone(), self.tiers.counters.clone(), hash.to_string());
        let tiers = self.tiers.clone();
        let fetch = {
            let tiers = tiers.clone();
            move || async move {
                // A reader that missed the tiers just before the previous fetch's block became
                // readable there (that fetch then let go) lands here: a tier serves it, not the store.
                if let Some(data) = tiers.mem_get(&key) {
                    return Ok(data);
                }
                if let Some(data) = tiers.disk_get_whole(&key).await {
                    return Ok(data);
                }
                fetch(store, counters, space, hash_owned).await.map_err(Arc::new)
            }
        };
        // Only verified, complete blocks get here. The fetch stays registered until a tier can
        // serve the block, so readers arriving meanwhile take its bytes instead of fetching
        // again: at once if memory took it, else once the SSD entry is written.
        let admit = move |data: Bytes, linger: Linger| {
            tiers.mem_put(key, data.clone());
            let in_mem = lock(&tiers.mem).data.contains_key(&key);
            tiers.disk_put(key, data, (!in_mem).then_some(linger));
            std::future::ready(())
        };
        match self.fetches.get(key, fetch, admit).await {
            Ok(data) => Ok(data),
            Err(Failure::Failed(e)) => Err(clone_err(&e)),
            Err(Failure::Interrupted) => Err(StoreError::Remote(format!("the fetch of block {hash} was interrupted"))),
        }
    }

    /// Store fetches registered now (running, or handing their block over to the SSD).
    pub fn fetches_in_flight(&self) -> usize {
        self.fetches.in_flight()
    }
}

impl Tiers {
    fn mem_get(&self, key: &Key) -> Option<Bytes> {
        let mut mem = lock(&self.mem);
        let data = mem.data.get(key).cloned()?;
        mem.policy.touch(key);
        Some(data)
    }

    fn mem_put(&self, key: Key, data: Bytes) {
        let mut mem = lock(&self.mem);
        match mem.policy.insert(key, data.len() as u64) {
            Admission::Admitted(evicted) => {
                for k in &evicted {
                    mem.data.remove(k);
                }
                self.counters.evictions_mem.fetch_add(evicted.len() as u64, Ordering::Relaxed);
                metrics::counter!("nimbus_cache_evictions_total", "tier" => "mem").increment(evicted.len() as u64);
                mem.data.insert(key, data);
            }
            Admission::Present => {}
            Admission::TooLarge => {
                self.counters.rejects.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("nimbus_cache_admission_rejects_total", "tier" => "mem").increment(1);
            }
        }
        metrics::gauge!("nimbus_cache_size_bytes", "tier" => "mem").set(mem.policy.used() as f64);
    }

    /// The whole block from the SSD tier, if its entry is readable.
    async fn disk_get_whole(&self, key: &Key) -> Option<Bytes> {
        let tier = self.disk.as_ref()?;
        if lock(&tier.policy).1.get(key) != Some(&true) {
            return None;
        }
        let (t, k) = (tier.clone(), *key);
        // An empty range reads only the header, which gives the block's length.
        let (_, len) = tokio::task::spawn_blocking(move || t.store.read(&k, 0, 0)).await.ok()?.ok()?;
        self.disk_get(key, 0..len).await
    }

    async fn disk_get(&self, key: &Key, range: Range<usize>) -> Option<Bytes> {
        let tier = self.disk.as_ref()?;
        {
            let mut p = lock(&tier.policy);
            if p.1.get(key) != Some(&true) {
                return None;
            }
            p.0.touch(key);
        }
        let (t, k) = (tier.clone(), *key);
        let result = tokio::task::spawn_blocking(move || t.store.read(&k, range.start, range.end)).await;
        match result {
            Ok(Ok((data, block_len))) => {
                // A whole small block read from SSD is likely hot: keep it in memory too.
                // Only a read of the entire block may be promoted: the memory tier holds
                // whole blocks.
                let whole = data.len() == block_len;
                if whole && data.len() as u64 <= lock(&self.mem).policy.capacity() / 64 {
                    self.mem_put(*key, data.clone());
                }
                Some(data)
            }
            Ok(Err(e)) => {
                if let DiskError::Corrupt(why) = e {
                    self.counters.corrupt.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("nimbus_cache_corrupt_total").increment(1);
                    tracing::warn!(why, "dropped a corrupt SSD cache entry; refetching from the store");
                } else if let DiskError::Io(e) = &e {
                    self.disk_fault(tier, e);
                }
                self.disk_drop(tier, key);
                None
            }
            Err(_) => None,
        }
    }

    fn disk_drop(&self, tier: &DiskTier, key: &Key) {
        let mut p = lock(&tier.policy);
        p.0.remove(key);
        p.1.remove(key);
        tier.store.remove(key);
        metrics::gauge!("nimbus_cache_size_bytes", "tier" => "disk").set(p.0.used() as f64);
    }

    fn disk_fault(&self, tier: &DiskTier, e: &std::io::Error) {
        self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("nimbus_cache_errors_total").increment(1);
        if !tier.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %e, dir = %tier.store.root().display(), "SSD cache failing; serving from the object store (warned once)");
        }
    }

    /// Admits a verified block to the SSD tier in the background. A `linger` (the block's
    /// finished fetch, still registered) is held until the entry is readable, or dropped at
    /// once when the block is not admitted; dropped on every path, a panic included.
    fn disk_put(&self, key: Key, data: Bytes, linger: Option<Linger>) {
        let Some(tier) = self.disk.clone() else { return };
        let Ok(permit) = tier.writes.clone().try_acquire_owned() else {
            self.counters.rejects.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("nimbus_cache_admission_rejects_total", "tier" => "disk").increment(1);
            return;
        };
        let size = entry_size(data.len());
        let evicted = {
            let mut p = lock(&tier.policy);
            match p.0.insert(key, size) {
                Admission::Admitted(evicted) => {
                    for k in &evicted {
                        p.1.remove(k);
                    }
                    p.1.insert(key, false);
                    evicted
                }
                Admission::Present => return,
                Admission::TooLarge => {
                    self.counters.rejects.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("nimbus_cache_admission_rejects_total", "tier" => "disk").increment(1);
                    return;
                }
            }
        };
        self.counters.evictions_disk.fetch_add(evicted.len() as u64, Ordering::Relaxed);
        metrics::counter!("nimbus_cache_evictions_total", "tier" => "disk").increment(evicted.len() as u64);
        let counters = self.counters.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            for k in &evicted {
                tier.store.remove(k);
            }
            let result = tier.store.write(&key, &data);
            let mut p = lock(&tier.policy);
            match result {
                Ok(()) => {
                    if let Some(ready) = p.1.get_mut(&key) {
                        *ready = true;
                    } else {
                        // Purged or evicted while it was being written.
                        tier.store.remove(&key);
                    }
                }
                Err(e) => {
                    p.0.remove(&key);
                    p.1.remove(&key);
                    counters.write_errors.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("nimbus_cache_errors_total").increment(1);
                    if !tier.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(error = %e, dir = %tier.store.root().display(), "cannot write to the SSD cache; serving from the object store (warned once)");
                    }
                }
            }
            metrics::gauge!("nimbus_cache_size_bytes", "tier" => "disk").set(p.0.used() as f64);
            drop(p);
            // Readable now (or given up): readers arriving from here on find it themselves.
            drop(linger);
        });
    }
}

impl BlockCache {
    /// Empties both tiers.
    pub fn purge(&self) -> Result<(), String> {
        {
            let mut mem = lock(&self.tiers.mem);
            mem.policy.clear();
            mem.data.clear();
        }
        if let Some(tier) = &self.tiers.disk {
            let mut p = lock(&tier.policy);
            p.0.clear();
            p.1.clear();
            tier.store.purge().map_err(|e| format!("cannot empty the SSD cache: {e}"))?;
        }
        self.publish_sizes();
        Ok(())
    }

    fn publish_sizes(&self) {
        metrics::gauge!("nimbus_cache_size_bytes", "tier" => "mem").set(lock(&self.tiers.mem).policy.used() as f64);
        if let Some(tier) = &self.tiers.disk {
            metrics::gauge!("nimbus_cache_size_bytes", "tier" => "disk").set(lock(&tier.policy).0.used() as f64);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.tiers.counters;
        let (mem_cap, mem_used, mem_n) = {
            let m = lock(&self.tiers.mem);
            (m.policy.capacity(), m.policy.used(), m.policy.len() as u64)
        };
        let (disk_cap, disk_used, disk_n, dir) = match &self.tiers.disk {
            Some(t) => {
                let p = lock(&t.policy);
                (p.0.capacity(), p.0.used(), p.0.len() as u64, Some(t.store.root().display().to_string()))
            }
            None => (0, 0, 0, None),
        };
        let hits_mem = c.hits_mem.load(Ordering::Relaxed);
        let hits_disk = c.hits_disk.load(Ordering::Relaxed);
        let misses = c.misses.load(Ordering::Relaxed);
        let total = hits_mem + hits_disk + misses;
        CacheStats {
            mem_capacity_bytes: mem_cap,
            mem_used_bytes: mem_used,
            mem_entries: mem_n,
            disk_enabled: self.tiers.disk.is_some(),
            disk_dir: dir,
            disk_capacity_bytes: disk_cap,
            disk_used_bytes: disk_used,
            disk_entries: disk_n,
            hits_mem,
            hits_disk,
            misses,
            bypassed: c.bypassed.load(Ordering::Relaxed),
            hit_ratio: if total == 0 { 0.0 } else { (hits_mem + hits_disk) as f64 / total as f64 },
            bytes_served_mem: c.bytes_mem.load(Ordering::Relaxed),
            bytes_served_disk: c.bytes_disk.load(Ordering::Relaxed),
            bytes_fetched_store: c.bytes_store.load(Ordering::Relaxed),
            store_fetches: c.store_fetches.load(Ordering::Relaxed),
            admission_rejects: c.rejects.load(Ordering::Relaxed),
            evictions_mem: c.evictions_mem.load(Ordering::Relaxed),
            evictions_disk: c.evictions_disk.load(Ordering::Relaxed),
            corrupt_entries: c.corrupt.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
        }
    }
}

/// One verified store read; the caller holds a fetch slot.
async fn fetch(store: DynStore, counters: Arc<Counters>, space: i64, hash: String) -> Result<Bytes, StoreError> {
    let start = Instant::now();
    counters.store_fetches.fetch_add(1, Ordering::Relaxed);
    let data = get_verified(store.as_ref(), space, &hash).await?;
    metrics::histogram!("nimbus_store_fetch_seconds").record(start.elapsed().as_secs_f64());
    metrics::counter!("nimbus_store_bytes_read_total").increment(data.len() as u64);
    counters.bytes_store.fetch_add(data.len() as u64, Ordering::Relaxed);
    Ok(data)
}

fn slice(data: Bytes, range: Range<usize>, hash: &str) -> Result<Bytes, StoreError> {
    if range.start > range.end || range.end > data.len() {
        return Err(StoreError::Corrupt(hash.to_string()));
    }
    Ok(data.slice(range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::{BlockStore, LocalStore};

    struct Counting {
        inner: LocalStore,
        gets: AtomicU64,
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
            stall: AtomicBool::new(false),
            failures: AtomicU64::new(0),
        });
        let cfg = CacheConfig { dir: Some(dir.join("cache")), disk_capacity: disk, mem_capacity: mem };
        let cache = BlockCache::open(store.clone(), &cfg).map_err(anyhow::Error::msg)?;
        Ok((store, cache))
    }

    async fn put(store: &Counting, space: i64, data: &[u8]) -> anyhow::Result<String> {
        let hash = blake3::hash(data).to_hex().to_string();
        store.put(space, &hash, Bytes::copy_from_slice(data)).await?;
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
            tasks.push(tokio::spawn(async move { c.read(1, &h, 0..1 << 20, CacheMode::Normal).await }));
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
            let read = cache.read(1, h, 0..1000, CacheMode::Normal);
            assert!(tokio::time::timeout(std::time::Duration::from_millis(20), read).await.is_err());
        }
        assert_eq!(cache.fetches_in_flight(), 0);
        store.stall.store(false, Ordering::SeqCst);
        let read = cache.read(1, &later, 0..29, CacheMode::Normal);
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), read).await??;
        assert_eq!(&got[..], b"read after the others gave up");
        // An abandoned block is fetched again by its next reader.
        assert_eq!(cache.read(1, &hashes[0], 0..1000, CacheMode::Normal).await?.len(), 1000);
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
        let first = cache.read(1, &hash, 0..5000, CacheMode::Normal).await;
        assert!(matches!(first, Err(StoreError::Timeout)), "{first:?}");
        assert_eq!(cache.fetches_in_flight(), 0);
        assert_eq!(cache.read(1, &hash, 0..5000, CacheMode::Normal).await?.len(), 5000);
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
            let cold = cache.read(5, &hash, 1000..200_000, CacheMode::Normal).await?;
            assert_eq!(&cold[..], &data[1000..200_000]);
            settle().await;
            let warm = cache.read(5, &hash, 1000..200_000, CacheMode::Normal).await?;
            assert_eq!(cold, warm);
            assert_eq!(cache.stats().hits_disk, 1);
            let bypass = cache.read(5, &hash, 1000..200_000, CacheMode::Bypass).await?;
            assert_eq!(cold, bypass);
        }
        let (store, cache) = setup(dir.path(), 1 << 30, 0).await?;
        let again = cache.read(5, &hash, 0..data.len(), CacheMode::Normal).await?;
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
        cache.read(2, &hash, 0..10, CacheMode::Normal).await?;
        settle().await;
        let file = dir.path().join("cache/blocks/2").join(&hash[..2]).join(&hash);
        let mut raw = std::fs::read(&file)?;
        let last = raw.len() - 1;
        raw[last] ^= 0xff;
        std::fs::write(&file, &raw)?;
        let got = cache.read(2, &hash, 90_000..100_000, CacheMode::Normal).await?;
        assert_eq!(&got[..], &data[90_000..100_000]);
        assert_eq!(cache.stats().corrupt_entries, 1);
        settle().await;
        std::fs::remove_dir_all(dir.path().join("cache/blocks"))?;
        let got = cache.read(2, &hash, 0..100_000, CacheMode::Normal).await?;
        assert_eq!(&got[..], &data[..]);
        assert_eq!(store.gets.load(Ordering::SeqCst), 3);
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
            cache.read(6, &hash, 0..data.len(), CacheMode::Normal).await?;
            settle().await;
        }
        // After a restart the block is on SSD only.
        let (_store, cache) = setup(dir.path(), 1 << 30, 64 << 20).await?;
        assert_eq!(&cache.read(6, &hash, 0..4096, CacheMode::Normal).await?[..], &data[..4096]);
        assert_eq!(&cache.read(6, &hash, 500_000..504_096, CacheMode::Normal).await?[..], &data[500_000..504_096]);
        assert_eq!(&cache.read(6, &hash, 0..data.len(), CacheMode::Normal).await?[..], &data[..]);
        // Now whole in memory: any range works from there.
        assert_eq!(&cache.read(6, &hash, 999_000..1_000_000, CacheMode::Normal).await?[..], &data[999_000..]);
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
            assert_eq!(cache.read(3, &hash, 0..50_000, CacheMode::Normal).await?.len(), 50_000);
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
            cache.read(4, &hash, 0..100_000, CacheMode::Normal).await?;
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
}
