//! Row-major records <-> column-major chunks, and LZ4 compression of chunks (PSACS §IV-E: partitions are
//! written column-major so each column chunk compresses better; §V-F measures it).
//!
//! A record is described by a [`RecordFormat`]: optional leading bitmap bytes, then fields that are either
//! fixed-width or variable (`u32` little-endian length, then the bytes). The column of a variable field
//! keeps the length prefixes, so it decodes without a separate offsets array.

use serde::{Deserialize, Serialize};

/// One field of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldKind {
    Fixed(usize),
    Var,
}

/// How records are laid out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFormat {
    /// Bytes of null bitmap at the start of each record (0 when no field is nullable).
    pub bitmap: usize,
    pub fields: Vec<FieldKind>,
}

/// A record that does not match its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

impl RecordFormat {
    /// Parses `b2,f8,v,f4` (bitmap bytes, then fields: `fN` fixed N bytes, `v` variable).
    pub fn parse(s: &str) -> Result<RecordFormat, FormatError> {
        let mut fmt = RecordFormat { bitmap: 0, fields: Vec::new() };
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let bad = || FormatError(format!("bad record format element {part:?}"));
            match part.as_bytes()[0] {
                b'b' => fmt.bitmap = part[1..].parse().map_err(|_| bad())?,
                b'f' => fmt.fields.push(FieldKind::Fixed(part[1..].parse().map_err(|_| bad())?)),
                b'v' if part == "v" => fmt.fields.push(FieldKind::Var),
                _ => return Err(bad()),
            }
        }
        Ok(fmt)
    }

    /// The inverse of [`RecordFormat::parse`].
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.bitmap > 0 {
            parts.push(format!("b{}", self.bitmap));
        }
        for f in &self.fields {
            parts.push(match f {
                FieldKind::Fixed(w) => format!("f{w}"),
                FieldKind::Var => "v".to_string(),
            });
        }
        parts.join(",")
    }

    /// Columns a chunk of these records splits into (the bitmap is a column of its own).
    pub fn columns(&self) -> usize {
        self.fields.len() + usize::from(self.bitmap > 0)
    }

    /// Calls `f(field, value range)` for each field of one record, without allocating (the hot path of
    /// partitioning and transposing).
    #[inline]
    pub fn for_each_field(
        &self,
        rec: &[u8],
        mut f: impl FnMut(usize, std::ops::Range<usize>),
    ) -> Result<(), FormatError> {
        let mut at = self.bitmap;
        let short = || FormatError("record shorter than its format".into());
        for (j, k) in self.fields.iter().enumerate() {
            let r = match k {
                FieldKind::Fixed(w) => at..at + w,
                FieldKind::Var => {
                    let len = crate::le::u32_at(rec.get(at..at + 4).ok_or_else(short)?) as usize;
                    at += 4;
                    at..at + len
                }
            };
            if r.end > rec.len() {
                return Err(short());
            }
            at = r.end;
            f(j, r);
        }
        Ok(())
    }

    /// Byte ranges of each field's value (without the length prefix) inside one record.
    pub fn field_ranges(&self, rec: &[u8]) -> Result<Vec<std::ops::Range<usize>>, FormatError> {
        let mut at = self.bitmap;
        let mut out = Vec::with_capacity(self.fields.len());
        let short = || FormatError("record shorter than its format".into());
        for f in &self.fields {
            match f {
                FieldKind::Fixed(w) => {
                    out.push(at..at + w);
                    at += w;
                }
                FieldKind::Var => {
                    let len = crate::le::u32_at(rec.get(at..at + 4).ok_or_else(short)?) as usize;
                    out.push(at + 4..at + 4 + len);
                    at += 4 + len;
                }
            }
        }
        if at > rec.len() {
            return Err(short());
        }
        Ok(out)
    }
}

