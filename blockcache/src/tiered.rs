//! The tiered block cache both the gateway and the drive use: a memory tier (whole blocks), an
//! SSD tier ([`crate::disk`] entries, bounded at admission), coalesced fetches from the origin
//! ([`crate::coalesce`]), background admission, an optional read-ahead buffer, counters and
//! purge. A user supplies only a [`Fetcher`] (how a block is fetched and verified: the store
//! for the gateway, the gateway for the drive), its [`Config`] (budgets) and, if it exports
//! metrics, an [`Events`] sink.
//!
//! Read path: memory → read-ahead buffer → SSD (only the chunks a range touches are read and
//! verified) → for a part of a block ([`ReadMode::Part`]) that is neither read sequentially nor
//! often, only the 16 KiB pieces that hold it, from an origin that serves ranges, each checked
//! against the block's outboard ([`crate::verify::Outboard`]; admitted nowhere) → otherwise one
//! coalesced whole-block load. The load is a task of its own, shared by every
//! reader of the block, that looks at the tiers once more before asking the origin: a reader
//! that missed them just before the previous load's block became readable there (that load
//! then let go of its entry) is served by the tier, not by a second fetch. Cache faults (full
//! or unwritable disk, deleted or corrupt entries) are misses; failures are never remembered.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::Key;
use crate::coalesce::{Coalescer, Failure, Linger};
use crate::disk::{DiskError, DiskStore, entry_size};
use crate::policy::{Admission, S3Fifo};
use crate::verify::{Outboard, PIECE, PieceCheck, Verified, covering};

/// How a block is fetched from the origin on a miss. What it returns is a [`Verified`] block
/// (checked against the key's hash, with its pieces' tags from that one pass): the cache serves
/// and stores it as it is.
pub trait Fetcher: Send + Sync + 'static {
    /// Handed to every reader waiting for the fetch, hence `Clone` (wrap it in an `Arc`).
    type Error: Clone + Send + Sync + 'static;

    fn fetch(&self, key: Key) -> impl Future<Output = Result<Verified, Self::Error>> + Send;

    /// Whether the origin serves parts of blocks and their outboards (the three methods
    /// below); without, every miss loads the whole block.
    fn ranged(&self) -> bool {
        false
    }

    /// Bytes `range` of the block as the origin holds them, unchecked: the cache checks them
    /// against the block's outboard. `None`: the origin does not serve ranges.
    fn fetch_range(
        &self,
        _key: Key,
        _range: Range<usize>,
    ) -> impl Future<Output = Option<Result<Bytes, Self::Error>>> + Send {
        async { None }
    }

    /// The block's outboard as the origin holds it, unchecked (`None`: it has none).
    fn fetch_outboard(&self, _key: Key) -> impl Future<Output = Result<Option<Bytes>, Self::Error>> + Send {
        async { Ok(None) }
    }

    /// Stores the outboard of a block whose origin had none (or a damaged one), made by a
    /// whole fetch of the block. Best effort: the next part read without it fetches the block
    /// whole again.
    fn store_outboard(&self, _key: Key, _outboard: Bytes) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// A bypassing read to stream ([`TieredCache::bypass_streamed`]): the bytes of the block to ask
/// the origin for, the check they go through, and the fetch slot held until it is dropped (so
/// streamed reads count against the same bound as fetches).
pub struct StreamedRead {
    pub span: Range<usize>,
    pub check: PieceCheck,
    _slot: OwnedSemaphorePermit,
}

/// A cache tier, for [`Events`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Mem,
    Disk,
}

impl Tier {
    pub fn label(self) -> &'static str {
        match self {
            Tier::Mem => "mem",
            Tier::Disk => "disk",
        }
    }
}

/// What the cache tells its user as it happens (for metrics); every method defaults to
/// nothing. Called with the cache's locks held at times: keep them trivial.
pub trait Events: Send + Sync + 'static {
    fn hit(&self, _tier: Tier, _bytes: u64) {}
    fn miss(&self) {}
    fn bypassed(&self) {}
    fn evicted(&self, _tier: Tier, _entries: u64) {}
    fn rejected(&self, _tier: Tier) {}
    fn corrupt(&self) {}
    /// The SSD tier failed to read or write (not corruption).
    fn disk_error(&self) {}
    fn size(&self, _tier: Tier, _bytes: u64) {}
    /// Loads registered now (running, or handing their block over to the SSD).
    fn fetches_in_flight(&self, _n: usize) {}
}

/// [`Events`] that go nowhere.
pub struct NoEvents;
impl Events for NoEvents {}

/// What to do with a fetched block when every SSD write slot is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenWritesBusy {
    /// Do not admit it this time (the gateway: readers never wait for the disk).
    Skip,
    /// Wait for a slot, keeping the fetch's slot (the drive: when the disk is slower than the
    /// gateway, fetches slow down instead of piling blocks up in memory).
    Wait,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes of the memory tier.
    pub mem_bytes: u64,
    /// Origin fetches (and their admission steps) at once; bypassing reads share the bound.
    pub fetches_in_flight: usize,
    /// Blocks on their way to the SSD at most (each held in memory until written).
    pub disk_writes_in_flight: usize,
    pub when_writes_busy: WhenWritesBusy,
    /// Fetched blocks enter the memory tier in the admission step (before any reader returns);
    /// otherwise a reader puts the block it read there, and a prefetch only into the read-ahead
    /// buffer.
    pub fetched_to_mem: bool,
    /// Blocks [`TieredCache::prefetch`] holds until read, at most (0: prefetches are dropped).
    pub ahead_blocks: usize,
    /// Bytes of outboards kept in memory for part reads (32 bytes per 16 KiB of block).
    pub outboard_bytes: u64,
}

