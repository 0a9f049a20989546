//! The S3-compatible door (`--s3-listen`) driven by real clients: boto3 (tests/scripts/
//! s3_door.py: buckets, objects, ranges, conditionals, listing, copy, delete, multipart of
//! 100 MiB, presigned URLs, wrong secret, cross-user denial, name rules) and rclone's s3
//! backend (sync a tree up and down and compare). Files cross doors: what S3 wrote reads
//! back identically over REST and the other way round. Revoked keys stop at once; gc aborts
//! abandoned multipart uploads.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use nimbus_e2e::ops::run_tool;
use nimbus_e2e::s3::presign_v4;
use nimbus_e2e::{GatewayOptions, backend_test};
use nimbus_proto::wire::CreatedS3Key;
use tokio::process::Command;

fn s3_opts() -> GatewayOptions {
    GatewayOptions::default().arg("--s3-listen").arg("127.0.0.1:0")
}

async fn new_key(api: &nimbus_e2e::Api) -> anyhow::Result<CreatedS3Key> {
    api.post_json("/api/v1/keys", &serde_json::json!({"name": "s3 door test"})).await?.ok(201)
}

/// rclone with an `ns3:` remote for this endpoint and key; returns stdout.
async fn rclone(endpoint: &str, key: &CreatedS3Key, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("rclone")
        .args(args)
        .env_remove("AWS_CA_BUNDLE")
        .env("RCLONE_CONFIG_NS3_TYPE", "s3")
        .env("RCLONE_CONFIG_NS3_PROVIDER", "Other")
        .env("RCLONE_CONFIG_NS3_ENDPOINT", endpoint)
        .env("RCLONE_CONFIG_NS3_REGION", "us-east-1")
        .env("RCLONE_CONFIG_NS3_ACCESS_KEY_ID", &key.access_key_id)
        .env("RCLONE_CONFIG_NS3_SECRET_ACCESS_KEY", &key.secret_access_key)
        .env("RCLONE_CONFIG_NS3_FORCE_PATH_STYLE", "true")
        .args(["--retries", "1", "--low-level-retries", "1"])
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run rclone (apt-get install rclone)")?;
    if !out.status.success() {
        bail!("rclone {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every file under `root` with its content, by relative path.
fn tree(root: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p)?));
            }
        }
    }
    out.sort();
    Ok(out)
}

