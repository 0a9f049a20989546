//! Name and path rules: one definition for the gateway and every client.
//!
//! A name stored in Nimbus must open everywhere a user may mount the space, so the rules are
//! Windows' (the strictest common platform):
//! - no `< > : " / \ | ? *`, no control characters (U+0000–U+001F, U+007F);
//! - not `.` or `..`, no trailing dot or space;
//! - not a reserved device name (`CON`, `PRN`, `AUX`, `NUL`, `COM0-9`, `LPT0-9`, also with an
//!   extension such as `con.txt`, also with the superscript digits Windows treats alike);
//! - at most 255 UTF-16 code units (NTFS's limit) and 255 UTF-8 bytes (ext4's limit).
//!
//! Names are stored in Unicode NFC, so an NFD twin typed on macOS is the same name.
//! Uniqueness inside a directory is case-insensitive ([`name_key`]); case is preserved.

use std::fmt;
use unicode_normalization::UnicodeNormalization;

/// Longest name in UTF-16 code units (NTFS) and in UTF-8 bytes (ext4, APFS).
pub const MAX_NAME_LEN: usize = 255;
/// Longest full path in UTF-8 bytes; deep enough for real trees, bounded for the server.
pub const MAX_PATH_BYTES: usize = 4096;
/// Deepest path in components.
pub const MAX_DEPTH: usize = 256;
/// The virtual folder at the top of every space that holds what others shared with its owner
/// (`/Shared with me/<name>`). No door creates a file or folder of that name at the top of a
/// space; one made there before sharing existed is hidden behind it.
pub const SHARED_WITH_ME: &str = "Shared with me";

/// Whether a name is [`SHARED_WITH_ME`] (as names compare: `name_key`). Every path a request
/// names is checked, so an ASCII name is compared without building keys; others can still
/// fold to it (the Kelvin sign lowercases to `k`).
pub fn is_shared_with_me(name: &str) -> bool {
    if name.is_ascii() { name.eq_ignore_ascii_case(SHARED_WITH_ME) } else { name_key(name) == name_key(SHARED_WITH_ME) }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the name is empty")]
    Empty,
    #[error("`{0}` is not allowed as a name")]
    Dot(String),
    #[error("the name `{name}` contains `{ch}`, which Windows does not allow in names (< > : \" / \\ | ? *)")]
    ForbiddenChar { name: String, ch: char },
    #[error("the name `{0}` contains a control character")]
    ControlChar(String),
    #[error("the name `{0}` ends with a dot or a space, which Windows cannot open")]
    TrailingDotOrSpace(String),
    #[error("`{0}` is a reserved device name on Windows (CON, PRN, AUX, NUL, COM1-9, LPT1-9)")]
    Reserved(String),
    #[error("the name is longer than {MAX_NAME_LEN} characters")]
    TooLong,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes or deeper than {MAX_DEPTH} levels")]
    PathTooLong,
    #[error("the path contains an empty component (`//`)")]
    EmptyComponent,
    #[error("the path is not valid UTF-8")]
    InvalidUtf8,
    #[error("the path is not a valid percent-encoded string")]
    BadEncoding,
}

/// Validates one path component and returns it in NFC.
pub fn validate_name(raw: &str) -> Result<String, NameError> {
    // ASCII is already NFC: skip the normaliser (every request's path passes through here).
    let name: String = if raw.is_ascii() { raw.to_owned() } else { raw.nfc().collect() };
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name == "." || name == ".." {
        return Err(NameError::Dot(name));
    }
    // An ASCII name is as many UTF-16 units as bytes.
    if name.len() > MAX_NAME_LEN || (!name.is_ascii() && name.encode_utf16().count() > MAX_NAME_LEN) {
        return Err(NameError::TooLong);
    }
    for ch in name.chars() {
        if (ch as u32) < 0x20 || ch == '\u{7f}' {
            return Err(NameError::ControlChar(printable(&name)));
        }
        if matches!(ch, '<' | '>' | ':' | '"' | '/' | '\\' | '|' | '?' | '*') {
            return Err(NameError::ForbiddenChar { name: printable(&name), ch });
        }
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(NameError::TrailingDotOrSpace(name));
    }
    if is_reserved(&name) {
        return Err(NameError::Reserved(name));
    }
    Ok(name)
}

/// The key under which a name is unique in its directory: NFC, then lowercased.
/// `Report.docx` and `REPORT.DOCX` share a key; so do NFC and NFD spellings.
pub fn name_key(name: &str) -> String {
    // ASCII is already NFC: skip the normaliser, which a hot read pays for on every request.
    if name.is_ascii() {
        return name.to_ascii_lowercase();
    }
    name.nfc().collect::<String>().to_lowercase()
}

