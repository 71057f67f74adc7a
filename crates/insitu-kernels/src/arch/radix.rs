//! One pass of a parallel, stable LSD radix sort: per-thread histograms, then a scatter in which every
//! thread writes its own disjoint ranges of the output. The ranges are computed here, from the histograms
//! this function builds itself, so the unsafe shared write below can rely on them.
#![allow(unsafe_code)]

/// A raw output pointer shared by scatter threads that write disjoint ranges.
struct SharedOut(*mut u64);
// SAFETY: the threads of `radix_pass` write only disjoint index ranges through it (see there).
unsafe impl Sync for SharedOut {}

/// Scatters `a` into `out` (same length) stably by `digit(x) < buckets`, `a` split into chunks of `part`
/// elements, one thread each. Returns false, leaving `out` untouched, when every element has the same
/// digit (the pass would not move anything).
pub fn radix_pass(
    a: &[u64],
    out: &mut [u64],
    part: usize,
    buckets: usize,
    digit: impl Fn(u64) -> usize + Sync,
) -> bool {
    let n = a.len();
    assert_eq!(out.len(), n, "radix_pass needs an output as long as its input");
    let part = part.max(1);
    let digit = &digit;
    // Per-thread histograms of this pass's digit.
    let hists: Vec<Vec<usize>> = std::thread::scope(|sc| {
        let hs: Vec<_> = a
            .chunks(part)
            .map(|c| {
                sc.spawn(move || {
                    let mut h = vec![0usize; buckets];
                    for x in c {
                        h[digit(*x)] += 1;
                    }
                    h
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("histogram thread")).collect()
    });
    if (0..buckets).any(|b| hists.iter().map(|h| h[b]).sum::<usize>() == n) {
        return false;
    }
    // Offsets: bucket-major, then thread order, so the scatter stays stable.
    let mut offsets = vec![vec![0usize; buckets]; hists.len()];
    let mut sum = 0;
    for b in 0..buckets {
        for (t, h) in hists.iter().enumerate() {
            offsets[t][b] = sum;
            sum += h[b];
        }
    }
    let shared = SharedOut(out.as_mut_ptr());
    std::thread::scope(|sc| {
        for (c, mut offs) in a.chunks(part).zip(offsets) {
            let shared = &shared;
            sc.spawn(move || {
                for x in c {
                    let d = digit(*x);
                    // SAFETY: thread t's histogram counted exactly the elements of chunk t with digit d, so
                    // offs[d] walks [start of (d, t), start of the next (bucket, thread) pair): a range no
                    // other thread writes, inside `out` because the counts sum to n = out.len().
                    unsafe {
                        *shared.0.add(offs[d]) = *x;
                    }
                    offs[d] += 1;
                }
            });
        }
    });
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pass_is_a_stable_counting_sort_by_the_digit() {
        let a: Vec<u64> = (0..10_000u64).map(|i| ((i * 7919) % 1000) | (i << 32)).collect();
        let mut out = vec![0u64; a.len()];
        assert!(super::radix_pass(&a, &mut out, 1234, 16, |x| (x & 15) as usize));
        let mut want = a.clone();
        want.sort_by_key(|x| x & 15);
        assert_eq!(out, want);
        let same = vec![5u64; 100];
        assert!(!super::radix_pass(&same, &mut vec![0; 100], 7, 16, |x| (x & 15) as usize));
    }
}
