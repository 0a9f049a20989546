//! Write-back staging: the local copy of a file being written, and its journal record.
//!
//! A file opened for writing gets a sparse staging file (its logical size is always the file's
//! current size) and a JSON record next to it. Blocks are tracked individually: a block is
//! *present* when its bytes in the staging file are valid, and *dirty* when they differ from
//! the base version. A partial write to a block that isn't present first copies the base
//! block in (read-modify-write), so a commit uploads only dirty blocks and reuses the base
//! version's hashes for the rest.
//!
//! The record is rewritten (temp + rename) whenever a block becomes dirty and when
//! the file is closed, so after a killed client the next mount finds every file that was
//! being written: the staging file holds the bytes, the record says which blocks changed and
//! which version they apply to. Nothing here talks to the gateway.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nimbus_blockcache::pio::{read_exact_at, write_all_at};
use nimbus_proto::wire::BlockRef;
use serde::{Deserialize, Serialize};

use super::types::VfsResult;

/// Bump when [`Record`] changes incompatibly; records of another version are kept aside, not
/// guessed at.
pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub format: u32,
    /// The file's path in the space when the record was last written.
    pub path: String,
    /// The version the dirty blocks apply to (`None`: a new file).
    pub base_version: Option<i64>,
    pub base_blocks: Vec<BlockRef>,
    pub block_size: u64,
    pub size: u64,
    pub present: BTreeSet<u64>,
    pub dirty: BTreeSet<u64>,
    /// The size changed, the file is new, or it was truncated: commit even with no dirty block.
    pub changed: bool,
    /// How many folder moves of the [`MoveLog`] `path` already reflects: recovery applies the
    /// later ones (a folder moved after this record was written).
    #[serde(default)]
    pub moves_seen: u64,
}

/// The folder moves made while files under them had journal records, so a move does not
/// rewrite every record below it: `moves.log` in the staging directory (JSON), one entry per move
/// (`seq`, `from`, `to`), rewritten whole (temp + rename) per move. A record names the moves
/// it already reflects ([`Record::moves_seen`], stamped when it is written); recovery applies
/// the later ones to its path in order. Emptied when a mount starts with no record left.
#[derive(Debug)]
pub struct MoveLog {
    file: PathBuf,
    moves: std::sync::Mutex<Vec<Move>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Move {
    pub seq: u64,
    pub from: String,
    pub to: String,
}

impl MoveLog {
    /// The log of staging directory `dir` as a previous run left it (empty if none, or if it
    /// cannot be read: records then keep the paths they were written with).
    pub fn open(dir: &Path) -> Arc<Self> {
        let file = dir.join("moves.log");
        let moves = match fs::read(&file) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "unreadable folder-move log ignored");
                Vec::new()
            }),
            Err(_) => Vec::new(),
        };
        Arc::new(Self { file, moves: std::sync::Mutex::new(moves) })
    }

    /// How many moves there are (what a record written now reflects).
    pub fn seq(&self) -> u64 {
        self.lock().last().map_or(0, |m| m.seq)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Move>> {
        self.moves.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that the folder `from` is now `to` (paths in the space).
    pub fn append(&self, from: &str, to: &str) -> VfsResult<()> {
        let mut moves = self.lock();
        let seq = moves.last().map_or(0, |m| m.seq) + 1;
        moves.push(Move { seq, from: from.to_string(), to: to.to_string() });
        let json = serde_json::to_vec(&*moves).map_err(|e| super::types::VfsError::Io(e.to_string()))?;
        let tmp = self.file.with_extension("tmp");
        let written = fs::create_dir_all(self.file.parent().unwrap_or(Path::new(".")))
            .and_then(|()| fs::write(&tmp, &json))
            .and_then(|()| fs::rename(&tmp, &self.file));
        if let Err(e) = written {
            // Not in the log: the records must not be stamped as if it were.
            moves.pop();
            return Err(e.into());
        }
        Ok(())
    }

    /// Brings a path that reflects the first `seen` moves up to date: the later ones are
    /// applied to it, and `seen` becomes the count of all.
    pub fn catch_up(&self, path: &mut String, seen: &mut u64) {
        let moves = self.lock();
        for m in moves.iter().filter(|m| m.seq > *seen) {
            if let Some(rest) = under(path, &m.from) {
                *path = format!("{}{rest}", m.to);
            }
        }
        *seen = moves.last().map_or(*seen, |m| m.seq.max(*seen));
    }

    /// Forgets every move (no record refers to any).
    fn clear(&self) {
        self.lock().clear();
        let _ = fs::remove_file(&self.file);
    }
}

/// The part of `path` after `dir` if `path` is `dir` or below it (names compared as the
/// gateway does, case-insensitively).
fn under<'a>(path: &'a str, dir: &str) -> Option<&'a str> {
    let head = path.get(..dir.len())?;
    let rest = &path[dir.len()..];
    let same = head == dir || nimbus_proto::names::name_key(head) == nimbus_proto::names::name_key(dir);
    (same && (rest.is_empty() || rest.starts_with('/'))).then_some(rest)
}

