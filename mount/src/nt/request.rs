//! What a WinFsp request asks for, in the core's terms: paths, create options and granted
//! access, write offsets, names a directory entry can hold, mount targets.

use std::path::Path;

use crate::core::{Kind, OpenMode, VfsError, VfsResult};

use super::info::FILE_ATTRIBUTE_READONLY;

/// CreateOptions bits (ntioapi.h).
pub const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
/// Access rights (winnt.h) that mean "this handle writes data".
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
const WRITE_ACCESS: u32 = FILE_WRITE_DATA | FILE_APPEND_DATA | GENERIC_ALL | GENERIC_WRITE;

/// The longest name a directory entry holds, in UTF-16 units (the volume's max component
/// length, and the `winfsp` crate's `DirInfo` buffer).
pub const MAX_NAME_UNITS: usize = 255;

/// `\dir\name` → `["dir", "name"]`; the root `\` → `[]`. Empty components (doubled or
/// trailing separators) are dropped.
pub fn components(path: &[u16]) -> VfsResult<Vec<String>> {
    let path = String::from_utf16(path).map_err(|_| VfsError::InvalidName("the name is not valid UTF-16".into()))?;
    Ok(path.split('\\').filter(|c| !c.is_empty()).map(str::to_owned).collect())
}

/// The parent's components and the last name of a path; `None` for the root.
pub fn split_parent(comps: &[String]) -> Option<(&[String], &str)> {
    comps.split_last().map(|(name, parent)| (parent, name.as_str()))
}

/// What `Open` opens an existing node as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAs {
    Dir,
    File(OpenMode),
}

/// `Open` of an existing node of `kind`: FILE_NON_DIRECTORY_FILE refuses a directory,
/// FILE_DIRECTORY_FILE a file; a file handle writes if write access was granted and is
/// deleted at its last close with FILE_DELETE_ON_CLOSE. (Truncation is `Overwrite`'s.)
pub fn open_as(kind: Kind, create_options: u32, granted_access: u32) -> VfsResult<OpenAs> {
    match kind {
        Kind::Dir if create_options & FILE_NON_DIRECTORY_FILE != 0 => Err(VfsError::IsDir),
        Kind::Dir => Ok(OpenAs::Dir),
        Kind::File if create_options & FILE_DIRECTORY_FILE != 0 => Err(VfsError::NotDir),
        Kind::File => Ok(OpenAs::File(OpenMode {
            write: granted_access & WRITE_ACCESS != 0,
            truncate: false,
            delete_on_close: create_options & FILE_DELETE_ON_CLOSE != 0,
        })),
    }
}

/// What `Create` (the name does not exist yet) makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateAs {
    Dir,
    /// Always a writing handle (whoever creates a file writes it, whatever access it asked
    /// for), read-only from FILE_ATTRIBUTE_READONLY.
    File {
        mode: OpenMode,
        readonly: bool,
    },
}

pub fn create_as(create_options: u32, file_attributes: u32) -> CreateAs {
    if create_options & FILE_DIRECTORY_FILE != 0 {
        CreateAs::Dir
    } else {
        CreateAs::File {
            mode: OpenMode {
                write: true,
                truncate: false,
                delete_on_close: create_options & FILE_DELETE_ON_CLOSE != 0,
            },
            readonly: file_attributes & FILE_ATTRIBUTE_READONLY != 0,
        }
    }
}

/// Where a `Write` of `len` bytes goes in a file of `size` bytes: the offset and how many of
/// the bytes to write, or `None` for none at all. Constrained (paging) I/O never goes past
/// the current end (it comes first, as in WinFsp's own file systems: with both flags the
/// offset given counts); `write_to_eof` appends at the current end.
pub fn write_range(
    offset: u64,
    len: usize,
    size: u64,
    write_to_eof: bool,
    constrained_io: bool,
) -> Option<(u64, usize)> {
    if constrained_io {
        if offset >= size {
            return None;
        }
        let room = usize::try_from(size - offset).unwrap_or(usize::MAX);
        Some((offset, len.min(room)))
    } else if write_to_eof {
        Some((size, len))
    } else {
        Some((offset, len))
    }
}

