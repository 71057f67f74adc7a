//! The FTL's logical-to-physical page map, stored in chunks of 1024 entries that exist only where some
//! page is mapped: memory follows the data stored (8 bytes a page), not the declared capacity.

use std::collections::BTreeMap;

use crate::geometry::{Lpn, Ppn};

const CHUNK: u64 = 1024;
const UNMAPPED: Ppn = u64::MAX;

#[derive(Debug, Default, Clone)]
pub struct PageMap {
    chunks: BTreeMap<u64, Chunk>,
    mapped: u64,
}

/// [`CHUNK`] entries and how many of them are mapped (the chunk goes when none is).
#[derive(Debug, Clone)]
struct Chunk {
    slots: Box<[Ppn]>,
    mapped: u32,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk { slots: vec![UNMAPPED; CHUNK as usize].into(), mapped: 0 }
    }
}

impl PageMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of mapped logical pages.
    pub fn mapped(&self) -> u64 {
        self.mapped
    }

    pub fn get(&self, lpn: Lpn) -> Option<Ppn> {
        let c = self.chunks.get(&(lpn / CHUNK))?;
        let p = c.slots[(lpn % CHUNK) as usize];
        (p != UNMAPPED).then_some(p)
    }

    /// Maps `lpn` to `ppn`; returns the previous physical page.
    pub fn set(&mut self, lpn: Lpn, ppn: Ppn) -> Option<Ppn> {
        let c = self.chunks.entry(lpn / CHUNK).or_insert_with(Chunk::new);
        let old = std::mem::replace(&mut c.slots[(lpn % CHUNK) as usize], ppn);
        if old == UNMAPPED {
            c.mapped += 1;
            self.mapped += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Maps `lpn + i` to `ppn + i` for `i < n`, over pages that are not mapped yet (checkpoint restore).
    pub fn set_run(&mut self, lpn: Lpn, ppn: Ppn, n: u64) {
        let mut i = 0;
        while i < n {
            let l = lpn + i;
            let key = l / CHUNK;
            let c = self.chunks.entry(key).or_insert_with(Chunk::new);
            let start = (l % CHUNK) as usize;
            let take = ((CHUNK - l % CHUNK).min(n - i)) as usize;
            for (k, slot) in c.slots[start..start + take].iter_mut().enumerate() {
                debug_assert_eq!(*slot, UNMAPPED, "set_run over a mapped page");
                if *slot == UNMAPPED {
                    c.mapped += 1;
                    self.mapped += 1;
                }
                *slot = ppn + i + k as u64;
            }
            i += take as u64;
        }
    }

    /// Unmaps `lpn`; returns the physical page it had.
    pub fn unset(&mut self, lpn: Lpn) -> Option<Ppn> {
        let key = lpn / CHUNK;
        let c = self.chunks.get_mut(&key)?;
        let old = std::mem::replace(&mut c.slots[(lpn % CHUNK) as usize], UNMAPPED);
        if old == UNMAPPED {
            return None;
        }
        self.mapped -= 1;
        c.mapped -= 1;
        if c.mapped == 0 {
            self.chunks.remove(&key);
        }
        Some(old)
    }

    /// All mappings as maximal runs `(lpn, ppn, len)` of consecutive logical to consecutive physical pages,
    /// in logical order.
    pub fn runs(&self) -> Vec<(Lpn, Ppn, u64)> {
        let mut out: Vec<(Lpn, Ppn, u64)> = Vec::new();
        for (k, c) in &self.chunks {
            for (i, p) in c.slots.iter().enumerate() {
                if *p == UNMAPPED {
                    continue;
                }
                let lpn = k * CHUNK + i as u64;
                match out.last_mut() {
                    Some((l, pp, n)) if *l + *n == lpn && *pp + *n == *p => *n += 1,
                    _ => out.push((lpn, *p, 1)),
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_unset_and_runs() {
        let mut m = PageMap::new();
        assert_eq!(m.set(5, 100), None);
        assert_eq!(m.set(6, 101), None);
        assert_eq!(m.set(2000, 7), None);
        assert_eq!(m.set(5, 200), Some(100));
        assert_eq!(m.runs(), vec![(5, 200, 1), (6, 101, 1), (2000, 7, 1)]);
        assert_eq!(m.set(5, 100), Some(200));
        assert_eq!(m.runs(), vec![(5, 100, 2), (2000, 7, 1)]);
        assert_eq!(m.unset(2000), Some(7));
        assert_eq!(m.get(2000), None);
        assert_eq!(m.mapped(), 2);
        let mut r = PageMap::new();
        r.set_run(1020, 50, 10);
        assert_eq!(r.runs(), vec![(1020, 50, 10)]);
        assert_eq!((r.get(1029), r.mapped()), (Some(59), 10));
    }

    #[test]
    fn a_chunk_goes_with_its_last_mapped_page_and_not_before() {
        let mut m = PageMap::new();
        m.set_run(0, 10, 3 * CHUNK);
        m.set(5000, 1);
        assert_eq!(m.chunks.len(), 4);
        // Trimmed in order, as a range is: each chunk stays until its last page goes.
        for l in 0..2 * CHUNK + 1 {
            assert_eq!(m.unset(l), Some(10 + l));
            let left = 2 + usize::from(l < CHUNK - 1) + usize::from(l < 2 * CHUNK - 1);
            assert_eq!(m.chunks.len(), left, "after unmapping page {l}");
        }
        assert_eq!(m.unset(0), None);
        // A page mapped again, over an unmapped one and over a mapped one.
        m.set(2 * CHUNK, 7);
        assert_eq!(m.set(2 * CHUNK, 8), Some(7));
        for l in 2 * CHUNK..3 * CHUNK {
            m.unset(l);
        }
        assert_eq!((m.chunks.len(), m.mapped()), (1, 1));
        assert_eq!(m.runs(), vec![(5000, 1, 1)]);
    }
}
