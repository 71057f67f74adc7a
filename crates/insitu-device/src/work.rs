//! Counted work: what a program, a firmware extension or a host operator did, in the terms of its
//! algorithm (keys sorted, codes decoded, bytes scanned, rows gathered...), never in the terms of the
//! machine that ran it. The model prices these counts with a profile's engines
//! ([`crate::engines`]), so one run gives the same modeled time on any machine, and the same counts can be
//! priced as a different engine would do the same job (a bitonic network on an FPGA, a quicksort on a
//! host CPU).
//!
//! A ledger is a map from a work item's name to a count. Names are dotted; items whose price depends on
//! the size of each call (a sort of `n` keys costs more than `n` times a sort of one) carry a size class
//! in their name: `sort.b32.n17.keys` counts the 32-bit keys sorted by calls of at most 2^17 keys, and
//! `sort.b32.n17.calls` those calls. [`SortClass`] reads such names back.

use std::collections::BTreeMap;

/// Work counts by item name.
pub type Ledger = BTreeMap<String, u64>;

/// A dictionary code decoded to its value (NASCENT §3.6).
pub const DECODE_CODES: &str = "decode.codes";
/// Bytes of decoded values written out.
pub const DECODE_OUT_BYTES: &str = "decode.out_bytes";
/// A row gathered by a sorted index (NASCENT's shuffle kernel, §3.5): one random access.
pub const GATHER_ROWS: &str = "gather.rows";
/// Bytes of gathered rows.
pub const GATHER_BYTES: &str = "gather.bytes";
/// Bytes a literal string search scanned.
pub const SEARCH_BYTES: &str = "search.bytes";
/// Bytes of items compared with a query by Hamming distance (BlueDBM §7.1), per query.
pub const HAMMING_BYTES: &str = "hamming.bytes";
/// A shuffle key hashed to its partition (PSACS's Partitioner, §III-B).
pub const SHUFFLE_HASH_ROWS: &str = "shuffle.hash_rows";
/// A record placed at a random position by a shuffle's grouping (PSACS's Gather reads it from its
/// scratchpad, §IV-C; software reads, or appends to a bucket, at a random place in memory).
pub const SHUFFLE_GATHER_ROWS: &str = "shuffle.gather_rows";
/// Bytes of records gathered into partition order (PSACS's Gather, §III-C).
pub const SHUFFLE_GATHER_BYTES: &str = "shuffle.gather_bytes";
/// Bytes the Merger moved to concatenate partitions across the kernel's on-chip tiles (PSACS §IV-B,
/// Fig. 8), and across batches parked on flash when a part is larger than device memory.
pub const SHUFFLE_MERGE_BYTES: &str = "shuffle.merge_bytes";
/// Bytes of partitions turned column-major and compressed (§IV-E; compression is insitu's addition).
pub const ENCODE_BYTES: &str = "encode.bytes";
/// List entries the copy stage moved on to device DRAM (DaMoN '16 §4.2: `D/s` of them, each 4-byte ID
/// copied at `tau`).
pub const INTERSECT_ENTRIES: &str = "intersect.entries";
/// List entries passed over in the staging buffer because their ID belongs to another ID range (lists
/// larger than the device's memory are intersected range by range, each range scanning the lists again).
pub const INTERSECT_SKIPPED: &str = "intersect.skipped";
/// Memory accesses of the intersection itself, counted as the paper's cost model does (§4: `2(|L1| +
/// |L2|)` for a merge, `2 |L1| log2 |L2|` for binary search, the cheaper one).
pub const INTERSECT_ACCESSES: &str = "intersect.accesses";
/// Entries a k-way merge emitted, by the size class of k: `merge.k4.keys` for merges of 9 to 16 runs.
pub const MERGE: &str = "merge";

/// Adds `n` of `item` to a ledger (zero counts are left out, so ledgers compare equal).
pub fn add(ledger: &mut Ledger, item: &str, n: u64) {
    if n > 0 {
        *ledger.entry(item.to_string()).or_default() += n;
    }
}

/// Adds every count of `other` to `ledger`.
pub fn add_all(ledger: &mut Ledger, other: &Ledger) {
    for (k, v) in other {
        add(ledger, k, *v);
    }
}

/// What `after` has more than `before`.
pub fn since(after: &Ledger, before: &Ledger) -> Ledger {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// The size class of `n`: the least `k` with `n <= 2^k`.
pub fn size_class(n: u64) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// A class of sort calls: keys of `bits` bits, each call sorting at most `2^log2n` keys. `kernel` names
/// the sorter: `sort` for table sorts (NASCENT's sort kernel), `shuffle.sort` for the (partition, row)
/// pairs a shuffle orders (PSACS's Sorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SortClass {
    pub bits: u32,
    pub log2n: u32,
}

/// Table sorts (NASCENT's sort kernel, or a host's sort).
pub const SORT: &str = "sort";
/// The (partition, row) pairs a shuffle orders (PSACS's Sorter, §IV-A).
pub const SHUFFLE_SORT: &str = "shuffle.sort";

impl SortClass {
    /// Counts one sort of `n` keys of `bits` bits by `kernel` ([`SORT`] or [`SHUFFLE_SORT`]): its keys
    /// and the call.
    pub fn count(ledger: &mut Ledger, kernel: &str, bits: u32, n: u64) {
        Self::count_calls(ledger, kernel, bits, n, 1);
    }

