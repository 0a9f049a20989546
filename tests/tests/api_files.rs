//! Files, directories, ranges, move/copy, trash, versions, case-insensitive names, the block
//! protocol and quotas, against every backend (docs/API.md). Conditional requests and name
//! rules, which are HTTP contract alone, are in api_contract.rs (in process).

use std::collections::HashSet;

use anyhow::{Context, ensure};
use futures::StreamExt;
use nimbus_e2e::backend_test;
use nimbus_e2e::data;
use nimbus_e2e::http::{Api, encode_path, files_url};
use nimbus_proto::names::name_key;
use nimbus_proto::wire::{BlockRef, EntryKind, Manifest, Me, MissingBlocksResponse, TrashList, VersionList};
use reqwest::Method;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// GET with one extra header.
async fn get_with(api: &Api, path: &str, header: &str, value: &str) -> anyhow::Result<nimbus_e2e::Resp> {
    api.req(Method::GET, &files_url(path)).header(header, value).send().await
}

async fn content(api: &Api, path: &str) -> anyhow::Result<Vec<u8>> {
    let r = api.get_file(path).await?;
    r.check(200)?;
    Ok(r.body.to_vec())
}

backend_test!(put_get_head, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;

    let e = api.put_file("/docs/sub/a.txt", "hello world").await?.entry(201)?;
    ensure!(
        e.name == "a.txt" && e.path == "/docs/sub/a.txt" && e.kind == EntryKind::File && e.size == 11,
        "PUT entry: {e:?}"
    );
    let v1 = e.version.context("a file entry carries its version")?;

    // Parents were created.
    for (path, name) in [("/docs", "docs"), ("/docs/sub", "sub")] {
        let d = api.stat(path).await?.entry(200)?;
        ensure!(d.kind == EntryKind::Dir && d.name == name && d.path == path && d.version.is_none(), "{d:?}");
    }
    // The root: `/api/v1/stat/` and `/api/v1/stat`; listing it: `/api/v1/dirs/` and `/api/v1/dirs`.
    for url in ["/api/v1/stat/", "/api/v1/stat"] {
        let root = api.get(url).await?.entry(200)?;
        ensure!(root.kind == EntryKind::Dir && root.path == "/", "{url}: {root:?}");
    }
    for url in ["/api/v1/dirs/", "/api/v1/dirs"] {
        let l: nimbus_proto::wire::DirListing = api.get(url).await?.ok(200)?;
        let names: Vec<&str> = l.entries.iter().map(|e| e.name.as_str()).collect();
        ensure!(names == ["docs"] && l.entries[0].path == "/docs", "{url}: {:?}", l.entries);
    }
    let st = api.stat("/docs/sub/a.txt").await?.entry(200)?;
    ensure!(st == e, "stat {st:?} differs from the PUT entry {e:?}");

    let r = api.get_file("/docs/sub/a.txt").await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"hello world", "{r}");
    ensure!(r.header("etag") == Some(format!("\"{v1}\"")), "ETag must be \"<version>\": {:?}", r.headers);
    ensure!(r.header("accept-ranges").as_deref() == Some("bytes"), "Accept-Ranges: {:?}", r.headers);
    ensure!(r.header("content-length").as_deref() == Some("11"), "Content-Length: {:?}", r.headers);
    let lm = r.header("last-modified").context("Last-Modified is missing")?;
    ensure!(lm.ends_with(" GMT"), "Last-Modified is not an HTTP date: {lm}");

    let h = api.head(&files_url("/docs/sub/a.txt")).await?;
    h.check(200)?;
    ensure!(h.body.is_empty(), "HEAD returned a body: {h}");
    ensure!(h.header("etag") == r.header("etag"), "HEAD ETag {:?} vs GET {:?}", h.headers, r.headers);
    ensure!(h.header("content-length").as_deref() == Some("11"), "HEAD Content-Length: {:?}", h.headers);

    // Replacing makes a new version.
    let e2 = api.put_file("/docs/sub/a.txt", "goodbye").await?.entry(200)?;
    let v2 = e2.version.context("version")?;
    ensure!(v2 != v1 && e2.size == 7 && e2.id == e.id, "replace entry: {e2:?} (first {e:?})");
    ensure!(content(&api, "/docs/sub/a.txt").await? == b"goodbye");
    let r = api.get_file("/docs/sub/a.txt").await?;
    ensure!(r.header("etag") == Some(format!("\"{v2}\"")), "ETag after replace: {r:?}");

    api.get_file("/docs/sub/nope.txt").await?.check_error(404, "not_found")?;
    api.get_file("/nope/a.txt").await?.check_error(404, "not_found")?;
    let h = api.head(&files_url("/docs/sub/nope.txt")).await?;
    h.check(404)?;
    ensure!(h.body.is_empty(), "HEAD 404 with a body: {h}");
    // A directory is not a file (the contract names the code, not the status).
    api.get_file("/docs").await?.check_error_in(&[400, 409], "is_a_directory")?;
    // No token: 401.
    api.anonymous().get_file("/docs/sub/a.txt").await?.check_error(401, "unauthorized")?;
    Ok(())
});

