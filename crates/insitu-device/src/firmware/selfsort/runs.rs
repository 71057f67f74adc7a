//! ActiveSort's active merge, the paper's second baseline (§IV-C 2): the host writes sorted runs to their
//! own LBA regions; "once the output is requested the active SSD will internally merge the partial
//! sorted data by comparing the record key, and serve it to the host". The merge keeps one head per run
//! and serves reads in order; a read elsewhere than where the last one ended starts the merge again from
//! the first record (ActiveSort serves a sequential stream). Equal keys come in run order, then position.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::firmware::selfsort::index::{fail, refuse, Index, Merge, Window};
use crate::firmware::{work, FirmwareContext};
use crate::protocol::{IndexKind, RunExtent};

/// Makes run `run`'s window hold bytes `from..to` of it, reading the pages it lacks.
fn ensure(
    fw: &FirmwareContext<'_>,
    runs: &[RunExtent],
    w: &mut Window,
    run: usize,
    from: u64,
    to: u64,
    read: &mut Vec<u64>,
) -> Result<()> {
    if from >= w.start && to <= w.start + w.data.len() as u64 {
        return Ok(());
    }
    let ps = fw.page_size() as u64;
    let (p0, p1) = (from / ps, to.div_ceil(ps));
    let mut data = vec![0u8; ((p1 - p0) * ps) as usize];
    let lbas: Vec<u64> = (p0..p1).map(|p| runs[run].lba + p).collect();
    fw.read_pages(&lbas, &mut data)?;
    read.extend_from_slice(&lbas);
    *w = Window { start: p0 * ps, data };
    Ok(())
}

/// The key of record `pos` of run `run` (read into its window if need be).
fn key_of(
    ix: &Index,
    fw: &FirmwareContext<'_>,
    runs: &[RunExtent],
    windows: &mut [Window],
    run: usize,
    pos: u64,
    read: &mut Vec<u64>,
) -> Result<Vec<u8>> {
    let r = ix.config.record_size as u64;
    let (at, w) = (pos * r, &mut windows[run]);
    ensure(fw, runs, w, run, at, at + r, read)?;
    let k = ix.config.key_field();
    let off = (at - w.start) as usize;
    Ok(w.data[off + k.start..off + k.end].to_vec())
}

/// Appends records of ranks `r0..r1` of the merged runs to `out`.
pub(crate) fn serve(
    ix: &mut Index,
    fw: &FirmwareContext<'_>,
    r0: u64,
    r1: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let IndexKind::Runs(runs) = ix.config.kind.clone() else {
        return Err(refuse(format!("index {} is not a merge of runs", ix.config.id)));
    };
    let r = ix.config.record_size as u64;
    let mut read = Vec::new();
    let mut merge = match ix.merge.take() {
        Some(m) if m.next_rank == r0 => m,
        // The last read ended inside a record (records need not fill pages): it comes again first.
        Some(m) if m.next_rank == r0 + 1 && m.last.len() == r as usize => {
            out.extend_from_slice(&m.last);
            m
        }
        _ => {
            let ps = fw.page_size() as u64;
            let memory = fw.reserve(runs.len() as u64 * (r + 2 * ps))?;
            let mut m = Merge {
                next_rank: 0,
                heap: BinaryHeap::new(),
                windows: runs.iter().map(|_| Window::default()).collect(),
                last: Vec::new(),
                memory,
            };
            for (i, run) in runs.iter().enumerate() {
                if run.records > 0 {
                    let k = key_of(ix, fw, &runs, &mut m.windows, i, 0, &mut read)?;
                    m.heap.push(Reverse((k, i, 0)));
                }
            }
            m
        }
    };
    let log_k = (usize::BITS - runs.len().leading_zeros()) as u64;
    let mut compares = 0u64;
    while merge.next_rank < r1 {
        let Some(Reverse((_, run, pos))) = merge.heap.pop() else {
            return Err(fail(format!("index {}: the runs hold fewer records than the range", ix.config.id)));
        };
        compares += log_k;
        if merge.next_rank >= r0 {
            let w = &merge.windows[run];
            let at = (pos * r - w.start) as usize;
            out.extend_from_slice(&w.data[at..at + r as usize]);
        }
        if pos + 1 < runs[run].records {
            let k = key_of(ix, fw, &runs, &mut merge.windows, run, pos + 1, &mut read)?;
            merge.heap.push(Reverse((k, run, pos + 1)));
            compares += log_k;
        }
        merge.next_rank += 1;
    }
    if let Some(tail) = out.len().checked_sub(r as usize).filter(|_| r1 > r0) {
        merge.last.clear();
        merge.last.extend_from_slice(&out[tail..]);
    }
    fw.count_batch(&read);
    let copied = if ix.copies_records(fw.page_size() as u64) { (r1 - r0) * r } else { 0 };
    fw.add_work(&[(work::MERGE_COMPARE, compares), (work::INDEX_COPY_BYTE, copied)]);
    if merge.next_rank < ix.config.records {
        ix.merge = Some(merge);
    }
    Ok(())
}