backend_test!(boto3_and_rclone, opts = s3_opts(), |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let (_, bob) = gw.user("Bob_2", None).await?;
    let (ka, kb) = (new_key(&alice).await?, new_key(&bob).await?);
    let endpoint = gw.s3_endpoint()?;
    let work = tempfile::tempdir()?;

    // boto3: the whole API surface, isolation and name rules.
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/s3_door.py"))
        .arg(&endpoint)
        .arg(work.path())
        .env("A_KEY", &ka.access_key_id)
        .env("A_SECRET", &ka.secret_access_key)
        .env("A_BUCKET", "alice")
        .env("B_KEY", &kb.access_key_id)
        .env("B_SECRET", &kb.secret_access_key)
        // Usernames are case-insensitive; the bucket is the lowercased name.
        .env("B_BUCKET", "bob_2")
        .env_remove("AWS_CA_BUNDLE")
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run python3 (apt-get install python3-boto3)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains("ALL OK"),
        "s3_door.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What S3 wrote reads back identically through REST (both multipart layouts).
    for (key, local) in [("big/big.bin", "big.bin"), ("big/odd.bin", "odd.bin")] {
        let want = std::fs::read(work.path().join(local))?;
        let r = alice.get(&format!("/api/v1/files/{key}")).await?;
        r.check(200)?;
        ensure!(r.body.len() == want.len() && r.body.as_ref() == want.as_slice(), "{key} differs over REST");
    }
    // Refused S3 names are refused by REST for the same reasons.
    alice.put_file("/a:b.txt", "x").await?.check_error(400, "invalid_name")?;

    // What REST wrote reads back identically through S3 (rclone cat).
    alice.put_file("/from-rest/note.txt", "written over REST\n").await?.check(201)?;
    let cat = rclone(&endpoint, &ka, &["cat", "ns3:alice/from-rest/note.txt"]).await?;
    ensure!(cat == "written over REST\n", "rclone cat gave {cat:?}");

    // rclone: sync a tree up, then down into a fresh directory, and compare byte for byte.
    let up = work.path().join("up");
    for (rel, len) in [
        ("a.txt", 10usize),
        ("empty.bin", 0),
        ("nested/deeper/b.bin", 3 * 1024 * 1024 + 17),
        ("nested/ünïcode name.txt", 100),
        ("nested/c.bin", 9 * 1024 * 1024),
    ] {
        let p = up.join(rel);
        std::fs::create_dir_all(p.parent().context("parent")?)?;
        std::fs::write(&p, nimbus_e2e::data::bytes(rel, len))?;
    }
    rclone(&endpoint, &ka, &["sync", up.to_str().context("path")?, "ns3:alice/synced"]).await?;
    let down = work.path().join("down");
    rclone(&endpoint, &ka, &["sync", "ns3:alice/synced", down.to_str().context("path")?]).await?;
    ensure!(tree(&up)? == tree(&down)?, "the tree synced down differs from the one synced up");
    rclone(&endpoint, &ka, &["check", up.to_str().context("path")?, "ns3:alice/synced"]).await?;
    // A second sync finds nothing to do (sizes and modification times round-trip).
    let again = rclone(&endpoint, &ka, &["sync", "-v", up.to_str().context("path")?, "ns3:alice/synced"]).await;
    again?;
    // And the drive's view (REST listing) has the same files.
    let r = alice.get("/api/v1/dirs/synced/nested").await?;
    r.check(200)?;
    ensure!(r.text().contains("c.bin") && r.text().contains("deeper"), "{r}");
    // Bob's key cannot reach alice's tree through rclone either.
    ensure!(rclone(&endpoint, &kb, &["lsf", "ns3:alice/synced"]).await.is_err(), "bob listed alice's bucket");

    // An abandoned multipart upload: gc aborts it and frees its parts.
    let py = format!(
        "import boto3;from botocore.client import Config;c=boto3.client('s3',endpoint_url='{endpoint}',\
         aws_access_key_id='{}',aws_secret_access_key='{}',region_name='us-east-1',\
         config=Config(s3={{'addressing_style':'path'}}));u=c.create_multipart_upload(Bucket='alice',Key='orphan.bin');\
         c.upload_part(Bucket='alice',Key='orphan.bin',UploadId=u['UploadId'],PartNumber=1,Body=b'orphan'*100000)",
        ka.access_key_id, ka.secret_access_key
    );
    let st = Command::new("python3").args(["-c", &py]).env_remove("AWS_CA_BUNDLE").status().await?;
    ensure!(st.success(), "could not start the orphan upload");
    let kept = run_tool(&gw, "gc", &["--grace", "0", "--json"]).await?;
    kept.expect_code(0)?;
    ensure!(kept.json()?["uploads_expired"] == 0, "a fresh upload was aborted: {}", kept.stdout);
    let gc = run_tool(&gw, "gc", &["--grace", "0", "--upload-expiry", "0", "--json"]).await?;
    gc.expect_code(0)?;
    let report = gc.json()?;
    ensure!(report["uploads_expired"] == 1, "{}", gc.stdout);
    ensure!(report["blocks_freed"].as_u64().unwrap_or(0) >= 1, "the orphan's part was not freed: {}", gc.stdout);
    // Everything committed survived gc.
    let r = alice.get("/api/v1/files/big/odd.bin").await?;
    r.check(200)?;

    // Revoking a key stops it on the next request.
    alice.delete(&format!("/api/v1/keys/{}", ka.id)).await?.check(204)?;
    let err = rclone(&endpoint, &ka, &["lsf", "ns3:alice"]).await.err().context("a revoked key still works")?;
    ensure!(format!("{err:#}").contains("InvalidAccessKeyId"), "{err:#}");
    Ok(())
});

backend_test!(s3_door_is_off_by_default, only = sqlite_local, opts = GatewayOptions::default(), |gw| async move {
    ensure!(gw.s3_endpoint().is_err(), "the S3 door listens without --s3-listen");
    Ok(())
});

