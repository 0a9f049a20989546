//! dav-server's `DavFileSystem` over one user's space: metadata and listings from the
//! metadata database, reads through the block cache (`space::open_range`), writes streamed
//! into `space::put_stream` and committed only when the whole body has arrived.
//!
//! One `SpaceFs` is built per request: it carries the space, the lock tokens the request holds
//! (checked again by the metadata layer on every change) and what the request deletes.

use std::collections::{HashMap, VecDeque};
use std::io::SeekFrom;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use bytes::{Buf, Bytes};
use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavFileSystem, DavMetaData, DavProp, FsError, FsFuture, FsStream, OpenOptions, ReadDirMeta,
};
use futures::{FutureExt, Stream, StreamExt};
use nimbus_proto::RemotePath;
use nimbus_proto::names::{SHARED_WITH_ME, is_shared_with_me, name_key};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::access::{self, Place, Want};
use crate::cache::CacheMode;
use crate::error::ApiError;
use crate::meta::{Base, ChildRow, CommitSpec, LockTokens, MetaError, NodeRow, PropPatch, PropRow, SpaceId, lock_key};
use crate::space::across::{self, End};
use crate::space::{self, PutOptions};
use crate::state::AppState;

/// Chunks of a PUT body queued between the request and the upload task.
const PUT_QUEUE: usize = 8;
/// Largest window one read stream covers; reads open the next window when one is used up, so
/// a ranged GET fetches only the blocks its range touches.
const MAX_READ_WINDOW: u64 = 64 * 1024 * 1024;

/// Lock tokens a request holds: those it sent (If header) and any lock it just took.
pub type Held = Arc<Mutex<Vec<String>>>;

pub fn held_tokens(held: &Held) -> Vec<String> {
    held.lock().map(|v| v.clone()).unwrap_or_else(|p| p.into_inner().clone())
}

#[derive(Clone)]
pub struct SpaceFs {
    pub st: AppState,
    pub space: SpaceId,
    /// The caller's name, for the audit of what they do through shares.
    pub username: String,
    pub device: String,
    /// The client's address, for the audit log.
    pub ip: Option<std::net::IpAddr>,
    /// Signs the caller in again as this request did: an upload checks, before it commits,
    /// that the caller may still write where it began (see `access::still_writable`).
    pub again: Arc<dyn Fn() -> access::SignInAgain + Send + Sync>,
    pub held: Held,
    /// The top of what this request deletes (DELETE: its path; COPY/MOVE: the destination it
    /// replaces). dav-server deletes a tree leaf by leaf; we put the whole tree in the trash
    /// as one item when it reaches the top, so a folder can be restored as it was.
    pub delete_root: Option<RemotePath>,
    /// MOVE/COPY source: a destination that is the source itself in another case is never
    /// deleted first (that would trash the source of a case-only rename).
    pub source: Option<RemotePath>,
    /// A LOCK request: the only one whose non-truncating open may create an empty file.
    pub lock_request: bool,
    /// The space's used bytes, read once per request (see [`NodeMeta::len`]).
    pub space_used: Arc<OnceLock<u64>>,
    /// The page of the folder a PROPFIND is listing: which children have dead properties.
    pub hints: Arc<Mutex<Hints>>,
}

/// What a listing knows about the children of the page it last read (one page: bounded).
#[derive(Debug, Default)]
pub struct Hints {
    /// [`lock_key`] of the folder listed (as the caller named it).
    dir_key: String,
    /// The space its children are in (the caller's, or a share's owner's).
    space: Option<SpaceId>,
    /// By name key.
    children: HashMap<String, Hint>,
}

#[derive(Debug, Clone, Copy)]
struct Hint {
    node: i64,
    has_props: bool,
}

/// Children of a folder read a page at a time from the metadata database.
const LIST_PAGE: i64 = 1000;

/// The state of a [`SpaceFs::read_dir`] stream.
struct DirPager {
    st: AppState,
    space: SpaceId,
    /// At the top of the caller's space: a folder named like `Shared with me` is hidden
    /// behind the virtual one.
    top: bool,
    dir: i64,
    dir_key: String,
    used: u64,
    /// The name key of the last child read.
    after: Option<String>,
    buf: VecDeque<ChildRow>,
    done: bool,
    hints: Arc<Mutex<Hints>>,
}

