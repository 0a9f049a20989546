//! The inode table: what the mount knows of the space's namespace. Inode numbers are the
//! core's own (stable across renames: a node keeps its number when it moves); the gateway's
//! node id maps to them. Names are matched by the gateway's case-insensitive key and shown
//! in their stored spelling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use nimbus_proto::names::{RemotePath, name_key};
use nimbus_proto::wire::{Entry, EntryKind};

use super::dirty::{Journal, Staged};
use super::types::{Attr, Ino, Kind, ROOT, VfsError, VfsResult};

/// A file version's blocks, hashes parsed.
#[derive(Debug)]
pub struct Content {
    pub version: i64,
    pub size: u64,
    pub block_size: u64,
    pub blocks: Vec<([u8; 32], u64)>,
}

#[derive(Default)]
pub struct DirState {
    pub children: HashMap<String, Ino>,
    /// Every child is in `children` (a full listing was read and nothing changed since).
    pub complete: bool,
    /// Bumped by every invalidation, so a listing that raced one isn't marked complete.
    pub generation: u64,
    /// Names known not to exist (cleared with the listing).
    pub negative: HashMap<String, Instant>,
}

/// One file or directory the mount knows of.
///
/// Fields that must agree with other state are private and change only through methods that
/// keep them so: the place in the namespace (parent, name, gateway id, unlinked) only through
/// [`Tree`], which keeps each parent's children and the id index in step; the staging copy
/// and its journal record together; the handle counts; and the shown size and time, which
/// while a staging copy exists are the copy's, never the server's.
pub struct Node {
    parent: Ino,
    name: String,
    pub kind: Kind,
    size: u64,
    mtime: SystemTime,
    pub version: Option<i64>,
    remote_id: Option<i64>,
    pub readonly: bool,
    /// When the attributes last came from the gateway; `None` once invalidated.
    pub fetched: Option<Instant>,
    pub dir: DirState,
    pub content: Option<Arc<Content>>,
    staged: Option<(Arc<tokio::sync::Mutex<Staged>>, Arc<Journal>)>,
    /// Bumped whenever this mount starts changing the file: handles opened before then stop
    /// reading the version they opened.
    local_changes: u64,
    open: u32,
    writers: u32,
    /// Removed from the namespace while still open (POSIX unlink-while-open).
    unlinked: bool,
    /// The version whose pages the kernel may still cache.
    pub kernel_version: Option<i64>,
    /// Windows delete-on-close: removed when its last handle closes.
    delete_pending: bool,
    /// A modification time set by a program (utimens), shown instead of the server's while
    /// the content stays the same version.
    mtime_override: Option<SystemTime>,
    /// When this mount last changed the node's status (see [`Attr::ctime`]); `None`: never,
    /// the ctime is the mtime.
    status_changed: Option<SystemTime>,
}

/// What the end of a handle means for its node.
#[derive(Debug, Clone, Copy)]
pub struct Closed {
    /// No handle is left.
    pub last: bool,
    /// No handle open for writing is left.
    pub last_writer: bool,
    /// The last handle of a file marked delete-on-close: it goes now.
    pub delete: bool,
}

impl Node {
    fn new(parent: Ino, name: String, kind: Kind) -> Self {
        Self {
            parent,
            name,
            kind,
            size: 0,
            mtime: SystemTime::now(),
            version: None,
            remote_id: None,
            readonly: false,
            fetched: None,
            dir: DirState::default(),
            content: None,
            staged: None,
            local_changes: 0,
            open: 0,
            writers: 0,
            unlinked: false,
            kernel_version: None,
            delete_pending: false,
            mtime_override: None,
            status_changed: None,
        }
    }

    pub fn attr(&self, ino: Ino) -> Attr {
        Attr {
            ino,
            kind: self.kind,
            size: self.size,
            mtime: self.mtime,
            ctime: self.status_changed.map_or(self.mtime, |c| c.max(self.mtime)),
            readonly: self.readonly,
            unlinked: self.unlinked,
        }
    }

