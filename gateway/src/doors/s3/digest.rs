//! What an uploaded body (PutObject, UploadPart) is checked against before it is committed:
//! the length it declared, Content-MD5, and S3's flexible checksums (`x-amz-checksum-crc32`,
//! `-crc32c`, `-crc64nvme`, `-sha1`, `-sha256`), given as a header or as a trailer of an
//! aws-chunked body (current SDKs send a CRC32 trailer by default). All are computed in the one
//! pass that streams the body into the space; a mismatch refuses the upload (`BadDigest`) and
//! leaves the old version, as S3 does, instead of storing bytes the client did not send.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use s3s::TrailingHeaders;
use s3s::checksum::ChecksumHasher;
use s3s::crypto::{Checksum, Crc32, Crc32c, Crc64Nvme, Sha1, Sha256};

use crate::error::ApiError;

/// The flexible checksum algorithms, as their header names end.
const ALGORITHMS: [&str; 5] = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"];

/// The checksums a request asks to be checked: each algorithm whose header it carries or whose
/// trailer it announces (`x-amz-trailer`), with where the expected value is found.
#[derive(Default)]
pub(super) struct Wanted {
    /// (algorithm, the value of its header, if the value came in one).
    sums: Vec<(&'static str, Option<String>)>,
    trailers: Option<TrailingHeaders>,
}

impl Wanted {
    pub(super) fn of(headers: &HeaderMap, trailers: Option<TrailingHeaders>) -> Wanted {
        let announced: Vec<String> = headers
            .get_all("x-amz-trailer")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_ascii_lowercase())
            .collect();
        let mut sums = Vec::new();
        for algorithm in ALGORITHMS {
            let name = format!("x-amz-checksum-{algorithm}");
            let given = headers.get(&name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string());
            if given.is_some() || announced.contains(&name) {
                sums.push((algorithm, given));
            }
        }
        Wanted { sums, trailers }
    }

    /// A hasher for every wanted algorithm (none wanted: nothing is computed).
    fn hasher(&self) -> ChecksumHasher {
        let mut h = ChecksumHasher::default();
        for (algorithm, _) in &self.sums {
            match *algorithm {
                "crc32" => h.crc32 = Some(Crc32::new()),
                "crc32c" => h.crc32c = Some(Crc32c::new()),
                "crc64nvme" => h.crc64nvme = Some(Crc64Nvme::new()),
                "sha1" => h.sha1 = Some(Sha1::new()),
                _ => h.sha256 = Some(Sha256::new()),
            }
        }
        h
    }

    /// Compares what the body hashed to with the values given (a header's, else the trailer's,
    /// which has arrived once the body has ended).
    fn check(&self, got: &s3s::dto::Checksum) -> Result<(), ApiError> {
        for (algorithm, given) in &self.sums {
            let name = format!("x-amz-checksum-{algorithm}");
            let expected = given.clone().or_else(|| {
                let t = self.trailers.as_ref()?;
                t.read(|h| h.get(&name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())).flatten()
            });
            let Some(expected) = expected else { continue };
            let computed = match *algorithm {
                "crc32" => got.checksum_crc32.as_deref(),
                "crc32c" => got.checksum_crc32c.as_deref(),
                "crc64nvme" => got.checksum_crc64nvme.as_deref(),
                "sha1" => got.checksum_sha1.as_deref(),
                _ => got.checksum_sha256.as_deref(),
            };
            if computed != Some(expected.as_str()) {
                return Err(ApiError::HashMismatch(format!(
                    "the body does not match its {name} ({expected}); nothing was stored"
                )));
            }
        }
        Ok(())
    }
}

/// Hashes a body while it streams into the space (MD5 for the S3 ETag of a single PUT, and
/// the flexible checksums asked for), and counts its bytes.
pub(super) struct Md5Stream<S> {
    inner: S,
    hasher: Arc<Mutex<BodyDigest>>,
}

/// What [`Md5Stream`] saw of a body so far.
#[derive(Default)]
pub(super) struct BodyDigest {
    md5: Md5,
    len: u64,
    sums: ChecksumHasher,
}

impl<S> Md5Stream<S> {
    pub(super) fn new(inner: S, wanted: &Wanted) -> (Self, Arc<Mutex<BodyDigest>>) {
        let hasher = Arc::new(Mutex::new(BodyDigest { sums: wanted.hasher(), ..Default::default() }));
        (Self { inner, hasher: hasher.clone() }, hasher)
    }
}

