//! S3 listing semantics over a folder tree: prefix, delimiter (common prefixes), start-after
//! and continuation, max-keys; keys in S3's order (bytewise over the whole key).
//!
//! A page costs about its size, not the size of the space: the tree is walked depth first in
//! key order from where the page starts, reading each folder's children in pages ordered by
//! their *key piece* (the name, plus `/` for a folder). That order is the key order: every
//! key below folder `d` starts with `d/`, and comparing `d/` with a sibling's piece decides
//! the comparison of any two keys below them (names hold no `/`). Whatever a common prefix
//! rolls up is skipped by seeking past it, never read.
//!
//! The walk is generic over [`Tree`], so the rules are tested against an in-memory tree and a
//! plain reference model (sort every key, then filter) in the tests below.

use std::collections::VecDeque;
use std::future::Future;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// One line of a listing page.
#[derive(Debug, PartialEq, Eq)]
pub enum Listed<T> {
    /// An object: a file, or an empty folder's `name/` marker (`marker` true).
    Object { key: String, info: T, marker: bool },
    /// A common prefix (ends with the delimiter).
    Prefix(String),
}

#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<Listed<T>>,
    /// The last key or prefix of this page when more follow.
    pub next: Option<String>,
}

/// One child of a folder as the walk reads it.
#[derive(Debug, Clone)]
pub struct Child<T, D = i64> {
    pub name: String,
    /// The folder's handle when the child is a folder.
    pub dir: Option<D>,
    pub info: T,
}

impl<T, D> Child<T, D> {
    /// What the child adds to its folder's key: the name, and `/` for a folder.
    pub fn piece(&self) -> String {
        match self.dir {
            Some(_) => format!("{}/", self.name),
            None => self.name.clone(),
        }
    }
}

/// What [`Tree::children`] hands out.
pub type Children<R> = Vec<Child<<R as Tree>::Info, <R as Tree>::Dir>>;

/// The folders a listing walks.
pub trait Tree {
    type Info: Clone;
    type Error;
    /// What names a folder to walk into (a node id, or more where one tree spans spaces).
    type Dir: Clone + Send;
    /// Up to `limit` children of folder `dir` whose [`Child::piece`] is `>= from` (`> from`
    /// unless `inclusive`), ordered bytewise by piece.
    fn children(
        &self,
        dir: Self::Dir,
        from: &str,
        inclusive: bool,
        limit: usize,
    ) -> impl Future<Output = Result<Children<Self>, Self::Error>> + Send;
}

/// Most children read from one folder at a time.
const MAX_FETCH: usize = 1000;

