//! An in-memory gateway behind the same [`Remote`] seam as the real client, for tests of the
//! core without a server: a namespace with the gateway's rules (case-insensitive names that
//! keep their stored spelling, parents created by commits and moves, a move never replacing a
//! directory), versions with the base-version check (409 `conflict`), blocks by BLAKE3 hash,
//! and a change journal with the feed's cursor rules.
//!
//! Faults are injected at will: the gateway unreachable (every call, or the next call of one
//! kind), slow, answering 409, 423, 413 or 5xx, or taking a call and losing the answer; and
//! another device changes the space ([`FakeGateway::other_write`] and friends), which the change
//! journal reports like any change.
//!
//! Built for the crate's tests and, with the `fake` feature, for other crates' tests. It is
//! not a second gateway: locks, quota accounting, the trash's contents and versions other than
//! the current one are left out (faults stand in for their refusals).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;
use nimbus_proto::wire::{
    BlockRef, Change, ChangeList, ChangeOp, CommitRequest, DirListing, Entry, EntryKind, ErrorCode, Manifest, Me,
    RetentionInfo, Role, ServerInfo, UsageBreakdown,
};

use super::remote::{Remote, RemoteError, RemoteResult};

/// The kinds of call, to aim a fault at one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    Info,
    Me,
    Stat,
    List,
    Mkdir,
    Delete,
    Move,
    Manifest,
    Commit,
    PutBlock,
    GetBlock,
    Changes,
}

/// What an injected fault does to the call it hits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// No answer (connection refused); nothing changes.
    Unreachable,
    /// The call takes effect, then the answer is lost on the way back (a timeout after the
    /// server committed).
    AnswerLost,
    /// 409 `conflict`: someone else's change won; nothing changes.
    Conflict,
    /// 423 `locked`: a WebDAV lock guards the path; nothing changes.
    Locked,
    /// 413 `quota_exceeded`; nothing changes.
    Quota,
    /// 503 `store_unavailable` (or any 5xx); nothing changes.
    Server,
}

impl Fault {
    fn error(&self) -> RemoteError {
        match self {
            Fault::Unreachable | Fault::AnswerLost => RemoteError::Unreachable("connection refused (fake)".into()),
            Fault::Conflict => RemoteError::api(409, ErrorCode::Conflict, "changed on the server meanwhile (fake)"),
            Fault::Locked => RemoteError::api(423, ErrorCode::Locked, "locked by someone else (fake)"),
            Fault::Quota => RemoteError::api(413, ErrorCode::QuotaExceeded, "quota exceeded (fake)"),
            Fault::Server => RemoteError::api(503, ErrorCode::StoreUnavailable, "the store is unavailable (fake)"),
        }
    }
}

