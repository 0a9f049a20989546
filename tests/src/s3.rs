//! The S3 door as a real client sees it: one boto3 operation per call
//! (tests/scripts/s3_io.py), with a user's S3 key.

use std::process::Stdio;

use anyhow::{Context, ensure};
use nimbus_proto::wire::CreatedS3Key;
use tokio::process::Command;

use crate::Api;

/// A new S3 key for `api`'s user.
pub async fn new_key(api: &Api) -> anyhow::Result<CreatedS3Key> {
    api.post_json("/api/v1/keys", &serde_json::json!({"name": "e2e"})).await?.ok(201)
}

/// Runs tests/scripts/s3_io.py against `endpoint` with `key`; returns its stdout, trimmed.
/// Fails when the script does (an S3 error it does not report as output).
pub async fn s3_io(endpoint: &str, key: &CreatedS3Key, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/s3_io.py"))
        .arg(endpoint)
        .args(args)
        .env("S3_KEY", &key.access_key_id)
        .env("S3_SECRET", &key.secret_access_key)
        .env_remove("AWS_CA_BUNDLE")
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run python3 (apt-get install python3-boto3)")?;
    ensure!(out.status.success(), "s3_io.py {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
