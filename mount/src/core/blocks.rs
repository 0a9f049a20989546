//! The mount's local block cache: a small memory tier (whole blocks, for sequential reads) over
//! a persistent directory tier (the checksummed, versioned entry format of
//! `nimbus_blockcache::disk`, S3-FIFO with the byte bound enforced at admission).
//!
//! Blocks are immutable and addressed by BLAKE3 hash, so an entry is never stale. Every block
//! fetched from the gateway is verified against its hash before anyone sees it; concurrent
//! misses on one block make one fetch (`nimbus_blockcache::coalesce`), which runs on its own:
//! a reader that gives up (an interrupted read, a closed file) never ends it for the others,
//! the last one to give up cancels it, and its slot is freed on every path. Failures are not
//! remembered.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use nimbus_blockcache::Key;
use nimbus_blockcache::coalesce::{Coalescer, Failure, Linger};
use nimbus_blockcache::disk::{DiskError, DiskStore, entry_size};
use nimbus_blockcache::policy::{Admission, S3Fifo};

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

struct Mem {
    policy: S3Fifo<Hash>,
    data: HashMap<Hash, Bytes>,
}

struct Disk {
    store: DiskStore,
    index: Mutex<S3Fifo<Key>>,
}

#[derive(Default, Debug, Clone, Copy, serde::Serialize)]
pub struct CacheCounters {
    pub hits_mem: u64,
    pub hits_disk: u64,
    pub fetched: u64,
    pub bytes_fetched: u64,
    pub corrupt: u64,
    pub write_errors: u64,
}

#[derive(Default)]
struct Counters {
    hits_mem: AtomicU64,
    hits_disk: AtomicU64,
    fetched: AtomicU64,
    bytes_fetched: AtomicU64,
    corrupt: AtomicU64,
    write_errors: AtomicU64,
}

pub struct BlockCache {
    remote: Arc<dyn Remote>,
    mem: Mutex<Mem>,
    /// Read-ahead blocks not read yet, oldest first. Kept out of the memory tier: its small
    /// FIFO (10 % of `--cache-mem`) is shorter than a read-ahead window, so prefetched blocks
    /// used to be evicted there before their reader arrived, and were read back from the
    /// directory or fetched again. A block moves to the memory tier when it is read.
    ahead: Mutex<VecDeque<(Hash, Bytes)>>,
    /// One whole-block load at a time per block: a reader that catches up with the read-ahead
    /// of its block waits for it instead of reading the same block from the directory again.
    loading: Mutex<HashMap<Hash, Arc<tokio::sync::Mutex<()>>>>,
    disk: Option<Arc<Disk>>,
    /// Fetches from the gateway, at most `budget.fetches` at once (a fetch keeps its slot until
    /// its block has a directory-write slot, so blocks waiting for the disk count too).
    fetches: Coalescer<Hash, Bytes, Arc<VfsError>>,
    writer: DiskWriter,
    budget: MemBudget,
    counters: Arc<Counters>,
}

/// Writes blocks to the directory tier from blocking threads, at most `budget.writes` at once.
#[derive(Clone)]
struct DiskWriter {
    disk: Option<Arc<Disk>>,
    slots: Arc<tokio::sync::Semaphore>,
    counters: Arc<Counters>,
}