/// Whether a staged file is still in the namespace. Changed without the staging area's lock
/// (the inode table does it when the file leaves the namespace, deleted or replaced while
/// still open): from then on its record is gone and never written again, or the next mount
/// would bring the file back from it after a crash. The staging file stays for the handles
/// still open.
#[derive(Debug)]
pub struct Journal {
    record: PathBuf,
    unlinked: AtomicBool,
}

impl Journal {
    fn new(dir: &Path, id: &str) -> Arc<Self> {
        Arc::new(Self { record: dir.join(format!("{id}.json")), unlinked: AtomicBool::new(false) })
    }

    /// The file left the namespace: its record goes, for good.
    pub fn unlink(&self) {
        self.unlinked.store(true, Ordering::SeqCst);
        let _ = fs::remove_file(&self.record);
    }

    pub fn is_unlinked(&self) -> bool {
        self.unlinked.load(Ordering::SeqCst)
    }
}

pub struct Staged {
    pub id: String,
    dir: PathBuf,
    file: File,
    pub rec: Record,
    /// The record as last written, so unchanged records are not rewritten.
    last: Vec<u8>,
    /// Committed and deleted (or dropped): whoever was waiting for its lock must stage anew.
    discarded: bool,
    journal: Arc<Journal>,
    moves: Arc<MoveLog>,
}