    /// Counts `calls` sorts of `n` keys each, as [`SortClass::count`] does one.
    pub fn count_calls(ledger: &mut Ledger, kernel: &str, bits: u32, n: u64, calls: u64) {
        if n == 0 || calls == 0 {
            return;
        }
        let c = SortClass { bits, log2n: size_class(n) };
        add(ledger, &c.item(kernel, "keys"), n * calls);
        add(ledger, &c.item(kernel, "calls"), calls);
    }

    pub fn item(&self, kernel: &str, what: &str) -> String {
        format!("{kernel}.b{}.n{}.{what}", self.bits, self.log2n)
    }

    /// The sort classes of `kernel` in a ledger, with (keys, calls) of each.
    pub fn all(ledger: &Ledger, kernel: &str) -> Vec<(SortClass, u64, u64)> {
        let mut out: BTreeMap<SortClass, (u64, u64)> = BTreeMap::new();
        let prefix = format!("{kernel}.b");
        for (name, v) in ledger.range(prefix.clone()..format!("{kernel}.c")) {
            let Some((class, what)) = name.strip_prefix(&prefix).and_then(Self::parse) else { continue };
            let e = out.entry(class).or_default();
            match what {
                "keys" => e.0 += v,
                _ => e.1 += v,
            }
        }
        out.into_iter().map(|(c, (k, n))| (c, k, n.max(1))).collect()
    }

    /// Whether `item` is a sort class item of `kernel`.
    pub fn is_item(item: &str, kernel: &str) -> bool {
        item.strip_prefix(kernel).and_then(|r| r.strip_prefix(".b")).and_then(Self::parse).is_some()
    }

    /// `32.n17.keys` -> the class and `keys`.
    fn parse(rest: &str) -> Option<(SortClass, &str)> {
        let mut it = rest.split('.');
        let bits = it.next()?.parse().ok()?;
        let log2n = it.next()?.strip_prefix('n')?.parse().ok()?;
        let what = it.next().filter(|w| *w == "keys" || *w == "calls")?;
        it.next().is_none().then_some((SortClass { bits, log2n }, what))
    }
}

/// Counts a k-way merge of `entries` entries from `ways` sorted runs.
pub fn count_merge(ledger: &mut Ledger, ways: u64, entries: u64) {
    if ways > 1 {
        add(ledger, &format!("{MERGE}.k{}.keys", size_class(ways)), entries);
    }
}

/// The merges in a ledger: (log2 of the ways, entries).
pub fn merges(ledger: &Ledger) -> Vec<(u32, u64)> {
    ledger
        .range(format!("{MERGE}.")..format!("{MERGE}/"))
        .filter_map(|(name, v)| {
            let k = name.strip_prefix("merge.k")?.strip_suffix(".keys")?.parse().ok()?;
            Some((k, *v))
        })
        .collect()
}

/// The memory accesses of intersecting a list of `short` entries with one of `long` entries, as the
/// DaMoN '16 cost model counts them (§4): the cheaper of a linear merge and a binary search per entry.
pub fn intersect_accesses(short: u64, long: u64) -> u64 {
    let (s, l) = (short.min(long) as f64, short.max(long) as f64);
    let linear = 2.0 * (s + l);
    let binary = 2.0 * s * l.max(2.0).log2();
    linear.min(binary).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_classes_round_trip_through_their_names() {
        let mut l = Ledger::new();
        SortClass::count(&mut l, SORT, 32, 131_072);
        SortClass::count(&mut l, SORT, 32, 100_000);
        SortClass::count(&mut l, SORT, 64, 3);
        SortClass::count(&mut l, SORT, 64, 0);
        SortClass::count(&mut l, SHUFFLE_SORT, 64, 9);
        add(&mut l, DECODE_CODES, 7);
        assert!(SortClass::is_item("sort.b32.n17.keys", SORT));
        assert!(!SortClass::is_item("shuffle.sort.b64.n4.keys", SORT));
        assert!(SortClass::is_item("shuffle.sort.b64.n4.calls", SHUFFLE_SORT));
        assert_eq!(SortClass::all(&l, SHUFFLE_SORT), vec![(SortClass { bits: 64, log2n: 4 }, 9, 1)]);
        let all = SortClass::all(&l, SORT);
        assert_eq!(
            all,
            vec![(SortClass { bits: 32, log2n: 17 }, 231_072, 2), (SortClass { bits: 64, log2n: 2 }, 3, 1),]
        );
        assert_eq!(size_class(1), 0);
        assert_eq!(size_class(2), 1);
        assert_eq!(size_class(3), 2);
    }

    #[test]
    fn merges_and_differences() {
        let mut a = Ledger::new();
        count_merge(&mut a, 12, 1000);
        count_merge(&mut a, 1, 5);
        assert_eq!(merges(&a), vec![(4, 1000)]);
        let mut b = a.clone();
        add(&mut b, SEARCH_BYTES, 10);
        add(&mut b, "merge.k4.keys", 1);
        let d = since(&b, &a);
        assert_eq!(d.len(), 2);
        assert_eq!(d["merge.k4.keys"], 1);
    }

    #[test]
    fn intersection_accesses_follow_the_paper() {
        // Equal sizes: a merge (2 (n + n)) beats binary search (2 n log2 n).
        assert_eq!(intersect_accesses(1000, 1000), 4000);
        // A short list against a long one: binary search, 2 x 10 x log2(2^20).
        assert_eq!(intersect_accesses(10, 1 << 20), 400);
    }
}
