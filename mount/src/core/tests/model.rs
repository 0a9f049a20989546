//! The reference-model property test of the core: random sequences of file-system calls, as
//! the FUSE adapter (POSIX programs) and the WinFsp adapter (Windows programs) make them, run
//! against the core on the in-memory gateway and against a plain model of what a local disk
//! would do (a map of paths to bytes). After every step the two must agree: each call's answer,
//! every directory's listing (names in their stored case, kinds, sizes, the read-only
//! attribute), the size `fstat` reports through every open handle (also of files deleted or
//! replaced while open), the contents of the files the step touched (every file after
//! another device's change, the gateway's return and a remount). At the end everything is
//! closed and synced, and the gateway must hold exactly the model's tree.
//!
//! The sequences mix: create (delete-on-close, read-only), open in every mode, write at
//! offsets, append, read, truncate (by handle and by path), fsync, close, mkdir, unlink and
//! rmdir (also of open files), rename (replacing, case-only, across folders, onto open files,
//! without replace), the read-only attribute, Windows' delete disposition, Office owner files
//! (`~$name`), names Windows refuses, lookups in another case; another device writing,
//! creating, moving and deleting (delivered through the change feed); the gateway going away
//! and coming back; the mount unmounted cleanly or killed, and mounted again from its journal.
//!
//! Each flavour runs twice: with closes committing at once, and with write-back as a real
//! mount runs it (closes queue uploads for the uploader task, which then runs beside the calls
//! that follow, interleaved at every gateway call of the in-memory gateway).
//!
//! While the gateway is away, a call may fail with `Offline`; it must then change nothing.
//! Another device only touches files this mount has neither open nor changed-but-not-uploaded
//! (conflicts have their own tests in `faults`).
//!
//! Not modelled, because the core does not implement it: Windows refusing a rename that would
//! replace a read-only file (the core replaces it, as POSIX does).
//!
//! Deterministic: a fixed seed unless `NIMBUS_MODEL_SEED` (or `PROPTEST_RNG_SEED`) says
//! otherwise, `NIMBUS_MODEL_CASES` (or `PROPTEST_CASES`) cases per run (default 2,000, and
//! 1,000 with write-back: a few seconds each in a debug build) of up to `NIMBUS_MODEL_STEPS`
//! calls (default 60), each case on a single-threaded runtime. A failure prints the seed and
//! the shrunk sequence of calls (`NIMBUS_MODEL_TRACE=1` also prints the journal after every
//! call); `--nocapture` shows how often each call was made and what came of it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use nimbus_proto::names::{name_key, validate_name};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};

use super::{BS, READ, core_on};
use crate::core::fake::{FakeGateway, Item};
use crate::core::feed::FeedCursor;
use crate::core::{Fh, Ino, Kind, OpenMode, ROOT, SetAttr, Vfs, VfsError, VfsResult, is_local_only};

/// The seed when none is given: CI runs exactly these cases.
const DEFAULT_SEED: u64 = 0x0018_5EED;

/// Which adapter's calls a run makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// FUSE: unlink and rmdir by path, O_TRUNC, close = flush + release.
    Posix,
    /// WinFsp: delete-on-close and the delete disposition (the name goes at the last
    /// handle's cleanup), rename with or without replace, names Windows refuses, overwrite
    /// and set-file-size through the handle, close = cleanup + release.
    Windows,
}

/// Names drawn from a small pool, so that they collide (also in another case, and as a file
/// against a folder). The last ones are names Windows refuses.
const NAMES: &[&str] = &["a", "A", "b.txt", "B.TXT", "doc.docx", "Doc.DOCX", "~$doc.docx", "d", "D", "e"];
const BAD_NAMES: &[&str] = &["a:b", "CON", "x.", "what?", "lpt1.txt", LONG_NAME];
/// 256 bytes: one more than a name may have (ENAMETOOLONG).
const LONG_NAME: &str = "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn.txt";

#[derive(Debug, Clone, Copy)]
enum OpenKind {
    Read,
    Write,
    WriteTruncate,
    ReadTruncate,
    ReadDeleteOnClose,
    WriteDeleteOnClose,
}

/// Another device's change.
#[derive(Debug, Clone)]
enum RemoteOp {
    /// Writes `len` bytes to a file it may touch (`new`: a new file under a folder).
    Write {
        sel: u8,
        new: bool,
        name: u8,
        len: u8,
        byte: u8,
    },
    Mkdir {
        dir: u8,
        name: u8,
    },
    Delete {
        sel: u8,
    },
    Move {
        sel: u8,
        dir: u8,
        name: u8,
    },
}

/// One call. Selectors (`u8`) pick among what exists when the step runs (files, folders,
/// open handles, in a fixed order), so a shrunk sequence stays meaningful.
#[derive(Debug, Clone)]
enum Op {
    Create {
        dir: u8,
        name: u8,
        delete_on_close: bool,
        readonly: bool,
    },
    Mkdir {
        dir: u8,
        name: u8,
    },
    Open {
        file: u8,
        kind: OpenKind,
    },
    Write {
        h: u8,
        off: u8,
        len: u8,
        byte: u8,
    },
    Append {
        h: u8,
        len: u8,
        byte: u8,
    },
    Read {
        h: u8,
        off: u8,
        len: u8,
    },
    /// Through a handle open for writing (ftruncate, SetFileSize, overwrite), or by path
    /// (truncate(2)).
    Truncate {
        by_handle: bool,
        sel: u8,
        size: u8,
    },
    Fsync {
        h: u8,
    },
    Close {
        h: u8,
    },
    Unlink {
        sel: u8,
    },
    Rmdir {
        sel: u8,
    },
    Rename {
        sel: u8,
        dir: u8,
        name: u8,
        replace: bool,
    },
    /// A rename to the same name in another case.
    CaseRename {
        sel: u8,
    },
    SetReadonly {
        sel: u8,
        on: bool,
    },
    /// Windows' delete disposition, through a handle.
    SetDelete {
        h: u8,
        on: bool,
    },
    /// A lookup of an entry spelled in another case.
    Stat {
        sel: u8,
    },
    Remote(RemoteOp),
    /// The gateway goes away / comes back (the mount notices, probes and retries uploads).
    Offline,
    Online,
    /// The uploader's periodic retry of pending uploads.
    Upload,
    /// Unmounted (cleanly: handles closed, uploads flushed) or killed, then mounted again on
    /// the same journal.
    Remount {
        crash: bool,
    },
}

