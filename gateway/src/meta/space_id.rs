//! `SpaceId`: the space a call may act on. Every metadata and content call that reads or
//! changes a space takes one, and only two kinds of code can make one: authentication (a
//! token, a password or an S3 key just checked, or an administrator or the operator acting on
//! a user), through [`SpaceId::authenticated`], and the metadata layer itself for spaces it
//! read from its own rows (maintenance walks every space). So a handler holding a raw user id
//! cannot reach that user's space: it has to go through whoever authenticated it. Rust's
//! privacy cannot name "the auth files" (they sit above `meta`), so a test keeps
//! `SpaceId::authenticated` to the files it lists.

/// The id of a user's space (the user's id), as authentication or the metadata layer vouches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpaceId(i64);

impl SpaceId {
    /// The space of the user `user_id` that the caller has just authenticated (or that an
    /// administrator acts on). Only for the files `tests::AUTHENTICATING` lists.
    pub(crate) fn authenticated(user_id: i64) -> SpaceId {
        SpaceId(user_id)
    }

    /// A space read from the metadata's own rows.
    pub(in crate::meta) fn stored(id: i64) -> SpaceId {
        SpaceId(id)
    }

    /// The raw id, for SQL, cache keys and messages.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for SpaceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    /// The files that authenticate a caller (bearer token, WebDAV password, S3 key), or act
    /// on a user's space as an administrator (the console's cache warm-up) or as the operator
    /// (`fsck` registering a block found in the store).
    const AUTHENTICATING: &[&str] =
        &["meta/space_id.rs", "auth/extract.rs", "doors/dav/mod.rs", "doors/s3/auth.rs", "api/admin.rs", "ops/fsck.rs"];

    #[test]
    fn only_authentication_makes_a_space_id() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).expect("src dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 20, "too few source files found under {}", src.display());
        let mut found = Vec::new();
        let mut makers = 0;
        for f in files {
            let rel = f.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&f).expect("readable source");
            if text.contains("SpaceId::authenticated(") {
                makers += 1;
                if !AUTHENTICATING.contains(&rel.as_str()) {
                    found.push(rel);
                }
            }
        }
        assert!(makers >= 3, "the authenticating files were not found");
        assert!(found.is_empty(), "SpaceId::authenticated outside authentication: {found:?}");
    }
}
