//! Start-up and serving: open the database and the store, create the first admin, wrap the
//! router in the cross-cutting layers (request ids, tracing, panics, metrics, limits), bind,
//! and serve plain HTTP or TLS until shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum_server::tls_rustls::RustlsConfig;
use tower_http::timeout::RequestBodyTimeout;

use crate::auth::{PasswordGate, Throttle, generate_password, hash_password};
use crate::backends::{open_meta, open_store};
use crate::cache::{BlockCache, CacheConfig};
use crate::config::ServeArgs;
use crate::envelope::Envelope;
use crate::meta::Meta;
use crate::state::{AppState, Settings};

/// Opens everything the gateway needs and returns the shared state.
pub async fn build_state(args: &ServeArgs) -> anyhow::Result<AppState> {
    tokio::fs::create_dir_all(&args.data_dir)
        .await
        .with_context(|| format!("cannot create the data dir {}", args.data_dir.display()))?;
    let meta = open_meta(args).await?;
    let store = open_store(args).await?;
    if args.admin_ui_dir.is_none() && !crate::api::console::ADMIN.embedded() {
        tracing::warn!("this gateway was built without its admin console (npm was missing): /admin says how to get it");
    }
    if args.web_ui_dir.is_none() && !crate::api::console::WEB.embedded() {
        tracing::warn!("this gateway was built without its web app (npm was missing): / says how to get it");
    }
    let settings = Settings {
        block_size: nimbus_proto::DEFAULT_BLOCK_SIZE,
        token_ttl_secs: args.token_ttl_secs,
        link_max_expiry: args.link_max_expiry,
        default_quota: args.default_quota(),
        upload_parallelism: 4,
        admin_ui_dir: args.admin_ui_dir.clone(),
        web_ui_dir: args.web_ui_dir.clone(),
        tls: serves_tls(args),
        retention: args.retention(),
        trusted_proxies: args.trusted_proxies.clone().unwrap_or_default(),
        require_totp: args.require_totp,
    };
    let throttle = Arc::new(Throttle::new(meta.clone()));
    let hash_concurrency = args.password_hash_concurrency.map_or_else(PasswordGate::default_concurrency, usize::from);
    let cache_cfg = CacheConfig {
        dir: (args.cache_size > 0).then(|| args.cache_dir()),
        disk_capacity: args.cache_size,
        mem_capacity: args.cache_mem,
    };
    let cache = Arc::new(BlockCache::open(store.clone(), &cache_cfg).map_err(anyhow::Error::msg)?);
    let history = Arc::new(crate::metrics::history::History::new(Duration::from_secs(args.stats_interval_secs.max(1))));
    history.spawn_sampler(cache.clone());
    Ok(AppState::new(crate::state::Shared {
        meta,
        store,
        cache,
        warmer: Default::default(),
        throttle,
        passwords: Arc::new(PasswordGate::new(hash_concurrency)),
        metrics: crate::metrics::recorder(),
        history,
        settings: Arc::new(settings),
        s3_sealer: Arc::new(
            crate::auth::s3key::SecretSealer::load_or_create(&args.s3_key_file())
                .context("cannot load the S3 key file")?,
        ),
        ldap: crate::ldap::client::LdapConfig::from_args(&args.ldap)?
            .map(|cfg| Arc::new(crate::ldap::LdapDirectory::new(cfg)) as crate::ldap::DynDirectory),
        oidc: match args.oidc.config()? {
            Some(cfg) => Some(Arc::new(crate::auth::oidc::Oidc::new(cfg)?)),
            None => None,
        },
        thumbnails: Arc::new(tokio::sync::Semaphore::new(crate::thumbs::CONCURRENT_JOBS)),
        shutdown: tokio_util::sync::CancellationToken::new(),
    }))
}

