//! FUSE adapter (Linux, macOS) on `fuser`: translates kernel requests to [`Vfs`] calls and
//! [`VfsError`]s to errno, nothing more. Each request runs as a task on the mount's tokio
//! runtime, so a slow gateway call never blocks the kernel channel.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::core::{Attr, Kind, OpenMode, SetAttr, Vfs, VfsError, VfsResult};

/// How long the kernel may cache entries and attributes before asking again. Short, because
/// other devices change the space; our own cache answers the repeat questions.
const TTL: Duration = Duration::from_secs(1);
const BLKSIZE: u32 = 128 * 1024;
/// The file type bits of a mode, and a regular file's (the same on every POSIX system; spelled
/// out because `libc`'s `mode_t` differs in width between Linux and macOS).
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;

pub struct FuseFs {
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    uid: u32,
    gid: u32,
}

impl FuseFs {
    pub fn new(vfs: Arc<Vfs>, rt: tokio::runtime::Handle) -> Self {
        let (uid, gid) = ids();
        Self { vfs, rt, uid, gid }
    }

    /// Runs a request's future: first polled right here on the FUSE thread, so requests the
    /// core answers from memory or the local disk (most lookups, creates, writes, cache-hit
    /// reads) reply without a hop to a runtime worker; whatever must wait (the gateway, the
    /// blocking pool) goes on as a task, whose own waker then takes over.
    fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let _rt = self.rt.enter();
        let mut f = Box::pin(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if f.as_mut().poll(&mut cx).is_pending() {
            self.rt.spawn(f);
        }
    }
}

fn to_fuse(a: &Attr, uid: u32, gid: u32) -> FileAttr {
    let (kind, perm, nlink) = match a.kind {
        Kind::Dir => (FileType::Directory, 0o755, 2),
        Kind::File => (FileType::RegularFile, if a.readonly { 0o444 } else { 0o644 }, 1),
    };
    // Unlinked while open: fstat on its descriptor says so (st_nlink 0), as on a local disk.
    let nlink = if a.unlinked { 0 } else { nlink };
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.ctime,
        crtime: a.mtime,
        kind,
        perm,
        nlink,
        uid,
        gid,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// The mounting user owns everything shown (the space is theirs). Read from /proc/self, as
/// `unsafe` (libc::getuid) is forbidden in this workspace.
fn ids() -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| (m.uid(), m.gid())).unwrap_or((0, 0))
}

/// The one place core errors become errno.
pub fn errno(e: &VfsError) -> Errno {
    match e {
        VfsError::NotFound => Errno::ENOENT,
        VfsError::Exists => Errno::EEXIST,
        VfsError::NotDir => Errno::ENOTDIR,
        VfsError::IsDir => Errno::EISDIR,
        VfsError::NotEmpty => Errno::ENOTEMPTY,
        VfsError::InvalidName(_) | VfsError::Invalid(_) => Errno::EINVAL,
        VfsError::NameTooLong => Errno::ENAMETOOLONG,
        VfsError::ReadOnly | VfsError::Denied => Errno::EACCES,
        VfsError::Quota => Errno::from_i32(libc::EDQUOT),
        // "Device or resource busy": in use elsewhere, as Windows' sharing violation says.
        VfsError::Locked => Errno::EBUSY,
        VfsError::BadHandle => Errno::EBADF,
        VfsError::Offline | VfsError::Conflict | VfsError::Io(_) => Errno::EIO,
    }
}

fn log_err(op: &str, e: &VfsError) {
    match e {
        VfsError::NotFound | VfsError::Exists => {}
        VfsError::InvalidName(msg) => tracing::info!(op, "refused: {msg}"),
        VfsError::NameTooLong => tracing::info!(op, "refused: {e}"),
        other => tracing::warn!(op, error = %other, "file system call failed"),
    }
}

/// create(2) and mknod(2) of a regular file: a new file open for writing, read-only when the
/// mode has no write bit.
async fn new_file(vfs: &Vfs, parent: INodeNo, name: &str, mode: u32) -> VfsResult<(Attr, u64)> {
    let open = OpenMode { write: true, truncate: false, delete_on_close: false };
    vfs.create(parent.0, name, open, mode & 0o222 == 0).await
}

fn name_str(name: &OsStr) -> Result<String, Errno> {
    name.to_str().map(str::to_string).ok_or(Errno::EINVAL)
}

