//! WinFsp adapter (Windows only) on the `winfsp` crate 0.12.6. Like the FUSE adapter it only
//! translates: `\dir\name` paths become core lookups, WinFsp callbacks become [`Vfs`] calls,
//! and [`VfsError`]s become NTSTATUS in one function, [`ntstatus()`]. Every decision lives in
//! the core.
//!
//! Linux CI type-checks and lints it for `x86_64-pc-windows-msvc` (infra/check-windows.sh);
//! linking and running it need Windows: docs/MOUNT-WINDOWS.md says how to build it there and
//! lists what is unverified.
//!
//! No `unsafe` (the workspace forbids it). What that leaves out: security descriptors. The
//! crate hands their buffers over as `&mut [c_void]`, which safe code cannot write into, so
//! every file reports none (size 0) and WinFsp does no ACL check: the space belongs to the
//! mounting user. The read-only attribute is still enforced (by WinFsp from the attributes we
//! report, and by the core).

use std::ffi::c_void;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nimbus_client::Client;
use winfsp::constants::FspCleanupFlags;
use winfsp::filesystem::{
    DirBuffer, DirBufferLock, DirInfo, DirMarker, FileInfo, FileSecurity, FileSystemContext, OpenFileInfo, VolumeInfo,
    WideNameInfo,
};
use winfsp::host::{FileSystemHost, VolumeParams};
use winfsp::{FspError, U16CStr};

use crate::core::{Attr, Fh, Ino, Kind, OpenMode, ROOT, SetAttr, Vfs, VfsError, VfsResult};
use crate::session::{MountConfig, MountError};

/// NTSTATUS values used by the mapping (from ntstatus.h).
pub mod ntstatus {
    pub const STATUS_OBJECT_NAME_NOT_FOUND: i32 = 0xC000_0034_u32 as i32;
    pub const STATUS_OBJECT_NAME_COLLISION: i32 = 0xC000_0035_u32 as i32;
    pub const STATUS_NOT_A_DIRECTORY: i32 = 0xC000_0103_u32 as i32;
    pub const STATUS_FILE_IS_A_DIRECTORY: i32 = 0xC000_00BA_u32 as i32;
    pub const STATUS_DIRECTORY_NOT_EMPTY: i32 = 0xC000_0101_u32 as i32;
    pub const STATUS_OBJECT_NAME_INVALID: i32 = 0xC000_0033_u32 as i32;
    pub const STATUS_ACCESS_DENIED: i32 = 0xC000_0022_u32 as i32;
    pub const STATUS_CANNOT_DELETE: i32 = 0xC000_0121_u32 as i32;
    pub const STATUS_DISK_FULL: i32 = 0xC000_007F_u32 as i32;
    pub const STATUS_NETWORK_UNREACHABLE: i32 = 0xC000_023C_u32 as i32;
    pub const STATUS_INVALID_HANDLE: i32 = 0xC000_0008_u32 as i32;
    pub const STATUS_INVALID_PARAMETER: i32 = 0xC000_000D_u32 as i32;
    pub const STATUS_UNEXPECTED_IO_ERROR: i32 = 0xC000_00E9_u32 as i32;
    /// Not a core error: what `read` answers at or past the end of a file (as NTFS does).
    pub const STATUS_END_OF_FILE: i32 = 0xC000_0011_u32 as i32;
}

/// The one place core errors become NTSTATUS.
pub fn ntstatus(e: &VfsError) -> i32 {
    use ntstatus::*;
    match e {
        VfsError::NotFound => STATUS_OBJECT_NAME_NOT_FOUND,
        VfsError::Exists => STATUS_OBJECT_NAME_COLLISION,
        VfsError::NotDir => STATUS_NOT_A_DIRECTORY,
        VfsError::IsDir => STATUS_FILE_IS_A_DIRECTORY,
        VfsError::NotEmpty => STATUS_DIRECTORY_NOT_EMPTY,
        VfsError::InvalidName(_) => STATUS_OBJECT_NAME_INVALID,
        VfsError::ReadOnly => STATUS_CANNOT_DELETE,
        VfsError::Denied => STATUS_ACCESS_DENIED,
        VfsError::Quota => STATUS_DISK_FULL,
        VfsError::Offline => STATUS_NETWORK_UNREACHABLE,
        VfsError::BadHandle => STATUS_INVALID_HANDLE,
        VfsError::Invalid(_) => STATUS_INVALID_PARAMETER,
        VfsError::Conflict | VfsError::Io(_) => STATUS_UNEXPECTED_IO_ERROR,
    }
}