fn op_strategy(flavor: Flavor) -> BoxedStrategy<Op> {
    let s = any::<u8>;
    let open_kind = match flavor {
        Flavor::Posix => prop_oneof![
            3 => Just(OpenKind::Read),
            3 => Just(OpenKind::Write),
            2 => Just(OpenKind::WriteTruncate),
            1 => Just(OpenKind::ReadTruncate),
        ]
        .boxed(),
        Flavor::Windows => prop_oneof![
            3 => Just(OpenKind::Read),
            3 => Just(OpenKind::Write),
            1 => Just(OpenKind::WriteTruncate),
            1 => Just(OpenKind::ReadDeleteOnClose),
            1 => Just(OpenKind::WriteDeleteOnClose),
        ]
        .boxed(),
    };
    let remote = prop_oneof![
        (s(), any::<bool>(), s(), 1..40u8, s()).prop_map(|(sel, new, name, len, byte)| RemoteOp::Write {
            sel,
            new,
            name,
            len,
            byte
        }),
        (s(), s()).prop_map(|(dir, name)| RemoteOp::Mkdir { dir, name }),
        s().prop_map(|sel| RemoteOp::Delete { sel }),
        (s(), s(), s()).prop_map(|(sel, dir, name)| RemoteOp::Move { sel, dir, name }),
    ];
    let windows = flavor == Flavor::Windows;
    prop_oneof![
        8 => (s(), s(), s()).prop_map(move |(dir, name, flags)| Op::Create {
            dir,
            name,
            delete_on_close: windows && flags.is_multiple_of(5),
            readonly: flags % 7 == 1,
        }),
        3 => (s(), s()).prop_map(|(dir, name)| Op::Mkdir { dir, name }),
        6 => (s(), open_kind).prop_map(|(file, kind)| Op::Open { file, kind }),
        10 => (s(), 0..(4 * BS as u8), 1..(2 * BS as u8), s()).prop_map(|(h, off, len, byte)| Op::Write { h, off, len, byte }),
        3 => (s(), 1..(2 * BS as u8), s()).prop_map(|(h, len, byte)| Op::Append { h, len, byte }),
        5 => (s(), 0..(4 * BS as u8), 1..(3 * BS as u8)).prop_map(|(h, off, len)| Op::Read { h, off, len }),
        3 => (any::<bool>(), s(), 0..(4 * BS as u8)).prop_map(|(by_handle, sel, size)| Op::Truncate { by_handle, sel, size }),
        2 => s().prop_map(|h| Op::Fsync { h }),
        7 => s().prop_map(|h| Op::Close { h }),
        3 => s().prop_map(|sel| Op::Unlink { sel }),
        2 => s().prop_map(|sel| Op::Rmdir { sel }),
        5 => (s(), s(), s(), any::<bool>())
            .prop_map(move |(sel, dir, name, replace)| Op::Rename { sel, dir, name, replace: replace || !windows }),
        2 => s().prop_map(|sel| Op::CaseRename { sel }),
        2 => (s(), any::<bool>()).prop_map(|(sel, on)| Op::SetReadonly { sel, on }),
        if windows { 3 } else { 1 } => (s(), any::<bool>()).prop_map(|(h, on)| Op::SetDelete { h, on }),
        2 => s().prop_map(|sel| Op::Stat { sel }),
        4 => remote.prop_map(Op::Remote),
        1 => Just(Op::Offline),
        1 => Just(Op::Online),
        1 => Just(Op::Upload),
        1 => any::<bool>().prop_map(|crash| Op::Remount { crash }),
    ]
    .boxed()
}

// ---- the model ----

type Fid = usize;

#[derive(Debug, Clone)]
struct MFile {
    content: Vec<u8>,
    readonly: bool,
    delete_pending: bool,
    /// Still in the namespace (not deleted or replaced while open).
    linked: bool,
    /// The core's inode number, once seen: it must not change while mounted (renames keep it).
    ino: Option<Ino>,
    /// Changed here and possibly not uploaded yet (conservative: cleared only when an upload
    /// with no writer left certainly went through).
    maybe_dirty: bool,
    /// What a killed mount may leave of a file open for writing: any state it had at a
    /// close or fsync since it was last clean (`None`: not there, created since).
    durable: Vec<Option<Vec<u8>>>,
}

#[derive(Debug, Clone)]
enum MKind {
    Dir,
    File(Fid),
}

#[derive(Debug, Clone)]
struct MEntry {
    /// The stored spelling.
    name: String,
    kind: MKind,
}

#[derive(Debug, Clone)]
struct MHandle {
    fh: Fh,
    fid: Fid,
    write: bool,
}

/// Name keys from the root; the root itself is the empty path.
type Key = Vec<String>;

#[derive(Debug, Default)]
struct Model {
    entries: BTreeMap<Key, MEntry>,
    files: Vec<MFile>,
    handles: Vec<MHandle>,
    offline: bool,
}

impl Model {
    fn dirs(&self) -> Vec<Key> {
        let mut v = vec![Vec::new()];
        v.extend(self.entries.iter().filter(|(_, e)| matches!(e.kind, MKind::Dir)).map(|(k, _)| k.clone()));
        v
    }

    fn file_keys(&self) -> Vec<Key> {
        self.entries.iter().filter(|(_, e)| matches!(e.kind, MKind::File(_))).map(|(k, _)| k.clone()).collect()
    }

    fn entry_keys(&self) -> Vec<Key> {
        self.entries.keys().cloned().collect()
    }

    fn fid(&self, key: &Key) -> Option<Fid> {
        match self.entries.get(key)?.kind {
            MKind::File(f) => Some(f),
            MKind::Dir => None,
        }
    }

    fn children(&self, dir: &Key) -> Vec<(&Key, &MEntry)> {
        self.entries.iter().filter(|(k, _)| k.len() == dir.len() + 1 && k.starts_with(dir)).collect()
    }

    /// The path in stored spelling, as the gateway shows it.
    fn path(&self, key: &Key) -> String {
        let mut p = String::new();
        for i in 1..=key.len() {
            p.push('/');
            p.push_str(&self.entries[&key[..i].to_vec()].name);
        }
        if p.is_empty() { "/".into() } else { p }
    }

    fn handles_of(&self, fid: Fid) -> impl Iterator<Item = &MHandle> {
        self.handles.iter().filter(move |h| h.fid == fid)
    }

    fn writers(&self, fid: Fid) -> usize {
        self.handles_of(fid).filter(|h| h.write).count()
    }

    /// A file is touched: from now on it may differ from what the gateway holds.
    fn dirty(&mut self, fid: Fid) {
        let f = &mut self.files[fid];
        if !f.maybe_dirty {
            f.maybe_dirty = true;
            f.durable = vec![Some(f.content.clone())];
        }
    }

    /// Takes `key` and everything under it out of the namespace.
    fn remove(&mut self, key: &Key) {
        let gone: Vec<Key> = self.entries.keys().filter(|k| k.starts_with(key)).cloned().collect();
        for k in gone {
            if let Some(MEntry { kind: MKind::File(f), .. }) = self.entries.remove(&k) {
                self.files[f].linked = false;
            }
        }
    }

    /// Whether another device may touch what is at `key` (and under it): nothing open,
    /// changed-but-maybe-not-uploaded or local-only there.
    fn remote_may_touch(&self, key: &Key) -> bool {
        self.entries.iter().filter(|(k, _)| k.starts_with(key)).all(|(_, e)| match e.kind {
            MKind::Dir => true,
            MKind::File(f) => {
                !self.files[f].maybe_dirty && self.handles_of(f).next().is_none() && !is_local_only(&e.name)
            }
        })
    }
}

