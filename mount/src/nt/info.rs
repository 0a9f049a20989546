//! What Windows is told about a file (attribute bits, FILETIMEs, sizes) and what it asks to
//! change (`SetBasicInfo`, `Overwrite`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::core::{Attr, Kind, SetAttr};

/// File attribute bits (winnt.h).
pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
pub const INVALID_FILE_ATTRIBUTES: u32 = u32::MAX;

/// Sector and allocation unit reported to Windows (allocation sizes are rounded to it).
pub const SECTOR_SIZE: u16 = 4096;
pub const ALLOCATION_UNIT: u64 = SECTOR_SIZE as u64;

/// 100 ns intervals between 1601-01-01 (FILETIME's epoch) and 1970-01-01.
pub const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;
const TICKS_PER_SEC: u64 = 10_000_000;

/// SystemTime → FILETIME (100 ns since 1601-01-01); saturates at both ends (before 1601 is 0).
pub fn filetime(t: SystemTime) -> u64 {
    fn ticks(d: Duration) -> u64 {
        d.as_secs().saturating_mul(TICKS_PER_SEC).saturating_add(u64::from(d.subsec_nanos() / 100))
    }
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => FILETIME_UNIX_EPOCH.saturating_add(ticks(d)),
        Err(before) => FILETIME_UNIX_EPOCH.saturating_sub(ticks(before.duration())),
    }
}

/// FILETIME → SystemTime; a time this platform's SystemTime cannot hold becomes the Unix epoch.
pub fn system_time(ft: u64) -> SystemTime {
    fn duration(ticks: u64) -> Duration {
        Duration::new(ticks / TICKS_PER_SEC, ((ticks % TICKS_PER_SEC) * 100) as u32)
    }
    if ft >= FILETIME_UNIX_EPOCH {
        UNIX_EPOCH.checked_add(duration(ft - FILETIME_UNIX_EPOCH)).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(duration(FILETIME_UNIX_EPOCH - ft)).unwrap_or(UNIX_EPOCH)
    }
}

/// The attribute bits of a node: directory or archive, plus read-only.
pub fn attributes(a: &Attr) -> u32 {
    let kind = match a.kind {
        Kind::Dir => FILE_ATTRIBUTE_DIRECTORY,
        Kind::File => FILE_ATTRIBUTE_ARCHIVE,
    };
    if a.readonly { kind | FILE_ATTRIBUTE_READONLY } else { kind }
}

/// WinFsp's `FSP_FSCTL_FILE_INFO` as the adapter fills it (reparse tag, hard links and EA
/// size are always 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub file_attributes: u32,
    pub file_size: u64,
    pub allocation_size: u64,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub index_number: u64,
}

impl FileInfo {
    pub fn of(a: &Attr) -> FileInfo {
        let t = filetime(a.mtime);
        // A directory has no size of its own on Windows.
        let size = if a.kind == Kind::Dir { 0 } else { a.size };
        FileInfo {
            file_attributes: attributes(a),
            file_size: size,
            allocation_size: allocation_size(size),
            // The core keeps a modification time and a status change time; Windows asks for
            // four. ChangeTime is NTFS's "data or metadata changed" (a rename, the read-only
            // bit), which is POSIX's ctime.
            creation_time: t,
            last_access_time: t,
            last_write_time: t,
            change_time: filetime(a.ctime),
            index_number: a.ino,
        }
    }
}

/// The size rounded up to the allocation unit (at most the last whole unit below 2^64).
pub fn allocation_size(size: u64) -> u64 {
    size.div_ceil(ALLOCATION_UNIT).checked_mul(ALLOCATION_UNIT).unwrap_or(u64::MAX / ALLOCATION_UNIT * ALLOCATION_UNIT)
}

/// `SetBasicInfo`: the read-only bit and the last-write time are kept; 0 and
/// `INVALID_FILE_ATTRIBUTES` leave the attributes alone, a time of 0 leaves it alone, and -1
/// and -2 (stop/resume automatic updates) have nothing to stop here. Creation, access and
/// change times are not kept (the core has one time).
pub fn basic_info_change(file_attributes: u32, last_write_time: u64) -> SetAttr {
    SetAttr {
        size: None,
        readonly: match file_attributes {
            0 | INVALID_FILE_ATTRIBUTES => None,
            a => Some(a & FILE_ATTRIBUTE_READONLY != 0),
        },
        mtime: match last_write_time {
            0 => None,
            t if t >= u64::MAX - 1 => None,
            t => Some(system_time(t)),
        },
    }
}

