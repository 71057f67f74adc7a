//! Compute engines: how a device's kernels, a host's cores or an accelerator beside the host turn counted
//! work ([`crate::work`]) into time. An engine is described by its hardware's figures (clock, parallel
//! units, cycles per unit of work, how it sorts); pricing is arithmetic on the counts, so it gives the
//! same answer on any machine.
//!
//! Most work streams: `count x cycles[item]` at the engine's clock. Sorting does not, and engines sort
//! differently, so each names its sorter ([`Sorter`]):
//! - a **bitonic network** (NASCENT §3.3-3.4): `P`-element sorter, on-chip sequence memory of `C`
//!   elements, merge sub-steps on chip at `2P` elements a cycle, and sub-steps of larger distance as
//!   passes over device DRAM;
//! - a **comparison sort** on a core (a quicksort, a merge sort): `n log2 n` key-levels at a cost in
//!   cycles each, plus a pass over memory for every level whose partitions do not fit the cache.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::work::{self, Ledger, SortClass};

/// One engine's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engine {
    pub clock_hz: f64,
    /// Cycles per unit of streaming work, by item name (see [`crate::work`]). Work an engine has no
    /// price for cannot be modeled on it: [`Engine::price`] names it.
    #[serde(default)]
    pub cycles: BTreeMap<String, f64>,
    /// Cycles per key and per level of a k-way merge (a heap or a merge tree: `log2 k` levels).
    #[serde(default)]
    pub merge_key_level: f64,
    /// How table sorts run.
    pub sort: Sorter,
    /// How a shuffle's (partition, row) pairs are sorted; the table sorter when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_sort: Option<Sorter>,
    /// Bytes of records the shuffle's on-chip scratchpad holds (PSACS's Reader, §IV-B/C): a shuffle then
    /// runs in tiles of records that fit it, each partitioned, sorted and gathered on chip, and its
    /// Merger concatenates every partition across the tiles in device memory (Fig. 8). Absent: an
    /// engine that shuffles a whole batch of device memory at once (a core with caches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle_scratchpad_bytes: Option<u64>,
}

/// How an engine sorts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Sorter {
    /// A bitonic sorting network with on-chip sequence memory (NASCENT §3.4, Fig. 5).
    Bitonic {
        /// `P`: keys the sorter takes (and sorts) per cycle.
        width: u32,
        /// Bytes of on-chip sequence memory for key values: `C = on_chip_bytes / key bytes` keys
        /// (§4.2: 128K 32-bit or 64K 64-bit keys).
        on_chip_bytes: u64,
        /// Bytes of the row index carried beside each key (§3.4: "concatenates to the value").
        index_bytes: u32,
        /// Bytes per cycle the kernel's memory port moves each way (§3.4: 512-bit AXI).
        port_bytes: u32,
        /// Device DRAM bandwidth to the kernel, bytes/s, for passes that do not fit on chip.
        memory_bw: f64,
    },
    /// A comparison sort on a core.
    Compare {
        /// Cycles per key and per level (`log2 n` levels).
        key_level: f64,
        /// Bytes of cache: levels whose partitions fit it stream from cache.
        cache_bytes: u64,
        /// Bytes of row index sorted beside each key.
        index_bytes: u32,
        /// Bytes/s one core streams from memory, for the levels that do not fit the cache.
        memory_bw: f64,
        /// Levels one pass over memory does: 2 for a quicksort or a binary merge, 16 for a 16-way merge
        /// tree (4 levels a pass).
        #[serde(default = "two")]
        ways: u32,
    },
}

fn two() -> u32 {
    2
}

/// The time of some work on an engine, by stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Priced {
    /// Seconds of each priced stage, by work item (sort classes gathered under `sort`, `shuffle.sort`,
    /// merges under `merge`).
    pub stages: BTreeMap<String, f64>,
    /// Work items the engine has no price for.
    pub unpriced: Vec<String>,
}

impl Priced {
    /// The stages' seconds added up (0 for none: a float `sum` of nothing is -0, which reports print).
    pub fn seconds(&self) -> f64 {
        self.stages.values().fold(0.0, |a, b| a + b)
    }
}

impl Engine {
    /// An engine with no prices: every unit of work on it is reported unpriced. Stands in for the engines
    /// of a profile stored by an older insitu under a name that is not built in.
    pub fn unknown() -> Engine {
        Engine {
            clock_hz: 1.0e9,
            cycles: BTreeMap::new(),
            merge_key_level: 0.0,
            sort: Sorter::Compare { key_level: 0.0, cache_bytes: 0, index_bytes: 0, memory_bw: 1.0, ways: 2 },
            shuffle_sort: None,
            shuffle_scratchpad_bytes: None,
        }
    }

