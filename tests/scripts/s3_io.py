#!/usr/bin/env python3
"""One S3 operation with boto3, for tests that drive the S3 door (tests/src/s3.rs).

Usage (credentials in env S3_KEY, S3_SECRET):
  s3_io.py ENDPOINT put BUCKET KEY FILE         upload FILE as KEY (multipart above 8 MiB)
  s3_io.py ENDPOINT get BUCKET KEY FILE         download KEY into FILE
  s3_io.py ENDPOINT code BUCKET KEY             try to PUT a small body at KEY; print the error code or OK
  s3_io.py ENDPOINT marker BUCKET KEY/          try to PUT an empty folder marker; print the error code or OK
  s3_io.py ENDPOINT selfcopy BUCKET KEY         try to copy KEY onto itself with new metadata; code or OK
  s3_io.py ENDPOINT read BUCKET KEY             print KEY's body (UTF-8), or the error code
  s3_io.py ENDPOINT delete BUCKET KEY           delete KEY; print OK or the error code
  s3_io.py ENDPOINT copy BUCKET KEY SRC         copy SRC (same bucket) to KEY; print OK or the error code
  s3_io.py ENDPOINT mpu BUCKET KEY FILE PART    multipart upload of FILE in PART-byte parts, all parts
                                                at once; print OK, or the first error code (the upload
                                                is aborted then)
  s3_io.py ENDPOINT race BUCKET KEY FILE PART N  a multipart upload of FILE in PART-byte parts, then N
                                                CompleteMultipartUpload requests at once; print their
                                                outcomes sorted, one per line: OK or the error code
  s3_io.py ENDPOINT list BUCKET PREFIX MAX [DELIM [START]]
                                                ListObjectsV2 page by page (max-keys MAX, following the
                                                continuation token); print one line per entry, `K key`
                                                or `P common-prefix`, then `PAGES n`. Fails on a page
                                                over MAX lines or a truncated page without a token.
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.client import Config
from botocore.exceptions import ClientError

endpoint, op, bucket, key = sys.argv[1:5]
c = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id=os.environ["S3_KEY"],
    aws_secret_access_key=os.environ["S3_SECRET"],
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, max_pool_connections=32),
)


def code(e):
    return f'{e.response["Error"]["Code"]} {e.response["ResponseMetadata"]["HTTPStatusCode"]}'


def multipart(path, part_size):
    data = open(path, "rb").read()
    parts = [data[i : i + part_size] for i in range(0, len(data), part_size)] or [b""]
    upload = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]

    def send(n):
        r = c.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n + 1, Body=parts[n])
        return {"PartNumber": n + 1, "ETag": r["ETag"]}

    try:
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            done = list(pool.map(send, range(len(parts))))
        c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
        print("OK")
    except ClientError as e:
        c.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        print(code(e))


def complete_race(path, part_size, n):
    data = open(path, "rb").read()
    parts = [data[i : i + part_size] for i in range(0, len(data), part_size)]
    upload = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for i, part in enumerate(parts):
        r = c.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=i + 1, Body=part)
        done.append({"PartNumber": i + 1, "ETag": r["ETag"]})

    def complete(_):
        try:
            c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": done})
            return "OK"
        except ClientError as e:
            return code(e)

    with ThreadPoolExecutor(max_workers=n) as pool:
        print("\n".join(sorted(pool.map(complete, range(n)))))


try:
    if op == "put":
        c.upload_file(sys.argv[5], bucket, key)
    elif op == "get":
        c.download_file(bucket, key, sys.argv[5])
    elif op == "code":
        c.put_object(Bucket=bucket, Key=key, Body=b"probe")
        print("OK")
    elif op == "marker":
        c.put_object(Bucket=bucket, Key=key, Body=b"")
        print("OK")
    elif op == "selfcopy":
        c.copy_object(
            Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key},
            MetadataDirective="REPLACE", Metadata={"touched": "yes"},
        )
        print("OK")
    elif op == "read":
        print(c.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
    elif op == "delete":
        c.delete_object(Bucket=bucket, Key=key)
        print("OK")
    elif op == "copy":
        c.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": sys.argv[5]})
        print("OK")
    elif op == "mpu":
        multipart(sys.argv[5], int(sys.argv[6]))
    elif op == "race":
        complete_race(sys.argv[5], int(sys.argv[6]), int(sys.argv[7]))
    elif op == "list":
        prefix, max_keys = key, int(sys.argv[5])
        args = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if len(sys.argv) > 6 and sys.argv[6]:
            args["Delimiter"] = sys.argv[6]
        if len(sys.argv) > 7:
            args["StartAfter"] = sys.argv[7]
        pages, out = 0, []
        while True:
            r = c.list_objects_v2(**args)
            pages += 1
            lines = [f'K {o["Key"]}' for o in r.get("Contents", [])]
            lines += [f'P {p["Prefix"]}' for p in r.get("CommonPrefixes", [])]
            if len(lines) > max_keys or r["KeyCount"] != len(lines):
                sys.exit(f"page {pages}: {len(lines)} lines, KeyCount {r['KeyCount']}, max-keys {max_keys}")
            # Keys and prefixes come in two lists; within a page they interleave in key order.
            out += sorted(lines, key=lambda l: l[2:].encode())
            if not r["IsTruncated"]:
                break
            if not r.get("NextContinuationToken"):
                sys.exit(f"page {pages} is truncated without a continuation token")
            args["ContinuationToken"] = r["NextContinuationToken"]
        sys.stdout.write("".join(l + "\n" for l in out))
        print(f"PAGES {pages}")
    else:
        sys.exit(f"unknown operation {op}")
except ClientError as e:
    if op in ("put", "get"):
        raise
    print(code(e))