/// What the fake holds at a path, as a test compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Dir,
    File(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Node {
    parent: Option<i64>,
    name: String,
    dir: bool,
    version: Option<i64>,
    blocks: Vec<BlockRef>,
    size: u64,
    modified: i64,
    trashed: bool,
}

struct State {
    nodes: HashMap<i64, Node>,
    root: i64,
    next_id: i64,
    next_version: i64,
    blocks: HashMap<String, Bytes>,
    journal: Vec<Change>,
    next_seq: i64,
    /// A logical clock (seconds), so runs are reproducible.
    clock: i64,
    block_size: u64,
    unreachable: bool,
    latency: Duration,
    /// Every call yields to the runtime once before it is answered.
    yielding: bool,
    faults: HashMap<Call, VecDeque<Fault>>,
    calls: HashMap<Call, u64>,
    /// Paths (as `name_key`s of the whole path) someone else holds a lock on: writes there
    /// answer 423 until unlocked.
    locks: std::collections::HashSet<String>,
    /// The space is full: new blocks and commits answer 413 until room is made.
    full: bool,
    /// The scope (a file inside a share, or None) of every block call, in order.
    block_scopes: Vec<Option<String>>,
}

impl State {
    fn refuses(&self, path: &RemotePath) -> Res<()> {
        if self.locks.contains(&name_key(&path.to_string())) {
            return Err(Fault::Locked.error());
        }
        Ok(())
    }
}

/// The in-memory gateway. Clones share one state.
#[derive(Clone)]
pub struct FakeGateway {
    state: Arc<Mutex<State>>,
    changed: Arc<tokio::sync::Notify>,
}

type Res<T> = Result<T, RemoteError>;

fn not_found() -> RemoteError {
    RemoteError::api(404, ErrorCode::NotFound, "not found")
}

/// `2026-01-01T00:00:00Z` plus `secs`.
fn stamp(secs: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(1_767_225_600 + secs).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

impl State {
    fn tick(&mut self) -> i64 {
        self.clock += 1;
        self.clock
    }

    fn child(&self, parent: i64, name: &str) -> Option<i64> {
        let key = name_key(name);
        self.nodes
            .iter()
            .find(|(_, n)| n.parent == Some(parent) && !n.trashed && name_key(&n.name) == key)
            .map(|(id, _)| *id)
    }

    fn children(&self, parent: i64) -> Vec<i64> {
        let mut v: Vec<(String, i64)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.parent == Some(parent) && !n.trashed)
            .map(|(id, n)| (name_key(&n.name), *id))
            .collect();
        v.sort();
        v.into_iter().map(|(_, id)| id).collect()
    }

    /// The live node at `path` (a component under a file: not found, as the gateway answers).
    fn resolve(&self, path: &RemotePath) -> Res<i64> {
        let mut cur = self.root;
        for c in path.components() {
            if !self.nodes[&cur].dir {
                return Err(not_found());
            }
            cur = self.child(cur, c).ok_or_else(not_found)?;
        }
        Ok(cur)
    }

    fn path_of(&self, id: i64) -> RemotePath {
        let mut names = Vec::new();
        let mut cur = id;
        while let Some(p) = self.nodes[&cur].parent {
            names.push(self.nodes[&cur].name.clone());
            cur = p;
        }
        let mut path = RemotePath::root();
        for n in names.iter().rev() {
            path = path.join(n).unwrap_or_else(|_| RemotePath::root());
        }
        path
    }

    fn entry(&self, id: i64) -> Entry {
        let n = &self.nodes[&id];
        Entry {
            id,
            name: n.name.clone(),
            path: self.path_of(id).to_string(),
            kind: if n.dir { EntryKind::Dir } else { EntryKind::File },
            size: n.size,
            modified: stamp(n.modified),
            version: n.version,
        }
    }

    fn journal(&mut self, op: ChangeOp, id: i64, from: Option<String>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let at = stamp(self.clock);
        let n = &self.nodes[&id];
        let kind = if n.dir { EntryKind::Dir } else { EntryKind::File };
        let path = self.path_of(id).to_string();
        self.journal.push(Change { seq, op, path, from, kind, node_id: Some(id), at });
    }

    fn insert(&mut self, parent: i64, name: &str, dir: bool) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let modified = self.tick();
        self.nodes.insert(
            id,
            Node {
                parent: Some(parent),
                name: name.to_string(),
                dir,
                version: None,
                blocks: Vec::new(),
                size: 0,
                modified,
                trashed: false,
            },
        );
        id
    }

    /// The directory at `path`, creating what is missing (each one journaled as `mkdir`).
    /// Returns it and the ids walked through, root first.
    fn ensure_dir(&mut self, path: &RemotePath) -> Res<(i64, Vec<i64>)> {
        let mut cur = self.root;
        let mut walked = vec![cur];
        for c in path.components() {
            cur = match self.child(cur, c) {
                Some(id) if self.nodes[&id].dir => id,
                Some(_) => return Err(RemoteError::api(409, ErrorCode::NotADirectory, format!("`{c}` is a file"))),
                None => {
                    let id = self.insert(cur, c, true);
                    self.journal(ChangeOp::Mkdir, id, None);
                    id
                }
            };
            walked.push(cur);
        }
        Ok((cur, walked))
    }

    fn trash(&mut self, id: i64) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.trashed = true;
        }
        self.journal(ChangeOp::Delete, id, None);
    }

    fn commit(&mut self, path: &RemotePath, req: &CommitRequest) -> Res<Entry> {
        let (Some(parent), Some(name)) = (path.parent(), path.name()) else {
            return Err(RemoteError::api(409, ErrorCode::IsADirectory, "the root is a folder"));
        };
        for b in &req.blocks {
            match self.blocks.get(&b.hash) {
                None => {
                    return Err(RemoteError::api(
                        400,
                        ErrorCode::MissingBlocks,
                        format!("block {} not uploaded", b.hash),
                    ));
                }
                Some(d) if d.len() as u64 != b.size => {
                    return Err(RemoteError::api(
                        400,
                        ErrorCode::BadRequest,
                        format!("block {} has another size", b.hash),
                    ));
                }
                Some(_) => {}
            }
        }
        // The checks first: a refused commit changes nothing (not even missing parents).
        if let Ok(pid) = self.resolve(&parent)
            && let Some(ex) = self.child(pid, name)
        {
            let ex = &self.nodes[&ex];
            if ex.dir {
                return Err(RemoteError::api(409, ErrorCode::IsADirectory, format!("`{path}` is a folder")));
            }
            if !req.force && req.base_version != ex.version {
                return Err(RemoteError::api(409, ErrorCode::Conflict, format!("`{path}` changed on the server")));
            }
        } else if !req.force && req.base_version.is_some() {
            return Err(RemoteError::api(409, ErrorCode::Conflict, format!("`{path}` was deleted or moved")));
        }
        let (pid, _) = self.ensure_dir(&parent)?;
        let (id, op) = match self.child(pid, name) {
            Some(id) => (id, ChangeOp::Update),
            None => (self.insert(pid, name, false), ChangeOp::Create),
        };
        let version = self.next_version;
        self.next_version += 1;
        let modified = self.tick();
        let n = self.nodes.get_mut(&id).ok_or_else(not_found)?;
        n.version = Some(version);
        n.size = req.blocks.iter().map(|b| b.size).sum();
        n.blocks = req.blocks.clone();
        n.modified = modified;
        self.journal(op, id, None);
        Ok(self.entry(id))
    }

    fn move_node(&mut self, from: &RemotePath, to: &RemotePath, overwrite: bool) -> Res<Entry> {
        let (Some(to_parent), Some(to_name)) = (to.parent(), to.name()) else {
            return Err(RemoteError::api(400, ErrorCode::BadRequest, "cannot move onto the root"));
        };
        if from.is_root() {
            return Err(RemoteError::api(400, ErrorCode::BadRequest, "the root folder cannot be moved"));
        }
        let src = self.resolve(from)?;
        let from_canon = self.path_of(src).to_string();
        // Refusals before anything changes.
        if let Ok(pid) = self.resolve(&to_parent) {
            let mut cur = Some(pid);
            while let Some(c) = cur {
                if c == src {
                    return Err(RemoteError::api(
                        400,
                        ErrorCode::BadRequest,
                        format!("cannot move `{from}` into itself"),
                    ));
                }
                cur = self.nodes[&c].parent;
            }
            if let Some(ex) = self.child(pid, to_name).filter(|e| *e != src)
                && (!overwrite || self.nodes[&ex].dir || self.nodes[&src].dir)
            {
                return Err(RemoteError::api(409, ErrorCode::AlreadyExists, format!("`{to}` already exists")));
            }
        }
        let (pid, walked) = self.ensure_dir(&to_parent)?;
        if walked.contains(&src) {
            return Err(RemoteError::api(400, ErrorCode::BadRequest, format!("cannot move `{from}` into itself")));
        }
        if let Some(ex) = self.child(pid, to_name).filter(|e| *e != src) {
            self.trash(ex);
        }
        self.tick();
        let n = self.nodes.get_mut(&src).ok_or_else(not_found)?;
        n.parent = Some(pid);
        n.name = to_name.to_string();
        self.journal(ChangeOp::Move, src, Some(from_canon));
        Ok(self.entry(src))
    }

    fn content(&self, id: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for b in &self.nodes[&id].blocks {
            if let Some(d) = self.blocks.get(&b.hash) {
                out.extend_from_slice(d);
            }
        }
        out
    }

    fn put_content(&mut self, data: &[u8]) -> Vec<BlockRef> {
        data.chunks(self.block_size as usize)
            .map(|c| {
                let hash = blake3::hash(c).to_hex().to_string();
                self.blocks.insert(hash.clone(), Bytes::copy_from_slice(c));
                BlockRef { hash, size: c.len() as u64 }
            })
            .collect()
    }
}