    /// Prices `work` run on one unit of this engine (the caller spreads it over parallel units).
    pub fn price(&self, work: &Ledger) -> Priced {
        let mut out = Priced::default();
        if self.cycles.is_empty() {
            out.unpriced = work.keys().cloned().collect();
            return out;
        }
        let mut stage = |name: &str, s: f64| {
            if s > 0.0 {
                *out.stages.entry(name.to_string()).or_default() += s;
            }
        };
        for (class, keys, calls) in SortClass::all(work, work::SORT) {
            stage(work::SORT, self.sort.seconds(self.clock_hz, class, keys, calls));
        }
        let shuffle_sorter = self.shuffle_sort.as_ref().unwrap_or(&self.sort);
        for (class, keys, calls) in SortClass::all(work, work::SHUFFLE_SORT) {
            stage(work::SHUFFLE_SORT, shuffle_sorter.seconds(self.clock_hz, class, keys, calls));
        }
        for (log2k, keys) in work::merges(work) {
            stage(work::MERGE, keys as f64 * log2k as f64 * self.merge_key_level / self.clock_hz);
        }
        for (item, n) in work {
            if SortClass::is_item(item, work::SORT)
                || SortClass::is_item(item, work::SHUFFLE_SORT)
                || item.starts_with("merge.k")
            {
                continue;
            }
            match self.cycles.get(item) {
                Some(c) => stage(item, *n as f64 * c / self.clock_hz),
                None => out.unpriced.push(item.clone()),
            }
        }
        out
    }

    pub(crate) fn validate(&self, section: &str) -> std::result::Result<(), String> {
        if !(self.clock_hz.is_finite() && self.clock_hz > 0.0) {
            return Err(format!("{section}.clock_hz must be a positive number, got {}", self.clock_hz));
        }
        for (item, v) in self
            .cycles
            .iter()
            .map(|(k, v)| (format!("cycles.{k}"), v))
            .chain([("merge_key_level".to_string(), &self.merge_key_level)])
        {
            if !(v.is_finite() && *v >= 0.0) {
                return Err(format!("{section}.{item} must be zero or more, got {v}"));
            }
        }
        self.sort.validate(&format!("{section}.sort"))?;
        if let Some(s) = &self.shuffle_sort {
            s.validate(&format!("{section}.shuffle_sort"))?;
        }
        if self.shuffle_scratchpad_bytes == Some(0) {
            return Err(format!("{section}.shuffle_scratchpad_bytes must be at least 1 byte, got 0"));
        }
        Ok(())
    }
}

impl Sorter {
    /// Seconds to sort `keys` keys of class `class` in `calls` calls.
    pub fn seconds(&self, clock_hz: f64, class: SortClass, keys: u64, calls: u64) -> f64 {
        let key_bytes = (class.bits as f64 / 8.0).max(1.0);
        match *self {
            Sorter::Bitonic { width, on_chip_bytes, index_bytes, port_bytes, memory_bw } => {
                // The network sorts powers of two: every call is padded to 2^log2n keys (§3.4).
                let n = (1u64 << class.log2n) as f64;
                let elem = key_bytes + index_bytes as f64;
                let chip = ((on_chip_bytes as f64 / key_bytes).max(width as f64)).min(n);
                let p = (width as f64).min(chip);
                let per_cycle = (port_bytes as f64 / elem).max(1e-9);
                // One chunk on chip: stream in (the P-sorter keeps pace), log2(C/P) steps of bitonic
                // merging of sorted P-arrays (step i has i sub-steps, each C/(2P) cycles), stream out.
                let s = (chip / p).log2().max(0.0);
                let chunk_cycles = 2.0 * chip / per_cycle + s * (s + 1.0) / 2.0 * chip / (2.0 * p);
                let chunks = n / chip;
                let mut cycles = chunks * chunk_cycles;
                // Larger than the chip: merging sorted chunks, log2(N/C) steps; step i makes i passes
                // over DRAM (distances of C and more), then one pass on chip for the rest.
                let steps = (n / chip).log2().max(0.0);
                let dram_passes = steps * (steps + 1.0) / 2.0;
                // A pass reads and writes every element: at the DRAM's bandwidth, or the port's each way.
                let pass_s = (2.0 * n * elem / memory_bw).max(n * elem / (port_bytes as f64 * clock_hz));
                // On chip, the distances below C: C/2 down to P, the last merged with the arrays' insides
                // by the merge module, as in a chunk's steps: s sub-steps.
                let onchip_pass = 2.0 * n / per_cycle + s * n / (2.0 * p);
                cycles += steps * onchip_pass;
                calls as f64 * (cycles / clock_hz + dram_passes * pass_s)
            }
            Sorter::Compare { key_level, cache_bytes, index_bytes, memory_bw, ways } => {
                // Keys per call, as counted (a comparison sort is not padded).
                let n = keys as f64 / calls as f64;
                let levels = n.max(2.0).log2();
                let bytes = n * (key_bytes + index_bytes as f64);
                let spilled = (bytes / cache_bytes.max(1) as f64).log2().clamp(0.0, levels);
                let passes = spilled / (ways.max(2) as f64).log2();
                calls as f64 * (n * levels * key_level / clock_hz + passes * 2.0 * bytes / memory_bw)
            }
        }
    }

