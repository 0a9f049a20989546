//! [`Desktop`]: the app's state and every command, independent of Tauri.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nimbus_client::wire::LoginResponse;
use nimbus_client::{Client, ClientOptions};
use nimbus_mount::session::{MountConfig, Mounted};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, broadcast};

use crate::api::*;
use crate::error::DesktopError;
use crate::token::{self, TokenStore};

/// How long an unmount may spend uploading pending writes before it lets go anyway (they
/// stay in the journal for the next mount).
const UNMOUNT_UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// How often the status loop looks for changes.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// Where the app keeps things, and how it mounts.
#[derive(Debug, Clone)]
pub struct DesktopConfig {
    /// Account file, trusted certificates, the token file fallback, mount status files.
    pub config_dir: PathBuf,
    /// Parent of each mount's local block cache and write-back journal.
    pub cache_dir: PathBuf,
    /// Used when `mount` names no location.
    pub default_mountpoint: PathBuf,
    /// `None`: the keychain if one answers, else the file fallback (see [`TokenStore::detect`]).
    pub token_store: Option<TokenStore>,
    /// Names the device token on the server and this device's conflict copies.
    pub device_name: String,
    pub cache_size: u64,
    pub cache_mem: u64,
}

impl DesktopConfig {
    /// The platform's directories (`$NIMBUS_CONFIG_DIR`, `$NIMBUS_CACHE_DIR` override them).
    pub fn platform_default() -> Result<DesktopConfig, DesktopError> {
        let dir = |var: &str, base: Option<PathBuf>| -> Result<PathBuf, DesktopError> {
            match std::env::var_os(var) {
                Some(d) if !d.is_empty() => Ok(PathBuf::from(d).join("nimbus-desktop")),
                _ => base
                    .map(|b| b.join("nimbus-desktop"))
                    .ok_or_else(|| DesktopError::Storage(format!("cannot find a directory for the app; set {var}"))),
            }
        };
        let home = dirs::home_dir().ok_or_else(|| DesktopError::Storage("cannot find the home directory".into()))?;
        Ok(DesktopConfig {
            config_dir: dir("NIMBUS_CONFIG_DIR", dirs::config_dir())?,
            cache_dir: dir("NIMBUS_CACHE_DIR", dirs::cache_dir())?,
            default_mountpoint: home.join("Nimbus"),
            token_store: None,
            device_name: format!("Nimbus Drive on {}", host_name()),
            cache_size: 10 << 30,
            cache_mem: 64 << 20,
        })
    }
}

pub(crate) fn host_name() -> String {
    ["HOSTNAME", "COMPUTERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "device".into())
}

/// `account.json`: who is signed in where (never the token).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedAccount {
    server_url: String,
    username: String,
    #[serde(default)]
    ca_cert: Option<PathBuf>,
    #[serde(default)]
    fingerprint: Option<String>,
    #[serde(default)]
    last_mountpoint: Option<String>,
}

/// A server reached by a sign-in, before any credentials.
struct Server {
    url: String,
    client: Client,
    /// The certificate file to trust (a self-signed one trusted by its fingerprint).
    ca_cert: Option<PathBuf>,
    fingerprint: Option<String>,
}

enum Reached {
    Server(Server),
    /// Nothing signed in: the user must answer this first.
    Ask(SignInOutcome),
}

struct Session {
    saved: SavedAccount,
    client: Client,
    key: String,
}

#[derive(Default)]
struct State {
    session: Option<Session>,
    mount: Option<Mounted>,
    last_location: Option<String>,
    last_error: Option<String>,
    /// The last quota seen: kept while offline.
    quota: Option<Quota>,
}

struct Inner {
    cfg: DesktopConfig,
    tokens: TokenStore,
    state: Mutex<State>,
    events: broadcast::Sender<DesktopEvent>,
    last_status: std::sync::Mutex<Option<Status>>,
}

/// The app. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Desktop {
    inner: Arc<Inner>,
}

