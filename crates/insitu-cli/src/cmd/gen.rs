//! `gen`: data sets, deterministic from a seed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use insitu_host::units::{human_bytes, parse_size};
use serde_json::json;

use crate::cmd::Ctx;

#[derive(Subcommand, Debug)]
pub enum GenCmd {
    /// English-like text with the phrase "in-storage computing" planted about once per 1000 words.
    Text {
        /// Bytes of text to write, e.g. 256MiB.
        #[arg(long, default_value = "1GiB")]
        size: String,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Seed of the generator: the same seed gives the same data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Two sorted ID lists (uniform over [0, 2^32)) with a planted common fraction, as u32 files.
    Lists {
        /// IDs in the first list.
        #[arg(long)]
        size1: u64,
        /// IDs in the second list.
        #[arg(long)]
        size2: u64,
        /// Fraction of the shorter list planted in the longer.
        #[arg(long, default_value_t = 0.01)]
        ratio: f64,
        /// File for the first list (little-endian u32).
        #[arg(long)]
        out1: PathBuf,
        /// File for the second list (little-endian u32).
        #[arg(long)]
        out2: PathBuf,
        /// Seed of the generator: the same seed gives the same data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// TPC-C ORDER-LINE (10 districts x 3,000 orders x 5-15 lines per warehouse) as Parquet.
    TpccOrderline {
        /// TPC-C warehouses (about 300,000 rows each).
        #[arg(long, default_value_t = 1)]
        warehouses: u32,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Seed of the generator: the same seed gives the same data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Fixed-size records for the Self-Sorting SSD: gensort's 100-byte layout, the paper's 16 KB records,
    /// any fixed layout, or rows of a table (Parquet or CSV) padded to a width.
    Records {
        /// gensort, paper, fixed, or table.
        #[arg(long, default_value = "gensort")]
        format: String,
        /// Number of records.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// fixed: the record size in bytes.
        #[arg(long, default_value_t = 0)]
        record_size: u32,
        /// fixed: where the key starts in a record (bytes).
        #[arg(long, default_value_t = 0)]
        key_offset: u32,
        /// fixed: key length in bytes.
        #[arg(long, default_value_t = 10)]
        key_size: u32,
        /// Keys ascending (the paper's presorted inputs) instead of random.
        #[arg(long)]
        presorted: bool,
        /// table: the Parquet or CSV file whose rows become records.
        #[arg(long)]
        table: Option<PathBuf>,
        /// table: the key column.
        #[arg(long)]
        key: Option<String>,
        /// table: the record width in bytes (default: the longest row).
        #[arg(long)]
        width: Option<u32>,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Seed of the generator: the same seed gives the same data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// A Graph500 Kronecker graph (R-MAT a = 0.57, b = c = 0.19; labels permuted, edges shuffled), seeded,
    /// as an edge list (BlueDBM §7.2's graphs).
    Graph500 {
        /// 2^scale vertices (1..=32).
        #[arg(long)]
        scale: u32,
        /// Edges per vertex: edge_factor x 2^scale edges.
        #[arg(long, default_value_t = 16)]
        edge_factor: u32,
        /// text (`u v` a line) or u32le (pairs); default from the extension (.bin, .u32: u32le; else text).
        #[arg(long)]
        format: Option<String>,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Seed of the generator: the same seed gives the same graph.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// NASCENT Fig. 12/13's synthetic table: ROWS x COLUMNS 4-byte values, key column c0.
    Synthetic {
        /// Rows of the table.
        #[arg(long, default_value_t = 1024)]
        rows: u64,
        /// Columns of the table (c0 is the key).
        #[arg(long, default_value_t = 1024)]
        columns: u32,
        /// Distinct values of the key column (at most 65,536 for 16-bit dictionary codes).
        #[arg(long, default_value_t = 65_536)]
        distinct: u64,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Seed of the generator: the same seed gives the same data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

impl GenCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        match self {
            GenCmd::Text { size, output, seed } => {
                let size = parse_size(&size)?;
                insitu_host::outfile::OutFile::check_path(&output)?;
                let crc = crate::cmd::demo::generate_corpus(&output, size, seed)?;
                ctx.out.plain(
                    "gen",
                    json!({ "output": output, "size": size, "crc32": format!("{crc:08x}") }),
                    &format!("wrote {} of text to {}", human_bytes(size), output.display()),
                );
            }
            GenCmd::Lists { size1, size2, ratio, out1, out2, seed } => {
                let (n1, n2, common) =
                    insitu_host::intersect::lists::gen_lists(size1, size2, ratio, seed, &out1, &out2)?;
                ctx.out.plain(
                    "gen",
                    json!({ "size1": n1, "size2": n2, "common": common }),
                    &format!(
                        "wrote lists of {n1} and {n2} IDs with {common} in common to {} and {}",
                        out1.display(),
                        out2.display()
                    ),
                );
            }
            GenCmd::TpccOrderline { warehouses, output, seed } => {
                let rows = insitu_host::nascent::data::tpcc_orderline(&output, warehouses, seed)?;
                ctx.out.plain(
                    "gen",
                    json!({ "output": output, "rows": rows }),
                    &format!(
                        "wrote {rows} ORDER-LINE rows ({warehouses} warehouse(s)) to {}",
                        output.display()
                    ),
                );
            }
            GenCmd::Records {
                format,
                count,
                record_size,
                key_offset,
                key_size,
                presorted,
                table,
                key,
                width,
                output,
                seed,
            } => {
                use insitu_host::selfsort::{records, table as tbl, KeyOrder, RecordFormat};
                let mut w = insitu_host::outfile::OutFile::create(&output)?;
                let (fmt, n) = if format == "table" {
                    let (Some(t), Some(k)) = (table, key) else {
                        anyhow::bail!("--format table needs --table FILE and --key COLUMN");
                    };
                    let r = tbl::records_from_table(&t, &k, width, &mut w)?;
                    (r.format, r.rows)
                } else {
                    let fmt = RecordFormat::named(&format, record_size, key_offset, key_size)?;
                    let order = if presorted { KeyOrder::Presorted } else { KeyOrder::Random };
                    records::generate(&fmt, count, order, seed, &mut w)?;
                    (fmt, count)
                };
                w.commit()?;
                ctx.out.plain(
                    "gen",
                    json!({ "output": output, "records": n, "record_size": fmt.size, "key_offset": fmt.key_offset, "key_size": fmt.key_size }),
                    &format!(
                        "wrote {n} records of {} bytes (key: {} bytes at offset {}) to {}",
                        fmt.size,
                        fmt.key_size,
                        fmt.key_offset,
                        output.display()
                    ),
                );
            }
            GenCmd::Graph500 { scale, edge_factor, format, output, seed } => {
                use insitu_host::bluedbm::graph::{kronecker, write_edges, EdgeFormat};
                let fmt = match format {
                    Some(f) => EdgeFormat::parse(&f)?,
                    None => EdgeFormat::of(&output),
                };
                let edges = crate::output::busy("generating the graph", || {
                    kronecker(scale, edge_factor, seed, true)
                })?;
                write_edges(&output, &edges, fmt)?;
                ctx.out.plain(
                    "gen",
                    json!({ "output": output, "vertices": 1u64 << scale, "edges": edges.len(), "format": match fmt {
                        EdgeFormat::Text => "text",
                        EdgeFormat::U32le => "u32le",
                    } }),
                    &format!(
                        "wrote a Graph500 graph of {} vertices and {} edges to {}",
                        1u64 << scale,
                        edges.len(),
                        output.display()
                    ),
                );
            }
            GenCmd::Synthetic { rows, columns, distinct, output, seed } => {
                insitu_host::nascent::data::synthetic(&output, rows, columns, distinct, seed)?;
                ctx.out.plain(
                    "gen",
                    json!({ "output": output, "rows": rows, "columns": columns }),
                    &format!("wrote a {rows} x {columns} table of 4-byte values to {}", output.display()),
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
