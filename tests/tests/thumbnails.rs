//! Thumbnails for the web app's listings, `GET /api/v1/thumbnails/{path}?size=N`, against every
//! backend: JPEG and PNG answers decoded here and measured, the kept thumbnail served again
//! without a decode, ETag revalidation, a changed file, refusals (text, a damaged PNG, a
//! decompression bomb, a bad size), and the scope of a file read (another user's file, a read
//! share, path tricks).

use std::io::Cursor;

use anyhow::{Context, ensure};
use image::{DynamicImage, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use nimbus_e2e::http::raw_request;
use nimbus_e2e::{Api, Resp, backend_test};
use nimbus_proto::wire::AuditList;
use serde_json::json;

fn encode(img: DynamicImage, format: ImageFormat) -> anyhow::Result<Vec<u8>> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format)?;
    Ok(out.into_inner())
}

/// A photo-like JPEG: a gradient, `w` x `h`.
fn jpeg(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let img = RgbImage::from_fn(w, h, |x, y| Rgb([(x * 255 / w) as u8, (y * 255 / h) as u8, 128]));
    encode(DynamicImage::ImageRgb8(img), ImageFormat::Jpeg)
}

/// A half-transparent PNG, `w` x `h`.
fn png_alpha(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    encode(DynamicImage::ImageRgba8(RgbaImage::from_pixel(w, h, Rgba([10, 200, 10, 120]))), ImageFormat::Png)
}

/// A PNG whose header declares `w` x `h` pixels (with a valid CRC) over one pixel of data.
fn png_bomb(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let mut out = encode(DynamicImage::ImageRgb8(RgbImage::new(1, 1)), ImageFormat::Png)?;
    out[16..20].copy_from_slice(&w.to_be_bytes());
    out[20..24].copy_from_slice(&h.to_be_bytes());
    let mut c = 0xffff_ffffu32;
    for &b in &out[12..29] {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    out[29..33].copy_from_slice(&(!c).to_be_bytes());
    Ok(out)
}

fn thumb_url(path: &str, size: Option<&str>) -> String {
    let url = format!("/api/v1/thumbnails/{}", nimbus_e2e::http::encode_path(path));
    match size {
        Some(s) => format!("{url}?size={s}"),
        None => url,
    }
}

/// The thumbnail at `path`, checked (200, an image type, private caching, an ETag) and decoded.
async fn thumbnail(api: &Api, path: &str, size: Option<&str>) -> anyhow::Result<(DynamicImage, String, String)> {
    let r = api.get(&thumb_url(path, size)).await?;
    r.check(200)?;
    let mime = r.header("content-type").context("content-type")?;
    ensure!(mime == "image/jpeg" || mime == "image/png", "{r}");
    let cc = r.header("cache-control").unwrap_or_default();
    ensure!(cc.contains("private"), "cache-control {cc:?}");
    let etag = r.header("etag").context("etag")?;
    let format = if mime == "image/png" { ImageFormat::Png } else { ImageFormat::Jpeg };
    let img = image::load_from_memory_with_format(&r.body, format).with_context(|| format!("decode {r}"))?;
    Ok((img, mime, etag))
}

/// Whether `w` x `h` fits the `size` box with the source's aspect ratio (`sw` x `sh`), to the
/// pixel, and touches the box on its longer side.
fn fits(w: u32, h: u32, size: u32, sw: u32, sh: u32) -> bool {
    let scale = f64::from(size) / f64::from(sw.max(sh));
    let (ew, eh) = (f64::from(sw) * scale, f64::from(sh) * scale);
    w <= size && h <= size && w.max(h) == size && (f64::from(w) - ew).abs() <= 1.0 && (f64::from(h) - eh).abs() <= 1.0
}

backend_test!(images_scaled_kept_and_revalidated, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    alice.put_file("/Photos/wide.jpg", jpeg(1200, 800)?).await?.check(201)?;
    alice.put_file("/Photos/tall.png", png_alpha(300, 900)?).await?.check(201)?;

    // JPEG in, JPEG out; the default box is 128.
    let (img, mime, etag) = thumbnail(&alice, "/Photos/wide.jpg", None).await?;
    ensure!(mime == "image/jpeg" && fits(img.width(), img.height(), 128, 1200, 800), "{mime} {img:?}");
    for size in [64, 256] {
        let (img, _, other) = thumbnail(&alice, "/Photos/wide.jpg", Some(&size.to_string())).await?;
        ensure!(fits(img.width(), img.height(), size, 1200, 800), "size {size}: {}x{}", img.width(), img.height());
        ensure!(other != etag, "each size has its own ETag");
    }
    // A PNG with alpha stays a PNG with alpha.
    let (img, mime, _) = thumbnail(&alice, "/Photos/tall.png", Some("64")).await?;
    ensure!(mime == "image/png" && img.color().has_alpha(), "{mime} {:?}", img.color());
    ensure!(fits(img.width(), img.height(), 64, 300, 900), "{}x{}", img.width(), img.height());
    ensure!(img.to_rgba8().get_pixel(img.width() / 2, img.height() / 2).0[3] == 120, "alpha kept");

    // Asked again: served from what was kept, nothing decoded.
    let made = gw.metric("nimbus_thumbnails_made_total").await?;
    let kept = gw.metric("nimbus_thumbnails_served_kept_total").await?;
    ensure!(made == 4.0, "four thumbnails made: {made}");
    let (_, _, again) = thumbnail(&alice, "/Photos/wide.jpg", None).await?;
    ensure!(again == etag, "{again} vs {etag}");
    ensure!(gw.metric("nimbus_thumbnails_made_total").await? == made, "decoded again");
    ensure!(gw.metric("nimbus_thumbnails_served_kept_total").await? == kept + 1.0, "not served from the kept one");
    ensure!(gw.metric("nimbus_thumbnails_kept").await? == 4.0, "the kept count");

    // The browser revalidates with the ETag: 304, no body.
    let url = thumb_url("/Photos/wide.jpg", None);
    let r = alice.req(reqwest::Method::GET, &url).header("If-None-Match", &etag).send().await?;
    r.check(304)?;
    ensure!(r.body.is_empty() && r.header("etag").as_deref() == Some(etag.as_str()), "{r}");

    // A changed file: a new ETag, a new thumbnail; the old ETag no longer matches.
    alice.put_file("/Photos/wide.jpg", jpeg(400, 1000)?).await?.check(200)?;
    let r = alice.req(reqwest::Method::GET, &url).header("If-None-Match", &etag).send().await?;
    r.check(200)?;
    let (img, _, changed) = thumbnail(&alice, "/Photos/wide.jpg", None).await?;
    ensure!(changed != etag, "the ETag did not change");
    ensure!(fits(img.width(), img.height(), 128, 400, 1000), "the old thumbnail: {}x{}", img.width(), img.height());

    // The same content under another name in the same space: the kept thumbnail, same ETag.
    alice.post_json("/api/v1/copy", &json!({"from": "/Photos/wide.jpg", "to": "/copy.jpg"})).await?.check(201)?;
    let made = gw.metric("nimbus_thumbnails_made_total").await?;
    let (_, _, copied) = thumbnail(&alice, "/copy.jpg", None).await?;
    ensure!(copied == changed, "{copied} vs {changed}");
    ensure!(gw.metric("nimbus_thumbnails_made_total").await? == made, "the copy was decoded again");

    // Deleted: no thumbnail, whatever was kept.
    alice.delete("/api/v1/files/copy.jpg").await?.check(204)?;
    alice.get(&thumb_url("/copy.jpg", None)).await?.check_error(404, "not_found")?;
    Ok(())
});