backend_test!(ranges, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let body = data::bytes("ranges", 100);
    api.put_file("/r.bin", body.clone()).await?.entry(201)?;

    for (range, start, end) in [
        ("bytes=0-9", 0usize, 9usize),
        ("bytes=-5", 95, 99),
        ("bytes=10-", 10, 99),
        ("bytes=0-0", 0, 0),
        ("bytes=99-99", 99, 99),
        ("bytes=90-1000", 90, 99),
        ("bytes=-1000", 0, 99),
    ] {
        let r = get_with(&api, "/r.bin", "range", range).await?;
        r.check(206)?;
        let cr = format!("bytes {start}-{end}/100");
        ensure!(r.header("content-range") == Some(cr.clone()), "{range}: Content-Range {:?}, want {cr}", r.headers);
        ensure!(r.body.as_ref() == &body[start..=end], "{range}: wrong bytes");
        let len = (end - start + 1).to_string();
        ensure!(r.header("content-length") == Some(len), "{range}: Content-Length {:?}", r.headers);
    }
    for range in ["bytes=100-", "bytes=200-300", "bytes=100-100"] {
        let r = get_with(&api, "/r.bin", "range", range).await?;
        r.check_error(416, "range_not_satisfiable")?;
        ensure!(
            r.header("content-range").as_deref() == Some("bytes */100"),
            "{range}: 416 needs Content-Range: bytes */100, got {:?}",
            r.headers
        );
    }

    // If-Range: the range applies only while the ETag matches.
    let etag = api.get_file("/r.bin").await?.header("etag").context("ETag")?;
    let r = api
        .req(Method::GET, &files_url("/r.bin"))
        .header("range", "bytes=0-9")
        .header("if-range", &etag)
        .send()
        .await?;
    r.check(206)?;
    ensure!(r.body.as_ref() == &body[..10]);
    let r = api
        .req(Method::GET, &files_url("/r.bin"))
        .header("range", "bytes=0-9")
        .header("if-range", "\"999999\"")
        .send()
        .await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == body.as_slice(), "If-Range mismatch must send the whole file");
    // RFC 9110 §13.1.5: only this version's strong ETag or exactly its Last-Modified date lets
    // the range through. A weak ETag (strong comparison), another date, or a value that is
    // neither an ETag nor a date cannot match: the whole file, 200.
    let lm = api.get_file("/r.bin").await?.header("last-modified").context("Last-Modified")?;
    let weak = format!("W/{etag}");
    for (validator, partial) in [
        (lm.as_str(), true),
        ("garbage", false),
        ("*", false),
        (etag.trim_matches('"'), false),
        (weak.as_str(), false),
        ("Fri, 01 Jan 2100 00:00:00 GMT", false),
        ("Thu, 01 Jan 1970 00:00:00 GMT", false),
    ] {
        let r = api
            .req(Method::GET, &files_url("/r.bin"))
            .header("range", "bytes=0-9")
            .header("if-range", validator)
            .send()
            .await?;
        match partial {
            true => {
                r.check(206)?;
                ensure!(r.body.as_ref() == &body[..10], "If-Range {validator:?}: {r}");
            }
            false => {
                r.check(200).with_context(|| format!("If-Range {validator:?}"))?;
                ensure!(r.body.as_ref() == body.as_slice(), "If-Range {validator:?}: the whole file: {r}");
                ensure!(r.header("content-range").is_none(), "If-Range {validator:?}: {:?}", r.headers);
            }
        }
    }

    // Several ranges: HTTP lets a server ignore them (200, whole body) or answer multipart; never an error.
    let r = get_with(&api, "/r.bin", "range", "bytes=0-1,5-6").await?;
    r.check_any(&[200, 206])?;
    if r.status == 200 {
        ensure!(r.body.as_ref() == body.as_slice(), "multi-range 200 must carry the whole file");
    }

    // An empty file: nothing is satisfiable (RFC 9110 §14.1.1: first-pos must be < length).
    api.put_file("/empty.bin", Vec::new()).await?.entry(201)?;
    let r = api.get_file("/empty.bin").await?;
    r.check(200)?;
    ensure!(r.body.is_empty() && r.header("content-length").as_deref() == Some("0"), "{r:?}");
    for range in ["bytes=0-", "bytes=0-0"] {
        let r = get_with(&api, "/empty.bin", "range", range).await?;
        r.check_error(416, "range_not_satisfiable")?;
        ensure!(r.header("content-range").as_deref() == Some("bytes */0"), "{range}: {:?}", r.headers);
    }
    // A suffix range on an empty file: RFC 9110 leaves 200 (ignore) or 416 open.
    let r = get_with(&api, "/empty.bin", "range", "bytes=-5").await?;
    r.check_any(&[200, 416])?;
    ensure!(r.status != 200 || r.body.is_empty());
    Ok(())
});

backend_test!(multi_block_file, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let bs = api.block_size().await?;
    ensure!(bs == 4 * MIB, "block_size {bs}; the test expects 4 MiB");
    let len = 9 * MIB;
    let body = data::bytes("multi-block", len);
    let e = api.put_file("/big/nine.bin", body.clone()).await?.entry(201)?;
    ensure!(e.size == len as u64, "{e:?}");

    let (what, resp) = api.req(Method::GET, &files_url("/big/nine.bin")).send_streaming().await?;
    ensure!(resp.status() == 200, "{what}: {}", resp.status());
    let (got_len, hash) = nimbus_e2e::http::hash_body(&what, resp).await?;
    ensure!(got_len == len as u64 && hash == blake3::hash(&body), "downloaded content differs");

    let b = 4 * MIB;
    for (start, end) in [
        (b - 10, b + 9),         // across the first block boundary
        (b - 1, 2 * b),          // across both boundaries
        (b, 2 * b - 1),          // exactly the second block
        (2 * b, len - 1),        // exactly the last block
        (len - 1, len - 1),      // the last byte
        (0, b),                  // first block plus one byte
        (3 * MIB, 8 * MIB + 17), // three blocks
    ] {
        let range = format!("bytes={start}-{end}");
        let r = get_with(&api, "/big/nine.bin", "range", &range).await?;
        ensure!(r.status == 206, "{range}: {}", r.status);
        ensure!(r.header("content-range") == Some(format!("bytes {start}-{end}/{len}")), "{range}: {:?}", r.headers);
        ensure!(r.body.as_ref() == &body[start..=end], "{range}: wrong bytes");
    }
    let r = get_with(&api, "/big/nine.bin", "range", &format!("bytes=-{}", MIB + 1)).await?;
    ensure!(r.status == 206 && r.body.as_ref() == &body[len - MIB - 1..], "suffix across a boundary: {}", r.status);

    // The manifest lists the blocks in order.
    let m: Manifest = api.get(&format!("/api/v1/manifests/{}", encode_path("/big/nine.bin"))).await?.ok(200)?;
    let want: Vec<BlockRef> =
        data::split_blocks(&body, bs).into_iter().map(|(hash, c)| BlockRef { hash, size: c.len() as u64 }).collect();
    ensure!(m.blocks == want, "manifest blocks {:?} != {want:?}", m.blocks);
    ensure!(
        m.path == "/big/nine.bin" && m.size == len as u64 && m.block_size == bs as u64 && Some(m.version) == e.version,
        "manifest {m:?}"
    );
    // A block by hash.
    let r = api.get(&format!("/api/v1/blocks/{}", want[1].hash)).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == &body[b..2 * b], "block 2 content");
    Ok(())
});

