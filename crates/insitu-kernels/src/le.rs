//! Little-endian arrays: the byte format of every integer array insitu stores (offsets, dictionaries,
//! codes, IDs, sorted indices). One implementation, used by devices and host alike.

/// The fixed-size words of `b` (a trailing partial word is ignored).
pub fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    b.chunks_exact(N).map(|c| {
        let mut w = [0u8; N];
        w.copy_from_slice(c);
        w
    })
}

/// Decodes little-endian u64 values.
pub fn decode_u64s(b: &[u8]) -> Vec<u64> {
    words::<8>(b).map(u64::from_le_bytes).collect()
}

/// Decodes little-endian u32 values.
pub fn decode_u32s(b: &[u8]) -> Vec<u32> {
    words::<4>(b).map(u32::from_le_bytes).collect()
}

/// Encodes u64 values little-endian.
pub fn encode_u64s(v: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Encodes u32 values little-endian.
pub fn encode_u32s(v: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The little-endian u32 at the start of `b` (an entry's ID); `b` must hold at least 4 bytes.
pub fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// The little-endian u64 at the start of `b`; `b` must hold at least 8 bytes.
pub fn u64_at(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// The little-endian unsigned integer that is all of `b` (1 to 8 bytes: a record id saved in the fewest
/// bytes that hold it).
#[inline]
pub fn uint(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// The little-endian unsigned integers of `width` bytes each (1 to 8) that `bytes` holds one after
/// another ([`uint`] of each): eight bytes loaded and masked where eight are there, so no copy of a length
/// known only at run time per integer (a saved index's 8 M ids).
///
/// # Panics
/// If `width` is not 1..=8.
pub fn uints(bytes: &[u8], width: usize) -> impl Iterator<Item = u64> + '_ {
    assert!((1..=8).contains(&width), "integers of {width} bytes");
    let mask = u64::MAX >> (64 - 8 * width as u32);
    (0..bytes.len() / width).map(move |i| {
        let at = i * width;
        match bytes.get(at..at + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")) & mask,
            None => uint(&bytes[at..at + width]),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uints_read_what_uint_reads_at_every_width() {
        let bytes: Vec<u8> = (0..101u32).map(|i| (i * 37 + 11) as u8).collect();
        for width in 1..=8 {
            let want: Vec<u64> = bytes.chunks_exact(width).map(uint).collect();
            assert_eq!(uints(&bytes, width).collect::<Vec<_>>(), want, "width {width}");
        }
    }

    #[test]
    fn arrays_round_trip() {
        let v = vec![0u64, 1, u64::MAX, 1 << 40];
        assert_eq!(decode_u64s(&encode_u64s(&v)), v);
        let w = vec![7u32, u32::MAX];
        assert_eq!(decode_u32s(&encode_u32s(&w)), w);
        assert_eq!(u32_at(&encode_u32s(&w)[4..]), u32::MAX);
        assert_eq!(u64_at(&encode_u64s(&v)[16..]), u64::MAX);
        assert_eq!(decode_u32s(&[1, 0, 0, 0, 9]), vec![1], "a partial word is ignored");
        assert_eq!((uint(&[0x34, 0x12]), uint(&[7]), uint(&u64::MAX.to_le_bytes())), (0x1234, 7, u64::MAX));
    }
}
