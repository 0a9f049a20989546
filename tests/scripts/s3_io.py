#!/usr/bin/env python3
"""One S3 operation with boto3, for tests that compare the doors (tests/tests/doors.rs).

Usage (credentials in env S3_KEY, S3_SECRET):
  s3_io.py ENDPOINT put BUCKET KEY FILE   upload FILE as KEY (multipart above 8 MiB)
  s3_io.py ENDPOINT get BUCKET KEY FILE   download KEY into FILE
  s3_io.py ENDPOINT code BUCKET KEY       try to PUT a small body at KEY; print the error code or OK
"""
import os
import sys

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
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)
if op == "put":
    c.upload_file(sys.argv[5], bucket, key)
elif op == "get":
    c.download_file(bucket, key, sys.argv[5])
elif op == "code":
    try:
        c.put_object(Bucket=bucket, Key=key, Body=b"probe")
        print("OK")
    except ClientError as e:
        print(e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
else:
    sys.exit(f"unknown operation {op}")
