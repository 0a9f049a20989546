//! The `nimbus` command line against a real gateway: every test runs the CLI binary as a
//! subprocess (no terminal, no stdin, its own config dir) and checks what it prints, what it
//! leaves on disk and what the server holds afterwards.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::{ADMIN_PASSWORD, Gateway, backend_test, bins, data};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// No single CLI command may take longer than this.
const CLI_TIMEOUT: Duration = Duration::from_secs(120);

const MIB: usize = 1 << 20;

/// One user's `nimbus` on one machine: a private config dir (`NIMBUS_CONFIG_DIR`), home and
/// working directory, so tests never share a session nor touch the real configuration.
struct Cli {
    bin: PathBuf,
    dir: tempfile::TempDir,
}

/// What a finished `nimbus` command did.
struct Out {
    cmd: String,
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl fmt::Display for Out {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stdout = String::from_utf8_lossy(&self.stdout);
        let stdout: String = stdout.chars().take(3000).collect();
        write!(
            f,
            "`{}` exited with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
            self.cmd, self.status, self.stderr
        )
    }
}

impl fmt::Debug for Out {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Out {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Fails unless the command succeeded.
    fn ok(&self) -> anyhow::Result<&Self> {
        ensure!(self.status.success(), "expected success: {self}");
        self.no_crash()?;
        Ok(self)
    }

    /// Fails unless the command failed (exit code 1) with an `error: ` message on stderr that
    /// contains each of `needles` (case-insensitively), and without a panic or a backtrace.
    fn failed(&self, needles: &[&str]) -> anyhow::Result<&Self> {
        ensure!(self.status.code() == Some(1), "expected exit code 1: {self}");
        ensure!(self.stderr.starts_with("error: "), "the message should start with `error: `: {self}");
        let lower = self.stderr.to_lowercase();
        for n in needles {
            ensure!(lower.contains(&n.to_lowercase()), "stderr should mention {n:?}: {self}");
        }
        self.no_crash()?;
        Ok(self)
    }

    fn no_crash(&self) -> anyhow::Result<()> {
        let lower = self.stderr.to_lowercase();
        for bad in ["panicked", "backtrace", "rust_backtrace", "stack backtrace"] {
            ensure!(!lower.contains(bad), "stderr shows a crash ({bad}): {self}");
        }
        Ok(())
    }

    fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.stdout).with_context(|| format!("stdout is not JSON: {self}"))
    }
}

impl Cli {
    fn new() -> anyhow::Result<Self> {
        let bin = bins::cli_bin()?;
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-cli-").tempdir()?;
        std::fs::create_dir_all(dir.path().join("home"))?;
        std::fs::create_dir_all(dir.path().join("work"))?;
        Ok(Self { bin, dir })
    }

    /// `$NIMBUS_CONFIG_DIR`.
    fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    fn session_file(&self) -> PathBuf {
        self.config_dir().join("nimbus").join("session.json")
    }

    /// The working directory of every command; local files live here.
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    async fn run(&self, args: &[&str]) -> anyhow::Result<Out> {
        self.run_env(args, &[]).await
    }

