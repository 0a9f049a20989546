//! The change feed `GET /api/v1/changes` (docs/API.md, "Change feed"), against every backend:
//! what each namespace operation journals, paging with cursors, long polling, reset, errors
//! and isolation between spaces.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Context, ensure};
use nimbus_e2e::backend_test;
use nimbus_e2e::gateway::user_password;
use nimbus_e2e::http::{Api, check_rfc3339_utc, encode_path, files_url, query_string};
use nimbus_proto::wire::{ChangeList, ChangeOp, EntryKind};

/// `GET /api/v1/changes` with the given parameters (None: absent).
async fn feed(
    api: &Api,
    cursor: Option<&str>,
    wait: Option<u32>,
    limit: Option<u32>,
) -> anyhow::Result<nimbus_e2e::Resp> {
    let (wait, limit) = (wait.map(|w| w.to_string()), limit.map(|l| l.to_string()));
    let mut q: Vec<(&str, &str)> = Vec::new();
    if let Some(c) = cursor {
        q.push(("cursor", c));
    }
    if let Some(w) = &wait {
        q.push(("wait", w));
    }
    if let Some(l) = &limit {
        q.push(("limit", l));
    }
    api.get(&format!("/api/v1/changes{}", query_string(&q))).await
}

/// A 200 answer, its JSON shape checked beyond what deserialising checks: `from` only on moves,
/// `at` RFC 3339 UTC, seqs increasing, `cursor` = last seq.
async fn changes(api: &Api, cursor: Option<&str>, wait: Option<u32>, limit: Option<u32>) -> anyhow::Result<ChangeList> {
    let r = feed(api, cursor, wait, limit).await?;
    let list: ChangeList = r.ok(200)?;
    let raw = r.value()?;
    let items = raw["changes"].as_array().with_context(|| format!("`changes` is not an array: {r}"))?;
    for (c, v) in list.changes.iter().zip(items) {
        let obj = v.as_object().with_context(|| format!("a change is not an object: {r}"))?;
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let want: &[&str] = if c.op == ChangeOp::Move {
            &["at", "from", "kind", "node_id", "op", "path", "seq"]
        } else {
            &["at", "kind", "node_id", "op", "path", "seq"]
        };
        ensure!(keys == want, "change keys {keys:?}, want {want:?}: {r}");
        check_rfc3339_utc(&c.at).with_context(|| format!("in {r}"))?;
    }
    ensure!(list.changes.windows(2).all(|w| w[0].seq < w[1].seq), "seqs not increasing: {r}");
    if let Some(last) = list.changes.last() {
        ensure!(list.cursor == last.seq.to_string(), "cursor must be the last seq: {r}");
    }
    Ok(list)
}

type Row = (ChangeOp, EntryKind, String, Option<String>);

fn rows(list: &ChangeList) -> Vec<Row> {
    list.changes.iter().map(|c| (c.op, c.kind, c.path.clone(), c.from.clone())).collect()
}

fn row(op: ChangeOp, kind: EntryKind, path: &str) -> Row {
    (op, kind, path.to_string(), None)
}

async fn trash_id_of(api: &Api, path: &str) -> anyhow::Result<i64> {
    let r = api.delete(&files_url(path)).await?;
    r.check(204)?;
    Ok(r.header("x-nimbus-trash-id").context("DELETE without X-Nimbus-Trash-Id")?.parse()?)
}