/// The REST API and the WebDAV door with every cross-cutting layer: what the main listener
/// serves, and what tests drive in-process with `oneshot`.
pub fn app(state: AppState) -> Api {
    let tls = state.settings.tls;
    let router = crate::api::router(state.clone(), crate::doors::dav::router()).layer(crate::metrics::Track::ROUTES);
    Envelope::new(crate::api::Shortcut::new(state, timed(router)), tls).rest_api()
}

/// What the main listener serves: [`app`].
pub type Api = Envelope<crate::api::Shortcut<RequestBodyTimeout<Router>>>;
/// What `--s3-listen` serves: [`s3_app`].
pub type S3Api = Envelope<RequestBodyTimeout<Router>>;

/// The S3 door with the same layers: what `--s3-listen` serves.
pub fn s3_app(state: AppState) -> S3Api {
    let tls = state.settings.tls;
    Envelope::new(timed(crate::doors::s3::router(state)), tls)
}

/// How every listener serves: TLS or plain, the connection limits, the shared shutdown.
#[derive(Clone)]
struct Listening {
    tls: Option<RustlsConfig>,
    limits: HttpLimits,
    handle: axum_server::Handle<SocketAddr>,
}

/// Serves `service` on `listener` until the shared shutdown: the one place a listener is set
/// up, so the API and the S3 door get the same TLS, limits and HTTP tuning.
async fn serve<S>(listener: std::net::TcpListener, service: S, how: &Listening) -> std::io::Result<()>
where
    S: tower::Service<Request, Response = axum::response::Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    listener.set_nonblocking(true)?;
    let service = tower::service_fn(move |peer: SocketAddr| {
        std::future::ready(Ok::<_, Infallible>(Connection { inner: service.clone(), peer }))
    });
    let limits = how.limits.clone();
    match how.tls.clone() {
        Some(cfg) => {
            let mut server =
                axum_server::from_tcp_rustls(listener, cfg)?.handle(how.handle.clone()).map(|a| limits.acceptor(a));
            tune(server.http_builder(), &how.limits);
            server.serve(service).await
        }
        None => {
            let mut server = axum_server::from_tcp(listener)?.handle(how.handle.clone()).map(|a| limits.acceptor(a));
            tune(server.http_builder(), &how.limits);
            server.serve(service).await
        }
    }
}

/// A router whose request bodies must keep arriving: a sender that stops sending
/// (slow-loris, dead client) frees its request after 60 s.
fn timed(router: Router) -> RequestBodyTimeout<Router> {
    RequestBodyTimeout::new(router, Duration::from_secs(60))
}

/// A listener's service on one connection: requests get the peer's address (`ConnectInfo`,
/// as `Router::into_make_service_with_connect_info` gives) and axum's body type. The envelope
/// is served as it is, not as the fallback of a router around it (one more route lookup,
/// boxed service clone and response future per request).
#[derive(Clone)]
struct Connection<S> {
    inner: S,
    peer: SocketAddr,
}

impl<S, B> tower::Service<axum::http::Request<B>> for Connection<S>
where
    S: tower::Service<Request>,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> S::Future {
        let mut req = req.map(axum::body::Body::new);
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.inner.call(req)
    }
}

/// Creates the first administrator on an empty database.
async fn bootstrap_admin(meta: &Meta) -> anyhow::Result<()> {
    if meta.count_users().await? > 0 {
        return Ok(());
    }
    let (password, from_env) = match std::env::var(crate::config::ADMIN_PASSWORD_ENV) {
        Ok(p) if !p.is_empty() => (p, true),
        _ => (generate_password(), false),
    };
    let hash = tokio::task::spawn_blocking({
        let p = password.clone();
        move || hash_password(&p)
    })
    .await??;
    meta.create_user("admin", &hash, "admin", None).await?;
    if from_env {
        println!("Created the administrator `admin` with the password from {}.", crate::config::ADMIN_PASSWORD_ENV);
    } else {
        println!("Created the administrator `admin` with password: {password}");
        println!("(shown only this once; change it after signing in)");
    }
    Ok(())
}

