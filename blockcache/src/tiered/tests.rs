//! The engine against a fake origin: coalescing and cancellation, errors, budgets and bounds,
//! purge, counters.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

/// An origin holding some blocks; counts fetches started and dropped, can hold every fetch
/// until released, and fail the next few.
#[derive(Default)]
struct FakeOrigin {
    blocks: Mutex<HashMap<Key, Bytes>>,
    started: AtomicUsize,
    dropped: AtomicUsize,
    hold: AtomicBool,
    release: tokio::sync::Notify,
    failures: AtomicUsize,
    /// Serves ranges and outboards (the gateway's store) or whole blocks only (the drive's).
    ranged: AtomicBool,
    outboards: Mutex<HashMap<Key, Bytes>>,
    /// The spans asked for, in order, and outboard fetches and writes.
    ranges: Mutex<Vec<Range<usize>>>,
    outboard_gets: AtomicUsize,
    outboard_puts: AtomicUsize,
}

struct CountDrop<'a>(&'a AtomicUsize);
impl Drop for CountDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Default)]
struct Origin(Arc<FakeOrigin>);

impl Fetcher for Origin {
    type Error = String;

    async fn fetch(&self, key: Key) -> Result<Verified, String> {
        let o = &self.0;
        o.started.fetch_add(1, Ordering::SeqCst);
        let _d = CountDrop(&o.dropped);
        if o.hold.load(Ordering::SeqCst) {
            o.release.notified().await;
        }
        if o.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err("origin down".into());
        }
        let data = lock(&o.blocks).get(&key).cloned().ok_or_else(|| "no such block".to_string())?;
        Verified::check(&key.1, data).ok_or_else(|| "corrupt block from the origin".to_string())
    }

    fn ranged(&self) -> bool {
        self.0.ranged.load(Ordering::SeqCst)
    }

    async fn fetch_range(&self, key: Key, range: Range<usize>) -> Option<Result<Bytes, String>> {
        let o = &self.0;
        lock(&o.ranges).push(range.clone());
        if o.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Some(Err("origin down".into()));
        }
        let data = lock(&o.blocks).get(&key).cloned();
        // Like S3: a range past the end is cut at the end.
        Some(data.map(|d| d.slice(range.start.min(d.len())..range.end.min(d.len()))).ok_or("no such block".into()))
    }

    async fn fetch_outboard(&self, key: Key) -> Result<Option<Bytes>, String> {
        self.0.outboard_gets.fetch_add(1, Ordering::SeqCst);
        Ok(lock(&self.0.outboards).get(&key).cloned())
    }

    async fn store_outboard(&self, key: Key, outboard: Bytes) {
        self.0.outboard_puts.fetch_add(1, Ordering::SeqCst);
        lock(&self.0.outboards).insert(key, outboard);
    }
}

impl Origin {
    fn add(&self, data: Vec<u8>) -> Key {
        let key = (1, *blake3::hash(&data).as_bytes());
        lock(&self.0.blocks).insert(key, Bytes::from(data));
        key
    }
    /// A ranged origin.
    fn ranged() -> Origin {
        let o = Origin::default();
        o.0.ranged.store(true, Ordering::SeqCst);
        o
    }
    /// A block with its outboard, as an upload stores it.
    fn add_with_outboard(&self, data: Vec<u8>) -> Key {
        let (_, v) = Verified::hash_new(Bytes::from(data.clone()));
        let key = self.add(data);
        if let Some(o) = v.outboard() {
            lock(&self.0.outboards).insert(key, o.encode());
        }
        key
    }
    fn ranges(&self) -> Vec<Range<usize>> {
        lock(&self.0.ranges).clone()
    }
    fn started(&self) -> usize {
        self.0.started.load(Ordering::SeqCst)
    }
    fn dropped(&self) -> usize {
        self.0.dropped.load(Ordering::SeqCst)
    }
}

fn cfg(mem_bytes: u64) -> Config {
    Config {
        mem_bytes,
        fetches_in_flight: 4,
        disk_writes_in_flight: 2,
        when_writes_busy: WhenWritesBusy::Wait,
        fetched_to_mem: true,
        ahead_blocks: 2,
        outboard_bytes: 1 << 20,
    }
}