impl DirPager {
    async fn next(mut self) -> Option<(Result<Box<dyn DavDirEntry>, FsError>, DirPager)> {
        if self.buf.is_empty() && !self.done {
            match self.st.meta.list_children(self.space, self.dir, self.after.as_deref(), LIST_PAGE).await {
                Ok(mut rows) => {
                    self.done = (rows.len() as i64) < LIST_PAGE;
                    self.after = rows.last().map(|r| name_key(&r.node.name));
                    if self.top {
                        rows.retain(|r| !is_shared_with_me(&r.node.name));
                    }
                    let mut hints = self.hints.lock().unwrap_or_else(|p| p.into_inner());
                    hints.dir_key.clone_from(&self.dir_key);
                    hints.space = Some(self.space);
                    hints.children = rows
                        .iter()
                        .map(|r| (name_key(&r.node.name), Hint { node: r.node.id, has_props: r.has_props }))
                        .collect();
                    drop(hints);
                    self.buf.extend(rows);
                }
                Err(e) => {
                    // dav-server skips a failed entry and asks again: end the listing there.
                    self.done = true;
                    return Some((Err(meta_error(e)), self));
                }
            }
        }
        let row = self.buf.pop_front()?.node;
        let entry = Entry { meta: NodeMeta::of(&row, self.used), name: row.name };
        Some((Ok(Box::new(entry) as Box<dyn DavDirEntry>), self))
    }
}

/// The space path of a dav-server path (already decoded and checked once by the door; the
/// shared name rules decide again here, so no other spelling can reach the namespace).
pub fn remote(path: &DavPath) -> Result<RemotePath, FsError> {
    let s = std::str::from_utf8(path.as_bytes()).map_err(|_| FsError::NotFound)?;
    RemotePath::parse(s).map_err(|_| FsError::Forbidden)
}

pub fn fs_error(e: ApiError) -> FsError {
    match e {
        ApiError::NotFound(_) => FsError::NotFound,
        ApiError::AlreadyExists(_) => FsError::Exists,
        ApiError::QuotaExceeded(_) => FsError::InsufficientStorage,
        ApiError::PayloadTooLarge(_) => FsError::TooLarge,
        ApiError::InvalidName(_) | ApiError::BadRequest(_) => FsError::Forbidden,
        ApiError::NotADirectory(_) | ApiError::IsADirectory(_) | ApiError::Conflict(_) => FsError::Forbidden,
        // dav-server has no "locked" file-system error; its own lock check (the same table)
        // answers 423 before we get here, so this only happens in a race.
        ApiError::Locked(_) | ApiError::Forbidden(_) => FsError::Forbidden,
        ApiError::PreconditionFailed(_) => FsError::Exists,
        other => {
            tracing::error!(error = %other, "WebDAV file-system operation failed");
            FsError::GeneralFailure
        }
    }
}

fn meta_error(e: MetaError) -> FsError {
    fs_error(e.into())
}

/// A folder that is no node of any space: `Shared with me`, and the entries in it.
fn virtual_row(name: &str, kind: &str, id: i64, size: i64, modified_at: i64) -> NodeRow {
    NodeRow {
        id,
        space_id: 0,
        parent_id: None,
        name: name.to_string(),
        kind: kind.to_string(),
        size,
        version_id: None,
        created_at: modified_at,
        modified_at,
    }
}

fn virtual_dir(name: &str) -> Entry {
    Entry { meta: NodeMeta::of(&virtual_row(name, "dir", 0, 0, 0), 0), name: name.to_string() }
}

fn ms_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

#[derive(Debug, Clone)]
pub struct NodeMeta {
    is_dir: bool,
    size: u64,
    modified: i64,
    created: i64,
    version: Option<i64>,
}

impl NodeMeta {
    /// `space_used` stands in for a folder's size: see [`NodeMeta::len`].
    fn of(n: &NodeRow, space_used: u64) -> NodeMeta {
        NodeMeta {
            is_dir: n.is_dir(),
            size: if n.is_dir() { space_used } else { n.size.max(0) as u64 },
            modified: n.modified_at,
            created: n.created_at,
            version: n.version_id,
        }
    }
}

impl DavMetaData for NodeMeta {
    /// A file's size. For a folder, the space's used bytes: dav-server reports a folder's
    /// `quota-used-bytes` as its length and `quota-available-bytes` as quota minus that, and
    /// every folder of a space shares one quota (RFC 4331 allows "used" to count the whole set
    /// of resources that share the quota). dav-server shows no length for folders otherwise.
    fn len(&self) -> u64 {
        self.size
    }
    fn modified(&self) -> Result<SystemTime, FsError> {
        Ok(ms_time(self.modified))
    }
    fn created(&self) -> Result<SystemTime, FsError> {
        Ok(ms_time(self.created))
    }
    fn is_dir(&self) -> bool {
        self.is_dir
    }
    /// Files: the version, as the REST API's ETag, so If-Match means the same on both doors.
    fn etag(&self) -> Option<String> {
        match (self.is_dir, self.version) {
            (false, Some(v)) => Some(v.to_string()),
            _ => Some(format!("d{:x}", self.modified)),
        }
    }
}

struct Entry {
    name: String,
    meta: NodeMeta,
}