/// Counts the usage of spaces that never had it counted by kind (from before that existed),
/// once, before serving: quota checks need the parts.
async fn count_usage_once(meta: &Meta) -> anyhow::Result<()> {
    let spaces = meta.uncounted_spaces().await?;
    if spaces.is_empty() {
        return Ok(());
    }
    tracing::info!(spaces = spaces.len(), "counting usage by kind (once, after an upgrade)");
    for space in spaces {
        meta.recount_usage(space).await?;
    }
    Ok(())
}

/// How long in-flight requests may run once shutdown starts (docs/OPERATIONS.md).
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the gateway until `shutdown` resolves.
pub async fn run(args: ServeArgs, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Decide on TLS first: a refused configuration must not touch the data dir or a port.
    let tls = tls_config(&args).await?;
    let state = build_state(&args).await?;
    bootstrap_admin(&state.meta).await?;
    let meta = state.meta.clone();
    count_usage_once(&meta).await?;
    meta.listen_for_other_gateways(args.database_listen_url.as_deref()).context("--database-listen-url")?;
    let maintenance = crate::ops::gc::GcOptions {
        grace: args.gc_grace,
        upload_expiry: args.gc_upload_expiry,
        retention: args.retention(),
        recount_all: false,
    };
    crate::ops::maintenance::spawn(meta.clone(), state.store.clone(), maintenance, args.maintenance_interval);
    state.throttle.spawn_pruner();
    if let Some(dir) = state.ldap.clone() {
        let opts = crate::ldap::sync::SyncOptions { default_quota: args.default_quota(), dry_run: false };
        crate::ldap::sync::spawn(meta.clone(), dir, opts, args.ldap.ldap_sync_interval);
    }

    let threads = args.worker_threads();
    let mut listeners =
        bind_listeners(args.listen, threads).with_context(|| format!("cannot listen on {}", args.listen))?;
    let listener = listeners.remove(0);
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%addr, database = meta.engine(), store = %state.store.describe(), worker_threads = args.worker_threads(), "gateway starting");

    let how = Listening { tls, limits: HttpLimits::of(&args), handle: axum_server::Handle::new() };
    let (h, stopping) = (how.handle.clone(), state.shutdown.clone());
    tokio::spawn(async move {
        shutdown.await;
        // Stop accepting; let running transfers finish for a while, then stop.
        h.graceful_shutdown(Some(DRAIN));
        // Then end the long polls (after the listeners are told, so a client's next poll
        // goes to another gateway rather than this one's closing connection).
        stopping.cancel();
    });
    // The S3 door's sockets, one per request thread like the API's.
    let mut s3_listeners: Vec<Option<std::net::TcpListener>> = match args.s3_listen {
        Some(s3_addr) => bind_listeners(s3_addr, threads)
            .with_context(|| format!("cannot listen on {s3_addr} (--s3-listen)"))?
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..threads).map(|_| None).collect(),
    };
    if let Some(s3_listener) = s3_listeners.remove(0) {
        let s3_addr = s3_listener.local_addr()?;
        println!("S3-compatible API on {scheme}://{s3_addr} (path-style; create a key with `nimbus keys create`)");
        let (s3, how) = (s3_app(state.clone()), how.clone());
        tokio::spawn(async move {
            if let Err(e) = serve(s3_listener, s3, &how).await {
                tracing::error!(error = %e, "the S3 listener stopped");
            }
        });
    }
    // Started before the address is printed: whoever waits for that line finds them all.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let others = spawn_request_threads(listeners.into_iter().zip(s3_listeners).collect(), &state, &how, stopped);
    println!("Nimbus gateway listening on {scheme}://{addr}");
    println!("Sign in with: nimbus login {scheme}://{addr} --username admin");
    serve(listener, app(state), &how).await?;
    // The other request threads stop serving on the same shutdown, but keep running their
    // runtimes until the database is closed: work their requests spawned (an audit entry, the
    // release of a failed upload's blocks) gets the same time to finish as the main runtime's.
    meta.close().await;
    let _ = stop.send(true);
    let _ = tokio::task::spawn_blocking(move || others.into_iter().for_each(|t| drop(t.join()))).await;
    tracing::info!("gateway stopped");
    Ok(())
}

