//! The documentation matches the tree and the binary: docs/ARCHITECTURE.md names every module of
//! the gateway, the drive, the block cache and the wire types; tests/README.md lists every test
//! and harness file; every path a doc names exists; every `nimbus-gateway` flag, `NIMBUS_*`
//! variable and metric a doc names exists (from `nimbus-gateway describe --json`); the served
//! OpenAPI document lists the endpoints docs/API.md lists and is valid OpenAPI 3.1; and no doc
//! calls something "later", a "placeholder" or "not measured" unless the allow-list below says
//! why that sentence is true.
//!
//! When this fails after a change: name the new module in ARCHITECTURE.md's codemap (its full
//! path, or its file name in backticks in the row of its directory or crate), add the test file
//! to tests/README.md's table, fix the doc, or (for text that is true) add an ALLOW entry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use nimbus_e2e::backend::Backend;
use nimbus_e2e::bins::gateway_describe;
use nimbus_e2e::gateway::{Gateway, GatewayOptions};
use serde_json::Value;

/// Crates whose every module file must be named in docs/ARCHITECTURE.md.
const MAPPED_CRATES: [&str; 4] = ["gateway", "mount", "blockcache", "proto"];

/// Words that say something is not there yet.
const NOT_YET: [&str; 8] =
    ["placeholder", "later", "not measured", "not yet measured", "not yet re-measured", "todo", "tbd", "coming soon"];

/// True sentences that use a NOT_YET word: (doc, a piece of the line, why it is true). An entry
/// that no longer matches any line fails too, so the list stays short.
const ALLOW: &[(&str, &str, &str)] = &[
    ("README.md", "so a later run tests it", "CI builds Garage for the next run"),
    ("tests/README.md", "no doc calls something", "describes this check"),
    ("docs/OPERATIONS.md", "a later `fsck --repair` re-registers them", "order of events"),
    ("docs/OPERATIONS.md", "the later file is absent", "order of events"),
    ("docs/OPERATIONS.md", "every later change arrives as a notification", "order of events"),
    ("docs/ARCHITECTURE.md", "a later failure aborts the response", "order of events"),
    ("docs/MOUNT.md", "recovery applies the later ones", "order of events"),
    ("docs/MOUNT.md", "it goes up under it later", "order of events"),
    ("docs/MOUNT-WINDOWS.md", "later writes would fail", "order of events"),
    ("docs/BENCHMARKS.md", "later ranges of that block", "order of events"),
    ("docs/BENCHMARKS.md", "and later", "glibc's behaviour over time"),
    ("docs/BENCHMARKS.md", "not yet re-measured", "a fix made after the recorded run, named with its commit"),
];

/// `--flags` named in inline code of the gateway's docs that belong to other programs: (doc,
/// flag, whose).
const OTHER_FLAGS: &[(&str, &str, &str)] = &[
    ("README.md", "--mount", "nimbus bench"),
    ("README.md", "--name", "nimbus keys create"),
    ("README.md", "--nocapture", "cargo test"),
    ("README.md", "--preset", "nimbus bench"),
    ("README.md", "--output", "nimbus bench"),
    ("README.md", "--exclude", "cargo test"),
    ("README.md", "--workspace", "cargo test"),
    ("README.md", "--fast", "infra/test.sh"),
    ("README.md", "--clippy", "infra/test.sh"),
    ("README.md", "--check", "cargo fmt"),
    ("docs/API.md", "--group", "nimbus share add"),
    ("docs/ARCHITECTURE.md", "--upload-delay", "nimbus mount"),
    ("docs/DOORS.md", "--name", "nimbus keys create"),
    ("docs/OPERATIONS.md", "--no-owner", "pg_restore"),
    ("docs/OPERATIONS.md", "--offline", "systemd-analyze security"),
    ("docs/OPERATIONS.md", "--jsn", "a misspelling the deployment validator's self-test plants"),
];

/// Paths docs name that are not in the repository: build outputs (gitignored), and examples
/// that only look like repository paths: (doc or "*", path prefix).
const NOT_IN_TREE: &[(&str, &str)] = &[
    ("*", "admin-ui/dist"),
    ("*", "admin-ui/e2e-artifacts"),
    ("*", "client/desktop/ui/dist"),
    ("*", "client/desktop/ui/e2e-artifacts"),
    ("docs/DOORS.md", "docs/a.txt"),
];