pub fn parse_hash(hex: &str) -> VfsResult<Hash> {
    blake3::Hash::from_hex(hex)
        .map(|h| *h.as_bytes())
        .map_err(|_| VfsError::Io(format!("the server sent a malformed block hash `{hex}`")))
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
            Some(dir) if disk_capacity > 0 => {
                let store = DiskStore::open(dir, "mount").map_err(|e| e.to_string())?;
                let mut index = S3Fifo::new(disk_capacity);
                for (key, size) in store.scan() {
                    if let Admission::Admitted(evicted) = index.insert(key, size) {
                        for k in evicted {
                            store.remove(&k);
                        }
                    }
                }
                Some(Arc::new(Disk { store, index: Mutex::new(index) }))
            }
            _ => None,
        };
        let counters: Arc<Counters> = Arc::default();
        let writer = DiskWriter {
            disk: disk.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(budget.writes)),
            counters: counters.clone(),
        };
        Ok(Self {
            remote,
            mem: Mutex::new(Mem { policy: S3Fifo::new(budget.tier_bytes), data: HashMap::new() }),
            ahead: Mutex::default(),
            loading: Mutex::default(),
            disk,
            fetches: Coalescer::new(budget.fetches),
            writer,
            budget,
            counters,
        })
    }

    pub fn counters(&self) -> CacheCounters {
        let c = &self.counters;
        CacheCounters {
            hits_mem: c.hits_mem.load(Ordering::Relaxed),
            hits_disk: c.hits_disk.load(Ordering::Relaxed),
            fetched: c.fetched.load(Ordering::Relaxed),
            bytes_fetched: c.bytes_fetched.load(Ordering::Relaxed),
            corrupt: c.corrupt.load(Ordering::Relaxed),
            write_errors: c.write_errors.load(Ordering::Relaxed),
        }
    }

    /// Fetches from the gateway registered now (a reader waits for them, or their block is
    /// on its way to the directory tier).
    pub fn fetches_in_flight(&self) -> usize {
        self.fetches.in_flight()
    }

    /// Bytes held by the directory tier and its bound.
    pub fn disk_usage(&self) -> (u64, u64) {
        match &self.disk {
            Some(d) => {
                let idx = d.index.lock().unwrap_or_else(|p| p.into_inner());
                (idx.used(), idx.capacity())
            }
            None => (0, 0),
        }
    }

    /// Drops every cached block (the desktop app's "free up space").
    pub fn purge(&self) -> VfsResult<()> {
        {
            let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
            m.policy.clear();
            m.data.clear();
        }
        self.ahead.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some(d) = &self.disk {
            d.index.lock().unwrap_or_else(|p| p.into_inner()).clear();
            d.store.purge()?;
        }
        Ok(())
    }

    /// A block of the memory tier; `touch` counts this as a use (what promotes it to the
    /// main queue when the small one evicts it).
    fn mem_get(&self, hash: &Hash, touch: bool) -> Option<Bytes> {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        let b = m.data.get(hash).cloned()?;
        if touch {
            m.policy.touch(hash);
        }
        Some(b)
    }

    /// A read-ahead block; `take` removes it (its reader arrived).
    fn ahead_get(&self, hash: &Hash, take: bool) -> Option<Bytes> {
        let mut a = self.ahead.lock().unwrap_or_else(|p| p.into_inner());
        let i = a.iter().position(|(h, _)| h == hash)?;
        if take { a.remove(i).map(|(_, b)| b) } else { Some(a[i].1.clone()) }
    }

    fn ahead_put(&self, hash: Hash, data: Bytes) {
        let mut a = self.ahead.lock().unwrap_or_else(|p| p.into_inner());
        if a.iter().any(|(h, _)| *h == hash) {
            return;
        }
        if a.len() >= self.budget.ahead {
            a.pop_front();
        }
        a.push_back((hash, data));
    }

    fn mem_put(&self, hash: Hash, data: Bytes) {
        let mut m = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        if let Admission::Admitted(evicted) = m.policy.insert(hash, data.len() as u64) {
            for k in evicted {
                m.data.remove(&k);
            }
            m.data.insert(hash, data);
        }
    }

    fn disk_has(&self, hash: &Hash) -> bool {
        self.disk.as_ref().is_some_and(|d| d.index.lock().unwrap_or_else(|p| p.into_inner()).contains(&(0, *hash)))
    }

    /// `from..to` of a block of `len` bytes. `whole` reads the full block into the memory tier
    /// (sequential readers come back for the rest); otherwise a directory hit reads and
    /// verifies only the chunks the range covers (random readers).
    pub async fn read(&self, hash: Hash, len: u64, from: usize, to: usize, whole: bool) -> VfsResult<Bytes> {
        // A sequential reader takes a block in many pieces: only a pass's first piece is a use,
        // so one pass over a file does not make its blocks look hot.
        if let Some(b) = self.mem_get(&hash, !whole || from == 0) {
            self.counters.hits_mem.fetch_add(1, Ordering::Relaxed);
            return slice(&b, from, to);
        }
        if !whole {
            if let Some(b) = self.ahead_get(&hash, false) {
                self.counters.hits_mem.fetch_add(1, Ordering::Relaxed);
                return slice(&b, from, to);
            }
            return match self.load(hash, len, false, from, to).await? {
                Loaded::Range(data) => Ok(data),
                Loaded::Whole(data) => {
                    self.mem_put(hash, data.clone());
                    slice(&data, from, to)
                }
            };
        }
        let gate = self.gate(hash).await;
        // Whoever held the gate before may have brought the block in.
        let found = self.mem_get(&hash, false).or_else(|| self.ahead_get(&hash, true));
        let res = match found {
            Some(b) => {
                self.counters.hits_mem.fetch_add(1, Ordering::Relaxed);
                Ok(b)
            }
            None => self.load(hash, len, true, 0, 0).await.map(Loaded::into_bytes),
        };
        if let Ok(b) = &res {
            self.mem_put(hash, b.clone());
        }
        drop(gate);
        slice(&res?, from, to)
    }

    /// Loads a block into the read-ahead buffer without returning it.
    pub async fn prefetch(&self, hash: Hash, len: u64) -> VfsResult<()> {
        if self.mem_get(&hash, false).is_some() || self.ahead_get(&hash, false).is_some() {
            return Ok(());
        }
        let _gate = self.gate(hash).await;
        if self.mem_get(&hash, false).is_some() || self.ahead_get(&hash, false).is_some() {
            Ok(())
        } else {
            self.load(hash, len, true, 0, 0).await.map(|l| self.ahead_put(hash, l.into_bytes()))
        }
    }

    /// Takes the block's load gate; released and forgotten when the guard drops (a cancelled
    /// reader included).
    async fn gate(&self, hash: Hash) -> Gated<'_> {
        let gate = self.loading.lock().unwrap_or_else(|p| p.into_inner()).entry(hash).or_default().clone();
        let mut g = Gated { loading: &self.loading, hash, gate, held: None };
        g.held = Some(g.gate.clone().lock_owned().await);
        g
    }

    /// From the directory tier (the range only, unless `whole`), else from the gateway.
    async fn load(&self, hash: Hash, len: u64, whole: bool, from: usize, to: usize) -> VfsResult<Loaded> {
        if let Some(disk) = self.disk.clone().filter(|_| self.disk_has(&hash)) {
            let key = (0, hash);
            let (a, b) = if whole { (0, len as usize) } else { (from, to) };
            let d = disk.clone();
            let res = tokio::task::spawn_blocking(move || d.store.read(&key, a, b))
                .await
                .map_err(|e| VfsError::Io(e.to_string()))?;
            match res {
                Ok((data, _)) => {
                    disk.index.lock().unwrap_or_else(|p| p.into_inner()).touch(&key);
                    self.counters.hits_disk.fetch_add(1, Ordering::Relaxed);
                    return Ok(if whole { Loaded::Whole(data) } else { Loaded::Range(data) });
                }
                Err(e) => {
                    if matches!(e, DiskError::Corrupt(_)) {
                        self.counters.corrupt.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "dropping a corrupt cache entry; fetching the block again");
                    }
                    disk.index.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    disk.store.remove(&key);
                }
            }
        }
        self.fetch(hash, len).await.map(Loaded::Whole)
    }

    /// Admits a block the mount itself just uploaded (its hash was computed locally).
    pub async fn admit(&self, hash: Hash, data: Bytes) {
        self.writer.admit(hash, data.clone()).await;
        self.mem_put(hash, data);
    }

    /// How `--cache-mem` was shared out.
    pub fn budget(&self) -> MemBudget {
        self.budget
    }

    /// One verified fetch from the gateway per block however many readers miss on it.
    async fn fetch(&self, hash: Hash, len: u64) -> VfsResult<Bytes> {
        let (remote, counters) = (self.remote.clone(), self.counters.clone());
        let fetch = move || async move {
            let hex = blake3::Hash::from_bytes(hash).to_hex();
            let data = remote.get_block(hex.as_str()).await.map_err(|e| Arc::new(VfsError::from(e)))?;
            if data.len() as u64 != len || *blake3::hash(&data).as_bytes() != hash {
                return Err(Arc::new(VfsError::Io(format!("block {hex} came back corrupt from the server"))));
            }
            counters.fetched.fetch_add(1, Ordering::Relaxed);
            counters.bytes_fetched.fetch_add(len, Ordering::Relaxed);
            Ok(data)
        };
        let writer = self.writer.clone();
        let admit = move |data: Bytes, linger: Linger| async move {
            // Readers put the block into memory themselves; a later one need not wait for the
            // directory write.
            drop(linger);
            writer.admit(hash, data).await;
        };
        match self.fetches.get(hash, fetch, admit).await {
            Ok(data) => Ok(data),
            Err(Failure::Failed(e)) => Err(match &*e {
                VfsError::Offline => VfsError::Offline,
                VfsError::NotFound => VfsError::NotFound,
                other => VfsError::Io(other.to_string()),
            }),
            Err(Failure::Interrupted) => Err(VfsError::Io("a block fetch from the server was interrupted".into())),
        }
    }
}

