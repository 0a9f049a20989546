//! The S3 door as a real client sees it: one boto3 operation per call
//! (tests/scripts/s3_io.py), with a user's S3 key.

use std::process::Stdio;
use std::time::{Duration, SystemTime};

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

/// A presigned URL for `method path` on the door at `endpoint` (AWS's own SigV4 signer),
/// valid `expires` from `signed_at`: any lifetime, any signing time, unlike SDKs' presigners.
pub fn presign_v4(
    endpoint: &str,
    key: &CreatedS3Key,
    method: &str,
    path: &str,
    expires: Duration,
    signed_at: SystemTime,
) -> anyhow::Result<String> {
    use aws_sigv4::http_request::{
        PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
        UriPathNormalizationMode, sign,
    };
    use aws_sigv4::sign::v4;
    let identity: aws_smithy_runtime_api::client::identity::Identity =
        aws_credential_types::Credentials::new(&key.access_key_id, &key.secret_access_key, None, None, "e2e").into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(expires);
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(signed_at)
        .settings(settings)
        .build()?
        .into();
    let url = format!("{endpoint}{path}");
    let signable = SignableRequest::new(method, &url, std::iter::empty(), SignableBody::UnsignedPayload)?;
    let (instructions, _) = sign(signable, &params)?.into_parts();
    let mut url = reqwest::Url::parse(&url)?;
    for (k, v) in instructions.params() {
        url.query_pairs_mut().append_pair(k, v);
    }
    Ok(url.to_string())
}