backend_test!(refusals, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    alice.put_file("/a.png", png_alpha(40, 20)?).await?.check(201)?;
    alice.put_file("/notes.txt", "just some text, not an image\n").await?.check(201)?;
    alice.put_file("/fake.png", "text with an image's name\n").await?.check(201)?;
    let mut broken = encode(DynamicImage::ImageRgb8(RgbImage::new(64, 64)), ImageFormat::Png)?;
    broken.truncate(broken.len() / 2);
    alice.put_file("/broken.png", broken).await?.check(201)?;
    alice.put_file("/bomb.png", png_bomb(60_000, 60_000)?).await?.check(201)?;
    alice.put_file("/bomb2.png", png_bomb(15_000, 15_000)?).await?.check(201)?;
    alice.put_file("/empty.png", Vec::new()).await?.check(201)?;

    for path in ["/notes.txt", "/fake.png", "/broken.png", "/bomb.png", "/bomb2.png", "/empty.png"] {
        let e = alice.get(&thumb_url(path, None)).await?.check_error(415, "unsupported_media_type")?;
        ensure!(!e.message.is_empty(), "{path}: {e:?}");
        // The same again: nothing was kept for it.
        alice.get(&thumb_url(path, Some("64"))).await?.check_error(415, "unsupported_media_type")?;
    }
    let e = alice.get(&thumb_url("/bomb.png", None)).await?.check_error(415, "unsupported_media_type")?;
    ensure!(e.message.contains("too large"), "{e:?}");
    ensure!(gw.metric("nimbus_thumbnails_kept").await? == 0.0, "a refusal was kept");
    // The gateway still answers, and makes thumbnails.
    thumbnail(&alice, "/a.png", None).await?;

    for bad in ["100", "0", "-1", "abc", "1024", ""] {
        alice.get(&thumb_url("/a.png", Some(bad))).await?.check_error(400, "bad_request")?;
    }
    alice.mkdir("/folder").await?.check(201)?;
    alice.get(&thumb_url("/folder", None)).await?.check_error(409, "is_a_directory")?;
    alice.get(&thumb_url("/missing.png", None)).await?.check_error(404, "not_found")?;
    alice.anonymous().get(&thumb_url("/a.png", None)).await?.check_error(401, "unauthorized")?;
    Ok(())
});

