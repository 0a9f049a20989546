//! One fetch per key however many readers miss on it at once, under a bound on fetches in
//! flight, and nothing left behind whatever happens to the readers.
//!
//! Each fetch runs as its own task. Readers ("waiters") only subscribe to its result, so the
//! reader that asked first can go away (a client that hung up, the read-ahead of an aborted
//! response) without ending the fetch for the others. When every waiter is gone before the
//! result is there, nobody needs it: the fetch is cancelled, which frees its slot (a video
//! player seeking away must not keep the store busy for blocks nobody will read).
//!
//! What is never left behind, on any path (success, error, panic, cancellation):
//! - the entry: removed when the fetch fails, panics or is cancelled, and after success once
//!   the admission step lets it go (see [`Linger`]);
//! - the slot: owned by the task, so dropped with it;
//! - a failure: removed before the waiters hear of it, so the next reader fetches again.
//!
//! A successful fetch then runs an admission step (put the value into a cache tier) in the
//! same task, whether or not anyone still waits: a reader arriving later then hits. Until the
//! step drops the [`Linger`] it is handed, readers arriving meanwhile get the fetched value
//! instead of fetching again (the gateway keeps it while a block is being written to SSD).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::AbortHandle;

/// Why a coalesced fetch gave no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// The fetch returned this error (every waiter gets a clone).
    Failed(E),
    /// The fetch ended without a result: it panicked, or the runtime is shutting down.
    Interrupted,
}

type Observer = Box<dyn Fn(usize) + Send + Sync>;
type Outcome<V, E> = Option<Result<V, E>>;

enum State<V, E> {
    /// Fetching; `waiters` readers wait for `rx`.
    Running { rx: watch::Receiver<Outcome<V, E>>, waiters: usize, abort: AbortHandle },
    /// Fetched; kept for readers arriving while the admission step holds its [`Linger`].
    Ready(V),
}

struct Entry<V, E> {
    /// Tells this fetch's entry from a later one for the same key.
    id: u64,
    state: State<V, E>,
}

struct Entries<K, V, E> {
    map: HashMap<K, Entry<V, E>>,
    next_id: u64,
}

struct Inner<K, V, E> {
    entries: Mutex<Entries<K, V, E>>,
    slots: Arc<Semaphore>,
    observer: Option<Observer>,
}

impl<K: Hash + Eq, V, E> Inner<K, V, E> {
    fn lock(&self) -> MutexGuard<'_, Entries<K, V, E>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reports the number of entries; called with the lock held, so reports arrive in order.
    fn observe(&self, entries: &Entries<K, V, E>) {
        if let Some(f) = &self.observer {
            f(entries.map.len());
        }
    }

    /// Removes `key`'s entry if it is still fetch `id`'s (not a later fetch of the same key).
    fn remove(&self, key: &K, id: u64) {
        let mut e = self.lock();
        if e.map.get(key).is_some_and(|x| x.id == id) {
            e.map.remove(key);
            self.observe(&e);
        }
    }
}

/// Coalesces fetches of values of type `V` by key `K`; errors `E` are handed to every waiter
/// (wrap a non-`Clone` error in an `Arc`). Cheap to clone: clones share the entries and slots.
pub struct Coalescer<K, V, E> {
    inner: Arc<Inner<K, V, E>>,
}

