//! Positional reads and writes on a shared `&File`, the same on every platform: the cache
//! entries and the mount's staging files are read and written at offsets by several threads
//! through one handle.
//!
//! One loop per operation; only the single call under it is per platform: `pread`/`pwrite`
//! on Unix, `seek_read`/`seek_write` on Windows. The Windows calls also move the handle's
//! cursor (`pread` does not); nothing that uses this module reads or writes at the cursor.
//! Linux runs the loops (the tests below, and everything using the module), so only the one
//! Windows call in each function is compiled but not run here.

use std::fs::File;
use std::io::{self, ErrorKind};

/// Fills `buf` from `offset`; [`ErrorKind::UnexpectedEof`] if the file ends first.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    read_exact_with(buf, offset, |b, off| read_at(file, b, off))
}

/// Writes all of `buf` at `offset`, growing the file if it ends before.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    write_all_with(buf, offset, |b, off| write_at(file, b, off))
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(windows)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(file, buf, offset)
}

/// Either call may transfer less than asked (a signal, a pipe, a large buffer on Windows):
/// carry on from where it stopped.
fn read_exact_with(
    mut buf: &mut [u8],
    mut offset: u64,
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
) -> io::Result<()> {
    while !buf.is_empty() {
        match read(buf, offset) {
            Ok(0) => return Err(io::Error::new(ErrorKind::UnexpectedEof, "file ends before the requested range")),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_all_with(
    mut buf: &[u8],
    mut offset: u64,
    mut write: impl FnMut(&[u8], u64) -> io::Result<usize>,
) -> io::Result<()> {
    while !buf.is_empty() {
        match write(buf, offset) {
            Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "the file took no more bytes")),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(content: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, content).expect("write");
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
        (dir, f)
    }

    #[test]
    fn reads_and_writes_at_offsets_of_one_shared_handle() {
        let (_dir, f) = file_with(b"0123456789");
        let mut buf = [0u8; 4];
        read_exact_at(&f, &mut buf, 3).expect("read");
        assert_eq!(&buf, b"3456");
        write_all_at(&f, b"ab", 8).expect("write");
        // Past the end: the file grows, the gap reads as zeros.
        write_all_at(&f, b"xy", 12).expect("write past the end");
        let mut all = [0u8; 14];
        read_exact_at(&f, &mut all, 0).expect("read all");
        assert_eq!(&all, b"01234567ab\0\0xy");
        // Empty buffers touch nothing, even beyond the end.
        read_exact_at(&f, &mut [], 1 << 40).expect("empty read");
        write_all_at(&f, &[], 1 << 40).expect("empty write");
        assert_eq!(f.metadata().expect("metadata").len(), 14);
    }

    #[test]
    fn a_read_past_the_end_is_unexpected_eof() {
        let (_dir, f) = file_with(b"short");
        let mut buf = [0u8; 4];
        let err = read_exact_at(&f, &mut buf, 3).expect_err("only 2 bytes left");
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
        let err = read_exact_at(&f, &mut buf, 100).expect_err("nothing left");
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
    }

    #[test]
    fn short_and_interrupted_transfers_are_continued_at_the_right_offset() {
        let data: Vec<u8> = (0..=255).collect();
        let mut calls = 0;
        let mut buf = [0u8; 200];
        read_exact_with(&mut buf, 40, |b, off| {
            calls += 1;
            if calls % 3 == 0 {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = b.len().min(7);
            b[..n].copy_from_slice(&data[off as usize..off as usize + n]);
            Ok(n)
        })
        .expect("read");
        assert_eq!(&buf[..], &data[40..240]);

        let mut sink = vec![0u8; 256];
        let mut calls = 0;
        write_all_with(&data[..100], 50, |b, off| {
            calls += 1;
            if calls % 4 == 0 {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = b.len().min(9);
            sink[off as usize..off as usize + n].copy_from_slice(&b[..n]);
            Ok(n)
        })
        .expect("write");
        assert_eq!(&sink[50..150], &data[..100]);
        assert!(sink[..50].iter().chain(&sink[150..]).all(|b| *b == 0));
    }

    #[test]
    fn other_errors_and_zero_length_writes_stop_the_loop() {
        let mut buf = [0u8; 8];
        let err = read_exact_with(&mut buf, 0, |_, _| Err(io::Error::other("disk gone"))).expect_err("fails");
        assert_eq!(err.to_string(), "disk gone");
        let err = write_all_with(b"abc", 0, |_, _| Ok(0)).expect_err("no progress");
        assert_eq!(err.kind(), ErrorKind::WriteZero);
    }
}
