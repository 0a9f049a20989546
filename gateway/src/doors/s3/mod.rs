//! The S3-compatible door (`--s3-listen`): s3s parses requests, checks SigV4 (header and
//! presigned; SigV2 and presigned URLs valid over a week are refused before, see auth.rs) and
//! writes S3's XML; this module maps the operations onto the user's space.
//!
//! Each user has one bucket, named after their username in lowercase; object keys are paths
//! in their space (`a/b.txt` is `/a/b.txt`) and go through the same `RemotePath` rules as
//! REST. Folders appear as common prefixes, empty ones as `name/` marker objects; putting a
//! `name/` object creates a folder. Operations not listed in `S3 for Door` answer
//! `NotImplemented` (s3s's default), never a wrong success.

mod auth;
mod digest;
mod error;
mod listing;
mod multipart;
mod objects;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use s3s::service::{S3Service, S3ServiceBuilder};

pub use auth::{S3User, bucket_of};

use crate::state::AppState;

/// The S3 operations over the spaces.
#[derive(Clone)]
pub struct Door {
    state: AppState,
}

/// Bucket names here are usernames (which may hold `_` or capitals), not DNS names; access
/// is decided by the access check, so any name is syntactically acceptable.
struct AnyBucketName;

impl s3s::validation::NameValidation for AnyBucketName {
    fn validate_bucket_name(&self, name: &str) -> bool {
        !name.is_empty() && name.len() <= 255
    }
}

pub fn service(state: AppState) -> S3Service {
    let mut b = S3ServiceBuilder::new(Door { state: state.clone() });
    b.set_auth(auth::KeyAuth { state: state.clone() });
    b.set_access(auth::SpaceAccess { state });
    b.set_validation(AnyBucketName);
    b.build()
}

/// The door as an axum router, so it shares the main listener's layers (request ids,
/// tracing, panics, body timeouts) and its TLS.
pub fn router(state: AppState) -> Router {
    Router::new().fallback(handle).with_state(service(state)).layer(crate::metrics::Track::S3)
}

async fn handle(State(svc): State<S3Service>, req: Request) -> Response {
    use axum::http::{Version, header};
    // SigV2 and week-long presigned URLs never reach s3s's signature checks.
    let refused = auth::refuse_unsupported(req.headers(), req.uri())
        .and_then(|()| auth::refuse_oversized_xml(req.method(), req.headers(), req.uri()));
    if let Err(e) = refused {
        return match e.to_http_response() {
            Ok(resp) => resp.map(Body::new).into_response(),
            Err(e) => {
                tracing::error!(error = ?e, "S3 door: cannot write an error");
                axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        };
    }
    // An HTTP/1 request without Content-Length or Transfer-Encoding has no body; say so
    // exactly, because the layers' body wrappers lose the size hint and s3s needs a known
    // length to check a signed payload hash.
    let http1 = matches!(req.version(), Version::HTTP_09 | Version::HTTP_10 | Version::HTTP_11);
    let no_body = http1
        && !req.headers().contains_key(header::CONTENT_LENGTH)
        && !req.headers().contains_key(header::TRANSFER_ENCODING);
    let req = req.map(|b| if no_body { s3s::Body::empty() } else { s3s::Body::http_body_unsync(b) });
    match svc.call(req).await {
        Ok(resp) => resp.map(Body::new).into_response(),
        Err(e) => {
            tracing::error!(error = ?e, "S3 door: request failed");
            axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