fn pick<T: Clone>(v: &[T], sel: u8) -> Option<T> {
    if v.is_empty() { None } else { Some(v[sel as usize % v.len()].clone()) }
}

fn name_for(flavor: Flavor, sel: u8) -> &'static str {
    // Names Windows refuses come up rarely on POSIX, more often on Windows.
    let bad = match flavor {
        Flavor::Posix => sel.is_multiple_of(16),
        Flavor::Windows => sel.is_multiple_of(5),
    };
    if bad { BAD_NAMES[(sel / 16) as usize % BAD_NAMES.len()] } else { NAMES[sel as usize % NAMES.len()] }
}

/// The error a name the gateway refuses gets: ENAMETOOLONG for a long one, else invalid.
fn name_refused(name: &str) -> Result<(), E> {
    match validate_name(name) {
        Ok(_) => Ok(()),
        Err(nimbus_proto::NameError::TooLong) => Err(E::NameTooLong),
        Err(_) => Err(E::InvalidName),
    }
}

/// The same name in another case.
fn other_case(name: &str) -> String {
    let flipped: String =
        name.chars().map(|c| if c.is_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() }).collect();
    if flipped == name { name.to_string() } else { flipped }
}

fn bytes(len: u8, byte: u8) -> Vec<u8> {
    (0..len).map(|i| byte.wrapping_add(i.wrapping_mul(7))).collect()
}

/// An error as the model predicts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum E {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    InvalidName,
    NameTooLong,
    ReadOnly,
    Denied,
    Offline,
    Invalid,
    Other,
}

fn kind(e: &VfsError) -> E {
    match e {
        VfsError::NotFound => E::NotFound,
        VfsError::Exists => E::Exists,
        VfsError::NotDir => E::NotDir,
        VfsError::IsDir => E::IsDir,
        VfsError::NotEmpty => E::NotEmpty,
        VfsError::InvalidName(_) => E::InvalidName,
        VfsError::NameTooLong => E::NameTooLong,
        VfsError::ReadOnly => E::ReadOnly,
        VfsError::Denied => E::Denied,
        VfsError::Offline => E::Offline,
        VfsError::Invalid(_) => E::Invalid,
        _ => E::Other,
    }
}

/// What a call's answer means for the model.
enum Verdict {
    /// As predicted: apply the change.
    Apply,
    /// The predicted error, or `Offline` while the gateway is away: nothing changes.
    Unchanged,
}

/// The core and its gateway, with the model beside them.
struct Run {
    flavor: Flavor,
    /// Closes queue uploads for the uploader task, as a real mount does (`--upload-delay`,
    /// here zero), instead of committing at once: uploads then run beside the calls that
    /// follow, interleaved at every gateway call.
    write_back: bool,
    uploader: Option<tokio::task::JoinHandle<()>>,
    fake: FakeGateway,
    dir: tempfile::TempDir,
    vfs: Arc<Vfs>,
    feed: FeedCursor,
    m: Model,
    stats: std::cell::RefCell<Stats>,
}

/// How often each call was made and what came of it (applied as predicted, refused as
/// predicted, refused while the gateway was away), over a whole run: printed at its end, so
/// a change that makes the generated calls miss their targets shows.
type Stats = BTreeMap<String, [u64; 3]>;

type Res<T = ()> = Result<T, String>;

impl Run {
    async fn new(flavor: Flavor, write_back: bool) -> Res<Run> {
        let fake = FakeGateway::new(BS);
        fake.set_yielding(write_back);
        // The journal's files in memory where there is a tmpfs: thousands of runs sync records.
        let dir = tempfile::Builder::new()
            .prefix("nimbus-model")
            .tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .map_err(|e| e.to_string())?;
        let vfs = core_on(&fake, dir.path(), write_back);
        let mut run = Run {
            flavor,
            write_back,
            uploader: None,
            fake,
            dir,
            vfs,
            feed: FeedCursor::default(),
            m: Model::default(),
            stats: Default::default(),
        };
        run.mount();
        run.feed().await;
        Ok(run)
    }

    /// A new core on the same gateway and journal (the old one, if any, stops at once: its
    /// uploader is aborted wherever it is, as in a killed process).
    fn mount(&mut self) {
        if let Some(u) = self.uploader.take() {
            u.abort();
        }
        self.vfs = core_on(&self.fake, self.dir.path(), self.write_back);
        if self.write_back {
            self.uploader = Some(tokio::spawn(self.vfs.clone().run_uploads()));
        }
        self.feed = FeedCursor::default();
    }

    async fn feed(&mut self) {
        let _ = self.vfs.poll_changes(&mut self.feed, 0).await;
    }

    fn verdict<T: std::fmt::Debug>(&self, what: &str, got: &VfsResult<T>, want: Result<(), E>) -> Res<Verdict> {
        let (v, col) = match (got, want) {
            (Ok(_), Ok(())) => (Verdict::Apply, 0),
            (Err(e), Err(w)) if kind(e) == w => (Verdict::Unchanged, 1),
            (Err(VfsError::Offline), _) if self.m.offline => (Verdict::Unchanged, 2),
            _ => return Err(format!("{what}: the core answered {got:?}, the model expects {want:?}")),
        };
        // The call's name (the open mode for opens, how for truncations), without its arguments.
        let words: Vec<&str> = what.split(' ').collect();
        let name = match words[0] {
            "open" => format!("open {}", words[words.len() - 1]),
            "set" => format!("set {}", words.get(1).unwrap_or(&"")),
            "truncate" if what.contains("handle") => "truncate by handle".into(),
            "truncate" => "truncate by path".into(),
            "rename" if what.ends_with("(replace false)") => "rename (no replace)".into(),
            w => w.to_string(),
        };
        self.count(&name, col);
        Ok(v)
    }

    fn count(&self, what: &str, col: usize) {
        self.stats.borrow_mut().entry(what.to_string()).or_default()[col] += 1;
    }

    /// The core's inode at `key`, looked up from the root by the stored names.
    async fn ino(&self, key: &Key) -> Res<Ino> {
        let mut ino = ROOT;
        for i in 1..=key.len() {
            let name = &self.m.entries[&key[..i].to_vec()].name;
            ino = self.vfs.lookup(ino, name).await.map_err(|e| format!("lookup {}: {e:?}", self.m.path(key)))?.ino;
        }
        Ok(ino)
    }

    fn handle(&self, h: u8) -> Option<MHandle> {
        pick(&self.m.handles, h)
    }

    fn write_handles(&self) -> Vec<MHandle> {
        self.m.handles.iter().filter(|h| h.write).cloned().collect()
    }

    fn drop_handle(&mut self, fh: Fh) {
        self.m.handles.retain(|h| h.fh != fh);
    }

    fn linked_files(&self) -> Vec<Fid> {
        (0..self.m.files.len()).filter(|f| self.m.files[*f].linked).collect()
    }