    pub fn parent(&self) -> Ino {
        self.parent
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The gateway's id of this node; `None` until it exists there (and once it left the
    /// namespace).
    pub fn remote_id(&self) -> Option<i64> {
        self.remote_id
    }

    /// Left the namespace (deleted or replaced) while the kernel or a handle still knows it.
    pub fn is_unlinked(&self) -> bool {
        self.unlinked
    }

    // ---- write-back staging ----

    /// The staging copy of a file with changes not committed yet.
    pub fn staged(&self) -> Option<Arc<tokio::sync::Mutex<Staged>>> {
        self.staged.as_ref().map(|(s, _)| s.clone())
    }

    pub fn is_staged(&self) -> bool {
        self.staged.is_some()
    }

    /// Changes go to `area` from now on; the file shows its size.
    pub fn start_staging(&mut self, area: Arc<tokio::sync::Mutex<Staged>>, journal: Arc<Journal>, size: u64) {
        if self.unlinked {
            // Never journal a file that is no longer in the namespace.
            journal.unlink();
        }
        self.staged = Some((area, journal));
        self.local_changes += 1;
        self.size = size;
    }

    /// How many times this mount started changing the file.
    pub fn local_changes(&self) -> u64 {
        self.local_changes
    }

    /// Drops the staging copy (committed, or no longer wanted); the caller discards it.
    pub fn end_staging(&mut self) -> Option<Arc<tokio::sync::Mutex<Staged>>> {
        self.staged.take().map(|(s, _)| s)
    }

    /// This mount's commit of `version` (`content`) landed. Without a writer left the staging
    /// copy ends (`true`: the caller discards it); otherwise it stays, now based on `version`.
    pub fn committed(&mut self, version: Option<i64>, content: Arc<Content>) -> bool {
        self.content = Some(content);
        // Our own new version: a time set on it (utimens after close) stays.
        self.version = version;
        self.kernel_version = None;
        if self.writers == 0 {
            self.staged = None;
            true
        } else {
            false
        }
    }

    /// This mount's commit lost to another device's change: its content went to a conflict
    /// copy (the caller discarded the staging copy), and the file is the other version now.
    pub fn lost_to_conflict(&mut self) {
        self.staged = None;
        self.content = None;
        self.fetched = None;
        self.kernel_version = None;
    }

    // ---- what getattr shows ----

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Content changed here (a write or a truncation): the new size, modified now.
    pub fn changed_locally(&mut self, size: u64) {
        self.size = size;
        self.mtime = SystemTime::now();
        self.mtime_override = None;
        self.status_changed = Some(self.mtime);
    }

    /// Its name, links or attributes changed here (rename, unlink, chmod): the ctime moves,
    /// the mtime stays.
    pub fn status_changed(&mut self, now: SystemTime) {
        self.status_changed = Some(now);
    }

    /// An entry was created, removed or renamed in this directory: its mtime and ctime are
    /// `now`. Kept (as a time set by a program is) over the gateway's, which does not move a
    /// folder's time when its entries change.
    pub fn entries_changed(&mut self, now: SystemTime) {
        self.mtime = now;
        self.mtime_override = Some(now);
        self.status_changed = Some(now);
    }

    /// The staging copy was truncated to `size` by an open.
    pub fn staged_size(&mut self, size: u64) {
        self.size = size;
    }

    /// A modification time set by a program; kept while the content stays this version.
    pub fn set_mtime(&mut self, m: SystemTime) {
        self.mtime = m;
        self.mtime_override = Some(m);
        self.status_changed = Some(SystemTime::now());
    }

    /// The gateway's attributes of version `version` (a manifest or a listing), unless
    /// local changes are pending: those are what the file shows until they are committed.
    fn seen_version(&mut self, version: Option<i64>, size: u64, modified: SystemTime) {
        if self.staged.is_some() {
            return;
        }
        self.mtime = match self.mtime_override {
            Some(m) if self.version == version => m,
            _ => {
                self.mtime_override = None;
                modified
            }
        };
        self.size = size;
        self.version = version;
    }

    /// A manifest fetched from the gateway.
    pub fn seen_manifest(&mut self, content: Arc<Content>, modified: SystemTime) {
        if self.staged.is_none() {
            self.seen_version(Some(content.version), content.size, modified);
            self.fetched = Some(Instant::now());
        }
        self.content = Some(content);
    }

    /// Forgets the attributes fetched from the gateway (a change makes them stale); a file
    /// with local changes keeps showing those.
    pub fn forget_attrs(&mut self) {
        if self.staged.is_none() {
            self.fetched = None;
        }
    }

    // ---- handles ----

    pub fn open_handles(&self) -> u32 {
        self.open
    }

    pub fn writers(&self) -> u32 {
        self.writers
    }

    pub fn delete_pending(&self) -> bool {
        self.delete_pending
    }

    pub fn set_delete_pending(&mut self, delete: bool) {
        self.delete_pending = delete;
    }

    /// A handle opened (`write`: for writing; `delete_on_close`: the file goes at its last
    /// close).
    pub fn opened(&mut self, write: bool, delete_on_close: bool) {
        self.open += 1;
        if write {
            self.writers += 1;
        }
        self.delete_pending |= delete_on_close;
    }

    /// A handle closed.
    pub fn closed(&mut self, write: bool) -> Closed {
        self.open = self.open.saturating_sub(1);
        if write {
            self.writers = self.writers.saturating_sub(1);
        }
        Closed { last: self.open == 0, last_writer: self.writers == 0, delete: self.delete_pending && self.open == 0 }
    }
}

pub struct Tree {
    pub nodes: HashMap<Ino, Node>,
    by_remote: HashMap<i64, Ino>,
    next: Ino,
}

pub fn parse_time(s: &str) -> SystemTime {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map(SystemTime::from)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

impl Default for Tree {
    fn default() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::new(ROOT, String::new(), Kind::Dir));
        Self { nodes, by_remote: HashMap::new(), next: ROOT + 1 }
    }
}