impl FakeGateway {
    /// An empty space whose files are cut in blocks of `block_size` bytes.
    pub fn new(block_size: u64) -> Self {
        let mut nodes = HashMap::new();
        let root = 1;
        nodes.insert(
            root,
            Node {
                parent: None,
                name: String::new(),
                dir: true,
                version: None,
                blocks: Vec::new(),
                size: 0,
                modified: 0,
                trashed: false,
            },
        );
        Self {
            state: Arc::new(Mutex::new(State {
                nodes,
                root,
                next_id: 2,
                next_version: 1,
                blocks: HashMap::new(),
                journal: Vec::new(),
                next_seq: 1,
                clock: 0,
                block_size: block_size.max(1),
                unreachable: false,
                latency: Duration::ZERO,
                yielding: false,
                faults: HashMap::new(),
                calls: HashMap::new(),
                locks: Default::default(),
                full: false,
                block_scopes: Vec::new(),
            })),
            changed: Arc::new(tokio::sync::Notify::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    // ---- faults ----

    /// The gateway goes away (`true`: every call of this client fails unanswered) or comes back.
    /// Another device still reaches it.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.lock().unreachable = unreachable;
    }

    pub fn is_unreachable(&self) -> bool {
        self.lock().unreachable
    }

    /// Every call waits this long before it is answered (a slow network or server).
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Every call lets the runtime's other tasks run once before it is answered (`true`), as a
    /// real network call would, without a timer: on a single-threaded runtime the
    /// interleavings of the core's tasks (the uploader beside a call) stay reproducible.
    pub fn set_yielding(&self, yielding: bool) {
        self.lock().yielding = yielding;
    }

    /// The next call of kind `call` fails with `fault` (queued: several faults hit successive
    /// calls).
    pub fn fail_next(&self, call: Call, fault: Fault) {
        self.lock().faults.entry(call).or_default().push_back(fault);
    }

    /// Someone else locks (`true`) or unlocks the file at `path`: while locked, commits,
    /// deletes and moves there answer 423 `locked`.
    pub fn lock_path(&self, path: &str, locked: bool) {
        let key = name_key(path);
        let mut s = self.lock();
        if locked {
            s.locks.insert(key);
        } else {
            s.locks.remove(&key);
        }
    }

    /// The space fills up (`true`: new blocks and commits answer 413 `quota_exceeded`) or
    /// room is made.
    pub fn set_full(&self, full: bool) {
        self.lock().full = full;
    }

    /// Forgets every injected fault not yet used, locks and a full space, and the gateway is
    /// reachable again.
    pub fn clear_faults(&self) {
        let mut s = self.lock();
        s.faults.clear();
        s.locks.clear();
        s.full = false;
        s.unreachable = false;
        s.latency = Duration::ZERO;
    }

    /// The scope of every block call so far (see [`Remote::get_block`]), in order.
    pub fn block_scopes(&self) -> Vec<Option<String>> {
        self.lock().block_scopes.clone()
    }

    /// How many calls of kind `call` reached the gateway (failed ones included).
    pub fn calls(&self, call: Call) -> u64 {
        self.lock().calls.get(&call).copied().unwrap_or(0)
    }

    // ---- another device ----

    /// Another device saves `data` at `path` (parents created), whatever is there.
    pub fn other_write(&self, path: &str, data: &[u8]) -> RemoteResult<Entry> {
        let path = parse(path)?;
        let r = {
            let mut s = self.lock();
            let blocks = s.put_content(data);
            s.commit(&path, &CommitRequest { base_version: None, blocks, force: true })
        };
        self.changed.notify_waiters();
        r
    }

    /// Another device creates a folder (and its parents).
    pub fn other_mkdir(&self, path: &str) -> RemoteResult<Entry> {
        let path = parse(path)?;
        let r = {
            let mut s = self.lock();
            s.ensure_dir(&path).map(|(id, _)| s.entry(id))
        };
        self.changed.notify_waiters();
        r
    }

    /// Another device deletes a file or folder (to the trash).
    pub fn other_delete(&self, path: &str) -> RemoteResult<()> {
        let path = parse(path)?;
        let r = {
            let mut s = self.lock();
            s.resolve(&path).map(|id| s.trash(id))
        };
        self.changed.notify_waiters();
        r
    }

    /// Another device moves or renames (replacing a file at `to`).
    pub fn other_move(&self, from: &str, to: &str) -> RemoteResult<Entry> {
        let (from, to) = (parse(from)?, parse(to)?);
        let r = self.lock().move_node(&from, &to, true);
        self.changed.notify_waiters();
        r
    }

    // ---- what it holds ----

    /// Every live path (stored spelling) with what is there; the root is left out.
    pub fn tree(&self) -> BTreeMap<String, Item> {
        let s = self.lock();
        let mut out = BTreeMap::new();
        let mut stack = vec![s.root];
        while let Some(id) = stack.pop() {
            for c in s.children(id) {
                let item = if s.nodes[&c].dir { Item::Dir } else { Item::File(s.content(c)) };
                out.insert(s.path_of(c).to_string(), item);
                if s.nodes[&c].dir {
                    stack.push(c);
                }
            }
        }
        out
    }

    /// The content of the file at `path`.
    pub fn read(&self, path: &str) -> RemoteResult<Vec<u8>> {
        let path = parse(path)?;
        let s = self.lock();
        let id = s.resolve(&path)?;
        Ok(s.content(id))
    }

    /// The last change journaled (its seq), 0 if none.
    pub fn latest_change(&self) -> i64 {
        self.lock().next_seq - 1
    }

    /// Runs one call: counts it, waits out the latency, applies faults, then `f`.
    async fn call<T>(&self, call: Call, f: impl FnOnce(&mut State) -> Res<T>) -> Res<T> {
        let (latency, yielding) = {
            let mut s = self.lock();
            *s.calls.entry(call).or_default() += 1;
            (s.latency, s.yielding)
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        if yielding {
            tokio::task::yield_now().await;
        }
        let (r, notify) = {
            let mut s = self.lock();
            if s.unreachable {
                return Err(Fault::Unreachable.error());
            }
            let fault = s.faults.get_mut(&call).and_then(VecDeque::pop_front);
            match fault {
                Some(Fault::AnswerLost) => {
                    let before = s.next_seq;
                    let _ = f(&mut s);
                    (Err(Fault::AnswerLost.error()), s.next_seq != before)
                }
                Some(fault) => return Err(fault.error()),
                None => {
                    let before = s.next_seq;
                    let r = f(&mut s);
                    (r, s.next_seq != before)
                }
            }
        };
        if notify {
            self.changed.notify_waiters();
        }
        r
    }
}

fn parse(path: &str) -> RemoteResult<RemotePath> {
    RemotePath::parse(path).map_err(|e| RemoteError::api(400, ErrorCode::InvalidPath, e.to_string()))
}

impl Remote for FakeGateway {
    fn info(&self) -> BoxFuture<'_, RemoteResult<ServerInfo>> {
        Box::pin(self.call(Call::Info, |s| {
            Ok(ServerInfo {
                version: "fake".into(),
                block_size: s.block_size,
                version_retention: "forever".into(),
                trash_retention: "forever".into(),
                retention: RetentionInfo { versions: "forever".into(), trash: "forever".into(), trash_secs: None },
            })
        }))
    }

    fn me(&self) -> BoxFuture<'_, RemoteResult<Me>> {
        Box::pin(self.call(Call::Me, |s| {
            let current: u64 = s.nodes.values().filter(|n| !n.trashed && !n.dir).map(|n| n.size).sum();
            Ok(Me {
                id: 1,
                username: "fake".into(),
                role: Role::User,
                quota_bytes: None,
                used_bytes: current,
                usage: UsageBreakdown { current, ..Default::default() },
                totp: false,
                source: Default::default(),
                totp_setup_required: false,
                totp_required: false,
                email: None,
                display_name: None,
            })
        }))
    }

    fn stat<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(self.call(Call::Stat, move |s| s.resolve(path).map(|id| s.entry(id))))
    }