/// The SSD tier to use, opened by the caller (it decides what an unusable directory means).
pub struct DiskTierConfig {
    pub store: DiskStore,
    pub capacity: u64,
}

/// Why a read gave no bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError<E> {
    /// The origin's fetch failed (every waiter gets this).
    Fetch(E),
    /// The fetch ended without a result (panicked, or the runtime is shutting down).
    Interrupted,
    /// The range is not inside the block.
    Range { start: usize, end: usize, len: usize },
    /// Part of the block came from the origin with bytes that do not match the block's hash
    /// (never served, never cached).
    Corrupt,
}

/// How a read uses the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// A range: an SSD hit reads and verifies only the chunks it touches.
    Range,
    /// Part of a sequential pass: the whole block is loaded into memory (the reader comes back
    /// for the rest). `first` marks the pass's first piece of the block, the only one counted
    /// as a use (one pass over a file does not make its blocks look hot).
    Sequential { first: bool },
    /// A range of a block of `len` bytes, as one request of a client asks it: like `Range`,
    /// but a miss fetches (from a [`Fetcher::ranged`] origin) only the pieces that hold it,
    /// unless the read looks sequential (it starts the block, or continues where the last part
    /// read of the block ended), the block looks hot (its [`HOT_READS`]th part read within
    /// [`HOT_WINDOW`]) or the part is large: then the whole block is loaded and admitted.
    Part { len: usize },
}

impl ReadMode {
    fn sequential(self) -> bool {
        matches!(self, ReadMode::Sequential { .. })
    }
}

/// Part reads of one block within [`HOT_WINDOW`] after which the block is loaded whole.
pub const HOT_READS: u32 = 4;
/// See [`HOT_READS`].
pub const HOT_WINDOW: Duration = Duration::from_secs(300);
/// Blocks whose recent part reads are remembered, at most.
const HEAT_KEYS: usize = 8192;
/// Outboards written back to the origin at once; more are skipped (best effort).
const OUTBOARD_WRITES: usize = 4;
/// SSD reads of at most this many bytes are tried in the caller's thread first, when the page
/// cache holds them (`DiskStore::read_cached`); larger ones always go to a blocking thread.
const INLINE_READ_MAX: usize = 128 * 1024;

/// Numbers of the cache so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub mem_capacity: u64,
    pub mem_used: u64,
    pub mem_entries: u64,
    pub disk_enabled: bool,
    pub disk_capacity: u64,
    pub disk_used: u64,
    pub disk_entries: u64,
    pub hits_mem: u64,
    pub hits_disk: u64,
    pub misses: u64,
    pub bypassed: u64,
    pub bytes_served_mem: u64,
    pub bytes_served_disk: u64,
    /// Whole-block fetches from the origin started, and bytes they (and part fetches) brought.
    pub fetches: u64,
    pub bytes_fetched: u64,
    /// Fetches of parts of blocks (verified against outboards) and of outboards.
    pub range_fetches: u64,
    pub outboard_fetches: u64,
    /// Parts of blocks the origin sent with wrong bytes, and outboards that were not the
    /// block's (refused; the block was then fetched whole).
    pub corrupt_ranges: u64,
    pub bad_outboards: u64,
    pub admission_rejects: u64,
    pub evictions_mem: u64,
    pub evictions_disk: u64,
    pub corrupt_entries: u64,
    /// SSD reads and writes that failed (not corruption).
    pub disk_errors: u64,
}

#[derive(Default)]
struct Counters {
    hits_mem: AtomicU64,
    hits_disk: AtomicU64,
    misses: AtomicU64,
    bypassed: AtomicU64,
    bytes_mem: AtomicU64,
    bytes_disk: AtomicU64,
    fetches: AtomicU64,
    bytes_fetched: AtomicU64,
    range_fetches: AtomicU64,
    outboard_fetches: AtomicU64,
    corrupt_ranges: AtomicU64,
    bad_outboards: AtomicU64,
    rejects: AtomicU64,
    evictions_mem: AtomicU64,
    evictions_disk: AtomicU64,
    corrupt: AtomicU64,
    disk_errors: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Mem {
    policy: S3Fifo<Key>,
    data: HashMap<Key, Bytes>,
}

/// Outboards of blocks read in parts, by bytes (S3-FIFO like the memory tier).
struct Outboards {
    policy: S3Fifo<Key>,
    data: HashMap<Key, Outboard>,
}

/// Recent part reads per block, for [`ReadMode::Part`]'s choice; bounded, oldest forgotten.
#[derive(Default)]
struct Heat {
    seen: HashMap<Key, Seen>,
    /// Keys in the order they were first seen, with the `id` of that sighting (a key forgotten
    /// and seen again has a newer one, so its old place is skipped).
    order: VecDeque<(Key, u64)>,
    next_id: u64,
}

struct Seen {
    id: u64,
    reads: u32,
    since: Instant,
    /// Where the last part read of the block ended.
    next: usize,
}

/// What a part read should fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Pieces,
    Whole,
}