    /// A file out of the namespace with no handle left is gone for good.
    fn is_gone(&self, fid: Fid) -> bool {
        !self.m.files[fid].linked && self.m.handles_of(fid).next().is_none()
    }

    async fn step(&mut self, op: &Op) -> Res<Vec<Fid>> {
        let flavor = self.flavor;
        let mut touched = Vec::new();
        match op.clone() {
            Op::Create { dir, name, delete_on_close, readonly } => {
                let Some(parent) = pick(&self.m.dirs(), dir) else { return Ok(touched) };
                let name = name_for(flavor, name);
                let mut key = parent.clone();
                key.push(name_key(name));
                let want = if let Err(e) = name_refused(name) {
                    Err(e)
                } else if self.m.entries.contains_key(&key) {
                    Err(E::Exists)
                } else {
                    Ok(())
                };
                let pino = self.ino(&parent).await?;
                let mode = OpenMode { write: true, truncate: false, delete_on_close };
                let got = self.vfs.create(pino, name, mode, readonly).await;
                if let Verdict::Apply =
                    self.verdict(&format!("create {name} in {}", self.m.path(&parent)), &got, want)?
                {
                    let (attr, fh) = got.map_err(|e| e.to_string())?;
                    let fid = self.m.files.len();
                    self.m.files.push(MFile {
                        content: Vec::new(),
                        readonly,
                        delete_pending: delete_on_close,
                        linked: true,
                        ino: Some(attr.ino),
                        maybe_dirty: true,
                        durable: vec![None],
                    });
                    self.m.entries.insert(key, MEntry { name: name.to_string(), kind: MKind::File(fid) });
                    self.m.handles.push(MHandle { fh, fid, write: true });
                    touched.push(fid);
                }
            }
            Op::Mkdir { dir, name } => {
                let Some(parent) = pick(&self.m.dirs(), dir) else { return Ok(touched) };
                let name = name_for(flavor, name);
                let mut key = parent.clone();
                key.push(name_key(name));
                let want = if let Err(e) = name_refused(name) {
                    Err(e)
                } else if self.m.entries.contains_key(&key) {
                    Err(E::Exists)
                } else {
                    Ok(())
                };
                let pino = self.ino(&parent).await?;
                let got = self.vfs.mkdir(pino, name).await;
                if let Verdict::Apply =
                    self.verdict(&format!("mkdir {name} in {}", self.m.path(&parent)), &got, want)?
                {
                    self.m.entries.insert(key, MEntry { name: name.to_string(), kind: MKind::Dir });
                }
            }
            Op::Open { file, kind: open } => {
                let Some(key) = pick(&self.m.file_keys(), file) else { return Ok(touched) };
                let fid = self.m.fid(&key).ok_or("not a file")?;
                let (write, truncate, delete_on_close) = match open {
                    OpenKind::Read => (false, false, false),
                    OpenKind::Write => (true, false, false),
                    OpenKind::WriteTruncate => (true, true, false),
                    OpenKind::ReadTruncate => (false, true, false),
                    OpenKind::ReadDeleteOnClose => (false, false, true),
                    OpenKind::WriteDeleteOnClose => (true, false, true),
                };
                let want = if (write || truncate) && self.m.files[fid].readonly { Err(E::ReadOnly) } else { Ok(()) };
                let ino = self.ino(&key).await?;
                self.m.files[fid].ino = Some(ino);
                let got = self.vfs.open(ino, OpenMode { write, truncate, delete_on_close }).await;
                if let Verdict::Apply = self.verdict(&format!("open {} {open:?}", self.m.path(&key)), &got, want)? {
                    let (fh, _) = got.map_err(|e| e.to_string())?;
                    if write || truncate {
                        self.m.dirty(fid);
                    }
                    let f = &mut self.m.files[fid];
                    if truncate {
                        f.content.clear();
                    }
                    f.delete_pending |= delete_on_close;
                    self.m.handles.push(MHandle { fh, fid, write });
                    touched.push(fid);
                }
            }
            Op::Write { h, off, len, byte } => {
                let Some(h) = self.handle(h) else { return Ok(touched) };
                self.write(&h, u64::from(off), bytes(len, byte)).await?;
                touched.push(h.fid);
            }
            Op::Append { h, len, byte } => {
                let Some(h) = self.handle(h) else { return Ok(touched) };
                // WinFsp's write-to-end-of-file and O_APPEND alike: at the size the core reports.
                let off = self.m.files[h.fid].content.len() as u64;
                self.write(&h, off, bytes(len, byte)).await?;
                touched.push(h.fid);
            }
            Op::Read { h, off, len } => {
                let Some(h) = self.handle(h) else { return Ok(touched) };
                let content = &self.m.files[h.fid].content;
                let from = (off as usize).min(content.len());
                let to = (off as usize + len as usize).min(content.len());
                let want = content[from..to].to_vec();
                match self.vfs.read(h.fh, u64::from(off), u32::from(len)).await {
                    Ok(got) if got[..] == want[..] => self.count("read", 0),
                    Err(VfsError::Offline) if self.m.offline => self.count("read", 2),
                    other => return Err(format!("read {off}+{len}: core {other:?}, model {want:?}")),
                }
            }
            Op::Truncate { by_handle, sel, size } => {
                let size = u64::from(size);
                if by_handle {
                    let Some(h) = pick(&self.write_handles(), sel) else { return Ok(touched) };
                    let ino = self.m.files[h.fid].ino.ok_or("handle without inode")?;
                    let set = SetAttr { size: Some(size), ..Default::default() };
                    let got = self.vfs.setattr(ino, Some(h.fh), set).await;
                    if let Verdict::Apply = self.verdict("truncate through a handle", &got, Ok(()))? {
                        self.m.dirty(h.fid);
                        self.m.files[h.fid].content.resize(size as usize, 0);
                        touched.push(h.fid);
                    }
                } else {
                    let Some(key) = pick(&self.m.file_keys(), sel) else { return Ok(touched) };
                    let fid = self.m.fid(&key).ok_or("not a file")?;
                    let want = if self.m.files[fid].readonly { Err(E::ReadOnly) } else { Ok(()) };
                    let ino = self.ino(&key).await?;
                    let got = self.vfs.setattr(ino, None, SetAttr { size: Some(size), ..Default::default() }).await;
                    if let Verdict::Apply = self.verdict(&format!("truncate {}", self.m.path(&key)), &got, want)? {
                        self.m.dirty(fid);
                        self.m.files[fid].content.resize(size as usize, 0);
                        // Committed at once when nobody writes: a state a crash may go back to.
                        let c = self.m.files[fid].content.clone();
                        self.m.files[fid].durable.push(Some(c));
                        touched.push(fid);
                    }
                }
            }
            Op::Fsync { h } => {
                let Some(h) = self.handle(h) else { return Ok(touched) };
                let got = self.vfs.fsync(h.fh).await;
                if let Verdict::Apply = self.verdict("fsync", &got, Ok(()))? {
                    self.fsynced(h.fid)?;
                }
            }
            Op::Close { h } => {
                let Some(h) = self.handle(h) else { return Ok(touched) };
                self.close(&h).await?;
                touched.push(h.fid);
            }
            Op::Unlink { sel } => {
                if flavor == Flavor::Windows {
                    return Ok(touched);
                }
                let Some(key) = pick(&self.m.entry_keys(), sel) else { return Ok(touched) };
                let want = if self.m.fid(&key).is_some() { Ok(()) } else { Err(E::IsDir) };
                let (pino, name) = self.parent_and_name(&key).await?;
                let got = self.vfs.unlink(pino, &name).await;
                if let Verdict::Apply = self.verdict(&format!("unlink {}", self.m.path(&key)), &got, want)? {
                    self.m.remove(&key);
                }
            }
            Op::Rmdir { sel } => {
                let Some(key) = pick(&self.m.entry_keys(), sel) else { return Ok(touched) };
                let want = if self.m.fid(&key).is_some() {
                    Err(E::NotDir)
                } else if !self.m.children(&key).is_empty() {
                    Err(E::NotEmpty)
                } else {
                    Ok(())
                };
                let (pino, name) = self.parent_and_name(&key).await?;
                let got = self.vfs.rmdir(pino, &name).await;
                if let Verdict::Apply = self.verdict(&format!("rmdir {}", self.m.path(&key)), &got, want)? {
                    self.m.remove(&key);
                }
            }
            Op::Rename { sel, dir, name, replace } => {
                let Some(src) = pick(&self.m.entry_keys(), sel) else { return Ok(touched) };
                let Some(to_dir) = pick(&self.m.dirs(), dir) else { return Ok(touched) };
                let name = name_for(flavor, name);
                if is_local_only(name) {
                    // Programs never rename onto an owner file's name.
                    return Ok(touched);
                }
                self.rename(&src, &to_dir, name, replace).await?;
            }
            Op::CaseRename { sel } => {
                let Some(src) = pick(&self.m.entry_keys(), sel) else { return Ok(touched) };
                let name = other_case(&self.m.entries[&src].name);
                let to_dir = src[..src.len() - 1].to_vec();
                self.rename(&src, &to_dir, &name, true).await?;
            }
            Op::SetReadonly { sel, on } => {
                let Some(key) = pick(&self.m.file_keys(), sel) else { return Ok(touched) };
                let fid = self.m.fid(&key).ok_or("not a file")?;
                let ino = self.ino(&key).await?;
                let got = self.vfs.setattr(ino, None, SetAttr { readonly: Some(on), ..Default::default() }).await;
                match got {
                    Ok(a) if a.readonly == on => {
                        self.count("set read-only", 0);
                        self.m.files[fid].readonly = on
                    }
                    other => return Err(format!("set read-only {on} on {}: {other:?}", self.m.path(&key))),
                }
            }
            Op::SetDelete { h, on } => {
                if flavor == Flavor::Posix {
                    return Ok(touched);
                }
                let Some(h) = self.handle(h) else { return Ok(touched) };
                let ino = self.m.files[h.fid].ino.ok_or("handle without inode")?;
                let want = if on && self.m.files[h.fid].readonly { Err(E::ReadOnly) } else { Ok(()) };
                let got = self.vfs.set_delete_pending(ino, on);
                if let Verdict::Apply = self.verdict("set delete disposition", &got, want)? {
                    self.m.files[h.fid].delete_pending = on;
                }
            }
            Op::Stat { sel } => {
                let Some(key) = pick(&self.m.entry_keys(), sel) else { return Ok(touched) };
                let (pino, name) = self.parent_and_name(&key).await?;
                let spelled = other_case(&name);
                match self.vfs.lookup(pino, &spelled).await {
                    Ok(a) => {
                        let e = &self.m.entries[&key];
                        let ok = match e.kind {
                            MKind::Dir => a.kind == Kind::Dir,
                            MKind::File(f) => {
                                let file = &self.m.files[f];
                                a.kind == Kind::File
                                    && a.size == file.content.len() as u64
                                    && a.readonly == file.readonly
                                    && file.ino.is_none_or(|i| i == a.ino)
                            }
                        };
                        if !ok {
                            return Err(format!("lookup {spelled} in {}: {a:?}", self.m.path(&key)));
                        }
                        self.count("lookup in another case", 0);
                    }
                    Err(e) => return Err(format!("lookup {spelled} (as {}): {e:?}", self.m.path(&key))),
                }
            }
            Op::Remote(r) => {
                if !self.m.offline {
                    self.remote(r).await?;
                    self.feed().await;
                    // What another device changed reads back as it left it.
                    touched = self.linked_files();
                }
            }
            Op::Offline => {
                if !self.m.offline {
                    self.count("gateway away", 0);
                    self.fake.set_unreachable(true);
                    self.m.offline = true;
                }
            }
            Op::Online => {
                if self.m.offline {
                    self.count("gateway back", 0);
                    self.fake.set_unreachable(false);
                    self.m.offline = false;
                    if !self.vfs.probe().await {
                        return Err("probe failed with the gateway back".into());
                    }
                    self.upload().await?;
                    // What was changed while away reads back as it was left.
                    touched = self.linked_files();
                }
            }
            Op::Upload => {
                if self.m.offline {
                    let _ = self.vfs.upload_pending().await;
                } else {
                    self.upload().await?;
                }
            }
            Op::Remount { crash } => {
                if !self.m.offline {
                    self.count(if crash { "remount (killed)" } else { "remount (clean)" }, 0);
                    self.remount(crash).await?;
                    return Ok(self.linked_files());
                }
            }
        }
        Ok(touched)
    }