backend_test!(listing_pagination, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    const FILES: usize = 2_050;
    let mut names: Vec<String> =
        (0..FILES).map(|i| if i % 3 == 0 { format!("Item-{i:05}.txt") } else { format!("item-{i:05}.txt") }).collect();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(names.clone())
        .map(|n| {
            let api = api.clone();
            async move {
                api.put_file(&format!("/many/{n}"), Vec::new()).await?.entry(201)?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        r?;
    }
    for d in ["Sub-B", "sub-a", "ZZ"] {
        api.mkdir(&format!("/many/{d}")).await?.entry(201)?;
        names.push(d.to_string());
    }
    names.sort_by_key(|n| name_key(n));

    for limit in [None, Some(333), Some(1000), Some(1)] {
        if limit == Some(1) {
            // One-entry pages: just the first few pages, then follow the cursor chain elsewhere.
            let mut cursor = None;
            for expect in names.iter().take(5) {
                let r = api.list_dir("/many", Some(1), cursor.as_deref()).await?;
                let page: nimbus_proto::wire::DirListing = r.ok(200)?;
                ensure!(page.entries.len() == 1 && &page.entries[0].name == expect, "{r}");
                cursor = Some(page.next_cursor.context("more pages must follow")?);
            }
            continue;
        }
        let all = api.list_all("/many", limit).await?;
        let got: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        let unique: HashSet<&str> = got.iter().copied().collect();
        ensure!(unique.len() == got.len(), "limit {limit:?}: duplicates across pages");
        ensure!(got.len() == names.len(), "limit {limit:?}: {} entries, want {}", got.len(), names.len());
        ensure!(got == names.iter().map(String::as_str).collect::<Vec<_>>(), "limit {limit:?}: not sorted by name key");
        for e in &all {
            ensure!(e.path == format!("/many/{}", e.name), "path of {e:?}");
        }
    }
    // Default limit is 1000: the first page is full and has a cursor.
    let page: nimbus_proto::wire::DirListing = api.list_dir("/many", None, None).await?.ok(200)?;
    ensure!(page.entries.len() == 1000 && page.next_cursor.is_some(), "default page: {} entries", page.entries.len());

    for bad in ["0", "1001", "-1", "x"] {
        let r = api.get(&format!("/api/v1/dirs/many?limit={bad}")).await?;
        r.check_error(400, "bad_request")?;
    }
    api.get("/api/v1/dirs/many?cursor=not-a-cursor").await?.check_error(400, "bad_request")?;
    api.list_dir("/nope", None, None).await?.check_error(404, "not_found")?;
    // The contract names the code, not the status.
    api.list_dir("/many/item-00001.txt", None, None).await?.check_error_in(&[400, 409], "not_a_directory")?;
    Ok(())
});

backend_test!(mkdir, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let d = api.mkdir("/a/b/c").await?.entry(201)?;
    ensure!(d.kind == EntryKind::Dir && d.path == "/a/b/c" && d.name == "c" && d.version.is_none(), "{d:?}");
    let again = api.mkdir("/a/b/c").await?.entry(200)?;
    ensure!(again.id == d.id, "{again:?} vs {d:?}");
    api.stat("/a/b").await?.entry(200)?;
    let listing = api.list_all("/a", None).await?;
    ensure!(listing.len() == 1 && listing[0].name == "b", "{listing:?}");
    api.put_file("/a/f.txt", "x").await?.entry(201)?;
    let r = api.mkdir("/a/f.txt").await?;
    r.check(409)?;
    r.error_detail()?;
    // Below a file: the parent is not a directory.
    let r = api.mkdir("/a/f.txt/sub").await?;
    ensure!(r.status == 409 || r.status == 400, "mkdir below a file: {r}");
    r.error_detail()?;
    // PUT where a directory is.
    let r = api.put_file("/a/b", "x").await?;
    ensure!(r.status == 409 || r.status == 400, "PUT onto a directory: {r}");
    r.error_detail()?;
    Ok(())
});

backend_test!(move_and_copy, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    api.put_file("/a/x.txt", "x content").await?.entry(201)?;
    let mv = |from: &str, to: &str, overwrite: bool| {
        let api = api.clone();
        let body = serde_json::json!({"from": from, "to": to, "overwrite": overwrite});
        async move { api.post_json("/api/v1/move", &body).await }
    };
    let cp = |from: &str, to: &str| {
        let api = api.clone();
        let body = serde_json::json!({"from": from, "to": to});
        async move { api.post_json("/api/v1/copy", &body).await }
    };

    // Rename a file into a new directory.
    let e = mv("/a/x.txt", "/b/y.txt", false).await?.entry(200)?;
    ensure!(e.path == "/b/y.txt" && e.name == "y.txt" && e.kind == EntryKind::File, "{e:?}");
    api.get_file("/a/x.txt").await?.check_error(404, "not_found")?;
    ensure!(content(&api, "/b/y.txt").await? == b"x content");

    // A whole directory: its contents follow.
    let tree =
        [("/proj/readme.md", "readme"), ("/proj/src/main.rs", "fn main() {}"), ("/proj/src/deep/x/y.txt", "deep")];
    for (p, c) in tree {
        api.put_file(p, c).await?.entry(201)?;
    }
    let e = mv("/proj", "/archive/proj-2024", false).await?.entry(200)?;
    ensure!(e.kind == EntryKind::Dir && e.path == "/archive/proj-2024", "{e:?}");
    api.stat("/proj").await?.check_error(404, "not_found")?;
    for (p, c) in tree {
        let moved = p.replacen("/proj", "/archive/proj-2024", 1);
        ensure!(content(&api, &moved).await? == c.as_bytes(), "{moved}");
        api.get_file(p).await?.check_error(404, "not_found")?;
    }
    let src = api.list_all("/archive/proj-2024/src", None).await?;
    let names: Vec<&str> = src.iter().map(|e| e.name.as_str()).collect();
    ensure!(names == ["deep", "main.rs"], "{names:?}");
    ensure!(src.iter().all(|e| e.path.starts_with("/archive/proj-2024/src/")), "{src:?}");

    // Onto an existing file: 409 unless overwrite.
    api.put_file("/b/z.txt", "z content").await?.entry(201)?;
    mv("/b/y.txt", "/b/z.txt", false).await?.check_error(409, "already_exists")?;
    ensure!(content(&api, "/b/z.txt").await? == b"z content");
    ensure!(content(&api, "/b/y.txt").await? == b"x content");
    mv("/b/y.txt", "/b/z.txt", true).await?.entry(200)?;
    ensure!(content(&api, "/b/z.txt").await? == b"x content");
    api.get_file("/b/y.txt").await?.check_error(404, "not_found")?;
    // Onto an existing directory: an error (give the full target path).
    mv("/b/z.txt", "/archive", false).await?.check(409)?;
    mv("/b/z.txt", "/archive", true).await?.check(409)?;
    ensure!(content(&api, "/b/z.txt").await? == b"x content");
    // Into itself.
    let r = mv("/archive", "/archive/inside", false).await?;
    ensure!(r.status == 400 || r.status == 409, "moving a directory into itself: {r}");
    r.error_detail()?;
    api.stat("/archive/proj-2024/readme.md").await?.entry(200)?;
    // From nowhere.
    mv("/nope", "/b/nope", false).await?.check_error(404, "not_found")?;

    // Copy a file: independent afterwards.
    let c = cp("/b/z.txt", "/c/copy.txt").await?;
    c.check_any(&[200, 201])?;
    let ce = c.entry(c.status)?;
    ensure!(ce.path == "/c/copy.txt" && ce.size == 9, "{ce:?}");
    api.put_file("/c/copy.txt", "changed").await?.entry(200)?;
    ensure!(content(&api, "/b/z.txt").await? == b"x content", "changing a copy changed the original");
    // Copy a directory.
    let c = cp("/archive", "/archive-copy").await?;
    c.check_any(&[200, 201])?;
    for (p, body) in tree {
        let copied = p.replacen("/proj", "/archive-copy/proj-2024", 1);
        ensure!(content(&api, &copied).await? == body.as_bytes(), "{copied}");
    }
    cp("/b/z.txt", "/c/copy.txt").await?.check_error(409, "already_exists")?;
    Ok(())
});