impl Heat {
    /// Notes a part read of `range` of `key`; `Whole` if it continues the last one or makes the
    /// block hot (the block is then forgotten here: it is being loaded).
    fn note(&mut self, key: Key, range: &Range<usize>, now: Instant) -> Plan {
        if let Some(s) = self.seen.get_mut(&key) {
            if now.duration_since(s.since) > HOT_WINDOW {
                s.reads = 0;
                s.since = now;
            }
            s.reads += 1;
            let sequential = s.next == range.start;
            s.next = range.end;
            if sequential || s.reads >= HOT_READS {
                self.seen.remove(&key);
                return Plan::Whole;
            }
            return Plan::Pieces;
        }
        while self.seen.len() >= HEAT_KEYS {
            let Some((k, id)) = self.order.pop_front() else { break };
            if self.seen.get(&k).is_some_and(|s| s.id == id) {
                self.seen.remove(&k);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.seen.insert(key, Seen { id, reads: 1, since: now, next: range.end });
        self.order.push_back((key, id));
        if self.order.len() > 2 * HEAT_KEYS {
            // Places of keys forgotten since (loaded whole) pile up otherwise.
            let seen = &self.seen;
            self.order.retain(|(k, id)| seen.get(k).is_some_and(|s| s.id == *id));
        }
        Plan::Pieces
    }

    fn forget(&mut self, key: &Key) {
        self.seen.remove(key);
    }
}

struct Disk {
    store: DiskStore,
    writes: Arc<Semaphore>,
    /// The index, and for each entry whether its file is written: admitted entries are
    /// reserved first, so the byte bound holds while writes are in flight, and a reader never
    /// opens a file that is not there yet.
    index: Mutex<(S3Fifo<Key>, HashMap<Key, bool>)>,
    warned: AtomicBool,
}

/// What a load ended with: the block, where it was found, and (fetched from the origin) the
/// verified block whose tags its SSD entry keeps.
#[derive(Clone)]
struct Loaded {
    data: Bytes,
    source: Source,
    fetched: Option<Verified>,
}

/// Where a load found its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Mem,
    Disk,
    Origin,
}

struct Inner<F: Fetcher> {
    fetcher: F,
    cfg: Config,
    mem: Mutex<Mem>,
    /// Prefetched blocks not read yet, oldest first. Kept out of the memory tier: its small
    /// FIFO (10 % of it) can be shorter than a read-ahead window, so prefetched blocks would be
    /// evicted before their reader arrived.
    ahead: Mutex<VecDeque<(Key, Bytes)>>,
    disk: Option<Arc<Disk>>,
    outboards: Mutex<Outboards>,
    heat: Mutex<Heat>,
    outboard_writes: Arc<Semaphore>,
    counters: Counters,
    events: Arc<dyn Events>,
}

/// The cache. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct TieredCache<F: Fetcher> {
    inner: Arc<Inner<F>>,
    loads: Coalescer<Key, Loaded, F::Error>,
    /// Outboard fetches, coalesced like loads (with their own slots: a part read holds a load
    /// slot while it waits for one).
    outboard_loads: Coalescer<Key, Option<Outboard>, F::Error>,
}

impl<F: Fetcher> TieredCache<F> {
    /// A cache over `fetcher`. The SSD tier's existing entries are indexed (those past its
    /// capacity deleted).
    pub fn new(fetcher: F, cfg: Config, disk: Option<DiskTierConfig>, events: Arc<dyn Events>) -> Self {
        let disk = disk.filter(|d| d.capacity > 0).map(|d| {
            let mut policy = S3Fifo::new(d.capacity);
            let mut ready = HashMap::new();
            for (key, size) in d.store.scan() {
                match policy.insert(key, size) {
                    Admission::Admitted(evicted) => {
                        for k in evicted {
                            ready.remove(&k);
                            d.store.remove(&k);
                        }
                        ready.insert(key, true);
                    }
                    Admission::Present => {}
                    Admission::TooLarge => d.store.remove(&key),
                }
            }
            Arc::new(Disk {
                store: d.store,
                writes: Arc::new(Semaphore::new(cfg.disk_writes_in_flight.max(1))),
                index: Mutex::new((policy, ready)),
                warned: AtomicBool::new(false),
            })
        });
        let loads = {
            let events = events.clone();
            Coalescer::with_observer(cfg.fetches_in_flight.max(1), move |n| events.fetches_in_flight(n))
        };
        events.fetches_in_flight(0);
        let inner = Inner {
            fetcher,
            mem: Mutex::new(Mem { policy: S3Fifo::new(cfg.mem_bytes), data: HashMap::new() }),
            outboards: Mutex::new(Outboards { policy: S3Fifo::new(cfg.outboard_bytes), data: HashMap::new() }),
            cfg,
            ahead: Mutex::default(),
            disk,
            heat: Mutex::default(),
            outboard_writes: Arc::new(Semaphore::new(OUTBOARD_WRITES)),
            counters: Counters::default(),
            events,
        };
        inner.publish_sizes();
        let outboard_loads = Coalescer::new(inner.cfg.fetches_in_flight.max(1));
        Self { inner: Arc::new(inner), loads, outboard_loads }
    }