/// Runs `code` in python3 with `c` a boto3 client for `key` and `ClientError` imported;
/// returns stdout.
async fn boto(endpoint: &str, key: &CreatedS3Key, code: &str) -> anyhow::Result<String> {
    let prelude = format!(
        "import boto3, hashlib, base64\nfrom botocore.client import Config\nfrom botocore.exceptions import ClientError\n\
         c = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='{}', aws_secret_access_key='{}', \
         region_name='us-east-1', config=Config(s3={{'addressing_style': 'path'}}, retries={{'max_attempts': 1}}))\n\
         def code(fn):\n    try:\n        fn()\n        return 'OK'\n    except ClientError as e:\n        \
         return e.response['Error']['Code'] + ' ' + str(e.response['ResponseMetadata']['HTTPStatusCode'])\n",
        key.access_key_id, key.secret_access_key
    );
    let out = Command::new("python3")
        .args(["-c", &format!("{prelude}{code}")])
        .env_remove("AWS_CA_BUNDLE")
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run python3")?;
    ensure!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

backend_test!(quota_and_bad_input, only = sqlite_local, opts = s3_opts(), |gw| async move {
    let (carol_id, carol) = gw.user("carol", Some(1_000_000)).await?;
    let key = new_key(&carol).await?;
    let ep = gw.s3_endpoint()?;

    // The quota counts S3 writes like any other: over it, nothing is stored.
    let r =
        boto(&ep, &key, "print(code(lambda: c.put_object(Bucket='carol', Key='small.bin', Body=b'a'*400000)))").await?;
    ensure!(r == "OK", "check 1: {r}");
    let r =
        boto(&ep, &key, "print(code(lambda: c.put_object(Bucket='carol', Key='big.bin', Body=b'b'*700000)))").await?;
    ensure!(r == "QuotaExceeded 403", "check 2: {r}");
    carol.get("/api/v1/files/big.bin").await?.check(404)?;
    // Multipart parts cannot outgrow the room either.
    let r = boto(
        &ep,
        &key,
        "u = c.create_multipart_upload(Bucket='carol', Key='mp.bin')['UploadId']\n\
         print(code(lambda: c.upload_part(Bucket='carol', Key='mp.bin', UploadId=u, PartNumber=1, Body=b'c'*700000)))",
    )
    .await?;
    ensure!(r == "QuotaExceeded 403", "check 3: {r}");

    // A failed overwrite (wrong Content-MD5) leaves the old version, whole.
    let wrong_md5 = "base64.b64encode(hashlib.md5(b'other').digest()).decode()";
    let r = boto(
        &ep,
        &key,
        &format!(
            "print(code(lambda: c.put_object(Bucket='carol', Key='small.bin', Body=b'z'*10, ContentMD5={wrong_md5})))"
        ),
    )
    .await?;
    ensure!(r.starts_with("BadDigest 400"), "check 4: {r}");
    let r = carol.get("/api/v1/files/small.bin").await?;
    ensure!(r.status == 200 && r.body.len() == 400_000 && r.body.iter().all(|b| *b == b'a'), "old version gone: {r}");
    // An aws-chunked body that holds fewer or more bytes than its declared decoded length
    // (a stream cut short ends cleanly in the decoder) is refused, and nothing is stored.
    for (sent, declared) in [(1000, 2000), (1000, 10)] {
        let r = boto(&ep, &key, &chunked_put("small.bin", sent, declared, "data")).await?;
        ensure!(r.starts_with("400 ") && r.contains("InvalidArgument"), "check 4b ({sent} of {declared}): {r}");
    }
    let r = carol.get("/api/v1/files/small.bin").await?;
    ensure!(r.status == 200 && r.body.len() == 400_000, "a short chunked body replaced the object: {r}");
    // A CRC32 trailer (what current SDKs send) that does not match the body: BadDigest.
    let r = boto(&ep, &key, &chunked_put("small.bin", 1000, 1000, "b'other'")).await?;
    ensure!(r.starts_with("400 ") && r.contains("BadDigest"), "check 4b, a wrong trailer: {r}");
    let r = carol.get("/api/v1/files/small.bin").await?;
    ensure!(r.status == 200 && r.body.len() == 400_000, "a body with a wrong checksum replaced the object: {r}");
    let r = boto(&ep, &key, &chunked_put("small.bin", 1000, 1000, "data")).await?;
    ensure!(r.starts_with("200"), "check 4c, the same body whole: {r}");
    // Checksums in headers: checked too, whichever algorithm.
    let r = boto(
        &ep,
        &key,
        "print(code(lambda: c.put_object(Bucket='carol', Key='sum.bin', Body=b'hello world', ChecksumCRC32='AAAAAA==')))\n\
         print(code(lambda: c.put_object(Bucket='carol', Key='sum.bin', Body=b'hello world', ChecksumSHA256=base64.b64encode(hashlib.sha256(b'other').digest()).decode())))\n\
         for a in ['CRC32', 'SHA1', 'SHA256']:\n    print(code(lambda: c.put_object(Bucket='carol', Key='sum.bin', Body=b'hello world', ChecksumAlgorithm=a)))",
    )
    .await?;
    ensure!(r.lines().collect::<Vec<_>>() == ["BadDigest 400", "BadDigest 400", "OK", "OK", "OK"], "check 4e: {r}");
    let r = carol.get("/api/v1/files/small.bin").await?;
    ensure!(r.status == 200 && r.body.len() == 1000, "{r}");
    // Listings URL-encode keys when asked (boto3 asks by default and decodes what it gets).
    let r = boto(
        &ep,
        &key,
        "for k in ['enc/a+b.txt', 'enc/%41 x.txt']:\n    c.put_object(Bucket='carol', Key=k, Body=b'k')\n\
         v2 = [o['Key'] for o in c.list_objects_v2(Bucket='carol', Prefix='enc/')['Contents']]\n\
         v1 = [o['Key'] for o in c.list_objects(Bucket='carol', Prefix='enc/')['Contents']]\n\
         got = [c.get_object(Bucket='carol', Key=k)['Body'].read() for k in v2]\n\
         print(v2, v1, got)",
    )
    .await?;
    ensure!(r == "['enc/%41 x.txt', 'enc/a+b.txt'] ['enc/%41 x.txt', 'enc/a+b.txt'] [b'k', b'k']", "check 4d: {r}");
    for k in ["enc/a+b.txt", "enc/%41 x.txt"] {
        carol
            .delete(&format!("/api/v1/files/{}", k.replace('%', "%25").replace(' ', "%20").replace('+', "%2B")))
            .await?
            .check(204)?;
    }
    // A part sent again replaces the one before: its bytes stop counting as pending, and
    // aborting frees the rest (SDKs send parts again on retries).
    let pending = || async {
        Ok::<_, anyhow::Error>(carol.get("/api/v1/me").await?.json::<serde_json::Value>()?["usage"]["pending"].clone())
    };
    ensure!(pending().await? == 0, "pending before: {}", pending().await?);
    let upload = boto(
        &ep,
        &key,
        "u = c.create_multipart_upload(Bucket='carol', Key='re.bin')['UploadId']\n\
         c.upload_part(Bucket='carol', Key='re.bin', UploadId=u, PartNumber=1, Body=b'd'*200000)\n\
         c.upload_part(Bucket='carol', Key='re.bin', UploadId=u, PartNumber=1, Body=b'e'*200000)\n\
         print(u)",
    )
    .await?;
    ensure!(pending().await? == 200_000, "pending with the part sent twice: {}", pending().await?);
    let r = boto(
        &ep,
        &key,
        &format!("print(code(lambda: c.abort_multipart_upload(Bucket='carol', Key='re.bin', UploadId='{upload}')))"),
    )
    .await?;
    ensure!(r == "OK", "abort: {r}");
    ensure!(pending().await? == 0, "pending after the abort: {}", pending().await?);

    // Operations the door does not implement say so instead of succeeding wrongly.
    let r = boto(
        &ep,
        &key,
        "print(code(lambda: c.put_bucket_versioning(Bucket='carol', VersioningConfiguration={'Status': 'Enabled'})))",
    )
    .await?;
    ensure!(r == "NotImplemented 501", "check 5: {r}");
    let r =
        boto(&ep, &key, "print(code(lambda: c.get_object(Bucket='carol', Key='small.bin', VersionId='3')))").await?;
    ensure!(r == "NotImplemented 501", "check 6: {r}");
    // The bucket is the space: it always exists and cannot be deleted.
    let r = boto(&ep, &key, "print(code(lambda: c.create_bucket(Bucket='carol')))").await?;
    ensure!(r == "BucketAlreadyOwnedByYou 409", "check 7: {r}");
    let r = boto(&ep, &key, "print(code(lambda: c.delete_bucket(Bucket='carol')))").await?;
    ensure!(r == "AccessDenied 403", "check 8: {r}");
    // A key naming a folder: folders are prefixes, not objects.
    carol.mkdir("/folder").await?.check(201)?;
    let r = boto(&ep, &key, "print(code(lambda: c.put_object(Bucket='carol', Key='folder', Body=b'x')))").await?;
    ensure!(r == "Conflict 409", "check 9: {r}");

    // A disabled user's keys stop at once.
    let admin = gw.admin().await?;
    admin
        .patch_json(&format!("/api/v1/admin/users/{carol_id}"), &serde_json::json!({"disabled": true}))
        .await?
        .check(200)?;
    let r = boto(&ep, &key, "print(code(lambda: c.list_buckets()))").await?;
    ensure!(r == "InvalidAccessKeyId 403", "check 10: {r}");
    Ok(())
});

/// Python (for [`boto`]) that PUTs `key` as an unsigned-trailer aws-chunked body of `sent`
/// bytes declaring `declared` decoded bytes, with a CRC32 trailer of the Python expression
/// `trailer_of` (`data`: the right one), signed by botocore; prints the status and body.
fn chunked_put(key: &str, sent: usize, declared: usize, trailer_of: &str) -> String {
    format!(
        r#"import http.client, zlib, urllib.parse
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
data = b'q' * {sent}
crc = base64.b64encode(zlib.crc32({trailer_of}).to_bytes(4, 'big')).decode()
body = b'%x\r\n' % len(data) + data + b'\r\n0\r\nx-amz-checksum-crc32:' + crc.encode() + b'\r\n\r\n'
url = c.meta.endpoint_url + '/carol/{key}'
h = {{'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'content-encoding': 'aws-chunked',
     'x-amz-decoded-content-length': '{declared}', 'x-amz-trailer': 'x-amz-checksum-crc32',
     'content-length': str(len(body))}}
req = AWSRequest(method='PUT', url=url, data=body, headers=h)
SigV4Auth(c._request_signer._credentials, 's3', 'us-east-1').add_auth(req)
p = urllib.parse.urlsplit(url)
conn = http.client.HTTPConnection(p.hostname, p.port)
conn.request('PUT', p.path, body=body, headers=dict(req.headers))
r = conn.getresponse()
print(r.status, r.read().decode())
"#
    )
}

/// Signature Version 2: base64(HMAC-SHA1(secret, string to sign)).
fn sigv2(secret: &str, string_to_sign: &str) -> anyhow::Result<String> {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes())?;
    mac.update(string_to_sign.as_bytes());
    Ok(base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// `METHOD path` signed with SigV2 in the `Authorization` header (RFC 7231 date, no
/// Content-MD5, the given Content-Type, path-style resource); `(headers, url)`.
fn sigv2_header_request(
    endpoint: &str,
    access_key: &str,
    secret: &str,
    method: &str,
    path: &str,
    content_type: &str,
) -> anyhow::Result<(reqwest::header::HeaderMap, String)> {
    let date = httpdate(SystemTime::now())?;
    let signature = sigv2(secret, &format!("{method}\n\n{content_type}\n{date}\n{path}"))?;
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("date", date.parse()?);
    h.insert("authorization", format!("AWS {access_key}:{signature}").parse()?);
    if !content_type.is_empty() {
        h.insert("content-type", content_type.parse()?);
    }
    Ok((h, format!("{endpoint}{path}")))
}

/// A SigV2 presigned URL (`AWSAccessKeyId`, `Expires`, `Signature`) for `GET path`.
fn sigv2_presigned(endpoint: &str, access_key: &str, secret: &str, path: &str) -> anyhow::Result<String> {
    let expires = (SystemTime::now().duration_since(UNIX_EPOCH)? + Duration::from_secs(600)).as_secs();
    let signature = sigv2(secret, &format!("GET\n\n\n{expires}\n{path}"))?;
    let mut url = reqwest::Url::parse(&format!("{endpoint}{path}"))?;
    url.query_pairs_mut()
        .append_pair("AWSAccessKeyId", access_key)
        .append_pair("Expires", &expires.to_string())
        .append_pair("Signature", &signature);
    Ok(url.to_string())
}

fn httpdate(t: SystemTime) -> anyhow::Result<String> {
    let t = time::OffsetDateTime::from(t);
    let f = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    Ok(t.format(&f)?)
}

/// `(status, S3 error code or "")` of an answer.
async fn s3_answer(r: reqwest::Response) -> anyhow::Result<(u16, String, String)> {
    let status = r.status().as_u16();
    let body = r.text().await?;
    let code = body
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(c, _)| c.to_string())
        .unwrap_or_default();
    Ok((status, code, body))
}

backend_test!(signature_v2_refused, opts = s3_opts(), |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let key = new_key(&alice).await?;
    alice.put_file("/docs/hello.txt", "hello over REST\n").await?.check(201)?;
    let ep = gw.s3_endpoint()?;
    let http = reqwest::Client::new();
    let (ak, sk) = (key.access_key_id.as_str(), key.secret_access_key.as_str());

    // The signer is right: AWS's documented example (Signing and Authenticating REST Requests)...
    let example = sigv2(
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg",
    )?;
    ensure!(example == "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", "the SigV2 signer is wrong: {example}");
    // ...and a real S3 server that takes SigV2 (the test's MinIO) accepts what it signs.
    if let Some(minio) = gw.minio() {
        let (minio_ep, mk, ms) = (minio.endpoint(), nimbus_e2e::minio::ACCESS_KEY, nimbus_e2e::minio::SECRET_KEY);
        let (h, url) = sigv2_header_request(&minio_ep, mk, ms, "GET", "/", "")?;
        let (status, _, body) = s3_answer(http.get(url).headers(h).send().await?).await?;
        ensure!(status == 200 && body.contains("<Bucket>"), "MinIO refused our SigV2 header: {status} {body}");
        let url = sigv2_presigned(&minio_ep, mk, ms, "/")?;
        let (status, _, body) = s3_answer(http.get(url).send().await?).await?;
        ensure!(status == 200, "MinIO refused our SigV2 presigned URL: {status} {body}");
    }

    // The door: correctly V2-signed requests by a real key are refused, as AWS does.
    let refused = |what: &str, (status, code, body): (u16, String, String)| {
        ensure!(
            status == 400 && code == "InvalidRequest" && body.contains("AWS4-HMAC-SHA256"),
            "{what}: expected 400 InvalidRequest, got {status} {body}"
        );
        Ok(())
    };
    let (h, url) = sigv2_header_request(&ep, ak, sk, "GET", "/alice/docs/hello.txt", "")?;
    refused("V2 header GetObject", s3_answer(http.get(url).headers(h).send().await?).await?)?;
    let (h, url) = sigv2_header_request(&ep, ak, sk, "GET", "/", "")?;
    refused("V2 header ListBuckets", s3_answer(http.get(url).headers(h).send().await?).await?)?;
    let (h, url) = sigv2_header_request(&ep, ak, sk, "PUT", "/alice/docs/v2.txt", "text/plain")?;
    refused("V2 header PutObject", s3_answer(http.put(url).headers(h).body("via v2").send().await?).await?)?;
    alice.get("/api/v1/files/docs/v2.txt").await?.check(404)?;
    let (h, url) = sigv2_header_request(&ep, ak, sk, "DELETE", "/alice/docs/hello.txt", "")?;
    refused("V2 header DeleteObject", s3_answer(http.delete(url).headers(h).send().await?).await?)?;
    let url = sigv2_presigned(&ep, ak, sk, "/alice/docs/hello.txt")?;
    refused("V2 presigned GetObject", s3_answer(http.get(url).send().await?).await?)?;
    // A wrong V2 signature gets the same answer: nothing is learnt about the key.
    let (h, url) = sigv2_header_request(&ep, ak, "not-the-secret", "GET", "/alice/docs/hello.txt", "")?;
    refused("V2 with a wrong secret", s3_answer(http.get(url).headers(h).send().await?).await?)?;
    // The file is untouched, and the same key signing with SigV4 works.
    alice.get("/api/v1/files/docs/hello.txt").await?.check(200)?;
    let url = presign_v4(&ep, &key, "GET", "/alice/docs/hello.txt", Duration::from_secs(300), SystemTime::now())?;
    let r = http.get(url).send().await?;
    ensure!(r.status() == 200, "the key does not work with SigV4: {}", r.status());
    ensure!(r.text().await? == "hello over REST\n", "wrong body over SigV4");
    Ok(())
});