impl DavDirEntry for Entry {
    fn name(&self) -> Vec<u8> {
        self.name.as_bytes().to_vec()
    }
    fn metadata(&self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let m: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(m) }.boxed()
    }
    fn is_dir(&self) -> FsFuture<'_, bool> {
        let d = self.meta.is_dir;
        async move { Ok(d) }.boxed()
    }
}

impl SpaceFs {
    async fn space_used(&self) -> Result<u64, FsError> {
        if let Some(u) = self.space_used.get() {
            return Ok(*u);
        }
        let user = self.st.meta.user(self.space.get()).await.map_err(meta_error)?.ok_or(FsError::NotFound)?;
        Ok(*self.space_used.get_or_init(|| user.used_bytes.max(0) as u64))
    }

    fn held(&self) -> Vec<String> {
        held_tokens(&self.held)
    }

    /// What the listing in progress knows about `path`, if it is a child of the folder listed.
    fn hint(&self, path: &DavPath) -> Option<(SpaceId, Hint)> {
        let p = remote(path).ok()?;
        let (parent, name) = (p.parent()?, p.name()?);
        let hints = self.hints.lock().unwrap_or_else(|p| p.into_inner());
        if hints.dir_key != lock_key(&parent) {
            return None;
        }
        Some((hints.space?, hints.children.get(&name_key(name)).copied()?))
    }

    /// The listing of `/Shared with me`: an entry per share given to the caller.
    async fn shared_index(&self) -> Result<FsStream<Box<dyn DavDirEntry>>, FsError> {
        let shares = self.st.meta.incoming_shares(self.space).await.map_err(meta_error)?;
        let entries: Vec<Result<Box<dyn DavDirEntry>, FsError>> = shares
            .into_iter()
            .map(|s| {
                let row = virtual_row(&s.row.name, &s.kind, s.row.node_id, s.size, s.modified_at);
                Ok(Box::new(Entry { meta: NodeMeta::of(&row, 0), name: s.row.name }) as Box<dyn DavDirEntry>)
            })
            .collect();
        Ok(Box::pin(futures::stream::iter(entries)))
    }

    /// Where `p` leads for this caller: their own space, or a share given to them.
    async fn place(&self, p: &RemotePath) -> Result<Place, FsError> {
        access::locate(&self.st.meta, self.space, p).await.map_err(fs_error)
    }

    /// The space and path `p` reads.
    async fn read_at(&self, p: &RemotePath) -> Result<(SpaceId, RemotePath), FsError> {
        self.place(p).await?.target(Want::Read).map_err(fs_error)
    }

    /// The space and path `p` writes (a new name directly in `Shared with me` is refused).
    async fn write_at(&self, p: &RemotePath) -> Result<(SpaceId, RemotePath), FsError> {
        access::locate_new(&self.st.meta, self.space, p).await.and_then(|pl| pl.target(Want::Write)).map_err(fs_error)
    }

    /// Where a path to remove, move or replace leads (then `target(Want::Write)`): a share's own
    /// entry is the owner's (the recipient leaves the share instead).
    async fn change_place(&self, p: &RemotePath) -> Result<Place, FsError> {
        let place = access::locate_new(&self.st.meta, self.space, p).await.map_err(fs_error)?;
        if place.is_share_entry() {
            return Err(FsError::Forbidden);
        }
        Ok(place)
    }

    /// Who this caller is, for the audit log.
    fn actor(&self) -> access::Actor<'_> {
        access::Actor { id: self.space.get(), name: &self.username, ip: self.ip }
    }

    /// `share_access` for what the caller did at `shown` (their path) through a share.
    async fn audit(&self, place: &Place, what: &str, shown: &RemotePath) -> Result<(), FsError> {
        place.audit_access(&self.st.meta, &self.actor(), what, shown).await.map_err(fs_error)
    }

    /// The dead properties of `path` (by node id when a listing knows it: no path walk).
    async fn props(&self, path: &DavPath) -> Result<Vec<PropRow>, FsError> {
        match self.hint(path) {
            Some((_, Hint { has_props: false, .. })) => Ok(Vec::new()),
            Some((space, Hint { node, .. })) => self.st.meta.dav_props_of(space, node).await.map_err(meta_error),
            None => match self.place(&remote(path)?).await? {
                Place::SharedIndex => Ok(Vec::new()),
                place => {
                    let (space, p) = place.target(Want::Read).map_err(fs_error)?;
                    self.st.meta.dav_props(space, &p).await.map_err(meta_error)
                }
            },
        }
    }

    /// True if removing `path` is part of removing `delete_root` as one trash item.
    fn inside_delete(&self, path: &RemotePath) -> bool {
        matches!(&self.delete_root, Some(root) if path != root && path.starts_with(root))
    }

    async fn remove(&self, path: &DavPath) -> Result<(), FsError> {
        let p = remote(path)?;
        if self.inside_delete(&p) {
            return Ok(());
        }
        if let (Some(src), Some(root)) = (&self.source, &self.delete_root)
            && root == &p
            && src.starts_with(&p)
        {
            if p.starts_with(src) {
                // The "existing destination" is the source itself (case-only rename): keep it.
                return Ok(());
            }
            // Replacing a folder that holds the source would put the source in the trash
            // before it is moved or copied.
            return Err(FsError::Forbidden);
        }
        let place = self.change_place(&p).await?;
        let (space, target) = place.target(Want::Write).map_err(fs_error)?;
        self.st.meta.trash(space, &target, LockTokens::new(&self.held())).await.map_err(meta_error)?;
        self.audit(&place, "delete", &p).await
    }
}