/// Docs whose inline-code `--flags` are the gateway's unless OTHER_FLAGS says otherwise. Flags
/// on a `nimbus-gateway SUBCOMMAND ...` command line are checked in every doc.
const GATEWAY_DOCS: [&str; 7] = [
    "README.md",
    "docs/ARCHITECTURE.md",
    "docs/OPERATIONS.md",
    "docs/SECURITY.md",
    "docs/DOORS.md",
    "docs/API.md",
    "docs/ADMIN-UI.md",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Files under `dir` (relative to the repository) with the extension, as repository paths.
fn files(dir: &str, ext: &str) -> Vec<String> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "node_modules" || name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    let root = root();
    let mut out = Vec::new();
    walk(&root.join(dir), ext, &mut out);
    let mut rel: Vec<String> =
        out.iter().map(|p| p.strip_prefix(&root).expect("under root").to_string_lossy().replace('\\', "/")).collect();
    rel.sort();
    rel
}

/// Every Markdown doc: README.md files anywhere and docs/*.md.
fn docs() -> Vec<String> {
    files(".", "md")
        .into_iter()
        .filter(|f| f.ends_with("README.md") || (f.starts_with("docs/") && !f[5..].contains('/')))
        .collect()
}

/// A doc's lines, each with whether it is inside a fenced code block.
fn lines(text: &str) -> Vec<(bool, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        out.push((fenced, line));
    }
    out
}

/// The inline-code spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// `a/{b,c}.rs` -> `a/b.rs`, `a/c.rs` (nested and repeated braces too).
fn expand_braces(s: &str) -> Vec<String> {
    let Some(open) = s.find('{') else { return vec![s.to_owned()] };
    let Some(close) = s[open..].find('}').map(|i| open + i) else { return vec![s.to_owned()] };
    s[open + 1..close]
        .split(',')
        .flat_map(|alt| expand_braces(&format!("{}{}{}", &s[..open], alt, &s[close + 1..])))
        .collect()
}

/// The backticked tokens of a line, brace-expanded.
fn tokens(line: &str) -> BTreeSet<String> {
    code_spans(line).into_iter().flat_map(expand_braces).collect()
}

