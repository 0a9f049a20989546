//! Text output: sizes, times, tables, JSON. Everything goes through [`outln!`] so a closed
//! pipe (`nimbus ls | head`) ends the program quietly instead of panicking.

use std::io::{self, IsTerminal, Write};

use anyhow::{Result, bail};
use serde::Serialize;

/// `println!` that returns an error instead of panicking when stdout is closed.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))?
    };
}

pub fn write_line(args: std::fmt::Arguments<'_>) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)?;
    out.write_all(b"\n")
}

pub fn print_json<T: Serialize + ?Sized>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    write_line(format_args!("{text}"))?;
    Ok(())
}

/// `1536` → `1.5 KiB`; below 1 KiB in bytes (`12 B`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A size as people write it (`10GiB`, `1.5G`, `500MB`); the rules are `nimbus_proto::size`'s.
pub fn parse_size(raw: &str) -> Result<u64> {
    nimbus_proto::size::parse_size(raw).map_err(anyhow::Error::msg)
}

/// `2024-05-01T12:34:56.789Z` → `2024-05-01 12:34` (UTC, like the server sends it).
pub fn short_time(rfc3339: &str) -> String {
    let b = rfc3339.as_bytes();
    if b.len() >= 16 && b[10] == b'T' && rfc3339.is_char_boundary(16) {
        format!("{} {}", &rfc3339[..10], &rfc3339[11..16])
    } else {
        rfc3339.to_string()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Prints rows under a header, columns padded to their widest cell; the last column is not
/// padded (names may be long).
pub fn print_table(header: &[(&str, Align)], rows: &[Vec<String>]) -> Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|(h, _)| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let render = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            let align = header.get(i).map(|(_, a)| *a).unwrap_or(Align::Left);
            if i > 0 {
                line.push_str("  ");
            }
            match (align, i == last) {
                (Align::Right, _) => line.push_str(&format!("{cell:>w$}")),
                (Align::Left, true) => line.push_str(cell),
                (Align::Left, false) => line.push_str(&format!("{cell:<w$}")),
            }
        }
        line
    };
    outln!("{}", render(header.iter().map(|(h, _)| *h).collect()));
    for row in rows {
        outln!("{}", render(row.iter().map(String::as_str).collect()));
    }
    Ok(())
}

/// Asks a yes/no question on the terminal; refuses (error) when stdin is not a terminal, so a
/// script never deletes things by accident: it must pass `--yes`.
pub fn confirm(question: &str, flag_hint: &str) -> Result<bool> {
    if !io::stdin().is_terminal() {
        bail!(
            "{question}: refusing without confirmation because standard input is not a terminal; add {flag_hint} to confirm"
        );
    }
    eprint!("{question} [y/N] ");
    io::stderr().flush()?;
    let mut line = String::new();
    io::stdin().read_line(&mut line)?;
    Ok(matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

/// One line of standard input without its line ending (passwords, usernames).
pub fn read_stdin_line() -> Result<String> {
    let mut line = String::new();
    io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_people_write_them() {
        // The rules are tested in nimbus_proto::size; this checks the CLI uses them.
        assert_eq!(parse_size("1.5M").ok(), Some(1_572_864));
        assert!(parse_size("5 parsecs").is_err_and(|e| e.to_string().contains("not a size")));
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12 << 20), "12.0 MiB");
        assert_eq!(human_bytes(10 << 30), "10.0 GiB");
    }

    #[test]
    fn times_are_shortened() {
        assert_eq!(short_time("2024-05-01T12:34:56.789Z"), "2024-05-01 12:34");
        assert_eq!(short_time("yesterday"), "yesterday");
    }
}