    pub fn fetcher(&self) -> &F {
        &self.inner.fetcher
    }

    /// Bytes `range` of the block `key`, verified, through the tiers.
    pub async fn read(&self, key: Key, range: Range<usize>, mode: ReadMode) -> Result<Bytes, ReadError<F::Error>> {
        let inner = &self.inner;
        let touch = match mode {
            ReadMode::Range | ReadMode::Part { .. } => true,
            ReadMode::Sequential { first } => first,
        };
        if let Some(data) = inner.mem_get(&key, touch) {
            return inner.served(Tier::Mem, slice(&data, range)?);
        }
        let ahead = inner.ahead_get(&key, mode.sequential());
        if let Some(data) = ahead {
            if mode.sequential() {
                // Its reader arrived: from here on it is an ordinary block of the memory tier.
                inner.mem_put(key, data.clone());
            }
            return inner.served(Tier::Mem, slice(&data, range)?);
        }
        if !mode.sequential()
            && let Some(out) = inner.disk_get(&key, range.clone()).await
        {
            return inner.served(Tier::Disk, out);
        }
        let mut no_outboard = false;
        if let ReadMode::Part { len } = mode
            && self.plan(key, &range, len) == Plan::Pieces
        {
            match self.read_pieces(key, range.clone(), len).await {
                Ok(Some(out)) => {
                    inner.missed();
                    return Ok(out);
                }
                // The origin has no usable outboard: the whole load below makes one.
                Ok(None) => no_outboard = true,
                Err(e) => {
                    inner.missed();
                    return Err(e);
                }
            }
        }
        let Loaded { data, source, fetched } = match self.load(key).await {
            Ok(loaded) => loaded,
            Err(e) => {
                // The tiers did not have it and the origin failed: a miss all the same.
                inner.missed();
                return Err(e);
            }
        };
        if no_outboard && let Some(block) = &fetched {
            inner.write_outboard(key, block);
        }
        // A fetched block is the reader's to put into memory unless admission did; one a tier
        // held goes there for a sequential reader only (a random one read what it needed).
        let to_mem = match source {
            Source::Origin => !inner.cfg.fetched_to_mem,
            Source::Mem | Source::Disk => mode.sequential(),
        };
        if to_mem {
            inner.mem_put(key, data.clone());
        }
        let out = slice(&data, range)?;
        match source {
            Source::Mem => inner.served(Tier::Mem, out),
            Source::Disk => inner.served(Tier::Disk, out),
            Source::Origin => {
                inner.missed();
                Ok(out)
            }
        }
    }

    /// Loads a block into the read-ahead buffer (unless a tier holds it already), for a
    /// sequential reader that will get there soon.
    pub async fn prefetch(&self, key: Key) -> Result<(), ReadError<F::Error>> {
        let inner = &self.inner;
        if inner.mem_has(&key) || inner.ahead_get(&key, false).is_some() {
            return Ok(());
        }
        let Loaded { data, source, .. } = self.load(key).await?;
        if source == Source::Disk {
            add(&inner.counters.hits_disk, 1);
        }
        // A reader that caught up with the prefetch took the block into memory meanwhile.
        if !inner.mem_has(&key) {
            inner.ahead_put(key, data);
        }
        Ok(())
    }

    /// Bytes `range` of the block straight from the origin, admitted nowhere; takes a fetch
    /// slot like a load (measurements of the cold path, admins). Given the block's length
    /// `len`, a part of it is fetched alone and checked against the block's outboard, as a
    /// [`ReadMode::Part`] miss does (whatever the part; only the whole block is fetched whole).
    pub async fn bypass(
        &self,
        key: Key,
        range: Range<usize>,
        len: Option<usize>,
    ) -> Result<Bytes, ReadError<F::Error>> {
        let inner = &self.inner;
        add(&inner.counters.bypassed, 1);
        inner.events.bypassed();
        let mut no_outboard = false;
        if let Some(len) = len
            && self.partial(&range, len)
            && covering(&range, len).1.len() < len
        {
            match self.read_pieces(key, range.clone(), len).await? {
                Some(out) => return Ok(out),
                None => no_outboard = true,
            }
        }
        let _slot = self.loads.slot().await;
        let block = inner.fetch_origin(key).await.map_err(ReadError::Fetch)?;
        if no_outboard {
            inner.write_outboard(key, &block);
        }
        slice(block.data(), range)
    }

