//! Requests to a running mount from another process: `nimbus resolve` asks the mount that
//! holds a refused change to retry it, save a copy or discard it. A request is a JSON file
//! ([`ResolveRequest`]) dropped into the mount's request folder (next to its status file,
//! in the user's own config directory); the mount answers with a reply file
//! ([`ResolveReply`]) of the same id. Files work the same on every platform and need no
//! socket or pipe; both sides of the format live here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nimbus_proto::drive::{ResolveReply, ResolveRequest};

use crate::core::Vfs;

/// How often the mount looks for requests.
const POLL: Duration = Duration::from_millis(200);
/// A request file larger than this is not a request.
const MAX_REQUEST: u64 = 64 * 1024;
/// Replies nobody collected are removed after this long.
const REPLY_KEPT: Duration = Duration::from_secs(600);

/// The request folder of the mount whose status file is `status_file`.
pub fn dir_for(status_file: &Path) -> PathBuf {
    status_file.with_extension("requests")
}

/// Ids are what [`send`] makes: letters, digits and dashes, at most 64.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Drops `req` into the request folder `dir`; returns its id for [`take_reply`].
pub fn send(dir: &Path, req: &ResolveRequest) -> std::io::Result<String> {
    std::fs::create_dir_all(dir)?;
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let id = format!("{}-{nanos}", std::process::id());
    let json = serde_json::to_vec(req).map_err(std::io::Error::other)?;
    write_atomically(&dir.join(format!("{id}.json")), &json)?;
    Ok(id)
}

/// The mount's reply to request `id`, once there (the reply file is removed).
pub fn take_reply(dir: &Path, id: &str) -> Option<ResolveReply> {
    let path = dir.join(format!("{id}.reply"));
    let bytes = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    serde_json::from_slice(&bytes).ok()
}

/// The mount's side: answers requests in `dir` for as long as the mount runs. Requests left
/// by an earlier run are dropped first (nobody waits for them).
pub(crate) async fn serve(vfs: Arc<Vfs>, dir: PathBuf) {
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::warn!(error = %e, dir = %dir.display(), "no request folder: `nimbus resolve` cannot reach this mount");
        return;
    }
    loop {
        tokio::time::sleep(POLL).await;
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let path = e.path();
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            match path.extension().and_then(|x| x.to_str()) {
                Some("json") => {}
                Some("reply") => {
                    let stale = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t.elapsed().is_ok_and(|a| a > REPLY_KEPT));
                    if stale {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                _ => continue,
            }
            let req = read_request(&path);
            let _ = std::fs::remove_file(&path);
            if !valid_id(&id) {
                continue;
            }
            let (vfs, reply_path) = (vfs.clone(), dir.join(format!("{id}.reply")));
            tokio::spawn(async move {
                let reply = match req {
                    Ok(req) => match vfs.resolve(&req.path, req.action).await {
                        Ok(message) => ResolveReply { ok: true, message },
                        Err(e) => ResolveReply { ok: false, message: e.to_string() },
                    },
                    Err(message) => ResolveReply { ok: false, message },
                };
                let written = serde_json::to_vec(&reply)
                    .map_err(std::io::Error::other)
                    .and_then(|json| write_atomically(&reply_path, &json));
                if let Err(e) = written {
                    tracing::warn!(error = %e, "cannot write the reply to a resolve request");
                }
            });
        }
    }
}

fn read_request(path: &Path) -> Result<ResolveRequest, String> {
    let len = std::fs::metadata(path).map(|m| m.len()).map_err(|e| e.to_string())?;
    if len > MAX_REQUEST {
        return Err(format!("a request is at most {MAX_REQUEST} bytes"));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not a resolve request: {e}"))
}

#[cfg(test)]
mod tests {
    use nimbus_proto::drive::ProblemAction;

    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(valid_id("123-456"));
        assert!(!valid_id(""));
        assert!(!valid_id("../x"));
        assert!(!valid_id(&"a".repeat(65)));
    }

    #[test]
    fn a_request_round_trips_and_junk_is_refused() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let req = ResolveRequest { path: "/a.txt".into(), action: ProblemAction::SaveCopy };
        let id = send(dir.path(), &req).map_err(|e| e.to_string())?;
        assert!(valid_id(&id));
        assert_eq!(read_request(&dir.path().join(format!("{id}.json")))?, req);
        std::fs::write(dir.path().join("x.json"), b"{\"path\":1}").map_err(|e| e.to_string())?;
        assert!(read_request(&dir.path().join("x.json")).is_err());
        std::fs::write(dir.path().join("big.json"), vec![b' '; 70_000]).map_err(|e| e.to_string())?;
        assert!(read_request(&dir.path().join("big.json")).is_err_and(|e| e.contains("at most")));
        assert_eq!(take_reply(dir.path(), &id), None);
        let reply = ResolveReply { ok: true, message: "done".into() };
        write_atomically(
            &dir.path().join(format!("{id}.reply")),
            &serde_json::to_vec(&reply).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        assert_eq!(take_reply(dir.path(), &id), Some(reply));
        assert_eq!(take_reply(dir.path(), &id), None, "a reply is taken once");
        Ok(())
    }

    async fn reply_to(dir: &Path, id: &str) -> Option<ResolveReply> {
        for _ in 0..250 {
            if let Some(r) = take_reply(dir, id) {
                return Some(r);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    #[tokio::test]
    async fn a_running_mount_answers_requests() -> Result<(), String> {
        let fake = crate::core::fake::FakeGateway::new(crate::core::tests::BS);
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
        let vfs = crate::core::tests::core_on(&fake, tmp.path(), false);
        fake.set_full(true);
        crate::core::tests::write_file(&vfs, crate::core::ROOT, "a.txt", b"x").await.map_err(|e| e.to_string())?;
        let dir = tmp.path().join("m.requests");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("stale.json"), b"{}").map_err(|e| e.to_string())?;
        let server = tokio::spawn(serve(vfs.clone(), dir.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!dir.join("stale.json").exists(), "an earlier run's request is dropped");
        // A request with a name that is not an id is removed unanswered; junk gets an answer.
        std::fs::write(dir.join("not an id.json"), b"{}").map_err(|e| e.to_string())?;
        std::fs::write(dir.join("junk-1.json"), b"[1,2").map_err(|e| e.to_string())?;
        let junk = reply_to(&dir, "junk-1").await.ok_or("no reply to junk")?;
        assert!(!junk.ok && junk.message.contains("not a resolve request"), "{junk:?}");
        assert!(!dir.join("not an id.json").exists());
        let id = send(&dir, &ResolveRequest { path: "/nope.txt".into(), action: ProblemAction::Retry })
            .map_err(|e| e.to_string())?;
        let r = reply_to(&dir, &id).await.ok_or("no reply")?;
        assert!(!r.ok && r.message.contains("no refused change"), "{r:?}");
        let id = send(&dir, &ResolveRequest { path: "/a.txt".into(), action: ProblemAction::Discard })
            .map_err(|e| e.to_string())?;
        let r = reply_to(&dir, &id).await.ok_or("no reply")?;
        assert!(r.ok && r.message.contains("discarded"), "{r:?}");
        assert!(vfs.problems().is_empty());
        server.abort();
        Ok(())
    }
}