    async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Out> {
        let cmd_text = format!("nimbus {}", args.join(" "));
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            let upper = k.to_ascii_uppercase();
            if k.starts_with("NIMBUS_") || upper.ends_with("_PROXY") {
                cmd.env_remove(k.as_ref());
            }
        }
        let home = self.dir.path().join("home");
        cmd.env("NIMBUS_CONFIG_DIR", self.config_dir())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("NO_PROXY", "*")
            // A panic would print its backtrace: the checks above would see it.
            .env("RUST_BACKTRACE", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.current_dir(self.work()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.kill_on_drop(true);
        let out = tokio::time::timeout(CLI_TIMEOUT, cmd.output())
            .await
            .with_context(|| format!("`{cmd_text}` did not finish within {CLI_TIMEOUT:?}"))?
            .with_context(|| format!("cannot run `{cmd_text}`"))?;
        Ok(Out {
            cmd: cmd_text,
            status: out.status,
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// `--json ARGS`, which must succeed; its stdout parsed.
    async fn json(&self, args: &[&str]) -> anyhow::Result<Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        self.run(&all).await?.ok()?.json()
    }

    /// `nimbus login URL --username USER` with the password in `NIMBUS_PASSWORD`.
    async fn login_raw(&self, url: &str, user: &str, password: &str) -> anyhow::Result<Out> {
        self.run_env(&["login", url, "--username", user, "--device", "e2e-cli"], &[("NIMBUS_PASSWORD", password)]).await
    }

    async fn login(&self, url: &str, user: &str, password: &str) -> anyhow::Result<Out> {
        let out = self.login_raw(url, user, password).await?;
        out.ok()?;
        Ok(out)
    }

    /// The token the CLI saved.
    fn token(&self) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(self.session_file())?;
        let v: Value = serde_json::from_str(&text)?;
        Ok(v["token"].as_str().context("no token in the session file")?.to_string())
    }

    /// Writes a local file in the working directory; returns its path.
    fn write(&self, name: &str, content: &[u8]) -> anyhow::Result<PathBuf> {
        let p = self.work().join(name);
        std::fs::write(&p, content).with_context(|| format!("writing {}", p.display()))?;
        Ok(p)
    }

    /// A logged-in CLI for a new user `name` (created through the API, no quota).
    async fn for_new_user(gw: &Gateway, name: &str) -> anyhow::Result<Cli> {
        gw.create_user(name, None).await?;
        let cli = Cli::new()?;
        cli.login(&gw.url, name, &user_password(name)).await?;
        Ok(cli)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

fn file_hash(p: &Path) -> anyhow::Result<blake3::Hash> {
    Ok(blake3::hash(&std::fs::read(p).with_context(|| format!("reading {}", p.display()))?))
}

/// `--json ls PATH` → (name, size) of each entry.
async fn ls_json(cli: &Cli, path: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let v = cli.json(&["ls", path]).await?;
    let arr = v.as_array().with_context(|| format!("ls --json is not an array: {v}"))?;
    arr.iter()
        .map(|e| {
            let name = e["name"].as_str().with_context(|| format!("entry without name: {e}"))?;
            Ok((name.to_string(), e["size"].as_u64().unwrap_or(0)))
        })
        .collect()
}

/// `--json whoami` → used_bytes.
async fn used_bytes(cli: &Cli) -> anyhow::Result<u64> {
    let v = cli.json(&["whoami"]).await?;
    v["used_bytes"].as_u64().with_context(|| format!("whoami --json has no used_bytes: {v}"))
}

/// `--json put` → (uploaded_blocks, blocks, version).
fn put_summary(v: &Value) -> anyhow::Result<(u64, u64, i64)> {
    let up = v["uploaded_blocks"].as_u64().with_context(|| format!("no uploaded_blocks: {v}"))?;
    let all = v["blocks"].as_u64().with_context(|| format!("no blocks: {v}"))?;
    let version = v["entry"]["version"].as_i64().with_context(|| format!("no entry.version: {v}"))?;
    Ok((up, all, version))
}

backend_test!(login_whoami_and_wrong_password, |gw| async move {
    let cli = Cli::new()?;

    // Before any login.
    cli.run(&["whoami"]).await?.failed(&["not logged in", "nimbus login"])?;

    let out = cli.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
    ensure!(out.stdout().contains(&format!("Logged in to {} as admin", gw.url)), "{out}");
    ensure!(!out.stdout().contains(ADMIN_PASSWORD) && !out.stderr.contains(ADMIN_PASSWORD), "password echoed: {out}");

    // The session is private: 0600 in a 0700 directory.
    {
        use std::os::unix::fs::PermissionsExt;
        let file = cli.session_file();
        let mode =
            std::fs::metadata(&file).with_context(|| format!("{} missing", file.display()))?.permissions().mode();
        ensure!(mode & 0o777 == 0o600, "session file mode {:o}", mode & 0o777);
        let dir = file.parent().context("session dir")?;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        ensure!(mode & 0o777 == 0o700, "session dir mode {:o}", mode & 0o777);
        let text = std::fs::read_to_string(&file)?;
        ensure!(!text.contains(ADMIN_PASSWORD), "the password is stored in the session file");
    }
    // The saved token works over HTTP.
    gw.api().with_token(cli.token()?).get("/api/v1/me").await?.check(200)?;

    let out = cli.run(&["whoami"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains(&format!("admin (admin) on {}", gw.url)), "{out}");
    ensure!(out.stdout().contains("files 0 B, older versions 0 B, trash 0 B, uploads in progress 0 B"), "{out}");
    let me = cli.json(&["whoami"]).await?;
    ensure!(me["username"] == "admin" && me["role"] == "admin" && me["url"] == gw.url.as_str(), "{me}");
    ensure!(me["usage"]["current"] == 0 && me["usage"]["pending"] == 0, "{me}");

    // A second user on another "machine".
    gw.create_user("bob", None).await?;
    let bob = Cli::new()?;
    bob.login(&gw.url, "bob", &user_password("bob")).await?;
    let out = bob.run(&["whoami"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("bob (user)"), "{out}");
    let toks = bob.json(&["tokens"]).await?;
    let toks = toks.as_array().context("tokens --json is not an array")?;
    ensure!(toks.iter().any(|t| t["device"] == "e2e-cli" && t["current"] == true), "{toks:?}");

    // Wrong password: a clear message, no panic, and the existing session is untouched.
    let out = cli.login_raw(&gw.url, "admin", "not-the-password").await?;
    out.failed(&["wrong username or password"])?;
    ensure!(!out.stderr.contains("not-the-password"), "the password is echoed: {out}");
    ensure!(out.stdout.is_empty(), "{out}");
    let me = cli.json(&["whoami"]).await?;
    ensure!(me["username"] == "admin", "a failed login changed the session: {me}");
    // Unknown user: the same message (no user enumeration).
    cli.login_raw(&gw.url, "nobody", "whatever-password").await?.failed(&["wrong username or password"])?;
    // No password at all, and no terminal to ask on.
    let out = Cli::new()?.run(&["login", &gw.url, "--username", "admin"]).await?;
    out.failed(&["NIMBUS_PASSWORD"])?;
    // Nothing listens there.
    Cli::new()?
        .login_raw("http://127.0.0.1:9", "admin", ADMIN_PASSWORD)
        .await?
        .failed(&["cannot reach", "check the address"])?;
    Ok(())
});

backend_test!(login_with_two_factor, |gw| async move {
    let (_, tess) = gw.user("tess", None).await?;
    let e: nimbus_proto::wire::TotpEnrollment =
        tess.post_json("/api/v1/auth/totp", &serde_json::json!({})).await?.ok(200)?;
    let bytes = totp_rs::Secret::Encoded(e.secret).to_bytes().map_err(|e| anyhow::anyhow!("base32: {e:?}"))?;
    let auth = totp_rs::TOTP::new_unchecked(totp_rs::Algorithm::SHA1, 6, 1, 30, bytes, None, String::new());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    tess.post_json("/api/v1/auth/totp/confirm", &serde_json::json!({"code": auth.generate(now)})).await?.check(200)?;

    let cli = Cli::new()?;
    let pw = user_password("tess");
    // No code and no terminal to ask on: says what to pass.
    cli.login_raw(&gw.url, "tess", &pw).await?.failed(&["two factors", "--totp"])?;
    let base = ["login", gw.url.as_str(), "--username", "tess", "--device", "e2e-cli", "--totp"];
    let wrong = cli.run_env(&[&base[..], &["000000x"]].concat(), &[("NIMBUS_PASSWORD", &pw)]).await?;
    wrong.failed(&["two-factor code"])?;
    // The next step's code (the confirmation used the current one).
    let code = auth.generate(now + 30);
    cli.run_env(&[&base[..], &[code.as_str()]].concat(), &[("NIMBUS_PASSWORD", &pw)]).await?.ok()?;
    let me = cli.json(&["whoami"]).await?;
    ensure!(me["username"] == "tess", "{me}");
    // The code is also read from NIMBUS_TOTP; a used one is refused.
    let again = Cli::new()?;
    let out = again
        .run_env(&["login", &gw.url, "--username", "tess"], &[("NIMBUS_PASSWORD", &pw), ("NIMBUS_TOTP", &code)])
        .await?;
    out.failed(&["two-factor code"])?;
    Ok(())
});

backend_test!(put_ls_get_roundtrip, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let bs = gw.api().block_size().await?;
    let len = 10 * MIB;
    let content = data::bytes("cli-roundtrip", len);
    let want_blocks = len.div_ceil(bs) as u64;
    ensure!(want_blocks == 3, "the test expects 3 blocks of {bs} bytes for 10 MiB, got {want_blocks}");
    let local = cli.write("big.bin", &content)?;

    let v = cli.json(&["put", s(&local), "/docs/big.bin"]).await?;
    let (up, all, _) = put_summary(&v)?;
    ensure!((up, all) == (3, 3), "first upload should send all 3 blocks: {v}");
    ensure!(v["size"].as_u64() == Some(len as u64) && v["entry"]["path"] == "/docs/big.bin", "{v}");

    let entries = ls_json(&cli, "/docs").await?;
    ensure!(entries == vec![("big.bin".to_string(), len as u64)], "{entries:?}");
    let out = cli.run(&["ls", "-l", "/docs"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("10.0 MiB") && out.stdout().contains("big.bin"), "{out}");
    let out = cli.run(&["ls"]).await?;
    out.ok()?;
    ensure!(out.stdout().lines().any(|l| l == "docs/"), "{out}");

    // Back to a file: identical bytes.
    let back = cli.work().join("back.bin");
    let out = cli.run(&["get", "/docs/big.bin", s(&back)]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("downloaded 10.0 MiB"), "{out}");
    ensure!(file_hash(&back)? == blake3::hash(&content), "downloaded file differs");
    // Into a directory: the remote name.
    std::fs::create_dir(cli.work().join("into"))?;
    cli.run(&["get", "/docs/big.bin", s(&cli.work().join("into"))]).await?.ok()?;
    ensure!(file_hash(&cli.work().join("into").join("big.bin"))? == blake3::hash(&content), "get into dir differs");
    // To stdout.
    let out = cli.run(&["get", "/docs/big.bin", "-"]).await?;
    out.ok()?;
    ensure!(out.stdout.len() == len, "get - wrote {} bytes, expected {len}", out.stdout.len());
    ensure!(blake3::hash(&out.stdout) == blake3::hash(&content), "get - content differs");
    // The server agrees.
    let r = gw.api().with_token(cli.token()?).get_file("/docs/big.bin").await?;
    r.check(200)?;
    ensure!(blake3::hash(&r.body) == blake3::hash(&content), "server content differs");

    // Default remote path: `/<file name>`; a remote ending in `/` means "into".
    let small = cli.write("small.txt", b"hello nimbus\n")?;
    let out = cli.run(&["put", s(&small)]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("→ /small.txt"), "{out}");
    cli.run(&["put", s(&small), "/docs/"]).await?.ok()?;
    let out = cli.run(&["get", "/docs/small.txt", "-"]).await?;
    ensure!(out.ok()?.stdout == b"hello nimbus\n", "{out}");
    Ok(())
});

backend_test!(dedup_versions_and_restore, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let bs = gw.api().block_size().await?;
    let len = 10 * MIB;
    let original = data::bytes("cli-versions", len);
    let local = cli.write("v.bin", &original)?;

    let v = cli.json(&["put", s(&local), "/v.bin"]).await?;
    let (up, all, first_version) = put_summary(&v)?;
    ensure!((up, all) == (3, 3), "{v}");

    // Unchanged: nothing new is sent.
    let out = cli.run(&["put", s(&local), "/v.bin"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("(0 of 3 blocks new)"), "an unchanged file should upload 0 blocks: {out}");
    let v = cli.json(&["put", s(&local), "/v.bin"]).await?;
    ensure!(put_summary(&v)?.0 == 0 && v["uploaded_bytes"].as_u64() == Some(0), "{v}");

    // One block changed in the middle: exactly that block is sent.
    let mut changed = original.clone();
    for b in &mut changed[bs + 100..bs + 200] {
        *b ^= 0xff;
    }
    std::fs::write(&local, &changed)?;
    let v = cli.json(&["put", s(&local), "/v.bin"]).await?;
    let (up, all, _) = put_summary(&v)?;
    ensure!((up, all) == (1, 3), "one changed block should upload 1 block: {v}");
    ensure!(v["uploaded_bytes"].as_u64() == Some(bs as u64), "{v}");
    let out = cli.run(&["get", "/v.bin", "-"]).await?;
    ensure!(blake3::hash(&out.ok()?.stdout) == blake3::hash(&changed), "the new content is not served");

    // Versions: at least the original and the change, newest first, the newest current.
    let versions = cli.json(&["versions", "/v.bin"]).await?;
    let list = versions.as_array().with_context(|| format!("versions --json is not an array: {versions}"))?;
    ensure!(list.len() >= 2, "expected 2+ versions: {versions}");
    ensure!(list[0]["current"] == true, "the newest version should be current: {versions}");
    ensure!(list.iter().any(|x| x["version"].as_i64() == Some(first_version)), "v{first_version} missing: {versions}");
    let out = cli.run(&["versions", "/v.bin"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("VERSION") && out.stdout().contains('*'), "{out}");

    // Restore the first one: its content is current again.
    let out = cli.run(&["versions", "/v.bin", "--restore", &first_version.to_string()]).await?;
    out.ok()?;
    ensure!(out.stdout().contains(&format!("restored version {first_version} of /v.bin")), "{out}");
    let restored = cli.work().join("restored.bin");
    cli.run(&["get", "/v.bin", s(&restored)]).await?.ok()?;
    ensure!(file_hash(&restored)? == blake3::hash(&original), "restoring the first version did not bring it back");
    let after = cli.json(&["versions", "/v.bin"]).await?;
    ensure!(after.as_array().map(Vec::len) > Some(list.len()), "a restore should add a version: {after}");

    // A version that does not exist.
    cli.run(&["versions", "/v.bin", "--restore", "999999"]).await?.failed(&["has no version 999999"])?;
    Ok(())
});

backend_test!(put_resumes_after_interruption, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let bs = gw.api().block_size().await?;
    let len = 10 * MIB;
    let content = data::bytes("cli-resume", len);
    let local = cli.write("resume.bin", &content)?;

    // An upload that died after its first block: that block is on the server, nothing committed.
    let api = gw.api().with_token(cli.token()?);
    let blocks = data::split_blocks(&content, bs);
    ensure!(blocks.len() == 3, "expected 3 blocks");
    let (hash, bytes) = &blocks[0];
    api.put_block(hash, bytes.to_vec()).await?.check(201)?;
    api.stat("/resume.bin").await?.check(404)?;

    let out = cli.run(&["put", s(&local)]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("(2 of 3 blocks new)"), "the resumed upload should send only 2 blocks: {out}");
    let out = cli.run(&["get", "/resume.bin", "-"]).await?;
    ensure!(blake3::hash(&out.ok()?.stdout) == blake3::hash(&content), "resumed upload content differs");

    // Two blocks of another file already there: one left to send.
    let content2 = data::bytes("cli-resume-2", len);
    let local2 = cli.write("resume2.bin", &content2)?;
    for (hash, bytes) in data::split_blocks(&content2, bs).iter().take(2) {
        api.put_block(hash, bytes.to_vec()).await?.check(201)?;
    }
    let v = cli.json(&["put", s(&local2), "/resume2.bin"]).await?;
    ensure!(put_summary(&v)?.0 == 1, "only the last block should be sent: {v}");
    ensure!(v["uploaded_bytes"].as_u64() == Some((len - 2 * bs) as u64), "{v}");
    let r = api.get_file("/resume2.bin").await?;
    r.check(200)?;
    ensure!(blake3::hash(&r.body) == blake3::hash(&content2), "second resumed upload content differs");
    Ok(())
});

/// A TCP proxy in front of the gateway that, once armed, holds back the next manifest commit
/// (`POST /api/v1/manifests/...`) a client sends, reports it on `hits` and forwards it only when
/// the test answers: a deterministic "another client saved while this upload ran".
struct CommitInterceptor {
    url: String,
    armed: Arc<AtomicBool>,
    hits: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for CommitInterceptor {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl CommitInterceptor {
    async fn start(gateway_url: &str) -> anyhow::Result<Self> {
        let upstream = gateway_url.strip_prefix("http://").context("the interceptor needs an http:// gateway")?;
        let upstream = upstream.to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let armed = Arc::new(AtomicBool::new(false));
        let (tx, hits) = mpsc::unbounded_channel();
        let accept = {
            let armed = armed.clone();
            tokio::spawn(async move {
                while let Ok((conn, _)) = listener.accept().await {
                    let (upstream, armed, tx) = (upstream.clone(), armed.clone(), tx.clone());
                    tokio::spawn(async move {
                        let _ = Self::pipe(conn, &upstream, &armed, &tx).await;
                    });
                }
            })
        };
        Ok(Self { url, armed, hits, accept })
    }

    async fn pipe(
        client: TcpStream,
        upstream: &str,
        armed: &AtomicBool,
        hits: &mpsc::UnboundedSender<oneshot::Sender<()>>,
    ) -> std::io::Result<()> {
        const NEEDLE: &[u8] = b"POST /api/v1/manifests/";
        let server = TcpStream::connect(upstream).await?;
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        let down = tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            let mut window = std::mem::take(&mut tail);
            window.extend_from_slice(&buf[..n]);
            if window.windows(NEEDLE.len()).any(|w| w == NEEDLE) && armed.swap(false, Ordering::SeqCst) {
                let (resume, resumed) = oneshot::channel();
                if hits.send(resume).is_ok() {
                    let _ = resumed.await;
                }
            }
            server_write.write_all(&buf[..n]).await?;
            tail = window[window.len().saturating_sub(NEEDLE.len() - 1)..].to_vec();
        }
        server_write.shutdown().await?;
        let _ = down.await;
        Ok(())
    }

    /// Runs `cli` with `args` while armed; when its commit arrives, runs `meanwhile` (another
    /// client's change) before letting the commit through.
    async fn race<F>(&mut self, cli: &Cli, args: &[&str], meanwhile: F) -> anyhow::Result<Out>
    where
        F: Future<Output = anyhow::Result<()>>,
    {
        self.armed.store(true, Ordering::SeqCst);
        let hits = &mut self.hits;
        let interfere = async move {
            let resume = tokio::time::timeout(Duration::from_secs(60), hits.recv())
                .await
                .context("the CLI sent no manifest commit within 60 s")?
                .context("the interceptor stopped")?;
            let done = meanwhile.await;
            let _ = resume.send(());
            done
        };
        let (out, interfered) = tokio::join!(cli.run(args), interfere);
        self.armed.store(false, Ordering::SeqCst);
        let out = out?;
        interfered.with_context(|| format!("interfering with {out}"))?;
        Ok(out)
    }
}

backend_test!(stale_base_conflict_is_reported, |gw| async move {
    gw.create_user("alice", None).await?;
    let mut proxy = CommitInterceptor::start(&gw.url).await?;
    let cli = Cli::new()?;
    cli.login(&proxy.url, "alice", &user_password("alice")).await?;
    let api = gw.api().with_token(cli.token()?);

    let local = cli.write("notes.txt", b"first\n")?;
    let v = cli.json(&["put", s(&local), "/notes.txt"]).await?;
    let first = put_summary(&v)?.2;

    // Someone else saves while our upload (based on `first`) runs: refused, theirs kept.
    std::fs::write(&local, b"my edit\n")?;
    let out = proxy
        .race(&cli, &["put", s(&local), "/notes.txt"], async {
            api.put_file("/notes.txt", "their edit\n").await?.check(200)?;
            Ok(())
        })
        .await?;
    out.failed(&[&format!("`/notes.txt` changed on the server since version {first}"), "--force"])?;
    ensure!(api.get_file("/notes.txt").await?.check(200)?.body == b"their edit\n"[..], "the other edit was lost");
    let versions = cli.json(&["versions", "/notes.txt"]).await?;
    ensure!(versions.as_array().map(Vec::len) == Some(2), "a refused commit added a version: {versions}");

    // --force in the same race: ours wins.
    let out = proxy
        .race(&cli, &["put", "--force", s(&local), "/notes.txt"], async {
            api.put_file("/notes.txt", "their second edit\n").await?.check(200)?;
            Ok(())
        })
        .await?;
    out.ok()?;
    ensure!(api.get_file("/notes.txt").await?.check(200)?.body == b"my edit\n"[..], "--force did not overwrite");

    // A file created by someone else while we upload a new one.
    let fresh = cli.write("fresh.txt", b"mine\n")?;
    let out = proxy
        .race(&cli, &["put", s(&fresh), "/fresh.txt"], async {
            api.put_file("/fresh.txt", "theirs\n").await?.check(201)?;
            Ok(())
        })
        .await?;
    out.failed(&["`/fresh.txt` was created on the server while you uploaded", "--force"])?;
    ensure!(api.get_file("/fresh.txt").await?.check(200)?.body == b"theirs\n"[..], "the other file was replaced");
    Ok(())
});

backend_test!(changed_on_server_force_and_overwrite, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let api = gw.api().with_token(cli.token()?);
    let local = cli.write("notes.txt", b"local version one\n")?;
    cli.run(&["put", s(&local), "/notes.txt"]).await?.ok()?;

    // Another client changes the file.
    api.put_file("/notes.txt", "changed by another client\n").await?.check(200)?;
    // `put` bases on what the server has now, so the local copy wins, as a new version.
    let v = cli.json(&["put", s(&local), "/notes.txt"]).await?;
    ensure!(v["entry"]["size"].as_u64() == Some(18), "{v}");
    ensure!(api.get_file("/notes.txt").await?.check(200)?.body == b"local version one\n"[..], "local copy not stored");
    let versions = cli.json(&["versions", "/notes.txt"]).await?;
    ensure!(versions.as_array().map(Vec::len) == Some(3), "expected 3 versions: {versions}");
    // The other client's edit is kept as a version.
    let other = versions.as_array().and_then(|l| l.get(1)).and_then(|x| x["version"].as_i64()).context("v2")?;
    let r = api.get(&format!("/api/v1/files/notes.txt?version={other}")).await?;
    ensure!(r.check(200)?.body == b"changed by another client\n"[..], "{r}");

    // --force overwrites whatever is there.
    api.put_file("/notes.txt", "changed again\n").await?.check(200)?;
    std::fs::write(&local, b"forced\n")?;
    cli.run(&["put", "--force", s(&local), "/notes.txt"]).await?.ok()?;
    ensure!(api.get_file("/notes.txt").await?.check(200)?.body == b"forced\n"[..], "--force did not overwrite");

    // mv/cp onto an existing file need --overwrite.
    api.put_file("/other.txt", "other\n").await?.check(201)?;
    cli.run(&["mv", "/notes.txt", "/other.txt"]).await?.failed(&["cannot move", "--overwrite"])?;
    ensure!(api.get_file("/other.txt").await?.check(200)?.body == b"other\n"[..], "a refused mv changed the target");
    api.stat("/notes.txt").await?.check(200)?;
    cli.run(&["cp", "/notes.txt", "/other.txt"]).await?.failed(&["cannot copy", "--overwrite"])?;
    let out = cli.run(&["mv", "--overwrite", "/notes.txt", "/other.txt"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("moved /notes.txt → /other.txt"), "{out}");
    ensure!(api.get_file("/other.txt").await?.check(200)?.body == b"forced\n"[..], "mv --overwrite");
    api.stat("/notes.txt").await?.check(404)?;

    // `put` onto an existing directory stores the file inside it.
    cli.run(&["mkdir", "/d"]).await?.ok()?;
    let out = cli.run(&["put", s(&local), "/d"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("/d/notes.txt"), "{out}");
    Ok(())
});

backend_test!(mv_cp_mkdir_rm_trash, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let api = gw.api().with_token(cli.token()?);
    let content = data::bytes("cli-trash", 300_000);
    let local = cli.write("f.bin", &content)?;

    cli.run(&["mkdir", "/a/b"]).await?.ok()?;
    ensure!(ls_json(&cli, "/a").await? == vec![("b".to_string(), 0)], "mkdir -p");
    cli.run(&["mkdir", "/a/b"]).await?.ok().context("mkdir of an existing dir is fine")?;
    cli.run(&["put", s(&local), "/a/b/f.bin"]).await?.ok()?;
    cli.run(&["mkdir", "/a/b/f.bin"]).await?.failed(&["cannot create"])?;

    let out = cli.run(&["mv", "/a/b/f.bin", "/a/g.bin"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("moved /a/b/f.bin → /a/g.bin"), "{out}");
    let out = cli.run(&["cp", "/a/g.bin", "/a/h.bin"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("copied /a/g.bin → /a/h.bin"), "{out}");
    // Into an existing directory.
    cli.run(&["mv", "/a/h.bin", "/a/b"]).await?.ok()?;
    let names: Vec<String> = ls_json(&cli, "/a").await?.into_iter().map(|(n, _)| n).collect();
    ensure!(names == ["b", "g.bin"], "{names:?}");
    ensure!(ls_json(&cli, "/a/b").await? == vec![("h.bin".to_string(), content.len() as u64)], "mv into dir");
    let out = cli.run(&["get", "/a/b/h.bin", "-"]).await?;
    ensure!(out.ok()?.stdout == content, "copy content differs");
    // A rename of a directory.
    cli.run(&["mv", "/a/b", "/a/c"]).await?.ok()?;
    api.stat("/a/c/h.bin").await?.check(200).context("after renaming /a/b to /a/c")?;

    // rm → trash → restore.
    let out = cli.run(&["rm", "/a/g.bin"]).await?;
    out.ok()?;
    ensure!(
        out.stdout().contains("moved /a/g.bin to the trash") && out.stdout().contains("nimbus trash restore"),
        "{out}"
    );
    api.stat("/a/g.bin").await?.check(404)?;
    let trash = cli.json(&["trash"]).await?;
    let items = trash.as_array().with_context(|| format!("trash --json is not an array: {trash}"))?;
    let item =
        items.iter().find(|t| t["original_path"] == "/a/g.bin").with_context(|| format!("not in trash: {trash}"))?;
    let id = item["id"].as_i64().context("trash id")?;
    ensure!(out.stdout().contains(&format!("nimbus trash restore {id}")), "rm names the wrong id: {out}");
    let out = cli.run(&["trash"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("/a/g.bin"), "{out}");
    let out = cli.run(&["trash", "restore", &id.to_string()]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("restored /a/g.bin"), "{out}");
    let out = cli.run(&["get", "/a/g.bin", "-"]).await?;
    ensure!(out.ok()?.stdout == content, "restored content differs");
    cli.run(&["trash", "restore", &id.to_string()]).await?.failed(&["no item"])?;

    // Restore onto a taken path: a clear message with the way out.
    let out = cli.run(&["--json", "rm", "/a/g.bin"]).await?;
    let id = out.ok()?.json()?[0]["trash_id"].as_i64().with_context(|| format!("rm --json trash_id: {out}"))?;
    api.put_file("/a/g.bin", "taken").await?.check(201)?;
    cli.run(&["trash", "restore", &id.to_string()]).await?.failed(&["cannot restore", "--to"])?;
    cli.run(&["trash", "restore", &id.to_string(), "--to", "/a/g2.bin"]).await?.ok()?;
    ensure!(api.get_file("/a/g2.bin").await?.check(200)?.body == content, "restore --to");

    // Purge: without --yes and without a terminal it refuses; with --yes the space shrinks.
    cli.run(&["rm", "/a/g2.bin", "/a/g.bin"]).await?.ok()?;
    let before = used_bytes(&cli).await?;
    cli.run(&["trash", "purge"]).await?.failed(&["--yes"])?;
    ensure!(cli.json(&["trash"]).await?.as_array().map(Vec::len) == Some(2), "a refused purge deleted something");
    let out = cli.run(&["trash", "purge", "--yes"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("emptied the trash"), "{out}");
    ensure!(cli.json(&["trash"]).await? == serde_json::json!([]), "the trash is not empty after purge");
    let out = cli.run(&["trash"]).await?;
    ensure!(out.ok()?.stdout().contains("The trash is empty."), "{out}");
    let after = used_bytes(&cli).await?;
    let purged = content.len() as u64 + 5;
    ensure!(
        before.checked_sub(after) == Some(purged),
        "usage should drop by the {purged} purged bytes: before {before}, after {after}"
    );
    ensure!(after == content.len() as u64, "only /a/c/h.bin should count: {after}");

    // Directories: a copy counts its files again; deleting and purging the tree frees it all.
    cli.run(&["cp", "/a/c", "/a/d"]).await?.ok()?;
    ensure!(ls_json(&cli, "/a/d").await? == vec![("h.bin".to_string(), content.len() as u64)], "cp of a dir");
    ensure!(used_bytes(&cli).await? == 2 * content.len() as u64, "a copied tree should count twice");
    cli.run(&["rm", "/a"]).await?.ok()?;
    let trash = cli.json(&["trash"]).await?;
    let id = trash[0]["id"].as_i64().with_context(|| format!("no trash item for /a: {trash}"))?;
    ensure!(trash[0]["original_path"] == "/a" && trash[0]["kind"] == "dir", "{trash}");
    ensure!(ls_json(&cli, "/").await?.is_empty(), "/a still listed after rm");
    let out = cli.run(&["trash", "purge", &id.to_string()]).await?;
    ensure!(out.ok()?.stdout().contains(&format!("deleted item {id} from the trash for good")), "{out}");
    ensure!(used_bytes(&cli).await? == 0, "purging the deleted tree should free everything");
    Ok(())
});

backend_test!(quota_refuses_big_put, |gw| async move {
    let admin = Cli::new()?;
    admin.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
    let out = admin.run(&["admin", "user-add", "dave", "--quota", "1MiB"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("quota 1.0 MiB"), "{out}");
    let password = generated_password(&out)?;

    let dave = Cli::new()?;
    dave.login(&gw.url, "dave", &password).await?;
    let out = dave.run(&["whoami"]).await?;
    ensure!(out.ok()?.stdout().contains("of 1.0 MiB"), "{out}");

    let local = dave.write("big.bin", &data::bytes("cli-quota", 3 * MIB))?;
    let out = dave.run(&["put", s(&local)]).await?;
    out.failed(&["quota"])?;
    ensure!(out.stdout.is_empty(), "{out}");
    ensure!(ls_json(&dave, "/").await?.is_empty(), "a refused upload is listed");
    let out = dave.run(&["ls"]).await?;
    ensure!(out.ok()?.stdout.is_empty(), "{out}");
    ensure!(used_bytes(&dave).await? == 0, "a refused upload is charged");

    // What fits is accepted.
    let small = dave.write("small.bin", &data::bytes("cli-quota-small", 512 * 1024))?;
    dave.run(&["put", s(&small)]).await?.ok()?;
    ensure!(used_bytes(&dave).await? == 512 * 1024, "usage after a small upload");
    // The quota counts the space, not one file: another 600 KiB does not fit.
    let second = dave.write("second.bin", &data::bytes("cli-quota-2", 600 * 1024))?;
    dave.run(&["put", s(&second)]).await?.failed(&["quota"])?;
    Ok(())
});

/// The password `nimbus admin user-add` printed (`password: ...`).
fn generated_password(out: &Out) -> anyhow::Result<String> {
    let text = out.stdout();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("password: "))
        .with_context(|| format!("no generated password printed: {out}"))?;
    ensure!(line.len() >= 12, "a short generated password: {out}");
    ensure!(text.contains("shown only this once"), "{out}");
    Ok(line.trim().to_string())
}

backend_test!(admin_commands, |gw| async move {
    let admin = Cli::new()?;
    admin.login(&gw.url, "admin", ADMIN_PASSWORD).await?;

    let out = admin.run(&["admin", "user-add", "carol"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("created user carol"), "{out}");
    let password = generated_password(&out)?;
    admin.run(&["admin", "user-add", "CAROL"]).await?.failed(&["already exists"])?;
    admin.run(&["admin", "user-add", "bad name"]).await?.failed(&["cannot be a username"])?;
    admin.run(&["admin", "user-add", "erin", "--quota", "lots"]).await?.failed(&["not a size"])?;

    let out = admin.run(&["admin", "users"]).await?;
    out.ok()?;
    let row = out.stdout().lines().find(|l| l.ends_with(" carol")).map(str::to_string);
    let row = row.with_context(|| format!("carol not listed: {out}"))?;
    ensure!(row.contains("active") && row.contains("user"), "{row}");
    ensure!(!out.stdout().contains(&password), "the password is listed: {out}");
    let users = admin.json(&["admin", "users"]).await?;
    let carol = users
        .as_array()
        .and_then(|l| l.iter().find(|u| u["username"] == "carol"))
        .with_context(|| format!("carol missing from users --json: {users}"))?;
    ensure!(carol["disabled"] == false, "{carol}");

    // Carol logs in with the generated password; she is not an administrator.
    let carol = Cli::new()?;
    carol.login(&gw.url, "carol", &password).await?;
    let local = carol.write("c.txt", b"carol's file\n")?;
    carol.run(&["put", s(&local)]).await?.ok()?;
    carol.run(&["admin", "users"]).await?.failed(&["not an administrator"])?;
    carol.run(&["admin", "user-add", "mallory"]).await?.failed(&["not an administrator"])?;

    // Disabled: her session stops working, with a message saying to log in again.
    let out = admin.run(&["admin", "user-set", "carol", "--disable"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("disabled") && out.stdout().contains("signed out"), "{out}");
    carol.run(&["whoami"]).await?.failed(&["expired or was revoked", "nimbus login"])?;
    carol.run(&["ls"]).await?.failed(&["nimbus login"])?;
    carol.login_raw(&gw.url, "carol", &password).await?.failed(&["wrong username or password", "disabled"])?;
    // Enabled again: she can log in.
    admin.run(&["admin", "user-set", "carol", "--enable", "--quota", "10MiB"]).await?.ok()?;
    carol.login(&gw.url, "carol", &password).await?;
    let me = carol.json(&["whoami"]).await?;
    ensure!(me["quota_bytes"].as_u64() == Some(10 * MIB as u64), "{me}");
    admin.run(&["admin", "user-set", "carol"]).await?.failed(&["nothing to change"])?;
    admin.run(&["admin", "user-set", "nosuchuser", "--disable"]).await?.failed(&["no user"])?;

    // Audit log: newest first, shows the account changes.
    let audit = admin.json(&["admin", "audit", "--limit", "100"]).await?;
    let text = audit.to_string();
    ensure!(text.contains("carol"), "the audit log does not mention carol: {audit}");
    admin.run(&["admin", "audit"]).await?.ok()?;

    // Delete: needs --yes; then she is gone and her session too.
    admin.run(&["admin", "user-del", "carol"]).await?.failed(&["--yes"])?;
    let out = admin.run(&["admin", "user-del", "carol", "--yes"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains("deleted user carol"), "{out}");
    let out = admin.run(&["admin", "users"]).await?;
    ensure!(!out.ok()?.stdout().contains("carol"), "carol still listed: {out}");
    carol.run(&["whoami"]).await?.failed(&["nimbus login"])?;
    admin.run(&["admin", "user-del", "carol", "--yes"]).await?.failed(&["no user"])?;
    Ok(())
});

backend_test!(logout_revokes_token, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let token = cli.token()?;
    let api = gw.api().with_token(token.clone());
    api.get("/api/v1/me").await?.check(200)?;

    let out = cli.run(&["logout"]).await?;
    out.ok()?;
    ensure!(out.stdout().contains(&format!("Logged out of {}", gw.url)), "{out}");
    ensure!(!cli.session_file().exists(), "the session file is still there after logout");
    api.get("/api/v1/me").await?.check_error(401, "unauthorized")?;
    cli.run(&["whoami"]).await?.failed(&["not logged in"])?;
    let out = cli.run(&["logout"]).await?;
    ensure!(out.ok()?.stdout().contains("Not logged in."), "{out}");

    // Logging in again replaces (and revokes) the previous session's token.
    cli.login(&gw.url, "alice", &user_password("alice")).await?;
    let first = cli.token()?;
    cli.login(&gw.url, "alice", &user_password("alice")).await?;
    ensure!(cli.token()? != first, "a new login should save a new token");
    gw.api().with_token(first).get("/api/v1/me").await?.check(401)?;
    let v = cli.json(&["logout"]).await?;
    ensure!(v["revoked"] == true, "{v}");
    Ok(())
});

backend_test!(bad_input_messages, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let local = cli.write("x", b"x\n")?;

    let out = cli.run(&["put", s(&local), "/bad:name"]).await?;
    out.failed(&["not a valid nimbus path", "`:`", "does not allow"])?;
    cli.run(&["put", s(&local), "/a/../b"]).await?.failed(&["not a valid nimbus path"])?;
    cli.run(&["mkdir", "/CON"]).await?.failed(&["reserved"])?;
    cli.run(&["put", s(&cli.work().join("no-such-file")), "/y"]).await?.failed(&["cannot read"])?;
    cli.run(&["put", s(&cli.work()), "/y"]).await?.failed(&["is a directory"])?;
    ensure!(ls_json(&cli, "/").await?.is_empty(), "refused commands created something");

    cli.run(&["ls", "/nonexistent"]).await?.failed(&["/nonexistent", "does not exist"])?;
    cli.run(&["get", "/nonexistent", "-"]).await?.failed(&["does not exist"])?;
    cli.run(&["get", "/nonexistent", s(&cli.work().join("out"))]).await?.failed(&["does not exist"])?;
    ensure!(!cli.work().join("out").exists(), "a failed get left a file");
    cli.run(&["versions", "/nonexistent"]).await?.failed(&["does not exist"])?;
    cli.run(&["rm", "/nonexistent"]).await?.failed(&["does not exist"])?;
    cli.run(&["mv", "/nonexistent", "/z"]).await?.failed(&["cannot move"])?;
    cli.run(&["trash", "restore", "424242"]).await?.failed(&["no item 424242"])?;
    cli.run(&["trash", "purge", "424242"]).await?.failed(&["no item 424242"])?;
    cli.run(&["rm", "/"]).await?.failed(&["root"])?;

    cli.run(&["mkdir", "/dir"]).await?.ok()?;
    cli.run(&["get", "/dir", "-"]).await?.failed(&["is a directory"])?;
    cli.run(&["versions", "/dir"]).await?.failed(&["is a directory"])?;
    // `ls FILE` shows the file, like ls(1).
    cli.run(&["put", s(&local), "/f.txt"]).await?.ok()?;
    let out = cli.run(&["ls", "/f.txt"]).await?;
    ensure!(out.ok()?.stdout() == "f.txt\n", "{out}");

    // Usage errors (clap): exit code 2.
    let out = cli.run(&["rm"]).await?;
    ensure!(out.status.code() == Some(2), "{out}");
    let out = cli.run(&["no-such-command"]).await?;
    ensure!(out.status.code() == Some(2), "{out}");
    // A damaged session file: a message that says to log in again.
    std::fs::write(cli.session_file(), b"{not json")?;
    cli.run(&["ls"]).await?.failed(&["damaged", "nimbus login"])?;
    Ok(())
});

// A trailing `/` names a folder, as in POSIX (`rm file/`: "Not a directory"): on a file every
// command that takes a remote path refuses in words and changes nothing; on a folder it works.
backend_test!(trailing_slash_names_a_folder, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    gw.create_user("bob", None).await?;
    let api = gw.api().with_token(cli.token()?);
    let local = cli.write("y.txt", b"why\n")?;
    cli.run(&["put", s(&local), "/a/y.txt"]).await?.ok()?;
    cli.run(&["mkdir", "/a/d"]).await?.ok()?;
    let out_file = cli.work().join("out.txt");

    let refused: [&[&str]; 12] = [
        &["rm", "/a/y.txt/"],
        &["get", "/a/y.txt/", "-"],
        &["get", "/a/y.txt/", s(&out_file)],
        &["ls", "/a/y.txt/"],
        &["mv", "/a/y.txt/", "/a/z.txt"],
        &["cp", "/a/y.txt/", "/a/z.txt"],
        &["mv", "/a/d", "/a/y.txt/"],
        &["put", s(&local), "/a/y.txt/"],
        &["versions", "/a/y.txt/"],
        &["versions", "/a/y.txt/", "--restore", "1"],
        &["share", "add", "/a/y.txt/", "bob"],
        &["link", "create", "/a/y.txt/"],
    ];
    for args in refused {
        cli.run(args).await?.failed(&["/a/y.txt/", "not a directory", "is a file"])?;
    }
    cli.run(&["cp", "/a/d", "/a/y.txt/"]).await?.failed(&["cannot copy into `/a/y.txt/`", "not a directory"])?;
    ensure!(!out_file.exists(), "a refused get left a file");

    // Nothing changed: the file and its one version, no copy, no share, no link, an empty trash.
    let r = api.get_file("/a/y.txt").await?;
    ensure!(r.check(200)?.body.as_ref() == b"why\n", "the file changed");
    let versions = cli.json(&["versions", "/a/y.txt"]).await?;
    ensure!(versions.as_array().map(Vec::len) == Some(1), "a refused command made a version: {versions}");
    ensure!(cli.json(&["share", "ls"]).await?["shares"] == serde_json::json!([]), "a share was made");
    ensure!(cli.json(&["link", "ls"]).await?["links"] == serde_json::json!([]), "a link was made");
    ensure!(cli.json(&["trash"]).await? == serde_json::json!([]), "a refused rm moved something to the trash");
    ensure!(ls_json(&cli, "/a").await? == vec![("d".to_string(), 0), ("y.txt".to_string(), 4)], "/a changed");

    // Without the slash the file is meant; with it, a folder works.
    let out = cli.run(&["ls", "/a/y.txt"]).await?;
    ensure!(out.ok()?.stdout() == "y.txt\n", "{out}");
    let out = cli.run(&["ls", "/a/"]).await?;
    ensure!(out.ok()?.stdout() == "d/\ny.txt\n", "{out}");
    cli.run(&["mv", "/a/y.txt", "/a/d/"]).await?.ok()?;
    api.stat("/a/d/y.txt").await?.check(200)?;
    cli.run(&["rm", "/a/d/"]).await?.ok()?;
    api.stat("/a/d").await?.check(404)?;
    Ok(())
});

// `nimbus rm a b c` tries every path, as rm(1): each one that fails gets its own error line
// saying what to do, the others go to the trash, and the exit code is 1 at the end (it stopped
// at the first failure, leaving the paths after it).
backend_test!(rm_tries_every_path, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let api = gw.api().with_token(cli.token()?);
    for p in ["/a/one.txt", "/a/two.txt", "/a/keep.txt", "/b.txt"] {
        api.put_file(p, "x").await?.check(201)?;
    }

    let out = cli.run(&["rm", "/a/one.txt", "/a/missing.txt", "/a/keep.txt/", "/", "/a/two.txt"]).await?;
    out.failed(&[
        "cannot remove `/a/missing.txt`: it does not exist",
        "`nimbus ls /a` lists what is there",
        "cannot remove `/a/keep.txt/`: not a directory",
        "without the trailing `/` it names the file",
        "refusing to delete the root directory; delete what is inside it instead",
    ])?;
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    ensure!(errors.len() == 3, "one error line per failed path: {out}");
    let stdout = out.stdout();
    ensure!(
        stdout.contains("moved /a/one.txt to the trash") && stdout.contains("moved /a/two.txt to the trash"),
        "{out}"
    );
    ensure!(ls_json(&cli, "/a").await? == vec![("keep.txt".to_string(), 1)], "only the refused file stays");
    let trash = cli.json(&["trash"]).await?;
    let mut gone: Vec<&str> =
        trash.as_array().into_iter().flatten().filter_map(|t| t["original_path"].as_str()).collect();
    gone.sort_unstable();
    ensure!(gone == ["/a/one.txt", "/a/two.txt"], "{trash}");

    // --json: what was removed on stdout, each failure on stderr, exit code 1.
    let out = cli.run(&["--json", "rm", "/nope", "/b.txt"]).await?;
    out.failed(&["cannot remove `/nope`: it does not exist", "`nimbus ls /`"])?;
    let removed = out.json()?;
    ensure!(removed.as_array().map(Vec::len) == Some(1) && removed[0]["path"] == "/b.txt", "{out}");
    api.stat("/b.txt").await?.check(404)?;
    // All removed: exit code 0, nothing on stderr.
    let out = cli.run(&["rm", "/a/keep.txt", "/a"]).await?;
    ensure!(out.ok()?.stderr.is_empty(), "{out}");
    Ok(())
});

// `nimbus trash restore ID --to DIR/` treats `DIR/` as `nimbus mv SRC DIR/` does: into the
// folder, under the item's name; a file named so is refused ("not a directory") and nothing is
// restored (the slash was dropped: `--to /d/` tried to take the folder's own path).
backend_test!(trash_restore_into_a_folder, |gw| async move {
    let cli = Cli::for_new_user(&gw, "alice").await?;
    let api = gw.api().with_token(cli.token()?);
    api.put_file("/a/y.txt", "why").await?.check(201)?;
    api.put_file("/f.txt", "file").await?.check(201)?;
    api.mkdir("/d").await?.check(201)?;
    let rm = |path: &'static str| {
        let cli = &cli;
        async move {
            let v = cli.json(&["rm", path]).await?;
            v[0]["trash_id"].as_i64().map(|id| id.to_string()).with_context(|| format!("rm --json trash_id: {v}"))
        }
    };

    let id = rm("/a/y.txt").await?;
    cli.run(&["trash", "restore", &id, "--to", "/f.txt/"]).await?.failed(&[
        "cannot restore into `/f.txt/`",
        "not a directory",
        "is a file",
    ])?;
    let trash = cli.json(&["trash"]).await?;
    ensure!(trash.as_array().map(Vec::len) == Some(1), "a refused restore took the item: {trash}");
    ensure!(api.get_file("/f.txt").await?.check(200)?.body.as_ref() == b"file", "/f.txt changed");
    ensure!(ls_json(&cli, "/").await? == vec![("a".to_string(), 0), ("d".to_string(), 0), ("f.txt".to_string(), 4)]);

    // Into a folder, under the item's name.
    let out = cli.run(&["trash", "restore", &id, "--to", "/d/"]).await?;
    ensure!(out.ok()?.stdout().contains("restored /d/y.txt"), "{out}");
    ensure!(api.get_file("/d/y.txt").await?.check(200)?.body.as_ref() == b"why");
    // Into a folder not there yet, as `nimbus mv` makes it; and into `/`.
    let id = rm("/d/y.txt").await?;
    let out = cli.run(&["trash", "restore", &id, "--to", "/new/"]).await?;
    ensure!(out.ok()?.stdout().contains("restored /new/y.txt"), "{out}");
    let id = rm("/new/y.txt").await?;
    let out = cli.run(&["trash", "restore", &id, "--to", "/"]).await?;
    ensure!(out.ok()?.stdout().contains("restored /y.txt"), "{out}");
    // Without the slash: the path the item takes.
    let id = rm("/y.txt").await?;
    let out = cli.run(&["trash", "restore", &id, "--to", "/d/z.txt"]).await?;
    ensure!(out.ok()?.stdout().contains("restored /d/z.txt"), "{out}");
    ensure!(cli.json(&["trash"]).await? == serde_json::json!([]), "the trash is not empty");
    // An unknown item with a folder: the usual message.
    cli.run(&["trash", "restore", "424242", "--to", "/d/"]).await?.failed(&["no item 424242"])?;
    Ok(())
});

// `nimbus admin group-*` and `nimbus share add --group`: a group made with a member, a folder
// shared with it that the member gets, a member taken out losing it, the group deleted; the
// refusals in words.
backend_test!(group_commands, |gw| async move {
    let admin = Cli::new()?;
    admin.login(&gw.url, "admin", ADMIN_PASSWORD).await?;
    let alice = Cli::for_new_user(&gw, "alice").await?;
    let bob = Cli::for_new_user(&gw, "bob").await?;
    let carol = Cli::for_new_user(&gw, "carol").await?;
    let local = alice.write("plan.txt", b"the plan")?;
    alice.run(&["put", s(&local), "/Plan/notes.txt"]).await?.ok()?;

    let out = admin.run(&["admin", "group-add", "team", "--member", "bob"]).await?;
    ensure!(out.ok()?.stdout().contains("team") && out.stdout().contains("bob"), "{out}");
    admin.run(&["admin", "group-add", "TEAM"]).await?.failed(&["already exists"])?;
    admin.run(&["admin", "group-add", "a b"]).await?.failed(&["cannot be a group name"])?;
    alice.run(&["admin", "groups"]).await?.failed(&["not an administrator"])?;

    let out = alice.run(&["share", "add", "/Plan", "--group", "team"]).await?;
    ensure!(out.ok()?.stdout().contains("Shared /Plan with group team (read)"), "{out}");
    let mine = alice.json(&["share", "ls"]).await?;
    ensure!(mine["shares"][0]["group"] == "team" && mine["shares"][0]["username"].is_null(), "{mine}");
    let out = bob.run(&["share", "incoming"]).await?;
    ensure!(out.ok()?.stdout().contains("alice (group team)"), "{out}");
    let got = bob.run(&["get", "/Shared with me/Plan/notes.txt", "-"]).await?;
    ensure!(got.ok()?.stdout == b"the plan", "{got}");
    let o = alice.run(&["share", "add", "/Plan", "bob", "--group", "team"]).await?;
    ensure!(o.status.code() == Some(2) && o.stderr.contains("--group"), "{o}");

    let out =
        admin.run(&["admin", "group-set", "team", "--add", "carol", "--remove", "bob", "--rename", "crew"]).await?;
    ensure!(
        out.ok()?.stdout().contains("crew") && out.stdout().contains("carol") && !out.stdout().contains("bob"),
        "{out}"
    );
    bob.run(&["get", "/Shared with me/Plan/notes.txt", "-"]).await?.failed(&[])?;
    ensure!(carol.run(&["get", "/Shared with me/Plan/notes.txt", "-"]).await?.ok()?.stdout == b"the plan");
    let groups = admin.json(&["admin", "groups"]).await?;
    ensure!(
        groups["groups"][0]["name"] == "crew" && groups["groups"][0]["members"] == serde_json::json!(["carol"]),
        "{groups}"
    );
    let out = admin.run(&["admin", "group-del", "crew"]).await?;
    ensure!(out.ok()?.stdout().contains("deleted group crew"), "{out}");
    carol.run(&["get", "/Shared with me/Plan/notes.txt", "-"]).await?.failed(&[])?;
    admin.run(&["admin", "group-del", "crew"]).await?.failed(&["no group `crew`"])?;
    Ok(())
});

// `nimbus share` and `nimbus link`: add, list (both ways), change, leave and revoke a share;
// create (view with password, expiry and limit; a file drop), list, change and revoke links;
// the refusals in words.
backend_test!(share_and_link_commands, |gw| async move {
    let alice = Cli::for_new_user(&gw, "alice").await?;
    let bob = Cli::for_new_user(&gw, "bob").await?;
    let local = alice.write("plan.txt", b"the plan")?;
    alice.run(&["put", s(&local), "/Plan/notes.txt"]).await?.ok()?;
    alice.run(&["mkdir", "/Inbox"]).await?.ok()?;

    // Shares.
    let out = alice.run(&["share", "add", "/Plan", "bob", "--permission", "write"]).await?;
    ensure!(out.ok()?.stdout().contains("Shared /Plan with bob (write)"), "{out}");
    let mine = alice.json(&["share", "ls"]).await?;
    let id = mine["shares"][0]["id"].as_i64().context("share id")?;
    ensure!(mine["shares"][0]["path"] == "/Plan" && mine["shares"][0]["permission"] == "write", "{mine}");
    let out = alice.run(&["share", "ls"]).await?;
    ensure!(out.ok()?.stdout().contains("bob") && out.stdout().contains("/Plan"), "{out}");
    let out = bob.run(&["share", "incoming"]).await?;
    ensure!(out.ok()?.stdout().contains("/Shared with me/Plan") && out.stdout().contains("alice"), "{out}");
    let got = bob.run(&["get", "/Shared with me/Plan/notes.txt", "-"]).await?;
    ensure!(got.ok()?.stdout == b"the plan", "{got}");
    let out = alice.run(&["share", "set", &id.to_string(), "--permission", "read"]).await?;
    ensure!(out.ok()?.stdout().contains("is now read"), "{out}");
    let incoming = bob.json(&["share", "incoming"]).await?;
    ensure!(incoming["shares"][0]["permission"] == "read", "{incoming}");
    // Refusals, in words.
    alice.run(&["share", "add", "/Plan", "bob"]).await?.failed(&["already shared with bob"])?;
    alice.run(&["share", "add", "/Nope", "bob"]).await?.failed(&["/Nope", "not in your space"])?;
    alice.run(&["share", "add", "/Plan", "nobody-here"]).await?.failed(&["nobody-here"])?;
    let o = alice.run(&["share", "add", "/Plan", "bob", "--permission", "admin"]).await?;
    ensure!(o.status.code() == Some(2) && o.stderr.contains("admin"), "{o}");
    bob.run(&["share", "set", &id.to_string(), "--permission", "write"]).await?.failed(&["only its owner"])?;
    alice.run(&["share", "set", "999999", "--permission", "write"]).await?.failed(&["no share with id 999999"])?;
    // The recipient leaves it.
    bob.run(&["share", "rm", &id.to_string()]).await?.ok()?;
    ensure!(bob.json(&["share", "incoming"]).await?["shares"].as_array().is_some_and(|a| a.is_empty()));
    alice.run(&["share", "rm", &id.to_string()]).await?.failed(&["no share with id"])?;
    // Revoked by the owner.
    alice.run(&["share", "add", "/Plan/notes.txt", "bob"]).await?.ok()?;
    let id2 = alice.json(&["share", "ls"]).await?["shares"][0]["id"].as_i64().context("id")?;
    alice.run(&["share", "rm", &id2.to_string()]).await?.ok()?;
    bob.run(&["get", "/Shared with me/notes.txt", "-"]).await?.failed(&[])?;

    // Links: a view link with a password from a file, an expiry and a download limit.
    let pw = alice.write("pw.txt", b"correct horse\n")?;
    let out = alice
        .run(&[
            "link",
            "create",
            "/Plan/notes.txt",
            "--password-file",
            s(&pw),
            "--expires",
            "7d",
            "--max-downloads",
            "3",
        ])
        .await?;
    out.ok()?;
    let url = out.stdout().lines().next().unwrap_or("").to_string();
    ensure!(url.starts_with(&format!("{}/s/", gw.url)), "{out}");
    ensure!(out.stdout().contains("password") && out.stdout().contains("0 of 3 downloads"), "{out}");
    let http = reqwest::Client::new();
    let r = http.get(format!("{url}/download")).send().await?;
    ensure!(r.status() == 401, "without the password: {}", r.status());
    let r = http.get(format!("{url}/download")).header("x-nimbus-link-password", "correct horse").send().await?;
    ensure!(r.status() == 200 && r.bytes().await?.as_ref() == b"the plan", "with the password");
    let links = alice.json(&["link", "ls"]).await?;
    let link = &links["links"][0];
    let lid = link["id"].as_i64().context("link id")?;
    ensure!(link["has_password"] == true && link["max_downloads"] == 3 && link["downloads"] == 1, "{links}");
    ensure!(link["expires_at"].as_str().is_some(), "{links}");
    // Changes: no password, no limit, an expiry at a given time.
    let out = alice
        .run(&["link", "set", &lid.to_string(), "--no-password", "--no-limit", "--expires", "2099-01-01T00:00:00Z"])
        .await?;
    ensure!(out.ok()?.stdout().contains("expires 2099-01-01 00:00 UTC") && !out.stdout().contains("password"), "{out}");
    ensure!(http.get(format!("{url}/download")).send().await?.status() == 200, "the password is gone");
    alice.run(&["link", "set", &lid.to_string()]).await?.failed(&["nothing to change"])?;
    alice.run(&["link", "set", &lid.to_string(), "--expires", "tomorrow"]).await?.failed(&["tomorrow", "30m"])?;
    let empty = alice.write("empty.txt", b"\n")?;
    alice.run(&["link", "create", "/Plan", "--password-file", s(&empty)]).await?.failed(&["holds no password"])?;
    alice.run(&["link", "create", "/Nope"]).await?.failed(&[])?;
    alice.run(&["link", "create", "/Plan/notes.txt", "--mode", "upload"]).await?.failed(&["folder"])?;
    bob.run(&["link", "rm", &lid.to_string()]).await?.failed(&[&format!("no link with id {lid}")])?;
    // A file drop.
    let out = alice.run(&["link", "create", "/Inbox", "--mode", "upload"]).await?;
    out.ok()?;
    let drop_url = out.stdout().lines().next().unwrap_or("").to_string();
    let r = http.put(format!("{drop_url}/upload/from-visitor.txt")).body("hello").send().await?;
    ensure!(r.status() == 201, "upload: {}", r.status());
    let got = alice.run(&["get", "/Inbox/from-visitor.txt", "-"]).await?;
    ensure!(got.ok()?.stdout == b"hello", "{got}");
    // Revoked: 404 at once.
    let out = alice.run(&["link", "rm", &lid.to_string()]).await?;
    ensure!(out.ok()?.stdout().contains("revoked"), "{out}");
    ensure!(http.get(format!("{url}/download")).send().await?.status() == 404, "a revoked link");
    alice.run(&["link", "rm", &lid.to_string()]).await?.failed(&[&format!("no link with id {lid}")])?;
    Ok(())
});
