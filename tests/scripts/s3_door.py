#!/usr/bin/env python3
"""Drives the gateway's S3 door with boto3 (a real AWS SDK) as tests/tests/s3_door.rs asks.

Usage: s3_door.py ENDPOINT WORKDIR  (credentials in env: A_KEY A_SECRET A_BUCKET B_KEY B_SECRET B_BUCKET)

Prints one line per check; exits non-zero on the first failure. Leaves in WORKDIR:
  big.bin           the 100 MiB file uploaded as `big/big.bin` (multipart, 8 MiB parts)
  odd.bin           the 23 MiB file uploaded as `big/odd.bin` (multipart, 5 MiB parts)
"""
import hashlib
import os
import sys
import urllib.error
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.client import Config
from botocore.exceptions import ClientError

endpoint, workdir = sys.argv[1], sys.argv[2]
env = os.environ


def client(key, secret):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"),
    )


a = client(env["A_KEY"], env["A_SECRET"])
b = client(env["B_KEY"], env["B_SECRET"])
A, B = env["A_BUCKET"], env["B_BUCKET"]


def ok(what):
    print("ok", what, flush=True)


def fails(code, fn, status=None):
    try:
        fn()
    except ClientError as e:
        got = e.response["Error"]["Code"]
        st = e.response["ResponseMetadata"]["HTTPStatusCode"]
        assert got == code, f"expected {code}, got {got} ({e})"
        if status is not None:
            assert st == status, f"expected HTTP {status}, got {st}"
        return e
    raise AssertionError(f"expected {code}, but the call succeeded")