impl<K, V, E> Clone for Coalescer<K, V, E> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<K, V, E> Coalescer<K, V, E>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// At most `max_in_flight` fetches (and admission steps) run at once; more wait in order.
    pub fn new(max_in_flight: usize) -> Self {
        Self::build(max_in_flight, None)
    }

    /// Like [`Coalescer::new`]; `observer` is told the number of registered fetches whenever
    /// it changes (for a gauge). It runs with the coalescer locked: keep it trivial.
    pub fn with_observer(max_in_flight: usize, observer: impl Fn(usize) + Send + Sync + 'static) -> Self {
        Self::build(max_in_flight, Some(Box::new(observer)))
    }

    fn build(max_in_flight: usize, observer: Option<Observer>) -> Self {
        let inner = Inner {
            entries: Mutex::new(Entries { map: HashMap::new(), next_id: 0 }),
            slots: Arc::new(Semaphore::new(max_in_flight)),
            observer,
        };
        Self { inner: Arc::new(inner) }
    }

    /// Fetches registered now: running, or fetched and held by their admission step.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().map.len()
    }

    /// Whether a fetch of `key` is registered now.
    pub fn is_registered(&self, key: &K) -> bool {
        self.inner.lock().map.contains_key(key)
    }

    /// Slots not held by any fetch or by [`Coalescer::slot`].
    pub fn free_slots(&self) -> usize {
        self.inner.slots.available_permits()
    }

    /// One of the fetch slots, for work outside coalescing that must share the bound (e.g. a
    /// read that bypasses the cache). Released when dropped.
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        loop {
            // The semaphore is never closed.
            if let Ok(p) = self.inner.slots.clone().acquire_owned().await {
                return p;
            }
        }
    }

    /// The value for `key`: from the fetch already registered for it, else from a new one
    /// running `fetch()` in its own task once a slot is free, followed on success by
    /// `admit(value, linger)` (in that task, holding the slot, whether or not anyone still
    /// waits). `admit` is called before the waiters hear of the value and its future is awaited
    /// after: what the closure does itself (a memory-tier insert) is done before any waiter
    /// returns, so a read following a finished read hits; what its future does (a disk write)
    /// does not delay the waiters. Dropping the returned future only stops this caller's wait.
    pub async fn get<F, Fut, A, AFut>(&self, key: K, fetch: F, admit: A) -> Result<V, Failure<E>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<V, E>> + Send + 'static,
        A: FnOnce(V, Linger) -> AFut + Send + 'static,
        AFut: Future<Output = ()> + Send + 'static,
    {
        let (mut rx, id) = {
            let mut e = self.inner.lock();
            match e.map.get_mut(&key) {
                Some(Entry { state: State::Ready(v), .. }) => return Ok(v.clone()),
                Some(Entry { id, state: State::Running { rx, waiters, .. } }) => {
                    *waiters += 1;
                    (rx.clone(), *id)
                }
                None => {
                    let id = e.next_id;
                    e.next_id += 1;
                    let (tx, rx) = watch::channel(None);
                    // Spawned with the lock held: the task needs it only when it ends, so it
                    // cannot see the map before its entry is in.
                    let task = tokio::spawn(run(self.inner.clone(), key.clone(), id, tx, fetch, admit));
                    let state = State::Running { rx: rx.clone(), waiters: 1, abort: task.abort_handle() };
                    e.map.insert(key.clone(), Entry { id, state });
                    self.inner.observe(&e);
                    (rx, id)
                }
            }
        };
        let _waiting = Waiting { inner: &self.inner, key: &key, id };
        let outcome = match rx.wait_for(Option::is_some).await {
            Ok(o) => o.clone(),
            // The task ended without a result: it panicked or was torn down.
            Err(_) => None,
        };
        match outcome {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(Failure::Failed(e)),
            None => Err(Failure::Interrupted),
        }
    }
}

/// One reader's interest in a running fetch: the last one to go cancels it.
struct Waiting<'a, K: Hash + Eq, V, E> {
    inner: &'a Inner<K, V, E>,
    key: &'a K,
    id: u64,
}

impl<K: Hash + Eq, V, E> Drop for Waiting<'_, K, V, E> {
    fn drop(&mut self) {
        let mut e = self.inner.lock();
        let Some(entry) = e.map.get_mut(self.key) else { return };
        if entry.id != self.id {
            return;
        }
        if let State::Running { waiters, abort, .. } = &mut entry.state {
            *waiters -= 1;
            if *waiters == 0 {
                // Nobody wants the value any more. Aborting drops the task's future, and with
                // it the slot; the entry goes now, so a new reader starts afresh.
                abort.abort();
                e.map.remove(self.key);
                self.inner.observe(&e);
            }
        }
    }
}

/// Removes the entry of a fetch that ends without a value (error, panic, cancellation) when
/// dropped, unless disarmed once the value is published.
struct Cleanup<K: Hash + Eq, V, E> {
    inner: Arc<Inner<K, V, E>>,
    key: K,
    id: u64,
    armed: bool,
}

impl<K: Hash + Eq, V, E> Drop for Cleanup<K, V, E> {
    fn drop(&mut self) {
        if self.armed {
            self.inner.remove(&self.key, self.id);
        }
    }
}