    async fn parent_and_name(&self, key: &Key) -> Res<(Ino, String)> {
        let parent = key[..key.len() - 1].to_vec();
        Ok((self.ino(&parent).await?, self.m.entries[key].name.clone()))
    }

    async fn write(&mut self, h: &MHandle, off: u64, data: Vec<u8>) -> Res {
        let want = if h.write { Ok(()) } else { Err(E::Denied) };
        let got = self.vfs.write(h.fh, off, &data).await;
        if let Verdict::Apply = self.verdict(&format!("write {off}+{}", data.len()), &got, want)? {
            if !matches!(got, Ok(n) if n as usize == data.len()) {
                return Err(format!("write {off}+{}: wrote {got:?}", data.len()));
            }
            self.m.dirty(h.fid);
            let c = &mut self.m.files[h.fid].content;
            let end = off as usize + data.len();
            if c.len() < end {
                c.resize(end, 0);
            }
            c[off as usize..end].copy_from_slice(&data);
        }
        Ok(())
    }

    /// fsync answered success: the gateway holds the file as it is now.
    fn fsynced(&mut self, fid: Fid) -> Res {
        let path = self
            .m
            .entries
            .iter()
            .find(|(_, e)| matches!(e.kind, MKind::File(f) if f == fid))
            .map(|(k, e)| (k.clone(), e.name.clone()));
        if let Some((key, name)) = path
            && !is_local_only(&name)
        {
            let held =
                self.fake.read(&self.m.path(&key)).map_err(|e| format!("fsync: the gateway has no {name}: {e}"))?;
            if held != self.m.files[fid].content {
                return Err(format!("fsync said done but the gateway holds {held:?} for {}", self.m.path(&key)));
            }
        }
        let c = self.m.files[fid].content.clone();
        self.m.files[fid].durable.push(Some(c));
        Ok(())
    }

