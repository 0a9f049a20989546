//! Operator tooling in tests: run `nimbus-gateway gc|fsck|migrate|...` beside a running gateway
//! and reach into its block store behind its back (delete or corrupt an object), as a failing
//! disk or a careless admin would. S3 stores are reached with rclone (a Debian package).

use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::gateway::Gateway;

/// What an operator command printed and how it exited.
#[derive(Debug)]
pub struct ToolRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl ToolRun {
    /// The JSON report on stdout (`--json`).
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_str(&self.stdout)
            .with_context(|| format!("not a JSON report: {}\nstderr: {}", self.stdout, self.stderr))
    }

    pub fn expect_code(&self, code: i32) -> anyhow::Result<&Self> {
        if self.code != code {
            bail!("exit code {} (expected {code})\nstdout: {}\nstderr: {}", self.code, self.stdout, self.stderr);
        }
        Ok(self)
    }
}

/// Runs `nimbus-gateway <subcommand> <args>` on the gateway's database and store.
pub async fn run_tool(gw: &Gateway, subcommand: &str, args: &[&str]) -> anyhow::Result<ToolRun> {
    run_tool_with(gw, subcommand, &[], args).await
}

/// [`run_tool`] with some of the gateway's flags given other values (see [`Gateway::tool_with`]).
pub async fn run_tool_with(
    gw: &Gateway,
    subcommand: &str,
    overrides: &[(&str, &str)],
    args: &[&str],
) -> anyhow::Result<ToolRun> {
    let out = gw
        .tool_with(subcommand, overrides)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .with_context(|| format!("cannot run nimbus-gateway {subcommand}"))?;
    Ok(ToolRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Where a gateway keeps one block's object.
pub enum BlockObject {
    File(PathBuf),
    /// An rclone remote path (`nimbus:BUCKET/KEY`) and the environment defining `nimbus:`.
    S3 {
        remote: String,
        env: Vec<(String, String)>,
    },
}

/// Environment variables, as pairs.
pub type EnvVars = Vec<(String, String)>;

/// An rclone remote for the gateway's bucket: `nimbus:BUCKET` and the environment defining
/// `nimbus:`; None for a local store.
pub fn s3_remote(gw: &Gateway) -> anyhow::Result<Option<(String, EnvVars)>> {
    let Some(endpoint) = gw.flag("--s3-endpoint") else { return Ok(None) };
    let bucket = gw.flag("--s3-bucket").context("no --s3-bucket")?;
    let (access, secret, region) = match (gw.minio(), gw.garage()) {
        (Some(_), _) => (crate::minio::ACCESS_KEY.to_string(), crate::minio::SECRET_KEY.to_string(), "us-east-1"),
        (None, Some(g)) => (g.access_key().to_string(), g.secret_key().to_string(), crate::garage::REGION),
        _ => bail!("an S3 gateway without a known store"),
    };
    let env = [
        ("TYPE", "s3".to_string()),
        ("PROVIDER", "Other".to_string()),
        ("ENDPOINT", endpoint),
        ("ACCESS_KEY_ID", access),
        ("SECRET_ACCESS_KEY", secret),
        ("REGION", region.to_string()),
        ("FORCE_PATH_STYLE", "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("RCLONE_CONFIG_NIMBUS_{k}"), v))
    .collect();
    Ok(Some((format!("nimbus:{bucket}"), env)))
}

/// The object of block `hash` of `space` in the gateway's store.
pub fn block_object(gw: &Gateway, space: i64, hash: &str) -> anyhow::Result<BlockObject> {
    store_object(gw, space, hash, "")
}

/// The outboard (piece tags) of block `hash` of `space` in the gateway's store: the block's
/// object name with `.tags`.
pub fn outboard_object(gw: &Gateway, space: i64, hash: &str) -> anyhow::Result<BlockObject> {
    store_object(gw, space, hash, ".tags")
}

fn store_object(gw: &Gateway, space: i64, hash: &str, suffix: &str) -> anyhow::Result<BlockObject> {
    let name = format!("{hash}{suffix}");
    let key = format!("spaces/{space}/blocks/{name}");
    match s3_remote(gw)? {
        Some((remote, env)) => Ok(BlockObject::S3 { remote: format!("{remote}/{key}"), env }),
        None => {
            let fan = hash.get(..2).context("short hash")?;
            Ok(BlockObject::File(
                gw.data_dir().join("blocks").join("spaces").join(space.to_string()).join("blocks").join(fan).join(name),
            ))
        }
    }
}

impl BlockObject {
    pub async fn delete(&self) -> anyhow::Result<()> {
        match self {
            BlockObject::File(p) => std::fs::remove_file(p).with_context(|| format!("cannot delete {}", p.display())),
            BlockObject::S3 { remote, env } => rclone(env, &["deletefile", remote], None).await,
        }
    }

    /// The object's bytes, or None if the store has no such object.
    pub async fn read(&self) -> anyhow::Result<Option<Vec<u8>>> {
        match self {
            BlockObject::File(p) => match std::fs::read(p) {
                Ok(d) => Ok(Some(d)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
            },
            BlockObject::S3 { remote, env } => {
                let (dir, name) = remote.rsplit_once('/').context("no key in the remote path")?;
                let listed = rclone_output(env, &["lsf", dir, "--include", name]).await?;
                if listed.iter().all(u8::is_ascii_whitespace) {
                    return Ok(None);
                }
                Ok(Some(rclone_output(env, &["cat", remote]).await?))
            }
        }
    }

    /// Replaces the object's bytes with `data`.
    pub async fn overwrite(&self, data: &[u8]) -> anyhow::Result<()> {
        match self {
            BlockObject::File(p) => {
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(p, data).with_context(|| format!("cannot write {}", p.display()))
            }
            BlockObject::S3 { remote, env } => rclone(env, &["rcat", remote], Some(data)).await,
        }
    }
}

/// Runs rclone with `env` and returns what it printed; fails on a nonzero exit.
async fn rclone_output(env: &[(String, String)], args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = Command::new("rclone")
        .env_remove("AWS_CA_BUNDLE")
        .args(args)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run rclone (apt-get install rclone)")?;
    if !out.status.success() {
        bail!("rclone {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(out.stdout)
}

/// Runs rclone with `env`, feeding `stdin`; fails on a nonzero exit.
pub async fn rclone(env: &[(String, String)], args: &[&str], stdin: Option<&[u8]>) -> anyhow::Result<()> {
    let mut cmd = Command::new("rclone");
    // A developer's AWS_CA_BUNDLE breaks rclone's plain-HTTP S3 client; only `env` counts.
    cmd.env_remove("AWS_CA_BUNDLE");
    cmd.args(args).envs(env.iter().cloned()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.spawn().context("cannot run rclone (apt-get install rclone)")?;
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(data).await?;
        drop(pipe);
    }
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!("rclone {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Adds entries to the top-level folder `folder` (it must exist) of `space`, directly in the
/// gateway's database and in one transaction: for a test that needs a very large folder fast
/// (through the API, 100,000 entries take minutes on a debug build). Each entry is what a
/// commit of an empty file or a mkdir writes: a node, and for a file a version of no blocks
/// (empty files change no usage). Nothing is journaled: change-feed readers do not see them.
/// `entries`: (name in NFC, is a folder).
pub async fn seed_folder(gw: &Gateway, space: i64, folder: &str, entries: &[(String, bool)]) -> anyhow::Result<()> {
    use nimbus_proto::names::name_key;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as i64;
    let block_size = nimbus_proto::DEFAULT_BLOCK_SIZE;
    // Shared by both engines once the entries are in `seed`.
    let parent = format!(
        "(SELECT id FROM nodes WHERE space_id = {space} AND trashed_at IS NULL AND name_key = '{}' \
         AND parent_id = (SELECT id FROM nodes WHERE space_id = {space} AND parent_id IS NULL))",
        name_key(folder).replace('\'', "''")
    );
    let insert_nodes = format!(
        "INSERT INTO nodes (space_id, parent_id, name, name_key, kind, size, created_at, modified_at) \
         SELECT {space}, {parent}, name, name_key, kind, 0, {now}, {now} FROM seed"
    );
    let insert_versions = format!(
        "INSERT INTO versions (node_id, space_id, size, block_size, device, created_at) \
         SELECT id, space_id, 0, {block_size}, 'seed', {now} FROM nodes \
         WHERE parent_id = {parent} AND kind = 'file' AND version_id IS NULL"
    );
    // A join, not a correlated subquery: the planner has no statistics for rows this
    // transaction wrote, and a subquery per row could scan `versions` for each.
    let link_versions = format!(
        "UPDATE nodes SET version_id = v.id FROM versions v \
         WHERE v.node_id = nodes.id AND nodes.parent_id = {parent} AND nodes.kind = 'file' AND nodes.version_id IS NULL"
    );
    let kind = |dir: bool| if dir { "dir" } else { "file" };
    match gw.database() {
        Some(db) => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(db.url()).await.context("connect to the gateway's database")?;
            let mut tx = conn.begin().await?;
            sqlx::query("CREATE TEMP TABLE seed (name TEXT, name_key TEXT, kind TEXT) ON COMMIT DROP")
                .execute(&mut *tx)
                .await?;
            let names: Vec<String> = entries.iter().map(|(n, _)| n.clone()).collect();
            let keys: Vec<String> = entries.iter().map(|(n, _)| name_key(n)).collect();
            let kinds: Vec<String> = entries.iter().map(|(_, d)| kind(*d).to_string()).collect();
            sqlx::query("INSERT INTO seed SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[])")
                .bind(names)
                .bind(keys)
                .bind(kinds)
                .execute(&mut *tx)
                .await?;
            for sql in [insert_nodes, insert_versions, link_versions] {
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            // Statistics as autovacuum would gather them after such growth: without them the
            // planner takes the grown tables for small ones (sequential scans per request).
            sqlx::query("ANALYZE nodes, versions").execute(&mut conn).await?;
        }
        None => {
            let mut script = String::from(
                ".bail on\n.timeout 30000\nBEGIN IMMEDIATE;\nCREATE TEMP TABLE seed (name TEXT, name_key TEXT, kind TEXT);\n",
            );
            for chunk in entries.chunks(500) {
                let rows: Vec<String> = chunk
                    .iter()
                    .map(|(n, d)| {
                        format!("('{}', '{}', '{}')", n.replace('\'', "''"), name_key(n).replace('\'', "''"), kind(*d))
                    })
                    .collect();
                script.push_str(&format!("INSERT INTO seed VALUES {};\n", rows.join(", ")));
            }
            for sql in [insert_nodes, insert_versions, link_versions] {
                script.push_str(&sql);
                script.push_str(";\n");
            }
            script.push_str("COMMIT;\n");
            let mut child = Command::new("sqlite3")
                .arg(gw.data_dir().join("nimbus.db"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run sqlite3 (apt-get install sqlite3)")?;
            let mut stdin = child.stdin.take().context("sqlite3 stdin")?;
            stdin.write_all(script.as_bytes()).await?;
            drop(stdin);
            let out = child.wait_with_output().await?;
            if !out.status.success() {
                bail!("sqlite3 seeding failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    Ok(())
}
