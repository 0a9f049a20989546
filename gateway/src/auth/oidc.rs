//! OpenID Connect single sign-on, the protocol side (docs/IDENTITY.md): discovery, the
//! authorization URL (code flow with PKCE, `state`, `nonce`) and the code exchange with the ID
//! token's checks. Everything protocol is the `openidconnect` crate's: the ID token's signature
//! (keys from the provider's JWKS), issuer, audience, expiry and nonce are checked by it, never
//! here. What the claims mean for Nimbus (username, role, who may sign in) is api/oidc.rs's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata, CoreRevocableToken,
    CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AsyncHttpClient, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EmptyExtraTokenFields,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IdTokenFields, IssuerUrl, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, StandardErrorResponse,
    StandardTokenResponse, TokenResponse,
};

/// How long the provider's discovery document and keys are reused before they are fetched
/// again (keys rotate; a sign-in whose token names an unknown key fetches them at once).
const METADATA_TTL: Duration = Duration::from_secs(300);
/// A provider that has not answered in this long is down, as far as a sign-in is concerned.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read from the provider (discovery, keys, token response).
const MAX_RESPONSE: usize = 1024 * 1024;

/// Every claim of the ID token that the standard ones do not cover (`groups`, ...), so that any
/// claim can name the user or the role.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct OtherClaims {
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}
impl AdditionalClaims for OtherClaims {}

type IdFields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type Client = openidconnect::Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    StandardTokenResponse<IdFields, CoreTokenType>,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached or answered nonsense (discovery, keys, token).
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the code, or its answer failed a check (ID token, nonce, ...).
    #[error("{0}")]
    Refused(String),
    /// The gateway's own configuration is wrong (a URL that does not parse).
    #[error("single sign-on is misconfigured: {0}")]
    Config(String),
}

/// Whom OpenID Connect sign-in lets in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OidcProvision {
    /// Create the account on its first sign-in.
    Auto,
    /// Only accounts an administrator created beforehand (source `oidc`).
    Existing,
}

/// The settings of `--oidc-*`, checked at start.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    pub issuer: IssuerUrl,
    pub client_id: ClientId,
    pub client_secret: ClientSecret,
    pub username_claim: String,
    /// The claim and the values of it that mean administrator.
    pub admin: Option<(String, Vec<String>)>,
    pub provision: OidcProvision,
    pub redirect_url: Option<RedirectUrl>,
}

impl OidcConfig {
    /// The admin claim's name, for messages ("" when none is configured).
    pub fn admin_claim(&self) -> &str {
        self.admin.as_ref().map_or("", |(c, _)| c.as_str())
    }
}

/// What the authorization request needs kept until the callback.
pub struct Started {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

/// The checked ID token's claims, as JSON (standard and other claims alike).
pub struct Verified {
    pub claims: serde_json::Map<String, serde_json::Value>,
    pub subject: String,
}

/// Single sign-on against one provider. Cheap to share (`Arc`).
pub struct Oidc {
    pub config: OidcConfig,
    http: Http,
    metadata: tokio::sync::Mutex<Option<(Instant, Arc<CoreProviderMetadata>)>>,
}

impl Oidc {
    pub fn new(config: OidcConfig) -> anyhow::Result<Oidc> {
        let client = reqwest::Client::builder()
            // A provider's endpoints are fetched as named; following a redirect elsewhere is
            // not something an OpenID provider needs (and would widen what we can be sent to).
            .redirect(reqwest::redirect::Policy::none())
            .timeout(HTTP_TIMEOUT)
            .build()?;
        Ok(Oidc { config, http: Http(client), metadata: tokio::sync::Mutex::new(None) })
    }

    /// The provider's discovery document with its keys; fetched again after [`METADATA_TTL`],
    /// or at once with `refresh`.
    async fn metadata(&self, refresh: bool) -> Result<Arc<CoreProviderMetadata>, OidcError> {
        let mut cached = self.metadata.lock().await;
        if let Some((at, md)) = cached.as_ref()
            && !refresh
            && at.elapsed() < METADATA_TTL
        {
            return Ok(md.clone());
        }
        let md = CoreProviderMetadata::discover_async(self.config.issuer.clone(), &self.http).await.map_err(|e| {
            OidcError::Unavailable(format!("discovery at {}: {}", self.config.issuer.as_str(), chain(&e)))
        })?;
        let md = Arc::new(md);
        *cached = Some((Instant::now(), md.clone()));
        Ok(md)
    }

    fn client(&self, md: &CoreProviderMetadata, redirect: &str) -> Result<Client, OidcError> {
        let redirect = RedirectUrl::new(redirect.to_string()).map_err(|e| OidcError::Config(e.to_string()))?;
        Ok(Client::from_provider_metadata(
            md.clone(),
            self.config.client_id.clone(),
            Some(self.config.client_secret.clone()),
        )
        .set_redirect_uri(redirect))
    }

    /// The callback URL: the configured one, or `base` (how the browser reached us) + the route.
    pub fn redirect_uri(&self, base: &str) -> String {
        match &self.config.redirect_url {
            Some(u) => u.as_str().to_string(),
            None => format!("{base}{}", CALLBACK_PATH),
        }
    }

