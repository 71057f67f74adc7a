//! [`SortedIndices`]: what a sort produces (NASCENT §3.3): each key with the row it came from, in key order.

/// Sorted indices: (key, row) pairs in key order, value and index travelling together as in NASCENT's
/// sorter. 32-bit keys are packed `key << 32 | row` in one word; 64-bit keys are pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortedIndices {
    Narrow(Vec<u64>),
    Wide(Vec<(u64, u32)>),
}

impl Default for SortedIndices {
    fn default() -> Self {
        SortedIndices::Narrow(Vec::new())
    }
}

impl SortedIndices {
    pub fn len(&self) -> usize {
        match self {
            SortedIndices::Narrow(v) => v.len(),
            SortedIndices::Wide(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The radix image of the i-th key.
    pub fn key(&self, i: usize) -> u64 {
        match self {
            SortedIndices::Narrow(v) => v[i] >> 32,
            SortedIndices::Wide(v) => v[i].0,
        }
    }

    /// The original row of the i-th key.
    pub fn row(&self, i: usize) -> u32 {
        match self {
            SortedIndices::Narrow(v) => v[i] as u32,
            SortedIndices::Wide(v) => v[i].1,
        }
    }

    /// The rows in key order (what the shuffle gathers by).
    pub fn rows(&self) -> Vec<u32> {
        (0..self.len()).map(|i| self.row(i)).collect()
    }

    /// Builds from `(key, row)` pairs in order; narrow if every key fits 32 bits and `narrow` is asked.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u64, u32)>, narrow: bool) -> SortedIndices {
        if narrow {
            SortedIndices::Narrow(pairs.into_iter().map(|(k, r)| k << 32 | r as u64).collect())
        } else {
            SortedIndices::Wide(pairs.into_iter().collect())
        }
    }

    pub fn is_narrow(&self) -> bool {
        matches!(self, SortedIndices::Narrow(_))
    }
}
