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
    /// A needle longer than a search engine holds.
    TooLong { len: usize, max: usize },
    /// A Morris-Pratt failure table that is not the needle's.
    BadTable,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PatternError::Empty => write!(f, "the search pattern is empty"),
            PatternError::TooLong { len, max } => {
                write!(f, "the search pattern is {len} bytes; a search engine takes at most {max}")
            }
            PatternError::BadTable => write!(f, "the Morris-Pratt failure table sent is not the pattern's"),
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

/// Searches a stream that arrives in slices of any size (pages in place, network pieces), counting or
/// locating every match exactly once, including matches that straddle slice boundaries (the *seams*).
///
/// Only the last `len - 1` bytes are carried between slices: a match wholly inside a slice is found in the
/// slice itself; one that starts in the carried bytes is found at the seam, and never both.
#[derive(Debug, Clone)]
pub struct StreamSearch<'f> {
    finder: &'f Finder,
    /// Up to `len - 1` bytes preceding the next slice.
    carry: Vec<u8>,
    /// Stream position of `carry[0]`.
    carry_pos: u64,
    /// Stream position of the next byte fed.
    pos: u64,
    seam: Vec<u8>,
    count: u64,
    offsets: Option<Vec<u64>>,
}

impl<'f> StreamSearch<'f> {
    /// A stream starting at position `base`; collects offsets if `want_offsets`.
    pub fn new(finder: &'f Finder, base: u64, want_offsets: bool) -> Self {
        StreamSearch {
            finder,
            carry: Vec::with_capacity(finder.len()),
            carry_pos: base,
            pos: base,
            seam: Vec::with_capacity(2 * finder.len()),
            count: 0,
            offsets: want_offsets.then(Vec::new),
        }
    }

    /// Feeds the next slice of the stream.
    pub fn feed(&mut self, s: &[u8]) {
        self.seam_matches(s);
        match self.offsets.as_mut() {
            Some(o) => self.finder.offsets_starting_before(s, s.len(), self.pos, o),
            None => self.count += self.finder.count(s),
        }
        self.pos += s.len() as u64;
        // New carry: the last len - 1 bytes of (carry ++ s).
        let keep = self.finder.len() - 1;
        if s.len() >= keep {
            self.carry.clear();
            self.carry.extend_from_slice(&s[s.len() - keep..]);
        } else {
            self.carry.extend_from_slice(s);
            let cut = self.carry.len().saturating_sub(keep);
            self.carry.drain(..cut);
        }
        self.carry_pos = self.pos - self.carry.len() as u64;
    }

    /// Counts matches that start in the carried bytes and end inside `s` (without feeding `s`).
    fn seam_matches(&mut self, s: &[u8]) {
        if self.carry.is_empty() || s.is_empty() {
            return;
        }
        self.seam.clear();
        self.seam.extend_from_slice(&self.carry);
        self.seam.extend_from_slice(&s[..s.len().min(self.finder.len() - 1)]);
        let limit = self.carry.len();
        match self.offsets.as_mut() {
            Some(o) => self.finder.offsets_starting_before(&self.seam, limit, self.carry_pos, o),
            None => self.count += self.finder.count_starting_before(&self.seam, limit),
        }
    }

    /// Ends the stream with a *halo*: bytes that follow it but belong to someone else. Matches that start
    /// in the stream and end in the halo are counted; matches wholly inside the halo are not.
    pub fn finish_with_halo(mut self, halo: &[u8]) -> (u64, Option<Vec<u64>>) {
        self.seam_matches(halo);
        self.finish()
    }

    /// Ends the stream: `(count, offsets if asked)`. Offsets are in increasing order.
    pub fn finish(self) -> (u64, Option<Vec<u64>>) {
        match self.offsets {
            Some(mut o) => {
                o.sort_unstable();
                (o.len() as u64, Some(o))
            }
            None => (self.count, None),
        }
    }
}

/// Longest needle a Morris-Pratt engine takes (BlueDBM §7.3: the authors' engines hold 1024 bytes).
pub const MP_MAX_NEEDLE: usize = 1024;