    /// The provider's authorization URL for a new flow, with a fresh state, nonce and PKCE pair.
    pub async fn start(&self, redirect_uri: &str) -> Result<Started, OidcError> {
        let md = self.metadata(false).await?;
        let client = self.client(&md, redirect_uri)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .add_scope(Scope::new("profile".into()))
            .add_scope(Scope::new("email".into()))
            .set_pkce_challenge(challenge)
            .url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Trades the callback's `code` for tokens and checks the ID token (signature, issuer,
    /// audience, expiry, nonce).
    pub async fn finish(
        &self,
        code: &str,
        verifier: &str,
        nonce: &str,
        redirect_uri: &str,
    ) -> Result<Verified, OidcError> {
        let md = self.metadata(false).await?;
        let client = self.client(&md, redirect_uri)?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| OidcError::Unavailable(format!("the provider names no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(r) => OidcError::Refused(format!(
                    "the identity provider refused the sign-in: {}{}",
                    r.error().as_ref(),
                    r.error_description().map(|d| format!(" ({d})")).unwrap_or_default()
                )),
                other => OidcError::Unavailable(format!("token request: {}", chain(&other))),
            })?;
        let id_token =
            response.id_token().ok_or_else(|| OidcError::Refused("the identity provider sent no ID token".into()))?;
        let expected = Nonce::new(nonce.to_string());
        let claims = match id_token.claims(&client.id_token_verifier(), &expected) {
            Ok(c) => c.clone(),
            // A key we do not know yet (the provider rotated its keys): fetch them once again.
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
                let md = self.metadata(true).await?;
                let client = self.client(&md, redirect_uri)?;
                id_token
                    .claims(&client.id_token_verifier(), &expected)
                    .map_err(|e| OidcError::Refused(format!("the ID token was refused: {e}")))?
                    .clone()
            }
            Err(e) => return Err(OidcError::Refused(format!("the ID token was refused: {e}"))),
        };
        let subject = claims.subject().as_str().to_string();
        let claims = match serde_json::to_value(&claims) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err(OidcError::Refused("the ID token's claims are not an object".into())),
        };
        Ok(Verified { claims, subject })
    }
}

/// The callback route (registered at the provider as `<gateway>/api/v1/auth/oidc/callback`).
pub const CALLBACK_PATH: &str = "/api/v1/auth/oidc/callback";

/// The password hash of an account that signs in only through the provider: not a PHC string,
/// so no password ever matches it. (Here, not in api/oidc.rs: the admin API creates such
/// accounts too, and api/oidc.rs signs in through api/auth.rs.)
pub const NO_PASSWORD: &str = "!oidc";

/// An error with its causes (reqwest's own message hides them).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The value of a claim as text: a string, or a number.
pub fn claim_text(claims: &serde_json::Map<String, serde_json::Value>, name: &str) -> Option<String> {
    match claims.get(name)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Does `claim` (a string, or a list of strings) hold one of `values`?
pub fn claim_has_any(claims: &serde_json::Map<String, serde_json::Value>, claim: &str, values: &[String]) -> bool {
    let matches = |v: &serde_json::Value| v.as_str().is_some_and(|s| values.iter().any(|w| w == s));
    match claims.get(claim) {
        Some(serde_json::Value::Array(items)) => items.iter().any(matches),
        Some(v) => matches(v),
        None => false,
    }
}

/// `openidconnect`'s HTTP client: our reqwest (no redirects, a timeout, a size bound).
struct Http(reqwest::Client);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HttpError(String);

impl<'c> AsyncHttpClient<'c> for Http {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let mut response = self
                .0
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpError(chain(&e)))?;
            let status = response.status();
            let headers = response.headers().clone();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| HttpError(chain(&e)))? {
                if body.len() + chunk.len() > MAX_RESPONSE {
                    return Err(HttpError(format!("the answer is larger than {MAX_RESPONSE} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            let mut out = HttpResponse::new(body);
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn admin_claim_as_list_or_string() {
        let admins = vec!["nimbus-admins".to_string(), "root".to_string()];
        assert!(claim_has_any(&claims(serde_json::json!({"groups": ["a", "nimbus-admins"]})), "groups", &admins));
        assert!(claim_has_any(&claims(serde_json::json!({"role": "root"})), "role", &admins));
        assert!(!claim_has_any(&claims(serde_json::json!({"groups": ["a"]})), "groups", &admins));
        assert!(!claim_has_any(&claims(serde_json::json!({"groups": [1, {"x": "root"}]})), "groups", &admins));
        assert!(!claim_has_any(&claims(serde_json::json!({})), "groups", &admins));
    }

    #[test]
    fn claim_text_takes_strings_and_numbers() {
        let c = claims(serde_json::json!({"a": "x", "n": 42, "l": ["y"]}));
        assert_eq!(claim_text(&c, "a").as_deref(), Some("x"));
        assert_eq!(claim_text(&c, "n").as_deref(), Some("42"));
        assert_eq!(claim_text(&c, "l"), None);
        assert_eq!(claim_text(&c, "missing"), None);
    }
}
