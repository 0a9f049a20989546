//! Durations and timestamps as people and the wire write them. A leaf: the flags (`config`),
//! the retention policy (`meta`), the API and the metrics history all parse or print them.

use std::time::Duration;

/// `90s`, `30m`, `24h`, `7d`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 90s, 30m, 24h, 7d)"))?;
    let mult = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => return Err(format!("unknown unit `{other}` in `{s}`: use s, m, h or d")),
    };
    n.checked_mul(mult).map(Duration::from_secs).ok_or_else(|| format!("`{s}` is too long"))
}

/// A duration in the largest unit that divides it: `30d`, `12h`, `90m`, `45s` (what
/// `parse_duration` reads back).
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".into(),
        _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        _ if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// Milliseconds since the Unix epoch as RFC 3339 (UTC), as every timestamp on the wire.
pub fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("5y").is_err());
        for d in ["30d", "12h", "90m", "45s", "0s"] {
            assert_eq!(parse_duration(d).map(format_duration), Ok(d.to_string()));
        }
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(86_400_000), "1970-01-02T00:00:00Z");
    }
}