/// Splits records (`data[offsets[i]..offsets[i + 1]]`) into one buffer per column.
pub fn records_to_columns(
    data: &[u8],
    offsets: &[u64],
    fmt: &RecordFormat,
) -> Result<Vec<Vec<u8>>, FormatError> {
    let mut cols = vec![Vec::new(); fmt.columns()];
    let first = usize::from(fmt.bitmap > 0);
    let rows = offsets.len().saturating_sub(1);
    let (mut at, mut ends) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for w in offsets.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        if fmt.bitmap > 0 {
            cols[0].extend_from_slice(
                data[a..b]
                    .get(..fmt.bitmap)
                    .ok_or_else(|| FormatError("record shorter than its bitmap".into()))?,
            );
        }
        at.push(a + fmt.bitmap);
        ends.push(b);
    }
    split_fields(data, &mut at, &ends, &fmt.fields, &mut cols[first..])?;
    Ok(cols)
}

/// Splits the fields of records lying anywhere in `data` into columns, one field at a time: field `j` of
/// every record goes to `cols[j]` (a variable-width value with its u32 length before it, as records and
/// column chunks both carry it). Record `i` starts its fields at `at[i]` and ends at `ends[i]`; on
/// return `at[i]` is past its last field.
///
/// A field at a time, not a record at a time: the loop over the records is then the same copy of a known
/// size for each (no choice of field kind or width per value), which makes transposing the rows of a
/// partition, once they are in cache, several times faster than walking each record's fields in turn.
/// The checks are those of [`RecordFormat::for_each_field`]: a value past its record's end is refused.
pub fn split_fields(
    data: &[u8],
    at: &mut [usize],
    ends: &[usize],
    fields: &[FieldKind],
    cols: &mut [Vec<u8>],
) -> Result<(), FormatError> {
    assert_eq!(at.len(), ends.len(), "a start and an end for every record");
    assert!(cols.len() >= fields.len(), "a column for every field");
    for (kind, col) in fields.iter().zip(cols.iter_mut()) {
        match *kind {
            FieldKind::Fixed(8) => split_fixed::<8>(data, at, ends, col)?,
            FieldKind::Fixed(4) => split_fixed::<4>(data, at, ends, col)?,
            FieldKind::Fixed(2) => split_fixed::<2>(data, at, ends, col)?,
            FieldKind::Fixed(1) => split_fixed::<1>(data, at, ends, col)?,
            FieldKind::Fixed(w) => {
                col.reserve(w.saturating_mul(at.len()).min(data.len()));
                for (p, &end) in at.iter_mut().zip(ends) {
                    let v = data.get(*p..*p + w).filter(|_| *p + w <= end).ok_or_else(short_record)?;
                    col.extend_from_slice(v);
                    *p += w;
                }
            }
            FieldKind::Var => {
                for (p, &end) in at.iter_mut().zip(ends) {
                    let len = data.get(*p..*p + 4).filter(|_| *p + 4 <= end).ok_or_else(short_record)?;
                    let stop = *p + 4 + crate::le::u32_at(len) as usize;
                    // The length and the value, as one copy: the column keeps the record's own prefix.
                    let v = data.get(*p..stop).filter(|_| stop <= end).ok_or_else(short_record)?;
                    match data.get(*p..*p + SHORT) {
                        // A short value (most are) moves as one copy of known size, then the column is cut
                        // back to its end: no call to `memcpy` for a few bytes.
                        Some(block) if v.len() <= SHORT => {
                            col.extend_from_slice(&<[u8; SHORT]>::try_from(block).expect("SHORT bytes"));
                            col.truncate(col.len() - (SHORT - v.len()));
                        }
                        _ => col.extend_from_slice(v),
                    }
                    *p = stop;
                }
            }
        }
    }
    Ok(())
}

/// Bytes a variable-width value (with its length) may have to move as one copy of known size.
const SHORT: usize = 32;

fn split_fixed<const W: usize>(
    data: &[u8],
    at: &mut [usize],
    ends: &[usize],
    col: &mut Vec<u8>,
) -> Result<(), FormatError> {
    col.reserve(W * at.len());
    for (p, &end) in at.iter_mut().zip(ends) {
        let v = data.get(*p..*p + W).filter(|_| *p + W <= end).ok_or_else(short_record)?;
        col.extend_from_slice(&<[u8; W]>::try_from(v).expect("W bytes"));
        *p += W;
    }
    Ok(())
}

