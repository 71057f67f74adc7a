//! K-way merge of sorted runs (NASCENT: chunks larger than the sequence memory are sorted separately and
//! merged; `--merge` merges the sorted parts of all devices). Ties between runs are broken by row, so the
//! merge of sorted runs equals a sort of the whole.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::indices::SortedIndices;

/// Merges sorted runs of (key, row) into one sorted run.
pub fn kway_merge_runs(runs: &[SortedIndices]) -> SortedIndices {
    let narrow = runs.iter().all(SortedIndices::is_narrow);
    if runs.len() == 1 {
        return runs[0].clone();
    }
    let total: usize = runs.iter().map(SortedIndices::len).sum();
    let mut out: Vec<(u64, u32)> = Vec::with_capacity(total);
    let mut heap: BinaryHeap<Reverse<(u64, u32, usize)>> = BinaryHeap::with_capacity(runs.len());
    let mut pos = vec![0usize; runs.len()];
    for (r, run) in runs.iter().enumerate() {
        if !run.is_empty() {
            heap.push(Reverse((run.key(0), run.row(0), r)));
        }
    }
    while let Some(Reverse((k, row, r))) = heap.pop() {
        out.push((k, row));
        pos[r] += 1;
        let p = pos[r];
        if p < runs[r].len() {
            heap.push(Reverse((runs[r].key(p), runs[r].row(p), r)));
        }
    }
    SortedIndices::from_pairs(out, narrow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sort::argsort_fast;

    #[test]
    fn merging_sorted_chunks_equals_sorting_the_whole() {
        let keys: Vec<u32> = (0..1000u32).map(|i| i.wrapping_mul(2654435761) % 97).collect();
        let runs: Vec<SortedIndices> =
            keys.chunks(128).enumerate().map(|(c, part)| argsort_fast(part, c as u32 * 128)).collect();
        assert_eq!(kway_merge_runs(&runs), argsort_fast(&keys, 0));
        assert!(kway_merge_runs(&[]).is_empty());
    }
}
