//! Gather (NASCENT's shuffle kernel, §3.5): row i of the sorted table is row `SortedIndices[i]` of the
//! original, `SortedTable[i] = OriginalTable[SortedIndices[i]]` (eq. 4). Rows are stored row-wise, so each
//! row is one sequential read.

/// Gathers fixed-size rows: `rows` holds `rows.len() / row_size` rows back to back.
pub fn gather_fixed(rows: &[u8], row_size: usize, order: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(order.len() * row_size);
    for r in order {
        let at = *r as usize * row_size;
        out.extend_from_slice(&rows[at..at + row_size]);
    }
    out
}

/// Gathers variable-size rows: row `r` is `data[offsets[r]..offsets[r + 1]]` (`offsets` has one more entry
/// than there are rows). Returns the gathered bytes and their offsets.
pub fn gather_var(data: &[u8], offsets: &[u64], order: &[u32]) -> (Vec<u8>, Vec<u64>) {
    let total: u64 = order.iter().map(|r| offsets[*r as usize + 1] - offsets[*r as usize]).sum();
    let mut out = Vec::with_capacity(total as usize);
    let mut offs = Vec::with_capacity(order.len() + 1);
    offs.push(0);
    for r in order {
        let (a, b) = (offsets[*r as usize] as usize, offsets[*r as usize + 1] as usize);
        out.extend_from_slice(&data[a..b]);
        offs.push(out.len() as u64);
    }
    (out, offs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_follow_the_order() {
        let rows = b"aabbccdd";
        assert_eq!(gather_fixed(rows, 2, &[3, 0, 2]), b"ddaacc");
        let (d, o) = gather_var(b"xyyzzz", &[0, 1, 3, 6], &[2, 0, 1]);
        assert_eq!((d.as_slice(), o.as_slice()), (&b"zzzxyy"[..], &[0u64, 3, 4, 6][..]));
    }
}