    /// close(2) as FUSE sends it (flush, then release), or CloseHandle as WinFsp does
    /// (cleanup, which deletes a file marked for deletion at its last handle, then close).
    async fn close(&mut self, h: &MHandle) -> Res {
        let fid = h.fid;
        let last = self.m.handles_of(fid).count() == 1;
        let delete = last && self.m.files[fid].delete_pending && self.m.files[fid].linked;
        let key =
            self.m.entries.iter().find(|(_, e)| matches!(e.kind, MKind::File(f) if f == fid)).map(|(k, _)| k.clone());
        let mut deleted_ok = true;
        match self.flavor {
            Flavor::Posix => {
                let flushed = self.vfs.flush(h.fh).await;
                self.verdict("flush", &flushed, Ok(()))?;
                let released = self.vfs.release(h.fh).await;
                if !matches!(self.verdict("release", &released, Ok(()))?, Verdict::Apply) {
                    deleted_ok = false;
                }
            }
            Flavor::Windows => {
                if delete && let Some(key) = &key {
                    // WinFsp's cleanup with the Delete flag (errors are only logged there).
                    let ino = self.m.files[fid].ino.ok_or("handle without inode")?;
                    if self.vfs.set_delete_pending(ino, true).is_ok() {
                        let (pino, name) = self.parent_and_name(key).await?;
                        if matches!(self.vfs.lookup(pino, &name).await, Ok(a) if a.ino == ino)
                            && self.vfs.unlink(pino, &name).await.is_err()
                        {
                            deleted_ok = false;
                        }
                    }
                }
                let released = self.vfs.release(h.fh).await;
                if !matches!(self.verdict("close", &released, Ok(()))?, Verdict::Apply) {
                    deleted_ok = false;
                }
            }
        }
        self.drop_handle(h.fh);
        if h.write {
            let c = self.m.files[fid].content.clone();
            self.m.files[fid].durable.push(Some(c));
        }
        if delete {
            if !deleted_ok && !self.m.offline {
                return Err("delete-on-close failed with the gateway there".into());
            }
            if deleted_ok && let Some(key) = key {
                self.m.remove(&key);
            }
        }
        if h.write && self.m.writers(fid) == 0 && !self.m.offline && !self.write_back {
            // The last writer's close uploaded it (with write-back, it is only queued).
            self.m.files[fid].maybe_dirty = false;
        }
        Ok(())
    }

    async fn rename(&mut self, src: &Key, to_dir: &Key, name: &str, replace: bool) -> Res {
        let mut dst = to_dir.clone();
        dst.push(name_key(name));
        let src_is_dir = self.m.fid(src).is_none();
        let target = self.m.entries.get(&dst).filter(|_| dst != *src).cloned();
        let what = format!("rename {} to {name} in {} (replace {replace})", self.m.path(src), self.m.path(to_dir));
        let want = if let Err(e) = name_refused(name) {
            Err(e)
        } else if src_is_dir && to_dir.starts_with(src) {
            Err(E::Invalid)
        } else {
            match &target {
                None => Ok(()),
                Some(_) if !replace => Err(E::Exists),
                Some(t) => match (src_is_dir, &t.kind) {
                    (true, MKind::File(_)) => Err(E::NotDir),
                    (false, MKind::Dir) => Err(E::IsDir),
                    (true, MKind::Dir) if !self.m.children(&dst).is_empty() => Err(E::NotEmpty),
                    _ => Ok(()),
                },
            }
        };
        let (pino, from_name) = self.parent_and_name(src).await?;
        let to_ino = self.ino(to_dir).await?;
        let got = self.vfs.rename(pino, &from_name, to_ino, name, replace).await;
        if let Verdict::Apply = self.verdict(&what, &got, want)? {
            // Files being written under what moves went up first: states a crash may go back to.
            for (_, e) in self.m.entries.iter().filter(|(k, _)| k.starts_with(src)) {
                if let MKind::File(f) = e.kind {
                    let c = self.m.files[f].content.clone();
                    self.m.files[f].durable.push(Some(c));
                }
            }
            if target.is_some() {
                self.m.remove(&dst);
            }
            let moved: Vec<(Key, MEntry)> = self
                .m
                .entries
                .iter()
                .filter(|(k, _)| k.starts_with(src))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect();
            for (k, _) in &moved {
                self.m.entries.remove(k);
            }
            for (k, mut e) in moved {
                let mut nk = dst.clone();
                nk.extend_from_slice(&k[src.len()..]);
                if k == *src {
                    e.name = name.to_string();
                }
                self.m.entries.insert(nk, e);
            }
        }
        Ok(())
    }

    /// The uploader's retry with the gateway there: everything closed goes up.
    async fn upload(&mut self) -> Res {
        self.vfs.upload_pending().await.map_err(|e| format!("upload_pending online: {e:?}"))?;
        for fid in 0..self.m.files.len() {
            if self.m.writers(fid) == 0 {
                self.m.files[fid].maybe_dirty = false;
            }
        }
        Ok(())
    }

