//! Literal substring search over byte slices, streaming-friendly.
//!
//! The device program `search` and the host baseline both call [`Finder`]; the kernel is `memchr::memmem`
//! (SIMD two-way / Rabin-Karp). BlueDBM §5.1 runs Morris-Pratt engines in the FPGA; on a CPU `memmem` is the
//! fastest exact matcher and returns the same matches, which is all the result depends on.
//!
//! Matches may overlap (`"aa"` occurs 3 times in `"aaaa"`), as `grep -o` does not but a byte-offset search
//! must: every start position whose bytes equal the pattern is one match.

use memchr::memmem;

/// Why a pattern cannot be searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// The empty pattern matches everywhere; we refuse it rather than return `len + 1` matches.
    Empty,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatternError::Empty => write!(f, "the search pattern is empty"),
        }
    }
}

impl std::error::Error for PatternError {}

/// A compiled literal pattern.
#[derive(Debug, Clone)]
pub struct Finder {
    inner: memmem::Finder<'static>,
}

impl Finder {
    /// Compiles `pattern`; fails on the empty pattern.
    pub fn new(pattern: &[u8]) -> Result<Self, PatternError> {
        if pattern.is_empty() {
            return Err(PatternError::Empty);
        }
        Ok(Finder { inner: memmem::Finder::new(pattern).into_owned() })
    }

    /// The pattern's length in bytes.
    pub fn len(&self) -> usize {
        self.inner.needle().len()
    }

    /// Always false: an empty pattern is refused by [`Finder::new`].
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The pattern bytes.
    pub fn pattern(&self) -> &[u8] {
        self.inner.needle()
    }

    /// Counts (possibly overlapping) occurrences in `hay`.
    pub fn count(&self, hay: &[u8]) -> u64 {
        self.count_starting_before(hay, hay.len())
    }

    /// Counts occurrences that lie wholly in `hay` and start before `limit`. Used to search a window that
    /// carries a halo of `len - 1` bytes of the next window: matches starting in the halo belong to the next
    /// window and are not counted twice.
    pub fn count_starting_before(&self, hay: &[u8], limit: usize) -> u64 {
        let mut n = 0u64;
        self.for_each_start(hay, limit, |_| n += 1);
        n
    }

    /// Calls `f(position)` for each occurrence in `hay` that starts before `limit`, in increasing order.
    pub fn for_each_start(&self, hay: &[u8], limit: usize, mut f: impl FnMut(usize)) {
        // Overlapping matches: resume one byte after each start.
        let mut pos = 0usize;
        while pos < limit.min(hay.len()) {
            match self.inner.find(&hay[pos..]) {
                Some(i) if pos + i < limit => {
                    f(pos + i);
                    pos += i + 1;
                }
                _ => break,
            }
        }
    }

    /// Appends to `out` the start offsets (plus `base`) of occurrences starting before `limit`.
    pub fn offsets_starting_before(&self, hay: &[u8], limit: usize, base: u64, out: &mut Vec<u64>) {
        self.for_each_start(hay, limit, |p| out.push(base + p as u64));
    }
}

/// Naive reference: every start position `i` with `hay[i..i + pat.len()] == pat`. For tests.
pub fn naive_offsets(hay: &[u8], pat: &[u8]) -> Vec<u64> {
    if pat.is_empty() || pat.len() > hay.len() {
        return Vec::new();
    }
    (0..=hay.len() - pat.len()).filter(|&i| &hay[i..i + pat.len()] == pat).map(|i| i as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overlapping_matches_count() {
        let f = Finder::new(b"aa").unwrap();
        assert_eq!(f.count(b"aaaa"), 3);
        assert_eq!(f.count(b""), 0);
    }

    #[test]
    fn empty_pattern_is_refused() {
        assert_eq!(Finder::new(b"").unwrap_err(), PatternError::Empty);
    }

    #[test]
    fn limit_excludes_matches_starting_in_the_halo() {
        let f = Finder::new(b"abc").unwrap();
        // window "xxab" + halo "c" (the next window's first byte): the match starts at 2 < 4, counted.
        assert_eq!(f.count_starting_before(b"xxabc", 4), 1);
        // a match starting at the limit belongs to the next window.
        assert_eq!(f.count_starting_before(b"xxxxabc", 4), 0);
    }

    proptest! {
        #[test]
        fn agrees_with_naive(hay in proptest::collection::vec(0u8..3, 0..400),
                             pat in proptest::collection::vec(0u8..3, 1..5)) {
            let f = Finder::new(&pat).unwrap();
            let mut got = Vec::new();
            f.offsets_starting_before(&hay, hay.len(), 0, &mut got);
            let want = naive_offsets(&hay, &pat);
            prop_assert_eq!(f.count(&hay), want.len() as u64);
            prop_assert_eq!(got, want);
        }

        #[test]
        fn windows_with_halo_count_each_match_once(
            hay in proptest::collection::vec(0u8..2, 0..300),
            pat in proptest::collection::vec(0u8..2, 1..6),
            window in 1usize..40,
        ) {
            let f = Finder::new(&pat).unwrap();
            let mut total = 0u64;
            let mut start = 0usize;
            while start < hay.len() {
                let end = (start + window).min(hay.len());
                let halo_end = (end + pat.len() - 1).min(hay.len());
                total += f.count_starting_before(&hay[start..halo_end], end - start);
                start = end;
            }
            prop_assert_eq!(total, naive_offsets(&hay, &pat).len() as u64);
        }
    }
}