fn fail_with(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

/// Whether docs/ARCHITECTURE.md names `file` (a repository path `CRATE/src/REL`): its full path;
/// a crate root (`lib.rs`, `main.rs`) by its crate's row (`gateway/`); on a line naming the
/// crate, `REL` (`meta/throttle.rs`, `core/`, for `core/mod.rs`); on a line naming a directory
/// `CRATE/src/DIR/` above it, the rest of the path (`throttle.rs`, or `throttle`).
fn named(file: &str, arch_lines: &[BTreeSet<String>]) -> bool {
    let (krate, rel) = file.split_once("/src/").expect("CRATE/src/...");
    let module_dir = rel.strip_suffix("mod.rs");
    arch_lines.iter().any(|toks| {
        if toks.contains(file) || module_dir.is_some_and(|d| toks.contains(&format!("{krate}/src/{d}"))) {
            return true;
        }
        let in_crate = toks.iter().any(|t| t == &format!("{krate}/") || t.starts_with(&format!("{krate}/src/")));
        if !in_crate {
            return false;
        }
        if (rel == "lib.rs" || rel == "main.rs") && toks.contains(&format!("{krate}/")) {
            return true;
        }
        if toks.contains(rel) || module_dir.is_some_and(|d| !d.is_empty() && toks.contains(d)) {
            return true;
        }
        toks.iter().filter_map(|t| t.strip_prefix(&format!("{krate}/src/"))).filter(|d| d.ends_with('/')).any(|dir| {
            rel.strip_prefix(dir).is_some_and(|rest| {
                toks.contains(rest)
                    || (!rest.contains('/') && rest.strip_suffix(".rs").is_some_and(|stem| toks.contains(stem)))
            })
        })
    })
}

#[test]
fn architecture_names_every_module() {
    let arch = read("docs/ARCHITECTURE.md");
    let arch_lines: Vec<BTreeSet<String>> = lines(&arch).into_iter().map(|(_, l)| tokens(l)).collect();
    let mut missing = Vec::new();
    for krate in MAPPED_CRATES {
        let found = files(&format!("{krate}/src"), "rs");
        assert!(!found.is_empty(), "no sources under {krate}/src");
        missing.extend(found.into_iter().filter(|f| !named(f, &arch_lines)));
    }
    // Every crate of the workspace has its row.
    for manifest in files(".", "toml").into_iter().filter(|f| f.ends_with("/Cargo.toml")) {
        let dir = manifest.strip_suffix("Cargo.toml").expect("suffix");
        if !arch_lines.iter().any(|t| t.contains(dir)) {
            missing.push(format!("{dir} (a crate)"));
        }
    }
    fail_with(
        "docs/ARCHITECTURE.md does not name these (codemap: full path, or the file name in its directory's row)",
        &missing,
    );
}

#[test]
fn tests_readme_lists_every_test_file() {
    let readme = read("tests/README.md");
    // First cells of table rows: `tests/api_files.rs`, `src/gateway.rs`, `faults.rs`.
    let listed: BTreeSet<String> = lines(&readme)
        .into_iter()
        .filter(|(fenced, l)| !fenced && l.starts_with('|'))
        .filter_map(|(_, l)| l.split('|').nth(1).and_then(|cell| code_spans(cell).first().map(|s| (*s).to_owned())))
        .collect();
    let mut expected = BTreeMap::new();
    for f in files("tests/tests", "rs") {
        expected.insert(f.strip_prefix("tests/").expect("tests/").to_owned(), f);
    }
    for f in files("tests/src", "rs").into_iter().filter(|f| f != "tests/src/lib.rs") {
        expected.insert(f.strip_prefix("tests/").expect("tests/").to_owned(), f);
    }
    for f in files("mount/src/core/tests", "rs").into_iter().filter(|f| !f.ends_with("/mod.rs")) {
        expected.insert(f.rsplit('/').next().expect("name").to_owned(), f);
    }
    let mut problems: Vec<String> = expected
        .iter()
        .filter(|(cell, _)| !listed.contains(*cell))
        .map(|(cell, f)| format!("{f}: no row `{cell}`"))
        .collect();
    problems.extend(
        listed
            .iter()
            .filter(|c| c.ends_with(".rs") && !expected.contains_key(*c))
            .map(|c| format!("row `{c}`: no such file")),
    );
    fail_with("tests/README.md's tables and the test files differ", &problems);
}

/// Top-level directories whose paths docs name.
const TREE: [&str; 9] =
    ["gateway/", "mount/", "blockcache/", "proto/", "client/", "tests/", "infra/", "admin-ui/", "docs/"];

#[test]
fn documented_paths_exist() {
    let root = root();
    let mut problems = Vec::new();
    for doc in docs() {
        let text = read(&doc);
        let dir = Path::new(&doc).parent().expect("dir").to_path_buf();
        for (n, (fenced, line)) in lines(&text).into_iter().enumerate() {
            if fenced {
                continue;
            }
            let mut paths: Vec<String> = tokens(line)
                .into_iter()
                .filter(|t| {
                    TREE.iter().any(|top| t.starts_with(top))
                        && !t.contains(|c: char| c.is_whitespace() || "*<>$…|:=".contains(c))
                        && !t.contains("...")
                })
                .collect();
            // Markdown links to files of the repository.
            for (_, rest) in line.match_indices("](").map(|(i, _)| ((), &line[i + 2..])) {
                let target = rest.split(')').next().unwrap_or_default().split('#').next().unwrap_or_default();
                if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                    paths.push(target.to_owned());
                }
            }
            for p in paths {
                // Relative to the doc (links, tests/README.md's `src/...`), else to the root.
                let exists = root.join(&dir).join(&p).exists() || root.join(&p).exists();
                let excused = NOT_IN_TREE.iter().any(|(d, prefix)| (*d == "*" || *d == doc) && p.starts_with(prefix));
                if !exists && !excused {
                    problems.push(format!("{doc}:{}: `{p}` does not exist", n + 1));
                }
            }
        }
    }
    fail_with("docs name paths that do not exist", &problems);
}

#[test]
fn every_doc_is_reachable_from_the_readme() {
    let readme = read("README.md");
    let missing: Vec<String> = docs()
        .into_iter()
        .filter(|d| d.starts_with("docs/"))
        .filter(|d| !readme.contains(&format!("]({d}")))
        .map(|d| format!("{d}: no link in README.md"))
        .collect();
    fail_with("README.md does not link every doc", &missing);
}