backend_test!(presigned_urls_at_most_a_week, opts = s3_opts(), |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let key = new_key(&alice).await?;
    alice.put_file("/docs/hello.txt", "hello over REST\n").await?.check(201)?;
    let ep = gw.s3_endpoint()?;
    let http = reqwest::Client::new();
    let week = Duration::from_secs(7 * 24 * 3600);
    let now = SystemTime::now();

    // Seven days exactly: a GET and a PUT work.
    let url = presign_v4(&ep, &key, "GET", "/alice/docs/hello.txt", week, now)?;
    let r = http.get(url).send().await?;
    ensure!(r.status() == 200, "a 7-day presigned GET: {}", r.status());
    ensure!(r.text().await? == "hello over REST\n", "wrong body");
    let url = presign_v4(&ep, &key, "PUT", "/alice/docs/week.txt", week, now)?;
    let r = http.put(url).body("a week").send().await?;
    ensure!(r.status() == 200, "a 7-day presigned PUT: {}", r.status());
    ensure!(alice.get("/api/v1/files/docs/week.txt").await?.text() == "a week", "the 7-day PUT did not land");

    // One second more: 403 AuthorizationQueryParametersError, for reads and writes.
    let too_long = |what: &str, (status, code, body): (u16, String, String)| {
        ensure!(
            status == 403 && code == "AuthorizationQueryParametersError" && body.contains("604800"),
            "{what}: expected 403 AuthorizationQueryParametersError, got {status} {body}"
        );
        Ok(())
    };
    let long = week + Duration::from_secs(1);
    let url = presign_v4(&ep, &key, "GET", "/alice/docs/hello.txt", long, now)?;
    too_long("7 days + 1 s GET", s3_answer(http.get(url).send().await?).await?)?;
    let url = presign_v4(&ep, &key, "PUT", "/alice/docs/long.txt", long, now)?;
    too_long("7 days + 1 s PUT", s3_answer(http.put(url).body("too long").send().await?).await?)?;
    alice.get("/api/v1/files/docs/long.txt").await?.check(404)?;
    let url = presign_v4(&ep, &key, "GET", "/alice/docs/hello.txt", Duration::from_secs(365 * 24 * 3600), now)?;
    too_long("a year", s3_answer(http.get(url).send().await?).await?)?;

    // Expired: signed an hour ago for ten minutes.
    let url = presign_v4(
        &ep,
        &key,
        "GET",
        "/alice/docs/hello.txt",
        Duration::from_secs(600),
        now - Duration::from_secs(3600),
    )?;
    let (status, code, body) = s3_answer(http.get(url).send().await?).await?;
    ensure!(status == 403 && code == "AccessDenied", "an expired URL: {status} {body}");
    // Tampered with: the lifetime is signed.
    let url = presign_v4(&ep, &key, "GET", "/alice/docs/hello.txt", Duration::from_secs(60), now)?;
    let url = url.replace("X-Amz-Expires=60", "X-Amz-Expires=600");
    let (status, code, body) = s3_answer(http.get(url).send().await?).await?;
    ensure!(status == 403 && code == "SignatureDoesNotMatch", "a stretched URL: {status} {body}");
    Ok(())
});