impl Desktop {
    /// Opens the app's state: picks the token store and restores a saved sign-in (without
    /// contacting the server: the app must start offline too).
    pub async fn open(mut cfg: DesktopConfig) -> Result<Desktop, DesktopError> {
        nimbus_client::private_file::create_private_dir(&cfg.config_dir)
            .map_err(|e| DesktopError::Storage(format!("cannot create {}: {e}", cfg.config_dir.display())))?;
        let tokens = match cfg.token_store.take() {
            Some(t) => t,
            None => {
                let dir = cfg.config_dir.join("tokens");
                tokio::task::spawn_blocking(move || TokenStore::detect(&dir))
                    .await
                    .map_err(|e| DesktopError::Storage(e.to_string()))?
            }
        };
        let (events, _) = broadcast::channel(64);
        let desktop = Desktop {
            inner: Arc::new(Inner {
                cfg,
                tokens,
                state: Mutex::new(State::default()),
                events,
                last_status: std::sync::Mutex::new(None),
            }),
        };
        desktop.restore().await?;
        Ok(desktop)
    }

    fn account_file(&self) -> PathBuf {
        self.inner.cfg.config_dir.join("account.json")
    }

    async fn restore(&self) -> Result<(), DesktopError> {
        let path = self.account_file();
        let saved: SavedAccount = match std::fs::read(&path) {
            Ok(b) => match serde_json::from_slice(&b) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "the saved account is damaged; signing in again is needed");
                    return Ok(());
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(DesktopError::Storage(format!("cannot read {}: {e}", path.display()))),
        };
        let key = token::account_key(&saved.server_url, &saved.username);
        let Some(tok) = self.load_token(&key).await? else { return Ok(()) };
        let client = make_client(&saved.server_url, saved.ca_cert.clone(), Some(tok))?;
        let mut st = self.inner.state.lock().await;
        st.last_location = saved.last_mountpoint.clone();
        st.session = Some(Session { saved, client, key });
        Ok(())
    }

    async fn load_token(&self, key: &str) -> Result<Option<String>, DesktopError> {
        let (store, key) = (self.inner.tokens.clone(), key.to_string());
        tokio::task::spawn_blocking(move || store.load(&key))
            .await
            .map_err(|e| DesktopError::Storage(e.to_string()))?
            .map_err(Into::into)
    }

    async fn blocking_tokens<T: Send + 'static>(
        &self,
        f: impl FnOnce(&TokenStore) -> Result<T, token::TokenError> + Send + 'static,
    ) -> Result<T, DesktopError> {
        let store = self.inner.tokens.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| DesktopError::Storage(e.to_string()))?
            .map_err(Into::into)
    }

    /// Which token store is in use (for a test or a log line; the UI reads `Account`).
    pub fn token_store(&self) -> &TokenStore {
        &self.inner.tokens
    }

    /// The store's status stream: every change of [`Status`] while [`Desktop::run_status_loop`] runs,
    /// and after every command.
    pub fn subscribe(&self) -> broadcast::Receiver<DesktopEvent> {
        self.inner.events.subscribe()
    }

    /// Publishes the status every [`STATUS_EVERY`] when it changed. Runs until the app ends.
    pub async fn run_status_loop(self) {
        loop {
            self.publish().await;
            tokio::time::sleep(STATUS_EVERY).await;
        }
    }

    /// Computes the status and sends it as an event if it differs from the last one sent.
    async fn publish(&self) -> Status {
        let status = self.status().await;
        let changed = {
            let mut last = self.inner.last_status.lock().unwrap_or_else(|p| p.into_inner());
            let changed = last.as_ref() != Some(&status);
            *last = Some(status.clone());
            changed
        };
        if changed {
            // No receiver (no window yet) is fine: the UI asks with `get_status` when it starts.
            let _ = self.inner.events.send(DesktopEvent::StatusChanged { status: status.clone() });
        }
        status
    }

    // ---- sign-in ----

    pub async fn sign_in(&self, req: SignInRequest) -> Result<SignInOutcome, DesktopError> {
        if self.inner.state.lock().await.session.is_some() {
            return Err(DesktopError::Invalid("already signed in: sign out first".into()));
        }
        let url = nimbus_client::normalize_base_url(req.server_url.trim())
            .map_err(|e| DesktopError::Invalid(format!("not a server address: {e}")))?;
        let username = req.username.trim().to_string();
        if username.is_empty() || req.password.is_empty() {
            return Err(DesktopError::Invalid("enter a username and a password".into()));
        }
        let server = match self.reach(url, req.trusted_fingerprint.as_deref()).await? {
            Reached::Server(s) => s,
            Reached::Ask(outcome) => return Ok(outcome),
        };
        let resp = match server.client.login(&username, &req.password, Some(&self.inner.cfg.device_name)).await {
            Ok(r) => r,
            Err(e) if e.is_unauthorized() => return Err(DesktopError::BadCredentials),
            Err(e) if e.is_transport() => {
                return Err(DesktopError::Unreachable { url: server.url, why: e.to_string() });
            }
            Err(e) => return Err(DesktopError::Server(e.to_string())),
        };
        self.finish_sign_in(server, resp).await
    }

    /// Single sign-on through the system browser with a loopback redirect (RFC 8252), the
    /// same flow as `nimbus login --sso` (`nimbus_client::sso`): `open` is given the address
    /// to open (the app passes `nimbus_client::sso::open_browser`); it ends with an ordinary
    /// device token, kept like a password sign-in's. Waits until the browser comes back (at
    /// most `nimbus_client::sso::BROWSER_TIMEOUT`).
    pub async fn sign_in_sso(
        &self,
        req: SsoSignInRequest,
        open: impl FnOnce(&str) -> bool,
    ) -> Result<SignInOutcome, DesktopError> {
        if self.inner.state.lock().await.session.is_some() {
            return Err(DesktopError::Invalid("already signed in: sign out first".into()));
        }
        let url = nimbus_client::normalize_base_url(req.server_url.trim())
            .map_err(|e| DesktopError::Invalid(format!("not a server address: {e}")))?;
        let server = match self.reach(url, req.trusted_fingerprint.as_deref()).await? {
            Reached::Server(s) => s,
            Reached::Ask(outcome) => return Ok(outcome),
        };
        match server.client.auth_methods().await {
            Ok(m) if !m.oidc => {
                return Err(DesktopError::Invalid(format!(
                    "{} does not offer single sign-on; sign in with a username and password",
                    server.url
                )));
            }
            Err(e) if e.is_transport() => {
                return Err(DesktopError::Unreachable { url: server.url, why: e.to_string() });
            }
            // An older gateway without the route: the start page says so in the browser.
            _ => {}
        }
        let resp = match nimbus_client::sso::sign_in(&server.client, &self.inner.cfg.device_name, open).await {
            Ok(r) => r,
            Err(e) if e.is_transport() => {
                return Err(DesktopError::Unreachable { url: server.url, why: e.to_string() });
            }
            Err(nimbus_client::Error::Invalid(m)) => return Err(DesktopError::Invalid(m)),
            Err(e) => return Err(DesktopError::Server(e.to_string())),
        };
        self.finish_sign_in(server, resp).await
    }

    /// Reaches the server at `url` (normalized): a client that trusts it, or, for a
    /// certificate no authority vouches for, the question to ask (trust its fingerprint?).
    async fn reach(&self, url: String, trusted_fingerprint: Option<&str>) -> Result<Reached, DesktopError> {
        let cert_path = self.cert_path(&url);
        let known_cert = cert_path.exists().then(|| cert_path.clone());
        let mut client = make_client(&url, known_cert.clone(), None)?;
        let mut fingerprint = None;
        if let Err(e) = client.info().await {
            if !e.is_certificate_problem() {
                return Err(DesktopError::Unreachable { url, why: e.to_string() });
            }
            // An untrusted (self-signed) certificate: trust it only by its fingerprint.
            let cert = nimbus_client::fetch_certificate(&url)
                .await
                .map_err(|e| DesktopError::Unreachable { url: url.clone(), why: e.to_string() })?;
            match trusted_fingerprint {
                Some(fp) if cert.matches(fp) => {}
                Some(_) if known_cert.is_none() => {
                    // The user accepted another fingerprint than the server now shows: ask again.
                    return Ok(Reached::Ask(SignInOutcome::UntrustedCertificate {
                        server_url: url,
                        fingerprint: cert.fingerprint,
                    }));
                }
                Some(_) => return Err(DesktopError::CertificateChanged { fingerprint: cert.fingerprint }),
                None if known_cert.is_some() => {
                    return Err(DesktopError::CertificateChanged { fingerprint: cert.fingerprint });
                }
                None => {
                    return Ok(Reached::Ask(SignInOutcome::UntrustedCertificate {
                        server_url: url,
                        fingerprint: cert.fingerprint,
                    }));
                }
            }
            let dir = self.inner.cfg.config_dir.join("certs");
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&cert_path, cert.to_pem()))
                .map_err(|e| DesktopError::Storage(format!("cannot save the certificate: {e}")))?;
            client = make_client(&url, Some(cert_path.clone()), None)?;
            client.info().await.map_err(|e| DesktopError::Unreachable {
                url: url.clone(),
                why: format!("the trusted certificate does not verify ({e}); the server name may not match it"),
            })?;
            fingerprint = Some(cert.fingerprint);
        } else if known_cert.is_some() {
            fingerprint = std::fs::read_to_string(&cert_path).ok().and_then(|pem| pem_fingerprint(&pem));
        }
        let ca_cert = known_cert.or(fingerprint.as_ref().map(|_| cert_path));
        Ok(Reached::Server(Server { url, client, ca_cert, fingerprint }))
    }

    /// Keeps the device token of a sign-in (keychain or file) and the account, and makes the
    /// session current.
    async fn finish_sign_in(&self, server: Server, resp: LoginResponse) -> Result<SignInOutcome, DesktopError> {
        let Server { url, client, ca_cert, fingerprint } = server;
        let saved = SavedAccount {
            server_url: url,
            username: resp.user.username.clone(),
            ca_cert,
            fingerprint,
            last_mountpoint: self.inner.state.lock().await.last_location.clone(),
        };
        let key = token::account_key(&saved.server_url, &saved.username);
        let tok = resp.token.clone();
        let k = key.clone();
        if let Err(e) = self.blocking_tokens(move |s| s.save(&k, &tok)).await {
            // Keep nothing half-done: the token would stay valid on the server otherwise.
            let _ = client.clone().with_token(resp.token).logout().await;
            return Err(e);
        }
        self.save_account(&saved)?;
        let account = self.account_of(&saved, &key);
        let client = client.with_token(resp.token);
        self.inner.state.lock().await.session = Some(Session { saved, client, key });
        self.publish().await;
        Ok(SignInOutcome::SignedIn { account })
    }

    fn cert_path(&self, url: &str) -> PathBuf {
        let safe: String = url.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        self.inner.cfg.config_dir.join("certs").join(format!("{safe}.pem"))
    }

    fn save_account(&self, saved: &SavedAccount) -> Result<(), DesktopError> {
        let path = self.account_file();
        let json = serde_json::to_vec_pretty(saved).map_err(|e| DesktopError::Storage(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| DesktopError::Storage(format!("cannot write {}: {e}", path.display())))
    }

    fn account_of(&self, saved: &SavedAccount, key: &str) -> Account {
        Account {
            server_url: saved.server_url.clone(),
            username: saved.username.clone(),
            token_storage: self.inner.tokens.kind(key),
            certificate_fingerprint: saved.fingerprint.clone(),
        }
    }

    /// The signed-in client (for tests and the shell's diagnostics).
    pub async fn client(&self) -> Option<Client> {
        self.inner.state.lock().await.session.as_ref().map(|s| s.client.clone())
    }

    // ---- sign-out ----

    /// Revokes the device token on the server and forgets it here. While the drive has
    /// pending uploads it refuses (unless `force`); a mounted drive is unmounted first, which
    /// uploads what it can.
    pub async fn sign_out(&self, req: SignOutRequest) -> Result<SignOutOutcome, DesktopError> {
        let mut st = self.inner.state.lock().await;
        if st.session.is_none() {
            return Err(DesktopError::NotSignedIn);
        }
        if let Some(m) = &st.mount {
            let pending = m.status().await.map(|s| s.pending_uploads).unwrap_or(0);
            if pending > 0 && !req.force {
                return Ok(SignOutOutcome::PendingUploads { pending: u32::try_from(pending).unwrap_or(u32::MAX) });
            }
        }
        let mount = st.mount.take();
        let Some(session) = st.session.take() else { return Err(DesktopError::NotSignedIn) };
        // Unmounting uploads first and can take long: not under the lock.
        drop(st);
        let mut warning = None;
        if let Some(m) = mount
            && let Err(e) = stop_mount(m).await
        {
            warning = Some(e.to_string());
        }
        let revoked = match session.client.logout().await {
            Ok(()) => true,
            // Already expired or revoked.
            Err(e) if e.is_unauthorized() => true,
            Err(e) => {
                warning =
                    Some(format!("could not revoke the token on the server ({e}); it stays valid until it expires"));
                false
            }
        };
        let key = session.key.clone();
        self.blocking_tokens(move |s| s.delete(&key)).await?;
        match std::fs::remove_file(self.account_file()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(DesktopError::Storage(e.to_string())),
        }
        {
            let mut st = self.inner.state.lock().await;
            st.quota = None;
            st.last_error = None;
        }
        self.publish().await;
        Ok(SignOutOutcome::SignedOut { revoked, warning })
    }

    // ---- mount manager ----

    pub async fn mount(&self, req: MountRequest) -> Result<MountState, DesktopError> {
        let mut st = self.inner.state.lock().await;
        if st.session.is_none() {
            return Err(DesktopError::NotSignedIn);
        }
        if let Some(m) = &st.mount {
            if m.is_serving() {
                return Err(DesktopError::AlreadyMounted(m.config().mountpoint.display().to_string()));
            }
            // The kernel session ended behind our back (e.g. `fusermount -u`): start anew.
            if let Some(m) = st.mount.take() {
                let _ = stop_mount(m).await;
            }
        }
        let Some(session) = &st.session else { return Err(DesktopError::NotSignedIn) };
        let mountpoint = match req.mountpoint.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => self.inner.cfg.default_mountpoint.clone(),
        };
        let mountpoint = std::path::absolute(&mountpoint)
            .map_err(|e| DesktopError::Invalid(format!("`{}` is not a usable path: {e}", mountpoint.display())))?;
        #[cfg(unix)]
        std::fs::create_dir_all(&mountpoint)
            .map_err(|e| DesktopError::Mount(format!("cannot create the folder {}: {e}", mountpoint.display())))?;
        let key = mount_key(&mountpoint);
        let status_dir = self.inner.cfg.config_dir.join("mounts");
        std::fs::create_dir_all(&status_dir).map_err(|e| DesktopError::Storage(e.to_string()))?;
        let cfg = MountConfig {
            mountpoint: mountpoint.clone(),
            cache_dir: self.inner.cfg.cache_dir.join(format!("drive-{key}")),
            cache_size: self.inner.cfg.cache_size,
            cache_mem: self.inner.cfg.cache_mem,
            upload_delay: nimbus_mount::session::DEFAULT_UPLOAD_DELAY,
            status_file: status_dir.join(format!("{key}.json")),
            host: host_name(),
        };
        let client = session.client.clone();
        let mounted = tokio::task::spawn_blocking(move || Mounted::start(client, cfg))
            .await
            .map_err(|e| DesktopError::Mount(e.to_string()))?
            .map_err(|e| DesktopError::Mount(e.to_string()))?;
        let location = mountpoint.display().to_string();
        st.mount = Some(mounted);
        st.last_location = Some(location.clone());
        st.last_error = None;
        if let Some(s) = st.session.as_mut() {
            s.saved.last_mountpoint = Some(location.clone());
            let saved = s.saved.clone();
            if let Err(e) = self.save_account(&saved) {
                tracing::warn!(error = %e, "cannot remember the mount point");
            }
        }
        drop(st);
        self.publish().await;
        Ok(MountState { mounted: true, location: Some(location) })
    }

    /// Uploads pending writes, then unmounts. An upload that cannot finish is reported as an
    /// error, but the drive is unmounted all the same (the writes stay in the journal).
    pub async fn unmount(&self) -> Result<MountState, DesktopError> {
        let m = self.inner.state.lock().await.mount.take().ok_or(DesktopError::NotMounted)?;
        let location = m.config().mountpoint.display().to_string();
        let result = stop_mount(m).await;
        self.publish().await;
        result?;
        Ok(MountState { mounted: false, location: Some(location) })
    }

    pub async fn retry_uploads(&self) -> Result<u32, DesktopError> {
        let st = self.inner.state.lock().await;
        let m = st.mount.as_ref().ok_or(DesktopError::NotMounted)?;
        let n = m.retry_uploads().await.map_err(|e| DesktopError::Mount(e.to_string()))?;
        drop(st);
        self.publish().await;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Retries, saves a copy of, or discards the refused change at `req.path`.
    pub async fn resolve_problem(&self, req: ResolveRequest) -> Result<ResolveReply, DesktopError> {
        let st = self.inner.state.lock().await;
        let m = st.mount.as_ref().ok_or(DesktopError::NotMounted)?;
        let r = m.resolve(req.path, req.action).await;
        drop(st);
        self.publish().await;
        match r {
            Ok(message) => Ok(ResolveReply { ok: true, message }),
            Err(e) => Err(DesktopError::Mount(e.to_string())),
        }
    }

    /// Drops the drive's cached blocks (pending writes are kept).
    pub async fn free_cache(&self) -> Result<(), DesktopError> {
        let st = self.inner.state.lock().await;
        let m = st.mount.as_ref().ok_or(DesktopError::NotMounted)?;
        m.free_cache().map_err(|e| DesktopError::Mount(e.to_string()))?;
        drop(st);
        self.publish().await;
        Ok(())
    }

    /// The mounted folder, to open in the file manager.
    pub async fn location(&self) -> Result<PathBuf, DesktopError> {
        let st = self.inner.state.lock().await;
        st.mount.as_ref().map(|m| m.config().mountpoint.clone()).ok_or(DesktopError::NotMounted)
    }

    /// Opens the mounted folder in the platform's file manager.
    pub async fn open_in_file_manager(&self) -> Result<(), DesktopError> {
        let path = self.location().await?;
        open_path(&path)
    }

    // ---- status ----

    pub async fn status(&self) -> Status {
        let mut st = self.inner.state.lock().await;
        if st.mount.as_ref().is_some_and(|m| !m.is_serving())
            && let Some(m) = st.mount.take()
        {
            st.last_error =
                Some(format!("the drive at {} was unmounted from outside the app", m.config().mountpoint.display()));
            let _ = stop_mount(m).await;
        }
        let Some(session) = &st.session else {
            return Status {
                account: None,
                mount: MountState { mounted: false, location: st.last_location.clone() },
                connectivity: Connectivity::SignedOut,
                quota: None,
                activity: Activity::default(),
                cache: None,
                last_error: st.last_error.clone(),
            };
        };
        let account = self.account_of(&session.saved, &session.key);
        let client = session.client.clone();
        // Not under the lock: an unreachable server must not hold up the commands.
        drop(st);
        let me = tokio::time::timeout(Duration::from_secs(10), client.me()).await;
        let mut st = self.inner.state.lock().await;
        if st.session.as_ref().is_none_or(|s| s.key != account_key(&account)) {
            // Signed out (or in as someone else) meanwhile: start over with the new state.
            drop(st);
            return Box::pin(self.status()).await;
        }
        let mut connectivity = match &me {
            Ok(Ok(_)) => Connectivity::Online,
            _ => Connectivity::Offline,
        };
        if let Ok(Ok(me)) = me {
            st.quota = Some(Quota { used_bytes: me.used_bytes, total_bytes: me.quota_bytes });
        }
        let mut activity = Activity::default();
        let mut cache = None;
        let mut mount = MountState { mounted: false, location: st.last_location.clone() };
        if let Some(m) = &st.mount {
            mount = MountState { mounted: true, location: Some(m.config().mountpoint.display().to_string()) };
            match m.status().await {
                Ok(ms) => {
                    if ms.state == nimbus_mount::core::Connectivity::Offline {
                        connectivity = Connectivity::Offline;
                    }
                    let n = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
                    activity = Activity {
                        pending_uploads: u32::try_from(ms.pending_uploads).unwrap_or(u32::MAX),
                        uploads_in_flight: n(ms.activity.uploads_in_flight),
                        commits_in_progress: n(ms.activity.commits_in_progress),
                        errors: ms.activity.errors,
                        conflicts: ms
                            .activity
                            .conflicts
                            .into_iter()
                            .map(|c| Conflict { path: c.path, copy: c.copy })
                            .collect(),
                        problems: ms.activity.problems,
                    };
                    cache = Some(CacheInfo {
                        dir: ms.cache.dir,
                        used_bytes: ms.cache.used_bytes,
                        capacity_bytes: ms.cache.capacity_bytes,
                    });
                }
                Err(e) => st.last_error = Some(e.to_string()),
            }
        }
        Status {
            account: Some(account),
            mount,
            connectivity,
            quota: st.quota.clone(),
            activity,
            cache,
            last_error: st.last_error.clone(),
        }
    }

    /// Unmounts (uploading first) before the app exits.
    pub async fn shutdown(&self) {
        let m = self.inner.state.lock().await.mount.take();
        if let Some(m) = m
            && let Err(e) = stop_mount(m).await
        {
            tracing::warn!(error = %e, "unmounting at exit");
        }
    }
}