def keys(c, bucket, **kw):
    out, token = [], None
    while True:
        args = dict(Bucket=bucket, **kw)
        if token:
            args["ContinuationToken"] = token
        r = c.list_objects_v2(**args)
        out += [o["Key"] for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return out
        token = r["NextContinuationToken"]


# --- buckets -------------------------------------------------------------------------------
names = [x["Name"] for x in a.list_buckets()["Buckets"]]
assert names == [A], names
a.head_bucket(Bucket=A)
ok("ListBuckets shows only the caller's bucket; HeadBucket")

# --- put / get / head / ranges / conditionals --------------------------------------------
body = b"hello, nimbus s3 door\n" * 100
r = a.put_object(Bucket=A, Key="docs/hello.txt", Body=body, ContentType="text/plain", Metadata={"mtime": "1700000000.5"})
assert r["ETag"].strip('"') == hashlib.md5(body).hexdigest(), r["ETag"]
g = a.get_object(Bucket=A, Key="docs/hello.txt")
assert g["Body"].read() == body
assert g["ETag"] == r["ETag"] and g["ContentType"] == "text/plain" and g["Metadata"].get("mtime") == "1700000000.5", g
h = a.head_object(Bucket=A, Key="docs/hello.txt")
assert h["ContentLength"] == len(body) and h["ETag"] == r["ETag"]
part = a.get_object(Bucket=A, Key="docs/hello.txt", Range="bytes=7-12")
assert part["Body"].read() == body[7:13] and part["ResponseMetadata"]["HTTPStatusCode"] == 206
tail = a.get_object(Bucket=A, Key="docs/hello.txt", Range="bytes=-5")["Body"].read()
assert tail == body[-5:]
fails("InvalidRange", lambda: a.get_object(Bucket=A, Key="docs/hello.txt", Range=f"bytes={len(body) + 10}-"), 416)
fails("304", lambda: a.get_object(Bucket=A, Key="docs/hello.txt", IfNoneMatch=r["ETag"]))
fails("PreconditionFailed", lambda: a.get_object(Bucket=A, Key="docs/hello.txt", IfMatch='"nope"'), 412)
fails("NoSuchKey", lambda: a.get_object(Bucket=A, Key="docs/missing.txt"), 404)
empty = a.put_object(Bucket=A, Key="empty.bin", Body=b"")
assert a.get_object(Bucket=A, Key="empty.bin")["Body"].read() == b""
ok("PutObject/GetObject/HeadObject, ranges, conditionals, metadata, empty object")

# --- listing -------------------------------------------------------------------------------
for k in ["list/a.txt", "list/b.txt", "list/sub/c.txt", "list/sub/d.txt", "list/sub/deep/e.txt", "list/z.txt", "list-x.txt"]:
    a.put_object(Bucket=A, Key=k, Body=k.encode())
r = a.list_objects_v2(Bucket=A, Prefix="list/", Delimiter="/")
assert [o["Key"] for o in r["Contents"]] == ["list/a.txt", "list/b.txt", "list/z.txt"], r
assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["list/sub/"], r
all_keys = keys(a, A, Prefix="list", MaxKeys=2)
assert all_keys == ["list-x.txt", "list/a.txt", "list/b.txt", "list/sub/c.txt", "list/sub/d.txt", "list/sub/deep/e.txt", "list/z.txt"], all_keys
r = a.list_objects_v2(Bucket=A, Prefix="list/sub/", StartAfter="list/sub/c.txt")
assert [o["Key"] for o in r["Contents"]] == ["list/sub/d.txt", "list/sub/deep/e.txt"], r
r = a.list_objects(Bucket=A, Prefix="list/", Delimiter="/", MaxKeys=2)
assert r["IsTruncated"] and [o["Key"] for o in r["Contents"]] == ["list/a.txt", "list/b.txt"], r
r2 = a.list_objects(Bucket=A, Prefix="list/", Delimiter="/", Marker=r["NextMarker"])
assert [p["Prefix"] for p in r2["CommonPrefixes"]] == ["list/sub/"] and [o["Key"] for o in r2["Contents"]] == ["list/z.txt"], r2
fails("InvalidArgument", lambda: a.list_objects_v2(Bucket=A, ContinuationToken="!!not-a-token!!"), 400)
a.put_object(Bucket=A, Key="emptydir/", Body=b"")
assert "emptydir/" in keys(a, A, Prefix="emptydir")
ok("ListObjectsV2 (prefix, delimiter, paging, start-after), ListObjects v1, folder markers")

# --- copy / delete ---------------------------------------------------------------------------
c = a.copy_object(Bucket=A, Key="docs/copy.txt", CopySource={"Bucket": A, "Key": "docs/hello.txt"})
assert c["CopyObjectResult"]["ETag"] == a.head_object(Bucket=A, Key="docs/hello.txt")["ETag"], c
assert a.get_object(Bucket=A, Key="docs/copy.txt")["Body"].read() == body
# Onto itself with REPLACE: how rclone updates a modification time.
a.copy_object(Bucket=A, Key="docs/copy.txt", CopySource={"Bucket": A, "Key": "docs/copy.txt"}, MetadataDirective="REPLACE", Metadata={"mtime": "42"})
assert a.head_object(Bucket=A, Key="docs/copy.txt")["Metadata"] == {"mtime": "42"}
a.delete_object(Bucket=A, Key="docs/copy.txt")
fails("NoSuchKey", lambda: a.get_object(Bucket=A, Key="docs/copy.txt"))
a.delete_object(Bucket=A, Key="docs/never-existed.txt")  # idempotent, like S3
r = a.delete_objects(Bucket=A, Delete={"Objects": [{"Key": "list/a.txt"}, {"Key": "list/b.txt"}, {"Key": "nope"}]})
assert sorted(d["Key"] for d in r["Deleted"]) == ["list/a.txt", "list/b.txt", "nope"], r
assert "list/a.txt" not in keys(a, A, Prefix="list/")
ok("CopyObject (incl. metadata REPLACE onto itself), DeleteObject, DeleteObjects")

# --- multipart ---------------------------------------------------------------------------------
big = os.path.join(workdir, "big.bin")
with open(big, "wb") as f:
    for i in range(100):
        f.write(hashlib.sha256(str(i).encode()).digest() * (1024 * 1024 // 32))
cfg = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024, max_concurrency=4)
a.upload_file(big, A, "big/big.bin", Config=cfg)
h = a.head_object(Bucket=A, Key="big/big.bin")
assert h["ContentLength"] == 100 * 1024 * 1024 and h["ETag"].endswith('-13"'), h
down = os.path.join(workdir, "big.down")
a.download_file(A, "big/big.bin", down, Config=cfg)
assert open(down, "rb").read() == open(big, "rb").read()
ok("multipart upload of 100 MiB (8 MiB parts) and download")

# Parts that are not multiples of the block size (5 MiB), listed, then completed.
odd = os.path.join(workdir, "odd.bin")
with open(odd, "wb") as f:
    f.write(os.urandom(23 * 1024 * 1024))
data = open(odd, "rb").read()
up = a.create_multipart_upload(Bucket=A, Key="big/odd.bin", ContentType="application/x-odd")
uid = up["UploadId"]
parts = []
for n, off in enumerate(range(0, len(data), 5 * 1024 * 1024), start=1):
    chunk = data[off:off + 5 * 1024 * 1024]
    p = a.upload_part(Bucket=A, Key="big/odd.bin", UploadId=uid, PartNumber=n, Body=chunk)
    assert p["ETag"].strip('"') == hashlib.md5(chunk).hexdigest()
    parts.append({"PartNumber": n, "ETag": p["ETag"]})
lp = a.list_parts(Bucket=A, Key="big/odd.bin", UploadId=uid)
assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3, 4, 5], lp
assert any(u["UploadId"] == uid for u in a.list_multipart_uploads(Bucket=A).get("Uploads", []))
fails("InvalidPartOrder", lambda: a.complete_multipart_upload(Bucket=A, Key="big/odd.bin", UploadId=uid, MultipartUpload={"Parts": list(reversed(parts))}))
fails("InvalidPart", lambda: a.complete_multipart_upload(Bucket=A, Key="big/odd.bin", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}]}))
done = a.complete_multipart_upload(Bucket=A, Key="big/odd.bin", UploadId=uid, MultipartUpload={"Parts": parts})
want = hashlib.md5(b"".join(bytes.fromhex(p["ETag"].strip('"')) for p in parts)).hexdigest() + "-5"
assert done["ETag"].strip('"') == want, (done["ETag"], want)
g = a.get_object(Bucket=A, Key="big/odd.bin")
assert g["Body"].read() == data and g["ContentType"] == "application/x-odd"
fails("NoSuchUpload", lambda: a.list_parts(Bucket=A, Key="big/odd.bin", UploadId=uid), 404)
# Abort: the upload is gone and nothing was created.
up2 = a.create_multipart_upload(Bucket=A, Key="big/aborted.bin")
a.upload_part(Bucket=A, Key="big/aborted.bin", UploadId=up2["UploadId"], PartNumber=1, Body=b"x" * 1024)
a.abort_multipart_upload(Bucket=A, Key="big/aborted.bin", UploadId=up2["UploadId"])
fails("NoSuchUpload", lambda: a.upload_part(Bucket=A, Key="big/aborted.bin", UploadId=up2["UploadId"], PartNumber=2, Body=b"y"))
assert "big/aborted.bin" not in keys(a, A, Prefix="big/")
ok("multipart with 5 MiB parts: list parts/uploads, order and ETag checks, complete, abort")

