//! Kafka's flexible-version encoding, for the records Tern writes in Kafka's own formats into
//! internal topics (`__consumer_offsets`, `__transaction_state`, `__mirror_state`): unsigned
//! varints, compact strings, bytes and arrays (length + 1, 0 for null), and tagged fields.
//! Readers return None on anything short or malformed, never panic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Appends an unsigned varint.
pub fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// Reads an unsigned varint of at most five bytes.
pub fn get_uvarint(b: &mut &[u8]) -> Option<u32> {
    let mut v: u32 = 0;
    for i in 0..5 {
        if !b.has_remaining() {
            return None;
        }
        let byte = b.get_u8();
        v |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Appends a compact array or string length (`n + 1`), or null (0).
pub fn put_compact_len(b: &mut BytesMut, n: Option<usize>) {
    put_uvarint(b, n.map_or(0, |n| n as u32 + 1));
}

/// Reads a compact length: None when malformed, `Some(None)` for null. Each of the `n`
/// elements takes at least `min_size` bytes, so a length beyond the bytes left is malformed.
pub fn get_compact_len(b: &mut &[u8], min_size: usize) -> Option<Option<usize>> {
    let Some(n) = get_uvarint(b)?.checked_sub(1) else {
        return Some(None);
    };
    let n = n as usize;
    (n.checked_mul(min_size)? <= b.remaining()).then_some(Some(n))
}

/// Appends a compact string.
pub fn put_compact_str(b: &mut BytesMut, s: &str) {
    put_compact_len(b, Some(s.len()));
    b.put_slice(s.as_bytes());
}

/// Appends a compact nullable string.
pub fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(b, s),
        None => put_compact_len(b, None),
    }
}

/// Reads a compact nullable string.
pub fn get_compact_nullable_str(b: &mut &[u8]) -> Option<Option<String>> {
    let Some(n) = get_compact_len(b, 1)? else {
        return Some(None);
    };
    let s = std::str::from_utf8(&b[..n]).ok()?.to_string();
    b.advance(n);
    Some(Some(s))
}

/// Reads a compact string that may not be null.
pub fn get_compact_str(b: &mut &[u8]) -> Option<String> {
    get_compact_nullable_str(b)?
}

/// Appends compact bytes.
pub fn put_compact_bytes(b: &mut BytesMut, v: &[u8]) {
    put_compact_len(b, Some(v.len()));
    b.put_slice(v);
}

/// Reads compact bytes that may not be null.
pub fn get_compact_bytes(b: &mut &[u8]) -> Option<Bytes> {
    let n = get_compact_len(b, 1)??;
    let v = Bytes::copy_from_slice(&b[..n]);
    b.advance(n);
    Some(v)
}

/// Appends tagged fields (tag, data), in tag order.
pub fn put_tagged_fields(b: &mut BytesMut, fields: &[(u32, &[u8])]) {
    put_uvarint(b, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(b, *tag);
        put_uvarint(b, data.len() as u32);
        b.put_slice(data);
    }
}

/// Reads tagged fields as (tag, data).
pub fn get_tagged_fields<'a>(b: &mut &'a [u8]) -> Option<Vec<(u32, &'a [u8])>> {
    let n = get_uvarint(b)? as usize;
    let mut out = Vec::with_capacity(n.min(b.remaining()));
    for _ in 0..n {
        let tag = get_uvarint(b)?;
        let len = get_uvarint(b)? as usize;
        if b.remaining() < len {
            return None;
        }
        out.push((tag, &b[..len]));
        b.advance(len);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut b = BytesMut::new();
        put_uvarint(&mut b, 300);
        put_compact_str(&mut b, "héllo");
        put_compact_nullable_str(&mut b, None);
        put_compact_bytes(&mut b, b"\x00\x01");
        put_tagged_fields(&mut b, &[(0, b"xy"), (3, b"")]);
        let mut r = &b[..];
        assert_eq!(get_uvarint(&mut r), Some(300));
        assert_eq!(get_compact_str(&mut r).as_deref(), Some("héllo"));
        assert_eq!(get_compact_nullable_str(&mut r), Some(None));
        assert_eq!(get_compact_bytes(&mut r).as_deref(), Some(&b"\x00\x01"[..]));
        let tagged = get_tagged_fields(&mut r).unwrap();
        assert_eq!(tagged, vec![(0, &b"xy"[..]), (3, &b""[..])]);
        assert!(r.is_empty());
    }

    #[test]
    fn short_or_oversized_input_is_refused() {
        assert_eq!(get_uvarint(&mut &[0x80u8, 0x80][..]), None);
        assert_eq!(get_uvarint(&mut &[0xffu8; 6][..]), None);
        // A string claiming 10 bytes with 2 left.
        assert_eq!(get_compact_nullable_str(&mut &[11u8, b'a', b'b'][..]), None);
        assert_eq!(
            get_compact_str(&mut &[0u8][..]),
            None,
            "null where not nullable"
        );
        assert_eq!(get_tagged_fields(&mut &[1u8, 0, 5, 1][..]), None);
    }
}
