//! A real OpenID provider per test: `oidc-provider` (npm, a certified implementation) run by
//! `tests/oidc-provider/provider.mjs` on a free loopback port, and [`Browser`], which signs in
//! through it over HTTP as a browser does (cookies, redirects, the login and consent forms).
//! `infra/install-deps.sh` installs the package (`npm ci` in tests/oidc-provider).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tokio::process::{Child, Command};

/// Where the provider's script and its `node_modules` are.
pub fn provider_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc-provider")
}

/// One client registered at the provider.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClientReg {
    pub client_id: String,
    pub client_secret: String,
    pub redirect_uris: Vec<String>,
}

pub struct OidcProvider {
    /// `http://127.0.0.1:PORT`: the issuer.
    pub issuer: String,
    child: Child,
    dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl OidcProvider {
    /// Starts the provider and waits until it listens (clients come with [`Self::setup`]).
    pub async fn start() -> anyhow::Result<OidcProvider> {
        let script_dir = provider_dir();
        ensure!(
            script_dir.join("node_modules/oidc-provider/package.json").is_file(),
            "{}/node_modules is missing: run `bash infra/install-deps.sh` (or `npm ci` there)",
            script_dir.display()
        );
        let port = crate::minio::free_port()?;
        let dir = tempfile::Builder::new().prefix("nimbus-e2e-oidc-").tempdir()?;
        let log = dir.path().join("provider.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new("node")
            .arg("provider.mjs")
            .arg(port.to_string())
            .current_dir(&script_dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .context("cannot run node (Node.js >= 20 is needed for the OpenID provider)")?;
        let issuer = format!("http://127.0.0.1:{port}");
        let p = OidcProvider { issuer, child, dir, http: reqwest::Client::builder().no_proxy().build()? };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&log).unwrap_or_default().contains("listening on") {
            if Instant::now() > deadline {
                bail!("the OpenID provider did not start:\n{}", p.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(p)
    }

    pub fn log(&self) -> String {
        crate::gateway::tail_file(&self.dir.path().join("provider.log"), 40)
    }

    /// Registers these clients (replacing any before; sign-in sessions start anew).
    pub async fn setup(&self, clients: &[ClientReg]) -> anyhow::Result<()> {
        let r = self
            .http
            .post(format!("{}/__test/setup", self.issuer))
            .json(&serde_json::json!({ "clients": clients }))
            .send()
            .await?;
        ensure!(r.status().as_u16() == 204, "provider setup: {}", r.status());
        Ok(())
    }

    /// Rewrites the ID tokens the provider hands out from now on: `none`, `signature`
    /// (changed without re-signing), `audience`, `expired`, `issuer` (re-signed with its key).
    pub async fn tamper(&self, mode: &str) -> anyhow::Result<()> {
        let r = self
            .http
            .post(format!("{}/__test/tamper", self.issuer))
            .json(&serde_json::json!({ "mode": mode }))
            .send()
            .await?;
        ensure!(r.status().as_u16() == 204, "provider tamper: {}", r.status());
        Ok(())
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The query or fragment parameters of a URL (`which`: `?` or `#`).
pub fn url_params(url: &str, which: char) -> HashMap<String, String> {
    let part = match which {
        '#' => url.split_once('#').map(|(_, f)| f).unwrap_or(""),
        _ => url.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or("")).unwrap_or(""),
    };
    reqwest::Url::parse(&format!("http://x/?{part}"))
        .map(|u| u.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
        .unwrap_or_default()
}

/// A browser without JavaScript: follows redirects one by one, keeps the cookies each host
/// sets, and submits oidc-provider's login and consent forms.
pub struct Browser {
    http: reqwest::Client,
    /// host → cookie name → value.
    cookies: HashMap<String, HashMap<String, String>>,
}

impl Browser {
    pub fn new() -> anyhow::Result<Browser> {
        let http = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build()?;
        Ok(Browser { http, cookies: HashMap::new() })
    }

    /// Goes to `url` and on through the provider, signing in as `login` (any password) and
    /// consenting, until a redirect points at a URL starting with `stop_before` (the gateway's
    /// callback, or a client's loopback): returns that URL, not yet visited.
    pub async fn sign_in(&mut self, url: &str, login: &str, stop_before: &str) -> anyhow::Result<String> {
        let mut current = reqwest::Url::parse(url)?;
        let mut form: Option<Vec<(String, String)>> = None;
        for _ in 0..30 {
            let resp = self.send(&current, form.take()).await?;
            let status = resp.status().as_u16();
            let location = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(|l| current.join(l).map(|u| u.to_string()).unwrap_or_else(|_| l.to_string()));
            let body = resp.text().await.unwrap_or_default();
            match (status, location) {
                (301..=308, Some(l)) if l.starts_with(stop_before) => return Ok(l),
                (301..=308, Some(l)) => current = reqwest::Url::parse(&l)?,
                (200, _) if body.contains("name=\"prompt\" value=\"login\"") => {
                    current = current.join(&form_action(&body)?)?;
                    form = Some(vec![
                        ("prompt".into(), "login".into()),
                        ("login".into(), login.into()),
                        ("password".into(), "any password".into()),
                    ]);
                }
                (200, _) if body.contains("name=\"prompt\" value=\"consent\"") => {
                    current = current.join(&form_action(&body)?)?;
                    form = Some(vec![("prompt".into(), "consent".into())]);
                }
                (s, l) => bail!("the sign-in stopped at {current}: HTTP {s}, location {l:?}: {body:.600}"),
            }
        }
        bail!("the sign-in went through more than 30 pages")
    }

    /// A plain GET (this browser's cookies, no redirect followed): status and `Location`.
    pub async fn visit(&mut self, url: &str) -> anyhow::Result<(u16, Option<String>, String)> {
        let resp = self.send(&reqwest::Url::parse(url)?, None).await?;
        let status = resp.status().as_u16();
        let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok((status, location, resp.text().await.unwrap_or_default()))
    }

    /// One request with this host's cookies; keeps the cookies it sets.
    pub async fn send(
        &mut self,
        url: &reqwest::Url,
        form: Option<Vec<(String, String)>>,
    ) -> anyhow::Result<reqwest::Response> {
        // Cookies belong to a host whatever the port, as in browsers.
        let host = url.host_str().unwrap_or("").to_string();
        let jar = self.cookies.entry(host).or_default();
        let mut rb = match &form {
            Some(f) => {
                // application/x-www-form-urlencoded, as a browser submits a form.
                let mut enc = reqwest::Url::parse("http://form/").expect("a constant URL");
                enc.query_pairs_mut().extend_pairs(f.iter());
                self.http
                    .post(url.clone())
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(enc.query().unwrap_or("").to_string())
            }
            None => self.http.get(url.clone()),
        };
        if !jar.is_empty() {
            let header = jar.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
            rb = rb.header("cookie", header);
        }
        let resp = rb.send().await.with_context(|| format!("GET/POST {url}"))?;
        for v in resp.headers().get_all("set-cookie") {
            let Ok(v) = v.to_str() else { continue };
            let first = v.split(';').next().unwrap_or("");
            let Some((name, value)) = first.split_once('=') else { continue };
            let expired = v.to_ascii_lowercase().contains("expires=thu, 01 jan 1970");
            if value.is_empty() || expired {
                jar.remove(name.trim());
            } else {
                jar.insert(name.trim().to_string(), value.trim().to_string());
            }
        }
        Ok(resp)
    }
}

fn form_action(html: &str) -> anyhow::Result<String> {
    let start = html.find("action=\"").context("a form without an action")? + "action=\"".len();
    let end = html[start..].find('"').context("an unterminated action")?;
    Ok(html[start..start + end].replace("&amp;", "&"))
}