/// Windows constants read from WinFsp's arguments (winnt.h, ntioapi.h).
mod win {
    pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
    pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
    pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
    pub const INVALID_FILE_ATTRIBUTES: u32 = u32::MAX;
    /// CreateOptions.
    pub const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
    pub const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
    /// Access rights that mean "this handle writes data".
    pub const WRITE_ACCESS: u32 = 0x0000_0002 /* FILE_WRITE_DATA */
        | 0x0000_0004 /* FILE_APPEND_DATA */
        | 0x1000_0000 /* GENERIC_ALL */
        | 0x4000_0000 /* GENERIC_WRITE */;
}

/// Sector and allocation unit reported to Windows (allocation sizes are rounded to it).
const SECTOR_SIZE: u16 = 4096;
const ALLOCATION_UNIT: u64 = SECTOR_SIZE as u64;
/// How long WinFsp may reuse file, directory and volume information before asking again.
/// Short, because other devices change the space; the core's cache answers the repeats.
const INFO_TIMEOUT_MS: u32 = 1000;
/// Threads WinFsp dispatches requests on. Each blocks while its core call waits for the
/// gateway, so more than the default (one per CPU) keeps a slow download from stalling the
/// drive.
const DISPATCHER_THREADS: u32 = 16;
/// Entries asked from the core per `readdir` page when filling a directory buffer.
const DIR_PAGE: usize = 512;
const VOLUME_LABEL: &str = "Nimbus";
/// 100 ns intervals between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

pub struct NimbusWinFsp {
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
}

/// One open handle: the core's inode and handle numbers (a file handle from `open`/`create`,
/// a directory handle from `opendir`) and, for a directory, the listing WinFsp pages through.
/// `DirBuffer` needs no Mutex: it has interior mutability and WinFsp's own lock inside
/// `acquire` (filling) and `read`.
pub struct NimbusFile {
    ino: Ino,
    fh: Fh,
    is_dir: bool,
    dir: Option<DirBuffer>,
}

impl NimbusFile {
    fn new(ino: Ino, fh: Fh, is_dir: bool) -> Self {
        Self { ino, fh, is_dir, dir: is_dir.then(DirBuffer::new) }
    }
}

impl NimbusWinFsp {
    pub fn new(vfs: Arc<Vfs>, rt: tokio::runtime::Handle) -> Self {
        Self { vfs, rt }
    }

    /// Runs a core call to completion on this (WinFsp) thread; a core error becomes the
    /// NTSTATUS [`ntstatus()`] gives it.
    fn block<T>(&self, op: &str, f: impl Future<Output = VfsResult<T>>) -> winfsp::Result<T> {
        self.rt.block_on(f).map_err(|e| fail(op, &e))
    }

    /// Puts the whole listing of an opened directory into its buffer (WinFsp sorts it and
    /// serves the marker-based paging from there).
    fn fill_dir(&self, ctx: &NimbusFile, lock: &DirBufferLock<'_>) -> winfsp::Result<()> {
        let mut entry: DirInfo = DirInfo::new();
        if ctx.ino != ROOT {
            // Windows lists "." and ".." everywhere but in a drive's root.
            let me = self.block("read_directory", self.vfs.getattr(ctx.ino))?;
            add_entry(lock, &mut entry, ".", &me)?;
            add_entry(lock, &mut entry, "..", &me)?;
        }
        let mut offset = 0;
        loop {
            let page = self.block("read_directory", self.vfs.readdir(ctx.fh, offset, DIR_PAGE))?;
            let Some(last) = page.last() else { return Ok(()) };
            offset = last.offset;
            for e in &page {
                add_entry(lock, &mut entry, &e.name, &e.attr)?;
            }
        }
    }
}

fn fail(op: &str, e: &VfsError) -> FspError {
    log_err(op, e);
    FspError::NTSTATUS(ntstatus(e))
}

fn log_err(op: &str, e: &VfsError) {
    match e {
        VfsError::NotFound | VfsError::Exists => {}
        VfsError::InvalidName(msg) => tracing::info!(op, "refused: {msg}"),
        other => tracing::warn!(op, error = %other, "file system call failed"),
    }
}