fn short_record() -> FormatError {
    FormatError("record shorter than its format".into())
}

/// Appends one field's value to its column. Values of 1, 2, 4 and 8 bytes (most fixed-width fields) are
/// stored with a copy of known size, which the compiler makes one move, instead of a call to `memcpy` for
/// a few bytes: transposing a table makes one such copy per field of every row.
#[inline(always)]
pub fn push_value(col: &mut Vec<u8>, v: &[u8]) {
    match v.len() {
        8 => col.extend_from_slice(&<[u8; 8]>::try_from(v).expect("8 bytes")),
        4 => col.extend_from_slice(&<[u8; 4]>::try_from(v).expect("4 bytes")),
        2 => col.extend_from_slice(&<[u8; 2]>::try_from(v).expect("2 bytes")),
        1 => col.push(v[0]),
        _ => col.extend_from_slice(v),
    }
}

/// Joins column buffers of `rows` records back into records and their offsets.
pub fn columns_to_records(
    cols: &[Vec<u8>],
    rows: usize,
    fmt: &RecordFormat,
) -> Result<(Vec<u8>, Vec<u64>), FormatError> {
    if cols.len() != fmt.columns() {
        return Err(FormatError(format!("{} column chunks for a format of {}", cols.len(), fmt.columns())));
    }
    let first = usize::from(fmt.bitmap > 0);
    let mut pos = vec![0usize; cols.len()];
    let mut data = Vec::with_capacity(cols.iter().map(Vec::len).sum());
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0u64);
    let short = || FormatError("column chunk shorter than its rows".into());
    for _ in 0..rows {
        if fmt.bitmap > 0 {
            data.extend_from_slice(cols[0].get(pos[0]..pos[0] + fmt.bitmap).ok_or_else(short)?);
            pos[0] += fmt.bitmap;
        }
        for (j, f) in fmt.fields.iter().enumerate() {
            let c = first + j;
            let len = match f {
                FieldKind::Fixed(w) => *w,
                FieldKind::Var => {
                    4 + crate::le::u32_at(cols[c].get(pos[c]..pos[c] + 4).ok_or_else(short)?) as usize
                }
            };
            data.extend_from_slice(cols[c].get(pos[c]..pos[c] + len).ok_or_else(short)?);
            pos[c] += len;
        }
        offsets.push(data.len() as u64);
    }
    Ok((data, offsets))
}

/// LZ4 block compression with the uncompressed size in front.
pub fn compress(b: &[u8]) -> Vec<u8> {
    lz4_flex::compress_prepend_size(b)
}

