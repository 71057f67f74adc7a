//! Table generators: TPC-C order-line and the synthetic table of NASCENT's Fig. 12/13. Deterministic
//! (seeded), written as Parquet.
//!
//! TPC-C ORDER-LINE follows the TPC-C specification (v5.11) §4.3.3.1 for the initial population: per
//! warehouse 10 districts of 3,000 orders, each order with OL_CNT uniform in [5, 15] lines; OL_I_ID uniform
//! in [1, 100,000]; OL_SUPPLY_W_ID = W_ID; OL_QUANTITY = 5; orders with O_ID < 2,101 are delivered
//! (OL_DELIVERY_D = the entry date, OL_AMOUNT = 0.00), the rest are not (OL_DELIVERY_D null, OL_AMOUNT
//! uniform in [0.01, 9,999.99]); OL_DIST_INFO a random 24-letter string. Simplifications: the entry date
//! is one fixed timestamp (the load time in the spec), and random strings use letters only.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Decimal128Array, Int32Array, StringArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::{HostError, Result};
use crate::table::export::ParquetFile;

/// Uniform in `lo..=hi`.
fn range(rng: &mut SmallRng, lo: u64, hi: u64) -> u64 {
    rng.gen_range(lo..=hi)
}

/// TPC-C ORDER-LINE for `warehouses` warehouses; returns the number of rows written.
pub fn tpcc_orderline(path: &Path, warehouses: u32, seed: u64) -> Result<u64> {
    if warehouses == 0 {
        return Err(HostError::InvalidArgument("--warehouses must be at least 1".into()));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("ol_o_id", DataType::Int32, false),
        Field::new("ol_d_id", DataType::Int32, false),
        Field::new("ol_w_id", DataType::Int32, false),
        Field::new("ol_number", DataType::Int32, false),
        Field::new("ol_i_id", DataType::Int32, false),
        Field::new("ol_supply_w_id", DataType::Int32, false),
        Field::new("ol_delivery_d", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("ol_quantity", DataType::Int32, false),
        Field::new("ol_amount", DataType::Decimal128(6, 2), false),
        Field::new("ol_dist_info", DataType::Utf8, false),
    ]));
    let entry_us: i64 = 1_700_000_000_000_000; // the load time (fixed for reproducibility)
    let mut rng = SmallRng::seed_from_u64(seed);
    // A warehouse at a time into the file (about 30 MB each): any number of them in little memory.
    let mut file = ParquetFile::create(path, schema.clone())?;
    let mut total = 0u64;
    for w in 1..=warehouses as i32 {
        let (mut o, mut d, mut num, mut item, mut deliv, mut amount, mut info) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for dist in 1..=10 {
            for oid in 1..=3000 {
                let lines = range(&mut rng, 5, 15) as i32;
                for n in 1..=lines {
                    o.push(oid);
                    d.push(dist);
                    num.push(n);
                    item.push(range(&mut rng, 1, 100_000) as i32);
                    let delivered = oid < 2101;
                    deliv.push(delivered.then_some(entry_us));
                    amount.push(if delivered { 0 } else { range(&mut rng, 1, 999_999) as i128 });
                    info.push(
                        (0..24).map(|_| (b'a' + range(&mut rng, 0, 25) as u8) as char).collect::<String>(),
                    );
                }
            }
        }
        let n = o.len();
        total += n as u64;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(o)),
            Arc::new(Int32Array::from(d)),
            Arc::new(Int32Array::from(vec![w; n])),
            Arc::new(Int32Array::from(num)),
            Arc::new(Int32Array::from(item)),
            Arc::new(Int32Array::from(vec![w; n])),
            Arc::new(TimestampMicrosecondArray::from(deliv)),
            Arc::new(Int32Array::from(vec![5; n])),
            Arc::new(
                Decimal128Array::from(amount)
                    .with_precision_and_scale(6, 2)
                    .map_err(HostError::arrow("OL_AMOUNT"))?,
            ),
            Arc::new(StringArray::from(info)),
        ];
        file.write(
            &RecordBatch::try_new(schema.clone(), cols).map_err(HostError::arrow("generating a table"))?,
        )?;
    }
    file.finish()?;
    Ok(total)
}

/// NASCENT Fig. 12/13's synthetic table: `rows` rows of `columns` 4-byte unsigned values; column `c0` is
/// the key, with values below `distinct` (so it dictionary-encodes to 16-bit codes when `distinct <=
/// 65,536`).
pub fn synthetic(path: &Path, rows: u64, columns: u32, distinct: u64, seed: u64) -> Result<()> {
    if columns == 0 || distinct == 0 {
        return Err(HostError::InvalidArgument("--columns and --distinct must be at least 1".into()));
    }
    // Key values are 32-bit; a batch of 8,192 rows is held at once (a million columns of them: 32 GiB).
    if distinct > 1 << 32 {
        return Err(HostError::InvalidArgument(format!(
            "--distinct {distinct}: the key is 32-bit, at most 2^32 values"
        )));
    }
    if columns > MAX_COLUMNS {
        return Err(HostError::InvalidArgument(format!("--columns {columns}: at most {MAX_COLUMNS}")));
    }
    let schema = Arc::new(Schema::new(
        (0..columns).map(|c| Field::new(format!("c{c}"), DataType::UInt32, false)).collect::<Vec<_>>(),
    ));
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut file = ParquetFile::create(path, schema.clone())?;
    let mut left = rows;
    let mut first = true;
    while left > 0 || first {
        first = false;
        let n = left.min(8192);
        let cols: Vec<ArrayRef> = (0..columns)
            .map(|c| {
                let v: Vec<u32> = (0..n)
                    .map(|_| if c == 0 { range(&mut rng, 0, distinct - 1) as u32 } else { rng.gen::<u32>() })
                    .collect();
                Arc::new(UInt32Array::from(v)) as ArrayRef
            })
            .collect();
        file.write(
            &RecordBatch::try_new(schema.clone(), cols).map_err(HostError::arrow("generating a table"))?,
        )?;
        left -= n;
    }
    file.finish()
}

/// The most columns [`synthetic`] makes (its batches of 8,192 rows hold 32 KB a column).
pub const MAX_COLUMNS: u32 = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int32Type;

    #[test]
    fn tpcc_orderline_follows_the_population_rules() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ol.parquet");
        let n = tpcc_orderline(&p, 1, 7).unwrap();
        // 30,000 orders of 5..15 lines: about 300,000 lines.
        assert!((270_000..=330_000).contains(&n), "{n}");
        let b = crate::table::import::read_table_file(&p).unwrap();
        assert_eq!(b.num_rows() as u64, n);
        let o = b.column(0).as_primitive::<Int32Type>();
        let deliv = b.column(6);
        for i in (0..b.num_rows()).step_by(997) {
            assert_eq!(deliv.is_null(i), o.value(i) >= 2101, "row {i}");
        }
        let lines = b.column(3).as_primitive::<Int32Type>();
        assert!(lines.values().iter().all(|l| (1..=15).contains(l)));
    }

    #[test]
    fn synthetic_tables_have_the_asked_shape() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.parquet");
        synthetic(&p, 1024, 1024, 60_000, 1).unwrap();
        let b = crate::table::import::read_table_file(&p).unwrap();
        assert_eq!((b.num_rows(), b.num_columns()), (1024, 1024));
    }
}