backend_test!(trash, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    api.put_file("/t/a.txt", "trash me").await?.entry(201)?;
    let r = api.delete(&files_url("/t/a.txt")).await?;
    r.check(204)?;
    ensure!(r.body.is_empty());
    let trash_id: i64 = r.header("x-nimbus-trash-id").context("DELETE without X-Nimbus-Trash-Id")?.parse()?;
    api.get_file("/t/a.txt").await?.check_error(404, "not_found")?;
    api.stat("/t/a.txt").await?.check_error(404, "not_found")?;
    ensure!(api.list_all("/t", None).await?.is_empty());
    api.delete(&files_url("/t/a.txt")).await?.check_error(404, "not_found")?;

    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.len() == 1, "{:?}", t.entries);
    let te = &t.entries[0];
    ensure!(te.id == trash_id, "X-Nimbus-Trash-Id {trash_id} vs the listed {te:?}");
    ensure!(
        te.name == "a.txt" && te.original_path == "/t/a.txt" && te.kind == EntryKind::File && te.size == 8,
        "{te:?}"
    );
    nimbus_e2e::http::check_rfc3339_utc(&te.deleted_at)?;

    let e = api.post_json(&format!("/api/v1/trash/{}/restore", te.id), &serde_json::json!({})).await?.entry(200)?;
    ensure!(e.path == "/t/a.txt", "{e:?}");
    ensure!(content(&api, "/t/a.txt").await? == b"trash me");
    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.is_empty(), "restored entry still in the trash: {:?}", t.entries);

    // Purge one.
    api.delete(&files_url("/t/a.txt")).await?.check(204)?;
    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    let id = t.entries.first().context("trash entry")?.id;
    api.delete(&format!("/api/v1/trash/{id}")).await?.check(204)?;
    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.is_empty());
    api.post_json(&format!("/api/v1/trash/{id}/restore"), &serde_json::json!({}))
        .await?
        .check_error(404, "not_found")?;
    api.delete(&format!("/api/v1/trash/{id}")).await?.check_error(404, "not_found")?;

    // A directory goes to the trash as one entry and comes back whole.
    for p in ["/d/one.txt", "/d/sub/two.txt"] {
        api.put_file(p, p.to_string()).await?.entry(201)?;
    }
    api.delete(&files_url("/d")).await?.check(204)?;
    api.get_file("/d/sub/two.txt").await?.check_error(404, "not_found")?;
    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.len() == 1 && t.entries[0].kind == EntryKind::Dir && t.entries[0].original_path == "/d");
    let did = t.entries[0].id;
    // The original path is taken now: 409, then restore elsewhere with `to`.
    api.mkdir("/d").await?.entry(201)?;
    api.post_json(&format!("/api/v1/trash/{did}/restore"), &serde_json::json!({})).await?.check(409)?;
    let e = api
        .post_json(&format!("/api/v1/trash/{did}/restore"), &serde_json::json!({"to": "/d-restored"}))
        .await?
        .entry(200)?;
    ensure!(e.path == "/d-restored" && e.kind == EntryKind::Dir, "{e:?}");
    ensure!(content(&api, "/d-restored/sub/two.txt").await? == b"/d/sub/two.txt");

    // Newest first, paged.
    for i in 0..5 {
        let p = format!("/many/{i}.txt");
        api.put_file(&p, p.clone()).await?.entry(201)?;
        api.delete(&files_url(&p)).await?.check(204)?;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("/api/v1/trash?limit=2&cursor={}", nimbus_proto::names::percent_encode(c)),
            None => "/api/v1/trash?limit=2".to_string(),
        };
        let page: TrashList = api.get(&url).await?.ok(200)?;
        ensure!(page.entries.len() <= 2, "limit=2 gave {}", page.entries.len());
        seen.extend(page.entries);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        ensure!(seen.len() <= 20, "trash paging does not end");
    }
    let paths: Vec<&str> = seen.iter().map(|e| e.original_path.as_str()).collect();
    ensure!(
        paths[..5] == ["/many/4.txt", "/many/3.txt", "/many/2.txt", "/many/1.txt", "/many/0.txt"],
        "trash not newest first: {paths:?}"
    );
    let ids: HashSet<i64> = seen.iter().map(|e| e.id).collect();
    ensure!(ids.len() == seen.len(), "duplicates across trash pages: {paths:?}");
    for bad in ["0", "1001"] {
        api.get(&format!("/api/v1/trash?limit={bad}")).await?.check_error(400, "bad_request")?;
    }

    // Empty the trash.
    api.delete(&files_url("/d-restored/one.txt")).await?.check(204)?;
    api.delete(&files_url("/t")).await?.check(204)?;
    api.delete("/api/v1/trash").await?.check(204)?;
    let t: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(t.entries.is_empty() && t.next_cursor.is_none(), "{:?}", t.entries);
    api.delete("/api/v1/trash/999999999").await?.check_error(404, "not_found")?;
    Ok(())
});