impl DiskWriter {
    /// Waits for a write slot (so blocks do not pile up in memory when the disk is slower than
    /// the gateway), then writes the block from a blocking thread.
    async fn admit(&self, hash: Hash, data: Bytes) {
        let Some(disk) = self.disk.clone() else { return };
        let Ok(permit) = self.slots.clone().acquire_owned().await else { return };
        let counters = self.counters.clone();
        let key = (0, hash);
        let evicted = {
            let mut idx = disk.index.lock().unwrap_or_else(|p| p.into_inner());
            match idx.insert(key, entry_size(data.len())) {
                Admission::Admitted(evicted) => evicted,
                Admission::Present | Admission::TooLarge => return,
            }
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            for k in evicted {
                disk.store.remove(&k);
            }
            if let Err(e) = disk.store.write(&key, &data) {
                counters.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "cannot write to the local cache; reading from the gateway instead");
                disk.index.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            }
        });
    }
}

/// A block's load gate, held. Dropping it releases the gate and forgets it once nobody else
/// holds or waits for it, on every path (a reader cancelled mid-load included).
struct Gated<'a> {
    loading: &'a Mutex<HashMap<Hash, Arc<tokio::sync::Mutex<()>>>>,
    hash: Hash,
    gate: Arc<tokio::sync::Mutex<()>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Gated<'_> {
    fn drop(&mut self) {
        drop(self.held.take());
        let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        // The map holds one reference, this guard another; any more is someone waiting.
        if Arc::strong_count(&self.gate) <= 2 {
            loading.remove(&self.hash);
        }
    }
}

