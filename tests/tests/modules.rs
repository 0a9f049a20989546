//! The gateway's and the drive's top-level modules form no cycle: every `crate::` path in a
//! module's non-test code is an edge from that module to the one it names, and the graph must
//! be acyclic, so that a module can be read (and changed) knowing only the ones below it. The
//! same holds among the submodules of each directory module (`meta`'s `tree`, `locks`,
//! `quota`, ...; the drive core's `vfs`, `writeback`, `problems`, ...), through `super::`.
//!
//! When this fails: the message lists each cycle with the files that make its edges. Move the
//! shared piece into a leaf module (as `timefmt`, `headers`, `backends` in the gateway or
//! `config` in the drive), or let the lower module take what it needs as a parameter or trait.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments (doc links name modules without depending on them)
/// and without its test module (tests may reach anywhere).
fn code(text: &str) -> String {
    let mut end = text.len();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        if text[at + "#[cfg(test)]".len()..].trim_start().starts_with("mod ") {
            end = at;
            break;
        }
        from = at + 1;
    }
    let text = &text[..end];
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a piece of code names through `crate::` (and `$crate::` in macros),
/// including each item of a `use crate::{a, b::c}` group.
fn named_modules(code: &str) -> BTreeSet<String> {
    named_after(code, "crate::")
}

/// The names that follow `prefix` in a piece of code, each item of a `prefix{a, b::c}` group
/// included.
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        if let Some(group) = after.strip_prefix('{') {
            // Top-level items of the group, nested groups skipped.
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()).to_string());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()).to_string());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(after).to_string());
        }
        rest = after;
    }
    out.remove("");
    out.remove("self");
    out
}

/// module -> modules it names -> files that name them.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn graph(src: &str) -> Graph {
    let dir = root().join(src);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(!files.is_empty(), "no Rust files under {src}");
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(&dir).expect("under src").to_string_lossy().replace('\\', "/");
        let first = rel.split('/').next().unwrap_or("");
        let module = first.strip_suffix(".rs").unwrap_or(first);
        if matches!(module, "lib" | "main") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for to in named_modules(&code(&text)) {
            if to != module {
                g.entry(module.to_string()).or_default().entry(to).or_default().insert(format!("{src}/{rel}"));
            }
        }
    }
    g
}

/// The graph among the submodules of the directory module `parent` under `src` (for example
/// `meta`'s `tree`, `locks`, `usage`): edges are `super::x` in its files and
/// `crate::parent::x` anywhere in it, for `x` one of its submodules.
fn submodule_graph(src: &str, parent: &str) -> Graph {
    let dir = root().join(src).join(parent);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let module_of = |f: &Path| {
        let rel = f.strip_prefix(&dir).expect("under the module").to_string_lossy().replace('\\', "/");
        let first = rel.split('/').next().unwrap_or("").to_string();
        (first.strip_suffix(".rs").map(str::to_string).unwrap_or(first), rel)
    };
    let submodules: BTreeSet<String> = files.iter().map(|f| module_of(f).0).filter(|m| m != "mod").collect();
    let mut g = Graph::new();
    for f in &files {
        let (module, rel) = module_of(f);
        if module == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let code = code(&text);
        let mut named = named_after(&code, &format!("crate::{parent}::"));
        // `super::` in a file directly inside the module names a sibling.
        if !rel.contains('/') {
            named.extend(named_after(&code, "super::"));
        }
        for to in named.into_iter().filter(|t| submodules.contains(t) && *t != module) {
            g.entry(module.clone()).or_default().entry(to).or_default().insert(format!("{src}/{parent}/{rel}"));
        }
    }
    g
}

/// The directory modules of `src` (those with a `mod.rs`).
fn directory_modules(src: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root().join(src)) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("mod.rs").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn reachable(g: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for to in g.get(&m).into_iter().flat_map(|e| e.keys()) {
            if seen.insert(to.clone()) {
                stack.push(to.clone());
            }
        }
    }
    seen
}

/// Each group of modules that reach one another, with the edges inside it.
fn cycles(g: &Graph) -> Vec<String> {
    let reach: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reachable(g, m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for (m, r) in &reach {
        if done.contains(*m) || !r.contains(*m) {
            continue;
        }
        let group: BTreeSet<String> =
            r.iter().filter(|o| reach.get(o).is_some_and(|back| back.contains(*m))).cloned().collect();
        let mut lines = vec![format!("cycle among {group:?}:")];
        for a in &group {
            for (b, files) in g.get(a).into_iter().flatten() {
                if group.contains(b) {
                    lines.push(format!("  {a} -> {b} in {files:?}"));
                }
            }
        }
        out.push(lines.join("\n"));
        done.extend(group);
    }
    out
}

#[test]
fn the_parser_finds_paths_and_groups() {
    let code = code(
        "use crate::a::X;\nuse crate::{b, c::{D, E}, d::F};\n// crate::commented\nlet x = $crate::e::f!();\n\
         #[cfg(test)]\nconst C: u8 = crate::h::C;\n#[cfg(test)]\nmod tests { use crate::g; }",
    );
    let found: Vec<String> = named_modules(&code).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d", "e", "h"]);
}

#[test]
fn a_cycle_is_found() {
    let mut g = Graph::new();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        g.entry(a.into()).or_default().entry(b.into()).or_default().insert(format!("{a}.rs"));
    }
    let found = cycles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with(r#"cycle among {"x", "y", "z"}"#), "{}", found[0]);
}

#[test]
fn gateway_and_drive_modules_form_no_cycle() {
    let mut problems = Vec::new();
    for src in ["gateway/src", "mount/src"] {
        let g = graph(src);
        // The walk must have seen the modules' edges, or an empty graph would pass.
        assert!(g.values().map(BTreeMap::len).sum::<usize>() > 5, "{src}: too few edges found: {g:?}");
        problems.extend(cycles(&g).into_iter().map(|c| format!("{src}: {c}")));
    }
    assert!(problems.is_empty(), "module cycles:\n{}", problems.join("\n"));
}

#[test]
fn submodules_form_no_cycle() {
    let mut problems = Vec::new();
    let mut edges = 0;
    for src in ["gateway/src", "mount/src"] {
        for parent in directory_modules(src) {
            let g = submodule_graph(src, &parent);
            edges += g.values().map(BTreeMap::len).sum::<usize>();
            problems.extend(cycles(&g).into_iter().map(|c| format!("{src}/{parent}: {c}")));
        }
    }
    // The metadata layer alone has more edges than this: an empty walk must not pass.
    assert!(edges > 20, "too few submodule edges found ({edges})");
    assert!(problems.is_empty(), "submodule cycles:\n{}", problems.join("\n"));
}
