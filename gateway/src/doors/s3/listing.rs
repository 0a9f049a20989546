//! S3 listing semantics over a set of keys: prefix, delimiter (common prefixes), start-after
//! and continuation, max-keys. Pure, so the paging rules are unit-tested on their own.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// One line of a listing page.
#[derive(Debug, PartialEq, Eq)]
pub enum Listed<T> {
    Object(String, T),
    /// A common prefix (ends with the delimiter).
    Prefix(String),
}

#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<Listed<T>>,
    /// The last key or prefix of this page when more follow.
    pub next: Option<String>,
}

/// Pages `entries` (full keys, any order) the way S3 does: keys under `prefix`, after `after`,
/// with everything past the next `delimiter` rolled up into one common prefix, at most
/// `max_keys` lines (objects and prefixes together).
pub fn page<T>(
    mut entries: Vec<(String, T)>,
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<&str>,
    max_keys: usize,
) -> Page<T> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let delimiter = delimiter.filter(|d| !d.is_empty());
    let mut items: Vec<Listed<T>> = Vec::new();
    let mut last_prefix: Option<String> = None;
    let mut truncated = false;
    for (key, value) in entries {
        if !key.starts_with(prefix) {
            continue;
        }
        if let Some(a) = after {
            if key.as_str() <= a {
                continue;
            }
            // The previous page ended on a common prefix: everything under it was rolled up.
            if delimiter.is_some_and(|d| a.ends_with(d) && a.len() > prefix.len()) && key.starts_with(a) {
                continue;
            }
        }
        let rest = &key[prefix.len()..];
        let line = match delimiter.and_then(|d| rest.find(d).map(|i| i + d.len())) {
            Some(end) => {
                let cp = format!("{prefix}{}", &rest[..end]);
                if last_prefix.as_deref() == Some(cp.as_str()) {
                    continue;
                }
                last_prefix = Some(cp.clone());
                Listed::Prefix(cp)
            }
            None => Listed::Object(key, value),
        };
        if items.len() >= max_keys {
            truncated = true;
            break;
        }
        items.push(line);
    }
    let next = if truncated {
        items.last().map(|l| match l {
            Listed::Object(k, _) => k.clone(),
            Listed::Prefix(p) => p.clone(),
        })
    } else {
        None
    };
    Page { items, next }
}

/// Continuation tokens are the last key of the previous page, opaque to clients.
pub fn encode_token(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

pub fn decode_token(token: &str) -> Option<String> {
    URL_SAFE_NO_PAD.decode(token).ok().and_then(|b| String::from_utf8(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> Vec<(String, ())> {
        ks.iter().map(|k| (k.to_string(), ())).collect()
    }

    fn lines(p: &Page<()>) -> Vec<String> {
        p.items
            .iter()
            .map(|l| match l {
                Listed::Object(k, _) => k.clone(),
                Listed::Prefix(p) => format!("P:{p}"),
            })
            .collect()
    }

    #[test]
    fn sorts_bytewise_and_filters_by_prefix() {
        let p = page(keys(&["b", "a/x", "a.txt", "a-1", "c"]), "a", None, None, 100);
        // '-' (0x2d) < '.' (0x2e) < '/' (0x2f), as S3 orders keys.
        assert_eq!(lines(&p), ["a-1", "a.txt", "a/x"]);
        assert!(p.next.is_none());
    }

    #[test]
    fn rolls_up_common_prefixes() {
        let ks = keys(&["docs/a", "docs/b/c", "docs/b/d", "docs/e/", "top"]);
        let p = page(ks, "docs/", Some("/"), None, 100);
        assert_eq!(lines(&p), ["docs/a", "P:docs/b/", "P:docs/e/"]);
        let p = page(keys(&["docs/a", "docs/b/c", "top"]), "", Some("/"), None, 100);
        assert_eq!(lines(&p), ["P:docs/", "top"]);
    }

    #[test]
    fn pages_continue_after_keys_and_prefixes() {
        let ks = || keys(&["a", "b/1", "b/2", "b/3", "c", "d"]);
        let p1 = page(ks(), "", Some("/"), None, 2);
        assert_eq!(lines(&p1), ["a", "P:b/"]);
        assert_eq!(p1.next.as_deref(), Some("b/"));
        let p2 = page(ks(), "", Some("/"), p1.next.as_deref(), 2);
        assert_eq!(lines(&p2), ["c", "d"]);
        assert!(p2.next.is_none(), "nothing follows the last page");
        let p3 = page(ks(), "", None, Some("b/2"), 10);
        assert_eq!(lines(&p3), ["b/3", "c", "d"]);
    }

    #[test]
    fn a_full_page_is_not_truncated_when_nothing_follows() {
        let p = page(keys(&["a", "b"]), "", None, None, 2);
        assert!(p.next.is_none());
        let p = page(keys(&["a", "b", "c"]), "", None, None, 0);
        assert!(p.items.is_empty() && p.next.is_none());
    }

    #[test]
    fn tokens_round_trip() {
        assert_eq!(decode_token(&encode_token("dir/ü b.txt")).as_deref(), Some("dir/ü b.txt"));
        assert!(decode_token("!!").is_none());
    }
}