async fn run<K, V, E, F, Fut, A, AFut>(
    inner: Arc<Inner<K, V, E>>,
    key: K,
    id: u64,
    tx: watch::Sender<Outcome<V, E>>,
    fetch: F,
    admit: A,
) where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<V, E>>,
    A: FnOnce(V, Linger) -> AFut,
    AFut: Future<Output = ()>,
{
    let mut cleanup = Cleanup { inner: inner.clone(), key: key.clone(), id, armed: true };
    let Ok(slot) = inner.slots.clone().acquire_owned().await else { return };
    match fetch().await {
        Ok(v) => {
            {
                let mut e = inner.lock();
                if let Some(entry) = e.map.get_mut(&key).filter(|x| x.id == id) {
                    entry.state = State::Ready(v.clone());
                }
            }
            cleanup.armed = false;
            let linger = Linger::new({
                let inner = inner.clone();
                move || inner.remove(&key, id)
            });
            let admitted = admit(v.clone(), linger);
            tx.send_replace(Some(Ok(v)));
            admitted.await;
        }
        Err(err) => {
            // Gone before anyone hears of the failure: the next reader fetches again.
            drop(cleanup);
            drop(slot);
            tx.send_replace(Some(Err(err)));
            return;
        }
    }
    drop(slot);
}

/// Keeps a fetched value registered for readers arriving after the fetch until dropped;
/// handed to the admission step, which drops it when a cache tier can serve the value. Dropping
/// it on every path (including a panic unwinding through whatever owns it) is what releases
/// the entry.
pub struct Linger(Option<Box<dyn FnOnce() + Send + Sync>>);

impl Linger {
    fn new(release: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self(Some(Box::new(release)))
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl std::fmt::Debug for Linger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Linger")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    type C = Coalescer<u32, u64, String>;

    /// A fetch that counts its starts and ends, and returns once `gate` is notified.
    #[derive(Clone, Default)]
    struct Fake {
        started: Arc<AtomicUsize>,
        dropped: Arc<AtomicUsize>,
        gate: Arc<tokio::sync::Notify>,
    }

    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    type BoxFetch = std::pin::Pin<Box<dyn Future<Output = Result<u64, String>> + Send>>;

    impl Fake {
        fn fetch(&self, value: Result<u64, String>) -> impl FnOnce() -> BoxFetch + Send + 'static {
            let f = self.clone();
            move || {
                Box::pin(async move {
                    f.started.fetch_add(1, Ordering::SeqCst);
                    let _d = CountDrop(f.dropped.clone());
                    f.gate.notified().await;
                    value
                })
            }
        }
    }

    fn no_admit(_: u64, _: Linger) -> std::future::Ready<()> {
        std::future::ready(())
    }

    fn fetch_panics() -> Result<u64, String> {
        panic!("fetch blew up")
    }

    fn admission_panics() {
        panic!("admission blew up")
    }

    /// Polls once: a reader registered as waiting whose task is not run again until later.
    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
        f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    /// Readers waiting for `key`'s running fetch.
    fn waiters(c: &C, key: u32) -> usize {
        match c.inner.lock().map.get(&key) {
            Some(Entry { state: State::Running { waiters, .. }, .. }) => *waiters,
            _ => 0,
        }
    }

    /// Polls `cond` until it holds (each check yields to the runtime), failing after 5 s.
    async fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !cond() {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn concurrent_readers_share_one_fetch() {
        let c = C::new(4);
        let fake = Fake::default();
        let mut readers = Vec::new();
        for _ in 0..10 {
            let (c, f) = (c.clone(), fake.fetch(Ok(7)));
            readers.push(tokio::spawn(async move { c.get(1, f, no_admit).await }));
        }
        until("the fetch starts", || fake.started.load(Ordering::SeqCst) == 1).await;
        fake.gate.notify_waiters();
        for r in readers {
            assert_eq!(r.await.ok(), Some(Ok(7)));
        }
        assert_eq!(fake.started.load(Ordering::SeqCst), 1);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.free_slots(), 4);
    }

    #[tokio::test]
    async fn first_reader_dropped_the_others_still_get_the_value() {
        let c = C::new(4);
        let fake = Fake::default();
        let first = tokio::spawn({
            let (c, f) = (c.clone(), fake.fetch(Ok(42)));
            async move { c.get(1, f, no_admit).await }
        });
        until("the fetch starts", || fake.started.load(Ordering::SeqCst) == 1).await;
        let second = tokio::spawn({
            let (c, f) = (c.clone(), fake.fetch(Ok(0)));
            async move { c.get(1, f, no_admit).await }
        });
        until("the second reader waits", || waiters(&c, 1) == 2).await;
        first.abort();
        assert!(first.await.is_err_and(|e| e.is_cancelled()));
        assert_eq!(fake.dropped.load(Ordering::SeqCst), 0, "the fetch must survive its first reader");
        fake.gate.notify_waiters();
        assert_eq!(second.await.ok(), Some(Ok(42)));
        assert_eq!(fake.started.load(Ordering::SeqCst), 1);
        until("the entry is gone", || c.in_flight() == 0).await;
        assert_eq!(c.free_slots(), 4);
    }