/// Inverse of [`compress`].
pub fn decompress(b: &[u8]) -> Result<Vec<u8>, FormatError> {
    lz4_flex::decompress_size_prepended(b).map_err(|e| FormatError(format!("corrupted LZ4 chunk: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn records(n: usize, seed: u8) -> (Vec<u8>, Vec<u64>) {
        let mut data = Vec::new();
        let mut offs = vec![0u64];
        for i in 0..n {
            data.push(i as u8 & 1); // bitmap
            data.extend_from_slice(&(i as u64 * 7).to_le_bytes());
            let s = vec![b'a' + seed.wrapping_add(i as u8) % 26; i % 5];
            data.extend_from_slice(&(s.len() as u32).to_le_bytes());
            data.extend_from_slice(&s);
            data.extend_from_slice(&(i as u16).to_le_bytes());
            offs.push(data.len() as u64);
        }
        (data, offs)
    }

    #[test]
    fn formats_parse_and_describe() {
        let f = RecordFormat::parse("b1,f8,v,f2").unwrap();
        assert_eq!(f.fields, vec![FieldKind::Fixed(8), FieldKind::Var, FieldKind::Fixed(2)]);
        assert_eq!(f.describe(), "b1,f8,v,f2");
        assert!(RecordFormat::parse("x3").is_err());
    }

    /// Columns as the records' own parser splits them, a record at a time: the reference for
    /// [`split_fields`].
    fn columns_record_by_record(records: &[&[u8]], fmt: &RecordFormat) -> Result<Vec<Vec<u8>>, FormatError> {
        let mut cols = vec![Vec::new(); fmt.fields.len()];
        for rec in records {
            fmt.for_each_field(rec, |j, r| {
                if let FieldKind::Var = fmt.fields[j] {
                    cols[j].extend_from_slice(&(r.len() as u32).to_le_bytes());
                }
                cols[j].extend_from_slice(&rec[r]);
            })?;
        }
        Ok(cols)
    }

    proptest! {
        /// Field by field gives the columns (or the refusal) that record by record gives, for fields of
        /// every width, values on both sides of the short copy's size, and a record cut short anywhere
        /// (bytes that are not its own follow each record, so a read past its end would find some; fewer
        /// than the short copy's size after the last, so that its fallback runs).
        #[test]
        fn fields_split_a_column_at_a_time_as_record_by_record(
            kinds in proptest::collection::vec(0usize..7, 1..8),
            lens in proptest::collection::vec(0usize..70, 0..60),
            cut in proptest::option::of((0usize..60, 1usize..40)),
            pad in 0usize..40,
        ) {
            let fields: Vec<FieldKind> = kinds
                .iter()
                .map(|&k| [FieldKind::Fixed(1), FieldKind::Fixed(2), FieldKind::Fixed(3), FieldKind::Fixed(4),
                    FieldKind::Fixed(8), FieldKind::Fixed(16), FieldKind::Var][k])
                .collect();
            let fmt = RecordFormat { bitmap: 0, fields };
            let (mut data, mut at, mut ends) = (Vec::new(), Vec::new(), Vec::new());
            for (i, &len) in lens.iter().enumerate() {
                at.push(data.len());
                for (j, f) in fmt.fields.iter().enumerate() {
                    let n = match f {
                        FieldKind::Fixed(w) => *w,
                        FieldKind::Var => {
                            let n = (len + j * 7) % 70;
                            data.extend_from_slice(&(n as u32).to_le_bytes());
                            n
                        }
                    };
                    data.extend((0..n).map(|b| (i * 31 + j * 7 + b) as u8));
                }
                ends.push(data.len());
                data.extend(std::iter::repeat_n(0x11, pad));
            }
            if let (Some((r, by)), false) = (cut, lens.is_empty()) {
                let r = r % lens.len();
                ends[r] = ends[r].saturating_sub(by).max(at[r]);
            }
            let records: Vec<&[u8]> = at.iter().zip(&ends).map(|(&a, &e)| &data[a..e]).collect();
            let want = columns_record_by_record(&records, &fmt);
            let mut cols = vec![Vec::new(); fmt.fields.len()];
            let got = split_fields(&data, &mut at, &ends, &fmt.fields, &mut cols).map(|()| cols);
            match want {
                Ok(w) => prop_assert_eq!(got.unwrap(), w),
                Err(e) => prop_assert_eq!(got.unwrap_err().to_string(), e.to_string()),
            }
        }

        #[test]
        fn records_survive_columns_and_compression(n in 0usize..200, seed in any::<u8>()) {
            let fmt = RecordFormat::parse("b1,f8,v,f2").unwrap();
            let (data, offs) = records(n, seed);
            let cols = records_to_columns(&data, &offs, &fmt).unwrap();
            let packed: Vec<Vec<u8>> = cols.iter().map(|c| compress(c)).collect();
            let back: Vec<Vec<u8>> = packed.iter().map(|c| decompress(c).unwrap()).collect();
            let (d2, o2) = columns_to_records(&back, n, &fmt).unwrap();
            prop_assert_eq!(d2, data);
            prop_assert_eq!(o2, offs);
        }
    }
}