impl DavFileSystem for SpaceFs {
    fn open<'a>(&'a self, path: &'a DavPath, options: OpenOptions) -> FsFuture<'a, Box<dyn DavFile>> {
        async move {
            let p = remote(path)?;
            let write = options.write || options.append || options.create || options.create_new || options.truncate;
            let place = self.place(&p).await;
            let file = if write { self.open_write(p.clone(), options).await } else { self.open_read(p.clone()).await }?;
            if let Ok(place) = place {
                self.audit(&place, if write { "write" } else { "read" }, &p).await?;
            }
            Ok(file)
        }
        .boxed()
    }

    /// A lazy stream over the folder's children, read [`LIST_PAGE`] at a time from the
    /// metadata database as dav-server writes the answer out (it streams the multistatus
    /// body): a folder of any size costs one page of memory.
    fn read_dir<'a>(&'a self, path: &'a DavPath, _meta: ReadDirMeta) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        async move {
            let p = remote(path)?;
            let place = self.place(&p).await?;
            if let Place::SharedIndex = place {
                return self.shared_index().await;
            }
            let (space, target) = place.target(Want::Read).map_err(fs_error)?;
            let (dir, _) = self.st.meta.stat(space, &target).await.map_err(meta_error)?;
            if !dir.is_dir() {
                return Err(FsError::Forbidden);
            }
            let top = p.is_root();
            let pager = DirPager {
                st: self.st.clone(),
                space,
                top,
                dir: dir.id,
                dir_key: lock_key(&p),
                used: self.space_used().await?,
                after: None,
                buf: VecDeque::new(),
                done: false,
                hints: self.hints.clone(),
            };
            let listing = futures::stream::unfold(pager, DirPager::next);
            let shares = top && self.st.meta.has_incoming_shares(self.space).await.map_err(meta_error)?;
            let index = shares.then(|| Ok(Box::new(virtual_dir(SHARED_WITH_ME)) as Box<dyn DavDirEntry>));
            let s: FsStream<Box<dyn DavDirEntry>> = Box::pin(futures::stream::iter(index).chain(listing));
            Ok(s)
        }
        .boxed()
    }

    fn metadata<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, Box<dyn DavMetaData>> {
        async move {
            let p = remote(path)?;
            let place = self.place(&p).await?;
            if let Place::SharedIndex = place {
                return Ok(Box::new(virtual_dir(SHARED_WITH_ME).meta) as Box<dyn DavMetaData>);
            }
            let (space, target) = place.target(Want::Read).map_err(fs_error)?;
            let (node, _) = self.st.meta.stat(space, &target).await.map_err(meta_error)?;
            let used = if node.is_dir() { self.space_used().await? } else { 0 };
            Ok(Box::new(NodeMeta::of(&node, used)) as Box<dyn DavMetaData>)
        }
        .boxed()
    }

    fn create_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let shown = remote(path)?;
            let place = access::locate_new(&self.st.meta, self.space, &shown).await.map_err(fs_error)?;
            let (space, p) = place.target(Want::Write).map_err(fs_error)?;
            let parent = p.parent().ok_or(FsError::Exists)?;
            // MKCOL creates one level: a missing parent is 409, unlike the REST API's mkdir -p.
            match self.st.meta.stat(space, &parent).await {
                Ok((n, _)) if n.is_dir() => {}
                Ok(_) | Err(MetaError::NotFound) => return Err(FsError::NotFound),
                Err(e) => return Err(meta_error(e)),
            }
            match self.st.meta.mkdir(space, &p, LockTokens::new(&self.held())).await {
                Ok((_, true, _)) => self.audit(&place, "create folder", &shown).await,
                Ok((_, false, _)) | Err(MetaError::NotADirectory(_)) => Err(FsError::Exists),
                Err(e) => Err(meta_error(e)),
            }
        }
        .boxed()
    }

    fn remove_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        self.remove(path).boxed()
    }

    fn remove_file<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        self.remove(path).boxed()
    }

    fn rename<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (asked, shown) = (remote(from)?, remote(to)?);
            if let Some((_, name)) = access::share_entry_rename(&asked, &shown) {
                // The caller renames their own mount point of a share (as over REST).
                let Place::Shared { grant, .. } = self.place(&asked).await? else { return Err(FsError::Forbidden) };
                self.st.meta.rename_incoming_share(self.space, grant.share_id, &name).await.map_err(meta_error)?;
                return Ok(());
            }
            let (from_place, to_place) = (self.change_place(&asked).await?, self.change_place(&shown).await?);
            let (space, f) = from_place.target(Want::Write).map_err(fs_error)?;
            let (to_space, t) = to_place.target(Want::Write).map_err(fs_error)?;
            let held = self.held();
            if space != to_space {
                // Another owner's space: a copy, then the source to its owner's trash, as over
                // REST (space/across.rs). dav-server has removed an existing destination already.
                let (from, to) = (End { space, path: f }, End { space: to_space, path: t });
                across::move_to(&self.st, &from, &to, false, Some(&self.device), LockTokens::new(&held))
                    .await
                    .map_err(fs_error)?;
            } else {
                // dav-server has removed an existing destination already (Overwrite: T).
                self.st.meta.move_node(space, &f, &t, false, LockTokens::new(&held)).await.map_err(meta_error)?;
            }
            let (from, to) = ((&from_place, &asked), (&to_place, &shown));
            access::audit_transfer(&self.st.meta, &self.actor(), "move", from, to).await.map_err(fs_error)
        }
        .boxed()
    }

    fn copy<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        async move {
            let (asked, shown) = (remote(from)?, remote(to)?);
            let (from_place, to_place) = (self.place(&asked).await?, self.change_place(&shown).await?);
            let (space, f) = from_place.target(Want::Read).map_err(fs_error)?;
            let (to_space, t) = to_place.target(Want::Write).map_err(fs_error)?;
            let held = self.held();
            if space != to_space {
                // Blocks belong to a space: the content is copied into the other one, as over
                // REST (space/across.rs). dav-server calls this per file (it makes the folders).
                let (from, to) = (End { space, path: f }, End { space: to_space, path: t });
                across::copy(&self.st, &from, &to, true, Some(&self.device), LockTokens::new(&held))
                    .await
                    .map_err(fs_error)?;
            } else {
                self.st
                    .meta
                    .copy_node(space, &f, &t, true, Some(&self.device), LockTokens::new(&held))
                    .await
                    .map_err(meta_error)?;
                self.st.meta.copy_dav_props(space, &f, &t).await.map_err(meta_error)?;
            }
            let (from, to) = ((&from_place, &asked), (&to_place, &shown));
            access::audit_transfer(&self.st.meta, &self.actor(), "copy", from, to).await.map_err(fs_error)
        }
        .boxed()
    }

    /// False only for a child of the folder being listed that has no dead properties: a
    /// listing of a large folder then reads no properties for most entries.
    fn have_props<'a>(&'a self, path: &'a DavPath) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        async move { !matches!(self.hint(path), Some((_, Hint { has_props: false, .. }))) }.boxed()
    }

    fn patch_props<'a>(
        &'a self,
        path: &'a DavPath,
        patch: Vec<(bool, DavProp)>,
    ) -> FsFuture<'a, Vec<(StatusCode, DavProp)>> {
        async move {
            let p = remote(path)?;
            let mut ops = Vec::new();
            for (is_set, prop) in &patch {
                let ns = prop.namespace.clone().unwrap_or_default();
                if *is_set {
                    let xml =
                        prop.xml.as_deref().and_then(|x| std::str::from_utf8(x).ok()).ok_or(FsError::Forbidden)?;
                    let row =
                        PropRow { ns, name: prop.name.clone(), prefix: prop.prefix.clone(), xml: xml.to_string() };
                    ops.push(PropPatch::Set(row));
                } else {
                    ops.push(PropPatch::Remove { ns, name: prop.name.clone() });
                }
            }
            let (space, target) = self.write_at(&p).await?;
            let applied = self.st.meta.patch_dav_props(space, &target, &ops).await.map_err(meta_error)?;
            // RFC 4918 §9.2.1: a property the server has no room to record is 507, and in an
            // all-or-nothing PROPPATCH every other one is then 424 (Failed Dependency).
            let status = |i: usize| match &applied {
                Ok(()) => StatusCode::OK,
                Err(too_big) if too_big.contains(&i) || (too_big.is_empty() && patch[i].0) => {
                    StatusCode::INSUFFICIENT_STORAGE
                }
                Err(_) => StatusCode::FAILED_DEPENDENCY,
            };
            if let Err(too_big) = &applied {
                tracing::info!(path = %p, refused = too_big.len(), "PROPPATCH refused: dead property limits");
            }
            let statuses: Vec<StatusCode> = (0..patch.len()).map(status).collect();
            Ok(patch
                .into_iter()
                .zip(statuses)
                .map(|((_, mut prop), status)| {
                    prop.xml = None;
                    (status, prop)
                })
                .collect())
        }
        .boxed()
    }

    fn get_props<'a>(&'a self, path: &'a DavPath, do_content: bool) -> FsFuture<'a, Vec<DavProp>> {
        async move {
            let rows = self.props(path).await?;
            Ok(rows
                .into_iter()
                .map(|r| DavProp {
                    name: r.name,
                    prefix: r.prefix,
                    namespace: Some(r.ns).filter(|n| !n.is_empty()),
                    xml: do_content.then(|| r.xml.into_bytes()),
                })
                .collect())
        }
        .boxed()
    }

    fn get_prop<'a>(&'a self, path: &'a DavPath, prop: DavProp) -> FsFuture<'a, Vec<u8>> {
        async move {
            let ns = prop.namespace.unwrap_or_default();
            let rows = self.props(path).await?;
            rows.into_iter()
                .find(|r| r.ns == ns && r.name == prop.name)
                .map(|r| r.xml.into_bytes())
                .ok_or(FsError::NotFound)
        }
        .boxed()
    }

    fn get_quota(&self) -> FsFuture<'_, (u64, Option<u64>)> {
        async move {
            let user = self.st.meta.user(self.space.get()).await.map_err(meta_error)?.ok_or(FsError::NotFound)?;
            let used = user.used_bytes.max(0) as u64;
            let used = *self.space_used.get_or_init(|| used);
            Ok((used, user.quota_bytes.map(|q| q.max(0) as u64)))
        }
        .boxed()
    }
}