backend_test!(versions, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let mut ids = Vec::new();
    for body in ["one", "two!", "three"] {
        let r = api.put_file("/v.txt", body).await?;
        let e = r.entry(if ids.is_empty() { 201 } else { 200 })?;
        ids.push(e.version.context("version")?);
    }
    let vl = |api: Api| async move {
        let l: VersionList = api.get(&format!("/api/v1/versions/{}", encode_path("/v.txt"))).await?.ok(200)?;
        anyhow::Ok(l)
    };
    let l = vl(api.clone()).await?;
    let got: Vec<i64> = l.versions.iter().map(|v| v.version).collect();
    ensure!(got == [ids[2], ids[1], ids[0]], "versions newest first: {got:?}, ids {ids:?}");
    let sizes: Vec<u64> = l.versions.iter().map(|v| v.size).collect();
    ensure!(sizes == [5, 4, 3], "{sizes:?}");
    let current: Vec<bool> = l.versions.iter().map(|v| v.current).collect();
    ensure!(current == [true, false, false], "{current:?}");
    for v in &l.versions {
        nimbus_e2e::http::check_rfc3339_utc(&v.created)?;
    }

    // Read an old version.
    let r = api.get(&format!("{}?version={}", files_url("/v.txt"), ids[0])).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b"one" && r.header("etag") == Some(format!("\"{}\"", ids[0])), "{r:?}");
    let m: Manifest =
        api.get(&format!("/api/v1/manifests/{}?version={}", encode_path("/v.txt"), ids[1])).await?.ok(200)?;
    ensure!(m.version == ids[1] && m.size == 4, "{m:?}");

    // Restore it: a new current version with the old content.
    let e = api
        .post_json(&format!("/api/v1/versions/{}", encode_path("/v.txt")), &serde_json::json!({"version": ids[0]}))
        .await?
        .entry(200)?;
    let restored = e.version.context("version")?;
    ensure!(!ids.contains(&restored) && e.size == 3, "{e:?}");
    ensure!(content(&api, "/v.txt").await? == b"one");
    let l = vl(api.clone()).await?;
    ensure!(l.versions.len() == 4 && l.versions[0].version == restored && l.versions[0].current, "{:?}", l.versions);

    api.get(&format!("{}?version=987654321", files_url("/v.txt"))).await?.check_error(404, "not_found")?;
    api.post_json(&format!("/api/v1/versions/{}", encode_path("/v.txt")), &serde_json::json!({"version": 987654321}))
        .await?
        .check_error(404, "not_found")?;
    api.get(&format!("/api/v1/versions/{}", encode_path("/none.txt"))).await?.check_error(404, "not_found")?;
    Ok(())
});

backend_test!(case_insensitive_names, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let e = api.put_file("/Report.txt", "original").await?.entry(201)?;
    ensure!(e.name == "Report.txt", "case is preserved: {e:?}");
    // Found under any case.
    let st = api.stat("/REPORT.TXT").await?.entry(200)?;
    ensure!(st.id == e.id && st.name == "Report.txt" && st.path == "/Report.txt", "canonical spelling: {st:?}");
    // Another case of an existing name is the same name: creating it must not make a twin.
    api.mkdir("/report.TXT").await?.check(409)?;
    api.req(Method::PUT, &files_url("/REPORT.txt"))
        .header("if-none-match", "*")
        .body("twin")
        .send()
        .await?
        .check_error(412, "precondition_failed")?;
    api.put_file("/other.txt", "other").await?.entry(201)?;
    api.post_json("/api/v1/move", &serde_json::json!({"from": "/other.txt", "to": "/rEpOrT.txt"}))
        .await?
        .check_error(409, "already_exists")?;
    api.post_json("/api/v1/copy", &serde_json::json!({"from": "/other.txt", "to": "/REPORT.TXT"}))
        .await?
        .check_error(409, "already_exists")?;
    api.mkdir("/Docs").await?.entry(201)?;
    let inner = api.mkdir("/DOCS/inner").await?.entry(201)?;
    ensure!(inner.path == "/Docs/inner", "paths in responses are canonical: {inner:?}");
    let moved = api
        .post_json("/api/v1/move", &serde_json::json!({"from": "/other.txt", "to": "/DOCS/Other.txt"}))
        .await?
        .entry(200)?;
    ensure!(moved.path == "/Docs/Other.txt" && moved.name == "Other.txt", "{moved:?}");
    api.post_json("/api/v1/move", &serde_json::json!({"from": "/docs/other.txt", "to": "/other.txt"}))
        .await?
        .entry(200)?;
    let docs = api.list_all("/docs", None).await?;
    ensure!(docs.len() == 1 && docs[0].name == "inner", "{docs:?}");
    let root = api.list_all("/", None).await?;
    let names: Vec<&str> = root.iter().map(|e| e.name.as_str()).collect();
    ensure!(names == ["Docs", "other.txt", "Report.txt"], "no twins may appear: {names:?}");
    ensure!(content(&api, "/Report.txt").await? == b"original");
    // NFC and NFD spellings are one name, stored NFC.
    let nfd = "/Cafe\u{301}.txt";
    let e = api.put_file(nfd, "cafe").await?.entry(201)?;
    ensure!(e.name == "Caf\u{e9}.txt", "stored in NFC: {:?}", e.name);
    ensure!(content(&api, "/Caf\u{e9}.txt").await? == b"cafe");
    Ok(())
});

// Plain PUT of another case of an existing name. docs/API.md says both "PUT replaces an existing
// file" and "names are unique case-insensitively (409 already_exists)"; this pins the stricter
// reading (no silent replace through a differently-cased name).
backend_test!(case_insensitive_put, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    api.put_file("/Report.txt", "original").await?.entry(201)?;
    let r = api.put_file("/REPORT.txt", "twin").await?;
    ensure!(
        r.status == 409 || (r.status == 200 && r.entry(200)?.name == "Report.txt"),
        "PUT /REPORT.txt over /Report.txt: want 409 already_exists (or a replace that keeps the one name): {r}"
    );
    let root = api.list_all("/", None).await?;
    ensure!(root.len() == 1, "a case twin appeared: {root:?}");
    Ok(())
});

