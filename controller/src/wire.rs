//! The controller listener's framing: `[u32 length][u8 kind][payload]`, big-endian, bounded.
//!
//! One TCP port carries three conversations between nodes: a voter's stream of raft messages
//! to another voter, controller commands forwarded to the active controller, and metadata
//! fetches by nodes that follow the log without voting. Payloads are raft's protobufs or JSON.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::ControllerError;

/// Largest frame accepted: a raft append of up to 1 MiB of entries, or one entry of up to
/// [`crate::quorum::node::MAX_ENTRY_BYTES`], or a metadata fetch answer, with room to spare.
pub const MAX_FRAME_BYTES: usize = 32 * 1024 * 1024;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// A voter opens a raft stream: [`Hello`] as JSON.
    RaftHello = 1,
    /// The hello was accepted; raft messages follow.
    HelloOk = 2,
    /// One raft message (protobuf).
    RaftMessage = 3,
    /// A forwarded controller command (JSON).
    CommandRequest = 4,
    /// Its answer (JSON).
    CommandResponse = 5,
    /// A request for committed metadata entries (JSON).
    FetchRequest = 6,
    /// Its answer (JSON).
    FetchResponse = 7,
    /// The peer refused the conversation; the payload says why (UTF-8).
    Refused = 8,
}

impl FrameKind {
    fn from_byte(b: u8) -> Option<Self> {
        use FrameKind::*;
        Some(match b {
            1 => RaftHello,
            2 => HelloOk,
            3 => RaftMessage,
            4 => CommandRequest,
            5 => CommandResponse,
            6 => FetchRequest,
            7 => FetchResponse,
            8 => Refused,
            _ => return None,
        })
    }
}

/// Who opens a raft stream, so that a node of another cluster or quorum is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The sender's cluster id, if it knows it yet.
    pub cluster_id: Option<String>,
    /// The sender's raft id.
    pub from: u64,
    /// The voters the sender was configured with (raft ids, sorted).
    pub voters: Vec<u64>,
    /// The sender's last log index when it started (a wiped voter says 0).
    #[serde(default)]
    pub last_index: u64,
}

/// Writes one frame.
pub fn write_frame(out: &mut impl Write, kind: FrameKind, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len() + 1)
        .ok()
        .filter(|l| *l as usize <= MAX_FRAME_BYTES)
        .ok_or_else(|| std::io::Error::other(format!("frame of {} bytes", payload.len())))?;
    let mut head = [0u8; 5];
    head[..4].copy_from_slice(&len.to_be_bytes());
    head[4] = kind as u8;
    out.write_all(&head)?;
    out.write_all(payload)?;
    Ok(())
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame(input: &mut impl Read) -> Result<Option<(FrameKind, Vec<u8>)>, ControllerError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME_BYTES {
        return Err(ControllerError::Quorum(format!(
            "controller frame of {len} bytes (limit {MAX_FRAME_BYTES})"
        )));
    }
    let mut kind = [0u8; 1];
    input.read_exact(&mut kind)?;
    let kind = FrameKind::from_byte(kind[0]).ok_or_else(|| {
        ControllerError::Quorum(format!("unknown controller frame kind {}", kind[0]))
    })?;
    let mut payload = vec![0u8; len - 1];
    input.read_exact(&mut payload)?;
    Ok(Some((kind, payload)))
}

/// Encodes a JSON payload.
pub fn to_json(value: &impl Serialize) -> Result<Vec<u8>, ControllerError> {
    serde_json::to_vec(value).map_err(|e| ControllerError::Corrupt(format!("encode: {e}")))
}

/// Decodes a JSON payload from a peer.
pub fn from_json<T: for<'de> Deserialize<'de>>(
    bytes: &[u8],
    what: &str,
) -> Result<T, ControllerError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ControllerError::Quorum(format!("a {what} that does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_frames_are_errors() {
        let mut buf = Vec::new();
        write_frame(&mut buf, FrameKind::CommandRequest, b"{}").unwrap();
        write_frame(&mut buf, FrameKind::RaftMessage, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(
            read_frame(&mut r).unwrap(),
            Some((FrameKind::CommandRequest, b"{}".to_vec()))
        );
        assert_eq!(
            read_frame(&mut r).unwrap(),
            Some((FrameKind::RaftMessage, Vec::new()))
        );
        assert_eq!(read_frame(&mut r).unwrap(), None);
        // Every truncation of a frame is an error or a clean end, never a panic.
        for cut in 1..buf.len() {
            let mut r = &buf[..cut];
            let _ = read_frame(&mut r);
        }
        let huge = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes();
        assert!(read_frame(&mut &huge[..]).is_err());
        assert!(read_frame(&mut &[0u8, 0, 0, 0][..]).is_err());
        assert!(read_frame(&mut &[0u8, 0, 0, 1, 99][..]).is_err());
    }
}