# --- presigned URLs ---------------------------------------------------------------------------
url = a.generate_presigned_url("get_object", Params={"Bucket": A, "Key": "docs/hello.txt"}, ExpiresIn=300)
assert urllib.request.urlopen(url).read() == body
sig = url.split("X-Amz-Signature=")[1][:64]
bad = url.replace(sig, sig[:-1] + ("0" if sig[-1] != "0" else "1"))
try:
    urllib.request.urlopen(bad)
    raise AssertionError("a tampered presigned URL worked")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code
put_url = a.generate_presigned_url("put_object", Params={"Bucket": A, "Key": "docs/presigned.txt"}, ExpiresIn=300)
req = urllib.request.Request(put_url, data=b"via presigned put", method="PUT")
urllib.request.urlopen(req).read()
assert a.get_object(Bucket=A, Key="docs/presigned.txt")["Body"].read() == b"via presigned put"
ok("presigned GET and PUT; a tampered signature gets 403")

# --- wrong secret: SignatureDoesNotMatch and no side effect -----------------------------------
wrong = client(env["A_KEY"], "x" * 40)
fails("SignatureDoesNotMatch", lambda: wrong.put_object(Bucket=A, Key="docs/forged.txt", Body=b"forged"), 403)
fails("SignatureDoesNotMatch", lambda: wrong.delete_object(Bucket=A, Key="docs/hello.txt"), 403)
assert "docs/forged.txt" not in keys(a, A, Prefix="docs/")
assert a.get_object(Bucket=A, Key="docs/hello.txt")["Body"].read() == body
unknown = client("NMBAAAAAAAAAAAAAAAAA", "x" * 40)
fails("InvalidAccessKeyId", lambda: unknown.list_buckets(), 403)
ok("wrong secret -> 403 SignatureDoesNotMatch, nothing changed; unknown key -> InvalidAccessKeyId")

# --- isolation: bob's key never reaches alice's bucket -----------------------------------------
assert [x["Name"] for x in b.list_buckets()["Buckets"]] == [B]
fails("AccessDenied", lambda: b.list_objects_v2(Bucket=A), 403)
fails("AccessDenied", lambda: b.get_object(Bucket=A, Key="docs/hello.txt"), 403)
fails("AccessDenied", lambda: b.put_object(Bucket=A, Key="docs/hello.txt", Body=b"overwritten"), 403)
fails("AccessDenied", lambda: b.delete_object(Bucket=A, Key="docs/hello.txt"), 403)
fails("AccessDenied", lambda: b.copy_object(Bucket=B, Key="stolen.txt", CopySource={"Bucket": A, "Key": "docs/hello.txt"}), 403)
fails("AccessDenied", lambda: b.create_multipart_upload(Bucket=A, Key="x"), 403)
fails("NoSuchUpload", lambda: b.list_parts(Bucket=B, Key="big/odd.bin", UploadId=uid))
fails("AccessDenied", lambda: b.list_objects_v2(Bucket="no-such-bucket-anywhere"), 403)
# Bob's own space is his: the same key names his file, not alice's.
fails("NoSuchKey", lambda: b.get_object(Bucket=B, Key="docs/hello.txt"))
b.put_object(Bucket=B, Key="docs/hello.txt", Body=b"bob's own")
assert a.get_object(Bucket=A, Key="docs/hello.txt")["Body"].read() == body
assert keys(b, B) == ["docs/hello.txt"], keys(b, B)
ok("cross-user access denied (list, get, put, delete, copy source, multipart); alice unchanged")

# --- the same name rules as REST ----------------------------------------------------------------
before = sorted(keys(a, A))
for bad_key in ["../escape.txt", "a/../b.txt", "a/./b.txt", "a//b.txt", "CON", "dir/aux.txt", "a:b.txt", "what?.txt", "x\\y.txt", "trailing. ", "/abs.txt"]:
    fails("InvalidArgument", lambda k=bad_key: a.put_object(Bucket=A, Key=k, Body=b"bad"), 400)
assert sorted(keys(a, A)) == before, "a refused key changed the bucket"
ok("path tricks and Windows-invalid names refused with 400 InvalidArgument, nothing created")

print("ALL OK", flush=True)