    #[tokio::test]
    async fn every_reader_gone_cancels_and_releases() {
        let c = C::new(1);
        let fake = Fake::default();
        for _ in 0..3 {
            let f = fake.fetch(Ok(1));
            assert!(tokio::time::timeout(Duration::from_millis(20), c.get(1, f, no_admit)).await.is_err());
        }
        // Also fetches that were still waiting for the one slot.
        for key in 2..6 {
            let f = fake.fetch(Ok(1));
            assert!(tokio::time::timeout(Duration::from_millis(20), c.get(key, f, no_admit)).await.is_err());
        }
        assert_eq!(c.in_flight(), 0, "entries of abandoned fetches must go at once");
        until("every started fetch is dropped", || {
            fake.dropped.load(Ordering::SeqCst) == fake.started.load(Ordering::SeqCst)
        })
        .await;
        until("the slot is free", || c.free_slots() == 1).await;
        // The path is not wedged: a new fetch gets the slot.
        let r = tokio::time::timeout(Duration::from_secs(5), c.get(9, || async { Ok(9) }, no_admit)).await;
        assert_eq!(r.ok(), Some(Ok(9)));
    }

    #[tokio::test]
    async fn failures_are_not_remembered() {
        let c = C::new(2);
        let calls = Arc::new(AtomicUsize::new(0));
        let fetch = |calls: Arc<AtomicUsize>| {
            move || async move {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 { Err("store down".to_string()) } else { Ok(5) }
            }
        };
        assert_eq!(c.get(1, fetch(calls.clone()), no_admit).await, Err(Failure::Failed("store down".into())));
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.get(1, fetch(calls.clone()), no_admit).await, Ok(5));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(c.free_slots(), 2);
    }

    /// A reader asking right after a failure fetches again, even while other waiters of the
    /// failed fetch have not woken up yet.
    #[tokio::test]
    async fn a_failure_is_forgotten_before_anyone_hears_of_it() {
        let c = C::new(2);
        let mut first = Box::pin(c.get(1, || async { Err("store down".to_string()) }, no_admit));
        assert!(poll_once(first.as_mut()).is_pending());
        let mut parked = Box::pin(c.get(1, || async { Ok(0) }, no_admit));
        assert!(poll_once(parked.as_mut()).is_pending());
        assert_eq!(waiters(&c, 1), 2);
        assert_eq!(first.await, Err(Failure::Failed("store down".into())));
        assert_eq!(c.get(1, || async { Ok(8) }, no_admit).await, Ok(8), "the failure was remembered");
        assert_eq!(parked.await, Err(Failure::Failed("store down".into())));
        assert_eq!(c.in_flight(), 0);
    }

    #[tokio::test]
    async fn every_waiter_hears_of_a_failure_and_the_next_reader_fetches_again() {
        let c = C::new(2);
        let fake = Fake::default();
        let mut readers = Vec::new();
        for _ in 0..5 {
            let (c, f) = (c.clone(), fake.fetch(Err("boom".into())));
            readers.push(tokio::spawn(async move { c.get(1, f, no_admit).await }));
        }
        until("every reader waits", || waiters(&c, 1) == 5).await;
        fake.gate.notify_waiters();
        for r in readers {
            assert_eq!(r.await.ok(), Some(Err(Failure::Failed("boom".into()))));
        }
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.get(1, || async { Ok(3) }, no_admit).await, Ok(3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrency_stays_within_the_bound() {
        const BOUND: usize = 3;
        let c = C::new(BOUND);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for key in 0..40u32 {
            let (c, running, most) = (c.clone(), running.clone(), most.clone());
            readers.push(tokio::spawn(async move {
                let fetch = move || async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    // Counted out however the fetch ends (cancelled ones included).
                    struct Out(Arc<AtomicUsize>);
                    impl Drop for Out {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    let _out = Out(running);
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok(u64::from(key))
                };
                // Every other key is asked for twice, and half of all readers give up early.
                let r = c.get(key / 2, fetch, no_admit);
                if key % 4 == 3 { tokio::time::timeout(Duration::from_millis(2), r).await.ok() } else { Some(r.await) }
            }));
        }
        for r in readers {
            if let Ok(Some(v)) = r.await {
                assert!(v.is_ok());
            }
        }
        let m = most.load(Ordering::SeqCst);
        assert!((1..=BOUND).contains(&m), "{m} fetches ran at once, bound {BOUND}");
        until("all entries are gone", || c.in_flight() == 0).await;
        until("all slots are free", || c.free_slots() == BOUND).await;
    }

    #[tokio::test]
    async fn a_panicking_fetch_releases_its_entry_and_slot() {
        let c = C::new(1);
        let mut first = Box::pin(c.get(1, || async { fetch_panics() }, no_admit));
        assert!(poll_once(first.as_mut()).is_pending());
        // A waiter that has not woken up yet does not keep the dead fetch registered.
        let mut parked = Box::pin(c.get(1, || async { Ok(0) }, no_admit));
        assert!(poll_once(parked.as_mut()).is_pending());
        assert_eq!(first.await, Err(Failure::Interrupted));
        until("the slot is free", || c.free_slots() == 1).await;
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.get(1, || async { Ok(2) }, no_admit).await, Ok(2));
        assert_eq!(parked.await, Err(Failure::Interrupted));
    }

    #[tokio::test]
    async fn a_panicking_admission_releases_its_entry_and_slot() {
        let c = C::new(1);
        let r = c
            .get(
                1,
                || async { Ok(4) },
                |_, linger| async move {
                    // Dropped by the unwinding.
                    let _linger = linger;
                    admission_panics()
                },
            )
            .await;
        assert_eq!(r, Ok(4), "waiters get the value before admission");
        until("the slot is free", || c.free_slots() == 1).await;
        until("the entry is gone", || c.in_flight() == 0).await;
    }

    #[tokio::test]
    async fn linger_serves_late_readers_until_dropped() {
        let c = C::new(2);
        let (held_tx, held_rx) = tokio::sync::oneshot::channel::<Linger>();
        let admit = move |_v: u64, linger: Linger| {
            // The admission step hands its linger on (as the gateway hands it to an SSD write).
            let _ = held_tx.send(linger);
            std::future::ready(())
        };
        assert_eq!(c.get(1, || async { Ok(10) }, admit).await, Ok(10));
        let linger = held_rx.await.ok();
        assert!(linger.is_some());
        assert_eq!(c.in_flight(), 1);
        // A late reader gets the fetched value: its own fetch never runs.
        assert_eq!(c.get(1, || async { Ok(99) }, no_admit).await, Ok(10));
        until("the admission step returned its slot", || c.free_slots() == 2).await;
        drop(linger);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.get(1, || async { Ok(99) }, no_admit).await, Ok(99));
    }

    #[tokio::test]
    async fn observer_follows_the_registered_fetches() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let c: C = Coalescer::with_observer(2, {
            let seen = seen.clone();
            move |n| seen.lock().unwrap_or_else(|p| p.into_inner()).push(n)
        });
        let fake = Fake::default();
        let f = fake.fetch(Ok(1));
        assert!(tokio::time::timeout(Duration::from_millis(20), c.get(1, f, no_admit)).await.is_err());
        assert_eq!(c.get(2, || async { Ok(2) }, no_admit).await, Ok(2));
        until("the entry is gone", || c.in_flight() == 0).await;
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(seen, vec![1, 0, 1, 0]);
    }

    // Regression (hits_and_misses_at_block_edges): the gateway puts a fetched block into its
    // memory tier in the admission closure; a reader that returned must find it there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn admission_closure_runs_before_waiters_return() {
        let c: C = Coalescer::new(2);
        let admitted = Arc::new(AtomicBool::new(false));
        let flag = admitted.clone();
        let admit = move |_v: u64, _l: Linger| {
            // Slow enough that a waiter woken before it would surely return first.
            std::thread::sleep(Duration::from_millis(50));
            flag.store(true, Ordering::SeqCst);
            std::future::ready(())
        };
        assert_eq!(c.get(1, || async { Ok(4) }, admit).await, Ok(4));
        assert!(admitted.load(Ordering::SeqCst), "a waiter returned before the admission closure ran");
    }
}