/// The flags of each `nimbus-gateway` command (long names and aliases), from describe.
fn gateway_flags(d: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for c in d["commands"].as_array().expect("commands") {
        let mut set = BTreeSet::new();
        for a in c["args"].as_array().expect("args") {
            set.extend(a["long"].as_str().map(str::to_owned));
            set.extend(a["aliases"].as_array().expect("aliases").iter().filter_map(|x| x.as_str()).map(str::to_owned));
        }
        out.insert(c["name"].as_str().expect("name").to_owned(), set);
    }
    out
}

/// `--name` out of a word such as `--tls-cert`, `--grace=0`, `--cache-mem,`, `--s3-*` (None).
fn long_flag(word: &str) -> Option<&str> {
    let name = word.strip_prefix("--")?;
    let name = name.split(['=', ',', ')', ';', '.', ':', '`', '"', '\'']).next().unwrap_or_default();
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')).then_some(name)
}

#[test]
fn documented_gateway_flags_exist() {
    let d = gateway_describe().expect("nimbus-gateway describe --json");
    let flags = gateway_flags(&d);
    let all: BTreeSet<&String> = flags.values().flatten().collect();
    let mut problems = Vec::new();
    let mut used_other = BTreeSet::new();
    for doc in docs() {
        let text = read(&doc);
        let mut continued: Option<String> = None;
        for (n, (fenced, line)) in lines(&text).into_iter().enumerate() {
            let at = format!("{doc}:{}", n + 1);
            // Command lines: `nimbus-gateway SUBCOMMAND ARGS...`, in code blocks (with `\`
            // continuations) and in inline code.
            let mut commands: Vec<String> = code_spans(line).iter().map(|s| (*s).to_owned()).collect();
            if fenced {
                let whole =
                    format!("{} {}", continued.take().unwrap_or_default(), line.trim_end().trim_end_matches('\\'));
                if line.trim_end().ends_with('\\') {
                    continued = Some(whole);
                } else {
                    commands.push(whole);
                }
            }
            for cmd in &commands {
                let cmd = cmd.split(['#', '|', ';', '&']).next().unwrap_or_default();
                let words: Vec<&str> = cmd.split_whitespace().collect();
                for (i, w) in words.iter().enumerate() {
                    let is_gateway = *w == "nimbus-gateway" || w.ends_with("/nimbus-gateway");
                    let Some(sub) = words.get(i + 1).filter(|_| is_gateway) else { continue };
                    let Some(accepted) = flags.get(*sub) else { continue };
                    for arg in &words[i + 2..] {
                        if let Some(f) = long_flag(arg).filter(|f| !accepted.contains(*f)) {
                            problems.push(format!("{at}: `nimbus-gateway {sub}` has no --{f}"));
                        }
                    }
                }
            }
            // Prose of the gateway's docs: a `--flag` in inline code is one of the gateway's.
            if fenced || !GATEWAY_DOCS.contains(&doc.as_str()) {
                continue;
            }
            for span in code_spans(line) {
                if span.contains("nimbus-gateway") {
                    continue; // a command line, checked above
                }
                for f in span.split(|c: char| c.is_whitespace() || c == '/').filter_map(long_flag) {
                    if all.contains(&f.to_owned()) {
                        continue;
                    }
                    if OTHER_FLAGS.iter().any(|(d, o, _)| *d == doc && o.strip_prefix("--") == Some(f)) {
                        used_other.insert((doc.clone(), f.to_owned()));
                    } else {
                        problems.push(format!(
                            "{at}: --{f} is no nimbus-gateway flag (another program's? add it to OTHER_FLAGS)"
                        ));
                    }
                }
            }
        }
    }
    for (doc, f, whose) in OTHER_FLAGS {
        if !used_other.contains(&(doc.to_string(), f.trim_start_matches('-').to_owned())) {
            problems.push(format!("OTHER_FLAGS ({doc}, {f}, {whose}) matches nothing: remove it"));
        }
    }
    fail_with("documented gateway flags", &problems);
}

