//! Intersection of sorted ID lists (the Smart SSD list-intersection paper, DaMoN '16, §3.2): SvS, where
//! each ID of the shorter list is tested for membership in the longer by a linear merge or by galloping
//! (exponential then binary search), whichever the size ratio favours; k lists are intersected shortest
//! first, the running result against the next list.
//!
//! The choice rule ([`GALLOP_RATIO`]) was measured with `cargo bench -p insitu-kernels --bench intersect`
//! (4M-ID lists, 2 cores): the branch-free merge wins up to |L2| / |L1| = 4 (12.4 vs 13.3 ms), galloping
//! from 8 on (7.9 vs 11.3 ms; 0.8 vs 9.9 ms at 256).

/// Size ratio from which galloping beats the linear merge.
pub const GALLOP_RATIO: usize = 6;

/// Branch-free linear merge of two sorted, duplicate-free lists; appends common IDs to `out`.
pub fn intersect_linear(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    let (mut i, mut j) = (0usize, 0usize);
    out.reserve(a.len().min(b.len()));
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        if x == y {
            out.push(x);
        }
        // Advance whichever is smaller (both when equal) without a data-dependent branch on the path.
        i += (x <= y) as usize;
        j += (y <= x) as usize;
    }
}

/// SIMD block merge (the all-pairs comparison of Schlegel et al. / Lemire et al.): 4 IDs of each list are
/// compared against each other in registers; the block whose last ID is smaller advances. Falls back to
/// the scalar merge where SSE2 is missing and for the tails.
pub fn intersect_simd(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    {
        let (i, j) = crate::arch::x86::intersect_blocks(a, b, out);
        intersect_linear(&a[i..], &b[j..], out);
    }
    #[cfg(not(target_arch = "x86_64"))]
    intersect_linear(a, b, out);
}

/// Galloping membership: for each ID of `small`, an exponential search from the last position in `large`
/// followed by a binary search; appends common IDs to `out`.
pub fn intersect_gallop(small: &[u32], large: &[u32], out: &mut Vec<u32>) {
    let mut lo = 0usize;
    for &x in small {
        lo = gallop(lo, large.len(), x, |i| large[i]);
        if lo == large.len() {
            break;
        }
        if large[lo] == x {
            out.push(x);
            lo += 1;
        }
    }
}

/// Intersects two sorted, duplicate-free lists, choosing the method by their size ratio.
pub fn intersect2(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut out = Vec::new();
    if small.is_empty() {
        return out;
    }
    if large.len() / small.len() >= GALLOP_RATIO {
        intersect_gallop(small, large, &mut out);
    } else {
        intersect_simd(small, large, &mut out);
    }
    out
}

/// SvS over k lists: shortest first, the running result against the next shortest.
pub fn intersect_k(lists: &[&[u32]]) -> Vec<u32> {
    intersect_k_steps(lists).0
}

/// [`intersect_k`], also returning the sizes of the two lists of each pairwise step (the running result,
/// then the next list), which a cost model counts.
pub fn intersect_k_steps(lists: &[&[u32]]) -> (Vec<u32>, Vec<(usize, usize)>) {
    let mut order: Vec<&[u32]> = lists.to_vec();
    order.sort_by_key(|l| l.len());
    let Some((first, rest)) = order.split_first() else { return (Vec::new(), Vec::new()) };
    let mut acc = first.to_vec();
    let mut steps = Vec::with_capacity(rest.len());
    for l in rest {
        if acc.is_empty() {
            break;
        }
        steps.push((acc.len(), l.len()));
        acc = intersect2(&acc, l);
    }
    (acc, steps)
}

/// The last step of SvS over a list streamed as bytes: the IDs of `acc` (increasing) found among the
/// `entry`-byte entries of `data` (each a little-endian u32 ID first, increasing), appended to `out`.
/// `next` is the place in `acc` reached, kept between calls so the list can come a piece at a time.
///
/// When the IDs of `acc` that can fall in this piece are few against its entries (fewer than one in 8),
/// each gallops to its place (1, 2, 4... entries ahead, then a binary search) instead of a look at every
/// entry; otherwise the two are merged one compare at a time.
pub fn match_entries(acc: &[u32], data: &[u8], entry: usize, next: &mut usize, out: &mut Vec<u32>) {
    let n = data.len() / entry;
    if n == 0 || *next >= acc.len() {
        return;
    }
    let id_at = |i: usize| crate::le::u32_at(&data[i * entry..]);
    let last = id_at(n - 1);
    let within = acc[*next..].partition_point(|&x| x <= last);
    if within * 8 < n {
        let mut pos = 0usize;
        for _ in 0..within {
            let want = acc[*next];
            pos = gallop(pos, n, want, id_at);
            if pos < n && id_at(pos) == want {
                out.push(want);
                pos += 1;
            }
            *next += 1;
        }
        return;
    }
    for e in data.chunks_exact(entry) {
        if *next == acc.len() {
            return;
        }
        let id = crate::le::u32_at(e);
        while *next < acc.len() && acc[*next] < id {
            *next += 1;
        }
        if *next < acc.len() && acc[*next] == id {
            out.push(id);
            *next += 1;
        }
    }
}

