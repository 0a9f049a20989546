//! Copies and moves between two spaces: the caller's own and a share given to them, or two
//! shares of different owners. Blocks belong to a space (they are stored, counted and collected
//! per space), so crossing means content: every file is read through the cache from the source
//! space and written into the destination space by the same path as an upload (hashed, stored,
//! charged to the destination's owner, quota checked, committed as a new file). A move is that
//! copy followed by moving the source to its owner's trash.
//!
//! This is what Nextcloud does at a storage edge (a move between storages is a copy and a
//! delete, allowed when the caller may delete at the source and create at the destination),
//! and it keeps the rule: nothing leaves a share into the caller's space without being
//! copied, and the owner's blocks, versions and trash never become reachable from the other
//! side. Only the current content crosses: older versions and WebDAV dead properties stay with
//! the source, as in Nextcloud.

use futures::StreamExt;
use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use crate::cache::CacheMode;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, LockTokens, NodeRow, SpaceId};
use crate::space::{self, PutOptions};
use crate::state::AppState;

/// The most files and folders one request copies across (a bounded request; a larger tree is
/// copied in parts).
pub const MAX_NODES: usize = 10_000;

/// One side of a crossing: a space and a canonical path in it.
#[derive(Debug, Clone)]
pub struct End {
    pub space: SpaceId,
    pub path: RemotePath,
}

/// What a copy across needs to know about its source, read before anything is written.
struct Item {
    /// Components below the copied node (empty: the node itself).
    rel: Vec<String>,
    dir: bool,
    size: u64,
}

/// Copies `from` (a file or a folder with everything in it) to `to`, a path that must not
/// exist unless `overwrite` and both are files (then the content becomes a new version of the
/// destination). Returns the new node and its canonical path in the destination space.
pub async fn copy(
    st: &AppState,
    from: &End,
    to: &End,
    overwrite: bool,
    device: Option<&str>,
    held: LockTokens<'_>,
) -> ApiResult<(NodeRow, RemotePath)> {
    if from.path.is_root() {
        return Err(ApiError::BadRequest("the root folder cannot be copied".into()));
    }
    if to.path.is_root() {
        return Err(ApiError::AlreadyExists("`/` already exists".into()));
    }
    let items = snapshot(st, from).await?;
    let top_dir = items.first().is_some_and(|i| i.dir);
    match st.meta.stat(to.space, &to.path).await {
        Ok((ex, _)) if !overwrite || ex.is_dir() || top_dir => {
            return Err(ApiError::AlreadyExists(format!("`{}` already exists", to.path)));
        }
        Ok(_) | Err(crate::meta::MetaError::NotFound) => {}
        Err(e) => return Err(e.into()),
    }
    st.meta.check_unlocked(to.space, &to.path, true, held).await?;
    // The whole tree against the destination's room first, so a copy that cannot fit fails
    // before it writes anything (each file is checked again as it is written).
    let total: u64 = items.iter().map(|i| i.size).sum();
    let room = space::quota_room(st, to.space, &to.path).await?;
    if let Some(left) = room.bytes
        && total > left
    {
        return Err(space::quota_error(total, left));
    }
    for item in &items {
        let src = join(&from.path, &item.rel)?;
        let dst = join(&to.path, &item.rel)?;
        if item.dir {
            st.meta.mkdir(to.space, &dst, held).await?;
            continue;
        }
        // The top file may replace an existing one (overwrite); files inside a new folder are new.
        let base = if item.rel.is_empty() { Base::Any } else { Base::Expect(None) };
        copy_file(st, from.space, &src, to.space, &dst, base, device, held).await?;
    }
    Ok(st.meta.stat(to.space, &to.path).await?)
}

/// [`copy`], then the source to its owner's trash. The source must be free of locks not in
/// `held` before anything is copied, so a locked source fails cleanly rather than half-moved.
pub async fn move_to(
    st: &AppState,
    from: &End,
    to: &End,
    overwrite: bool,
    device: Option<&str>,
    held: LockTokens<'_>,
) -> ApiResult<(NodeRow, RemotePath)> {
    st.meta.check_unlocked(from.space, &from.path, true, held).await?;
    let (_, canon) = st.meta.stat(from.space, &from.path).await?;
    // A node shared with others (or holding one) would take its shares to the trash with it:
    // Nextcloud refuses to move a share into another storage too. Copy it, or end the shares.
    let shared =
        st.meta.outgoing_shares(from.space).await?.into_iter().filter_map(|s| s.path).any(|p| p.starts_with(&canon));
    if shared {
        return Err(ApiError::Conflict(format!(
            "`{}` is (or holds) something shared with other users; moving it to another owner's space would \
             end those shares: copy it instead, or end the shares first",
            from.path
        )));
    }
    let done = copy(st, from, to, overwrite, device, held).await?;
    st.meta.trash(from.space, &from.path, held).await?;
    Ok(done)
}

/// The source tree, parents before children, up to [`MAX_NODES`].
async fn snapshot(st: &AppState, from: &End) -> ApiResult<Vec<Item>> {
    let (top, _) = st.meta.stat(from.space, &from.path).await?;
    let mut items = vec![Item { rel: Vec::new(), dir: top.is_dir(), size: size_of(&top) }];
    let mut next = 0;
    while next < items.len() {
        if !items[next].dir {
            next += 1;
            continue;
        }
        let rel = items[next].rel.clone();
        let dir = join(&from.path, &rel)?;
        let mut after: Option<String> = None;
        loop {
            let (page, _) = st.meta.list_dir(from.space, &dir, after.as_deref(), 1000).await?;
            let Some(last) = page.last() else { break };
            after = Some(name_key(&last.name));
            let full = page.len() < 1000;
            for child in page {
                if items.len() >= MAX_NODES {
                    return Err(ApiError::BadRequest(format!(
                        "`{}` holds more than {MAX_NODES} files and folders; copy it to another owner's space in parts",
                        from.path
                    )));
                }
                let mut r = rel.clone();
                r.push(child.name.clone());
                items.push(Item { rel: r, dir: child.is_dir(), size: size_of(&child) });
            }
            if full {
                break;
            }
        }
        next += 1;
    }
    Ok(items)
}

fn size_of(n: &NodeRow) -> u64 {
    if n.is_dir() { 0 } else { n.size.max(0) as u64 }
}

fn join(base: &RemotePath, rel: &[String]) -> ApiResult<RemotePath> {
    let mut p = base.clone();
    for c in rel {
        p = p.join(c)?;
    }
    Ok(p)
}

/// One file's current content, streamed from one space into the other as an upload.
#[allow(clippy::too_many_arguments)]
async fn copy_file(
    st: &AppState,
    from_space: SpaceId,
    src: &RemotePath,
    to_space: SpaceId,
    dst: &RemotePath,
    base: Base,
    device: Option<&str>,
    held: LockTokens<'_>,
) -> ApiResult<()> {
    let m = st.meta.manifest(from_space, src, None).await?;
    let size = m.version.size.max(0) as u64;
    // Server-side, and as long as a read of the source: the request's start checked access.
    let opts = PutOptions { base, device, content_length: Some(size), verify: None, allowance: 0, still_allowed: None };
    if size == 0 {
        let empty = futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
        space::put_stream(st, to_space, dst, empty, opts, held).await?;
    } else {
        let body = space::open_range(st, from_space, &m.blocks, (0, size - 1), CacheMode::Normal).await?;
        space::put_stream(st, to_space, dst, body.boxed(), opts, held).await?;
    }
    Ok(())
}