/// Every `NIMBUS_*` name in a doc is a variable the gateway reads (describe) or one some other
/// program of the repository reads (named in its source or scripts); every metric-like
/// `nimbus_*_total|_seconds|_bytes` name is one the gateway exports.
#[test]
fn documented_variables_and_metrics_exist() {
    let d = gateway_describe().expect("nimbus-gateway describe --json");
    let mut vars: BTreeSet<String> = BTreeSet::new();
    for c in d["commands"].as_array().expect("commands") {
        vars.extend(c["args"].as_array().expect("args").iter().filter_map(|a| a["env"].as_str()).map(str::to_owned));
    }
    vars.extend(d["env"].as_array().expect("env").iter().filter_map(|e| e["name"].as_str()).map(str::to_owned));
    let metrics: BTreeSet<&str> =
        d["metrics"].as_array().expect("metrics").iter().filter_map(|m| m["name"].as_str()).collect();
    // What other programs read: the repository's code and scripts, not its docs, nor the
    // deployment validator's self-test, which plants variables nothing reads.
    let mut source = String::new();
    for ext in ["rs", "sh", "py", "ts", "tsx", "mjs", "yaml", "toml"] {
        for f in files(".", ext).into_iter().filter(|f| f != "infra/validate-deploy.sh") {
            source.push_str(&read(&f));
        }
    }
    source.push_str(&read(".ci/run"));
    let mut problems = Vec::new();
    for doc in docs() {
        let text = read(&doc);
        for (n, line) in text.lines().enumerate() {
            for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                let var_like = word.starts_with("NIMBUS_")
                    && word.len() > 7
                    && word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                if var_like && !vars.contains(word) && !source.contains(word) {
                    problems.push(format!("{doc}:{}: {word} is read by nothing", n + 1));
                }
                let metric_like = ["_total", "_seconds", "_bytes", "_in_flight"].iter().any(|s| word.ends_with(s));
                if word.starts_with("nimbus_") && metric_like && !metrics.contains(word) {
                    problems.push(format!("{doc}:{}: {word} is no metric of the gateway", n + 1));
                }
            }
        }
    }
    // And the other way: docs/OPERATIONS.md describes every metric.
    let ops = read("docs/OPERATIONS.md");
    problems.extend(
        metrics.iter().filter(|m| !ops.contains(*m)).map(|m| format!("docs/OPERATIONS.md does not describe {m}")),
    );
    fail_with("documented variables and metrics", &problems);
}

#[test]
fn nothing_is_called_later_or_a_placeholder() {
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for doc in docs() {
        let text = read(&doc);
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let hit = NOT_YET.iter().find(|w| {
                lower.match_indices(*w).any(|(i, _)| {
                    let before = lower[..i].chars().next_back();
                    let after = lower[i + w.len()..].chars().next();
                    !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
                })
            });
            let Some(word) = hit else { continue };
            match ALLOW.iter().position(|(d, piece, _)| *d == doc && line.contains(piece)) {
                Some(i) => {
                    used.insert(i);
                }
                None => problems.push(format!("{doc}:{}: \"{word}\": {}", n + 1, line.trim())),
            }
        }
    }
    for (i, (doc, piece, _)) in ALLOW.iter().enumerate() {
        if !used.contains(&i) {
            problems.push(format!("ALLOW ({doc}, {piece:?}) matches no line: remove it"));
        }
    }
    fail_with("docs say something is not there yet (make it true, or add an ALLOW entry saying why it is)", &problems);
}

/// The endpoints docs/API.md tabulates (`| METHOD | `/path` |`): (line, method, path as written).
fn api_md_endpoints() -> Vec<(usize, String, String)> {
    let api = read("docs/API.md");
    let mut endpoints = Vec::new();
    for (n, (fenced, line)) in lines(&api).into_iter().enumerate() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(method), Some(path)) = (cells.get(1), cells.get(2)) else { continue };
        if fenced || !["GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"].contains(method) {
            continue;
        }
        for p in code_spans(path).into_iter().flat_map(|p| p.split(", ")) {
            endpoints.push((n + 1, (*method).to_owned(), p.trim_matches('`').to_owned()));
        }
    }
    endpoints
}