/// Morris-Pratt's failure table of `needle` (Morris and Pratt 1970; the constants BlueDBM's host computes
/// and sends with the needle, §7.3): entry `i`, for `i` in `0..=needle.len()`, is the length of the
/// longest proper border of `needle[..i]` (a prefix that is also a suffix), 0 for `i` of 0 or 1.
pub fn mp_failure(needle: &[u8]) -> Vec<u32> {
    let mut f = vec![0u32; needle.len() + 1];
    let mut k = 0usize;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = f[k] as usize;
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        f[i + 1] = k as u32;
    }
    f
}

/// A needle and its Morris-Pratt failure table: the state of a string-search engine (BlueDBM §7.3).
///
/// The engine's *state* after some text is the length of the longest suffix of the text that is a
/// proper prefix of the needle: all an engine needs to carry from one page to the next, so pages can be
/// searched apart and their seams joined afterwards ([`MorrisPratt::seam_starts`]).
#[derive(Debug, Clone)]
pub struct MorrisPratt {
    needle: Vec<u8>,
    fail: Vec<u32>,
    finder: Finder,
}

/// What searching one page found ([`MorrisPratt::scan_page`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageScan {
    /// Where each match wholly inside the page starts, increasing.
    pub starts: Vec<u32>,
    /// For each match, the position of the last newline before its start in this page, if any.
    pub newline_before: Vec<Option<u32>>,
    /// The engine's state at the end of the page, started from state 0 at its start.
    pub end_state: u32,
    /// The position of the page's last newline, if any.
    pub last_newline: Option<u32>,
}

impl MorrisPratt {
    /// The engine for `needle`, with its failure table built here. Refuses an empty needle and one
    /// longer than [`MP_MAX_NEEDLE`].
    pub fn new(needle: &[u8]) -> Result<Self, PatternError> {
        Self::with_table(needle, &mp_failure(needle))
    }

    /// The engine for `needle` with a failure table built elsewhere (the host, §7.3), checked: a wrong
    /// table would give wrong answers.
    pub fn with_table(needle: &[u8], fail: &[u32]) -> Result<Self, PatternError> {
        if needle.len() > MP_MAX_NEEDLE {
            return Err(PatternError::TooLong { len: needle.len(), max: MP_MAX_NEEDLE });
        }
        let finder = Finder::new(needle)?;
        if fail != mp_failure(needle).as_slice() {
            return Err(PatternError::BadTable);
        }
        Ok(MorrisPratt { needle: needle.to_vec(), fail: fail.to_vec(), finder })
    }

    pub fn needle(&self) -> &[u8] {
        &self.needle
    }

    pub fn failure(&self) -> &[u32] {
        &self.fail
    }

    /// Runs the automaton from `state` over `text` byte by byte, as the engine does, calling
    /// `on_match(end)` with the position in `text` of each match's last byte; returns the state after.
    pub fn run(&self, state: u32, text: &[u8], mut on_match: impl FnMut(usize)) -> u32 {
        let n = self.needle.len();
        let mut k = state as usize;
        for (i, &c) in text.iter().enumerate() {
            while k > 0 && self.needle[k] != c {
                k = self.fail[k] as usize;
            }
            if self.needle[k] == c {
                k += 1;
            }
            if k == n {
                on_match(i);
                k = self.fail[n] as usize;
            }
        }
        k as u32
    }

    /// Searches one page from state 0: the matches wholly inside it and the state at its end. The same
    /// answer as [`MorrisPratt::run`] over the page, found with `memmem` (a CPU scans faster that way);
    /// the end state depends only on the page's last `len - 1` bytes, so only those go through the
    /// automaton.
    pub fn scan_page(&self, page: &[u8]) -> PageScan {
        let mut out =
            PageScan { last_newline: memchr::memrchr(b'\n', page).map(|p| p as u32), ..PageScan::default() };
        // The last newline before each match, carried from one match to the next (each byte looked at once).
        let (mut seen, mut nl) = (0usize, None);
        self.finder.for_each_start(page, page.len(), |s| {
            if let Some(p) = memchr::memrchr(b'\n', &page[seen..s]) {
                nl = Some((seen + p) as u32);
            }
            seen = s;
            out.starts.push(s as u32);
            out.newline_before.push(nl);
        });
        let tail = &page[page.len().saturating_sub(self.needle.len() - 1)..];
        out.end_state = self.run(0, tail, |_| {});
        out
    }