/// A name as an error message shows it: control characters (NUL, newlines) escaped so the
/// message stays one readable line; everything else, backslashes and quotes included, as typed.
fn printable(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

fn is_reserved(name: &str) -> bool {
    // Windows ignores everything from the first dot, and trailing spaces before it.
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    // Uppercasing never yields fewer characters, so a stem of more than seven (`CONOUT$`) is
    // none of these; an ASCII one is compared without building its uppercase (every request's
    // path passes through here).
    if stem.chars().nth(7).is_some() {
        return false;
    }
    if stem.is_ascii() {
        let b = stem.as_bytes();
        return ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"].iter().any(|r| stem.eq_ignore_ascii_case(r))
            || (b.len() == 4
                && (b[..3].eq_ignore_ascii_case(b"COM") || b[..3].eq_ignore_ascii_case(b"LPT"))
                && b[3].is_ascii_digit());
    }
    let upper = stem.to_uppercase();
    match upper.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" => true,
        _ => {
            let mut chars = upper.chars();
            let prefix: String = chars.by_ref().take(3).collect();
            let rest: Vec<char> = chars.collect();
            (prefix == "COM" || prefix == "LPT")
                && rest.len() == 1
                && (rest[0].is_ascii_digit() || matches!(rest[0], '¹' | '²' | '³'))
        }
    }
}

/// A validated path inside one user's space: zero or more valid names. The root is empty.
/// There is no way to build one that escapes the space: `..`, `.`, empty components,
/// backslashes and NUL are all rejected before a `RemotePath` exists.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct RemotePath {
    parts: Vec<String>,
}

impl RemotePath {
    pub fn root() -> Self {
        Self::default()
    }

    /// Parses a `/`-separated path. One leading and one trailing `/` are tolerated;
    /// `//` inside is an error rather than silently collapsed.
    pub fn parse(raw: &str) -> Result<Self, NameError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(NameError::PathTooLong);
        }
        let trimmed = raw.strip_prefix('/').unwrap_or(raw);
        let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Ok(Self::root());
        }
        let mut parts = Vec::new();
        for comp in trimmed.split('/') {
            if comp.is_empty() {
                return Err(NameError::EmptyComponent);
            }
            parts.push(validate_name(comp)?);
            if parts.len() > MAX_DEPTH {
                return Err(NameError::PathTooLong);
            }
        }
        Ok(Self { parts })
    }

    /// Parses a path as it appears percent-encoded in a URL. Decoding happens exactly once,
    /// so `%2e%2e` becomes `..` and is rejected, and `%2f` becomes a separator.
    pub fn parse_url_encoded(raw: &str) -> Result<Self, NameError> {
        let bytes = percent_decode(raw)?;
        let s = String::from_utf8(bytes).map_err(|_| NameError::InvalidUtf8)?;
        Self::parse(&s)
    }

    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn components(&self) -> &[String] {
        &self.parts
    }

    pub fn name(&self) -> Option<&str> {
        self.parts.last().map(String::as_str)
    }

    pub fn parent(&self) -> Option<RemotePath> {
        if self.parts.is_empty() { None } else { Some(Self { parts: self.parts[..self.parts.len() - 1].to_vec() }) }
    }

    pub fn join(&self, name: &str) -> Result<RemotePath, NameError> {
        let mut parts = self.parts.clone();
        parts.push(validate_name(name)?);
        if parts.len() > MAX_DEPTH {
            return Err(NameError::PathTooLong);
        }
        let p = Self { parts };
        if p.to_string().len() > MAX_PATH_BYTES {
            return Err(NameError::PathTooLong);
        }
        Ok(p)
    }

    /// True if `self` is `other` or lies below it (compared case-insensitively, by
    /// whole components: `/docs-x` is not inside `/docs`).
    pub fn starts_with(&self, other: &RemotePath) -> bool {
        other.parts.len() <= self.parts.len()
            && other.parts.iter().zip(&self.parts).all(|(a, b)| name_key(a) == name_key(b))
    }

    /// `name_key` of the path as displayed (`/a/b`, `/` for the root): what a lookup by path
    /// is keyed by. An ASCII path is lowercased in one buffer (every hot read builds this key).
    pub fn name_key(&self) -> String {
        if !self.parts.iter().all(|p| p.is_ascii()) {
            return name_key(&self.to_string());
        }
        if self.parts.is_empty() {
            return "/".to_string();
        }
        let mut key = String::with_capacity(self.parts.iter().map(|p| p.len() + 1).sum());
        for p in &self.parts {
            key.push('/');
            key.extend(p.chars().map(|c| c.to_ascii_lowercase()));
        }
        key
    }

    /// The path percent-encoded for a URL, each component encoded separately.
    pub fn url_encoded(&self) -> String {
        self.parts.iter().map(|p| percent_encode(p)).collect::<Vec<_>>().join("/")
    }
}

