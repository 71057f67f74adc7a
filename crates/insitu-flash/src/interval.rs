//! A set of disjoint `u64` ranges (`start -> len`), merged on insert. Used for free logical space and for
//! raw (block-view) ranges.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    ranges: BTreeMap<u64, u64>,
    total: u64,
}

impl IntervalSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sum of the lengths.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(s, l)| (*s, *l))
    }

    /// Adds `[start, start + len)`, which must not overlap the set.
    pub fn insert(&mut self, mut start: u64, mut len: u64) {
        if len == 0 {
            return;
        }
        debug_assert!(!self.overlaps(start, len), "insert of an overlapping range");
        self.total += len;
        if let Some((&ps, &pl)) = self.ranges.range(..start).next_back() {
            if ps + pl == start {
                self.ranges.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(nl) = self.ranges.remove(&(start + len)) {
            len += nl;
        }
        self.ranges.insert(start, len);
    }

    /// True if any point of `[start, start + len)` is in the set.
    pub fn overlaps(&self, start: u64, len: u64) -> bool {
        if len == 0 {
            return false;
        }
        let end = start + len;
        if let Some((&ps, &pl)) = self.ranges.range(..=start).next_back() {
            if ps + pl > start {
                return true;
            }
        }
        self.ranges.range(start..end).next().is_some()
    }

    /// True if all of `[start, start + len)` is in the set.
    pub fn contains(&self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        match self.ranges.range(..=start).next_back() {
            Some((&ps, &pl)) => ps + pl >= start + len,
            None => false,
        }
    }

    /// The end of the range that holds `point`, if one does.
    pub fn end_of_range_at(&self, point: u64) -> Option<u64> {
        let (&s, &l) = self.ranges.range(..=point).next_back()?;
        (s + l > point).then_some(s + l)
    }

    /// Removes every point of `[start, start + len)` that is in the set; returns how many were removed.
    pub fn remove(&mut self, start: u64, len: u64) -> u64 {
        let end = start + len;
        let mut removed = 0;
        let mut touched: Vec<(u64, u64)> = Vec::new();
        if let Some((&ps, &pl)) = self.ranges.range(..start).next_back() {
            if ps + pl > start {
                touched.push((ps, pl));
            }
        }
        touched.extend(self.ranges.range(start..end).map(|(s, l)| (*s, *l)));
        for (s, l) in touched {
            self.ranges.remove(&s);
            let e = s + l;
            if s < start {
                self.ranges.insert(s, start - s);
            }
            if e > end {
                self.ranges.insert(end, e - end);
            }
            removed += e.min(end) - s.max(start);
        }
        self.total -= removed;
        removed
    }

    /// Takes up to `want` points from the set: the first range that holds `want` whole, otherwise the
    /// largest range. Returns `(start, len)` or `None` if the set is empty.
    pub fn take(&mut self, want: u64) -> Option<(u64, u64)> {
        let pick = self
            .ranges
            .iter()
            .find(|(_, l)| **l >= want)
            .or_else(|| self.ranges.iter().max_by_key(|(s, l)| (**l, std::cmp::Reverse(**s))))
            .map(|(s, l)| (*s, *l))?;
        let len = pick.1.min(want);
        self.remove(pick.0, len);
        Some((pick.0, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_and_remove_splits() {
        let mut s = IntervalSet::new();
        s.insert(0, 10);
        s.insert(10, 5);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(0, 15)]);
        assert_eq!(s.remove(3, 4), 4);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(0, 3), (7, 8)]);
        assert!(s.contains(7, 8) && !s.contains(2, 2) && s.overlaps(2, 2));
        assert_eq!(s.take(5), Some((7, 5)));
        assert_eq!(s.take(100), Some((0, 3)));
        assert_eq!(s.total(), 3);
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..64, 1u64..16), 1..60)) {
            let mut s = IntervalSet::new();
            let mut bits = [false; 96];
            for (ins, start, len) in ops {
                if ins {
                    if !(start..start + len).any(|i| bits[i as usize]) {
                        s.insert(start, len);
                        for i in start..start + len { bits[i as usize] = true; }
                    }
                } else {
                    let want = (start..start + len).filter(|i| bits[*i as usize]).count() as u64;
                    prop_assert_eq!(s.remove(start, len), want);
                    for i in start..start + len { bits[i as usize] = false; }
                }
                prop_assert_eq!(s.total(), bits.iter().filter(|b| **b).count() as u64);
                for i in 0..96u64 {
                    prop_assert_eq!(s.contains(i, 1), bits[i as usize]);
                    // The end of a point's range: the first point after it not in the set (ranges merge).
                    let end = (i..96).find(|j| !bits[*j as usize]).unwrap_or(96);
                    prop_assert_eq!(s.end_of_range_at(i), bits[i as usize].then_some(end));
                }
            }
        }
    }
}