impl SpaceFs {
    async fn open_read(&self, p: RemotePath) -> Result<Box<dyn DavFile>, FsError> {
        let (space, p) = self.read_at(&p).await?;
        let m = self.st.meta.manifest(space, &p, None).await.map_err(meta_error)?;
        Ok(Box::new(ReadFile {
            st: self.st.clone(),
            space,
            meta: NodeMeta::of(&m.node, 0),
            blocks: m.blocks.clone(),
            size: m.version.size.max(0) as u64,
            pos: 0,
            stream: None,
            window: 0,
        }))
    }

    async fn open_write(&self, asked: RemotePath, o: OpenOptions) -> Result<Box<dyn DavFile>, FsError> {
        let (space, p) = self.write_at(&asked).await?;
        let existing = match self.st.meta.stat(space, &p).await {
            Ok((n, _)) => Some(n),
            Err(MetaError::NotFound) => None,
            Err(e) => return Err(meta_error(e)),
        };
        if existing.as_ref().is_some_and(|n| n.is_dir()) {
            return Err(FsError::Forbidden);
        }
        if existing.is_some() && o.create_new {
            return Err(FsError::Exists);
        }
        if existing.is_none() && !o.create && !o.create_new {
            return Err(FsError::NotFound);
        }
        if existing.is_none() {
            // Like a local file system, a file is created only inside an existing folder.
            let parent = p.parent().ok_or(FsError::Forbidden)?;
            match self.st.meta.stat(space, &parent).await {
                Ok((n, _)) if n.is_dir() => {}
                Ok(_) | Err(MetaError::NotFound) => return Err(FsError::NotFound),
                Err(e) => return Err(meta_error(e)),
            }
        }
        let held = self.held();
        if !o.truncate {
            // Not a whole-file PUT: partial updates (Content-Range, PATCH) are not supported
            // and must not create anything; LOCK on an unmapped URL creates an empty file
            // (RFC 4918 §7.3).
            if !self.lock_request {
                return Err(FsError::NotImplemented);
            }
            let node = match existing {
                Some(n) => n,
                None => {
                    let spec = CommitSpec {
                        base: Base::Expect(None),
                        blocks: &[],
                        block_size: self.st.settings.block_size as i64,
                        device: Some(&self.device),
                    };
                    self.st.meta.commit(space, &p, &spec, LockTokens::new(&held)).await.map_err(meta_error)?.0
                }
            };
            return Ok(Box::new(NoWriteFile { meta: NodeMeta::of(&node, 0) }));
        }
        // Refuse before the body is read: a lock not held, a known length over quota.
        space::check_put(&self.st, space, &p, o.size, LockTokens::new(&held)).await.map_err(fs_error)?;
        let still_allowed = access::still_writable(self.st.meta.clone(), (self.again)(), asked, (space, p.clone()));
        Ok(Box::new(WriteFile::start(self, space, p, o.size, held, still_allowed)))
    }
}