/// The listening sockets of an address (`--listen`, `--s3-listen`), one per request thread.
/// With several, each thread accepts on its own socket of one `SO_REUSEPORT` group and the
/// kernel spreads connections over them (as nginx's `reuseport`).
fn bind_listeners(addr: SocketAddr, threads: usize) -> std::io::Result<Vec<std::net::TcpListener>> {
    // A plain bind first: it fails when anything listens there, also another gateway's group
    // (which a socket with SO_REUSEPORT of the same user would silently join, splitting the
    // connections between two gateways). With port 0 it also picks the port.
    let plain = std::net::TcpListener::bind(addr)?;
    #[cfg(unix)]
    if threads > 1 {
        let at = plain.local_addr()?;
        drop(plain);
        let mut out = Vec::with_capacity(threads);
        for _ in 0..threads {
            let socket = if at.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
            socket.set_reuseaddr(true)?;
            socket.set_reuseport(true)?;
            socket.bind(at)?;
            out.push(socket.listen(1024)?.into_std()?);
        }
        return Ok(out);
    }
    let _ = threads;
    Ok(vec![plain])
}

/// The request threads beyond the first, each with its API listener and, with `--s3-listen`,
/// its S3 one: each runs a runtime of its own (one thread, no work stealing) that accepts on its
/// own sockets and serves its connections to the end, then keeps running its tasks until
/// `stopped` turns true. On the 2-core bench machine two workers of one shared runtime served
/// fewer hot reads than one (they park and wake each other); two threads of their own served
/// 12–41 % more (docs/BENCHMARKS.md).
fn spawn_request_threads(
    listeners: Vec<(std::net::TcpListener, Option<std::net::TcpListener>)>,
    state: &AppState,
    how: &Listening,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::with_capacity(listeners.len());
    for (i, (listener, s3_listener)) in listeners.into_iter().enumerate() {
        let (api, s3) = (app(state.clone()), s3_listener.map(|l| (l, s3_app(state.clone()))));
        let (how, mut stopped) = (how.clone(), stopped.clone());
        // The runtime is made (and dropped) in its thread: never inside the async caller.
        let work = move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => return tracing::error!(error = %e, "cannot start a request thread's runtime"),
            };
            runtime.block_on(async move {
                let s3 = async {
                    if let Some((l, router)) = s3
                        && let Err(e) = serve(l, router, &how).await
                    {
                        tracing::error!(error = %e, "a request thread's S3 listener stopped");
                    }
                };
                let api = async {
                    if let Err(e) = serve(listener, api, &how).await {
                        tracing::error!(error = %e, "a request thread's listener stopped");
                    }
                };
                futures::join!(api, s3);
                let _ = stopped.wait_for(|s| *s).await;
            });
        };
        match std::thread::Builder::new().name(format!("nimbus-requests-{}", i + 2)).spawn(work) {
            Ok(t) => threads.push(t),
            Err(e) => tracing::error!(error = %e, "cannot start a request thread; serving with fewer"),
        }
    }
    threads
}

/// Largest request head: HTTP/1's read buffer, HTTP/2's header list.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// HTTP/2 pings (also on a connection with requests in progress) find a peer that vanished.
const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Streams a client may open and reset before the server handles them (HTTP/2 rapid reset).
const H2_MAX_PENDING_RESETS: usize = 20;
/// Streams the server may reset for a client's protocol errors before it drops the connection.
const H2_MAX_ERROR_RESETS: usize = 1024;

/// The connection limits of every listener (docs/OPERATIONS.md, Limits).
#[derive(Clone)]
struct HttpLimits {
    conns: crate::conn_limits::Limits,
    header_read_timeout: Duration,
    http2_max_streams: u32,
}