/// What [`BlockCache::load`] got: the whole block, or only the asked range (a directory hit
/// for a random reader).
enum Loaded {
    Whole(Bytes),
    Range(Bytes),
}

impl Loaded {
    fn into_bytes(self) -> Bytes {
        match self {
            Loaded::Whole(b) | Loaded::Range(b) => b,
        }
    }
}

fn slice(b: &Bytes, from: usize, to: usize) -> VfsResult<Bytes> {
    if from > to || to > b.len() {
        return Err(VfsError::Io(format!("read {from}..{to} outside a block of {} bytes", b.len())));
    }
    Ok(b.slice(from..to))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Readers that give up on a gateway that accepts connections and never answers leave
    /// neither a fetch nor a load gate behind, however many there are.
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
                    0 => cache.read(hash, 1000, 0, 10, true).await.map(drop),
                    1 => cache.read(hash, 1000, 0, 10, false).await.map(drop),
                    _ => cache.prefetch(hash, 1000).await,
                }
            };
            assert!(tokio::time::timeout(std::time::Duration::from_millis(20), read).await.is_err());
        }
        assert_eq!(cache.fetches_in_flight(), 0);
        assert!(cache.loading.lock().unwrap_or_else(|p| p.into_inner()).is_empty(), "load gates left behind");
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