    async fn remote(&mut self, r: RemoteOp) -> Res {
        let flavor = self.flavor;
        let clean_name = |sel: u8| {
            let n = name_for(flavor, sel);
            (validate_name(n).is_ok() && !is_local_only(n)).then_some(n)
        };
        match r {
            RemoteOp::Write { sel, new, name, len, byte } => {
                let data = bytes(len, byte);
                if new {
                    let Some(dir) = pick(&self.m.dirs(), sel) else { return Ok(()) };
                    let Some(name) = clean_name(name) else { return Ok(()) };
                    let mut key = dir.clone();
                    key.push(name_key(name));
                    if self.m.entries.contains_key(&key) {
                        return Ok(());
                    }
                    let path = format!("{}/{name}", self.m.path(&dir).trim_end_matches('/'));
                    self.fake.other_write(&path, &data).map_err(|e| format!("other device: {e}"))?;
                    self.count("other device: create", 0);
                    let fid = self.m.files.len();
                    self.m.files.push(MFile {
                        content: data,
                        readonly: false,
                        delete_pending: false,
                        linked: true,
                        ino: None,
                        maybe_dirty: false,
                        durable: Vec::new(),
                    });
                    self.m.entries.insert(key, MEntry { name: name.to_string(), kind: MKind::File(fid) });
                } else {
                    let Some(key) = pick(&self.m.file_keys(), sel) else { return Ok(()) };
                    if !self.m.remote_may_touch(&key) {
                        return Ok(());
                    }
                    self.fake.other_write(&self.m.path(&key), &data).map_err(|e| format!("other device: {e}"))?;
                    self.count("other device: write", 0);
                    let fid = self.m.fid(&key).ok_or("not a file")?;
                    self.m.files[fid].content = data;
                }
            }
            RemoteOp::Mkdir { dir, name } => {
                let Some(dir) = pick(&self.m.dirs(), dir) else { return Ok(()) };
                let Some(name) = clean_name(name) else { return Ok(()) };
                let mut key = dir.clone();
                key.push(name_key(name));
                if self.m.entries.contains_key(&key) {
                    return Ok(());
                }
                let path = format!("{}/{name}", self.m.path(&dir).trim_end_matches('/'));
                self.fake.other_mkdir(&path).map_err(|e| format!("other device: {e}"))?;
                self.count("other device: mkdir", 0);
                self.m.entries.insert(key, MEntry { name: name.to_string(), kind: MKind::Dir });
            }
            RemoteOp::Delete { sel } => {
                let Some(key) = pick(&self.m.entry_keys(), sel) else { return Ok(()) };
                if !self.m.remote_may_touch(&key) {
                    return Ok(());
                }
                self.fake.other_delete(&self.m.path(&key)).map_err(|e| format!("other device: {e}"))?;
                self.count("other device: delete", 0);
                self.m.remove(&key);
            }
            RemoteOp::Move { sel, dir, name } => {
                let Some(src) = pick(&self.m.entry_keys(), sel) else { return Ok(()) };
                let Some(to_dir) = pick(&self.m.dirs(), dir) else { return Ok(()) };
                let Some(name) = clean_name(name) else { return Ok(()) };
                let mut dst = to_dir.clone();
                dst.push(name_key(name));
                let src_is_dir = self.m.fid(&src).is_none();
                if !self.m.remote_may_touch(&src) || (src_is_dir && to_dir.starts_with(&src)) {
                    return Ok(());
                }
                if let Some(t) = self.m.entries.get(&dst).filter(|_| dst != src) {
                    // Another device replaces only files it may touch, and never by a folder.
                    if src_is_dir || matches!(t.kind, MKind::Dir) || !self.m.remote_may_touch(&dst) {
                        return Ok(());
                    }
                }
                let to = format!("{}/{name}", self.m.path(&to_dir).trim_end_matches('/'));
                self.fake.other_move(&self.m.path(&src), &to).map_err(|e| format!("other device: {e}"))?;
                self.count("other device: move", 0);
                if dst != src {
                    self.m.remove(&dst);
                }
                let moved: Vec<(Key, MEntry)> = self
                    .m
                    .entries
                    .iter()
                    .filter(|(k, _)| k.starts_with(&src))
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect();
                for (k, _) in &moved {
                    self.m.entries.remove(k);
                }
                for (k, mut e) in moved {
                    let mut nk = dst.clone();
                    nk.extend_from_slice(&k[src.len()..]);
                    if k == src {
                        e.name = name.to_string();
                    }
                    self.m.entries.insert(nk, e);
                }
            }
        }
        Ok(())
    }