backend_test!(block_protocol, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let bs = api.block_size().await?;
    let body = data::bytes("blocks", bs + 100);
    let blocks = data::split_blocks(&body, bs);
    let (h1, b1) = (blocks[0].0.clone(), blocks[0].1.to_vec());
    let (h2, b2) = (blocks[1].0.clone(), blocks[1].1.to_vec());
    let refs = vec![BlockRef { hash: h1.clone(), size: bs as u64 }, BlockRef { hash: h2.clone(), size: 100 }];

    let missing = |hashes: Vec<String>| {
        let api = api.clone();
        async move {
            let m: MissingBlocksResponse =
                api.post_json("/api/v1/blocks/missing", &serde_json::json!({ "hashes": hashes })).await?.ok(200)?;
            anyhow::Ok(m.missing)
        }
    };
    ensure!(missing(vec![h1.clone(), h2.clone()]).await? == [h1.clone(), h2.clone()]);

    // Hash verified.
    api.put_block(&h1, b2.clone()).await?.check_error(400, "hash_mismatch")?;
    ensure!(missing(vec![h1.clone()]).await? == std::slice::from_ref(&h1), "a rejected block counts as held");
    api.put_block(&h1, b1.clone()).await?.check(201)?;
    api.put_block(&h1, b1.clone()).await?.check(200)?;
    ensure!(missing(vec![h1.clone(), h2.clone()]).await? == std::slice::from_ref(&h2));

    // Commit with a block not held.
    api.commit("/p/file.bin", None, &refs).await?.check_error(400, "missing_blocks")?;
    api.stat("/p/file.bin").await?.check_error(404, "not_found")?;
    api.put_block(&h2, b2.clone()).await?.check(201)?;
    let e = api.commit("/p/file.bin", None, &refs).await?.entry(201)?;
    ensure!(e.size == (bs + 100) as u64 && e.path == "/p/file.bin", "{e:?}");
    ensure!(content(&api, "/p/file.bin").await? == body, "committed content");

    let m: Manifest = api.get(&format!("/api/v1/manifests/{}", encode_path("/p/file.bin"))).await?.ok(200)?;
    ensure!(m.blocks == refs && Some(m.version) == e.version && m.size == e.size && m.block_size == bs as u64, "{m:?}");
    nimbus_e2e::http::check_rfc3339_utc(&m.modified)?;

    let r = api.get(&format!("/api/v1/blocks/{h2}")).await?;
    r.check(200)?;
    ensure!(r.body.as_ref() == b2.as_slice());
    ensure!(r.header("etag") == Some(format!("\"{h2}\"")), "block ETag: {:?}", r.headers);
    ensure!(
        r.header("cache-control").as_deref() == Some("private, max-age=31536000, immutable"),
        "block Cache-Control: {:?}",
        r.headers
    );
    let unknown = data::hash_hex(b"never uploaded");
    api.get(&format!("/api/v1/blocks/{unknown}")).await?.check_error(404, "not_found")?;
    let r = api.get("/api/v1/blocks/not-a-hash").await?;
    ensure!(r.status == 400 || r.status == 404, "{r}");
    r.error_detail()?;
    api.put_block(&h1.to_uppercase(), b1.clone()).await?.check(400)?;

    // A block larger than block_size.
    let too_big = data::bytes("too big", bs + 1);
    let r = api.put_block(&data::hash_hex(&too_big), too_big).await?;
    r.check_error(413, "payload_too_large")?;

    // Stale base: 409 conflict, nothing changes.
    let v1 = e.version.context("version")?;
    let small = b"replacement".to_vec();
    let sh = data::hash_hex(&small);
    api.put_block(&sh, small.clone()).await?.check(201)?;
    let srefs = vec![BlockRef { hash: sh.clone(), size: small.len() as u64 }];
    api.commit("/p/file.bin", None, &srefs).await?.check_error(409, "conflict")?;
    api.commit("/p/file.bin", Some(v1 + 1000), &srefs).await?.check_error(409, "conflict")?;
    ensure!(content(&api, "/p/file.bin").await? == body, "a refused commit changed the file");
    let e2 = api.commit("/p/file.bin", Some(v1), &srefs).await?.entry(200)?;
    ensure!(e2.version != Some(v1) && e2.size == small.len() as u64, "{e2:?}");
    ensure!(content(&api, "/p/file.bin").await? == small);
    // force ignores the base.
    let forced = nimbus_proto::wire::CommitRequest { base_version: Some(1), blocks: refs.clone(), force: true };
    api.post_json(&format!("/api/v1/manifests/{}", encode_path("/p/file.bin")), &forced).await?.entry(200)?;
    ensure!(content(&api, "/p/file.bin").await? == body);

    // Block lists that do not describe a valid file: a wrong size, a short block in the middle.
    let wrong_size = vec![BlockRef { hash: sh.clone(), size: 5 }];
    api.commit("/p/bad1.bin", None, &wrong_size).await?.check(400)?;
    let short_middle = vec![srefs[0].clone(), refs[0].clone()];
    api.commit("/p/bad2.bin", None, &short_middle).await?.check(400)?;
    api.stat("/p/bad1.bin").await?.check_error(404, "not_found")?;
    api.stat("/p/bad2.bin").await?.check_error(404, "not_found")?;
    // An empty file has no blocks.
    let e = api.commit("/p/empty.bin", None, &[]).await?.entry(201)?;
    ensure!(e.size == 0);
    ensure!(content(&api, "/p/empty.bin").await?.is_empty());
    Ok(())
});

backend_test!(concurrent_commits, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let bs = api.block_size().await?;
    let first = api.upload_blocks(b"base content", bs).await?;
    let mut base = api.commit("/race.txt", None, &first).await?.entry(201)?.version.context("version")?;
    for round in 0..5 {
        let a = format!("round {round}: writer A").into_bytes();
        let b = format!("round {round}: writer B, longer").into_bytes();
        let ra = api.upload_blocks(&a, bs).await?;
        let rb = api.upload_blocks(&b, bs).await?;
        let (x, y) = tokio::join!(api.commit("/race.txt", Some(base), &ra), api.commit("/race.txt", Some(base), &rb));
        let (x, y) = (x?, y?);
        let (winner, loser, loser_refs, loser_body, winner_body) = match (x.status, y.status) {
            (200, 409) => (x, y, rb, b, a),
            (409, 200) => (y, x, ra, a, b),
            _ => anyhow::bail!("round {round}: want one 200 and one 409, got {x} and {y}"),
        };
        loser.check_error(409, "conflict")?;
        let we = winner.entry(200)?;
        ensure!(content(&api, "/race.txt").await? == winner_body, "round {round}: the winner's content is not intact");
        let new_base = we.version.context("version")?;
        let le = api.commit("/race.txt", Some(new_base), &loser_refs).await?.entry(200)?;
        ensure!(content(&api, "/race.txt").await? == loser_body, "round {round}: retry content");
        base = le.version.context("version")?;
    }
    // Two creators of one new path: one 201, one 409.
    let a = api.upload_blocks(b"creator A", bs).await?;
    let b = api.upload_blocks(b"creator B", bs).await?;
    let (x, y) = tokio::join!(api.commit("/new.txt", None, &a), api.commit("/new.txt", None, &b));
    let (x, y) = (x?, y?);
    let mut statuses = [x.status, y.status];
    statuses.sort_unstable();
    ensure!(statuses == [201, 409], "two creators: {x} and {y}");
    let got = content(&api, "/new.txt").await?;
    ensure!(got == b"creator A" || got == b"creator B");
    let l: VersionList = api.get(&format!("/api/v1/versions/{}", encode_path("/race.txt"))).await?.ok(200)?;
    ensure!(l.versions.len() == 11, "1 + 5 rounds × 2 versions, got {}", l.versions.len());
    Ok(())
});