/// The first place in `from..len` whose value (`at`, increasing) is at least `want`, or `len`.
fn gallop(from: usize, len: usize, want: u32, at: impl Fn(usize) -> u32) -> usize {
    // The next few places one by one: where both sides are dense the answer is near, and a plain step
    // beats the search's branches.
    let near = (from + 4).min(len);
    let mut i = from;
    while i < near {
        if at(i) >= want {
            return i;
        }
        i += 1;
    }
    if i == len {
        return len;
    }
    // at(lo) < want; look 1, 2, 4... places ahead until a value is at least `want` (or the end).
    let (mut lo, mut step) = (i - 1, 1usize);
    let mut hi = i;
    while hi < len && at(hi) < want {
        lo = hi;
        step *= 2;
        hi = lo.saturating_add(step);
    }
    // The answer is in lo + 1..=min(hi, len).
    let (mut l, mut h) = (lo + 1, hi.min(len));
    while l < h {
        let m = l + (h - l) / 2;
        if at(m) < want {
            l = m + 1;
        } else {
            h = m;
        }
    }
    l
}

/// Where a list is not strictly increasing: the first position `i` with `ids[i] <= ids[i - 1]`.
pub fn first_unsorted(ids: &[u32]) -> Option<usize> {
    ids.windows(2).position(|w| w[1] <= w[0]).map(|p| p + 1)
}

/// Naive reference for tests.
pub fn intersect_naive(lists: &[&[u32]]) -> Vec<u32> {
    let Some(first) = lists.first() else { return Vec::new() };
    first.iter().copied().filter(|x| lists[1..].iter().all(|l| l.contains(x))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted_set(v: Vec<u32>) -> Vec<u32> {
        let mut v = v;
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn unsorted_and_duplicate_positions_are_found() {
        assert_eq!(first_unsorted(&[1, 3, 3, 5]), Some(2));
        assert_eq!(first_unsorted(&[5, 4]), Some(1));
        assert_eq!(first_unsorted(&[1, 2, 9]), None);
    }

    proptest! {
        #[test]
        fn every_method_agrees_with_naive(a in proptest::collection::vec(0u32..500, 0..200),
                                          b in proptest::collection::vec(0u32..500, 0..2000),
                                          c in proptest::collection::vec(0u32..500, 0..300)) {
            let (a, b, c) = (sorted_set(a), sorted_set(b), sorted_set(c));
            let want = intersect_naive(&[&a, &b]);
            let mut lin = Vec::new();
            intersect_linear(&a, &b, &mut lin);
            prop_assert_eq!(&lin, &want);
            let mut gal = Vec::new();
            intersect_gallop(&a, &b, &mut gal);
            prop_assert_eq!(&gal, &want);
            let mut simd = Vec::new();
            intersect_simd(&a, &b, &mut simd);
            prop_assert_eq!(&simd, &want);
            let mut simd2 = Vec::new();
            intersect_simd(&b, &a, &mut simd2);
            prop_assert_eq!(&simd2, &want);
            prop_assert_eq!(&intersect2(&b, &a), &want);
            prop_assert_eq!(intersect_k(&[&a, &b, &c]), intersect_naive(&[&a, &b, &c]));
            // b as 8-byte entries, streamed in pieces of 7 entries.
            let bytes: Vec<u8> = b.iter().flat_map(|id| [id.to_le_bytes(), [9; 4]].concat()).collect();
            let (mut next, mut streamed) = (0, Vec::new());
            for piece in bytes.chunks(7 * 8) {
                match_entries(&a, piece, 8, &mut next, &mut streamed);
            }
            prop_assert_eq!(&streamed, &want);
        }

        #[test]
        fn a_few_ids_against_a_long_streamed_list_agree_with_naive(
            long in proptest::collection::vec(0u32..20_000, 0..5000),
            picks in proptest::collection::vec(0usize..5000, 0..20),
            others in proptest::collection::vec(0u32..20_000, 0..20),
            piece in 1usize..3000,
        ) {
            // Some IDs taken from the long list (so some match), some anywhere: few enough against each
            // piece that the matches gallop.
            let long = sorted_set(long);
            let few = sorted_set(
                picks.iter().filter_map(|i| long.get(*i).copied()).chain(others).collect(),
            );
            let want = intersect_naive(&[&few, &long]);
            let bytes: Vec<u8> = long.iter().flat_map(|id| id.to_le_bytes()).collect();
            let (mut next, mut streamed) = (0, Vec::new());
            for p in bytes.chunks(piece * 4) {
                match_entries(&few, p, 4, &mut next, &mut streamed);
            }
            prop_assert_eq!(&streamed, &want);
            let mut gal = Vec::new();
            intersect_gallop(&few, &long, &mut gal);
            prop_assert_eq!(&gal, &want);
        }
    }
}