/// A name as a directory entry holds it, or `None` if it is longer than one can (Windows
/// could not open it anyway).
pub fn entry_name(name: &str) -> Option<Vec<u16>> {
    let wide: Vec<u16> = name.encode_utf16().collect();
    (wide.len() <= MAX_NAME_UNITS).then_some(wide)
}

/// A drive letter (`Z:`, or `Z:\` as `std::path::absolute` makes it) in the form WinFsp
/// wants (`Z:`); anything else is passed on as a directory mount point.
pub fn mount_target(mountpoint: &Path) -> String {
    let s = mountpoint.to_string_lossy();
    let t = s.trim_end_matches(['\\', '/']);
    match t.as_bytes() {
        [letter, b':'] if letter.is_ascii_alphabetic() => t.to_ascii_uppercase(),
        _ => s.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn paths_split_on_backslashes() {
        let table: [(&str, &[&str]); 8] = [
            ("\\", &[]),
            ("", &[]),
            ("\\a", &["a"]),
            ("\\dir\\name.txt", &["dir", "name.txt"]),
            ("\\dir\\", &["dir"]),
            ("\\\\dir\\\\x", &["dir", "x"]),
            // Only `\` separates: `/` is part of a name (which the core then refuses).
            ("\\a/b", &["a/b"]),
            ("\\Grüße\\日本", &["Grüße", "日本"]),
        ];
        for (path, want) in table {
            let got = components(&wide(path)).expect("valid UTF-16");
            assert_eq!(got, want, "{path:?}");
        }
    }

    #[test]
    fn unpaired_surrogate_is_an_invalid_name() {
        let path = [u16::from(b'\\'), 0xD800, u16::from(b'x')];
        assert!(matches!(components(&path), Err(VfsError::InvalidName(_))));
    }

    #[test]
    fn parent_and_name() {
        let comps = |p: &str| components(&wide(p)).expect("valid");
        assert_eq!(split_parent(&comps("\\")), None);
        let a = comps("\\a");
        assert_eq!(split_parent(&a), Some((&[][..], "a")));
        let abc = comps("\\a\\b\\c");
        assert_eq!(split_parent(&abc), Some((&abc[..2], "c")));
    }

    #[test]
    fn open_decisions() {
        let file = |write, delete_on_close| Ok(OpenAs::File(OpenMode { write, truncate: false, delete_on_close }));
        const READ_DATA: u32 = 0x0000_0001;
        const GENERIC_READ: u32 = 0x8000_0000;
        const DELETE: u32 = 0x0001_0000;
        const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
        let table: [(Kind, u32, u32, VfsResult<OpenAs>); 14] = [
            (Kind::Dir, 0, GENERIC_READ, Ok(OpenAs::Dir)),
            (Kind::Dir, FILE_DIRECTORY_FILE, GENERIC_WRITE, Ok(OpenAs::Dir)),
            (Kind::Dir, FILE_NON_DIRECTORY_FILE, READ_DATA, Err(VfsError::IsDir)),
            (Kind::File, FILE_DIRECTORY_FILE, READ_DATA, Err(VfsError::NotDir)),
            (Kind::File, FILE_NON_DIRECTORY_FILE, READ_DATA, file(false, false)),
            (Kind::File, 0, GENERIC_READ, file(false, false)),
            (Kind::File, 0, FILE_WRITE_DATA, file(true, false)),
            (Kind::File, 0, FILE_APPEND_DATA, file(true, false)),
            (Kind::File, 0, GENERIC_WRITE | GENERIC_READ, file(true, false)),
            (Kind::File, 0, GENERIC_ALL, file(true, false)),
            // Changing attributes or deleting is not writing data.
            (Kind::File, 0, FILE_WRITE_ATTRIBUTES | DELETE, file(false, false)),
            (Kind::File, FILE_DELETE_ON_CLOSE, DELETE, file(false, true)),
            (Kind::File, FILE_DELETE_ON_CLOSE | FILE_NON_DIRECTORY_FILE, FILE_WRITE_DATA, file(true, true)),
            // Delete-on-close on a directory is WinFsp's (cleanup's Delete flag), not a mode.
            (Kind::Dir, FILE_DELETE_ON_CLOSE, DELETE, Ok(OpenAs::Dir)),
        ];
        for (kind, options, access, want) in table {
            let got = open_as(kind, options, access);
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{kind:?} options={options:#x} access={access:#x}");
        }
    }

    #[test]
    fn create_decisions() {
        let file = |delete_on_close, readonly| CreateAs::File {
            mode: OpenMode { write: true, truncate: false, delete_on_close },
            readonly,
        };
        let table = [
            (0, 0, file(false, false)),
            (FILE_NON_DIRECTORY_FILE, 0x20 /* ARCHIVE */, file(false, false)),
            (0, FILE_ATTRIBUTE_READONLY, file(false, true)),
            (FILE_DELETE_ON_CLOSE, 0, file(true, false)),
            (FILE_DELETE_ON_CLOSE, FILE_ATTRIBUTE_READONLY, file(true, true)),
            (FILE_DIRECTORY_FILE, 0, CreateAs::Dir),
            // A directory has no read-only flag in the core; the attribute is not kept.
            (FILE_DIRECTORY_FILE | FILE_DELETE_ON_CLOSE, FILE_ATTRIBUTE_READONLY, CreateAs::Dir),
        ];
        for (options, attrs, want) in table {
            assert_eq!(create_as(options, attrs), want, "options={options:#x} attributes={attrs:#x}");
        }
    }

    #[test]
    fn write_ranges() {
        // (offset, len, size, write_to_eof, constrained_io) → range
        let table = [
            ((0, 10, 0, false, false), Some((0, 10))),
            ((5, 10, 3, false, false), Some((5, 10))),
            // Append: at the current size, whatever the offset.
            ((0, 10, 100, true, false), Some((100, 10))),
            ((500, 10, 100, true, false), Some((100, 10))),
            ((0, 0, 100, true, false), Some((100, 0))),
            // Constrained: cut at the end, nothing at or past it.
            ((0, 10, 100, false, true), Some((0, 10))),
            ((95, 10, 100, false, true), Some((95, 5))),
            ((99, 10, 100, false, true), Some((99, 1))),
            ((100, 10, 100, false, true), None),
            ((150, 10, 100, false, true), None),
            ((0, 10, 0, false, true), None),
            // Both: constrained wins, at the offset given (never an append past the end).
            ((10, 10, 100, true, true), Some((10, 10))),
            ((95, 10, 100, true, true), Some((95, 5))),
            ((100, 10, 100, true, true), None),
        ];
        for ((offset, len, size, eof, constrained), want) in table {
            assert_eq!(
                write_range(offset, len, size, eof, constrained),
                want,
                "offset={offset} len={len} size={size} write_to_eof={eof} constrained_io={constrained}"
            );
        }
        // Room beyond usize (a 32-bit host): the buffer's own length bounds it.
        assert_eq!(write_range(0, 7, u64::MAX, false, true), Some((0, 7)));
    }

    #[test]
    fn entry_names_up_to_255_utf16_units() {
        let ascii = |n| "a".repeat(n);
        // 😀 is two UTF-16 units (a surrogate pair), é one: units count, not chars or bytes.
        let table: [(String, Option<usize>); 7] = [
            (ascii(1), Some(1)),
            (ascii(254), Some(254)),
            (ascii(255), Some(255)),
            (ascii(256), None),
            (format!("{}😀", ascii(253)), Some(255)),
            (format!("{}😀", ascii(254)), None),
            ("é".repeat(255), Some(255)),
        ];
        for (name, want) in table {
            assert_eq!(entry_name(&name).map(|w| w.len()), want, "{} chars", name.chars().count());
        }
        assert_eq!(entry_name("Grüße"), Some(wide("Grüße")));
    }

    #[test]
    fn mount_targets() {
        let table = [
            ("Z:", "Z:"),
            ("z:", "Z:"),
            ("Z:\\", "Z:"),
            ("z:/", "Z:"),
            ("C:\\mnt\\nimbus", "C:\\mnt\\nimbus"),
            ("\\\\?\\C:\\mnt", "\\\\?\\C:\\mnt"),
            ("1:", "1:"),
            ("ZZ:", "ZZ:"),
        ];
        for (given, want) in table {
            assert_eq!(mount_target(Path::new(given)), want, "{given:?}");
        }
    }
}