/// A file opened for reading: a stream over a window of the byte range, reopened after a seek
/// or when the window is used up.
struct ReadFile {
    st: AppState,
    space: SpaceId,
    meta: NodeMeta,
    blocks: std::sync::Arc<[crate::meta::BlockEntry]>,
    size: u64,
    pos: u64,
    stream: Option<ReadWindow>,
    window: u64,
}

type Pieces = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>;

struct ReadWindow {
    /// In a mutex only because dav-server wants files `Sync`; it is reached through `&mut`
    /// (`get_mut`), never locked.
    pieces: Mutex<Pieces>,
    /// The next byte the window yields (after `leftover`).
    next: u64,
    /// Last byte of the window (inclusive).
    end: u64,
    leftover: Bytes,
}

impl std::fmt::Debug for ReadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadFile").field("size", &self.size).field("pos", &self.pos).finish()
    }
}

impl ReadFile {
    async fn open_window(&mut self, want: u64) -> Result<(), FsError> {
        // Grow windows while reading on (fewer reopens for whole files), start small after a
        // seek (a small range reads only its own blocks).
        self.window = if self.window == 0 {
            want.max(1)
        } else {
            (self.window * 2).max(self.st.settings.block_size).min(MAX_READ_WINDOW)
        };
        let end = (self.pos + self.window - 1).min(self.size - 1);
        let pieces = space::open_range(&self.st, self.space, &self.blocks, (self.pos, end), CacheMode::Normal)
            .await
            .map_err(fs_error)?;
        self.stream =
            Some(ReadWindow { pieces: Mutex::new(Box::pin(pieces)), next: self.pos, end, leftover: Bytes::new() });
        Ok(())
    }
}