backend_test!(quota, |gw| async move {
    let quota = MIB as u64;
    let (id, api) = gw.user("small", Some(quota)).await?;
    let me: Me = api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me.quota_bytes == Some(quota) && me.used_bytes == 0, "{me:?}");

    let first = data::bytes("quota-1", 600 * KIB);
    api.put_file("/one.bin", first.clone()).await?.entry(201)?;
    let me: Me = api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me.used_bytes == (600 * KIB) as u64, "used after 600 KiB: {me:?}");

    // Over the quota by PUT: 413, and nothing changed.
    let second = data::bytes("quota-2", 600 * KIB);
    let r = api.put_file("/two.bin", second.clone()).await?;
    let e = r.check_error(413, "quota_exceeded")?;
    ensure!(e.message.len() > 10, "the message should say what is over: {r}");
    // The early rejection may leave the pooled connection unusable; that is pinned separately
    // by `early_rejection_keeps_connection_usable`, so carry on with a new connection here.
    let api = api.fresh_connection()?;
    api.stat("/two.bin").await?.check_error(404, "not_found")?;
    let me2: Me = api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me2.used_bytes == me.used_bytes, "a refused upload changed the usage: {me2:?}");
    let root = api.list_all("/", None).await?;
    ensure!(root.len() == 1 && root[0].name == "one.bin", "{root:?}");
    ensure!(content(&api, "/one.bin").await? == first);

    // Over the quota by the block protocol: the block is refused as it arrives (it would count
    // as pending), and a commit of blocks never uploaded is refused for them.
    let bs = api.block_size().await?;
    let refs: Vec<BlockRef> = data::split_blocks(&second, bs)
        .iter()
        .map(|(h, b)| BlockRef { hash: h.clone(), size: b.len() as u64 })
        .collect();
    let r = api.put_block(&refs[0].hash, second.clone()).await?;
    r.check_error(413, "quota_exceeded")?;
    let api = api.fresh_connection()?;
    api.commit("/two.bin", None, &refs).await?.check_error(400, "missing_blocks")?;
    api.stat("/two.bin").await?.check_error(404, "not_found")?;
    let me3: Me = api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me3.used_bytes == me.used_bytes, "a refused upload changed the usage: {me3:?}");

    // Lifting the quota lets it through.
    let admin = gw.admin().await?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{id}"), &serde_json::json!({"quota_bytes": null}))
        .await?
        .check(200)?;
    let refs = api.upload_blocks(&second, bs).await?;
    api.commit("/two.bin", None, &refs).await?.entry(201)?;
    let me4: Me = api.get("/api/v1/me").await?.ok(200)?;
    ensure!(me4.quota_bytes.is_none() && me4.used_bytes == (1200 * KIB) as u64, "{me4:?}");
    Ok(())
});

// A PUT rejected before its body is read (here: over quota, judged from Content-Length) must not
// break the client's next request: the server either reads/drains the body or says
// `Connection: close` so the client does not reuse a connection the server is about to drop.
backend_test!(early_rejection_keeps_connection_usable, |gw| async move {
    let (_, api) = gw.user("tiny", Some(1000)).await?;
    let body = data::bytes("early rejection", 2 * MIB);
    for i in 0..10 {
        let r = api.put_file("/big.bin", body.clone()).await?;
        r.check_error(413, "quota_exceeded")?;
        let closes = r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if let Err(e) = api.get("/api/v1/me").await {
            anyhow::bail!("round {i}: the request after an early 413 (Connection: close sent: {closes}) failed: {e:#}");
        }
    }
    Ok(())
});

backend_test!(a_trailing_slash_names_a_folder, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    api.put_file("/a/y.txt", "kept").await?.check(201)?;
    // A file named as a folder: nothing read, deleted or written (before, the slash was
    // dropped and each acted on the file).
    api.req(Method::GET, "/api/v1/files/a/y.txt/").send().await?.check_error(409, "not_a_directory")?;
    api.delete("/api/v1/files/a/y.txt/").await?.check_error(409, "not_a_directory")?;
    api.req(Method::GET, "/api/v1/stat/a/y.txt/").send().await?.check_error(409, "not_a_directory")?;
    api.req(Method::PUT, "/api/v1/files/a/y.txt/").body("over").send().await?.check_error(400, "bad_request")?;
    api.req(Method::PUT, "/api/v1/files/a/z.txt/").body("new").send().await?.check_error(400, "bad_request")?;
    ensure!(api.get_file("/a/y.txt").await?.body.as_ref() == b"kept", "the file changed");
    ensure!(api.stat("/a/z.txt").await?.status == 404, "a file was made from a folder's name");
    let trash: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(trash.entries.is_empty(), "{trash:?}");
    // A folder takes the slash, as before.
    api.mkdir("/d").await?.check(201)?;
    api.req(Method::GET, "/api/v1/stat/d/").send().await?.check(200)?;
    api.delete("/api/v1/files/d/").await?.check(204)?;
    ensure!(api.stat("/d").await?.status == 404, "the folder is still there");
    Ok(())
});

