//! How raft messages travel to the other voters. Incoming messages arrive through the
//! controller listener ([`crate::server`]) and go straight to the driver.

use std::collections::HashMap;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use protobuf::Message as _;
use raft::eraftpb::Message;

use crate::wire::{read_frame, to_json, write_frame, FrameKind, Hello};

/// Messages queued per peer while it is slow or unreachable; more are dropped (raft resends).
const PEER_QUEUE: usize = 1024;
/// Reconnect backoff bounds.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Connect and handshake timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A write that takes longer means the peer is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Data unacknowledged this long closes the stream (TCP_USER_TIMEOUT): after a network
/// partition heals, the sender is on a fresh connection within about a second instead of
/// waiting for TCP's backed-off retransmissions on the old one.
const UNACKED_TIMEOUT: Duration = Duration::from_secs(3);

/// Carries raft messages to the other voters of the metadata quorum.
pub(crate) trait RaftTransport: Send {
    /// Queues messages for their recipients (`Message::to`); delivery is best effort.
    fn send(&mut self, messages: Vec<Message>);
}

/// The transport of a quorum with a single voter: there is nobody to talk to.
#[derive(Debug, Default)]
pub(crate) struct NoPeers;

impl RaftTransport for NoPeers {
    fn send(&mut self, messages: Vec<Message>) {
        for m in messages {
            tracing::warn!(to = m.to, kind = ?m.get_msg_type(), "raft message with no peer transport dropped");
        }
    }
}

/// Raft messages over TCP: one connection and one sender thread per peer, reconnecting with
/// backoff, with a bounded queue in front of each.
pub(crate) struct TcpTransport {
    peers: HashMap<u64, SyncSender<Message>>,
}

/// Why a peer refused this voter (another quorum, another cluster), if one did.
pub(crate) type PeerRefusal = std::sync::Arc<parking_lot::Mutex<Option<String>>>;

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("peers", &self.peers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TcpTransport {
    /// Starts a sender for each peer `(raft id, host:port)`; `hello` opens every stream. A
    /// peer's refusal is recorded in `refusal`.
    pub(crate) fn start(
        peers: &[(u64, String)],
        hello: Hello,
        refusal: PeerRefusal,
    ) -> std::io::Result<Self> {
        let mut senders = HashMap::new();
        for (id, addr) in peers {
            let (tx, rx) = mpsc::sync_channel(PEER_QUEUE);
            let (id, addr, hello) = (*id, addr.clone(), hello.clone());
            let refusal = refusal.clone();
            std::thread::Builder::new()
                .name(format!("raft-send-{id}"))
                .spawn(move || peer_loop(id, &addr, &hello, &rx, &refusal))?;
            senders.insert(id, tx);
        }
        Ok(TcpTransport { peers: senders })
    }
}

impl RaftTransport for TcpTransport {
    fn send(&mut self, messages: Vec<Message>) {
        for m in messages {
            let to = m.to;
            match self.peers.get(&to) {
                Some(tx) => match tx.try_send(m) {
                    Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                    Err(TrySendError::Full(_)) => {
                        tracing::debug!(to, "raft queue to peer full; message dropped")
                    }
                },
                None => tracing::warn!(to, "raft message for an unknown peer dropped"),
            }
        }
    }
}

/// Connects to `addr` and opens a raft stream with `hello`.
fn connect(addr: &str, hello: &Hello) -> Result<TcpStream, String> {
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to nothing"))?;
    let mut stream =
        TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    stream.set_nodelay(true).ok();
    if let Err(e) = socket2::SockRef::from(&stream).set_tcp_user_timeout(Some(UNACKED_TIMEOUT)) {
        tracing::debug!(error = %e, "TCP_USER_TIMEOUT not set on a raft stream");
    }
    stream
        .set_read_timeout(Some(CONNECT_TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let payload = to_json(hello).map_err(|e| e.to_string())?;
    write_frame(&mut stream, FrameKind::RaftHello, &payload).map_err(|e| e.to_string())?;
    match read_frame(&mut stream) {
        Ok(Some((FrameKind::HelloOk, _))) => Ok(stream),
        Ok(Some((FrameKind::Refused, why))) => Err(format!(
            "refused by the peer: {}",
            String::from_utf8_lossy(&why)
        )),
        Ok(other) => Err(format!("unexpected handshake answer {other:?}")),
        Err(e) => Err(format!("handshake: {e}")),
    }
}

fn peer_loop(id: u64, addr: &str, hello: &Hello, rx: &Receiver<Message>, refusal: &PeerRefusal) {
    let mut backoff = BACKOFF_MIN;
    let mut last_error: Option<String> = None;
    loop {
        match connect(addr, hello) {
            Ok(mut stream) => {
                if last_error.take().is_some() {
                    tracing::info!(peer = id, %addr, "connected to controller peer");
                }
                backoff = BACKOFF_MIN;
                if !stream_messages(&mut stream, rx) {
                    return;
                }
            }
            Err(e) => {
                // Name each new kind of failure once, not every retry.
                if last_error.as_deref() != Some(e.as_str()) {
                    if e.starts_with("refused") {
                        tracing::error!(peer = id, %addr, error = %e, "controller peer refused this node");
                        *refusal.lock() = Some(format!("controller {addr} {e}"));
                    } else {
                        tracing::info!(peer = id, %addr, error = %e, "controller peer unreachable; retrying");
                    }
                    last_error = Some(e);
                }
                // What was queued for a peer we cannot reach is stale by the time we do.
                let until = Instant::now() + backoff;
                loop {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    match rx.recv_timeout(left) {
                        Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Writes queued messages until the connection fails (true) or the transport is gone (false).
fn stream_messages(stream: &mut TcpStream, rx: &Receiver<Message>) -> bool {
    let mut buf = Vec::new();
    loop {
        let first = match rx.recv() {
            Ok(m) => m,
            Err(_) => return false,
        };
        buf.clear();
        let mut next = Some(first);
        let mut batched = 0;
        while let Some(m) = next.take() {
            let Ok(bytes) = m.write_to_bytes() else {
                continue;
            };
            if write_frame(&mut buf, FrameKind::RaftMessage, &bytes).is_err() {
                continue;
            }
            batched += 1;
            if batched < 64 {
                next = rx.try_recv().ok();
            }
        }
        if let Err(e) = stream.write_all(&buf) {
            tracing::debug!(error = %e, "raft stream to peer broke");
            return true;
        }
    }
}
