//! Directories: listings paged from the gateway as the reader gets to them, or answered from the
//! inode table when it holds a complete, fresh listing (and while offline).

use std::time::Instant;

use nimbus_proto::names::name_key;

use super::types::*;
use super::vfs::{DirEntry, Handle, PAGE, Vfs, lock};

impl Vfs {
    pub fn opendir(&self, ino: Ino) -> VfsResult<Fh> {
        let t = lock(&self.tree);
        let n = t.get(ino)?;
        if n.kind != Kind::Dir {
            return Err(VfsError::NotDir);
        }
        // A listing shows each entry's attributes (WinFsp passes them on as they are), so one
        // whose attributes a change made stale sends the listing to the gateway.
        let attrs_fresh = n.dir.children.values().all(|c| {
            t.nodes
                .get(c)
                .is_none_or(|c| c.is_unlinked() || c.is_staged() || c.remote_id().is_none() || self.fresh(c.fetched))
        });
        let use_cache =
            n.dir.complete && attrs_fresh && (self.fresh(n.fetched) || ino == ROOT && self.fresh(Some(Instant::now())));
        let offline = !self.is_online();
        let (entries, done) = if use_cache || offline {
            let mut v: Vec<(Ino, String)> = n
                .dir
                .children
                .values()
                .filter_map(|c| t.nodes.get(c).filter(|n| !n.is_unlinked()).map(|n| (*c, n.name().to_string())))
                .collect();
            v.sort_by_cached_key(|(_, name)| name_key(name));
            (v, true)
        } else {
            (Vec::new(), false)
        };
        let generation = n.dir.generation;
        drop(t);
        let fh = self.new_fh();
        lock(&self.handles).insert(fh, Handle::Dir { ino, entries, cursor: None, done, generation });
        Ok(fh)
    }

    /// Entries from `offset` on (`.` and `..` are the adapter's business), fetching further
    /// pages from the gateway as the reader gets to them.
    pub async fn readdir(&self, fh: Fh, offset: u64, max: usize) -> VfsResult<Vec<DirEntry>> {
        loop {
            let (ino, need_more, cursor) = {
                let h = lock(&self.handles);
                let Some(Handle::Dir { ino, entries, cursor, done, .. }) = h.get(&fh) else {
                    return Err(VfsError::BadHandle);
                };
                (*ino, !*done && (entries.len() as u64) < offset + max as u64, cursor.clone())
            };
            if !need_more {
                break;
            }
            let path = lock(&self.tree).path(ino)?;
            let page = match self.seen(self.remote.list_dir_page(&path, cursor.as_deref(), Some(PAGE)).await) {
                Ok(p) => p,
                Err(VfsError::Offline) => {
                    // Finish from what the cache knows.
                    let mut h = lock(&self.handles);
                    if let Some(Handle::Dir { entries, done, .. }) = h.get_mut(&fh) {
                        let t = lock(&self.tree);
                        if let Ok(n) = t.get(ino) {
                            let have: std::collections::HashSet<Ino> = entries.iter().map(|e| e.0).collect();
                            for c in n.dir.children.values().filter(|c| !have.contains(c)) {
                                if let Some(cn) = t.nodes.get(c) {
                                    entries.push((*c, cn.name().to_string()));
                                }
                            }
                        }
                        *done = true;
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut t = lock(&self.tree);
            let new: Vec<(Ino, String)> = page.entries.iter().map(|e| (t.upsert(ino, e), e.name.clone())).collect();
            let mut h = lock(&self.handles);
            if let Some(Handle::Dir { entries, cursor, done, generation, .. }) = h.get_mut(&fh) {
                entries.extend(new);
                *cursor = page.next_cursor.clone();
                if page.next_cursor.is_none() {
                    *done = true;
                    // Files created here and not uploaded yet are part of the directory too.
                    let listed: std::collections::HashSet<Ino> = entries.iter().map(|e| e.0).collect();
                    if let Ok(n) = t.get(ino) {
                        let mut local: Vec<(Ino, String)> = n
                            .dir
                            .children
                            .values()
                            .filter(|c| !listed.contains(c))
                            .filter_map(|c| {
                                t.nodes
                                    .get(c)
                                    .filter(|n| n.remote_id().is_none() && !n.is_unlinked())
                                    .map(|n| (*c, n.name().to_string()))
                            })
                            .collect();
                        entries.append(&mut local);
                    }
                    // Children the gateway no longer lists are gone.
                    let stale: Vec<Ino> = t
                        .get(ino)
                        .map(|n| n.dir.children.values().filter(|c| !listed.contains(c)).copied().collect())
                        .unwrap_or_default();
                    for c in stale {
                        if t.get(c).is_ok_and(|n| n.remote_id().is_some() && !n.is_staged()) {
                            t.lost(c);
                        }
                    }
                    if let Ok(n) = t.get_mut(ino)
                        && n.dir.generation == *generation
                    {
                        n.dir.complete = true;
                        n.dir.negative.clear();
                        n.fetched = Some(Instant::now());
                    }
                }
            }
        }
        let h = lock(&self.handles);
        let Some(Handle::Dir { entries, .. }) = h.get(&fh) else { return Err(VfsError::BadHandle) };
        let t = lock(&self.tree);
        Ok(entries
            .iter()
            .enumerate()
            .skip(offset as usize)
            .take(max)
            .filter_map(|(i, (ino, name))| {
                t.nodes.get(ino).map(|n| DirEntry { offset: i as u64 + 1, name: name.clone(), attr: n.attr(*ino) })
            })
            .collect())
    }

    pub fn releasedir(&self, fh: Fh) {
        lock(&self.handles).remove(&fh);
    }
}