impl<S, E> Stream for Md5Stream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let poll = self.inner.poll_next_unpin(cx);
        if let std::task::Poll::Ready(Some(Ok(b))) = &poll
            && let Ok(mut h) = self.hasher.lock()
        {
            h.md5.update(b);
            h.sums.update(b);
            h.len += b.len() as u64;
        }
        poll
    }
}

pub(super) fn finish_md5(h: &Arc<Mutex<BodyDigest>>) -> [u8; 16] {
    h.lock().map(|h| h.md5.clone().finalize().into()).unwrap_or_default()
}

/// Every check of a body that has ended: its length, Content-MD5 and the flexible checksums.
pub(super) fn check_body(
    h: &Arc<Mutex<BodyDigest>>,
    declared: Option<i64>,
    content_md5: Option<&str>,
    wanted: &Wanted,
) -> Result<(), ApiError> {
    check_length(declared, h)?;
    check_content_md5(content_md5, &finish_md5(h))?;
    let sums = h.lock().map(|mut h| std::mem::take(&mut h.sums)).unwrap_or_default();
    wanted.check(&sums.finalize())
}

/// The body ended with as many bytes as the request declared (`Content-Length`, or for a
/// signed aws-chunked body its `x-amz-decoded-content-length`, which s3s hands on as the
/// length). A chunked body cut short ends its stream cleanly, so this is what stops it from
/// being stored as a whole object.
fn check_length(declared: Option<i64>, h: &Arc<Mutex<BodyDigest>>) -> Result<(), ApiError> {
    let got = h.lock().map(|h| h.len).unwrap_or(0);
    match declared.and_then(|d| u64::try_from(d).ok()) {
        Some(want) if want != got => Err(ApiError::BadRequest(format!(
            "the body holds {got} bytes, not the {want} its length declares; nothing was stored"
        ))),
        _ => Ok(()),
    }
}

fn check_content_md5(expected: Option<&str>, got: &[u8; 16]) -> Result<(), ApiError> {
    use base64::Engine;
    let Some(exp) = expected else { return Ok(()) };
    let exp = base64::engine::general_purpose::STANDARD
        .decode(exp.trim())
        .map_err(|_| ApiError::BadRequest("Content-MD5 is not base64".into()))?;
    if exp.as_slice() != got {
        return Err(ApiError::HashMismatch("the body does not match Content-MD5; nothing was stored".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(headers: &[(&'static str, &str)], body: &[u8], declared: Option<i64>) -> Result<(), ApiError> {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(*k, v.parse().expect("header"));
        }
        let wanted = Wanted::of(&h, None);
        let (mut stream, digest) =
            Md5Stream::new(futures::stream::iter([Ok::<_, std::io::Error>(Bytes::copy_from_slice(body))]), &wanted);
        futures::executor::block_on(async { while stream.next().await.is_some() {} });
        check_body(&digest, declared, None, &wanted)
    }

    #[test]
    fn flexible_checksums_in_headers_are_checked() {
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let body = b"hello world";
        let crc32 = b64(&Crc32::checksum(body));
        let sha256 = b64(Sha256::checksum(body).as_ref());
        assert!(digest_of(&[("x-amz-checksum-crc32", &crc32)], body, Some(11)).is_ok());
        assert!(digest_of(&[("x-amz-checksum-sha256", &sha256), ("x-amz-checksum-crc32", &crc32)], body, None).is_ok());
        for wrong in
            [("x-amz-checksum-crc32", b64(&Crc32::checksum(b"other"))), ("x-amz-checksum-sha256", crc32.clone())]
        {
            assert!(
                matches!(digest_of(&[(wrong.0, &wrong.1)], body, None), Err(ApiError::HashMismatch(_))),
                "{wrong:?}"
            );
        }
        // No checksum asked for: none computed, the body passes on its length alone.
        assert!(digest_of(&[], body, Some(11)).is_ok());
        assert!(matches!(digest_of(&[], body, Some(12)), Err(ApiError::BadRequest(_))));
        assert!(matches!(digest_of(&[], body, Some(5)), Err(ApiError::BadRequest(_))));
        // A trailer announced but never sent: nothing to compare with (s3s refuses a missing
        // trailer of a signed body itself).
        assert!(digest_of(&[("x-amz-trailer", "x-amz-checksum-crc32")], body, None).is_ok());
    }
}