/// `\dir\name` → `["dir", "name"]`; the root `\` → `[]`.
fn components(path: &U16CStr) -> VfsResult<Vec<String>> {
    let path = String::from_utf16(path.as_slice())
        .map_err(|_| VfsError::InvalidName("the name is not valid UTF-16".into()))?;
    Ok(path.split('\\').filter(|c| !c.is_empty()).map(str::to_owned).collect())
}

/// Walks a path from the root with the core's lookup (case-insensitive, as Windows wants).
async fn resolve(vfs: &Vfs, comps: &[String]) -> VfsResult<Attr> {
    let mut attr = vfs.getattr(ROOT).await?;
    for name in comps {
        attr = vfs.lookup(attr.ino, name).await?;
    }
    Ok(attr)
}

/// The parent directory and the last name of a path; `None` for the root.
async fn resolve_parent<'a>(vfs: &Vfs, comps: &'a [String]) -> VfsResult<Option<(Attr, &'a str)>> {
    let Some((name, parent)) = comps.split_last() else { return Ok(None) };
    Ok(Some((resolve(vfs, parent).await?, name.as_str())))
}

/// What a write through `ctx` does: WinFsp's append (`write_to_eof`: at the current end) and
/// paging I/O (`constrained_io`: never past the current end) are resolved against the size
/// the core reports. Returns the bytes written and the attributes afterwards.
async fn write_at(
    vfs: &Vfs,
    ctx: &NimbusFile,
    buffer: &[u8],
    offset: u64,
    write_to_eof: bool,
    constrained_io: bool,
) -> VfsResult<(u32, Attr)> {
    let size = vfs.getattr(ctx.ino).await?.size;
    let (off, data) = if constrained_io {
        if offset >= size {
            return Ok((0, vfs.getattr(ctx.ino).await?));
        }
        let room = usize::try_from(size - offset).unwrap_or(usize::MAX);
        (offset, &buffer[..buffer.len().min(room)])
    } else if write_to_eof {
        (size, buffer)
    } else {
        (offset, buffer)
    };
    let n = vfs.write(ctx.fh, off, data).await?;
    Ok((n, vfs.getattr(ctx.ino).await?))
}

fn attributes(a: &Attr) -> u32 {
    let kind = match a.kind {
        Kind::Dir => win::FILE_ATTRIBUTE_DIRECTORY,
        Kind::File => win::FILE_ATTRIBUTE_ARCHIVE,
    };
    if a.readonly { kind | win::FILE_ATTRIBUTE_READONLY } else { kind }
}

fn fill_info(info: &mut FileInfo, a: &Attr) {
    let t = filetime(a.mtime);
    let size = if a.kind == Kind::Dir { 0 } else { a.size };
    info.file_attributes = attributes(a);
    info.reparse_tag = 0;
    info.file_size = size;
    info.allocation_size = size.div_ceil(ALLOCATION_UNIT) * ALLOCATION_UNIT;
    // The core keeps one time; Windows asks for four.
    info.creation_time = t;
    info.last_access_time = t;
    info.last_write_time = t;
    info.change_time = t;
    info.index_number = a.ino;
    info.hard_links = 0;
    info.ea_size = 0;
}

fn add_entry(lock: &DirBufferLock<'_>, entry: &mut DirInfo, name: &str, attr: &Attr) -> winfsp::Result<()> {
    let wide: Vec<u16> = name.encode_utf16().collect();
    entry.reset();
    fill_info(entry.file_info_mut(), attr);
    if entry.set_name_raw(wide.as_slice()).is_err() {
        // Longer than a directory entry holds (255 UTF-16 units): Windows could not open it.
        tracing::warn!(name, "name too long to list on Windows; skipped");
        return Ok(());
    }
    lock.write(entry)
}

/// SystemTime → FILETIME (100 ns since 1601-01-01).
fn filetime(t: SystemTime) -> u64 {
    fn ticks(d: Duration) -> u64 {
        d.as_secs().saturating_mul(10_000_000).saturating_add(u64::from(d.subsec_nanos() / 100))
    }
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => FILETIME_UNIX_EPOCH.saturating_add(ticks(d)),
        Err(before) => FILETIME_UNIX_EPOCH.saturating_sub(ticks(before.duration())),
    }
}