backend_test!(every_namespace_change_in_order, |gw| async move {
    use ChangeOp::*;
    use EntryKind::{Dir, File};
    let (_, api) = gw.user("alice", None).await?;

    // No cursor: nothing, and where "now" is.
    let start = changes(&api, None, None, None).await?;
    ensure!(start.changes.is_empty() && !start.reset, "{start:?}");
    start.cursor.parse::<i64>().context("the cursor of a fresh space")?;

    api.mkdir("/Docs").await?.entry(201)?;
    api.mkdir("/docs").await?.entry(200)?; // exists: no change
    // Parents are matched case-insensitively and reported in their stored spelling.
    let created = api.put_file("/docs/a/B/f.txt", "one").await?.entry(201)?;
    let updated = api.put_file("/DOCS/A/b/F.TXT", "two").await?.entry(200)?;
    ensure!(updated.id == created.id, "{updated:?} vs {created:?}");
    api.mkdir("/docs/a/B/deep/er").await?.entry(201)?;
    // The block protocol creates parents too.
    api.commit("/x/y.txt", None, &[]).await?.entry(201)?;
    let moved =
        api.post_json("/api/v1/move", &serde_json::json!({"from": "/docs/A", "to": "/moved/a2"})).await?.entry(200)?;
    api.post_json("/api/v1/copy", &serde_json::json!({"from": "/moved/a2/B/f.txt", "to": "/copies/f.txt"}))
        .await?
        .entry(201)?;
    api.post_json("/api/v1/copy", &serde_json::json!({"from": "/moved/a2", "to": "/copies/tree"})).await?.entry(201)?;
    let t1 = trash_id_of(&api, "/copies/f.txt").await?;
    api.post_json(&format!("/api/v1/trash/{t1}/restore"), &serde_json::json!({"to": "/back/f.txt"}))
        .await?
        .entry(200)?;
    let t2 = trash_id_of(&api, "/copies/tree").await?;
    api.delete(&format!("/api/v1/trash/{t2}")).await?.check(204)?;
    // Overwriting move: the replaced file goes to the trash first.
    api.put_file("/x/z.txt", "zzz").await?.entry(201)?;
    api.post_json("/api/v1/move", &serde_json::json!({"from": "/x/z.txt", "to": "/x/y.txt", "overwrite": true}))
        .await?
        .entry(200)?;
    // Making an old version current is an update.
    let v1 = created.version.context("version")?;
    api.post_json(
        &format!("/api/v1/versions/{}", encode_path("/moved/a2/B/f.txt")),
        &serde_json::json!({"version": v1}),
    )
    .await?
    .entry(200)?;

    let all = changes(&api, Some(&start.cursor), None, None).await?;
    let want = vec![
        row(Mkdir, Dir, "/Docs"),
        row(Mkdir, Dir, "/Docs/a"),
        row(Mkdir, Dir, "/Docs/a/B"),
        row(Create, File, "/Docs/a/B/f.txt"),
        row(Update, File, "/Docs/a/B/f.txt"),
        row(Mkdir, Dir, "/Docs/a/B/deep"),
        row(Mkdir, Dir, "/Docs/a/B/deep/er"),
        row(Mkdir, Dir, "/x"),
        row(Create, File, "/x/y.txt"),
        row(Mkdir, Dir, "/moved"),
        (Move, Dir, "/moved/a2".into(), Some("/Docs/a".into())),
        row(Mkdir, Dir, "/copies"),
        row(Create, File, "/copies/f.txt"),
        row(Create, Dir, "/copies/tree"),
        row(Delete, File, "/copies/f.txt"),
        row(Mkdir, Dir, "/back"),
        row(Restore, File, "/back/f.txt"),
        row(Delete, Dir, "/copies/tree"),
        row(Purge, Dir, "/copies/tree"),
        row(Create, File, "/x/z.txt"),
        row(Delete, File, "/x/y.txt"),
        (Move, File, "/x/y.txt".into(), Some("/x/z.txt".into())),
        row(Update, File, "/moved/a2/B/f.txt"),
    ];
    let got = rows(&all);
    ensure!(got == want, "feed:\n{got:#?}\nwant:\n{want:#?}");
    ensure!(!all.reset);
    // Node ids are the entries' ids.
    ensure!(all.changes[3].node_id == Some(created.id) && all.changes[4].node_id == Some(created.id), "{all:?}");
    ensure!(all.changes[10].node_id == Some(moved.id), "{all:?}");
    // Caught up: nothing more, the same cursor.
    let after = changes(&api, Some(&all.cursor), None, None).await?;
    ensure!(after.changes.is_empty() && after.cursor == all.cursor && !after.reset, "{after:?}");
    // A start "from now" is where the feed ended.
    let now = changes(&api, None, None, None).await?;
    ensure!(now.cursor == all.cursor, "latest {} vs last seq {}", now.cursor, all.cursor);
    Ok(())
});

backend_test!(paging_with_limit_and_cursor, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let start = changes(&api, None, None, None).await?;
    for i in 0..5 {
        api.put_file(&format!("/f{i}.txt"), "x").await?.entry(201)?;
    }
    let all = changes(&api, Some(&start.cursor), None, None).await?;
    let paths: Vec<&str> = all.changes.iter().map(|c| c.path.as_str()).collect();
    ensure!(paths == ["/f0.txt", "/f1.txt", "/f2.txt", "/f3.txt", "/f4.txt"], "{paths:?}");

    let mut cursor = start.cursor.clone();
    let mut pages = Vec::new();
    let mut seen = Vec::new();
    loop {
        let page = changes(&api, Some(&cursor), None, Some(2)).await?;
        ensure!(page.changes.len() <= 2, "more than limit=2: {page:?}");
        if page.changes.is_empty() {
            ensure!(page.cursor == cursor, "an empty page keeps the cursor: {page:?}");
            break;
        }
        pages.push(page.changes.len());
        seen.extend(page.changes.iter().map(|c| c.seq));
        cursor = page.cursor;
        ensure!(pages.len() < 10, "paging never ended");
    }
    ensure!(pages == [2, 2, 1], "page sizes {pages:?}");
    ensure!(seen == all.changes.iter().map(|c| c.seq).collect::<Vec<_>>(), "paged {seen:?} vs {all:?}");

    // Out-of-range parameters.
    for (wait, limit) in [(None, Some(0)), (None, Some(1001)), (Some(61), None)] {
        feed(&api, Some(&start.cursor), wait, limit).await?.check_error(400, "bad_request")?;
    }
    let r = api.get(&format!("/api/v1/changes?cursor={}&wait=-1", start.cursor)).await?;
    r.check_error(400, "bad_request")?;
    Ok(())
});

