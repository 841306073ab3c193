//! The one stable hash of the project: FNV-1a, 64 bits.
//!
//! Digests that outlive a process (a page's `records_digest` in
//! [`crate::RequestMessage`], a probe's context digest, a run manifest's
//! schema hash, the local store's version tags, the cut partition values'
//! suffix) need a hash that never changes between Rust releases, which
//! std's `DefaultHasher` does not promise. FNV-1a is the one named in the
//! contracts (FNV spec, draft-eastlake-fnv); it is not a cryptographic
//! hash and is never used as one.

/// FNV-1a 64 offset basis.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime.
const PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a, 64 bits, of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(PRIME))
}

/// [`fnv1a`] as 16 lowercase hex digits, the form every digest field holds.
pub fn fnv1a_hex(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_fnv1a_64() {
        // The offset basis, and the published test vector for "a"
        // (draft-eastlake-fnv, FNV-1a 64).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_hex(b"a"), "af63dc4c8601ec8c");
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
    }
}