impl HttpLimits {
    fn of(args: &ServeArgs) -> HttpLimits {
        HttpLimits {
            conns: crate::conn_limits::Limits::new(args.idle_timeout, args.max_connections as usize),
            header_read_timeout: args.header_read_timeout,
            http2_max_streams: args.http2_max_streams,
        }
    }

    fn acceptor<A>(&self, inner: A) -> crate::conn_limits::LimitAcceptor<A> {
        self.conns.acceptor(inner)
    }
}

/// Bounds on what one connection can make the server hold or wait for: head sizes, how long
/// a client may take to send its headers (slow-loris; hyper also runs this clock while an
/// HTTP/1 connection waits for its next request), HTTP/2 streams and resets, pings. Idle
/// connections, stalled sends and the connection count: `conn_limits`.
fn tune(b: &mut hyper_util::server::conn::auto::Builder<hyper_util::rt::TokioExecutor>, l: &HttpLimits) {
    b.http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(l.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    b.http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_concurrent_streams(l.http2_max_streams)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS)
        .max_local_error_reset_streams(H2_MAX_ERROR_RESETS)
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
}

/// Whether [`tls_config`] will serve TLS for these arguments.
fn serves_tls(args: &ServeArgs) -> bool {
    (args.tls_cert.is_some() && args.tls_key.is_some()) || args.tls.as_deref() == Some("self-signed")
}

async fn tls_config(args: &ServeArgs) -> anyhow::Result<Option<RustlsConfig>> {
    let addr = args.listen;
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let cfg = RustlsConfig::from_pem_file(cert, key).await.context("cannot load --tls-cert / --tls-key")?;
        return Ok(Some(cfg));
    }
    if args.tls.as_deref() == Some("self-signed") {
        let (cert, key) = self_signed(&args.data_dir).await?;
        return Ok(Some(RustlsConfig::from_pem_file(cert, key).await?));
    }
    if !addr.ip().is_loopback() && !args.plain_http {
        bail!(
            "refusing to serve plain HTTP on {addr}: passwords and tokens would cross the network in clear. \
             Use --tls self-signed, or --tls-cert FILE --tls-key FILE, or --plain-http behind a TLS-terminating proxy"
        );
    }
    // The S3 door shares the gateway's TLS settings, and so its rule.
    if let Some(s3) = args.s3_listen
        && !s3.ip().is_loopback()
        && !args.plain_http
    {
        bail!(
            "refusing to serve the S3 door in plain HTTP on {s3} (--s3-listen): object data would cross the network \
             in clear and signed requests could be replayed by anyone on the path. Use --tls self-signed, or \
             --tls-cert FILE --tls-key FILE (the S3 door uses the gateway's TLS), or a loopback --s3-listen address, \
             or --plain-http behind a TLS-terminating proxy"
        );
    }
    Ok(None)
}

/// A self-signed certificate, generated once and kept in the data dir.
async fn self_signed(data_dir: &Path) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    use sha2::Digest;
    let dir = data_dir.join("tls");
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    if !cert_path.exists() || !key_path.exists() {
        tokio::fs::create_dir_all(&dir).await?;
        let host = std::fs::read_to_string("/etc/hostname").map(|s| s.trim().to_string()).unwrap_or_default();
        let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
        if !host.is_empty() {
            names.push(host);
        }
        let ck = rcgen::generate_simple_self_signed(names)?;
        write_private(&key_path, ck.signing_key.serialize_pem().as_bytes())?;
        tokio::fs::write(&cert_path, ck.cert.pem()).await?;
    }
    let pem = tokio::fs::read_to_string(&cert_path).await?;
    let der =
        pem_body(&pem).context("the self-signed certificate in the data dir is unreadable; delete the tls/ folder")?;
    let fp = sha2::Sha256::digest(&der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":");
    println!("TLS: self-signed certificate {} (SHA-256 fingerprint {fp})", cert_path.display());
    Ok((cert_path, key_path))
}

fn pem_body(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(data)
}