impl fmt::Display for RemotePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            return f.write_str("/");
        }
        for p in &self.parts {
            write!(f, "/{p}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for RemotePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemotePath({self})")
    }
}

fn percent_decode(raw: &str) -> Result<Vec<u8>, NameError> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).ok_or(NameError::BadEncoding)?;
            let s = std::str::from_utf8(hex).map_err(|_| NameError::BadEncoding)?;
            out.push(u8::from_str_radix(s, 16).map_err(|_| NameError::BadEncoding)?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Percent-encodes one path component: everything but unreserved characters (RFC 3986).
pub fn percent_encode(component: &str) -> String {
    let mut out = String::with_capacity(component.len());
    for &byte in component.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Usernames: 1–64 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
/// Unique case-insensitively.
pub fn validate_username(name: &str) -> Result<(), String> {
    let ok_len = !name.is_empty() && name.len() <= 64;
    let ok_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let ok_start = name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    if ok_len && ok_chars && ok_start {
        Ok(())
    } else {
        Err("usernames are 1-64 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit"
            .into())
    }
}

/// Group names: the rules of usernames (1–64 characters of `A-Z a-z 0-9 . _ -`, starting with
/// a letter or digit). Unique case-insensitively.
pub fn validate_group_name(name: &str) -> Result<(), String> {
    validate_username(name).map_err(|_| {
        "group names are 1-64 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_show_names_as_typed_but_control_characters() {
        let m = validate_name("..\\Secret").expect_err("a backslash").to_string();
        assert!(m.starts_with("the name `..\\Secret` contains `\\`"), "{m}");
        let m = validate_name("a\nb").expect_err("a newline").to_string();
        assert!(m.contains("`a\\nb`") && !m.contains('\n'), "{m}");
    }

    #[test]
    fn accepts_ordinary_names() {
        for n in [
            "report.docx",
            "Übersicht 2024.xlsx",
            "~$report.docx",
            ".gitignore",
            "a b",
            "日本語.txt",
            "COM10",
            "icon.d",
            "CONSOLE",
        ] {
            assert!(validate_name(n).is_ok(), "{n} should be valid");
        }
    }

    #[test]
    fn rejects_windows_invalid_names() {
        for n in [
            "",
            ".",
            "..",
            "a<b",
            "a>b",
            "a:b",
            "a\"b",
            "a/b",
            "a\\b",
            "a|b",
            "a?b",
            "a*b",
            "a\0b",
            "a\nb",
            "a\u{7f}",
            "trail.",
            "trail ",
            "CON",
            "con",
            "Con.txt",
            "NUL.tar.gz",
            "com1",
            "LPT9.log",
            "COM¹",
            "aux ",
        ] {
            assert!(validate_name(n).is_err(), "{n:?} should be rejected");
        }
    }

    /// The rule stated plainly (uppercase the stem, then compare), which the allocation-free
    /// check must agree with.
    fn is_reserved_reference(name: &str) -> bool {
        let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ').to_uppercase();
        let numbered = ["COM", "LPT"].iter().any(|p| {
            stem.strip_prefix(p).is_some_and(|d| {
                let mut c = d.chars();
                matches!((c.next(), c.next()), (Some(x), None) if x.is_ascii_digit() || "¹²³".contains(x))
            })
        });
        numbered || ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"].contains(&stem.as_str())
    }

    #[test]
    fn reserved_names_agree_with_the_reference_check() {
        let stems = [
            "con",
            "CON",
            "cOn",
            "prn",
            "Aux",
            "nul",
            "conin$",
            "CONOUT$",
            "conout$x",
            "conout",
            "com",
            "COM1",
            "com0",
            "lpt9",
            "lpt",
            "lpt10",
            "comx",
            "com¹",
            "COM²",
            "lpt³",
            "com⁴",
            "ßcon",
            "con ",
            "aux  ",
            " con",
            "c",
            "",
            "f00001",
            "report",
            "ǅon",
            "ıon",
            "cᴏn",
            "ﬀ",
            "lptﬀ",
            "coms",
            "nul\u{301}",
        ];
        for stem in stems {
            for suffix in ["", ".txt", " ", " .a", "..b", ".tar.gz"] {
                let name = format!("{stem}{suffix}");
                assert_eq!(is_reserved(&name), is_reserved_reference(&name), "{name:?}");
            }
        }
        assert!(is_reserved("Com7.txt") && is_reserved("CONOUT$") && is_reserved("LPT¹"));
        assert!(!is_reserved("console") && !is_reserved("com10") && !is_reserved("nulls.txt"));
    }

    #[test]
    fn length_limits_count_utf16_units_and_bytes() {
        assert!(validate_name(&"a".repeat(255)).is_ok());
        assert_eq!(validate_name(&"a".repeat(256)), Err(NameError::TooLong));
        // 128 two-byte characters: 128 UTF-16 units but 256 UTF-8 bytes.
        assert_eq!(validate_name(&"é".repeat(128)), Err(NameError::TooLong));
    }

    #[test]
    fn nfd_and_case_twins_share_a_key() {
        let nfc = "Caf\u{e9}.txt";
        let nfd = "Cafe\u{301}.txt";
        assert_eq!(validate_name(nfd).as_deref(), Ok(nfc));
        assert_eq!(name_key(nfd), name_key("CAFÉ.TXT"));
    }

    #[test]
    fn the_ascii_shortcut_keys_like_the_normaliser() {
        let all: String = (0u8..128).map(char::from).collect();
        for s in [all.as_str(), "Report.DOCX", "A/B c~1", ""] {
            assert_eq!(name_key(s), s.nfc().collect::<String>().to_lowercase(), "{s:?}");
            // validate_name's shortcut rests on the same fact: ASCII is its own NFC.
            assert_eq!(s.nfc().collect::<String>(), s, "{s:?}");
        }
    }

    #[test]
    fn paths_cannot_escape() {
        for p in ["..", "a/../b", "a/./b", "a//b", "..\\x", "a\0"] {
            assert!(RemotePath::parse(p).is_err(), "{p:?}");
        }
        for p in ["..%2f", "%2e%2e/x", "a%2f..%2fb", "%00", "%ff", "%zz", "a%2F%2Fb"] {
            assert!(RemotePath::parse_url_encoded(p).is_err(), "{p:?}");
        }
        assert_eq!(RemotePath::parse_url_encoded("a%20b/c").map(|p| p.to_string()).as_deref(), Ok("/a b/c"));
        assert!(RemotePath::parse("/").is_ok_and(|p| p.is_root()));
    }

    #[test]
    fn shared_with_me_compares_as_names_do() {
        assert!(SHARED_WITH_ME.is_ascii(), "the ASCII comparison rests on it");
        for n in [
            "Shared with me",
            "shared WITH me",
            "SHARED WITH ME",
            "Shared with me\u{212A}",
            "Shared wit\u{0127} me",
            "Shared",
            "",
            "Shared with me ",
        ] {
            assert_eq!(is_shared_with_me(n), name_key(n) == name_key(SHARED_WITH_ME), "{n:?}");
        }
        assert!(is_shared_with_me("Shared with me"));
        assert!(!is_shared_with_me("Shared with m\u{212A}e"));
    }

    #[test]
    fn a_paths_key_is_the_key_of_its_display() {
        for raw in ["/", "/a", "/Docs/Report.PDF", "/a b/C~d", "/Ünïcode/Straße", "/ß/x", "/e\u{301}/A"] {
            let p = RemotePath::parse(raw).unwrap_or_default();
            assert!(raw == "/" || !p.is_root(), "{raw:?} parses");
            assert_eq!(p.name_key(), name_key(&p.to_string()), "{raw:?}");
        }
    }

    #[test]
    fn prefix_compares_whole_components() {
        let docs = RemotePath::parse("/docs").unwrap_or_default();
        assert!(RemotePath::parse("/Docs/a").is_ok_and(|p| p.starts_with(&docs)));
        assert!(RemotePath::parse("/docs-x/a").is_ok_and(|p| !p.starts_with(&docs)));
    }

    #[test]
    fn url_encoding_round_trips() {
        let p = RemotePath::parse("/a b/ü%/#?x").err();
        assert!(p.is_some(), "? is forbidden");
        let p = RemotePath::parse("/a b/ü%#x").unwrap_or_default();
        assert_eq!(RemotePath::parse_url_encoded(&p.url_encoded()).ok(), Some(p));
    }

    #[test]
    fn usernames() {
        assert!(validate_username("alice").is_ok());
        assert!(validate_username("alice.b-2_x").is_ok());
        for u in ["", "-x", "a b", "a/b", "ü", &"a".repeat(65)] {
            assert!(validate_username(u).is_err(), "{u:?}");
        }
    }

    #[test]
    fn group_names() {
        assert!(validate_group_name("team-a.2_x").is_ok());
        for g in ["", "_x", "a b", "a/b", "ü", &"g".repeat(65)] {
            assert!(validate_group_name(g).is_err(), "{g:?}");
        }
    }
}