    /// A bypassing read of `range` of a block of `len` bytes planned for streaming: the caller
    /// asks the origin for `span` itself and passes what arrives through `check`, which lets
    /// out only bytes whose 16 KiB piece matched the block's outboard. No block-sized buffer and
    /// no copy, which is what a bypass of a large block costs otherwise. `None` when that
    /// cannot be done (an origin without ranges, a block of one piece, no usable outboard):
    /// then [`TieredCache::bypass`] reads it whole (and writes the missing outboard).
    pub async fn bypass_streamed(
        &self,
        key: Key,
        range: Range<usize>,
        len: usize,
    ) -> Result<Option<StreamedRead>, ReadError<F::Error>> {
        let inner = &self.inner;
        if !self.partial(&range, len) {
            return Ok(None);
        }
        let outboard = match inner.outboard_get(&key) {
            Some(known) => known,
            None => match self.outboard(key, len).await? {
                Some(fetched) => fetched,
                None => return Ok(None),
            },
        };
        if outboard.block_len() != len {
            return Ok(None);
        }
        let Some((check, span)) = PieceCheck::new(outboard, range) else { return Ok(None) };
        let slot = self.loads.slot().await;
        add(&inner.counters.bypassed, 1);
        inner.events.bypassed();
        add(&inner.counters.range_fetches, 1);
        add(&inner.counters.bytes_fetched, span.len() as u64);
        Ok(Some(StreamedRead { span, check, _slot: slot }))
    }

    /// Whether `range` is a non-empty part of a block of `len` bytes that could be fetched alone.
    fn partial(&self, range: &Range<usize>, len: usize) -> bool {
        self.inner.fetcher.ranged() && len > PIECE && range.start < range.end && range.end <= len
    }

    /// [`ReadMode::Part`]'s choice on a miss: the pieces alone, or the whole block.
    fn plan(&self, key: Key, range: &Range<usize>, len: usize) -> Plan {
        if !self.partial(range, len) {
            return Plan::Whole;
        }
        let inner = &self.inner;
        // A read from the block's start begins a sequential pass; a part this large costs
        // about the block; a load of the block in flight serves this read too.
        if range.start == 0 || covering(range, len).1.len() > len / 4 || self.loads.is_registered(&key) {
            lock(&inner.heat).forget(&key);
            return Plan::Whole;
        }
        lock(&inner.heat).note(key, range, Instant::now())
    }

    /// `range` of the block from the pieces that hold it alone, each checked against the
    /// block's outboard; `None` if the origin has no usable outboard (or serves no ranges).
    /// Takes a fetch slot; admits nothing but the outboard (to memory).
    async fn read_pieces(
        &self,
        key: Key,
        range: Range<usize>,
        len: usize,
    ) -> Result<Option<Bytes>, ReadError<F::Error>> {
        let inner = &self.inner;
        let (first, span) = covering(&range, len);
        let _slot = self.loads.slot().await;
        let fetch = inner.fetch_range(key, span.clone());
        let (outboard, data) = match inner.outboard_get(&key) {
            Some(known) => (Ok(Some(known)), fetch.await),
            // Not known yet: both requests at once, one round trip instead of two.
            None => tokio::join!(self.outboard(key, len), fetch),
        };
        let Some(outboard) = outboard? else { return Ok(None) };
        let Some(data) = data else { return Ok(None) };
        let data = data.map_err(ReadError::Fetch)?;
        if outboard.block_len() != len {
            // The caller's length is not the block's: let the whole block speak for itself.
            return Ok(None);
        }
        if data.len() != span.len() || !outboard.check_pieces(first, &data) {
            add(&inner.counters.corrupt_ranges, 1);
            return Err(ReadError::Corrupt);
        }
        Ok(Some(data.slice(range.start - span.start..range.end - span.start)))
    }

    /// The block's outboard from the origin, checked (`None`: it has none, or one that is not
    /// this block's), then kept in memory; one fetch per block however many readers ask.
    async fn outboard(&self, key: Key, len: usize) -> Result<Option<Outboard>, ReadError<F::Error>> {
        let fetch = {
            let inner = self.inner.clone();
            move || async move {
                add(&inner.counters.outboard_fetches, 1);
                let raw = inner.fetcher.fetch_outboard(key).await?;
                let checked = raw.as_deref().and_then(|b| Outboard::check(&key.1, len, b));
                if raw.is_some() && checked.is_none() {
                    add(&inner.counters.bad_outboards, 1);
                    tracing::warn!(
                        block = %blake3::Hash::from_bytes(key.1),
                        "refused a block's outboard that does not match its hash; fetching the block whole, which writes it again"
                    );
                }
                Ok(checked)
            }
        };
        let inner = self.inner.clone();
        let admit = move |outboard: Option<Outboard>, _linger: Linger| {
            if let Some(o) = outboard {
                inner.outboard_put(key, o);
            }
            async {}
        };
        match self.outboard_loads.get(key, fetch, admit).await {
            Ok(o) => Ok(o),
            Err(Failure::Failed(e)) => Err(ReadError::Fetch(e)),
            Err(Failure::Interrupted) => Err(ReadError::Interrupted),
        }
    }

    /// Admits a block the caller verified itself (the drive, after uploading it): to the SSD
    /// (waiting for a write slot if the configuration says so) and to memory.
    pub async fn admit(&self, key: Key, block: Verified) {
        self.inner.clone().disk_put(key, block.clone(), None).await;
        self.inner.mem_put(key, block.into_data());
    }