impl DavFile for ReadFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let m: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(m) }.boxed()
    }

    fn write_buf(&mut self, _buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn write_bytes(&mut self, _buf: Bytes) -> FsFuture<'_, ()> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn read_bytes(&mut self, count: usize) -> FsFuture<'_, Bytes> {
        async move {
            if count == 0 || self.pos >= self.size {
                return Ok(Bytes::new());
            }
            let usable = self.stream.as_ref().is_some_and(|w| w.next - w.leftover.len() as u64 == self.pos);
            if !usable {
                self.window = 0;
                self.open_window(count as u64).await?;
            }
            loop {
                let Some(w) = self.stream.as_mut() else { return Err(FsError::GeneralFailure) };
                if !w.leftover.is_empty() {
                    let n = count.min(w.leftover.len());
                    let out = w.leftover.split_to(n);
                    self.pos += n as u64;
                    return Ok(out);
                }
                if w.next > w.end {
                    self.open_window(count as u64).await?;
                    continue;
                }
                let pieces = w.pieces.get_mut().unwrap_or_else(|p| p.into_inner());
                match pieces.next().await {
                    Some(Ok(b)) => {
                        w.next += b.len() as u64;
                        w.leftover = b;
                    }
                    Some(Err(e)) => {
                        tracing::error!(error = %e, "WebDAV read failed");
                        return Err(FsError::GeneralFailure);
                    }
                    // A window that ends short would make dav-server pad with zeros: fail instead.
                    None => return Err(FsError::GeneralFailure),
                }
            }
        }
        .boxed()
    }

    fn seek(&mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        async move {
            let new = match pos {
                SeekFrom::Start(n) => Some(n),
                SeekFrom::End(d) => self.size.checked_add_signed(d),
                SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            };
            self.pos = new.ok_or(FsError::GeneralFailure)?;
            Ok(self.pos)
        }
        .boxed()
    }

    fn flush(&mut self) -> FsFuture<'_, ()> {
        async { Ok(()) }.boxed()
    }
}

/// What `open` returns for a write that is not a whole-file PUT: the file exists, it does not
/// take bytes.
#[derive(Debug)]
struct NoWriteFile {
    meta: NodeMeta,
}

impl DavFile for NoWriteFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let m: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        async move { Ok(m) }.boxed()
    }
    fn write_buf(&mut self, _buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async { Err(FsError::NotImplemented) }.boxed()
    }
    fn write_bytes(&mut self, _buf: Bytes) -> FsFuture<'_, ()> {
        async { Err(FsError::NotImplemented) }.boxed()
    }
    fn read_bytes(&mut self, _count: usize) -> FsFuture<'_, Bytes> {
        async { Err(FsError::NotImplemented) }.boxed()
    }
    fn seek(&mut self, _pos: SeekFrom) -> FsFuture<'_, u64> {
        // Partial PUTs seek first: refused (dav-server answers 416), nothing written.
        async { Err(FsError::NotImplemented) }.boxed()
    }
    fn flush(&mut self) -> FsFuture<'_, ()> {
        async { Ok(()) }.boxed()
    }
}

type PutResult = Result<(NodeRow, bool, RemotePath), ApiError>;