impl Tree {
    pub fn get(&self, ino: Ino) -> VfsResult<&Node> {
        self.nodes.get(&ino).ok_or(VfsError::NotFound)
    }

    pub fn get_mut(&mut self, ino: Ino) -> VfsResult<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(VfsError::NotFound)
    }

    /// The node's path in the space.
    pub fn path(&self, ino: Ino) -> VfsResult<RemotePath> {
        let mut names = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            let n = self.get(cur)?;
            if n.unlinked {
                return Err(VfsError::NotFound);
            }
            names.push(n.name.as_str());
            cur = n.parent;
            if names.len() > 4096 {
                return Err(VfsError::Io("inode table loop".into()));
            }
        }
        let mut p = RemotePath::root();
        for name in names.iter().rev() {
            p = p.join(name)?;
        }
        Ok(p)
    }

    pub fn child(&self, parent: Ino, name: &str) -> Option<Ino> {
        self.nodes.get(&parent)?.dir.children.get(&name_key(name)).copied()
    }

    /// The node at `path` if every component is known (no network).
    pub fn find(&self, path: &str) -> Option<Ino> {
        let mut cur = ROOT;
        for c in path.split('/').filter(|c| !c.is_empty()) {
            cur = self.child(cur, c)?;
        }
        Some(cur)
    }

    pub fn alloc(&mut self, parent: Ino, name: &str, kind: Kind) -> Ino {
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(ino, Node::new(parent, name.to_string(), kind));
        self.attach(ino, parent, name);
        ino
    }

    /// Links `ino` under `parent` as `name`, unlinking whatever other node had that name.
    pub fn attach(&mut self, ino: Ino, parent: Ino, name: &str) {
        let key = name_key(name);
        let replaced = self.nodes.get_mut(&parent).and_then(|p| {
            p.dir.negative.remove(&key);
            p.dir.children.insert(key, ino)
        });
        if let Some(old) = replaced.filter(|o| *o != ino) {
            self.orphan(old);
        }
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.parent = parent;
            n.name = name.to_string();
        }
    }

    /// Removes `ino` from its parent's children.
    pub fn detach(&mut self, ino: Ino) {
        let Some(n) = self.nodes.get(&ino) else { return };
        let (parent, key) = (n.parent, name_key(&n.name));
        if let Some(p) = self.nodes.get_mut(&parent)
            && p.dir.children.get(&key) == Some(&ino)
        {
            p.dir.children.remove(&key);
        }
    }

    /// A node that left the namespace (deleted or replaced): kept while the kernel or a
    /// handle may still refer to it, but no longer reachable by path.
    pub fn orphan(&mut self, ino: Ino) {
        self.detach(ino);
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.unlinked = true;
            n.fetched = None;
            // Its link count dropped.
            n.status_changed = Some(SystemTime::now());
            if let Some((_, journal)) = &n.staged {
                // Its handles keep the staging copy; the record goes, or a crash would bring
                // the file back.
                journal.unlink();
            }
            if let Some(id) = n.remote_id.take() {
                self.by_remote.remove(&id);
            }
        }
    }

    /// Not where the cache had it (the gateway has no such name there, or another node under
    /// it): deleted, or moved by another device. Out of the namespace like an orphan, but its
    /// gateway id stays known, so the entry found at its new place brings it back with its
    /// inode number.
    pub fn lost(&mut self, ino: Ino) {
        self.detach(ino);
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.unlinked = true;
            n.fetched = None;
        }
    }

    /// Takes `ino` out of the namespace (deleted, or replaced by a rename). Returns its
    /// staging copy if nobody has the file open any more: the caller discards it. Otherwise
    /// the open handles keep it until the last one closes.
    pub fn remove(&mut self, ino: Ino) -> Option<Arc<tokio::sync::Mutex<Staged>>> {
        self.orphan(ino);
        let n = self.nodes.get_mut(&ino)?;
        if n.open == 0 { n.end_staging() } else { None }
    }

    /// Moves `src` to `name` under `parent`, taking `replaced` out of the namespace (see
    /// [`Tree::remove`] for what is returned), and records the gateway's entry of the moved
    /// node if it has one.
    pub fn rename(
        &mut self,
        src: Ino,
        parent: Ino,
        name: &str,
        replaced: Option<Ino>,
        entry: Option<&Entry>,
    ) -> Option<Arc<tokio::sync::Mutex<Staged>>> {
        self.detach(src);
        let gone = replaced.and_then(|r| self.remove(r));
        self.attach(src, parent, name);
        if let Some(e) = entry {
            self.upsert(parent, e);
        }
        gone
    }

    /// Whether the directory holds something the gateway does not have yet: a file or folder
    /// made here and not uploaded, or a file with changes not committed.
    pub fn has_local_children(&self, dir: Ino) -> bool {
        self.nodes.get(&dir).is_some_and(|d| {
            d.dir.children.values().any(|c| {
                self.nodes.get(c).is_some_and(|n| !n.unlinked && (n.remote_id.is_none() || n.staged.is_some()))
            })
        })
    }

    /// Whether a folder above `ino` left the namespace (deleted, or moved away by another
    /// device) while `ino` itself did not: it has no path any more, yet is not unlinked.
    pub fn folder_gone(&self, ino: Ino) -> bool {
        let Some(n) = self.nodes.get(&ino) else { return false };
        if n.unlinked {
            return false;
        }
        let mut cur = n.parent;
        for _ in 0..4096 {
            if cur == ROOT {
                return false;
            }
            match self.nodes.get(&cur) {
                Some(p) if !p.unlinked => cur = p.parent,
                _ => return true,
            }
        }
        false
    }

    /// Whether `ino` is `ancestor` or below it.
    pub fn is_within(&self, ino: Ino, ancestor: Ino) -> bool {
        let mut cur = ino;
        for _ in 0..4096 {
            if cur == ancestor {
                return true;
            }
            match self.nodes.get(&cur) {
                Some(n) if cur != ROOT => cur = n.parent,
                _ => return false,
            }
        }
        false
    }

    /// Every node at or below `ino` with a staging copy.
    pub fn staged_under(&self, ino: Ino) -> Vec<Ino> {
        let mut found = Vec::new();
        let mut stack = vec![ino];
        while let Some(i) = stack.pop() {
            if let Some(n) = self.nodes.get(&i) {
                if n.staged.is_some() {
                    found.push(i);
                }
                stack.extend(n.dir.children.values().copied());
            }
        }
        found
    }

    /// Records a gateway entry found under `parent`; returns its inode.
    pub fn upsert(&mut self, parent: Ino, e: &Entry) -> Ino {
        let kind = match e.kind {
            EntryKind::Dir => Kind::Dir,
            EntryKind::File => Kind::File,
        };
        let ino = match self.by_remote.get(&e.id).copied() {
            Some(ino) if self.nodes.get(&ino).is_some_and(|n| n.kind == kind) => {
                let (old_parent, old_name) = match self.nodes.get(&ino) {
                    Some(n) => (n.parent, n.name.clone()),
                    None => (parent, e.name.clone()),
                };
                if old_parent != parent || old_name != e.name {
                    self.detach(ino);
                    self.attach(ino, parent, &e.name);
                }
                ino
            }
            _ => match self.child(parent, &e.name) {
                // A local node of that name not yet known to the gateway (just created here).
                Some(ino) if self.nodes.get(&ino).is_some_and(|n| n.kind == kind && n.remote_id.is_none()) => {
                    if let Some(n) = self.nodes.get_mut(&ino) {
                        n.name = e.name.clone();
                    }
                    ino
                }
                _ => self.alloc(parent, &e.name, kind),
            },
        };
        self.by_remote.insert(e.id, ino);
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.remote_id = Some(e.id);
            n.unlinked = false;
            n.fetched = Some(Instant::now());
            if n.staged.is_none() {
                n.seen_version(e.version, e.size, parse_time(&e.modified));
                if n.content.as_ref().is_some_and(|c| Some(c.version) != e.version) {
                    n.content = None;
                }
            }
        }
        ino
    }

    /// Entries of these directories were created, removed or renamed (see
    /// [`Node::entries_changed`]); one directory given twice (a rename within it) changes once.
    pub fn entries_changed(&mut self, dirs: &[Ino]) {
        let now = SystemTime::now();
        for d in dirs {
            if let Some(n) = self.nodes.get_mut(d) {
                n.entries_changed(now);
            }
        }
    }

    /// Forgets what is cached about a directory's listing.
    pub fn invalidate_dir(&mut self, ino: Ino) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.dir.complete = false;
            n.dir.generation += 1;
            n.dir.negative.clear();
        }
    }
}