async fn stop_mount(m: Mounted) -> Result<(), DesktopError> {
    tokio::task::spawn_blocking(move || m.stop(UNMOUNT_UPLOAD_TIMEOUT))
        .await
        .map_err(|e| DesktopError::Mount(e.to_string()))?
        .map_err(|e| DesktopError::Mount(e.to_string()))
}

fn make_client(url: &str, ca_cert: Option<PathBuf>, token: Option<String>) -> Result<Client, DesktopError> {
    Client::new(ClientOptions {
        base_url: url.to_string(),
        token,
        ca_cert,
        danger_accept_invalid_certs: false,
        user_agent: Some(format!("nimbus-desktop/{}", env!("CARGO_PKG_VERSION"))),
    })
    .map_err(|e| DesktopError::Invalid(e.to_string()))
}

fn pem_fingerprint(pem: &str) -> Option<String> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Some(nimbus_client::tls::fingerprint_of(&der))
}

fn account_key(a: &Account) -> String {
    token::account_key(&a.server_url, &a.username)
}

fn mount_key(mp: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in mp.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

fn open_path(path: &Path) -> Result<(), DesktopError> {
    let program = if cfg!(target_os = "windows") {
        "explorer"
    } else if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(program)
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(|e| DesktopError::Invalid(format!("cannot start {program}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip_matches_fingerprint() {
        let c = nimbus_client::ServerCertificate::from_der(b"any bytes at all, 31 of them!!".to_vec());
        assert_eq!(pem_fingerprint(&c.to_pem()).as_deref(), Some(c.fingerprint.as_str()));
    }
}