/// A whole-file PUT in flight. dav-server writes the body chunk by chunk and then flushes;
/// the chunks feed a task running `space::put_stream` through a bounded queue
/// (backpressure: the body is read no faster than blocks are stored). Only `flush` marks the
/// body complete: if the request dies first, the queue closes unmarked, the upload fails and
/// nothing is committed, so the old version stays.
struct WriteFile {
    tx: Option<mpsc::Sender<Bytes>>,
    complete: Arc<AtomicBool>,
    task: Option<JoinHandle<PutResult>>,
    written: u64,
    expected: Option<u64>,
    result: Option<NodeMeta>,
    failed: Option<FsError>,
}

impl std::fmt::Debug for WriteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteFile").field("written", &self.written).field("expected", &self.expected).finish()
    }
}

impl WriteFile {
    fn start(
        fs: &SpaceFs,
        space: SpaceId,
        path: RemotePath,
        expected: Option<u64>,
        held: Vec<String>,
        still_allowed: access::StillAllowed,
    ) -> WriteFile {
        let (tx, rx) = mpsc::channel::<Bytes>(PUT_QUEUE);
        let complete = Arc::new(AtomicBool::new(false));
        let flag = complete.clone();
        let body = futures::stream::unfold((rx, flag, false), |(mut rx, flag, ended)| async move {
            if ended {
                return None;
            }
            match rx.recv().await {
                Some(b) => Some((Ok(b), (rx, flag, false))),
                None if flag.load(Ordering::Acquire) => None,
                None => Some((Err("the request ended before the whole body arrived"), (rx, flag, true))),
            }
        });
        let (st, device) = (fs.st.clone(), fs.device.clone());
        let task = tokio::spawn(async move {
            let opts = PutOptions {
                base: Base::Any,
                device: Some(&device),
                content_length: expected,
                verify: None,
                allowance: 0,
                still_allowed: Some(still_allowed),
            };
            let r = space::put_stream(&st, space, &path, Box::pin(body), opts, LockTokens::new(&held)).await;
            if let Err(e) = &r {
                tracing::info!(path = %path, error = %e, "WebDAV upload not committed");
            }
            r
        });
        WriteFile { tx: Some(tx), complete, task: Some(task), written: 0, expected, result: None, failed: None }
    }

    /// Waits for the upload task and keeps its outcome.
    async fn finish(&mut self) -> Result<(), FsError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let Some(task) = self.task.take() else { return Ok(()) };
        let r = match task.await {
            Ok(Ok((node, _, _))) => {
                self.result = Some(NodeMeta::of(&node, 0));
                Ok(())
            }
            Ok(Err(e)) => Err(fs_error(e)),
            Err(e) => {
                tracing::error!(error = %e, "WebDAV upload task failed");
                Err(FsError::GeneralFailure)
            }
        };
        if let Err(e) = r {
            self.failed = Some(e);
        }
        r
    }

    async fn write(&mut self, b: Bytes) -> Result<(), FsError> {
        if b.is_empty() {
            return Ok(());
        }
        self.written += b.len() as u64;
        let Some(tx) = self.tx.as_ref() else { return Err(FsError::GeneralFailure) };
        if tx.send(b).await.is_err() {
            // The upload stopped early (quota, store): its error is the answer.
            self.tx = None;
            self.finish().await?;
            return Err(FsError::GeneralFailure);
        }
        Ok(())
    }
}

impl DavFile for WriteFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        async move {
            let m = self.result.clone().ok_or(FsError::NotFound)?;
            Ok(Box::new(m) as Box<dyn DavMetaData>)
        }
        .boxed()
    }

    fn write_buf(&mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        async move {
            let b = buf.copy_to_bytes(buf.remaining());
            self.write(b).await
        }
        .boxed()
    }

    fn write_bytes(&mut self, buf: Bytes) -> FsFuture<'_, ()> {
        self.write(buf).boxed()
    }

    fn read_bytes(&mut self, _count: usize) -> FsFuture<'_, Bytes> {
        async { Err(FsError::Forbidden) }.boxed()
    }

    fn seek(&mut self, _pos: SeekFrom) -> FsFuture<'_, u64> {
        async { Err(FsError::NotImplemented) }.boxed()
    }

    fn flush(&mut self) -> FsFuture<'_, ()> {
        async move {
            if let Some(expected) = self.expected
                && self.written != expected
                && self.tx.is_some()
            {
                // Short or long against Content-Length: never commit it.
                self.tx = None;
                self.failed = Some(FsError::GeneralFailure);
                return Err(FsError::GeneralFailure);
            }
            if let Some(tx) = self.tx.take() {
                // Mark the body complete before closing the queue: the upload task reads the
                // mark when it sees the queue closed.
                self.complete.store(true, Ordering::Release);
                drop(tx);
            }
            self.finish().await
        }
        .boxed()
    }
}