    fn list_dir_page<'a>(
        &'a self,
        path: &'a RemotePath,
        cursor: Option<&'a str>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<DirListing>> {
        Box::pin(self.call(Call::List, move |s| {
            let id = s.resolve(path)?;
            if !s.nodes[&id].dir {
                return Err(RemoteError::api(409, ErrorCode::NotADirectory, format!("`{path}` is a file")));
            }
            let limit = limit.unwrap_or(1000).clamp(1, 1000) as usize;
            let after: Vec<i64> = s
                .children(id)
                .into_iter()
                .filter(|c| cursor.is_none_or(|k| name_key(&s.nodes[c].name).as_str() > k))
                .collect();
            let more = after.len() > limit;
            let entries: Vec<Entry> = after.into_iter().take(limit).map(|c| s.entry(c)).collect();
            let next_cursor = if more { entries.last().map(|e| name_key(&e.name)) } else { None };
            Ok(DirListing { entries, next_cursor })
        }))
    }

    fn mkdir<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(self.call(Call::Mkdir, move |s| s.ensure_dir(path).map(|(id, _)| s.entry(id))))
    }

    fn delete<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<()>> {
        Box::pin(self.call(Call::Delete, move |s| {
            if path.is_root() {
                return Err(RemoteError::api(400, ErrorCode::BadRequest, "the root folder cannot be deleted"));
            }
            s.refuses(path)?;
            let id = s.resolve(path)?;
            s.tick();
            s.trash(id);
            Ok(())
        }))
    }

    fn move_entry<'a>(
        &'a self,
        from: &'a RemotePath,
        to: &'a RemotePath,
        overwrite: bool,
    ) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(self.call(Call::Move, move |s| {
            s.refuses(from)?;
            s.refuses(to)?;
            s.move_node(from, to, overwrite)
        }))
    }

    fn get_manifest<'a>(&'a self, path: &'a RemotePath) -> BoxFuture<'a, RemoteResult<Manifest>> {
        Box::pin(self.call(Call::Manifest, move |s| {
            let id = s.resolve(path)?;
            let n = &s.nodes[&id];
            if n.dir {
                return Err(RemoteError::api(409, ErrorCode::IsADirectory, format!("`{path}` is a folder")));
            }
            Ok(Manifest {
                path: s.path_of(id).to_string(),
                version: n.version.ok_or_else(not_found)?,
                size: n.size,
                block_size: s.block_size,
                modified: stamp(n.modified),
                blocks: n.blocks.clone(),
            })
        }))
    }

    fn commit_manifest<'a>(
        &'a self,
        path: &'a RemotePath,
        commit: &'a CommitRequest,
    ) -> BoxFuture<'a, RemoteResult<Entry>> {
        Box::pin(self.call(Call::Commit, move |s| {
            if s.full {
                return Err(Fault::Quota.error());
            }
            s.refuses(path)?;
            s.commit(path, commit)
        }))
    }

    fn put_block<'a>(
        &'a self,
        hash: &'a str,
        data: Bytes,
        scope: Option<&'a RemotePath>,
    ) -> BoxFuture<'a, RemoteResult<bool>> {
        Box::pin(self.call(Call::PutBlock, move |s| {
            s.block_scopes.push(scope.map(|p| p.to_string()));
            if data.len() as u64 > s.block_size {
                return Err(RemoteError::api(413, ErrorCode::PayloadTooLarge, "block larger than the block size"));
            }
            if blake3::hash(&data).to_hex().as_str() != hash {
                return Err(RemoteError::api(400, ErrorCode::HashMismatch, "the body does not match the hash"));
            }
            if s.full && !s.blocks.contains_key(hash) {
                return Err(Fault::Quota.error());
            }
            Ok(s.blocks.insert(hash.to_string(), data).is_none())
        }))
    }

    fn get_block<'a>(&'a self, hash: &'a str, scope: Option<&'a RemotePath>) -> BoxFuture<'a, RemoteResult<Bytes>> {
        Box::pin(self.call(Call::GetBlock, move |s| {
            s.block_scopes.push(scope.map(|p| p.to_string()));
            s.blocks.get(hash).cloned().ok_or_else(not_found)
        }))
    }

    fn changes<'a>(
        &'a self,
        cursor: Option<&'a str>,
        wait_secs: u32,
        limit: Option<u32>,
    ) -> BoxFuture<'a, RemoteResult<ChangeList>> {
        Box::pin(async move {
            let after = match cursor {
                None => None,
                Some(c) => Some(
                    c.parse::<i64>()
                        .ok()
                        .filter(|c| *c >= 0)
                        .ok_or_else(|| RemoteError::api(400, ErrorCode::BadRequest, "bad cursor"))?,
                ),
            };
            let limit = limit.unwrap_or(1000).clamp(1, 1000) as usize;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(wait_secs));
            loop {
                // Registered before looking, so a change committed in between wakes it.
                let changed = self.changed.notified();
                let list = self
                    .call(Call::Changes, |s| {
                        let latest = s.next_seq - 1;
                        Ok(match after {
                            None => ChangeList { changes: Vec::new(), cursor: latest.to_string(), reset: false },
                            Some(c) if c > latest => {
                                ChangeList { changes: Vec::new(), cursor: latest.to_string(), reset: true }
                            }
                            Some(c) => {
                                let changes: Vec<Change> =
                                    s.journal.iter().filter(|x| x.seq > c).take(limit).cloned().collect();
                                let cursor = changes.last().map_or(c, |x| x.seq).to_string();
                                ChangeList { changes, cursor, reset: false }
                            }
                        })
                    })
                    .await?;
                if after.is_none() || list.reset || !list.changes.is_empty() {
                    return Ok(list);
                }
                if tokio::time::timeout_at(deadline, changed).await.is_err() {
                    return Ok(list);
                }
            }
        })
    }
}