// `/versions/{path}/` names a folder: on a file the listing and the restore answer 409
// `not_a_directory` and no version is made (the slash was dropped: the file's versions were
// listed and restored); on a folder, and on a missing path, the answer is the one without it.
backend_test!(versions_of_a_path_ending_in_a_slash, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let v1 = api.put_file("/a/v.txt", "one").await?.entry(201)?.version.context("version")?;
    api.put_file("/a/v.txt", "two!").await?.entry(200)?;
    let restore = serde_json::json!({ "version": v1 });

    api.get("/api/v1/versions/a/v.txt/").await?.check_error(409, "not_a_directory")?;
    api.post_json("/api/v1/versions/a/v.txt/", &restore).await?.check_error(409, "not_a_directory")?;
    api.delete(&format!("/api/v1/versions/a/v.txt/?version={v1}")).await?.check_error(409, "not_a_directory")?;
    let l: VersionList = api.get("/api/v1/versions/a/v.txt").await?.ok(200)?;
    ensure!(l.versions.len() == 2 && l.versions[0].current && l.versions[1].version == v1, "{:?}", l.versions);
    ensure!(content(&api, "/a/v.txt").await? == b"two!", "a refused restore changed the file");

    // A folder and a missing path: as without the slash.
    for (plain, slashed, status, code) in
        [("a", "a/", 409, "is_a_directory"), ("a/none.txt", "a/none.txt/", 404, "not_found")]
    {
        for path in [plain, slashed] {
            let url = format!("/api/v1/versions/{path}");
            api.get(&url).await?.check_error(status, code).with_context(|| format!("GET {url}"))?;
            api.post_json(&url, &restore).await?.check_error(status, code).with_context(|| format!("POST {url}"))?;
        }
    }
    // Without the slash the file's versions are there, and restore works.
    api.post_json("/api/v1/versions/a/v.txt", &restore).await?.entry(200)?;
    ensure!(content(&api, "/a/v.txt").await? == b"one", "restore without the slash");
    Ok(())
});

// `from` or `to` of a move or copy ending in `/` names a folder: a file source is refused with
// 409 `not_a_directory` and nothing changes (the slash was dropped: the file moved or was
// copied, `to` "z/" made a file z), as POSIX rename("file", "z/") is ENOTDIR; a folder source
// takes either slash as it takes the path without it. Bad paths are refused as before.
backend_test!(move_and_copy_with_a_trailing_slash, |gw| async move {
    let (_, api) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    api.put_file("/a/y.txt", "kept").await?.check(201)?;
    api.put_file("/a/old.txt", "old").await?.check(201)?;
    api.mkdir("/d").await?.check(201)?;
    let post = |api: &Api, route: &'static str, from: &str, to: &str, overwrite: bool| {
        let api = api.clone();
        let body = serde_json::json!({"from": from, "to": to, "overwrite": overwrite});
        async move { api.post_json(route, &body).await }
    };

    for route in ["/api/v1/move", "/api/v1/copy"] {
        for (from, to, overwrite) in [
            ("/a/y.txt/", "/a/z.txt", false),
            ("a/y.txt/", "/d/y.txt", false),
            ("/a/y.txt", "/a/z/", false),
            ("/a/y.txt", "/d/", false),
            ("/a/y.txt", "/a/old.txt/", true),
            ("/a/y.txt/", "/a/z/", true),
        ] {
            let r = post(&api, route, from, to, overwrite).await?;
            r.check_error(409, "not_a_directory").with_context(|| format!("{route} {from} → {to}"))?;
        }
        // A missing source is 404 with or without the slash.
        post(&api, route, "/a/none.txt/", "/a/z", false).await?.check_error(404, "not_found")?;
        post(&api, route, "/a/none.txt", "/a/z/", false).await?.check_error(404, "not_found")?;
        // Paths are checked as before, ahead of any lookup.
        post(&api, route, "/a//y.txt/", "/a/z", false).await?.check_error(400, "invalid_path")?;
        post(&api, route, "/a/y.txt", "/a/../z/", false).await?.check_error(400, "invalid_name")?;
        post(&api, route, "/a/y.txt/", "/a/b:c", false).await?.check_error(400, "invalid_name")?;
    }
    // Nothing changed: the files, an empty folder, nothing made, an empty trash.
    let names: Vec<String> = api.list_all("/a", None).await?.into_iter().map(|e| e.name).collect();
    ensure!(names == ["old.txt", "y.txt"], "{names:?}");
    ensure!(content(&api, "/a/y.txt").await? == b"kept" && content(&api, "/a/old.txt").await? == b"old");
    ensure!(api.list_all("/d", None).await?.is_empty(), "something went into /d");
    let trash: TrashList = api.get("/api/v1/trash").await?.ok(200)?;
    ensure!(trash.entries.is_empty(), "{trash:?}");

    // A folder source: with either slash as without.
    api.put_file("/d/in.txt", "in").await?.check(201)?;
    let e = post(&api, "/api/v1/move", "/d/", "/e", false).await?.entry(200)?;
    ensure!(e.path == "/e" && e.kind == EntryKind::Dir, "{e:?}");
    let e = post(&api, "/api/v1/copy", "/e", "/f/", false).await?.entry(201)?;
    ensure!(e.path == "/f" && e.kind == EntryKind::Dir, "{e:?}");
    let e = post(&api, "/api/v1/move", "/f/", "/g/", false).await?.entry(200)?;
    ensure!(e.path == "/g" && e.kind == EntryKind::Dir, "{e:?}");
    ensure!(content(&api, "/e/in.txt").await? == b"in" && content(&api, "/g/in.txt").await? == b"in");
    post(&api, "/api/v1/copy", "/e/", "/g/", false).await?.check_error(409, "already_exists")?;
    // Without the slash the file moves.
    post(&api, "/api/v1/move", "/a/y.txt", "/a/z.txt", false).await?.entry(200)?;

    // A shared file's own entry under `/Shared with me`, renamed by the recipient: the same.
    api.post_json("/api/v1/shares", &serde_json::json!({"path": "/a/z.txt", "username": "bob", "permission": "write"}))
        .await?
        .check(201)?;
    for (from, to) in
        [("/Shared with me/z.txt/", "/Shared with me/w.txt"), ("/Shared with me/z.txt", "/Shared with me/w.txt/")]
    {
        post(&bob, "/api/v1/move", from, to, false).await?.check_error(409, "not_a_directory")?;
    }
    let names: Vec<String> = bob.list_all("/Shared with me", None).await?.into_iter().map(|e| e.name).collect();
    ensure!(names == ["z.txt"], "{names:?}");
    post(&bob, "/api/v1/move", "/Shared with me/z.txt", "/Shared with me/w.txt", false).await?.entry(200)?;
    Ok(())
});