backend_test!(one_completion_per_upload, opts = s3_opts(), |gw| async move {
    let (_, alice) = gw.user("alice", None).await?;
    let key = new_key(&alice).await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("raced.bin");
    let content = nimbus_e2e::data::bytes("completed once", 11 << 20);
    std::fs::write(&file, &content)?;
    // Parts of 5 MiB: not multiples of the block size, so completing re-splits (the slow path).
    let out = nimbus_e2e::s3::s3_io(
        &gw.s3_endpoint()?,
        &key,
        &["race", "alice", "raced.bin", file.to_str().context("path")?, &(5 << 20).to_string(), "6"],
    )
    .await?;
    let outcomes: Vec<&str> = out.lines().collect();
    ensure!(outcomes.len() == 6, "{out}");
    ensure!(outcomes.iter().filter(|o| **o == "OK").count() == 1, "not exactly one completion: {out}");
    ensure!(
        outcomes.iter().all(|o| ["OK", "NoSuchUpload 404", "OperationAborted 409"].contains(o)),
        "the others must be told the upload is done or being completed: {out}"
    );
    let versions: nimbus_proto::wire::VersionList =
        alice.get(&format!("/api/v1/versions/{}", nimbus_e2e::encode_path("/raced.bin"))).await?.ok(200)?;
    ensure!(versions.versions.len() == 1, "one upload made {} versions", versions.versions.len());
    ensure!(alice.get_file("/raced.bin").await?.body.as_ref() == content.as_slice(), "wrong content");
    Ok(())
});