impl Staged {
    /// A new staging file for `rec` (whose `size` the staging file takes at once). `rec.path`
    /// is taken to reflect every move of `moves` so far: the caller read it from the inode
    /// table under the same lock the moves are logged under.
    pub fn create(dir: &Path, mut rec: Record, moves: &Arc<MoveLog>) -> VfsResult<Self> {
        rec.moves_seen = moves.seq();
        let id = format!("{:016x}{:08x}", rand_u64(), std::process::id());
        let open = || OpenOptions::new().create_new(true).read(true).write(true).open(dir.join(format!("{id}.data")));
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(dir)?;
                open()?
            }
            other => other?,
        };
        file.set_len(rec.size)?;
        // The record is first written when there is something to recover (a dirty block, or
        // the close); a staging file without one is just dropped by `recover`.
        Ok(Self::from_parts(dir, id, file, rec, moves))
    }

    fn from_parts(dir: &Path, id: String, file: File, rec: Record, moves: &Arc<MoveLog>) -> Self {
        let journal = Journal::new(dir, &id);
        Self {
            id,
            dir: dir.to_path_buf(),
            file,
            rec,
            last: Vec::new(),
            discarded: false,
            journal,
            moves: moves.clone(),
        }
    }

    /// Every staged file left by an earlier run, with its size taken from the staging file
    /// (the record's may lag behind the last writes).
    /// Their paths are where they are now: the folder moves of `moves` they did not reflect
    /// yet are applied. With no record left, the move log is emptied.
    pub fn recover(dir: &Path, moves: &Arc<MoveLog>) -> Vec<Staged> {
        let mut out = Vec::new();
        let Ok(rd) = fs::read_dir(dir) else {
            moves.clear();
            return out;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "tmp") {
                let _ = fs::remove_file(&p);
                continue;
            }
            if p.extension().is_some_and(|x| x == "data") && !p.with_extension("json").exists() {
                let _ = fs::remove_file(&p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Some(id) = p.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            let rec: Option<Record> = fs::read(&p).ok().and_then(|b| serde_json::from_slice(&b).ok());
            let data = dir.join(format!("{id}.data"));
            match (rec, OpenOptions::new().read(true).write(true).open(&data)) {
                (Some(mut rec), Ok(file)) if rec.format == RECORD_VERSION => {
                    if let Ok(m) = file.metadata() {
                        let len = m.len();
                        if len != rec.size {
                            rec.changed = true;
                            let bs = rec.block_size.max(1);
                            // Blocks the lagging record didn't list yet: everything from the
                            // earlier end on was written (or zero-filled) since.
                            let from = rec.size.min(len) / bs;
                            for b in from..len.div_ceil(bs) {
                                rec.dirty.insert(b);
                                rec.present.insert(b);
                            }
                            rec.size = len;
                        }
                    }
                    moves.catch_up(&mut rec.path, &mut rec.moves_seen);
                    out.push(Staged::from_parts(dir, id, file, rec, moves));
                }
                _ => {
                    tracing::warn!(record = %p.display(), "unreadable write-back record kept aside");
                    let _ = fs::rename(&p, p.with_extension("broken"));
                }
            }
        }
        if out.is_empty() {
            moves.clear();
        }
        out
    }

    /// Rewrites the record (temp + rename). `durable` also syncs data and record to disk.
    pub fn persist(&mut self, durable: bool) -> VfsResult<()> {
        if self.discarded || self.journal.is_unlinked() {
            // Never bring back the record of a staging file that is gone, or of a file that
            // left the namespace.
            return Ok(());
        }
        self.moves.catch_up(&mut self.rec.path, &mut self.rec.moves_seen);
        let json = serde_json::to_vec(&self.rec).map_err(|e| super::types::VfsError::Io(e.to_string()))?;
        if json == self.last && !durable {
            return Ok(());
        }
        let tmp = self.dir.join(format!("{}.tmp", self.id));
        let mut f = File::create(&tmp)?;
        f.write_all(&json)?;
        if durable {
            self.file.sync_data()?;
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&tmp, &self.journal.record)?;
        if self.journal.is_unlinked() {
            // Unlinked while this was written: the record must not stay.
            let _ = fs::remove_file(&self.journal.record);
        }
        self.last = json;
        Ok(())
    }

    /// The file's path now, reflecting the first `seen` folder moves (read together, under
    /// the inode table's lock).
    pub fn set_path(&mut self, path: String, seen: u64) {
        self.rec.path = path;
        self.rec.moves_seen = seen;
    }

    /// The part of this staging area the inode table changes without its lock.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Deletes the staging file and its record (committed, or no longer wanted).
    pub fn discard(&mut self) {
        self.discarded = true;
        let _ = fs::remove_file(self.dir.join(format!("{}.json", self.id)));
        let _ = fs::remove_file(self.dir.join(format!("{}.data", self.id)));
    }

    pub fn is_discarded(&self) -> bool {
        self.discarded
    }

    pub fn bs(&self) -> u64 {
        self.rec.block_size
    }

    /// Bytes of block `b` at the current size.
    pub fn block_len(&self, b: u64) -> u64 {
        let start = b * self.bs();
        self.rec.size.saturating_sub(start).min(self.bs())
    }

    /// Base block `b` if the base has one.
    pub fn base_block(&self, b: u64) -> Option<&BlockRef> {
        usize::try_from(b).ok().and_then(|i| self.rec.base_blocks.get(i))
    }

    pub fn is_present(&self, b: u64) -> bool {
        self.rec.present.contains(&b)
    }

    /// Stores base block `b`'s bytes (clipped to the current size) and marks it present.
    pub fn fill(&mut self, b: u64, data: &[u8]) -> VfsResult<()> {
        let n = (self.block_len(b) as usize).min(data.len());
        write_all_at(&self.file, &data[..n], b * self.bs())?;
        self.rec.present.insert(b);
        Ok(())
    }

    /// Marks blocks present without content (they are zeros or about to be overwritten).
    pub fn mark_present(&mut self, b: u64) {
        self.rec.present.insert(b);
    }

    /// Blocks that must be filled from the base before `len` bytes can be written in place at
    /// `off`: the ones the write covers only partially, and the current edge block if the
    /// write grows the file. Blocks past the current end never come from the base (after a
    /// truncation they are zeros).
    pub fn needs_fill(&self, off: u64, len: u64) -> Vec<u64> {
        let bs = self.bs();
        let end = off + len;
        let size = self.rec.size;
        let mut need = BTreeSet::new();
        if end > size {
            need.extend(self.needs_fill_for_resize(end));
        }
        if len > 0 {
            for b in off / bs..end.div_ceil(bs) {
                let start = b * bs;
                if start >= size || self.is_present(b) || self.base_block(b).is_none() {
                    continue;
                }
                if !(off <= start && end >= start + self.block_len(b)) {
                    need.insert(b);
                }
            }
        }
        need.into_iter().collect()
    }

    /// Blocks that must be present before the size changes to `new_size`: the one holding the
    /// current end (growing keeps its bytes and zero-fills after them) or the new end
    /// (shrinking keeps the start of that block).
    pub fn needs_fill_for_resize(&self, new_size: u64) -> Vec<u64> {
        let bs = self.bs();
        let edge = if new_size >= self.rec.size { self.rec.size } else { new_size };
        if edge.is_multiple_of(bs) {
            return Vec::new();
        }
        let b = edge / bs;
        if self.is_present(b) || self.base_block(b).is_none() { Vec::new() } else { vec![b] }
    }

    /// Changes the size (the edge block must be present, see [`Self::needs_fill_for_resize`]).
    /// Returns whether a block became dirty that was not (the record must then be rewritten:
    /// recovery trusts it for every block below the smaller of its size and the file's).
    pub fn resize(&mut self, new_size: u64) -> VfsResult<bool> {
        let bs = self.bs();
        let old = self.rec.size;
        if new_size == old {
            return Ok(false);
        }
        self.file.set_len(new_size)?;
        self.rec.size = new_size;
        self.rec.changed = true;
        let mut newly_dirty = false;
        if new_size > old {
            // The old edge block and every block after it now hold zeros past the old end.
            for b in old / bs..new_size.div_ceil(bs) {
                self.rec.present.insert(b);
                newly_dirty |= self.rec.dirty.insert(b);
            }
        } else {
            let keep = new_size.div_ceil(bs);
            self.rec.present.retain(|b| *b < keep);
            self.rec.dirty.retain(|b| *b < keep);
            // Counting would miss this one when a block past the new end left the set: the
            // set shrank, yet the new edge block (cut short) is dirty now.
            if !new_size.is_multiple_of(bs) {
                newly_dirty |= self.rec.dirty.insert(new_size / bs);
            }
        }
        Ok(newly_dirty)
    }

    /// Writes `data` at `off` (growing the file if needed; partially covered blocks must be
    /// present). Returns whether a block became dirty that was not.
    pub fn write(&mut self, off: u64, data: &[u8]) -> VfsResult<bool> {
        let end = off + data.len() as u64;
        let mut newly_dirty = false;
        if end > self.rec.size {
            newly_dirty |= self.resize(end)?;
        }
        write_all_at(&self.file, data, off)?;
        let bs = self.bs();
        if !data.is_empty() {
            for b in off / bs..end.div_ceil(bs) {
                self.rec.present.insert(b);
                newly_dirty |= self.rec.dirty.insert(b);
            }
        }
        Ok(newly_dirty)
    }

    /// Reads staged bytes (the caller checks the blocks are present).
    pub fn read_at(&self, off: u64, len: usize) -> VfsResult<Vec<u8>> {
        let mut buf = vec![0u8; len];
        read_exact_at(&self.file, &mut buf, off)?;
        Ok(buf)
    }

    /// Whether a commit has anything to say.
    pub fn has_changes(&self) -> bool {
        self.rec.changed || !self.rec.dirty.is_empty()
    }
}

fn rand_u64() -> u64 {
    // Unique enough for file names in one directory: time and a process-wide counter.
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    t ^ N.fetch_add(1, Ordering::Relaxed).rotate_left(48)
}