/// `Overwrite` (a create disposition of FILE_OVERWRITE(_IF) or FILE_SUPERSEDE on an existing
/// file): empty the file; supersede (`replace`) replaces the read-only bit, overwrite only
/// adds it.
pub fn overwrite_change(file_attributes: u32, replace: bool) -> SetAttr {
    let readonly = file_attributes & FILE_ATTRIBUTE_READONLY != 0;
    SetAttr { size: Some(0), mtime: None, readonly: if replace { Some(readonly) } else { readonly.then_some(true) } }
}

/// `SetFileSize`: the size to truncate or extend to, or `None` to leave the file alone.
/// Allocation is not a thing here: an allocation size below the size truncates (as on NTFS),
/// one at or above it changes nothing; so does setting the size the file has.
pub fn resize(current: u64, new_size: u64, set_allocation_size: bool) -> Option<u64> {
    if (set_allocation_size && new_size >= current) || new_size == current { None } else { Some(new_size) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: Kind, size: u64, readonly: bool) -> Attr {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        Attr { ino: 42, kind, size, mtime: t, ctime: t, readonly, unlinked: false }
    }

    #[test]
    fn filetime_of_known_instants() {
        let table: [(SystemTime, u64); 6] = [
            (UNIX_EPOCH, FILETIME_UNIX_EPOCH),
            // 2023-11-14T22:13:20Z, as Windows' FILETIME shows it.
            (UNIX_EPOCH + Duration::from_secs(1_700_000_000), 133_444_736_000_000_000),
            // Below 100 ns is cut, not rounded.
            (UNIX_EPOCH + Duration::new(1, 199), FILETIME_UNIX_EPOCH + 10_000_001),
            // 1601-01-01 itself, and before it: FILETIME has nothing earlier.
            (UNIX_EPOCH - Duration::from_secs(11_644_473_600), 0),
            (UNIX_EPOCH - Duration::from_secs(11_644_473_601), 0),
            (UNIX_EPOCH - Duration::new(0, 100), FILETIME_UNIX_EPOCH - 1),
        ];
        for (t, want) in table {
            assert_eq!(filetime(t), want, "{t:?}");
        }
    }

    #[test]
    fn filetime_saturates_past_its_range() {
        // 2^64 × 100 ns after 1601 is in the year 60056; a later SystemTime (Linux holds it)
        // saturates instead of wrapping to an early date.
        // (Windows' own SystemTime cannot hold such times: nothing to check there.)
        let Some(far) = UNIX_EPOCH.checked_add(Duration::from_secs(u64::MAX / TICKS_PER_SEC)) else { return };
        assert_eq!(filetime(far), u64::MAX);
        let Some(last) = UNIX_EPOCH.checked_add(Duration::from_secs((u64::MAX - FILETIME_UNIX_EPOCH) / TICKS_PER_SEC))
        else {
            return;
        };
        assert!(filetime(last) < u64::MAX && filetime(last) > u64::MAX - TICKS_PER_SEC);
    }

    #[test]
    fn system_time_of_known_filetimes() {
        let table: [(u64, SystemTime); 5] = [
            (FILETIME_UNIX_EPOCH, UNIX_EPOCH),
            (133_444_736_000_000_000, UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            (FILETIME_UNIX_EPOCH + 10_000_001, UNIX_EPOCH + Duration::new(1, 100)),
            (FILETIME_UNIX_EPOCH - 1, UNIX_EPOCH - Duration::new(0, 100)),
            (0, UNIX_EPOCH - Duration::from_secs(11_644_473_600)),
        ];
        for (ft, want) in table {
            assert_eq!(system_time(ft), want, "{ft}");
        }
    }

    #[test]
    fn filetime_round_trips() {
        // A FILETIME comes back unchanged: 100 ns steps both ways. (Up to i64::MAX, the most
        // Windows' own SystemTime holds.)
        let top = i64::MAX as u64;
        for ft in [0, 1, 9_999_999, FILETIME_UNIX_EPOCH - 1, FILETIME_UNIX_EPOCH, FILETIME_UNIX_EPOCH + 1, top] {
            assert_eq!(filetime(system_time(ft)), ft, "{ft}");
        }
    }

    #[test]
    fn attribute_bits() {
        let table = [
            (Kind::File, false, FILE_ATTRIBUTE_ARCHIVE),
            (Kind::File, true, FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY),
            (Kind::Dir, false, FILE_ATTRIBUTE_DIRECTORY),
            (Kind::Dir, true, FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_READONLY),
        ];
        for (kind, readonly, want) in table {
            assert_eq!(attributes(&attr(kind, 0, readonly)), want, "{kind:?} readonly={readonly}");
        }
    }

    #[test]
    fn allocation_rounds_up_to_the_unit() {
        let table = [
            (0, 0),
            (1, 4096),
            (4095, 4096),
            (4096, 4096),
            (4097, 8192),
            (u64::MAX - 4095, u64::MAX - 4095),
            (u64::MAX, u64::MAX - 4095),
        ];
        for (size, want) in table {
            assert_eq!(allocation_size(size), want, "{size}");
        }
    }

    #[test]
    fn file_info_of_a_file_and_a_directory() {
        let f = FileInfo::of(&attr(Kind::File, 5000, true));
        let t = 133_444_736_000_000_000;
        assert_eq!(
            f,
            FileInfo {
                file_attributes: FILE_ATTRIBUTE_ARCHIVE | FILE_ATTRIBUTE_READONLY,
                file_size: 5000,
                allocation_size: 8192,
                creation_time: t,
                last_access_time: t,
                last_write_time: t,
                change_time: t,
                index_number: 42,
            }
        );
        // A directory's size (the core may report one) is not shown.
        let d = FileInfo::of(&attr(Kind::Dir, 5000, false));
        // A rename or an attribute change moves ChangeTime, not the write time.
        let mut renamed = attr(Kind::File, 5000, false);
        renamed.ctime = renamed.mtime + Duration::from_secs(60);
        let r = FileInfo::of(&renamed);
        assert_eq!((r.last_write_time, r.change_time), (t, t + 60 * 10_000_000));
        assert_eq!((d.file_attributes, d.file_size, d.allocation_size), (FILE_ATTRIBUTE_DIRECTORY, 0, 0));
    }

    #[test]
    fn basic_info_changes() {
        let t = 133_444_736_000_000_000;
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let table: [(u32, u64, Option<bool>, Option<SystemTime>); 8] = [
            (0, 0, None, None),
            (INVALID_FILE_ATTRIBUTES, 0, None, None),
            (FILE_ATTRIBUTE_ARCHIVE, 0, Some(false), None),
            (FILE_ATTRIBUTE_READONLY, 0, Some(true), None),
            (FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_ARCHIVE, t, Some(true), Some(when)),
            // -1 and -2: stop and resume automatic updates.
            (0, u64::MAX, None, None),
            (0, u64::MAX - 1, None, None),
            (0, u64::MAX - 2, None, Some(system_time(u64::MAX - 2))),
        ];
        for (attrs, time, readonly, mtime) in table {
            let s = basic_info_change(attrs, time);
            assert_eq!((s.size, s.readonly, s.mtime), (None, readonly, mtime), "{attrs:#x} {time}");
        }
    }

    #[test]
    fn overwrite_empties_and_supersede_replaces_read_only() {
        let table = [
            (0, false, None),
            (FILE_ATTRIBUTE_ARCHIVE, false, None),
            (FILE_ATTRIBUTE_READONLY, false, Some(true)),
            (0, true, Some(false)),
            (FILE_ATTRIBUTE_READONLY, true, Some(true)),
        ];
        for (attrs, replace, readonly) in table {
            let s = overwrite_change(attrs, replace);
            assert_eq!((s.size, s.mtime, s.readonly), (Some(0), None, readonly), "{attrs:#x} replace={replace}");
        }
    }

    #[test]
    fn resize_rule() {
        // (current, new, allocation?, result)
        let table = [
            (100, 50, false, Some(50)),
            (100, 200, false, Some(200)),
            (100, 100, false, None),
            (100, 50, true, Some(50)),
            (100, 100, true, None),
            (100, 4096, true, None),
            (0, 0, true, None),
            (0, 1, true, None),
            (1, 0, true, Some(0)),
        ];
        for (current, new, alloc, want) in table {
            assert_eq!(resize(current, new, alloc), want, "{current} → {new} allocation={alloc}");
        }
    }
}