/// Every endpoint docs/API.md tabulates exists on a real gateway: asked
/// without credentials, with its parameters filled in, it answers anything but 404 or 405 (a
/// route that is not there answers 404 `not_found`; a method it lacks, 405).
#[tokio::test]
async fn documented_endpoints_exist() -> anyhow::Result<()> {
    let endpoints = api_md_endpoints();
    assert!(endpoints.len() > 40, "found only {} endpoints in docs/API.md", endpoints.len());
    let gw = Gateway::start(Backend::SqliteLocal, &GatewayOptions::default()).await?;
    // A redirect is an answer of the route itself (`/auth/oidc/start` sends the browser on):
    // not followed.
    let http = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build()?;
    let status = |method: &str, path: &str| {
        let url = format!("{}{path}", gw.url);
        let req = http.request(method.parse().expect("method"), url);
        async move { anyhow::Ok(req.send().await?.status().as_u16()) }
    };
    // The probe tells a missing route and a missing method apart from an existing one.
    assert_eq!(status("GET", "/api/v1/no-such-endpoint").await?, 404);
    assert_eq!(status("PATCH", "/api/v1/trash").await?, 405);
    let mut problems = Vec::new();
    for (line, method, path) in endpoints {
        // `{path}`, `{*path}`, `{id}`, `{hash}`: any value reaches the route.
        let filled: String = path
            .split('?')
            .next()
            .unwrap_or_default()
            .split('/')
            .map(|seg| {
                if seg.starts_with('{') {
                    if seg.contains("hash") { "0".repeat(64) } else { "1".to_owned() }
                } else {
                    seg.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let code = status(&method, &filled).await?;
        if code == 404 || code == 405 {
            problems.push(format!("docs/API.md:{line}: {method} {path} answers {code} ({filled})"));
        }
    }
    fail_with("docs/API.md documents endpoints the gateway does not have", &problems);
    Ok(())
}

/// Where openapi-spec-validator is: `NIMBUS_OPENAPI_VALIDATOR`, else where infra/install-deps.sh
/// links it, else on the PATH.
fn openapi_validator() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NIMBUS_OPENAPI_VALIDATOR") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("NIMBUS_CACHE_DIR").map_or_else(|| PathBuf::from("/var/cache/nimbus"), PathBuf::from);
    let installed = cache.join("bin/openapi-spec-validator");
    if installed.exists() {
        return Some(installed);
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("openapi-spec-validator"))
        .find(|p| p.exists())
}

/// The OpenAPI document a real gateway serves is valid OpenAPI 3.1 (openapi-spec-validator,
/// installed by infra/install-deps.sh; client generators refuse an invalid one), and it
/// describes exactly the `/api/v1` endpoints docs/API.md tabulates, method by method.
#[tokio::test]
async fn openapi_document_is_valid_and_matches_api_md() -> anyhow::Result<()> {
    let gw = Gateway::start(Backend::SqliteLocal, &GatewayOptions::default()).await?;
    let url = format!("{}/api/v1/openapi.json", gw.url);
    let text = gw.api().http().get(url).send().await?.error_for_status()?.text().await?;
    let doc: Value = serde_json::from_str(&text)?;
    anyhow::ensure!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")),
        "not OpenAPI 3.1: {}",
        doc["openapi"]
    );

    let mut described = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in item.as_object().into_iter().flatten().map(|(m, _)| m.to_uppercase()) {
            described.insert((method, path.clone()));
        }
    }
    let mut documented = BTreeSet::new();
    for (_, method, path) in api_md_endpoints() {
        let path = path.split('?').next().unwrap_or_default().replace("{*", "{");
        if path.starts_with("/api/v1/") {
            documented.insert((method, path));
        }
    }
    let only_md: Vec<_> = documented.difference(&described).collect();
    let only_doc: Vec<_> = described.difference(&documented).collect();
    let mut problems: Vec<String> =
        only_md.iter().map(|(m, p)| format!("{m} {p}: in docs/API.md, not in the OpenAPI document")).collect();
    problems.extend(only_doc.iter().map(|(m, p)| format!("{m} {p}: in the OpenAPI document, not in docs/API.md")));
    fail_with("docs/API.md and /api/v1/openapi.json disagree", &problems);

    let Some(validator) = openapi_validator() else {
        // CI runs infra/install-deps.sh first: a missing validator there is a broken setup.
        anyhow::ensure!(
            std::env::var_os("CI").is_none(),
            "openapi-spec-validator is not installed: run infra/install-deps.sh (or set NIMBUS_OPENAPI_VALIDATOR)"
        );
        eprintln!(
            "SKIPPED the OpenAPI 3.1 validation: openapi-spec-validator is not installed (infra/install-deps.sh)"
        );
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &text)?;
    let out = std::process::Command::new(&validator).arg("--schema").arg("3.1").arg(&file).output()?;
    anyhow::ensure!(
        out.status.success(),
        "{} rejects the served document:\n{}{}",
        validator.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
