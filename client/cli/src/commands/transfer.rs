//! put and get: the block protocol with a progress bar.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nimbus_client::wire::EntryKind;
use nimbus_client::{GetOptions, Phase, Progress, RemotePath};
use serde_json::json;

use super::{Ctx, connect, refuse_file_as_dir, remote, stat_opt};
use crate::outln;
use crate::output::{human_bytes, print_json};

/// A byte progress bar on stderr, drawn only when stderr is a terminal.
struct Bar {
    pb: ProgressBar,
}

impl Bar {
    fn new() -> Self {
        let target =
            if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let pb = ProgressBar::with_draw_target(Some(0), target);
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>11} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}")
        {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.enable_steady_tick(Duration::from_millis(200));
        Self { pb }
    }

    fn callback(&self) -> impl Fn(Progress) + Send + Sync + 'static {
        let pb = self.pb.clone();
        move |p: Progress| {
            let msg = match p.phase {
                Phase::Hashing => "hashing",
                Phase::Uploading => "uploading",
                Phase::Downloading => "downloading",
            };
            if pb.message() != msg {
                pb.set_message(msg);
                pb.reset_eta();
            }
            pb.set_length(p.total);
            pb.set_position(p.done);
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.pb.finish_and_clear();
    }
}

/// Where `put LOCAL [REMOTE]` stores the file, and the entry there now (if any).
async fn put_target(
    client: &nimbus_client::Client,
    local: &Path,
    raw: Option<&str>,
) -> Result<(RemotePath, Option<nimbus_client::wire::Entry>)> {
    let name = local
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("`{}` has no usable file name; give the REMOTE path to store it at", local.display()))?;
    let into = |dir: &RemotePath| {
        dir.join(name)
            .map_err(|e| anyhow!("the file name `{name}` cannot be stored in Nimbus: {e}; give another name as REMOTE"))
    };
    let target = match raw {
        None => into(&RemotePath::root())?,
        Some(r) if r.ends_with('/') => {
            let dir = remote(r)?;
            // Before any block goes up: the commit would be refused anyway.
            refuse_file_as_dir(client, "upload into", r, &dir).await?;
            into(&dir)?
        }
        Some(r) => {
            let p = remote(r)?;
            match stat_opt(client, &p).await? {
                Some(e) if e.kind == EntryKind::Dir => into(&p)?,
                existing => return Ok((p, existing)),
            }
        }
    };
    let existing = stat_opt(client, &target).await?;
    Ok((target, existing))
}

pub async fn put(ctx: &Ctx, local: &Path, raw_remote: Option<&str>, force: bool) -> Result<()> {
    let meta = std::fs::metadata(local).with_context(|| format!("cannot read `{}`", local.display()))?;
    if meta.is_dir() {
        bail!("`{}` is a directory; `nimbus put` uploads one file at a time", local.display());
    }
    // Refused before connecting: a FIFO or device has no size to upload (and opening a FIFO
    // would wait for a writer).
    if !meta.is_file() {
        bail!("`{}` is not a regular file", local.display());
    }
    let (_, client) = connect()?;
    let (target, existing) = put_target(&client, local, raw_remote).await?;
    if existing.as_ref().is_some_and(|e| e.kind == EntryKind::Dir) {
        bail!("`{target}` is a directory on the server; give the path of a file inside it");
    }
    let base = existing.as_ref().and_then(|e| e.version);

    let bar = Bar::new();
    let result = client.upload_file(local, &target, base, force, &bar.callback()).await;
    drop(bar);
    let summary = match result {
        Ok(s) => s,
        Err(e) if e.is_stale_base() => match base {
            Some(v) => bail!(
                "`{target}` changed on the server since version {v} (someone saved a newer version while you uploaded); \
                 use --force to overwrite it, or `nimbus get {target}` first to see the changes"
            ),
            None => bail!("`{target}` was created on the server while you uploaded; use --force to overwrite it"),
        },
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("uploading `{}` to `{target}` failed", local.display())));
        }
    };
    if ctx.json {
        return print_json(&json!({
            "entry": summary.entry,
            "size": summary.size,
            "blocks": summary.blocks,
            "uploaded_blocks": summary.uploaded_blocks,
            "uploaded_bytes": summary.uploaded_bytes,
        }));
    }
    let version = summary.entry.version.map(|v| format!(" version {v}")).unwrap_or_default();
    outln!(
        "uploaded {} ({} of {} blocks new) → {}{version}",
        human_bytes(summary.size),
        summary.uploaded_blocks,
        summary.blocks,
        summary.entry.path
    );
    Ok(())
}

/// Where `get REMOTE [LOCAL]` writes: LOCAL, or inside it when it is a directory, or the
/// remote name in the current directory.
fn get_target(remote: &RemotePath, local: Option<&str>) -> Result<PathBuf> {
    let name = remote.name().ok_or_else(|| anyhow!("`/` is a directory; give the path of a file to download"))?;
    Ok(match local {
        None => PathBuf::from(name),
        Some(l) => {
            let p = PathBuf::from(l);
            if p.is_dir() || l.ends_with('/') || l.ends_with(std::path::MAIN_SEPARATOR) { p.join(name) } else { p }
        }
    })
}

pub async fn get(ctx: &Ctx, raw_remote: &str, local: Option<&str>) -> Result<()> {
    let (_, client) = connect()?;
    let path = remote(raw_remote)?;
    refuse_file_as_dir(&client, "download", raw_remote, &path).await?;
    let not_a_file = |e: nimbus_client::Error| -> anyhow::Error {
        if e.is_a_directory() {
            anyhow!("`{path}` is a directory; `nimbus get` downloads one file (`nimbus ls {path}` lists it)")
        } else if e.is_not_found() {
            anyhow!("`{path}` does not exist")
        } else {
            e.into()
        }
    };

    if local == Some("-") {
        let mut stdout = tokio::io::stdout();
        client.get_to(&path, &mut stdout, GetOptions::default()).await.map_err(not_a_file)?;
        return Ok(());
    }

    let target = get_target(&path, local)?;
    let bar = Bar::new();
    let result = client.download_file(&path, &target, &bar.callback()).await;
    drop(bar);
    let summary = result.map_err(not_a_file)?;
    if ctx.json {
        return print_json(&json!({
            "path": summary.path,
            "version": summary.version,
            "size": summary.size,
            "blocks": summary.blocks,
            "local": summary.local,
        }));
    }
    outln!("downloaded {} → {} (version {})", human_bytes(summary.size), summary.local.display(), summary.version);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_targets() -> Result<()> {
        let r = RemotePath::parse("/docs/a.pdf")?;
        assert_eq!(get_target(&r, None)?, PathBuf::from("a.pdf"));
        assert_eq!(get_target(&r, Some("b.pdf"))?, PathBuf::from("b.pdf"));
        assert_eq!(get_target(&r, Some("out/"))?, PathBuf::from("out/a.pdf"));
        let dir = tempfile::tempdir()?;
        let d = dir.path().to_string_lossy().into_owned();
        assert_eq!(get_target(&r, Some(&d))?, dir.path().join("a.pdf"));
        assert!(get_target(&RemotePath::root(), None).is_err());
        Ok(())
    }
}