impl Filesystem for FuseFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(1024 * 1024);
        let _ = config.set_max_write(1024 * 1024);
        let _ = config.set_max_background(64);
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_PARALLEL_DIROPS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Ok(name) = name_str(name) else { return reply.error(Errno::ENOENT) };
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match vfs.lookup(parent.0, &name).await {
                Ok(a) => reply.entry(&TTL, &this(&a), Generation(0)),
                Err(e) => {
                    log_err("lookup", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match vfs.getattr(ino.0).await {
                Ok(a) => reply.attr(&TTL, &this(&a)),
                Err(e) => {
                    log_err("getattr", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            size,
            mtime: mtime.map(|t| match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            }),
            // No write bit for anyone: the Windows read-only attribute.
            readonly: mode.map(|m| m & 0o222 == 0),
        };
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match vfs.setattr(ino.0, fh.map(|f| f.0), set).await {
                Ok(a) => reply.attr(&TTL, &this(&a)),
                Err(e) => {
                    log_err("setattr", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        let Ok(name) = name_str(name) else { return reply.error(Errno::EINVAL) };
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match vfs.mkdir(parent.0, &name).await {
                Ok(a) => reply.entry(&TTL, &this(&a), Generation(0)),
                Err(e) => {
                    log_err("mkdir", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Ok(name) = name_str(name) else { return reply.error(Errno::ENOENT) };
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.unlink(parent.0, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("unlink", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Ok(name) = name_str(name) else { return reply.error(Errno::ENOENT) };
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.rmdir(parent.0, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("rmdir", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (Ok(name), Ok(newname)) = (name_str(name), name_str(newname)) else { return reply.error(Errno::EINVAL) };
        if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let replace = !flags.contains(RenameFlags::RENAME_NOREPLACE);
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.rename(parent.0, &name, newparent.0, &newname, replace).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("rename", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mode = open_mode(flags.0);
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.open(ino.0, mode).await {
                Ok((fh, keep)) => {
                    reply.opened(FileHandle(fh), if keep { FopenFlags::FOPEN_KEEP_CACHE } else { FopenFlags::empty() })
                }
                Err(e) => {
                    log_err("open", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let Ok(name) = name_str(name) else { return reply.error(Errno::EINVAL) };
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match new_file(&vfs, parent, &name, mode).await {
                Ok((a, fh)) => reply.created(&TTL, &this(&a), Generation(0), FileHandle(fh), FopenFlags::empty()),
                Err(e) => {
                    log_err("create", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.read(fh.0, offset, size).await {
                Ok(data) => reply.data(&data),
                Err(e) => {
                    log_err("read", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let vfs = self.vfs.clone();
        let data = data.to_vec();
        self.spawn(async move {
            match vfs.write(fh.0, offset, &data).await {
                Ok(n) => reply.written(n),
                Err(e) => {
                    log_err("write", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.flush(fh.0).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("flush", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.release(fh.0).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("release", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            match vfs.fsync(fh.0).await {
                Ok(()) => reply.ok(),
                Err(e) => {
                    log_err("fsync", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.vfs.opendir(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            let mut next = offset;
            if next == 0 {
                if reply.add(ino, 1, FileType::Directory, ".") {
                    return reply.ok();
                }
                next = 1;
            }
            if next == 1 {
                // The parent's number doesn't matter to the kernel for "..".
                if reply.add(ino, 2, FileType::Directory, "..") {
                    return reply.ok();
                }
                next = 2;
            }
            loop {
                match vfs.readdir(fh.0, next - 2, 256).await {
                    Ok(entries) if entries.is_empty() => return reply.ok(),
                    Ok(entries) => {
                        for e in entries {
                            let kind = match e.attr.kind {
                                Kind::Dir => FileType::Directory,
                                Kind::File => FileType::RegularFile,
                            };
                            if reply.add(INodeNo(e.attr.ino), e.offset + 2, kind, &e.name) {
                                return reply.ok();
                            }
                            next = e.offset + 2;
                        }
                    }
                    Err(e) => {
                        log_err("readdir", &e);
                        return reply.error(errno(&e));
                    }
                }
            }
        });
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.vfs.releasedir(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The space is the mounting user's; read-only files are refused at open.
        reply.ok();
    }

    fn symlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _target: &std::path::Path, reply: ReplyEntry) {
        // Not representable in a space (nor on the Windows side): programs fall back to copies.
        reply.error(Errno::EPERM);
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(Errno::EPERM);
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // A regular file is made as create(2) would; FIFOs, sockets and devices are refused
        // like links (the default answer, ENOSYS, reads as a broken file system).
        if mode & S_IFMT != S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let Ok(name) = name_str(name) else { return reply.error(Errno::EINVAL) };
        let vfs = self.vfs.clone();
        let this = self.attr_maker();
        self.spawn(async move {
            match new_file(&vfs, parent, &name, mode).await {
                Ok((a, fh)) => {
                    if let Err(e) = vfs.release(fh).await {
                        log_err("mknod", &e);
                    }
                    reply.entry(&TTL, &this(&a), Generation(0))
                }
                Err(e) => {
                    log_err("mknod", &e);
                    reply.error(errno(&e))
                }
            }
        });
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // Not a terminal nor anything else with ioctls (Python's open() asks, every time).
        reply.error(Errno::from_i32(libc::ENOTTY));
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(Errno::from_i32(libc::ENODATA));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        if size == 0 { reply.size(0) } else { reply.data(&[]) }
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // No extended attributes in a space: what the kernel would make of the default
        // ENOSYS anyway, without the default's warning per call.
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::EOPNOTSUPP));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let vfs = self.vfs.clone();
        self.spawn(async move {
            let (total, free) = vfs.statfs().await;
            let bs = BLKSIZE as u64;
            reply.statfs(total / bs, free / bs, free / bs, 1 << 32, 1 << 31, BLKSIZE, 255, BLKSIZE);
        });
    }
}

impl FuseFs {
    /// A `Send` closure turning core attributes into FUSE ones inside spawned tasks.
    fn attr_maker(&self) -> impl Fn(&Attr) -> FileAttr + Send + 'static {
        let (uid, gid) = (self.uid, self.gid);
        move |a: &Attr| to_fuse(a, uid, gid)
    }
}

fn open_mode(flags: i32) -> OpenMode {
    let acc = flags & libc::O_ACCMODE;
    OpenMode {
        write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        truncate: flags & libc::O_TRUNC != 0,
        delete_on_close: false,
    }
}
