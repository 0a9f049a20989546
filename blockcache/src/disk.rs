//! The SSD tier: one file per cached block under `<dir>/blocks/<space>/<ab>/<hash>`.
//!
//! File format (version [`FORMAT_VERSION`]), all integers little-endian:
//!
//! ```text
//! 0   magic "NMBC"
//! 4   u16 format version
//! 6   u16 reserved (0)
//! 8   u64 block length
//! 16  u32 chunk size (CHUNK)
//! 20  u32 chunk count
//! 24  [32] BLAKE3 of the whole block (must equal the file's key)
//! 56  [32] per chunk: its tag, the chaining value of its subtree of the block's BLAKE3 tree
//! ... zero padding to a multiple of 4096, then the block's bytes
//! ```
//!
//! Per-chunk tags let a range read verify only the chunks it touches (a 4 KiB read checks one
//! 16 KiB chunk, not the 4 MiB block), so a flipped byte or a torn write is never served while
//! small random reads stay cheap. The tags come from the pass that verified the block against
//! its hash ([`crate::verify`]): admission hashes nothing again. Version 1 entries (tags were
//! separate hashes of each chunk, a second pass) are dropped at start like any other version.
//! A file whose size does not match its header is truncated and dropped. Entries are written to
//! `tmp/` and renamed, so a crash leaves no half entry under a final name; what a power cut
//! might tear is caught by the tags. A writer can ask for `O_DIRECT` writes
//! ([`DiskStore::with_direct_writes`]); the entry is the same file either way.
//!
//! A `LOCK` file held with an exclusive lock keeps a second gateway off the same directory.
//!
//! The entries read last are kept open (`MAX_OPEN`, Unix) with their header's length and tag
//! table: a read of one skips the path walk, the open, the close and the two reads of the
//! header. Entries are made whole and renamed into place, never changed in place by this
//! store; so each read's `fstat` checks the size, finds a deleted file deleted, and compares
//! the file's change time (`ctime`, which no call can set back) with the one seen at the open:
//! a file written in place since (damaged, or another entry copied over it) is opened afresh,
//! and answers as a fresh open would. Only a file whose change time is `SETTLED` in the past
//! is kept, so that a later change cannot fall in the same tick of the coarse clock that file
//! times come from. Removals, rewrites and purges through this store let go of it (see
//! [`DiskStore::remove`]).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::Key;
use crate::buf::BlockBuf;
use crate::pio::read_exact_at;
use crate::verify::{Verified, piece_matches};

pub const MAGIC: &[u8; 4] = b"NMBC";
/// Bump when the layout changes; entries of another version are deleted at start.
pub const FORMAT_VERSION: u16 = 2;
/// Verification granularity: small enough that a 4 KiB read hashes little, large enough that
/// the tag table of a 4 MiB block stays at 4 KiB.
pub const CHUNK: usize = crate::verify::PIECE;
const FIXED_HEADER: usize = 56;
const TAG: usize = 32;
const ALIGN: usize = 4096;
// `O_DIRECT` writes go from `BlockBuf`s, aligned to their page: the same alignment.
const _: () = assert!(ALIGN == crate::buf::PAGE);
/// With [`DiskStore::with_direct_writes`], entries of blocks this large and up are written
/// with `O_DIRECT`. Smaller ones cost little to copy into the page cache, and a direct write
/// waits for the device: a drive reading many small files would wait on each one.
const DIRECT_FROM: usize = 1 << 20;

/// Why the SSD tier could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another gateway holds the directory: refusing is the only safe answer.
    #[error("{0}")]
    InUse(String),
    /// The directory is unusable (missing permissions, not a directory, ...).
    #[error("{0}")]
    Unusable(String),
}

#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("cache entry missing")]
    Missing,
    #[error("cache entry corrupt: {0}")]
    Corrupt(&'static str),
    #[error("cache I/O error: {0}")]
    Io(#[from] io::Error),
}

pub fn data_offset(len: usize) -> usize {
    let header = FIXED_HEADER + len.div_ceil(CHUNK) * TAG;
    header.div_ceil(ALIGN) * ALIGN
}

/// Bytes an entry takes on disk (what the size bound counts).
pub fn entry_size(len: usize) -> u64 {
    (data_offset(len) + len) as u64
}

pub fn encode_header(hash: &[u8; 32], block: &Verified) -> Vec<u8> {
    let data = block.data();
    let n = data.len().div_ceil(CHUNK);
    let mut h = Vec::with_capacity(data_offset(data.len()));
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&0u16.to_le_bytes());
    h.extend_from_slice(&(data.len() as u64).to_le_bytes());
    h.extend_from_slice(&(CHUNK as u32).to_le_bytes());
    h.extend_from_slice(&(n as u32).to_le_bytes());
    h.extend_from_slice(hash);
    for t in block.tags().iter().take(n) {
        h.extend_from_slice(t);
    }
    h.resize(data_offset(data.len()), 0);
    h
}

/// The parts of a header needed to read; checks magic, version and chunk size.
struct Header {
    len: usize,
    hash: [u8; 32],
}