    /// Unmounted cleanly (handles closed, everything uploaded) or killed, then mounted again
    /// on the same journal; the new mount uploads what the journal holds.
    async fn remount(&mut self, crash: bool) -> Res {
        if !crash {
            for h in self.m.handles.clone() {
                self.close(&h).await?;
            }
            self.vfs.flush_all().await.map_err(|e| format!("flush_all: {e:?}"))?;
        }
        // Open for writing at the end: what a killed mount may leave of it is open.
        let uncertain: Vec<Fid> =
            (0..self.m.files.len()).filter(|f| self.m.writers(*f) > 0 && self.m.files[*f].linked).collect();
        self.m.handles.clear();
        self.mount();
        self.feed().await;
        self.vfs.upload_pending().await.map_err(|e| format!("upload_pending after mounting again: {e:?}"))?;
        // Owner files lived only in the old mount; the read-only attribute and delete
        // dispositions were kept by it only.
        let owners: Vec<Key> = self
            .m
            .entries
            .iter()
            .filter(|(_, e)| is_local_only(&e.name) && matches!(e.kind, MKind::File(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in owners {
            self.m.remove(&k);
        }
        for f in &mut self.m.files {
            f.readonly = false;
            f.delete_pending = false;
            f.ino = None;
        }
        for fid in uncertain {
            let Some(key) = self
                .m
                .entries
                .iter()
                .find(|(_, e)| matches!(e.kind, MKind::File(f) if f == fid))
                .map(|(k, _)| k.clone())
            else {
                continue;
            };
            let held = self.fake.read(&self.m.path(&key)).ok();
            let f = &self.m.files[fid];
            let mut allowed = f.durable.clone();
            allowed.push(Some(f.content.clone()));
            if !allowed.contains(&held) {
                return Err(format!("after a crash {} holds {held:?}; expected one of {allowed:?}", self.m.path(&key)));
            }
            match held {
                Some(c) => self.m.files[fid].content = c,
                None => self.m.remove(&key),
            }
        }
        for f in &mut self.m.files {
            f.maybe_dirty = false;
            f.durable.clear();
        }
        Ok(())
    }

    /// The core's view equals the model's: every folder's listing, and the contents of the
    /// files in `read`.
    async fn check(&mut self, read: &[Fid]) -> Res {
        for dir in self.m.dirs() {
            let ino = self.ino(&dir).await?;
            let fh = self.vfs.opendir(ino).map_err(|e| format!("opendir {}: {e:?}", self.m.path(&dir)))?;
            let listed = self.vfs.readdir(fh, 0, 10_000).await;
            self.vfs.releasedir(fh);
            let listed = match listed {
                Ok(l) => l,
                Err(VfsError::Offline) if self.m.offline => continue,
                Err(e) => return Err(format!("readdir {}: {e:?}", self.m.path(&dir))),
            };
            let mut got: Vec<String> = listed
                .iter()
                .map(|e| {
                    let what = match e.attr.kind {
                        Kind::Dir => "dir".to_string(),
                        Kind::File => format!("{} bytes{}", e.attr.size, if e.attr.readonly { " ro" } else { "" }),
                    };
                    format!("{} ({what})", e.name)
                })
                .collect();
            let mut want: Vec<String> = self
                .m
                .children(&dir)
                .into_iter()
                .map(|(_, e)| {
                    let what = match e.kind {
                        MKind::Dir => "dir".to_string(),
                        MKind::File(f) => {
                            let f = &self.m.files[f];
                            format!("{} bytes{}", f.content.len(), if f.readonly { " ro" } else { "" })
                        }
                    };
                    format!("{} ({what})", e.name)
                })
                .collect();
            got.sort_by_key(|s| s.to_lowercase());
            want.sort_by_key(|s| s.to_lowercase());
            if got != want {
                return Err(format!("listing of {}: core {got:?}, model {want:?}", self.m.path(&dir)));
            }
        }
        // fstat through every open handle (also of files deleted or replaced while open).
        for h in &self.m.handles {
            let Some(ino) = self.m.files[h.fid].ino else { continue };
            let want = self.m.files[h.fid].content.len() as u64;
            match self.vfs.getattr(ino).await {
                Ok(a) if a.size == want => self.count("fstat of an open file", 0),
                Err(VfsError::Offline) if self.m.offline => self.count("fstat of an open file", 2),
                other => return Err(format!("getattr of open inode {ino}: core {other:?}, model {want} bytes")),
            }
        }
        for &fid in read {
            if self.m.files[fid].delete_pending && self.m.handles_of(fid).next().is_none() {
                // Opening and closing it would delete it (a delete that failed offline).
                continue;
            }
            let Some(key) = self
                .m
                .entries
                .iter()
                .find(|(_, e)| matches!(e.kind, MKind::File(f) if f == fid))
                .map(|(k, _)| k.clone())
            else {
                continue;
            };
            let ino = self.ino(&key).await?;
            let want_ino = self.m.files[fid].ino;
            if want_ino.is_some_and(|i| i != ino) {
                return Err(format!("{} changed its inode number: {want_ino:?} → {ino}", self.m.path(&key)));
            }
            self.m.files[fid].ino = Some(ino);
            let got = match self.vfs.open(ino, READ).await {
                Ok((fh, _)) => {
                    let r = super::read_fh(&self.vfs, fh).await;
                    let _ = self.vfs.release(fh).await;
                    r
                }
                Err(e) => Err(e),
            };
            match got {
                Ok(c) if c == self.m.files[fid].content => self.count("content compared", 0),
                Err(VfsError::Offline) if self.m.offline => self.count("content compared", 2),
                other => {
                    return Err(format!(
                        "content of {}: core {other:?}, model {:?}",
                        self.m.path(&key),
                        self.m.files[fid].content
                    ));
                }
            }
        }
        Ok(())
    }

    /// Everything closed and synced: the gateway holds exactly the model's tree (owner files
    /// stay local), and the journal is empty.
    async fn finish(&mut self) -> Res {
        if self.m.offline {
            self.step(&Op::Online).await?;
        }
        for h in self.m.handles.clone() {
            self.close(&h).await?;
        }
        self.upload().await?;
        self.vfs.flush_all().await.map_err(|e| format!("flush_all: {e:?}"))?;
        let all: Vec<Fid> = (0..self.m.files.len()).filter(|f| !self.is_gone(*f)).collect();
        self.check(&all).await?;
        let mut want = BTreeMap::new();
        for (key, e) in &self.m.entries {
            match e.kind {
                MKind::Dir => {
                    want.insert(self.m.path(key), Item::Dir);
                }
                MKind::File(f) if !is_local_only(&e.name) => {
                    want.insert(self.m.path(key), Item::File(self.m.files[f].content.clone()));
                }
                MKind::File(_) => {}
            }
        }
        let held = self.fake.tree();
        if held != want {
            return Err(format!("after the final sync the gateway holds {held:?}\nthe model has {want:?}"));
        }
        // Owner files live in their staging copies (never uploaded): only their records stay.
        let staging = self.dir.path().join("staging");
        let left: Vec<String> = std::fs::read_dir(&staging)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .filter(|rec| !rec.contains("/~$"))
            .collect();
        if !left.is_empty() {
            return Err(format!("records left in the journal after the final sync: {left:?}"));
        }
        Ok(())
    }
}

fn run_case(flavor: Flavor, write_back: bool, ops: &[Op], stats: &std::sync::Mutex<Stats>) -> Res {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut run = Run::new(flavor, write_back).await?;
        let r = run.ops(ops).await;
        let mut all = stats.lock().unwrap_or_else(|p| p.into_inner());
        for (k, v) in run.stats.take() {
            let e = all.entry(k).or_default();
            for i in 0..3 {
                e[i] += v[i];
            }
        }
        r
    })
}

impl Run {
    /// The calls one after the other, each checked, then the final sync.
    async fn ops(&mut self, ops: &[Op]) -> Res {
        let run = self;
        for (i, op) in ops.iter().enumerate() {
            let touched = run.step(op).await.map_err(|e| format!("step {i} {op:?}: {e}"))?;
            run.check(&touched).await.map_err(|e| format!("after step {i} {op:?}: {e}"))?;
            if std::env::var_os("NIMBUS_MODEL_TRACE").is_some() {
                eprintln!("-- after {op:?}");
                for f in std::fs::read_dir(run.dir.path().join("staging")).into_iter().flatten().flatten() {
                    eprintln!("{:?}: {}", f.file_name(), std::fs::read_to_string(f.path()).unwrap_or_default());
                }
            }
        }
        run.finish().await.map_err(|e| format!("final sync: {e}"))
    }
}

fn env_u64(names: &[&str]) -> Option<u64> {
    names.iter().find_map(|n| std::env::var(n).ok()).and_then(|v| v.trim().parse().ok())
}

fn run_model(flavor: Flavor, write_back: bool, default_cases: u32) {
    let seed = env_u64(&["NIMBUS_MODEL_SEED", "PROPTEST_RNG_SEED"]).unwrap_or(DEFAULT_SEED);
    let cases = env_u64(&["NIMBUS_MODEL_CASES", "PROPTEST_CASES"]).map_or(default_cases, |c| c as u32);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let steps = env_u64(&["NIMBUS_MODEL_STEPS"]).map_or(60, |s| s.max(2) as usize);
    let ops = prop::collection::vec(op_strategy(flavor), 1..steps);
    let what = format!("{flavor:?} calls{}", if write_back { ", write-back" } else { "" });
    eprintln!("model test, {what}: {cases} cases from seed {seed} (NIMBUS_MODEL_SEED, NIMBUS_MODEL_CASES)");
    let stats = std::sync::Mutex::new(Stats::new());
    let result = runner.run(&ops, |ops| run_case(flavor, write_back, &ops, &stats).map_err(TestCaseError::fail));
    let stats = stats.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut table = String::new();
    for (what, [applied, refused, offline]) in &stats {
        let _ = writeln!(table, "  {what:<28} {applied:>7} done {refused:>6} refused {offline:>6} offline");
    }
    eprintln!("{what}, calls made:\n{table}");
    if let Err(e) = result {
        panic!(
            "the core and the model disagree ({what}, seed {seed}; replay with \
             NIMBUS_MODEL_SEED={seed} NIMBUS_MODEL_CASES={cases}):\n{e}"
        );
    }
}

#[test]
fn the_core_matches_the_model_posix() {
    run_model(Flavor::Posix, false, 2000);
}

#[test]
fn the_core_matches_the_model_windows() {
    run_model(Flavor::Windows, false, 2000);
}

#[test]
fn the_core_matches_the_model_posix_write_back() {
    run_model(Flavor::Posix, true, 1000);
}

#[test]
fn the_core_matches_the_model_windows_write_back() {
    run_model(Flavor::Windows, true, 1000);
}