fn cache(origin: &Origin, cfg: Config, disk: Option<(&Path, u64)>) -> TieredCache<Origin> {
    let disk = disk.map(|(dir, capacity)| DiskTierConfig {
        store: DiskStore::open(dir, "test").unwrap_or_else(|e| panic!("open {}: {e}", dir.display())),
        capacity,
    });
    TieredCache::new(origin.clone(), cfg, disk, Arc::new(NoEvents))
}

fn block(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Polls `cond` until it holds, failing after 5 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until no load is registered (admission steps done) and the SSD tier holds `n`
/// readable entries.
async fn until_on_disk<F: Fetcher>(c: &TieredCache<F>, n: usize) {
    until("the SSD writes finish", || {
        let d = c.inner.disk.as_ref().map(|d| lock(&d.index).1.values().filter(|r| **r).count());
        c.fetches_in_flight() == 0 && d == Some(n)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_share_one_fetch_and_each_counts_once() {
    let origin = Origin::default();
    let key = origin.add(block(1, 100_000));
    let c = Arc::new(cache(&origin, cfg(1 << 20), None));
    origin.0.hold.store(true, Ordering::SeqCst);
    let mut readers = Vec::new();
    for i in 0..20usize {
        let c = c.clone();
        readers.push(tokio::spawn(async move { c.read(key, i * 1000..i * 1000 + 10, ReadMode::Range).await }));
    }
    until("every reader waits", || c.loads.in_flight() == 1 && origin.started() == 1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    origin.0.hold.store(false, Ordering::SeqCst);
    origin.0.release.notify_waiters();
    let data = block(1, 100_000);
    for (i, r) in readers.into_iter().enumerate() {
        assert_eq!(r.await.ok().and_then(Result::ok).as_deref(), Some(&data[i * 1000..i * 1000 + 10]));
    }
    let s = c.stats();
    assert_eq!((s.fetches, s.bytes_fetched), (1, 100_000));
    assert_eq!(s.misses + s.hits_mem + s.hits_disk, 20, "{s:?}");
    // Admitted to memory before any reader returned: the next read is a hit.
    c.read(key, 0..5, ReadMode::Range).await.ok();
    assert_eq!(c.stats().hits_mem, s.hits_mem + 1);
    assert_eq!(c.fetches_in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_asker_and_a_waiter_dropped_the_fetch_lives_on() {
    let origin = Origin::default();
    let key = origin.add(block(2, 5000));
    let c = Arc::new(cache(&origin, cfg(1 << 20), None));
    origin.0.hold.store(true, Ordering::SeqCst);
    let spawn = |c: Arc<TieredCache<Origin>>| tokio::spawn(async move { c.read(key, 0..5000, ReadMode::Range).await });
    let first = spawn(c.clone());
    until("the fetch starts", || origin.started() == 1).await;
    let second = spawn(c.clone());
    let third = spawn(c.clone());
    tokio::time::sleep(Duration::from_millis(30)).await;
    first.abort();
    second.abort();
    assert!(first.await.is_err_and(|e| e.is_cancelled()));
    assert!(second.await.is_err_and(|e| e.is_cancelled()));
    assert_eq!(origin.dropped(), 0, "the fetch must outlive its first asker");
    origin.0.hold.store(false, Ordering::SeqCst);
    origin.0.release.notify_waiters();
    assert_eq!(third.await.ok().and_then(Result::ok).map(|b| b.len()), Some(5000));
    assert_eq!(origin.started(), 1);
    until("nothing registered", || c.fetches_in_flight() == 0).await;
    assert_eq!(c.free_fetch_slots(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reader_gone_cancels_the_fetch_and_frees_its_slot() {
    let origin = Origin::default();
    let c = cache(&origin, cfg(1 << 20), None);
    origin.0.hold.store(true, Ordering::SeqCst);
    // More abandoned blocks than there are slots, in every mode.
    let keys: Vec<Key> = (0..10u8).map(|i| origin.add(block(i, 1000))).collect();
    for (i, key) in keys.iter().enumerate() {
        let read = async {
            match i % 3 {
                0 => c.read(*key, 0..10, ReadMode::Range).await.map(drop),
                1 => c.read(*key, 0..10, ReadMode::Sequential { first: true }).await.map(drop),
                _ => c.prefetch(*key).await,
            }
        };
        assert!(tokio::time::timeout(Duration::from_millis(20), read).await.is_err());
    }
    assert_eq!(c.fetches_in_flight(), 0, "abandoned loads must go at once");
    until("every started fetch is dropped", || origin.dropped() == origin.started()).await;
    until("every slot is free", || c.free_fetch_slots() == 4).await;
    origin.0.hold.store(false, Ordering::SeqCst);
    let got = tokio::time::timeout(Duration::from_secs(5), c.read(keys[0], 0..1000, ReadMode::Range)).await;
    assert_eq!(got.ok().and_then(Result::ok).map(|b| b.len()), Some(1000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_not_remembered() {
    let origin = Origin::default();
    let key = origin.add(block(3, 2000));
    let c = cache(&origin, cfg(1 << 20), None);
    origin.0.failures.store(1, Ordering::SeqCst);
    assert_eq!(c.read(key, 0..10, ReadMode::Range).await, Err(ReadError::Fetch("origin down".into())));
    assert_eq!(c.fetches_in_flight(), 0);
    assert_eq!(c.stats().misses, 1, "a failed read is a miss");
    assert_eq!(c.stats().mem_entries, 0, "a failed fetch admitted something");
    assert_eq!(c.read(key, 0..10, ReadMode::Range).await.map(|b| b.len()), Ok(10));
    assert_eq!(origin.started(), 2);
    // A block the origin does not have is an error too, and so is a range outside the block.
    let missing = (1, [9u8; 32]);
    assert!(matches!(c.read(missing, 0..1, ReadMode::Range).await, Err(ReadError::Fetch(_))));
    assert_eq!(
        c.read(key, 1990..2001, ReadMode::Range).await,
        Err(ReadError::Range { start: 1990, end: 2001, len: 2000 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_budget_holds_and_oversized_blocks_are_refused() {
    let origin = Origin::default();
    let budget = 50_000;
    let c = cache(&origin, cfg(budget), None);
    for i in 0..30u8 {
        let key = origin.add(block(i, 7000 + usize::from(i) * 100));
        c.read(key, 0..100, ReadMode::Range).await.ok();
        assert!(c.stats().mem_used <= budget, "{:?}", c.stats());
    }
    assert!(c.stats().evictions_mem > 0);
    let big = origin.add(block(99, budget as usize + 1));
    assert_eq!(c.read(big, 0..10, ReadMode::Range).await.map(|b| b.len()), Ok(10));
    assert_eq!(c.stats().admission_rejects, 1);
    // The read-ahead buffer is bounded by its block count.
    for i in 100..110u8 {
        let key = origin.add(block(i, 100));
        c.prefetch(key).await.ok();
        assert!(c.ahead_len() <= 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_bound_holds_and_entries_survive_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let cap = 4 * entry_size(20_000);
    let keys: Vec<Key> = (0..12u8).map(|i| origin.add(block(i, 20_000))).collect();
    {
        let c = cache(&origin, cfg(0), Some((dir.path(), cap)));
        for key in &keys {
            c.read(*key, 0..20_000, ReadMode::Range).await.ok();
            // One admission at a time: concurrent ones take their turns in any order, and an
            // old block admitted late would rightly be kept as one of the newest.
            until("the block is on disk", || c.inner.disk_ready(key, false).is_some()).await;
            assert!(c.stats().disk_used <= cap);
        }
        until_on_disk(&c, 4).await;
        let s = c.stats();
        assert_eq!((s.disk_entries, s.evictions_disk), (4, 8), "{s:?}");
    }
    // The first cache's last background task may hold the directory's lock a moment longer.
    until("the first cache lets go of its directory", || DiskStore::open(dir.path(), "test").is_ok()).await;
    let c = cache(&origin, cfg(0), Some((dir.path(), cap)));
    let before = origin.started();
    // The newest four.
    let kept: Vec<Key> = keys.iter().filter(|k| c.inner.disk_ready(k, false).is_some()).copied().collect();
    assert_eq!(kept.len(), 4);
    assert!(kept.iter().all(|k| keys[8..].contains(k)), "old entries kept");
    for key in &kept {
        assert_eq!(c.read(*key, 100..200, ReadMode::Range).await.map(|b| b.len()), Ok(100));
    }
    assert_eq!(origin.started(), before, "warm after a restart");
    assert_eq!(c.stats().hits_disk, 4);
    Ok(())
}

/// The race behind `concurrent_cold_reads_fetch_once`: a reader missed the tiers just before
/// the previous load's block became readable and that load let go; its own load must take the
/// block from the tier, not the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_load_looks_at_the_tiers_before_the_origin() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let key = origin.add(block(4, 30_000));
    let c = cache(&origin, cfg(0), Some((dir.path(), 1 << 20)));
    c.read(key, 0..1, ReadMode::Range).await.ok();
    until_on_disk(&c, 1).await;
    assert_eq!(c.load(key).await.map(|l| (l.data.len(), l.source)), Ok((30_000, Source::Disk)));
    let c = cache(&origin, cfg(1 << 20), None);
    c.read(key, 0..1, ReadMode::Range).await.ok();
    assert_eq!(c.load(key).await.map(|l| (l.data.len(), l.source)), Ok((30_000, Source::Mem)));
    assert_eq!(origin.started(), 2);
    Ok(())
}

/// With memory not taking the block, the load stays registered until its SSD entry is
/// readable, and a reader arriving meanwhile gets its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_during_the_ssd_write_do_not_fetch_again() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let c = Arc::new(cache(&origin, cfg(0), Some((dir.path(), 1 << 30))));
    for i in 0..5u8 {
        let key = origin.add(block(i, 2 << 20));
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.read(key, 0..10, ReadMode::Range).await })
            })
            .collect();
        for r in readers {
            assert!(matches!(r.await, Ok(Ok(_))));
        }
        assert_eq!(c.read(key, 5..6, ReadMode::Range).await.map(|b| b.len()), Ok(1));
    }
    assert_eq!(origin.started(), 5);
    until("every load let go", || c.fetches_in_flight() == 0).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_says_which_blocks_a_read_takes_from_a_tier() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let c = cache(&origin, cfg(1 << 20), Some((dir.path(), 1 << 20)));
    let (key, ahead, other) = (origin.add(block(7, 10_000)), origin.add(block(8, 10_000)), origin.add(block(9, 10)));
    assert!(!c.holds(&key) && !c.holds(&ahead) && !c.holds(&other));
    c.read(key, 0..10, ReadMode::Range).await.ok();
    c.prefetch(ahead).await.ok();
    assert!(c.holds(&key) && c.holds(&ahead) && !c.holds(&other));
    until_on_disk(&c, 2).await;
    c.purge_mem_for_test();
    assert!(c.holds(&key), "the SSD entry");
    c.purge()?;
    assert!(!c.holds(&key) && !c.holds(&ahead));
    assert_eq!(origin.started(), 2, "asking fetched nothing");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_empties_every_tier() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let c = cache(&origin, cfg(1 << 20), Some((dir.path(), 1 << 20)));
    let key = origin.add(block(5, 10_000));
    let ahead = origin.add(block(6, 10_000));
    c.read(key, 0..10, ReadMode::Range).await.ok();
    c.prefetch(ahead).await.ok();
    until_on_disk(&c, 2).await;
    c.purge()?;
    let s = c.stats();
    assert_eq!((s.mem_used, s.mem_entries, s.disk_used, s.disk_entries), (0, 0, 0, 0), "{s:?}");
    assert_eq!(c.ahead_len(), 0);
    c.read(key, 0..10, ReadMode::Range).await.ok();
    c.read(ahead, 0..10, ReadMode::Sequential { first: true }).await.ok();
    assert_eq!(origin.started(), 4, "purged blocks are fetched again");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_follow_each_tier() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let key = origin.add(block(7, 40_000));
    let mut config = cfg(1 << 20);
    // The drive's way: readers put blocks into memory, prefetches into the read-ahead buffer.
    config.fetched_to_mem = false;
    let c = cache(&origin, config, Some((dir.path(), 1 << 20)));
    c.read(key, 0..100, ReadMode::Range).await.ok(); // miss, fetched
    c.read(key, 100..300, ReadMode::Range).await.ok(); // memory
    until_on_disk(&c, 1).await;
    c.purge_mem_for_test();
    c.read(key, 300..400, ReadMode::Range).await.ok(); // SSD, the range only
    c.read(key, 0..40_000, ReadMode::Sequential { first: true }).await.ok(); // SSD, whole: into memory
    c.read(key, 0..10, ReadMode::Sequential { first: false }).await.ok(); // memory
    let s = c.stats();
    assert_eq!((s.misses, s.hits_mem, s.hits_disk, s.fetches, s.bytes_fetched), (1, 2, 2, 1, 40_000), "{s:?}");
    assert_eq!((s.bytes_served_mem, s.bytes_served_disk), (210, 40_100));
    let b = c.bypass(key, 10..20, None).await;
    assert_eq!(b.map(|b| b.len()), Ok(10));
    let s = c.stats();
    assert_eq!((s.bypassed, s.fetches), (1, 2));
    // A prefetched block waits in the read-ahead buffer; a sequential reader takes it.
    let next = origin.add(block(8, 40_000));
    c.prefetch(next).await.ok();
    assert_eq!(c.ahead_len(), 1);
    assert_eq!(c.read(next, 0..10, ReadMode::Sequential { first: true }).await.map(|b| b.len()), Ok(10));
    assert_eq!(c.ahead_len(), 0);
    assert_eq!(origin.started(), 3);
    assert_eq!(c.stats().hits_mem, 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_and_deleted_entries_are_refetched() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let origin = Origin::default();
    let data = block(9, 50_000);
    let key = origin.add(data.clone());
    let c = cache(&origin, cfg(0), Some((dir.path(), 1 << 20)));
    c.read(key, 0..10, ReadMode::Range).await.ok();
    until_on_disk(&c, 1).await;
    let hex = blake3::Hash::from_bytes(key.1).to_hex();
    let file = dir.path().join("blocks/1").join(&hex[..2]).join(hex.as_str());
    let mut raw = std::fs::read(&file)?;
    let last = raw.len() - 1;
    raw[last] ^= 0xff;
    std::fs::write(&file, &raw)?;
    assert_eq!(c.read(key, 49_000..50_000, ReadMode::Range).await.ok().as_deref(), Some(&data[49_000..]));
    assert_eq!(c.stats().corrupt_entries, 1);
    until_on_disk(&c, 1).await;
    std::fs::remove_file(&file)?;
    assert_eq!(c.read(key, 0..50_000, ReadMode::Range).await.ok().as_deref(), Some(&data[..]));
    assert_eq!(origin.started(), 3);
    Ok(())
}

/// The drive's configuration: when every SSD write slot is busy a fetch waits for one (keeping
/// its fetch slot), and every block is written; the gateway's skips the SSD instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_writes_wait_or_skip_as_configured() -> anyhow::Result<()> {
    for when in [WhenWritesBusy::Wait, WhenWritesBusy::Skip] {
        let dir = tempfile::tempdir()?;
        let origin = Origin::default();
        let mut config = cfg(0);
        config.when_writes_busy = when;
        config.disk_writes_in_flight = 1;
        let c = Arc::new(cache(&origin, config, Some((dir.path(), 1 << 30))));
        let keys: Vec<Key> = (0..8u8).map(|i| origin.add(block(i, 1 << 20))).collect();
        let readers: Vec<_> = keys
            .iter()
            .map(|k| {
                let (c, k) = (c.clone(), *k);
                tokio::spawn(async move { c.read(k, 0..10, ReadMode::Range).await })
            })
            .collect();
        for r in readers {
            assert!(matches!(r.await, Ok(Ok(_))));
        }
        until("every load let go", || c.fetches_in_flight() == 0).await;
        until("every slot is free", || c.free_fetch_slots() == 4).await;
        let s = c.stats();
        // Each block was also refused by the empty memory tier.
        let disk_rejects = s.admission_rejects - 8;
        match when {
            WhenWritesBusy::Wait => {
                until_on_disk(&c, 8).await;
                assert_eq!(disk_rejects, 0);
            }
            WhenWritesBusy::Skip => assert_eq!(s.disk_entries + disk_rejects, 8, "{s:?}"),
        }
    }
    Ok(())
}

impl<F: Fetcher> TieredCache<F> {
    /// Empties the memory tier only (to reach the SSD tier in a test).
    fn purge_mem_for_test(&self) {
        let mut mem = lock(&self.inner.mem);
        mem.policy.clear();
        mem.data.clear();
    }
}

const P: usize = PIECE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_part_read_fetches_only_its_pieces() {
    let origin = Origin::ranged();
    // An odd length: the last piece is short.
    let len = 64 * P + 777;
    let data = block(10, len);
    let key = origin.add_with_outboard(data.clone());
    let c = cache(&origin, cfg(64 << 20), None);
    let part = ReadMode::Part { len };
    // Inside one piece, across two, in the short last piece (fewer than HOT_READS reads).
    let reads = [(10 * P + 5, 10 * P + 4101), (20 * P - 100, 20 * P + 100), (64 * P + 3, 64 * P + 700)];
    for (start, end) in reads {
        assert_eq!(c.read(key, start..end, part).await.as_deref(), Ok(&data[start..end]), "{start}..{end}");
    }
    // The block's last byte, bypassing the cache.
    assert_eq!(c.bypass(key, len - 1..len, Some(len)).await.as_deref(), Ok(&data[len - 1..]));
    assert_eq!(origin.ranges(), vec![10 * P..11 * P, 19 * P..21 * P, 64 * P..len, 64 * P..len]);
    let s = c.stats();
    assert_eq!((s.fetches, s.range_fetches, s.outboard_fetches), (0, 4, 1), "{s:?}");
    assert_eq!(origin.0.outboard_gets.load(Ordering::SeqCst), 1, "the outboard is kept once checked");
    assert_eq!((s.misses, s.bypassed, s.mem_entries), (3, 1, 0), "parts are misses and admit nothing: {s:?}");
    assert_eq!(s.bytes_fetched, (P + 2 * P + 2 * 777) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_and_hot_part_reads_load_the_block() {
    let origin = Origin::ranged();
    let len = 256 * P;
    let (a, b, z) = (block(11, len), block(12, len), block(13, len));
    let (ka, kb, kz) =
        (origin.add_with_outboard(a.clone()), origin.add_with_outboard(b.clone()), origin.add_with_outboard(z));
    let c = cache(&origin, cfg(64 << 20), None);
    let part = ReadMode::Part { len };
    // A read that continues the last one of the block: sequential, the block is loaded.
    let at = 100 * P + 123;
    assert_eq!(c.read(ka, at..at + 4096, part).await.as_deref(), Ok(&a[at..at + 4096]));
    assert_eq!(c.stats().fetches, 0);
    assert_eq!(c.read(ka, at + 4096..at + 8192, part).await.as_deref(), Ok(&a[at + 4096..at + 8192]));
    assert_eq!(c.stats().fetches, 1, "a sequential read loads the whole block");
    assert_eq!(c.read(ka, 7..9, part).await.as_deref(), Ok(&a[7..9]));
    assert_eq!((c.stats().fetches, c.stats().range_fetches, c.stats().hits_mem), (1, 1, 1), "admitted: a hit");
    // Read often (the HOT_READSth part read within the window): loaded.
    for i in 1..HOT_READS as usize {
        let at = i * 50 * P + 9;
        assert_eq!(c.read(kb, at..at + 100, part).await.as_deref(), Ok(&b[at..at + 100]));
    }
    assert_eq!(c.stats().fetches, 1);
    assert_eq!(c.read(kb, 3 * P..3 * P + 1, part).await.as_deref(), Ok(&b[3 * P..3 * P + 1]));
    assert_eq!(c.stats().fetches, 2, "a hot block is loaded");
    // A read from the block's start, or of a large part of it, loads it too.
    assert_eq!(c.read(kz, 0..4096, part).await.map(|d| d.len()), Ok(4096));
    assert_eq!(c.stats().fetches, 3);
    assert_eq!(c.stats().mem_entries, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_piece_is_refused_and_not_remembered() {
    let origin = Origin::ranged();
    let len = 8 * P + 10;
    let good = block(14, len);
    let key = origin.add_with_outboard(good.clone());
    // Bit rot in piece 5 of the stored block (the outboard is the good one).
    let mut bad = good.clone();
    bad[5 * P + 77] ^= 0x10;
    lock(&origin.0.blocks).insert(key, Bytes::from(bad));
    let c = cache(&origin, cfg(64 << 20), None);
    let part = ReadMode::Part { len };
    for _ in 0..2 {
        assert_eq!(c.read(key, 5 * P + 10..5 * P + 20, part).await, Err(ReadError::Corrupt));
    }
    assert_eq!(c.bypass(key, 5 * P + 10..5 * P + 20, Some(len)).await, Err(ReadError::Corrupt));
    let s = c.stats();
    assert_eq!((s.corrupt_ranges, s.range_fetches, s.mem_entries), (3, 3, 0), "{s:?}");
    // The other pieces are intact and served.
    assert_eq!(c.read(key, 2 * P..2 * P + 9, part).await.as_deref(), Ok(&good[2 * P..2 * P + 9]));
    // A store that sends fewer bytes than asked is refused the same way.
    lock(&origin.0.blocks).insert(key, Bytes::from(good[..6 * P].to_vec()));
    assert_eq!(c.bypass(key, 6 * P + 1..6 * P + 2, Some(len)).await, Err(ReadError::Corrupt));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_foreign_outboard_falls_back_to_the_whole_block_and_is_written() {
    let origin = Origin::ranged();
    let len = 40 * P + 1;
    let data = block(15, len);
    let (_, v) = Verified::hash_new(Bytes::from(data.clone()));
    let right = v.outboard().map(|o| o.encode());
    // A block stored before outboards existed: none.
    let key = origin.add(data.clone());
    let c = cache(&origin, cfg(64 << 20), None);
    assert_eq!(c.bypass(key, 9 * P..9 * P + 10, Some(len)).await.as_deref(), Ok(&data[9 * P..9 * P + 10]));
    assert_eq!(c.stats().fetches, 1, "fetched whole");
    until("the outboard is written", || lock(&origin.0.outboards).get(&key) == right.as_ref()).await;
    // From then on, parts alone (the outboard is known here; a new cache reads it back).
    assert_eq!(c.bypass(key, 30 * P..30 * P + 10, Some(len)).await.as_deref(), Ok(&data[30 * P..30 * P + 10]));
    assert_eq!(c.stats().fetches, 1);
    let fresh = cache(&origin, cfg(64 << 20), None);
    assert_eq!(
        fresh.read(key, 31 * P..31 * P + 10, ReadMode::Part { len }).await.as_deref(),
        Ok(&data[31 * P..31 * P + 10])
    );
    assert_eq!((fresh.stats().fetches, fresh.stats().outboard_fetches), (0, 1));

    // An outboard that is not the block's (damaged, or another block's) is refused: the block
    // is fetched whole, served, and its outboard written again.
    let mut damaged = right.clone().map(|b| b.to_vec()).unwrap_or_default();
    damaged[40] ^= 1;
    lock(&origin.0.outboards).insert(key, Bytes::from(damaged));
    let c = cache(&origin, cfg(64 << 20), None);
    assert_eq!(c.read(key, 12 * P..12 * P + 3, ReadMode::Part { len }).await.as_deref(), Ok(&data[12 * P..12 * P + 3]));
    let s = c.stats();
    assert_eq!((s.bad_outboards, s.fetches), (1, 1), "{s:?}");
    until("the outboard is repaired", || lock(&origin.0.outboards).get(&key) == right.as_ref()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_blocks_whole_parts_and_plain_origins_are_fetched_whole() {
    let origin = Origin::ranged();
    let c = cache(&origin, cfg(64 << 20), None);
    // A block of one piece or less is its own piece: checked whole, no outboard.
    for len in [10_000, P] {
        let data = block(16, len);
        let key = origin.add_with_outboard(data.clone());
        assert_eq!(c.bypass(key, 5000..5010, Some(len)).await.as_deref(), Ok(&data[5000..5010]));
        assert_eq!(c.read(key, 5000..5010, ReadMode::Part { len }).await.as_deref(), Ok(&data[5000..5010]));
    }
    let len = 3 * P;
    let data = block(17, len);
    let key = origin.add_with_outboard(data.clone());
    // The whole block, bypassed: one whole fetch.
    assert_eq!(c.bypass(key, 0..len, Some(len)).await.map(|d| d.len()), Ok(len));
    let s = c.stats();
    assert_eq!((s.fetches, s.range_fetches, s.outboard_fetches), (5, 0, 0), "{s:?}");
    // An origin that serves whole blocks only (the drive's): a part read loads the block.
    let plain = Origin::default();
    let key = plain.add_with_outboard(data.clone());
    let c = cache(&plain, cfg(64 << 20), None);
    assert_eq!(c.read(key, P + 1..P + 2, ReadMode::Part { len }).await.as_deref(), Ok(&data[P + 1..P + 2]));
    assert_eq!((c.stats().fetches, c.stats().range_fetches), (1, 0));
    // Errors of part reads are not remembered either.
    let origin = Origin::ranged();
    let len = 10 * P;
    let data = block(18, len);
    let key = origin.add_with_outboard(data.clone());
    let c = cache(&origin, cfg(64 << 20), None);
    origin.0.failures.store(1, Ordering::SeqCst);
    assert_eq!(
        c.read(key, 4 * P..4 * P + 1, ReadMode::Part { len }).await,
        Err(ReadError::Fetch("origin down".into()))
    );
    assert_eq!(c.read(key, 6 * P..6 * P + 1, ReadMode::Part { len }).await.as_deref(), Ok(&data[6 * P..6 * P + 1]));
    assert_eq!(
        c.read(key, len - 1..len + 1, ReadMode::Part { len }).await,
        Err(ReadError::Range { start: len - 1, end: len + 1, len })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_bypass_takes_a_slot_and_lets_out_only_checked_pieces() {
    let origin = Origin::ranged();
    let len = 64 * P + 777;
    let data = block(30, len);
    let key = origin.add_with_outboard(data.clone());
    let c = cache(&origin, cfg(64 << 20), None);
    let slots = c.free_fetch_slots();
    let plan = c.bypass_streamed(key, 0..len, len).await.expect("no error").expect("streamable");
    assert_eq!(plan.span, 0..len);
    assert_eq!(c.free_fetch_slots(), slots - 1, "a streamed read holds a fetch slot");
    let mut plan = plan;
    let mut out = Vec::new();
    for chunk in data.chunks(40_000) {
        out.extend(plan.check.push(Bytes::copy_from_slice(chunk)).expect("its own bytes").concat());
    }
    plan.check.finish().expect("complete");
    assert_eq!(out, data);
    drop(plan);
    assert_eq!(c.free_fetch_slots(), slots, "dropping the read gives its slot back");
    let s = c.stats();
    assert_eq!((s.bypassed, s.range_fetches, s.outboard_fetches, s.fetches, s.mem_entries), (1, 1, 1, 0, 0), "{s:?}");
    // A part: the covering pieces only; the outboard is kept.
    let plan = c.bypass_streamed(key, 3 * P + 5..5 * P, len).await.expect("no error").expect("streamable");
    assert_eq!(plan.span, 3 * P..5 * P);
    assert_eq!(c.stats().outboard_fetches, 1);
    drop(plan);
    // No outboard, a block of one piece, a plain origin, a length that is not the block's:
    // not streamed (the caller reads it whole).
    let bare = origin.add(block(31, 3 * P));
    assert!(c.bypass_streamed(bare, 0..3 * P, 3 * P).await.expect("no error").is_none());
    let small = origin.add_with_outboard(block(32, P));
    assert!(c.bypass_streamed(small, 0..P, P).await.expect("no error").is_none());
    assert!(c.bypass_streamed(key, 0..len - 1, len - 1).await.expect("no error").is_none());
    let plain = Origin::default();
    let key = plain.add_with_outboard(data.clone());
    let c = cache(&plain, cfg(64 << 20), None);
    assert!(c.bypass_streamed(key, 0..len, len).await.expect("no error").is_none());
}