fn parse_fixed(buf: &[u8]) -> Result<Header, DiskError> {
    if buf.len() < FIXED_HEADER || &buf[..4] != MAGIC {
        return Err(DiskError::Corrupt("bad magic"));
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]);
    if version != FORMAT_VERSION {
        return Err(DiskError::Corrupt("other format version"));
    }
    let mut u64b = [0u8; 8];
    u64b.copy_from_slice(&buf[8..16]);
    let len = usize::try_from(u64::from_le_bytes(u64b)).map_err(|_| DiskError::Corrupt("length"))?;
    let chunk = u32::from_le_bytes([buf[16], buf[17], buf[18], buf[19]]) as usize;
    let n = u32::from_le_bytes([buf[20], buf[21], buf[22], buf[23]]) as usize;
    if chunk != CHUNK || n != len.div_ceil(CHUNK) {
        return Err(DiskError::Corrupt("chunk table"));
    }
    let mut hash = [0u8; 32];
    hash.copy_from_slice(&buf[24..56]);
    Ok(Header { len, hash })
}

/// Entries kept open between reads, where a deleted file can be told from an open one (Unix).
const KEEP_OPEN: bool = cfg!(unix);
/// A 1 GiB working set of 4 MiB blocks: file descriptors are cheap (deployments allow 65,536),
/// and the tag tables take at most 8 KiB each.
const MAX_OPEN: usize = 256;

/// How long ago a file must have last changed to be kept open: file times come from a coarse
/// clock (a few milliseconds), and a change in the same tick would look like none.
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// An entry's file and what its header said when it was opened.
struct OpenEntry {
    file: File,
    /// The block's length.
    len: usize,
    /// Tags of the chunks from `first` on, `TAG` bytes each, for the reads to check against:
    /// all of them for an entry kept open, those of the one read otherwise.
    tags: Box<[u8]>,
    first: usize,
    /// The file's change time when its header was read.
    changed: Changed,
}

/// The entries kept open, by key.
#[derive(Default)]
struct OpenEntries {
    files: HashMap<Key, Arc<OpenEntry>>,
    /// Bumped, under the lock, by every removal or rewrite: a file opened before one is not
    /// kept (it may be the old entry's, whose space it would hold).
    changes: u64,
}

pub struct DiskStore {
    root: PathBuf,
    open: Mutex<OpenEntries>,
    /// Held for the life of the tier: the exclusive lock on `LOCK`.
    _lock: File,
    /// Entries are written around the page cache ([`DiskStore::with_direct_writes`]).
    direct: bool,
    /// Large reads go into reused buffers ([`DiskStore::with_pooled_reads`]).
    pooled: bool,
    /// `SETTLED`, shortened by tests.
    settled: std::time::Duration,
}