backend_test!(long_poll, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    // Another device of the same user makes the change.
    let other = gw.api().login_ok("alice", &user_password("alice")).await?;
    let start = changes(&api, None, None, None).await?;

    // Nothing happens: an empty answer with the same cursor once the wait is over.
    let idle = changes(&api, Some(&start.cursor), Some(1), None).await?;
    ensure!(idle.changes.is_empty() && idle.cursor == start.cursor && !idle.reset, "{idle:?}");

    // A waiting request returns the change made meanwhile.
    let waiter = {
        let (api, cursor) = (api.clone(), start.cursor.clone());
        tokio::spawn(async move { changes(&api, Some(&cursor), Some(10), None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = other.put_file("/woke.txt", "hello").await?.entry(201)?;
    let got =
        tokio::time::timeout(Duration::from_secs(30), waiter).await.context("the long poll never answered")???;
    ensure!(
        got.changes.len() == 1
            && got.changes[0].op == ChangeOp::Create
            && got.changes[0].path == "/woke.txt"
            && got.changes[0].node_id == Some(e.id),
        "the long poll should return the PUT: {got:?}"
    );
    ensure!(got.cursor == got.changes[0].seq.to_string() && !got.reset, "{got:?}");

    // Several waiters of the same space all wake, and a change committed before the wait
    // started is returned at once.
    let cursor = got.cursor.clone();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (api, cursor) = (api.clone(), cursor.clone());
            tokio::spawn(async move { changes(&api, Some(&cursor), Some(10), None).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.mkdir("/woke-dir").await?.entry(201)?;
    for w in waiters {
        let got = tokio::time::timeout(Duration::from_secs(30), w).await.context("a long poll never answered")???;
        ensure!(got.changes.len() == 1 && got.changes[0].path == "/woke-dir", "{got:?}");
    }
    let again = changes(&api, Some(&cursor), Some(10), None).await?;
    ensure!(again.changes.len() == 1 && again.changes[0].op == ChangeOp::Mkdir, "{again:?}");
    Ok(())
});

backend_test!(spaces_are_isolated, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let a0 = changes(&alice, None, None, None).await?;
    let b0 = changes(&bob, None, None, None).await?;

    alice.put_file("/alice/one.txt", "a").await?.entry(201)?;
    let mut bob_ids = HashSet::new();
    for i in 0..3 {
        bob_ids.insert(bob.put_file(&format!("/bob-secret/{i}.txt"), "b").await?.entry(201)?.id);
        alice.put_file(&format!("/alice/{i}.txt"), "a").await?.entry(201)?;
    }
    bob.delete(&files_url("/bob-secret/0.txt")).await?.check(204)?;

    let bobs = changes(&bob, Some(&b0.cursor), None, None).await?;
    ensure!(bobs.changes.iter().all(|c| c.path.starts_with("/bob-secret")), "{bobs:?}");
    ensure!(bobs.changes.len() == 5, "mkdir, 3 creates, delete: {bobs:?}");
    let alices = changes(&alice, Some(&a0.cursor), None, None).await?;
    ensure!(alices.changes.iter().all(|c| c.path.starts_with("/alice")), "{alices:?}");
    ensure!(alices.changes.len() == 5, "mkdir, 4 creates: {alices:?}");

    // Whatever cursor alice sends (bob's included), she only ever gets her own space.
    let mut cursors: Vec<i64> = vec![0];
    for c in &bobs.changes {
        cursors.extend([c.seq - 1, c.seq]);
    }
    for c in cursors {
        let r = feed(&alice, Some(&c.to_string()), None, None).await?;
        let l: ChangeList = r.ok(200)?;
        ensure!(
            l.changes
                .iter()
                .all(|ch| ch.path.starts_with("/alice") && !ch.node_id.is_some_and(|id| bob_ids.contains(&id))),
            "alice's feed from {c} shows bob's changes: {r}"
        );
        ensure!(!r.text().contains("bob"), "{r}");
    }
    // Bob's latest is beyond alice's: for her it is a cursor from the future.
    let r = changes(&alice, Some(&bobs.cursor), None, None).await?;
    ensure!(r.reset && r.changes.is_empty() && r.cursor == alices.cursor, "{r:?} (alice at {})", alices.cursor);
    Ok(())
});

backend_test!(bad_cursors_reset_and_auth, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    api.put_file("/a.txt", "a").await?.entry(201)?;
    let latest = changes(&api, None, None, None).await?;
    let n: i64 = latest.cursor.parse().context("cursor")?;
    ensure!(n > 0, "{latest:?}");

    for bad in ["abc", "-1", "1.5", "", " 1", "0x10", "99999999999999999999999"] {
        let e = feed(&api, Some(bad), None, None).await?.check_error(400, "bad_request")?;
        ensure!(e.message.contains("cursor"), "the message should say what is wrong: {e:?}");
    }
    // A cursor beyond anything the space has (a database restored from a backup): reset.
    for future in [n + 1, n + 1_000_000] {
        let r = changes(&api, Some(&future.to_string()), Some(5), None).await?;
        ensure!(r.reset && r.changes.is_empty() && r.cursor == latest.cursor, "{r:?}");
    }
    // The cursor a reset hands back works.
    let r = changes(&api, Some(&latest.cursor), None, None).await?;
    ensure!(!r.reset && r.changes.is_empty(), "{r:?}");

    api.anonymous().get("/api/v1/changes").await?.check_error(401, "unauthorized")?;
    api.anonymous().get("/api/v1/changes?cursor=0&wait=5").await?.check_error(401, "unauthorized")?;
    api.with_token("not-a-token").get("/api/v1/changes?cursor=0").await?.check_error(401, "unauthorized")?;
    Ok(())
});

// SIGTERM ends a long poll at once (left alone it would hold the stop up to the 20 s drain
// limit), while an upload in flight still gets to finish.
backend_test!(shutdown_ends_long_polls_not_uploads, |mut gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let start = changes(&api, None, None, None).await?;
    let bs = api.block_size().await?;

    // An upload in flight: one block and a bit in, the rest held back.
    let content = nimbus_e2e::data::bytes("drained", bs + 1000);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let upload = {
        let api = api.fresh_connection()?;
        tokio::spawn(async move { api.put_file("/drained.bin", reqwest::Body::wrap_stream(body)).await })
    };
    tx.send(Ok(content[..bs + 10].to_vec())).await?;
    let first = [nimbus_e2e::data::hash_hex(&content[..bs])];
    nimbus_e2e::mount::eventually("the upload's first block is stored", Duration::from_secs(60), || async {
        let m: nimbus_proto::wire::MissingBlocksResponse =
            api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": first })).await?.ok(200)?;
        ensure!(m.missing.is_empty(), "{m:?}");
        Ok(())
    })
    .await?;

    // A long poll of the longest wait, held by the gateway.
    let poll = {
        let (api, cursor) = (api.fresh_connection()?, start.cursor.clone());
        tokio::spawn(async move { changes(&api, Some(&cursor), Some(60), None).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    ensure!(!poll.is_finished(), "the long poll answered before anything happened: {:?}", poll.await);

    // SIGTERM: the poll answers at once, as at the end of its wait (no changes, same cursor).
    let sent = std::time::Instant::now();
    gw.terminate().await?;
    let got = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .context("the long poll was still held 5 s after SIGTERM")???;
    ensure!(got.changes.is_empty() && got.cursor == start.cursor && !got.reset, "{got:?}");

    // The upload still finishes, and then the gateway exits cleanly, far within the poll's 60 s.
    ensure!(gw.wait_exit(Duration::from_millis(500)).await?.is_none(), "the gateway did not wait for the upload");
    tx.send(Ok(content[bs + 10..].to_vec())).await?;
    drop(tx);
    let e = tokio::time::timeout(Duration::from_secs(10), upload)
        .await
        .context("the upload never finished")???
        .entry(201)?;
    ensure!(e.size == content.len() as u64, "{e:?}");
    let status =
        gw.wait_exit(Duration::from_secs(10)).await?.context("the gateway still runs 10 s after the upload")?;
    ensure!(status.success(), "the gateway exited with {status}");
    let took = sent.elapsed();
    ensure!(took < Duration::from_secs(10), "the gateway took {took:?} to stop after SIGTERM");

    // What the drained upload acknowledged is there after a restart.
    gw.start_again().await?;
    let r = api.fresh_connection()?.get_file("/drained.bin").await?;
    r.check(200)?;
    ensure!(r.body == content.as_slice(), "the drained upload reads back different content");
    Ok(())
});
