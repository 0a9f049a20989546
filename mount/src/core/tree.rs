//! The inode table: what the mount knows of the space's namespace. Inode numbers are the
//! core's own (stable across renames: a node keeps its number when it moves); the gateway's
//! node id maps to them. Names are matched by the gateway's case-insensitive key and shown
//! in their stored spelling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use nimbus_proto::names::{RemotePath, name_key};
use nimbus_proto::wire::{Entry, EntryKind};

use super::dirty::Staged;
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

pub struct Node {
    pub parent: Ino,
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    pub version: Option<i64>,
    pub remote_id: Option<i64>,
    pub readonly: bool,
    /// When the attributes last came from the gateway; `None` once invalidated.
    pub fetched: Option<Instant>,
    pub dir: DirState,
    pub content: Option<Arc<Content>>,
    pub staged: Option<Arc<tokio::sync::Mutex<Staged>>>,
    pub open: u32,
    pub writers: u32,
    /// Removed from the namespace while still open (POSIX unlink-while-open).
    pub unlinked: bool,
    /// The version whose pages the kernel may still cache.
    pub kernel_version: Option<i64>,
    /// Windows delete-on-close: removed when its last handle closes.
    pub delete_pending: bool,
    /// A modification time set by a program (utimens), shown instead of the server's while
    /// the content stays the same version.
    pub mtime_override: Option<SystemTime>,
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
            open: 0,
            writers: 0,
            unlinked: false,
            kernel_version: None,
            delete_pending: false,
            mtime_override: None,
        }
    }

    pub fn attr(&self, ino: Ino) -> Attr {
        Attr { ino, kind: self.kind, size: self.size, mtime: self.mtime, readonly: self.readonly }
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
            if let Some(id) = n.remote_id.take() {
                self.by_remote.remove(&id);
            }
        }
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
                n.size = e.size;
                n.mtime = match n.mtime_override {
                    Some(m) if n.version == e.version => m,
                    _ => {
                        n.mtime_override = None;
                        parse_time(&e.modified)
                    }
                };
                n.version = e.version;
                if n.content.as_ref().is_some_and(|c| Some(c.version) != e.version) {
                    n.content = None;
                }
            }
        }
        ino
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