    /// Empties every tier. Loads in flight finish, and may admit their block afterwards.
    pub fn purge(&self) -> io::Result<()> {
        let inner = &self.inner;
        {
            let mut mem = lock(&inner.mem);
            mem.policy.clear();
            mem.data.clear();
        }
        lock(&inner.ahead).clear();
        {
            let mut o = lock(&inner.outboards);
            o.policy.clear();
            o.data.clear();
        }
        *lock(&inner.heat) = Heat::default();
        let result = match &inner.disk {
            Some(d) => {
                let mut index = lock(&d.index);
                index.0.clear();
                index.1.clear();
                d.store.purge()
            }
            None => Ok(()),
        };
        inner.publish_sizes();
        result
    }

    /// Whether a tier holds the block now (memory, read-ahead, or a written SSD entry), so a
    /// read would not go to the origin. Not a use of it.
    pub fn holds(&self, key: &Key) -> bool {
        let inner = &self.inner;
        inner.mem_has(key) || inner.ahead_get(key, false).is_some() || inner.disk_ready(key, false).is_some()
    }

    /// Loads registered now (running, or handing their block over to the SSD).
    pub fn fetches_in_flight(&self) -> usize {
        self.loads.in_flight()
    }

    /// Fetch slots not taken.
    pub fn free_fetch_slots(&self) -> usize {
        self.loads.free_slots()
    }

    /// Blocks held in the read-ahead buffer.
    pub fn ahead_len(&self) -> usize {
        lock(&self.inner.ahead).len()
    }

    /// The SSD tier's directory, if it has one.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.inner.disk.as_ref().map(|d| d.store.root())
    }

    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let c = &inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (mem_capacity, mem_used, mem_entries) = {
            let m = lock(&inner.mem);
            (m.policy.capacity(), m.policy.used(), m.policy.len() as u64)
        };
        let (disk_capacity, disk_used, disk_entries) = match &inner.disk {
            Some(d) => {
                let i = lock(&d.index);
                (i.0.capacity(), i.0.used(), i.0.len() as u64)
            }
            None => (0, 0, 0),
        };
        Stats {
            mem_capacity,
            mem_used,
            mem_entries,
            disk_enabled: inner.disk.is_some(),
            disk_capacity,
            disk_used,
            disk_entries,
            hits_mem: get(&c.hits_mem),
            hits_disk: get(&c.hits_disk),
            misses: get(&c.misses),
            bypassed: get(&c.bypassed),
            bytes_served_mem: get(&c.bytes_mem),
            bytes_served_disk: get(&c.bytes_disk),
            fetches: get(&c.fetches),
            bytes_fetched: get(&c.bytes_fetched),
            range_fetches: get(&c.range_fetches),
            outboard_fetches: get(&c.outboard_fetches),
            corrupt_ranges: get(&c.corrupt_ranges),
            bad_outboards: get(&c.bad_outboards),
            admission_rejects: get(&c.rejects),
            evictions_mem: get(&c.evictions_mem),
            evictions_disk: get(&c.evictions_disk),
            corrupt_entries: get(&c.corrupt),
            disk_errors: get(&c.disk_errors),
        }
    }

    /// The whole block: one load per block however many readers (and prefetches) want it,
    /// living on its own (see [`crate::coalesce`]). It looks at the tiers again before the
    /// origin, and after an origin fetch admits the block: to memory (if so configured) before
    /// any reader returns, then to the SSD in the background. The load stays registered until a
    /// tier can serve the block, so readers arriving meanwhile take its bytes instead of
    /// fetching again.
    async fn load(&self, key: Key) -> Result<Loaded, ReadError<F::Error>> {
        let fetch = {
            let inner = self.inner.clone();
            move || async move {
                if let Some(data) = inner.mem_get(&key, false) {
                    return Ok(Loaded { data, source: Source::Mem, fetched: None });
                }
                if let Some(data) = inner.disk_get_whole(&key).await {
                    return Ok(Loaded { data, source: Source::Disk, fetched: None });
                }
                inner.fetch_origin(key).await.map(|block| Loaded {
                    data: block.data().clone(),
                    source: Source::Origin,
                    fetched: Some(block),
                })
            }
        };
        let inner = self.inner.clone();
        let admit = move |Loaded { data, source, fetched }: Loaded, linger: Linger| {
            let mut linger = Some(linger);
            if source != Source::Origin {
                linger = None;
            } else if inner.cfg.fetched_to_mem {
                inner.mem_put(key, data.clone());
                if inner.mem_has(&key) {
                    // Memory serves it now: later readers need not wait for the SSD write.
                    linger = None;
                }
            }
            async move {
                if let Some(block) = fetched {
                    inner.disk_put(key, block, linger).await;
                }
            }
        };
        match self.loads.get(key, fetch, admit).await {
            Ok(loaded) => Ok(loaded),
            Err(Failure::Failed(e)) => Err(ReadError::Fetch(e)),
            Err(Failure::Interrupted) => Err(ReadError::Interrupted),
        }
    }
}