/// The smallest string above every string that starts with `s` (None: nothing is above).
/// Keys compare bytewise, which for UTF-8 is code point order, so raising the last character
/// by one code point (carrying past U+10FFFF) gives it.
pub fn successor(s: &str) -> Option<String> {
    let mut chars: Vec<char> = s.chars().collect();
    while let Some(c) = chars.pop() {
        let next = match c as u32 {
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// A folder being walked.
struct Frame<T, D> {
    dir: D,
    /// The key every key below this folder starts with (`a/b/`; the walk's root: the base).
    key: String,
    buf: VecDeque<Child<T, D>>,
    /// The piece of the last child read from the database.
    last: Option<String>,
    /// Nothing follows `buf` in the database.
    done: bool,
    /// The folder's own info while it may still be empty: then its `key` is a marker object.
    marker: Option<T>,
}

/// What the walk yields, in key order.
enum Raw<T> {
    /// A file, or an empty folder's marker.
    Key { key: String, info: T, marker: bool },
    /// A folder not walked into: all its keys start with this (`a/b/`), and it has at least
    /// one (a folder with nothing in it is a marker).
    Folder(String),
}

/// Depth-first walk in key order with forward seeks.
struct Walk<'t, R: Tree> {
    tree: &'t R,
    stack: Vec<Frame<R::Info, R::Dir>>,
}

impl<'t, R: Tree> Walk<'t, R> {
    fn new(tree: &'t R, root: R::Dir, base: &str) -> Self {
        let root =
            Frame { dir: root, key: base.to_string(), buf: VecDeque::new(), last: None, done: false, marker: None };
        Walk { tree, stack: vec![root] }
    }

    /// Reads the next children of the top folder: from `from` if given (a seek), else after
    /// the last one read.
    async fn fetch(&mut self, from: Option<&str>, want: usize) -> Result<(), R::Error> {
        let Some(top) = self.stack.last_mut() else { return Ok(()) };
        let limit = want.clamp(1, MAX_FETCH);
        let (bound, inclusive) = match (from, &top.last) {
            // Never read backwards: a seek below what was read continues after it.
            (Some(f), Some(l)) if l.as_str() >= f => (l.clone(), false),
            (Some(f), _) => (f.to_string(), true),
            (None, Some(l)) => (l.clone(), false),
            (None, None) => (String::new(), true),
        };
        let rows = self.tree.children(top.dir.clone(), &bound, inclusive, limit).await?;
        top.done = rows.len() < limit;
        if let Some(c) = rows.last() {
            top.last = Some(c.piece());
            top.marker = None;
        }
        top.buf.extend(rows);
        Ok(())
    }

    /// Moves forward so that the next key yielded is the first `>= bound` (`> bound` unless
    /// `inclusive`). Never moves back: a bound behind the walk changes nothing. `want`: about
    /// how many keys the caller still needs (how many children to read at a time).
    async fn seek(&mut self, bound: &str, inclusive: bool, want: usize) -> Result<(), R::Error> {
        // Leave the folders whose keys all lie below the bound.
        loop {
            let Some(top) = self.stack.last() else { return Ok(()) };
            if bound.starts_with(&top.key) {
                break;
            }
            if top.key.as_str() > bound {
                return Ok(());
            }
            self.stack.pop();
        }
        loop {
            let Some(top) = self.stack.last_mut() else { return Ok(()) };
            let rest = bound[top.key.len()..].to_string();
            // The piece of the child the bound falls in (or would).
            let head = match rest.find('/') {
                Some(i) => rest[..=i].to_string(),
                None => rest.clone(),
            };
            if !(rest.is_empty() && inclusive) {
                // The bound lies past the folder's own key: its marker is behind.
                top.marker = None;
            }
            while top.buf.front().is_some_and(|c| c.piece() < head) {
                top.buf.pop_front();
            }
            if top.buf.is_empty() && !top.done {
                self.fetch(Some(&head), want).await?;
            }
            let Some(top) = self.stack.last_mut() else { return Ok(()) };
            let Some(c) = top.buf.front() else { return Ok(()) };
            let piece = c.piece();
            if piece != head {
                return Ok(());
            }
            match c.dir.clone() {
                // The bound lies inside this folder (or is its marker, excluded): walk in
                // without its marker.
                Some(dir) if rest.len() > piece.len() || !inclusive => {
                    let key = format!("{}{piece}", top.key);
                    top.buf.pop_front();
                    self.stack.push(Frame { dir, key, buf: VecDeque::new(), last: None, done: false, marker: None });
                }
                Some(_) => return Ok(()),
                None => {
                    if !inclusive {
                        top.buf.pop_front();
                    }
                    return Ok(());
                }
            }
        }
    }

    /// The next key in order, or a folder `whole` says to yield unwalked.
    async fn next(&mut self, want: usize, whole: &impl Fn(&str) -> bool) -> Result<Option<Raw<R::Info>>, R::Error> {
        loop {
            let Some(top) = self.stack.last_mut() else { return Ok(None) };
            if top.buf.is_empty() && !top.done {
                self.fetch(None, want).await?;
                continue;
            }
            let Some(c) = top.buf.pop_front() else {
                let Some(f) = self.stack.pop() else { return Ok(None) };
                if let Some(info) = f.marker {
                    return Ok(Some(Raw::Key { key: f.key, info, marker: true }));
                }
                continue;
            };
            let key = format!("{}{}", top.key, c.piece());
            match c.dir {
                None => return Ok(Some(Raw::Key { key, info: c.info, marker: false })),
                Some(_) if whole(&key) => return Ok(Some(Raw::Folder(key))),
                Some(dir) => {
                    let f = Frame { dir, key, buf: VecDeque::new(), last: None, done: false, marker: Some(c.info) };
                    self.stack.push(f);
                }
            }
        }
    }
}

/// Is the position just before (`inclusive`) or just after `a` at or past that of `b`?
fn later(a: &(String, bool), b: &(String, bool)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && (!a.1 || b.1))
}

/// One listing page of the keys below folder `root`, whose own key is `base` (`""` for the
/// space's root, else `dir/`): keys under `prefix`, after `after`, with everything past the
/// next `delimiter` rolled up into one common prefix, at most `max_keys` lines (objects and
/// prefixes together). Empty folders are `name/` marker objects.
pub async fn page<R: Tree>(
    tree: &R,
    root: R::Dir,
    base: &str,
    prefix: &str,
    delimiter: Option<&str>,
    after: Option<&str>,
    max_keys: usize,
) -> Result<Page<R::Info>, R::Error> {
    let delimiter = delimiter.filter(|d| !d.is_empty());
    let mut start = (prefix.to_string(), true);
    if let Some(a) = after {
        // A previous page that ended on a common prefix rolled up everything under it.
        let bound = if delimiter.is_some_and(|d| a.ends_with(d) && a.len() > prefix.len()) {
            match successor(a) {
                Some(s) => (s, true),
                None => return Ok(Page { items: Vec::new(), next: None }),
            }
        } else {
            (a.to_string(), false)
        };
        if later(&bound, &start) {
            start = bound;
        }
    }
    let mut walk = Walk::new(tree, root, base);
    walk.seek(&start.0, start.1, max_keys.saturating_add(1)).await?;
    // A folder whose keys all roll up into one common prefix need not be walked.
    let whole = |k: &str| delimiter.is_some_and(|d| k.starts_with(prefix) && k[prefix.len()..].contains(d));
    let mut items: Vec<Listed<R::Info>> = Vec::new();
    let mut truncated = false;
    while let Some(raw) = walk.next(max_keys.saturating_add(1) - items.len(), &whole).await? {
        let key = match &raw {
            Raw::Key { key, .. } | Raw::Folder(key) => key.clone(),
        };
        if !key.starts_with(prefix) {
            if key.as_str() > prefix {
                // Past every key under the prefix.
                break;
            }
            continue;
        }
        let rest = &key[prefix.len()..];
        let (line, past) = match delimiter.and_then(|d| rest.find(d).map(|i| i + d.len())) {
            Some(end) => {
                let cp = key[..prefix.len() + end].to_string();
                (Listed::Prefix(cp.clone()), Some(cp))
            }
            None => match raw {
                Raw::Key { key, info, marker } => (Listed::Object { key, info, marker }, None),
                // `whole` said the delimiter follows the prefix in this key.
                Raw::Folder(_) => continue,
            },
        };
        if items.len() >= max_keys {
            truncated = true;
            break;
        }
        items.push(line);
        if let Some(cp) = past {
            match successor(&cp) {
                Some(s) => walk.seek(&s, true, max_keys.saturating_add(1) - items.len()).await?,
                None => break,
            }
        }
    }
    let next = if truncated {
        items.last().map(|l| match l {
            Listed::Object { key, .. } => key.clone(),
            Listed::Prefix(p) => p.clone(),
        })
    } else {
        None
    };
    Ok(Page { items, next })
}

/// Continuation tokens are the last key of the previous page, opaque to clients.
pub fn encode_token(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(key)
}

pub fn decode_token(token: &str) -> Option<String> {
    URL_SAFE_NO_PAD.decode(token).ok().and_then(|b| String::from_utf8(b).ok())
}

/// A key, prefix or marker as a listing with `encoding-type=url` must show it: every byte but
/// the unreserved ones and `/` percent-encoded (a `+` too: clients decode `+` as a space).
/// SDKs ask for this by default and decode every such field, so a key sent raw would come back
/// to them as another key (`a+b` as `a b`, `%41` as `A`).
pub fn url_encoded(s: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const KEEP: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');
    utf8_percent_encode(s, KEEP).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn url_encoding_of_listed_keys_round_trips_through_a_plus_decoder() {
        assert_eq!(url_encoded("enc/a+b.txt"), "enc/a%2Bb.txt");
        assert_eq!(url_encoded("enc/%41 x.txt"), "enc/%2541%20x.txt");
        assert_eq!(url_encoded("dir/ü-_.~"), "dir/%C3%BC-_.~");
        for key in ["a+b", "%2e%2e/x", "a b/c", "ü/€", "plain/key.txt"] {
            let decoded = percent_encoding::percent_decode_str(&url_encoded(key).replace('+', " "))
                .decode_utf8()
                .map(|c| c.into_owned());
            assert_eq!(decoded.as_deref(), Ok(key), "{key}");
        }
    }

    /// An in-memory tree: folder id → children. Counts the children it hands out.
    #[derive(Default)]
    struct Mem {
        dirs: HashMap<i64, Vec<Child<()>>>,
        read: AtomicUsize,
    }

    impl Tree for Mem {
        type Info = ();
        type Error = std::convert::Infallible;
        type Dir = i64;
        async fn children(
            &self,
            dir: i64,
            from: &str,
            inclusive: bool,
            limit: usize,
        ) -> Result<Vec<Child<()>>, Self::Error> {
            let mut all: Vec<Child<()>> = self.dirs.get(&dir).cloned().unwrap_or_default();
            all.sort_by_key(|c| c.piece());
            let out: Vec<Child<()>> = all
                .into_iter()
                .filter(|c| if inclusive { c.piece().as_str() >= from } else { c.piece().as_str() > from })
                .take(limit)
                .collect();
            self.read.fetch_add(out.len(), Ordering::Relaxed);
            Ok(out)
        }
    }

    impl Mem {
        /// A tree from paths (`a/b/` is an empty folder); folder 0 is the root.
        fn of(paths: &[&str]) -> Mem {
            let mut m = Mem::default();
            let mut ids: HashMap<String, i64> = HashMap::from([(String::new(), 0)]);
            m.dirs.insert(0, Vec::new());
            for p in paths {
                let (body, folder) = p.strip_suffix('/').map_or((*p, false), |b| (b, true));
                let parts: Vec<&str> = body.split('/').collect();
                let mut parent = String::new();
                for (i, name) in parts.iter().enumerate() {
                    let is_dir = folder || i + 1 < parts.len();
                    let path = if parent.is_empty() { name.to_string() } else { format!("{parent}/{name}") };
                    let pid = ids[&parent];
                    if is_dir && !ids.contains_key(&path) {
                        let id = ids.len() as i64;
                        ids.insert(path.clone(), id);
                        m.dirs.insert(id, Vec::new());
                        m.dirs.entry(pid).or_default().push(Child { name: name.to_string(), dir: Some(id), info: () });
                    } else if !is_dir && !m.dirs[&pid].iter().any(|c| c.name == *name) {
                        m.dirs.entry(pid).or_default().push(Child { name: name.to_string(), dir: None, info: () });
                    }
                    parent = path;
                }
            }
            m
        }

        /// Every key below folder `dir` (files; empty folders as markers), unordered.
        fn keys(&self, dir: i64, base: &str, out: &mut Vec<(String, bool)>) {
            for c in &self.dirs[&dir] {
                let key = format!("{base}{}", c.piece());
                match c.dir {
                    Some(d) if self.dirs[&d].is_empty() => out.push((key, true)),
                    Some(d) => self.keys(d, &key, out),
                    None => out.push((key, false)),
                }
            }
        }
    }

    /// The reference: sort every key, then apply the paging rules line by line.
    fn reference(
        mut keys: Vec<(String, bool)>,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<&str>,
        max_keys: usize,
    ) -> (Vec<String>, Option<String>) {
        keys.sort();
        let delimiter = delimiter.filter(|d| !d.is_empty());
        let mut items: Vec<String> = Vec::new();
        let mut last_prefix: Option<String> = None;
        let mut truncated = false;
        for (key, marker) in keys {
            if !key.starts_with(prefix) {
                continue;
            }
            if let Some(a) = after {
                if key.as_str() <= a {
                    continue;
                }
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
                    format!("P:{cp}")
                }
                None if marker => format!("M:{key}"),
                None => key,
            };
            if items.len() >= max_keys {
                truncated = true;
                break;
            }
            items.push(line);
        }
        let next = truncated.then(|| items.last().map(|l| l[l.find(':').map_or(0, |i| i + 1)..].to_string())).flatten();
        (items, next)
    }

    fn lines(p: &Page<()>) -> Vec<String> {
        p.items
            .iter()
            .map(|l| match l {
                Listed::Object { key, marker: true, .. } => format!("M:{key}"),
                Listed::Object { key, .. } => key.clone(),
                Listed::Prefix(p) => format!("P:{p}"),
            })
            .collect()
    }

    fn run<F: Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    fn list(m: &Mem, prefix: &str, delimiter: Option<&str>, after: Option<&str>, max: usize) -> Page<()> {
        let Ok(p) = run(page(m, 0, "", prefix, delimiter, after, max));
        p
    }

    #[test]
    fn sorts_bytewise_and_filters_by_prefix() {
        let m = Mem::of(&["b", "a/x", "a.txt", "a-1", "c", "B", "É"]);
        // '-' (0x2d) < '.' (0x2e) < '/' (0x2f), and 'B' < 'a' < 'É', as S3 orders keys.
        assert_eq!(lines(&list(&m, "a", None, None, 100)), ["a-1", "a.txt", "a/x"]);
        assert_eq!(lines(&list(&m, "", None, None, 100)), ["B", "a-1", "a.txt", "a/x", "b", "c", "É"]);
        assert!(list(&m, "a", None, None, 100).next.is_none());
    }

    #[test]
    fn rolls_up_common_prefixes() {
        let m = Mem::of(&["docs/a", "docs/b/c", "docs/b/d", "docs/e/", "top"]);
        assert_eq!(lines(&list(&m, "docs/", Some("/"), None, 100)), ["docs/a", "P:docs/b/", "P:docs/e/"]);
        assert_eq!(lines(&list(&m, "", Some("/"), None, 100)), ["P:docs/", "top"]);
        assert_eq!(lines(&list(&m, "", None, None, 100)), ["docs/a", "docs/b/c", "docs/b/d", "M:docs/e/", "top"]);
        // Any delimiter, also in the middle of a name.
        assert_eq!(lines(&list(&m, "docs/", Some("c"), None, 100)), ["docs/a", "P:docs/b/c", "docs/b/d", "M:docs/e/"]);
    }

    #[test]
    fn pages_continue_after_keys_and_prefixes() {
        let m = Mem::of(&["a", "b/1", "b/2", "b/3", "c", "d"]);
        let p1 = list(&m, "", Some("/"), None, 2);
        assert_eq!(lines(&p1), ["a", "P:b/"]);
        assert_eq!(p1.next.as_deref(), Some("b/"));
        let p2 = list(&m, "", Some("/"), p1.next.as_deref(), 2);
        assert_eq!(lines(&p2), ["c", "d"]);
        assert!(p2.next.is_none(), "nothing follows the last page");
        assert_eq!(lines(&list(&m, "", None, Some("b/2"), 10)), ["b/3", "c", "d"]);
    }

    #[test]
    fn a_full_page_is_not_truncated_when_nothing_follows() {
        let m = Mem::of(&["a", "b", "c"]);
        let p = list(&m, "", None, Some("a"), 2);
        assert!(p.next.is_none());
        let p = list(&m, "", None, None, 0);
        assert!(p.items.is_empty() && p.next.is_none());
    }

    #[test]
    fn a_page_reads_about_its_size() {
        let names: Vec<String> = (0..5000).map(|i| format!("big/f{i:05}")).collect();
        let mut paths: Vec<&str> = names.iter().map(String::as_str).collect();
        paths.push("other/x");
        let m = Mem::of(&paths);
        let p = list(&m, "big/", None, Some("big/f02500"), 100);
        assert_eq!(p.items.len(), 100);
        assert_eq!(p.next.as_deref(), Some("big/f02600"));
        let read = m.read.load(Ordering::Relaxed);
        assert!(read <= 2 * 101 + 10, "a page of 100 read {read} children");
        // A delimiter listing of the root reads the root's children, not what is below them.
        m.read.store(0, Ordering::Relaxed);
        assert_eq!(lines(&list(&m, "", Some("/"), None, 1000)), ["P:big/", "P:other/"]);
        assert!(m.read.load(Ordering::Relaxed) <= 10);
    }

    #[test]
    fn successors() {
        assert_eq!(successor("ab").as_deref(), Some("ac"));
        assert_eq!(successor("a/").as_deref(), Some("a0"));
        assert_eq!(successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(successor("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(successor("\u{10FFFF}"), None);
        assert_eq!(successor(""), None);
    }

    #[test]
    fn tokens_round_trip() {
        assert_eq!(decode_token(&encode_token("dir/ü b.txt")).as_deref(), Some("dir/ü b.txt"));
        assert!(decode_token("!!").is_none());
    }

    /// Names from a small alphabet, so prefixes, case-only differences, delimiters inside
    /// names and multi-byte characters (up to U+10FFFF) all meet.
    fn name() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('a'),
                Just('b'),
                Just('A'),
                Just('B'),
                Just('-'),
                Just('.'),
                Just('0'),
                Just('é'),
                Just('\u{10FFFF}')
            ],
            1..4,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    /// Random trees as path lists: files, and folders that may be empty.
    fn tree() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec((proptest::collection::vec(name(), 1..4), any::<bool>()), 0..40).prop_map(|ps| {
            ps.into_iter().map(|(parts, empty_dir)| parts.join("/") + if empty_dir { "/" } else { "" }).collect()
        })
    }

    /// Drops paths that would make a name both a file and a folder in one folder (the
    /// namespace cannot hold that either; case-only differences stay, like S3 keys).
    fn consistent(paths: Vec<String>) -> Vec<String> {
        let mut kinds: HashMap<String, bool> = HashMap::new();
        let mut out = Vec::new();
        'outer: for p in paths {
            let (body, folder) = p.strip_suffix('/').map_or((p.as_str(), false), |b| (b, true));
            let parts: Vec<&str> = body.split('/').collect();
            let mut prefix = String::new();
            let mut claims = Vec::new();
            for (i, n) in parts.iter().enumerate() {
                prefix = if prefix.is_empty() { n.to_string() } else { format!("{prefix}/{n}") };
                let is_dir = folder || i + 1 < parts.len();
                if kinds.get(&prefix).is_some_and(|k| *k != is_dir) {
                    continue 'outer;
                }
                claims.push((prefix.clone(), is_dir));
            }
            kinds.extend(claims);
            out.push(p);
        }
        out
    }

    /// Prefixes and start-after values: real keys and their cuts, and random strings.
    fn probe() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            proptest::collection::vec(prop_oneof![name(), Just("/".to_string())], 0..4).prop_map(|v| v.concat()),
        ]
    }

    fn delimiter() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("/".to_string())),
            Just(Some("-".to_string())),
            Just(Some("a".to_string())),
            Just(Some("b/".to_string())),
            Just(Some("é".to_string())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// One page equals the reference's page for any tree, prefix, delimiter, start and size.
        #[test]
        fn a_page_matches_the_reference(
            paths in tree(),
            prefix in probe(),
            after in proptest::option::of(probe()),
            delim in delimiter(),
            max in 0usize..6,
            cut in any::<proptest::sample::Index>(),
        ) {
            let paths = consistent(paths);
            let m = Mem::of(&paths.iter().map(String::as_str).collect::<Vec<_>>());
            let mut keys = Vec::new();
            m.keys(0, "", &mut keys);
            // Half the time start after a real key or a cut of one.
            let after = match (after, keys.is_empty()) {
                (Some(a), _) if a.len() % 2 == 0 => Some(a),
                (_, false) => {
                    let k = &keys[cut.index(keys.len())].0;
                    let cuts: Vec<usize> = (0..=k.len()).filter(|i| k.is_char_boundary(*i)).collect();
                    Some(k[..cuts[cut.index(cuts.len())]].to_string())
                }
                (a, true) => a,
            };
            let got = list(&m, &prefix, delim.as_deref(), after.as_deref(), max);
            let (want, want_next) = reference(keys, &prefix, delim.as_deref(), after.as_deref(), max);
            prop_assert_eq!(lines(&got), want);
            prop_assert_eq!(got.next, want_next);
        }

        /// Following the continuation from page to page lists every line exactly once, in
        /// order, like one unbounded page.
        #[test]
        fn paging_lists_everything_once(
            paths in tree(),
            prefix in probe(),
            delim in delimiter(),
            max in 1usize..5,
        ) {
            let paths = consistent(paths);
            let m = Mem::of(&paths.iter().map(String::as_str).collect::<Vec<_>>());
            let mut keys = Vec::new();
            m.keys(0, "", &mut keys);
            let (all, _) = reference(keys, &prefix, delim.as_deref(), None, usize::MAX);
            let mut seen = Vec::new();
            let mut after: Option<String> = None;
            for _ in 0..=all.len() {
                let p = list(&m, &prefix, delim.as_deref(), after.as_deref(), max);
                seen.extend(lines(&p));
                match p.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
            prop_assert_eq!(seen, all);
        }

        /// A walk rooted in a folder (the prefix's folder, as the door roots it) lists the keys
        /// below it with the folder's key in front.
        #[test]
        fn a_walk_below_a_base_matches(paths in tree(), rest in probe(), delim in delimiter(), max in 0usize..6) {
            let paths = consistent(paths);
            let inner: Vec<String> = paths.iter().map(|p| format!("base/{p}")).collect();
            let mut all_paths: Vec<&str> = inner.iter().map(String::as_str).collect();
            all_paths.push("base0");
            all_paths.push("bas/x");
            let m = Mem::of(&all_paths);
            let root = m.dirs[&0].iter().find(|c| c.name == "base").and_then(|c| c.dir);
            let Some(root) = root else { return Ok(()) };
            let mut keys = Vec::new();
            m.keys(root, "base/", &mut keys);
            let prefix = format!("base/{rest}");
            let Ok(got) = run(page(&m, root, "base/", &prefix, delim.as_deref(), None, max));
            let (want, want_next) = reference(keys, &prefix, delim.as_deref(), None, max);
            prop_assert_eq!(lines(&got), want);
            prop_assert_eq!(got.next, want_next);
        }
    }
}