    fn validate(&self, section: &str) -> std::result::Result<(), String> {
        let ok = match *self {
            Sorter::Bitonic { width, on_chip_bytes, port_bytes, memory_bw, .. } => {
                width >= 2
                    && width.is_power_of_two()
                    && on_chip_bytes > 0
                    && port_bytes > 0
                    && memory_bw.is_finite()
                    && memory_bw > 0.0
            }
            Sorter::Compare { key_level, memory_bw, .. } => {
                key_level.is_finite() && key_level >= 0.0 && memory_bw.is_finite() && memory_bw > 0.0
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{section}: a bitonic sorter needs a power-of-two width of 2 or more and positive sizes and \
                 bandwidth; a comparison sorter a non-negative key_level and a positive memory_bw"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::{add, SortClass, SORT};

    fn fpga() -> Engine {
        Engine {
            clock_hz: 2.0e8,
            cycles: [("decode.codes".to_string(), 0.25)].into_iter().collect(),
            merge_key_level: 1.0,
            sort: Sorter::Bitonic {
                width: 64,
                on_chip_bytes: 512 << 10,
                index_bytes: 4,
                port_bytes: 64,
                memory_bw: 16.0e9,
            },
            shuffle_sort: None,
            shuffle_scratchpad_bytes: None,
        }
    }

    #[test]
    fn no_work_costs_zero_seconds_not_minus_zero() {
        let priced = fpga().price(&Ledger::new());
        assert!(priced.stages.is_empty());
        assert!(priced.seconds() == 0.0 && priced.seconds().is_sign_positive(), "{}", priced.seconds());
    }

    #[test]
    fn a_chunk_that_fits_on_chip_by_hand() {
        // 131072 32-bit keys: 8-byte elements, 8 a cycle: 16384 cycles in and 16384 out; 2048 arrays of
        // 64 -> 11 steps, 66 sub-steps of 1024 cycles. 100352 cycles at 200 MHz.
        let mut l = Ledger::new();
        SortClass::count(&mut l, SORT, 32, 131_072);
        let s = fpga().price(&l);
        assert!((s.stages["sort"] - 100_352.0 / 2.0e8).abs() < 1e-12, "{:?}", s);
        assert!(s.unpriced.is_empty());
    }

    #[test]
    fn past_the_chip_it_adds_dram_passes_and_keys_are_padded() {
        let e = fpga();
        let t = |n: u64| {
            let mut l = Ledger::new();
            SortClass::count(&mut l, SORT, 32, n);
            e.price(&l).seconds()
        };
        // 131073 keys are sorted as 262144: two chunks, one step of one DRAM pass and one on-chip pass.
        let chunk = 100_352.0 / 2.0e8;
        let onchip = (2.0 * 262_144.0 / 8.0 + 11.0 * 262_144.0 / 128.0) / 2.0e8;
        let dram = 2.0 * 262_144.0 * 8.0 / 16.0e9;
        assert!((t(131_073) - (2.0 * chunk + onchip + dram)).abs() < 1e-12);
        assert_eq!(t(131_073), t(262_144));
        // Per key, larger sorts cost more (the merge passes): Fig. 8's falling speed-up.
        assert!(t(1 << 23) / (1 << 23) as f64 > 1.5 * t(1 << 17) / (1 << 17) as f64);
    }

    #[test]
    fn a_comparison_sort_by_hand_and_unpriced_work_is_named() {
        let e = Engine {
            clock_hz: 1.0e9,
            cycles: [("decode.codes".to_string(), 1.0)].into_iter().collect(),
            merge_key_level: 2.0,
            sort: Sorter::Compare {
                key_level: 10.0,
                cache_bytes: 1 << 20,
                index_bytes: 4,
                memory_bw: 1.0e9,
                ways: 2,
            },
            shuffle_sort: None,
            shuffle_scratchpad_bytes: None,
        };
        let mut l = Ledger::new();
        SortClass::count(&mut l, SORT, 32, 1 << 20);
        work::count_merge(&mut l, 4, 1000);
        add(&mut l, "search.bytes", 5);
        let p = e.price(&l);
        // 2^20 keys x 20 levels x 10 cycles, plus log2(8 MiB / 1 MiB) = 3 levels over memory of 2 x 8 MiB.
        let sort = (1u64 << 20) as f64 * 20.0 * 10.0 / 1e9 + 3.0 * 2.0 * (8u64 << 20) as f64 / 1e9;
        assert!((p.stages["sort"] - sort).abs() < 1e-12);
        assert!((p.stages["merge"] - 1000.0 * 2.0 * 2.0 / 1e9).abs() < 1e-15);
        assert_eq!(p.unpriced, vec!["search.bytes".to_string()]);
    }
}