impl<F: Fetcher> Inner<F> {
    async fn fetch_origin(&self, key: Key) -> Result<Verified, F::Error> {
        add(&self.counters.fetches, 1);
        let block = self.fetcher.fetch(key).await?;
        add(&self.counters.bytes_fetched, block.data().len() as u64);
        Ok(block)
    }

    /// Bytes `span` of a block from the origin, unchecked; `None` if it serves no ranges.
    async fn fetch_range(&self, key: Key, span: Range<usize>) -> Option<Result<Bytes, F::Error>> {
        add(&self.counters.range_fetches, 1);
        let result = self.fetcher.fetch_range(key, span).await?;
        if let Ok(data) = &result {
            add(&self.counters.bytes_fetched, data.len() as u64);
        }
        Some(result)
    }

    fn outboard_get(&self, key: &Key) -> Option<Outboard> {
        let mut o = lock(&self.outboards);
        let found = o.data.get(key).cloned()?;
        o.policy.touch(key);
        Some(found)
    }

    fn outboard_put(&self, key: Key, outboard: Outboard) {
        let mut o = lock(&self.outboards);
        if o.policy.contains(&key) {
            return;
        }
        if let Admission::Admitted(evicted) = o.policy.insert(key, outboard.tags().len() as u64 * 32) {
            for k in &evicted {
                o.data.remove(k);
            }
            o.data.insert(key, outboard);
        }
    }