/// `target` sent as written, with `api`'s token.
async fn raw_get(api: &Api, target: &str) -> anyhow::Result<Resp> {
    let auth = format!("Bearer {}", api.token().context("token")?);
    raw_request(api.base(), "GET", target, &[("Authorization", auth.as_str())], b"").await
}

backend_test!(scoped_like_file_reads, |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("bob", None).await?;
    let (_, carol) = gw.user("carol", None).await?;
    alice.put_file("/Album/pic.jpg", jpeg(500, 250)?).await?.check(201)?;
    alice.put_file("/private/me.jpg", jpeg(100, 100)?).await?.check(201)?;
    let (_, _, etag) = thumbnail(&alice, "/Album/pic.jpg", None).await?;

    // Another user's file answers exactly as a missing one.
    let theirs = bob.get(&thumb_url("/Album/pic.jpg", None)).await?;
    let nothing = bob.get(&thumb_url("/Album/none.jpg", None)).await?;
    theirs.check_error(404, "not_found")?;
    ensure!(theirs.text() == nothing.text(), "{theirs} vs {nothing}");

    // Through a read share: the thumbnail; nothing outside the share.
    alice
        .post_json("/api/v1/shares", &json!({"path": "/Album", "username": "bob", "permission": "read"}))
        .await?
        .check(201)?;
    let (img, _, shared) = thumbnail(&bob, "/Shared with me/Album/pic.jpg", Some("128")).await?;
    ensure!(fits(img.width(), img.height(), 128, 500, 250) && shared == etag, "{shared} vs {etag}");
    // Not audited (docs/API.md, Thumbnails): a listing's thumbnails are not reads of the files;
    // bob's download through the share is.
    let log: AuditList = gw.admin().await?.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
    ensure!(log.entries.is_empty(), "a thumbnail was audited: {log:?}");
    bob.get_file("/Shared with me/Album/pic.jpg").await?.check(200)?;
    let log: AuditList = gw.admin().await?.get("/api/v1/admin/audit?action=share_access").await?.ok(200)?;
    ensure!(log.entries.len() == 1, "{log:?}");
    bob.get(&thumb_url("/Shared with me/private/me.jpg", None)).await?.check_error(404, "not_found")?;
    carol.get(&thumb_url("/Shared with me/Album/pic.jpg", None)).await?.check_error(404, "not_found")?;
    // Bob's own copy of the same content is his space's: made for him, not taken from alice's.
    let made = gw.metric("nimbus_thumbnails_made_total").await?;
    bob.put_file("/mine.jpg", jpeg(500, 250)?).await?.check(201)?;
    thumbnail(&bob, "/mine.jpg", None).await?;
    ensure!(gw.metric("nimbus_thumbnails_made_total").await? == made + 1.0, "a thumbnail crossed spaces");

    // Path tricks are refused (400) or stay inside the caller's space (404), as for file reads:
    // the same answer as `GET /api/v1/files/` with the same rest (an encoded slash separates, as
    // there).
    for (target, want) in [
        ("/api/v1/thumbnails/..%2falice%2fAlbum%2fpic.jpg", 400),
        ("/api/v1/thumbnails/%2e%2e/Album/pic.jpg", 400),
        ("/api/v1/thumbnails/../Album/pic.jpg", 400),
        ("/api/v1/thumbnails/Album/../Album/pic.jpg", 400),
        ("/api/v1/thumbnails/Album%2fpic.jpg", 404),
        ("/api/v1/thumbnails//Album/pic.jpg", 400),
        ("/api/v1/thumbnails/Album%5cpic.jpg", 400),
        ("/api/v1/thumbnails/Shared%20with%20me/Album/..%2f..%2fprivate%2fme.jpg", 400),
        ("/api/v1/thumbnails/Shared%20with%20me/Album%2f..%2fprivate%2fme.jpg", 400),
        ("/api/v1/thumbnails/%252e%252e/Album/pic.jpg", 404),
        ("/api/v1/thumbnails/Album/pic.jpg", 404),
    ] {
        let r = raw_get(&bob, target).await?;
        ensure!(r.status == want, "{target}: {r}");
        let file = target.replace("/api/v1/thumbnails/", "/api/v1/files/");
        let f = raw_get(&bob, &file).await?;
        ensure!(f.status == r.status && f.text() == r.text(), "{target}: {r} but {file}: {f}");
        ensure!(!r.header("content-type").unwrap_or_default().starts_with("image/"), "{target}: {r}");
    }

    // Revoked: gone at once, whatever was kept.
    let shares: serde_json::Value = alice.get("/api/v1/shares").await?.ok(200)?;
    let id = shares["shares"][0]["id"].as_i64().context("share id")?;
    alice.delete(&format!("/api/v1/shares/{id}")).await?.check(204)?;
    bob.get(&thumb_url("/Shared with me/Album/pic.jpg", None)).await?.check_error(404, "not_found")?;
    Ok(())
});