/// FILETIME → SystemTime.
fn system_time(ft: u64) -> SystemTime {
    fn duration(ticks: u64) -> Duration {
        Duration::new(ticks / 10_000_000, ((ticks % 10_000_000) * 100) as u32)
    }
    if ft >= FILETIME_UNIX_EPOCH {
        UNIX_EPOCH.checked_add(duration(ft - FILETIME_UNIX_EPOCH)).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(duration(FILETIME_UNIX_EPOCH - ft)).unwrap_or(UNIX_EPOCH)
    }
}

impl FileSystemContext for NimbusWinFsp {
    type FileContext = NimbusFile;

    fn get_security_by_name(
        &self,
        file_name: &U16CStr,
        _security_descriptor: Option<&mut [c_void]>,
        _reparse_point_resolver: impl FnOnce(&U16CStr) -> Option<FileSecurity>,
    ) -> winfsp::Result<FileSecurity> {
        let comps = components(file_name).map_err(|e| fail("get_security_by_name", &e))?;
        let a = self.block("get_security_by_name", resolve(&self.vfs, &comps))?;
        // No security descriptor (see the module comment): size 0.
        Ok(FileSecurity { reparse: false, sz_security_descriptor: 0, attributes: attributes(&a) })
    }

    fn open(
        &self,
        file_name: &U16CStr,
        create_options: u32,
        granted_access: u32,
        file_info: &mut OpenFileInfo,
    ) -> winfsp::Result<NimbusFile> {
        let comps = components(file_name).map_err(|e| fail("open", &e))?;
        let mode = OpenMode {
            write: granted_access & win::WRITE_ACCESS != 0,
            truncate: false,
            delete_on_close: create_options & win::FILE_DELETE_ON_CLOSE != 0,
        };
        let (attr, fh) = self.block("open", async {
            let a = resolve(&self.vfs, &comps).await?;
            match a.kind {
                Kind::Dir if create_options & win::FILE_NON_DIRECTORY_FILE != 0 => Err(VfsError::IsDir),
                Kind::Dir => Ok((a, self.vfs.opendir(a.ino)?)),
                Kind::File if create_options & win::FILE_DIRECTORY_FILE != 0 => Err(VfsError::NotDir),
                Kind::File => {
                    let (fh, _keep_cache) = self.vfs.open(a.ino, mode).await?;
                    Ok((a, fh))
                }
            }
        })?;
        fill_info(file_info.as_mut(), &attr);
        Ok(NimbusFile::new(attr.ino, fh, attr.kind == Kind::Dir))
    }

