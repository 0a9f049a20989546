//! A loopback TCP forwarder that injects network faults between the gateway and what it talks
//! to (the object store, PostgreSQL): answer slowly, go silent without closing (a link that dies
//! without a reset), or cut every connection. Tests point the gateway at
//! [`NetProxy::addr`] instead of the real service.
//!
//! ```ignore
//! let proxy = NetProxy::start(minio_addr).await?;
//! proxy.set_mode(Mode::Delay(Duration::from_millis(50)));   // every chunk waits 50 ms
//! proxy.set_mode(Mode::Stall);                              // nothing moves, sockets stay open
//! proxy.cut();                                              // close every open connection
//! proxy.set_mode(Mode::Forward);                            // back to normal
//! ```
//!
//! The mode applies to connections already open as well as new ones, in both directions. The
//! proxy stops (and closes everything) when dropped.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with the bytes it relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Relay at once.
    Forward,
    /// Wait this long before relaying each chunk read (at most 64 KiB): a slow link or a slow
    /// server. New connections are accepted at once.
    Delay(Duration),
    /// Relay nothing and accept nothing new, but keep every socket open: the peer sees silence,
    /// not a reset. Bytes read meanwhile are held and relayed once the mode changes back.
    Stall,
}

/// Relay buffer per direction: bounds what the proxy holds per connection.
const CHUNK: usize = 64 * 1024;

pub struct NetProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Bumped by [`NetProxy::cut`]; every relay task watches it and closes its sockets.
    cuts: watch::Sender<u64>,
    accept: JoinHandle<()>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl NetProxy {
    /// Listens on a free port of 127.0.0.1 and relays every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.context("netproxy: cannot bind")?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Forward);
        let (cuts, _) = watch::channel(0u64);
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn(accept_loop(listener, upstream, mode.subscribe(), cuts.subscribe(), conns.clone()));
        Ok(NetProxy { addr, mode, cuts, accept, conns })
    }

    /// The address to give the gateway instead of the upstream's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Closes every connection open now (both sides see the close); new ones are accepted as
    /// the mode says.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Connections relayed so far that are still open.
    pub fn open_connections(&self) -> usize {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|h| !h.is_finished());
        conns.len()
    }
}

impl Drop for NetProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for h in self.conns.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            h.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    cuts: watch::Receiver<u64>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    loop {
        // A stalled link accepts nothing new either: the kernel's backlog holds the attempt.
        while *mode.borrow_and_update() == Mode::Stall {
            if mode.changed().await.is_err() {
                return;
            }
        }
        let Ok((client, _)) = listener.accept().await else { continue };
        let (mode, cuts) = (mode.clone(), cuts.clone());
        let task = tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            relay(client, server, mode, cuts).await;
        });
        let mut conns = conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|h| !h.is_finished());
        conns.push(task);
    }
}

/// Relays both directions until either side closes or the proxy cuts the connection.
async fn relay(client: TcpStream, server: TcpStream, mode: watch::Receiver<Mode>, mut cuts: watch::Receiver<u64>) {
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    cuts.borrow_and_update();
    let up = pump(cr, sw, mode.clone());
    let down = pump(sr, cw, mode);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = cuts.changed() => {}
    }
    // Dropping the halves closes both sockets.
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        // Stalled: read nothing more, so the sender's window fills and it sees silence.
        while *mode.borrow_and_update() == Mode::Stall {
            if mode.changed().await.is_err() {
                return;
            }
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        loop {
            let current = *mode.borrow_and_update();
            match current {
                Mode::Forward => break,
                Mode::Delay(d) => {
                    tokio::time::sleep(d).await;
                    break;
                }
                // Hold what was read until the link comes back.
                Mode::Stall => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> anyhow::Result<SocketAddr> {
        let l = TcpListener::bind("127.0.0.1:0").await?;
        let addr = l.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Ok(addr)
    }

    async fn roundtrip(s: &mut TcpStream, msg: &[u8], within: Duration) -> anyhow::Result<Option<Vec<u8>>> {
        s.write_all(msg).await?;
        let mut got = vec![0u8; msg.len()];
        match tokio::time::timeout(within, s.read_exact(&mut got)).await {
            Ok(r) => {
                r?;
                Ok(Some(got))
            }
            Err(_) => Ok(None),
        }
    }

    #[tokio::test]
    async fn forwards_stalls_and_cuts() -> anyhow::Result<()> {
        let proxy = NetProxy::start(echo_server().await?).await?;
        let mut s = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(roundtrip(&mut s, b"one", Duration::from_secs(5)).await?.as_deref(), Some(&b"one"[..]));

        // Silent: nothing comes back, the socket stays open; the held bytes arrive afterwards.
        proxy.set_mode(Mode::Stall);
        assert_eq!(roundtrip(&mut s, b"two", Duration::from_millis(300)).await?, None);
        proxy.set_mode(Mode::Forward);
        let mut got = [0u8; 3];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut got)).await??;
        assert_eq!(&got, b"two");

        // Delay still delivers.
        proxy.set_mode(Mode::Delay(Duration::from_millis(20)));
        assert_eq!(roundtrip(&mut s, b"three", Duration::from_secs(5)).await?.as_deref(), Some(&b"three"[..]));
        proxy.set_mode(Mode::Forward);

        // Cut: the open connection ends (EOF or reset); a new one works.
        assert_eq!(proxy.open_connections(), 1);
        proxy.cut();
        let mut rest = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
        assert!(r.is_ok(), "a cut connection must close");
        let mut s2 = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(roundtrip(&mut s2, b"four", Duration::from_secs(5)).await?.as_deref(), Some(&b"four"[..]));
        Ok(())
    }
}
