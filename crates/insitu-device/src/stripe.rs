//! How an object's bytes are spread over the devices of an array: stripes of `unit` bytes dealt
//! round-robin (BlueDBM's global address space over many nodes). Device `index` holds stripes
//! `index, index + count, ...` back to back in its part. Shared by the host (which places data) and by
//! device programs (which must know where their bytes sit in the whole).

use serde::{Deserialize, Serialize};

/// The striping of one object, seen from one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeLayout {
    pub unit: u64,
    pub index: u32,
    pub count: u32,
    pub total_size: u64,
}

/// A run of the part that is contiguous in the whole object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Where the chunk starts in this device's part.
    pub local_offset: u64,
    /// Where it starts in the whole object.
    pub global_offset: u64,
    pub len: u64,
}

impl StripeLayout {
    /// A layout for an object that lives whole on one device.
    pub fn single(total_size: u64) -> StripeLayout {
        StripeLayout { unit: total_size.max(1), index: 0, count: 1, total_size }
    }

    /// This device's chunks in part order. With one device the part is the whole object: one chunk.
    pub fn chunks(&self) -> Vec<Chunk> {
        if self.count <= 1 {
            return if self.total_size == 0 {
                Vec::new()
            } else {
                vec![Chunk { local_offset: 0, global_offset: 0, len: self.total_size }]
            };
        }
        let mut out = Vec::new();
        let mut local = 0;
        let mut s = self.index as u64;
        while s * self.unit < self.total_size {
            let g = s * self.unit;
            let len = self.unit.min(self.total_size - g);
            out.push(Chunk { local_offset: local, global_offset: g, len });
            local += len;
            s += self.count as u64;
        }
        out
    }

    /// Bytes of the object on this device.
    pub fn part_size(&self) -> u64 {
        self.chunks().iter().map(|c| c.len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_object_exactly_once() {
        for total in [0u64, 1, 9, 10, 11, 95, 100] {
            for count in 1..5u32 {
                let mut covered = vec![0u8; total as usize];
                for index in 0..count {
                    let l = StripeLayout { unit: 10, index, count, total_size: total };
                    let mut local = 0;
                    for c in l.chunks() {
                        assert_eq!(c.local_offset, local);
                        local += c.len;
                        for b in c.global_offset..c.global_offset + c.len {
                            covered[b as usize] += 1;
                        }
                    }
                }
                assert!(covered.iter().all(|c| *c == 1), "total {total} count {count}");
            }
        }
    }
}