    fn close(&self, ctx: NimbusFile) {
        if ctx.is_dir {
            self.vfs.releasedir(ctx.fh);
            return;
        }
        // Close cannot fail, and the core's release may upload (the last writer's changes):
        // let it run on the runtime instead of holding a WinFsp thread meanwhile. Until it
        // has, the file reads from its staging copy; the journal keeps it across a crash.
        let (vfs, fh) = (self.vfs.clone(), ctx.fh);
        self.rt.spawn(async move {
            if let Err(e) = vfs.release(fh).await {
                log_err("close", &e);
            }
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        file_name: &U16CStr,
        create_options: u32,
        _granted_access: u32,
        file_attributes: u32,
        _security_descriptor: Option<&[c_void]>,
        _allocation_size: u64,
        _extra_buffer: Option<&[u8]>,
        _extra_buffer_is_reparse_point: bool,
        file_info: &mut OpenFileInfo,
    ) -> winfsp::Result<NimbusFile> {
        let comps = components(file_name).map_err(|e| fail("create", &e))?;
        let is_dir = create_options & win::FILE_DIRECTORY_FILE != 0;
        let (attr, fh) = self.block("create", async {
            let Some((parent, name)) = resolve_parent(&self.vfs, &comps).await? else {
                // The root always exists.
                return Err(VfsError::Exists);
            };
            if is_dir {
                let a = self.vfs.mkdir(parent.ino, name).await?;
                Ok((a, self.vfs.opendir(a.ino)?))
            } else {
                let mode = OpenMode {
                    write: true,
                    truncate: false,
                    delete_on_close: create_options & win::FILE_DELETE_ON_CLOSE != 0,
                };
                let readonly = file_attributes & win::FILE_ATTRIBUTE_READONLY != 0;
                self.vfs.create(parent.ino, name, mode, readonly).await
            }
        })?;
        fill_info(file_info.as_mut(), &attr);
        Ok(NimbusFile::new(attr.ino, fh, is_dir))
    }

    fn cleanup(&self, ctx: &NimbusFile, file_name: Option<&U16CStr>, flags: u32) {
        // Cleanup is the last handle's CloseHandle. With the Delete flag (delete disposition
        // or FILE_DELETE_ON_CLOSE) WinFsp expects the name gone now, before Close arrives:
        // a save that deletes the original and renames the new copy onto its name relies on
        // it. So the core marks the node and the name is unlinked here; the core's release
        // (at Close) then finds it already unlinked.
        if !FspCleanupFlags::FspCleanupDelete.is_flagged(flags) {
            return;
        }
        let Some(file_name) = file_name else { return };
        let deleted = self.rt.block_on(async {
            self.vfs.set_delete_pending(ctx.ino, true)?;
            let comps = components(file_name)?;
            let Some((parent, name)) = resolve_parent(&self.vfs, &comps).await? else { return Ok(()) };
            if self.vfs.lookup(parent.ino, name).await?.ino != ctx.ino {
                // The name went to another node meanwhile: not ours to delete.
                return Ok(());
            }
            if ctx.is_dir { self.vfs.rmdir(parent.ino, name).await } else { self.vfs.unlink(parent.ino, name).await }
        });
        if let Err(e) = deleted {
            log_err("cleanup (delete)", &e);
        }
    }

    fn flush(&self, ctx: Option<&NimbusFile>, file_info: &mut FileInfo) -> winfsp::Result<()> {
        // The whole volume: everything written is in the journal already.
        let Some(ctx) = ctx else { return Ok(()) };
        let a = self.block("flush", async {
            if !ctx.is_dir {
                // FlushFileBuffers: returns once the server has the data.
                self.vfs.fsync(ctx.fh).await?;
            }
            self.vfs.getattr(ctx.ino).await
        })?;
        fill_info(file_info, &a);
        Ok(())
    }

    fn get_file_info(&self, ctx: &NimbusFile, file_info: &mut FileInfo) -> winfsp::Result<()> {
        let a = self.block("get_file_info", self.vfs.getattr(ctx.ino))?;
        fill_info(file_info, &a);
        Ok(())
    }

    fn overwrite(
        &self,
        ctx: &NimbusFile,
        file_attributes: u32,
        replace_file_attributes: bool,
        _allocation_size: u64,
        _extra_buffer: Option<&[u8]>,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let readonly = file_attributes & win::FILE_ATTRIBUTE_READONLY != 0;
        let set = SetAttr {
            size: Some(0),
            mtime: None,
            // Supersede replaces the attributes; overwrite only adds to them.
            readonly: if replace_file_attributes { Some(readonly) } else { readonly.then_some(true) },
        };
        let a = self.block("overwrite", self.vfs.setattr(ctx.ino, Some(ctx.fh), set))?;
        fill_info(file_info, &a);
        Ok(())
    }

    fn read_directory(
        &self,
        ctx: &NimbusFile,
        _pattern: Option<&U16CStr>,
        marker: DirMarker<'_>,
        buffer: &mut [u8],
    ) -> winfsp::Result<u32> {
        // The pattern is ignored: WinFsp filters by it itself unless the volume asks for it
        // (PassQueryDirectoryPattern, off here).
        let Some(dir) = &ctx.dir else { return Err(fail("read_directory", &VfsError::NotDir)) };
        // No marker: a new enumeration (or a rewind), which (re)fills the buffer from the core.
        // With a marker WinFsp continues after that name in what is buffered.
        match dir.acquire(marker.is_none(), None) {
            Ok(lock) => self.fill_dir(ctx, &lock)?,
            // Not acquired, with success: the buffer is already filled.
            Err(FspError::NTSTATUS(0)) => {}
            Err(e) => return Err(e),
        }
        Ok(dir.read(marker, buffer))
    }

    fn rename(
        &self,
        _ctx: &NimbusFile,
        file_name: &U16CStr,
        new_file_name: &U16CStr,
        replace_if_exists: bool,
    ) -> winfsp::Result<()> {
        let from = components(file_name).map_err(|e| fail("rename", &e))?;
        let to = components(new_file_name).map_err(|e| fail("rename", &e))?;
        self.block("rename", async {
            let (Some((src_dir, src)), Some((dst_dir, dst))) =
                (resolve_parent(&self.vfs, &from).await?, resolve_parent(&self.vfs, &to).await?)
            else {
                return Err(VfsError::Invalid("the root cannot be renamed".into()));
            };
            self.vfs.rename(src_dir.ino, src, dst_dir.ino, dst, replace_if_exists).await
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn set_basic_info(
        &self,
        ctx: &NimbusFile,
        file_attributes: u32,
        _creation_time: u64,
        _last_access_time: u64,
        last_write_time: u64,
        _last_change_time: u64,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let set = SetAttr {
            size: None,
            // 0 and INVALID_FILE_ATTRIBUTES: leave the attributes alone.
            readonly: match file_attributes {
                0 | win::INVALID_FILE_ATTRIBUTES => None,
                a => Some(a & win::FILE_ATTRIBUTE_READONLY != 0),
            },
            // 0: leave alone; -1 and -2 (stop/resume automatic updates): nothing to keep.
            mtime: match last_write_time {
                0 => None,
                t if t >= u64::MAX - 1 => None,
                t => Some(system_time(t)),
            },
        };
        let a = self.block("set_basic_info", self.vfs.setattr(ctx.ino, Some(ctx.fh), set))?;
        fill_info(file_info, &a);
        Ok(())
    }

    fn set_delete(&self, ctx: &NimbusFile, _file_name: &U16CStr, delete_file: bool) -> winfsp::Result<()> {
        // The answer is due now (the deletion itself happens at cleanup): a read-only file
        // refuses (core), and so does a directory that is not empty.
        self.block("set_delete", async {
            if delete_file && ctx.is_dir {
                let h = self.vfs.opendir(ctx.ino)?;
                let first = self.vfs.readdir(h, 0, 1).await;
                self.vfs.releasedir(h);
                if !first?.is_empty() {
                    return Err(VfsError::NotEmpty);
                }
            }
            self.vfs.set_delete_pending(ctx.ino, delete_file)
        })
    }

    fn set_file_size(
        &self,
        ctx: &NimbusFile,
        new_size: u64,
        set_allocation_size: bool,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let a = self.block("set_file_size", async {
            let a = self.vfs.getattr(ctx.ino).await?;
            // Allocation is not a thing here; an allocation below the size truncates (as on
            // NTFS), anything else leaves the file alone. So does setting the size it has.
            if (set_allocation_size && new_size >= a.size) || new_size == a.size {
                return Ok(a);
            }
            let set = SetAttr { size: Some(new_size), ..SetAttr::default() };
            self.vfs.setattr(ctx.ino, Some(ctx.fh), set).await
        })?;
        fill_info(file_info, &a);
        Ok(())
    }

    fn read(&self, ctx: &NimbusFile, buffer: &mut [u8], offset: u64) -> winfsp::Result<u32> {
        let want = u32::try_from(buffer.len()).unwrap_or(u32::MAX);
        let data = self.block("read", self.vfs.read(ctx.fh, offset, want))?;
        if data.is_empty() && !buffer.is_empty() {
            return Err(FspError::NTSTATUS(ntstatus::STATUS_END_OF_FILE));
        }
        let n = data.len().min(buffer.len());
        buffer[..n].copy_from_slice(&data[..n]);
        Ok(n as u32)
    }

    fn write(
        &self,
        ctx: &NimbusFile,
        buffer: &[u8],
        offset: u64,
        write_to_eof: bool,
        constrained_io: bool,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<u32> {
        let (n, a) = self.block("write", write_at(&self.vfs, ctx, buffer, offset, write_to_eof, constrained_io))?;
        fill_info(file_info, &a);
        Ok(n)
    }

    fn get_volume_info(&self, out_volume_info: &mut VolumeInfo) -> winfsp::Result<()> {
        let (total, free) = self.rt.block_on(self.vfs.statfs());
        out_volume_info.total_size = total;
        out_volume_info.free_size = free;
        out_volume_info.set_volume_label(VOLUME_LABEL);
        Ok(())
    }
}

/// A drive letter (`Z:`, or `Z:\` as `std::path::absolute` makes it) in the form WinFsp
/// wants (`Z:`); anything else is passed on as a directory mount point.
fn mount_target(mountpoint: &Path) -> String {
    let s = mountpoint.to_string_lossy();
    let t = s.trim_end_matches(['\\', '/']);
    match t.as_bytes() {
        [letter, b':'] if letter.is_ascii_alphabetic() => t.to_ascii_uppercase(),
        _ => s.into_owned(),
    }
}

/// A WinFsp file system owned by one thread from mount to unmount, like FUSE's session thread:
/// it mounts, starts the dispatcher (WinFsp's own threads serve the calls), reports readiness,
/// then waits for `stop` (or for the sender to go) to unmount and free it. The host is `Send`
/// (winfsp 0.12.6: `FileSystemHost<T>` is for `T: Send`), so the thread is not required; it
/// keeps creating, unmounting and freeing the file system in one place.
pub(crate) struct HostThread {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl HostThread {
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        vfs: Arc<Vfs>,
        cfg: &MountConfig,
    ) -> Result<HostThread, MountError> {
        // Loads the WinFsp DLL (delay-loaded, see docs/MOUNT-WINDOWS.md) from the installation.
        winfsp::winfsp_init().map_err(|e| {
            MountError::Runtime(format!("cannot load WinFsp ({e:?}); is WinFsp installed? https://winfsp.dev/rel/"))
        })?;
        let target = mount_target(&cfg.mountpoint);
        let handle = rt.handle().clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), MountError>>();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("winfsp-host".into())
            .spawn(move || {
                let mut host = match mount_host(vfs, handle, &target) {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                // Until stopped, or until the `Mounted` holding the sender is gone.
                let _ = stop_rx.recv();
                host.unmount();
                host.stop();
                // Dropping the host frees the file system (and our context) before the runtime goes.
                drop(host);
            })
            .map_err(|e| MountError::Runtime(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(HostThread { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(MountError::Runtime("the WinFsp host thread ended before mounting".into())),
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Unmounts and waits for the host thread to free the file system.
    pub(crate) fn unmount_and_join(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn mount_host(
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    target: &str,
) -> Result<FileSystemHost<NimbusWinFsp>, MountError> {
    let mount_err = |what: &str, e: String| MountError::Mount {
        path: target.to_string(),
        err: std::io::Error::other(format!("{what}: {e}")),
    };
    let now = filetime(SystemTime::now());
    let mut params = VolumeParams::new();
    params
        .filesystem_name("Nimbus")
        .sector_size(SECTOR_SIZE)
        .sectors_per_allocation_unit(1)
        .max_component_length(255)
        .volume_creation_time(now)
        .volume_serial_number((now / 10_000_000) as u32)
        .file_info_timeout(INFO_TIMEOUT_MS)
        .case_sensitive_search(false)
        .case_preserved_names(true)
        .unicode_on_disk(true)
        .persistent_acls(false)
        // Cleanup is only sent for handles that modified or deleted something: the adapter
        // acts on cleanup only to delete.
        .post_cleanup_when_modified_only(true)
        // Flush cached data at the last handle's cleanup and let go of the file, so Close
        // (where the core uploads) follows CloseHandle promptly.
        .flush_and_purge_on_cleanup(true);
    let fs = NimbusWinFsp::new(vfs, rt);
    let mut host =
        FileSystemHost::new(params, fs).map_err(|e| mount_err("cannot create the file system", e.to_string()))?;
    host.mount(target).map_err(|e| mount_err("cannot mount", e.to_string()))?;
    host.start_with_threads(DISPATCHER_THREADS).map_err(|e| mount_err("cannot start", e.to_string()))?;
    Ok(host)
}

/// Mounts and serves in this process until Ctrl-C (or Ctrl-Break): then uploads every
/// pending write and unmounts. The Windows counterpart of `session::run`.
pub fn run(client: Client, cfg: MountConfig) -> Result<(), MountError> {
    let (rt, vfs) = crate::session::start(client, &cfg)?;
    let host = HostThread::start(&rt, vfs.clone(), &cfg)?;
    crate::session::start_background(&rt, vfs.clone(), cfg.clone());
    let target = mount_target(&cfg.mountpoint);
    tracing::info!(mountpoint = %target, "mounted");

    rt.block_on(async {
        let mut ctrl_break = tokio::signal::windows::ctrl_break().ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match ctrl_break.as_mut() {
                    Some(b) => { b.recv().await; }
                    None => std::future::pending().await,
                }
            } => {}
        }
        tracing::info!("unmounting: uploading pending writes first");
        match tokio::time::timeout(Duration::from_secs(600), vfs.flush_all()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "some writes could not be uploaded; they stay in the journal for the next mount")
            }
            Err(_) => tracing::warn!("uploads took too long; the rest stay in the journal for the next mount"),
        }
    });
    host.unmount_and_join();
    let _ = std::fs::remove_file(&cfg.status_file);
    tracing::info!(mountpoint = %target, "unmounted");
    Ok(())
}