    /// The matches that start before a page and end in it, given the engine's `state` at the page's
    /// start: for each, how many bytes before the page it starts (1 to `len - 1`), increasing in
    /// position. Only the page's first `len - 1` bytes are looked at. Pages must be at least `len - 1`
    /// bytes long (a match then spans two pages at most), as flash pages are.
    pub fn seam_starts(&self, state: u32, page: &[u8]) -> Vec<u32> {
        let n = self.needle.len();
        let head = &page[..page.len().min(n - 1)];
        let mut back = Vec::new();
        if state > 0 {
            self.run(state, head, |end| back.push((n - 1 - end) as u32));
        }
        back
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

    #[test]
    fn failure_table_by_hand() {
        assert_eq!(mp_failure(b"abab"), vec![0, 0, 0, 1, 2]);
        assert_eq!(mp_failure(b"aaa"), vec![0, 0, 1, 2]);
        assert_eq!(mp_failure(b"abcabd"), vec![0, 0, 0, 0, 1, 2, 0]);
        assert_eq!(MorrisPratt::with_table(b"abab", &[0, 0, 0, 0, 0]).unwrap_err(), PatternError::BadTable);
        assert!(matches!(MorrisPratt::new(&[b'x'; 1025]), Err(PatternError::TooLong { len: 1025, .. })));
        assert_eq!(MorrisPratt::new(b"").unwrap_err(), PatternError::Empty);
    }

    proptest! {
        /// Pages searched apart, their seams joined from the end states, find exactly the matches of the
        /// automaton run over the whole text, and those are the naive matches.
        #[test]
        fn pages_and_seams_agree_with_the_automaton_and_naive(
            hay in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'\n')], 0..400),
            pat in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b')], 1..9),
            page in 1usize..40,
        ) {
            prop_assume!(page + 1 >= pat.len());
            let mp = MorrisPratt::new(&pat).unwrap();
            let mut whole = Vec::new();
            mp.run(0, &hay, |end| whole.push((end + 1 - pat.len()) as u64));
            let naive = naive_offsets(&hay, &pat);
            prop_assert_eq!(&whole, &naive);
            let mut got = Vec::new();
            let mut state = 0;
            for (i, p) in hay.chunks(page).enumerate() {
                let base = (i * page) as u64;
                got.extend(mp.seam_starts(state, p).into_iter().map(|b| base - b as u64));
                let scan = mp.scan_page(p);
                for (s, nl) in scan.starts.iter().zip(&scan.newline_before) {
                    got.push(base + *s as u64);
                    prop_assert_eq!(*nl, p[..*s as usize].iter().rposition(|c| *c == b'\n').map(|x| x as u32));
                }
                // The state carried to the next page is the automaton's over everything so far (a page
                // at least `len - 1` long decides it alone).
                if p.len() + 1 >= pat.len() {
                    prop_assert_eq!(scan.end_state, mp.run(0, &hay[..base as usize + p.len()], |_| {}));
                }
                state = scan.end_state;
            }
            got.sort_unstable();
            prop_assert_eq!(got, naive);
        }

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
        fn streams_split_anywhere_find_every_match_once(
            hay in proptest::collection::vec(0u8..2, 0..300),
            pat in proptest::collection::vec(0u8..2, 1..7),
            cuts in proptest::collection::vec(0usize..300, 0..12),
            halo_len in 0usize..8,
            offsets in any::<bool>(),
        ) {
            let f = Finder::new(&pat).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= hay.len()).collect();
            cuts.sort_unstable();
            // The last `halo_len` bytes are a halo: matches starting there belong to the next stream.
            let body = hay.len().saturating_sub(halo_len);
            let mut st = StreamSearch::new(&f, 100, offsets);
            let mut prev = 0;
            for c in cuts.into_iter().map(|c| c.min(body)).chain([body]) {
                st.feed(&hay[prev..c]);
                prev = c;
            }
            let (count, got) = st.finish_with_halo(&hay[body..]);
            let want: Vec<u64> = naive_offsets(&hay, &pat).into_iter().filter(|p| (*p as usize) < body).map(|p| p + 100).collect();
            prop_assert_eq!(count, want.len() as u64);
            if offsets {
                prop_assert_eq!(got.unwrap(), want);
            }
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