impl DiskStore {
    /// Opens (creating) the cache directory and takes its lock. `holder` names the kind of
    /// process in the refusal message ("gateway", "mount").
    pub fn open(root: &Path, holder: &str) -> Result<Self, OpenError> {
        let prepare = || -> io::Result<File> {
            fs::create_dir_all(root.join("blocks"))?;
            fs::create_dir_all(root.join("tmp"))?;
            OpenOptions::new().create(true).truncate(false).read(true).write(true).open(root.join("LOCK"))
        };
        let mut lock =
            prepare().map_err(|e| OpenError::Unusable(format!("cannot use the cache dir {}: {e}", root.display())))?;
        if lock.try_lock().is_err() {
            let pid = fs::read_to_string(root.join("LOCK")).unwrap_or_default();
            return Err(OpenError::InUse(format!(
                "the cache dir {} is in use by another {holder}{}; give each {holder} its own --cache-dir",
                root.display(),
                if pid.trim().is_empty() { String::new() } else { format!(" (pid {})", pid.trim()) }
            )));
        }
        let _ = lock.set_len(0);
        let _ = write!(lock, "{}", std::process::id());
        // Leftovers of writes or purges cut short by a crash.
        if let Ok(rd) = fs::read_dir(root.join("tmp")) {
            for e in rd.flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        if let Ok(rd) = fs::read_dir(root) {
            for e in rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("purged-")) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            open: Default::default(),
            _lock: lock,
            direct: false,
            pooled: false,
            settled: SETTLED,
        })
    }

    /// Writes entries of 1 MiB and up (`DIRECT_FROM`) with `O_DIRECT` where the file system
    /// takes it (Linux; elsewhere, and where it is refused, through the page cache as before). For a writer whose entries
    /// are not read again soon (the drive: what it reads is in its memory tier and in the
    /// reader's page cache already), a buffered write costs several times the CPU of a
    /// direct one: a copy into the page cache, then writeback, then reclaim. Measured with
    /// `dd` of 1 GiB here: 3.96 s of system time buffered, 0.20 s direct.
    pub fn with_direct_writes(mut self) -> Self {
        self.direct = true;
        self
    }

    /// Reads of 1 MiB and up (whole blocks, mostly) go into [`crate::buf`]'s reused buffers
    /// instead of fresh ones (for the drive: a sequential reader of a cached file reads block
    /// after block). A gateway, whose memory bound is tight, does not keep idle buffers.
    pub fn with_pooled_reads(mut self) -> Self {
        self.pooled = true;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &Key) -> PathBuf {
        let hex = blake3::Hash::from_bytes(key.1).to_hex();
        self.root.join("blocks").join(key.0.to_string()).join(&hex[..2]).join(hex.as_str())
    }

    /// Writes a verified block as a cache entry (temp file, then rename).
    pub fn write(&self, key: &Key, block: &Verified) -> io::Result<()> {
        let data = block.data();
        let dest = self.path(key);
        if let Some(dir) = dest.parent() {
            fs::create_dir_all(dir)?;
        }
        let tmp_dir = self.root.join("tmp");
        fs::create_dir_all(&tmp_dir)?;
        let tmp = tmp_dir.join(uuid::Uuid::new_v4().to_string());
        let result = (|| {
            let header = encode_header(&key.1, block);
            let written = self.direct && data.len() >= DIRECT_FROM && direct::write_new(&tmp, &header, data)?;
            if !written {
                let mut f = File::create(&tmp)?;
                f.write_all(&header)?;
                f.write_all(data)?;
            }
            match fs::rename(&tmp, &dest) {
                // A purge moved the directory away meanwhile: make it again, once.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if let Some(dir) = dest.parent() {
                        fs::create_dir_all(dir)?;
                    }
                    fs::rename(&tmp, &dest)
                }
                other => other,
            }
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        self.let_go(key);
        result
    }

    /// Reads `from..to` of a cached block, verifying the chunks it covers. Also returns the
    /// block's full length.
    pub fn read(&self, key: &Key, from: usize, to: usize) -> Result<(Bytes, usize), DiskError> {
        let opened = self.opened(
            key,
            |path| match File::open(path) {
                Ok(f) => Ok(Some(f)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(DiskError::Missing),
                Err(e) => Err(e.into()),
            },
            read_exact_at,
            from..to,
        );
        let Some((e, meta)) = self.kept_result(key, opened)? else { return Err(DiskError::Missing) };
        self.kept_result(key, read_entry(&e, &meta, from, to, self.pooled, read_exact_at))
    }

    /// The entry of `key` and its file's metadata, for a read of bytes `range`: kept open
    /// (unless its file changed since), or opened with `open` and its header read with
    /// `read_exact` (and then kept, if its file has settled and no removal or rewrite came in
    /// between; an entry not kept reads only the tags of `range`). `Ok(None)`: `open` could not
    /// say without waiting.
    fn opened(
        &self,
        key: &Key,
        open: impl FnOnce(&Path) -> Result<Option<File>, DiskError>,
        read_exact: impl Fn(&File, &mut [u8], u64) -> io::Result<()>,
        range: Range<usize>,
    ) -> Result<Option<(Arc<OpenEntry>, fs::Metadata)>, DiskError> {
        let (kept, changes) = {
            let open = lock(&self.open);
            (open.files.get(key).cloned(), open.changes)
        };
        if let Some(e) = kept {
            let meta = e.file.metadata()?;
            if changed(&meta) == e.changed {
                return Ok(Some((e, meta)));
            }
            // Written in place since it was opened (by hand: this store never does).
            lock(&self.open).files.remove(key);
        }
        let Some(file) = open(&self.path(key))? else { return Ok(None) };
        let meta = file.metadata()?;
        let keep = KEEP_OPEN && settled(&meta, self.settled);
        let f = Arc::new(open_entry(file, key, changed(&meta), (!keep).then_some(range), read_exact)?);
        let mut open = lock(&self.open);
        if keep && open.changes == changes {
            if open.files.len() >= MAX_OPEN
                && let Some(old) = open.files.keys().next().copied()
            {
                open.files.remove(&old);
            }
            open.files.insert(*key, Arc::clone(&f));
        }
        Ok(Some((f, meta)))
    }

    /// Passes a read's result on; a failed read lets go of the entry's file (it is to be
    /// opened again, or the entry is about to be removed).
    fn kept_result<T>(&self, key: &Key, result: Result<T, DiskError>) -> Result<T, DiskError> {
        if result.is_err() {
            lock(&self.open).files.remove(key);
        }
        result
    }

    /// Stops keeping `key`'s file (all files, for `None`): after its entry is replaced, and
    /// both before and after it is removed (a read that opened it in between then cannot keep
    /// it).
    fn let_go_of(&self, key: Option<&Key>) {
        let mut open = lock(&self.open);
        open.changes += 1;
        match key {
            Some(k) => {
                open.files.remove(k);
            }
            None => open.files.clear(),
        }
    }

    fn let_go(&self, key: &Key) {
        self.let_go_of(Some(key));
    }

    /// [`DiskStore::read`] if it can be done without waiting for the disk: the entry's path is
    /// in the kernel's lookup cache and every byte read is in the page cache (Linux:
    /// `openat2(RESOLVE_CACHED)`, `preadv2(RWF_NOWAIT)`). `Ok(None)` otherwise, and on other
    /// systems: the caller reads on a blocking thread instead. A hot small read then costs an
    /// `fstat` and one `pread` for an entry kept open (an open and two more `pread`s for its
    /// header otherwise) in the caller's thread instead of a hand-off to a blocking thread and
    /// back, which cost more than all of them.
    pub fn read_cached(&self, key: &Key, from: usize, to: usize) -> Result<Option<(Bytes, usize)>, DiskError> {
        let read = self.opened(key, nowait::open, nowait::read_exact_at, from..to).and_then(|e| {
            e.map(|(e, meta)| read_entry(&e, &meta, from, to, self.pooled, nowait::read_exact_at)).transpose()
        });
        match read {
            Err(DiskError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            other => self.kept_result(key, other),
        }
    }

    /// The whole cached block, verified.
    pub fn read_whole(&self, key: &Key) -> Result<Bytes, DiskError> {
        // An empty range reads only the header, which gives the block's length.
        let (_, len) = self.read(key, 0, 0)?;
        self.read(key, 0, len).map(|(data, _)| data)
    }

    /// Deletes `key`'s entry. A file kept open for it is let go of before and after the
    /// unlink, so a read that opened it in between cannot keep it (and hold the space).
    pub fn remove(&self, key: &Key) {
        self.let_go(key);
        let _ = fs::remove_file(self.path(key));
        self.let_go(key);
    }

    /// Every entry present at start, with its on-disk size; broken ones are deleted.
    pub fn scan(&self) -> Vec<(Key, u64)> {
        let mut found = Vec::new();
        let Ok(spaces) = fs::read_dir(self.root.join("blocks")) else { return found };
        for space_dir in spaces.flatten() {
            let Some(space) = space_dir.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
            let Ok(fans) = fs::read_dir(space_dir.path()) else { continue };
            for fan in fans.flatten() {
                let Ok(files) = fs::read_dir(fan.path()) else { continue };
                for file in files.flatten() {
                    let path = file.path();
                    match Self::check_entry(&path, space) {
                        Some(entry) => found.push(entry),
                        None => {
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
            }
        }
        found
    }

    fn check_entry(path: &Path, space: i64) -> Option<(Key, u64)> {
        let name = path.file_name()?.to_str()?;
        let hash = crate::hash_from_hex(name)?;
        let f = File::open(path).ok()?;
        let mut fixed = [0u8; FIXED_HEADER];
        read_exact_at(&f, &mut fixed, 0).ok()?;
        let h = parse_fixed(&fixed).ok()?;
        let size = f.metadata().ok()?.len();
        (h.hash == hash && size == entry_size(h.len)).then_some(((space, hash), size))
    }

    /// Deletes every entry. The directory is renamed aside first (atomic, and immune to writes
    /// racing into it), then removed.
    pub fn purge(&self) -> io::Result<()> {
        self.let_go_of(None);
        let aside = self.root.join(format!("purged-{}", uuid::Uuid::new_v4()));
        let moved = fs::rename(self.root.join("blocks"), &aside);
        self.let_go_of(None);
        match moved {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        fs::create_dir_all(self.root.join("blocks"))?;
        let _ = fs::remove_dir_all(&aside);
        Ok(())
    }
}

/// The entry of `key` open as `file`, with its header read with `read_exact`: the header
/// must be of this format and name `key`'s block. Its tags: those of the chunks that bytes
/// `only` cover, or all of them.
fn open_entry(
    file: File,
    key: &Key,
    changed: Changed,
    only: Option<Range<usize>>,
    read_exact: impl Fn(&File, &mut [u8], u64) -> io::Result<()>,
) -> Result<OpenEntry, DiskError> {
    let mut fixed = [0u8; FIXED_HEADER];
    read_exact(&file, &mut fixed, 0).map_err(short)?;
    let h = parse_fixed(&fixed)?;
    if h.hash != key.1 {
        return Err(DiskError::Corrupt("entry holds another block"));
    }
    let chunks = match only {
        // An empty or impossible range reads no bytes, so needs no tag (read_entry refuses
        // the impossible one).
        Some(r) if r.start >= r.end || r.end > h.len => 0..0,
        Some(r) => r.start / CHUNK..(r.end - 1) / CHUNK + 1,
        None => 0..h.len.div_ceil(CHUNK),
    };
    let mut tags = vec![0u8; chunks.len() * TAG].into_boxed_slice();
    read_exact(&file, &mut tags, (FIXED_HEADER + chunks.start * TAG) as u64).map_err(short)?;
    Ok(OpenEntry { file, len: h.len, tags, first: chunks.start, changed })
}

/// `from..to` of the entry `e` (its file's metadata `meta`), read with `read_exact` (into a
/// reused buffer if `pooled`), the chunks it covers checked against its tags; and the block's
/// full length.
fn read_entry(
    e: &OpenEntry,
    meta: &fs::Metadata,
    from: usize,
    to: usize,
    pooled: bool,
    read_exact: impl Fn(&File, &mut [u8], u64) -> io::Result<()>,
) -> Result<(Bytes, usize), DiskError> {
    let (f, len) = (&e.file, e.len);
    let off = data_offset(len);
    // A file kept open may have been deleted since (by hand, or the tree removed).
    if is_deleted(meta) {
        return Err(DiskError::Missing);
    }
    if meta.len() != (off + len) as u64 {
        return Err(DiskError::Corrupt("truncated or oversized"));
    }
    if from > to || to > len {
        return Err(DiskError::Corrupt("range outside the block"));
    }
    if from == to {
        return Ok((Bytes::new(), len));
    }
    let (c0, c1) = (from / CHUNK, (to - 1) / CHUNK);
    let tags = c0
        .checked_sub(e.first)
        .and_then(|i| e.tags.get(i * TAG..(c1 + 1 - e.first) * TAG))
        .ok_or(DiskError::Corrupt("tags of another range"))?;
    let start = c0 * CHUNK;
    let end = ((c1 + 1) * CHUNK).min(len);
    let buf = if pooled {
        let mut buf = BlockBuf::zeroed(end - start);
        read_exact(f, buf.as_mut_slice(), (off + start) as u64).map_err(short)?;
        buf.freeze()
    } else {
        let mut buf = vec![0u8; end - start];
        read_exact(f, &mut buf, (off + start) as u64).map_err(short)?;
        Bytes::from(buf)
    };
    for (i, chunk) in buf.chunks(CHUNK).enumerate() {
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&tags[i * TAG..(i + 1) * TAG]);
        if !piece_matches(&tag, c0 + i, chunk, len) {
            return Err(DiskError::Corrupt("chunk checksum mismatch"));
        }
    }
    Ok((buf.slice(from - start..to - start), len))
}

/// A file's change time: seconds and nanoseconds.
type Changed = (i64, i64);

#[cfg(unix)]
fn changed(meta: &fs::Metadata) -> Changed {
    use std::os::unix::fs::MetadataExt;
    (meta.ctime(), meta.ctime_nsec())
}

/// Whether the file last changed at least `settled` ago.
#[cfg(unix)]
fn settled(meta: &fs::Metadata, settled: std::time::Duration) -> bool {
    let (secs, nanos) = changed(meta);
    let at = std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    at + settled <= now
}

/// Files are not kept open here ([`KEEP_OPEN`]).
#[cfg(not(unix))]
fn changed(_: &fs::Metadata) -> Changed {
    (0, 0)
}

#[cfg(not(unix))]
fn settled(_: &fs::Metadata, _: std::time::Duration) -> bool {
    false
}

#[cfg(unix)]
fn is_deleted(meta: &fs::Metadata) -> bool {
    std::os::unix::fs::MetadataExt::nlink(meta) == 0
}

/// Files are not kept open here ([`KEEP_OPEN`]): a file just opened is not deleted.
#[cfg(not(unix))]
fn is_deleted(_: &fs::Metadata) -> bool {
    false
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opening and reading without waiting for the disk, where the kernel can say so.
#[cfg(target_os = "linux")]
mod nowait {
    use std::fs::File;
    use std::io::{self, ErrorKind};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
    use rustix::io::{Errno, ReadWriteFlags};

    /// Cleared for good when the kernel lacks `RESOLVE_CACHED` or `RWF_NOWAIT` (before 5.12,
    /// or a file system without them): every read then goes the blocking way.
    static SUPPORTED: AtomicBool = AtomicBool::new(true);

    fn unsupported(e: Errno) -> bool {
        matches!(e, Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP | Errno::TOOBIG)
    }

    /// The file at `path` if its every path component is cached (`None`: it was not, or this
    /// kernel cannot tell).
    pub(super) fn open(path: &Path) -> Result<Option<File>, super::DiskError> {
        if !SUPPORTED.load(Ordering::Relaxed) {
            return Ok(None);
        }
        match rustix::fs::openat2(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty(), ResolveFlags::CACHED) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::NOENT) => Err(super::DiskError::Missing),
            Err(Errno::AGAIN) => Ok(None),
            Err(e) if unsupported(e) => {
                SUPPORTED.store(false, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(io::Error::from(e).into()),
        }
    }

    /// Fills `buf` from `offset` out of the page cache; [`ErrorKind::WouldBlock`] if a byte
    /// is not there (or arrives only in part).
    pub(super) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let want = buf.len();
        match rustix::io::preadv2(file, &mut [io::IoSliceMut::new(buf)], offset, ReadWriteFlags::NOWAIT) {
            Ok(n) if n == want => Ok(()),
            Ok(0) if want > 0 => Err(io::Error::new(ErrorKind::UnexpectedEof, "file ends before the requested range")),
            Ok(_) | Err(Errno::AGAIN) => Err(ErrorKind::WouldBlock.into()),
            Err(e) if unsupported(e) => {
                SUPPORTED.store(false, Ordering::Relaxed);
                Err(ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Writing new entries around the page cache.
#[cfg(target_os = "linux")]
mod direct {
    use std::fs::File;
    use std::io;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{CWD, Mode, OFlags};
    use rustix::io::Errno;

    use super::ALIGN;
    use crate::buf::BlockBuf;
    use crate::pio::write_all_at;

    /// Cleared for good when the file system refuses `O_DIRECT` (tmpfs before 6.6, some FUSE
    /// or network file systems): entries are then written through the page cache.
    static SUPPORTED: AtomicBool = AtomicBool::new(true);

    fn aligned(data: &[u8]) -> bool {
        data.as_ptr().align_offset(ALIGN) == 0 && data.len().is_multiple_of(ALIGN)
    }

    /// Direct writes made (the tests check that large entries took this path).
    #[cfg(test)]
    pub(super) static WRITTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn refused(e: &io::Error) -> bool {
        e.raw_os_error() == Some(Errno::INVAL.raw_os_error())
    }

    /// Writes a new file at `path` holding `header` then `data` with `O_DIRECT`. `Ok(false)`:
    /// it was refused, and nothing is left at `path`; the caller writes it the usual way.
    /// `header`'s length is a multiple of [`ALIGN`]; `data` is written from where it is when it
    /// is aligned (the drive's fetched blocks are), else from an aligned copy padded to a
    /// multiple of [`ALIGN`] and the file cut back to its length.
    pub(super) fn write_new(path: &Path, header: &[u8], data: &[u8]) -> io::Result<bool> {
        if !SUPPORTED.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::DIRECT;
        let f = match rustix::fs::openat(CWD, path, flags, Mode::from_raw_mode(0o644)) {
            Ok(fd) => File::from(fd),
            // The file system does not do it. Linux creates the file before it finds out, and
            // `O_EXCL` made it ours: remove it.
            Err(Errno::INVAL | Errno::OPNOTSUPP) => {
                SUPPORTED.store(false, Ordering::Relaxed);
                let _ = std::fs::remove_file(path);
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        let hl = header.len();
        // The first write tells whether this file system takes our alignment at all; a later
        // refusal (a short write left the rest unaligned) gives up on this entry only.
        let (first, rest) = if aligned(data) {
            let mut h = BlockBuf::zeroed(hl);
            h.as_mut_slice().copy_from_slice(header);
            match write_all_at(&f, h.as_mut_slice(), 0) {
                Ok(()) => (Ok(()), write_all_at(&f, data, hl as u64)),
                Err(e) => (Err(e), Ok(())),
            }
        } else {
            // Page-aligned like every `BlockBuf` (`buf::PAGE` is `ALIGN`).
            let mut all = BlockBuf::zeroed(hl + data.len().div_ceil(ALIGN) * ALIGN);
            let b = all.as_mut_slice();
            b[..hl].copy_from_slice(header);
            b[hl..hl + data.len()].copy_from_slice(data);
            match write_all_at(&f, b, 0) {
                Ok(()) => (Ok(()), f.set_len((hl + data.len()) as u64)),
                Err(e) => (Err(e), Ok(())),
            }
        };
        let first_refused = matches!(&first, Err(e) if refused(e));
        match first.and(rest) {
            Ok(()) => {
                #[cfg(test)]
                WRITTEN.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Err(e) if refused(&e) => {
                if first_refused {
                    SUPPORTED.store(false, Ordering::Relaxed);
                }
                drop(f);
                std::fs::remove_file(path)?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod direct {
    use std::io;
    use std::path::Path;

    pub(super) fn write_new(_: &Path, _: &[u8], _: &[u8]) -> io::Result<bool> {
        Ok(false)
    }
}

/// Elsewhere every read goes to a blocking thread.
#[cfg(not(target_os = "linux"))]
mod nowait {
    use std::fs::File;
    use std::io::{self, ErrorKind};
    use std::path::Path;

    pub(super) fn open(_: &Path) -> Result<Option<File>, super::DiskError> {
        Ok(None)
    }

    pub(super) fn read_exact_at(_: &File, _: &mut [u8], _: u64) -> io::Result<()> {
        Err(ErrorKind::WouldBlock.into())
    }
}

fn short(e: io::Error) -> DiskError {
    if e.kind() == io::ErrorKind::UnexpectedEof { DiskError::Corrupt("truncated") } else { DiskError::Io(e) }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    fn key(data: &[u8]) -> Key {
        (1, *blake3::hash(data).as_bytes())
    }

    fn verified(data: &[u8]) -> Verified {
        Verified::hash_new(Bytes::copy_from_slice(data)).1
    }

    #[test]
    fn round_trip_and_ranges_across_chunks() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        assert_eq!(&d.read(&k, 0, data.len())?.0[..], &data[..]);
        for (a, b) in [(0, 1), (16383, 16385), (50_000, 50_004), (99_999, 100_000), (7, 7)] {
            assert_eq!(&d.read(&k, a, b)?.0[..], &data[a..b], "range {a}..{b}");
        }
        assert_eq!(d.scan(), vec![(k, entry_size(data.len()))]);
        Ok(())
    }

    #[test]
    fn flipped_byte_and_truncation_are_detected() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data = vec![7u8; 40_000];
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        let path = d.path(&k);
        let mut raw = fs::read(&path)?;
        let off = data_offset(data.len());
        raw[off + 20_000] ^= 1;
        fs::write(&path, &raw)?;
        assert!(matches!(d.read(&k, 19_000, 21_000), Err(DiskError::Corrupt(_))));
        // A chunk the flip is not in still verifies: only touched chunks are checked.
        assert!(d.read(&k, 0, 100).is_ok());
        raw[off + 20_000] ^= 1;
        raw.truncate(raw.len() - 10);
        fs::write(&path, &raw)?;
        assert!(matches!(d.read(&k, 0, 10), Err(DiskError::Corrupt(_))));
        assert!(d.scan().is_empty(), "a truncated entry is dropped at start");
        assert!(!path.exists());
        Ok(())
    }

    /// A file kept open answers as a fresh open would: its data, magic or a tag changed in
    /// place, or another block's entry copied over it, is refused; one deleted by hand is
    /// missing; a file changed moments ago is not kept; removals and rewrites through the
    /// store let go of it; a file opened across a removal is not kept; no more than
    /// `MAX_OPEN` are.
    #[cfg(unix)]
    #[test]
    fn kept_files_answer_as_fresh_opens() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut d = DiskStore::open(dir.path(), "gateway")?;
        let (a, b) = (vec![1u8; 40_000], vec![2u8; 40_000]);
        let (ka, kb) = (key(&a), key(&b));
        d.write(&ka, &verified(&a))?;
        d.settled = std::time::Duration::from_secs(3600);
        assert!(
            d.read(&ka, 0, 10).is_ok() && !lock(&d.open).files.contains_key(&ka),
            "a file just written is not kept"
        );
        // Files count as settled at once; each change below comes a clock tick after the last.
        d.settled = std::time::Duration::ZERO;
        let tick = || std::thread::sleep(std::time::Duration::from_millis(30));
        let kept = |k: &Key| lock(&d.open).files.contains_key(k);
        d.write(&kb, &verified(&b))?;
        assert_eq!(&d.read(&ka, 0, 10)?.0[..], &a[..10]);
        assert!(kept(&ka), "kept after a read");
        assert_eq!(&d.read(&ka, 30_000, 30_010)?.0[..], &a[30_000..30_010]);

        // Changed in place under the open file (data, magic, a tag): opened afresh, refused.
        let off = data_offset(a.len());
        for (what, at) in [("a flipped byte", off + 5), ("a damaged magic", 0), ("a flipped tag", FIXED_HEADER)] {
            let mut raw = fs::read(d.path(&ka))?;
            raw[at] ^= 1;
            tick();
            fs::write(d.path(&ka), &raw)?;
            assert!(matches!(d.read(&ka, 0, 10), Err(DiskError::Corrupt(_))), "{what}");
            assert!(!kept(&ka), "let go of after a failed read ({what})");
            d.write(&ka, &verified(&a))?;
            assert_eq!(&d.read(&ka, 0, 10)?.0[..], &a[..10]);
            assert!(kept(&ka));
        }

        tick();
        fs::copy(d.path(&kb), d.path(&ka))?;
        assert!(matches!(d.read(&ka, 0, 10), Err(DiskError::Corrupt(_))), "another block's entry");
        assert!(!kept(&ka), "let go of after a failed read");

        d.write(&ka, &verified(&a))?;
        assert!(d.read(&ka, 0, 10).is_ok() && kept(&ka));
        fs::remove_file(d.path(&ka))?;
        assert!(matches!(d.read(&ka, 0, 10), Err(DiskError::Missing)), "deleted by hand");
        d.write(&ka, &verified(&a))?;
        assert!(d.read(&ka, 0, 10).is_ok());
        fs::remove_file(d.path(&ka))?;
        assert!(
            matches!(d.read_cached(&ka, 0, 10), Err(DiskError::Missing) | Ok(None)),
            "deleted, read without waiting"
        );

        assert!(d.read(&kb, 0, 10).is_ok() && kept(&kb));
        d.remove(&kb);
        assert!(!kept(&kb) && matches!(d.read(&kb, 0, 10), Err(DiskError::Missing)), "removed through the store");
        d.write(&kb, &verified(&b))?;
        assert!(d.read(&kb, 0, 10).is_ok() && kept(&kb));
        d.write(&kb, &verified(&b))?;
        assert!(!kept(&kb), "rewritten through the store");

        d.write(&ka, &verified(&a))?;
        let f = d.opened(
            &ka,
            |p| {
                let f = File::open(p)?;
                d.remove(&ka);
                Ok(Some(f))
            },
            read_exact_at,
            0..10,
        )?;
        assert!(f.is_some() && !kept(&ka), "opened across a removal");

        for i in 0..MAX_OPEN + 10 {
            let data = (i as u32).to_le_bytes().repeat(100);
            let k = key(&data);
            d.write(&k, &verified(&data))?;
            assert_eq!(&d.read(&k, 0, 4)?.0[..], &data[..4]);
        }
        assert_eq!(lock(&d.open).files.len(), MAX_OPEN);
        d.purge()?;
        assert!(lock(&d.open).files.is_empty(), "purged");
        Ok(())
    }

    #[test]
    fn second_opener_is_refused() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let _first = DiskStore::open(dir.path(), "gateway")?;
        let second = DiskStore::open(dir.path(), "gateway");
        assert!(matches!(second, Err(OpenError::InUse(m)) if m.contains("in use by another gateway")));
        Ok(())
    }

    /// Entries written around the page cache are the same files as buffered ones, whether the
    /// block sits at an aligned address with an aligned length (written from where it is) or
    /// not (written from a padded copy, the file cut back to its length); small ones are
    /// written through the page cache. Read back into reused buffers, they are the same blocks.
    #[test]
    fn direct_writes_make_the_same_entries() -> anyhow::Result<()> {
        let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let buffered = DiskStore::open(a.path(), "gateway")?;
        let direct = DiskStore::open(b.path(), "mount")?.with_direct_writes().with_pooled_reads();
        // Aligned: a page-aligned slice of a larger buffer, as the client receives blocks.
        let mut big = Bytes::from((0..4 * 1024 * 1024 + 2 * ALIGN).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let pad = big.as_ptr().align_offset(ALIGN);
        big = big.slice(pad..pad + 4 * 1024 * 1024);
        let blocks = [big, Bytes::from_static(b""), Bytes::from_static(b"x"), Bytes::from(vec![7u8; DIRECT_FROM + 5])];
        for data in blocks {
            let k = key(&data);
            let v = Verified::hash_new(data.clone()).1;
            buffered.write(&k, &v)?;
            direct.write(&k, &v)?;
            assert_eq!(fs::read(direct.path(&k))?, fs::read(buffered.path(&k))?, "{} bytes", data.len());
            assert_eq!(direct.read_whole(&k)?, data);
        }
        assert_eq!(direct.scan().len(), 4);
        // The two large ones went the direct way, the small ones through the page cache.
        #[cfg(target_os = "linux")]
        assert_eq!(direct::WRITTEN.load(std::sync::atomic::Ordering::Relaxed), 2, "this file system takes O_DIRECT");
        Ok(())
    }

    #[test]
    fn entries_of_another_format_version_are_dropped_at_start() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data = vec![3u8; 50_000];
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        assert_eq!(d.scan().len(), 1);
        let path = d.path(&k);
        let mut raw = fs::read(&path)?;
        raw[4..6].copy_from_slice(&1u16.to_le_bytes());
        fs::write(&path, &raw)?;
        assert!(matches!(d.read(&k, 0, 10), Err(DiskError::Corrupt("other format version"))));
        assert!(d.scan().is_empty());
        assert!(!path.exists(), "a version 1 entry is deleted");
        Ok(())
    }

    #[test]
    fn a_tag_is_bound_to_its_block_and_place() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        let path = d.path(&k);
        let mut raw = fs::read(&path)?;
        // Swap the tags of chunks 0 and 1: each chunk's bytes are intact, its tag is not its own.
        let (t0, t1) = (FIXED_HEADER, FIXED_HEADER + TAG);
        let first: Vec<u8> = raw[t0..t0 + TAG].to_vec();
        raw.copy_within(t1..t1 + TAG, t0);
        raw[t1..t1 + TAG].copy_from_slice(&first);
        fs::write(&path, &raw)?;
        assert!(matches!(d.read(&k, 0, 10), Err(DiskError::Corrupt(_))));
        assert!(matches!(d.read(&k, CHUNK, CHUNK + 10), Err(DiskError::Corrupt(_))));
        assert_eq!(&d.read(&k, 3 * CHUNK, 3 * CHUNK + 10)?.0[..], &data[3 * CHUNK..3 * CHUNK + 10]);
        Ok(())
    }

    #[test]
    fn a_read_from_the_page_cache_needs_no_blocking_thread() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 247) as u8).collect();
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        // Just written: the path and the bytes are in the kernel's caches.
        for (a, b) in [(0, 4096), (16383, 16385), (99_000, 100_000), (7, 7)] {
            let got = d.read_cached(&k, a, b)?;
            if cfg!(target_os = "linux") {
                let (bytes, len) = got.with_context(|| format!("{a}..{b} not read from the page cache"))?;
                assert_eq!((&bytes[..], len), (&data[a..b], data.len()), "range {a}..{b}");
            } else {
                assert!(got.is_none(), "only Linux reads without a blocking thread");
            }
        }
        // A missing entry: a miss, or (its directory's absence not cached) left to the blocking read.
        assert!(matches!(d.read_cached(&key(b"x"), 0, 1), Err(DiskError::Missing) | Ok(None)));
        // Verified like a blocking read: a flipped byte is an error, not a fallback.
        let path = d.path(&k);
        let mut raw = fs::read(&path)?;
        raw[data_offset(data.len()) + 20_000] ^= 1;
        fs::write(&path, &raw)?;
        if cfg!(target_os = "linux") {
            assert!(matches!(d.read_cached(&k, 19_000, 21_000), Err(DiskError::Corrupt(_))));
        }
        Ok(())
    }

    /// What is not in the page cache is left to a blocking thread (`None`), and read there.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_that_would_wait_for_the_disk_is_left_to_a_blocking_thread() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
        let k = key(&data);
        d.write(&k, &verified(&data))?;
        let f = File::open(d.path(&k))?;
        f.sync_all()?;
        // tmpfs keeps its pages whatever the advice: nothing to evict there.
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        let on_tmpfs = rustix::fs::statfs(dir.path())?.f_type as i64 == TMPFS_MAGIC;
        let (a, b) = (200_000, 204_096);
        if !on_tmpfs {
            // The advice is only advice: a page another CPU still holds a reference to stays
            // (seen about once in five runs beside the other tests). Asked again, it goes.
            let mut evicted = false;
            for _ in 0..100 {
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)?;
                if d.read_cached(&k, a, b)?.is_none() {
                    evicted = true;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(evicted, "read from an evicted file without waiting");
        }
        assert_eq!(&d.read(&k, a, b)?.0[..], &data[a..b]);
        // Read once, the pages are back.
        assert_eq!(d.read_cached(&k, a, b)?.map(|r| r.0), Some(Bytes::copy_from_slice(&data[a..b])));
        Ok(())
    }

    #[test]
    fn missing_file_is_a_miss() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let d = DiskStore::open(dir.path(), "gateway")?;
        assert!(matches!(d.read(&key(b"x"), 0, 1), Err(DiskError::Missing)));
        Ok(())
    }
}