    /// A block fetched whole because the origin had no usable outboard: keeps its outboard in
    /// memory and writes it to the origin in the background (skipped when enough such writes
    /// are running; a later read tries again).
    fn write_outboard(self: &Arc<Self>, key: Key, block: &Verified) {
        let Some(outboard) = block.outboard() else { return };
        self.outboard_put(key, outboard.clone());
        let Ok(permit) = self.outboard_writes.clone().try_acquire_owned() else { return };
        let inner = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            inner.fetcher.store_outboard(key, outboard.encode()).await;
        });
    }

    fn missed(&self) {
        add(&self.counters.misses, 1);
        self.events.miss();
    }

    fn served<E>(&self, tier: Tier, out: Bytes) -> Result<Bytes, ReadError<E>> {
        let c = &self.counters;
        let (hits, bytes) = match tier {
            Tier::Mem => (&c.hits_mem, &c.bytes_mem),
            Tier::Disk => (&c.hits_disk, &c.bytes_disk),
        };
        add(hits, 1);
        add(bytes, out.len() as u64);
        self.events.hit(tier, out.len() as u64);
        Ok(out)
    }

    fn publish_sizes(&self) {
        self.events.size(Tier::Mem, lock(&self.mem).policy.used());
        if let Some(d) = &self.disk {
            self.events.size(Tier::Disk, lock(&d.index).0.used());
        }
    }

    /// A block of the memory tier; `touch` counts this as a use.
    fn mem_get(&self, key: &Key, touch: bool) -> Option<Bytes> {
        let mut mem = lock(&self.mem);
        let data = mem.data.get(key).cloned()?;
        if touch {
            mem.policy.touch(key);
        }
        Some(data)
    }

    fn mem_has(&self, key: &Key) -> bool {
        lock(&self.mem).data.contains_key(key)
    }

    /// Into the memory tier (evicting first); a block already there is left as it is, so
    /// putting it again does not count as a use.
    fn mem_put(&self, key: Key, data: Bytes) {
        let mut mem = lock(&self.mem);
        if mem.policy.contains(&key) {
            return;
        }
        match mem.policy.insert(key, data.len() as u64) {
            Admission::Admitted(evicted) => {
                for k in &evicted {
                    mem.data.remove(k);
                }
                add(&self.counters.evictions_mem, evicted.len() as u64);
                self.events.evicted(Tier::Mem, evicted.len() as u64);
                mem.data.insert(key, data);
            }
            Admission::Present => {}
            Admission::TooLarge => {
                add(&self.counters.rejects, 1);
                self.events.rejected(Tier::Mem);
            }
        }
        self.events.size(Tier::Mem, mem.policy.used());
    }

    /// A prefetched block; `take` removes it (its reader arrived).
    fn ahead_get(&self, key: &Key, take: bool) -> Option<Bytes> {
        let mut a = lock(&self.ahead);
        let i = a.iter().position(|(k, _)| k == key)?;
        if take { a.remove(i).map(|(_, b)| b) } else { Some(a[i].1.clone()) }
    }

    fn ahead_put(&self, key: Key, data: Bytes) {
        let mut a = lock(&self.ahead);
        if self.cfg.ahead_blocks == 0 || a.iter().any(|(k, _)| *k == key) {
            return;
        }
        while a.len() >= self.cfg.ahead_blocks {
            a.pop_front();
        }
        a.push_back((key, data));
    }

    /// `range` of an SSD entry, verifying the chunks it covers. A whole small block read is
    /// likely hot: it goes into memory too.
    async fn disk_get(&self, key: &Key, range: Range<usize>) -> Option<Bytes> {
        let disk = self.disk_ready(key, true)?;
        let k = *key;
        // A small read found in the page cache is done here: cheaper than the hand-off to a
        // blocking thread and back (hashing its chunks takes microseconds). Anything else, or
        // anything that would wait for the disk, goes to a blocking thread.
        let now = if range.len() <= INLINE_READ_MAX {
            disk.store.read_cached(&k, range.start, range.end).transpose()
        } else {
            None
        };
        let result = match now {
            Some(result) => result,
            None => {
                let d = disk.clone();
                tokio::task::spawn_blocking(move || d.store.read(&k, range.start, range.end)).await.ok()?
            }
        };
        match result {
            Ok((data, block_len)) => {
                // Only a read of the entire block may be promoted: the memory tier holds
                // whole blocks.
                let whole = data.len() == block_len;
                if whole && data.len() as u64 <= lock(&self.mem).policy.capacity() / 64 {
                    self.mem_put(*key, data.clone());
                }
                Some(data)
            }
            Err(e) => {
                self.disk_failed(&disk, key, e);
                None
            }
        }
    }

    /// The whole block from its SSD entry, if readable.
    async fn disk_get_whole(&self, key: &Key) -> Option<Bytes> {
        let disk = self.disk_ready(key, true)?;
        let k = *key;
        let d = disk.clone();
        let result = tokio::task::spawn_blocking(move || d.store.read_whole(&k)).await.ok()?;
        match result {
            Ok(data) => Some(data),
            Err(e) => {
                self.disk_failed(&disk, key, e);
                None
            }
        }
    }

    /// The SSD tier if `key`'s entry is written; `touch` counts a use.
    fn disk_ready(&self, key: &Key, touch: bool) -> Option<Arc<Disk>> {
        let disk = self.disk.as_ref()?;
        let mut index = lock(&disk.index);
        if index.1.get(key) != Some(&true) {
            return None;
        }
        if touch {
            index.0.touch(key);
        }
        Some(disk.clone())
    }

    /// An entry that could not be read is dropped: the next reader fetches the block again.
    fn disk_failed(&self, disk: &Disk, key: &Key, e: DiskError) {
        match &e {
            DiskError::Corrupt(why) => {
                add(&self.counters.corrupt, 1);
                self.events.corrupt();
                tracing::warn!(why, "dropped a corrupt cache entry; fetching the block again");
            }
            DiskError::Io(err) => self.disk_fault(disk, err),
            DiskError::Missing => {}
        }
        let mut index = lock(&disk.index);
        index.0.remove(key);
        index.1.remove(key);
        disk.store.remove(key);
        self.events.size(Tier::Disk, index.0.used());
    }

    fn disk_fault(&self, disk: &Disk, e: &io::Error) {
        add(&self.counters.disk_errors, 1);
        self.events.disk_error();
        if !disk.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(error = %e, dir = %disk.store.root().display(), "the cache directory is failing; fetching blocks instead (warned once)");
        }
    }

    /// Admits a verified block to the SSD tier in the background. A `linger` (the block's
    /// finished load, still registered) is held until the entry is readable, or dropped at
    /// once when the block is not admitted; dropped on every path, a panic included.
    async fn disk_put(self: Arc<Self>, key: Key, block: Verified, linger: Option<Linger>) {
        let Some(disk) = self.disk.clone() else { return };
        let permit = match self.cfg.when_writes_busy {
            WhenWritesBusy::Skip => disk.writes.clone().try_acquire_owned().ok(),
            WhenWritesBusy::Wait => disk.writes.clone().acquire_owned().await.ok(),
        };
        let Some(permit) = permit else {
            add(&self.counters.rejects, 1);
            self.events.rejected(Tier::Disk);
            return;
        };
        let evicted = {
            let mut index = lock(&disk.index);
            match index.0.insert(key, entry_size(block.data().len())) {
                Admission::Admitted(evicted) => {
                    for k in &evicted {
                        index.1.remove(k);
                    }
                    index.1.insert(key, false);
                    evicted
                }
                Admission::Present => return,
                Admission::TooLarge => {
                    add(&self.counters.rejects, 1);
                    self.events.rejected(Tier::Disk);
                    return;
                }
            }
        };
        add(&self.counters.evictions_disk, evicted.len() as u64);
        self.events.evicted(Tier::Disk, evicted.len() as u64);
        let inner = self.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            for k in &evicted {
                disk.store.remove(k);
            }
            let result = disk.store.write(&key, &block);
            let mut index = lock(&disk.index);
            match result {
                Ok(()) => match index.1.get_mut(&key) {
                    Some(ready) => *ready = true,
                    // Purged or evicted while it was being written.
                    None => disk.store.remove(&key),
                },
                Err(e) => {
                    index.0.remove(&key);
                    index.1.remove(&key);
                    inner.disk_fault(&disk, &e);
                }
            }
            inner.events.size(Tier::Disk, index.0.used());
            drop(index);
            // Readable now (or given up): readers arriving from here on find it themselves.
            drop(linger);
        });
    }
}

fn slice<E>(data: &Bytes, range: Range<usize>) -> Result<Bytes, ReadError<E>> {
    if range.start > range.end || range.end > data.len() {
        return Err(ReadError::Range { start: range.start, end: range.end, len: data.len() });
    }
    Ok(data.slice(range))
}

#[cfg(test)]
mod tests;
