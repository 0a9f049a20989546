//! Byte sizes as people write them, for every flag and command that takes one.

/// Plain bytes, or a number with a unit. `K M G T P` and `KiB MiB GiB TiB PiB` are powers of
/// 1024; `KB MB GB TB PB` powers of 1000 (coreutils' convention). Case-insensitive, decimals
/// allowed (`1.5G`), optional space and `B`.
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let s = raw.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "p" | "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        _ => {
            return Err(format!(
                "`{raw}` is not a size: use bytes or a number with K, M, G, T (1024-based) or KB, MB, GB, TB (1000-based), e.g. 10GiB"
            ));
        }
    };
    if num.is_empty() {
        return Err(format!("`{raw}` is not a size: it has no number, e.g. 10GiB"));
    }
    let value: f64 = num.parse().map_err(|_| format!("`{raw}` is not a size: `{num}` is not a number"))?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("`{raw}` is too large"));
    }
    Ok(bytes.round() as u64)
}

/// A size for people to read, in 1024-based units with at most one decimal that says
/// something: `512 B`, `10 MiB`, `1.5 GiB` (the admin console's `formatSize` writes the same).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    let mut value = bytes as f64;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let rounded = (value * 10.0).round() / 10.0;
    if unit == 0 || rounded.fract() == 0.0 {
        format!("{rounded:.0} {}", UNITS[unit])
    } else {
        format!("{rounded:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_written_for_people() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(10 << 20), "10 MiB");
        assert_eq!(format_size(1_572_864), "1.5 MiB");
        assert_eq!(format_size(500_000_000), "476.8 MiB");
        assert_eq!(format_size((10 << 30) - 1), "10 GiB");
        assert_eq!(format_size(u64::MAX), "16384 PiB");
        // What it writes, parse_size reads back (to the precision shown).
        for b in [0u64, 1024, 10 << 20, 3 << 40] {
            assert_eq!(parse_size(&format_size(b)).ok(), Some(b));
        }
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        let p = |s: &str| parse_size(s).ok();
        assert_eq!(p("12345"), Some(12345));
        assert_eq!(p("10GiB"), Some(10 << 30));
        assert_eq!(p("10G"), Some(10 << 30));
        assert_eq!(p("1 g"), Some(1 << 30));
        assert_eq!(p("10 gb"), Some(10_000_000_000));
        assert_eq!(p("1.5M"), Some(1_572_864));
        assert_eq!(p("500MB"), Some(500_000_000));
        assert_eq!(p("0"), Some(0));
        assert_eq!(p("GiB"), None);
        assert_eq!(p("ten"), None);
        assert_eq!(p("5 parsecs"), None);
        assert_eq!(p("1.2.3G"), None);
        assert_eq!(p("99999999999PiB"), None);
    }
}
