//! Graphs for BlueDBM's graph traversal (ISCA '15 §7.2): the Graph500 Kronecker generator and edge-list
//! files.
//!
//! The generator is the Graph500 reference's (its `kronecker_generator`): each of the `edge_factor x 2^scale`
//! edges picks, bit by bit from the top level down, one of the adjacency matrix's four quadrants with the
//! R-MAT probabilities a = 0.57, b = c = 0.19 (d = 0.05), then vertex labels are permuted at random and the
//! edges shuffled, so neither a label nor a position gives the structure away. Seeded: the same seed gives
//! the same graph on any machine.
//!
//! Edge-list files: text (two integers a line, `#` comments and blank lines skipped) or little-endian u32
//! pairs; the format comes from the extension (`.bin`, `.u32`: binary; anything else: text) unless named.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::error::{HostError, Result};
use crate::outfile::OutFile;

/// Graph500's R-MAT quadrant probabilities (a, b, c; d = 1 - a - b - c).
pub const RMAT: (f64, f64, f64) = (0.57, 0.19, 0.19);

/// The most edges generated at once (8 bytes each in memory): 2^30, 8 GiB.
pub const MAX_EDGES: u64 = 1 << 30;

/// How an edge list is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeFormat {
    /// `u v` a line.
    Text,
    /// Little-endian u32 pairs.
    U32le,
}

impl EdgeFormat {
    /// The format a file's extension implies.
    pub fn of(path: &Path) -> EdgeFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("bin" | "u32") => EdgeFormat::U32le,
            _ => EdgeFormat::Text,
        }
    }

    /// `text` or `u32le`.
    pub fn parse(s: &str) -> Result<EdgeFormat> {
        match s {
            "text" => Ok(EdgeFormat::Text),
            "u32le" => Ok(EdgeFormat::U32le),
            other => {
                Err(HostError::InvalidArgument(format!("edge format must be text or u32le, not {other:?}")))
            }
        }
    }
}

/// The Graph500 Kronecker graph of `2^scale` vertices and `edge_factor x 2^scale` edges, seeded;
/// `permute` relabels the vertices and shuffles the edges as the reference does (off: the raw R-MAT
/// quadrant structure, for tests).
pub fn kronecker(scale: u32, edge_factor: u32, seed: u64, permute: bool) -> Result<Vec<(u32, u32)>> {
    if !(1..=32).contains(&scale) {
        return Err(HostError::InvalidArgument(format!(
            "--scale must be 1..=32 (2^scale vertices with u32 ids), not {scale}"
        )));
    }
    if edge_factor == 0 {
        return Err(HostError::InvalidArgument("--edge-factor must be at least 1".into()));
    }
    let edges = u64::from(edge_factor) << scale;
    if edges > MAX_EDGES {
        return Err(HostError::InvalidArgument(format!(
            "{edges} edges (edge factor {edge_factor} x 2^{scale}) is more than the {MAX_EDGES} generated at \
             once: lower --scale or --edge-factor"
        )));
    }
    let (a, b, c) = RMAT;
    let (ab, c_norm, a_norm) = (a + b, c / (1.0 - (a + b)), a / (a + b));
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(edges as usize);
    for _ in 0..edges {
        let (mut u, mut v) = (0u64, 0u64);
        for bit in 0..scale {
            let ii = rng.gen::<f64>() > ab;
            let jj = rng.gen::<f64>() > if ii { c_norm } else { a_norm };
            u |= u64::from(ii) << bit;
            v |= u64::from(jj) << bit;
        }
        out.push((u as u32, v as u32));
    }
    if permute {
        let mut label: Vec<u32> = (0..(1u64 << scale)).map(|x| x as u32).collect();
        label.shuffle(&mut rng);
        for e in &mut out {
            *e = (label[e.0 as usize], label[e.1 as usize]);
        }
        out.shuffle(&mut rng);
    }
    Ok(out)
}

/// Writes `edges` to `path` in `format` (written beside it, then moved into place).
pub fn write_edges(path: &Path, edges: &[(u32, u32)], format: EdgeFormat) -> Result<()> {
    let mut f = OutFile::create(path)?;
    let io = |e| HostError::io(path, e);
    match format {
        EdgeFormat::Text => {
            for (u, v) in edges {
                writeln!(f, "{u} {v}").map_err(io)?;
            }
        }
        EdgeFormat::U32le => {
            for (u, v) in edges {
                f.write_all(&u.to_le_bytes()).map_err(io)?;
                f.write_all(&v.to_le_bytes()).map_err(io)?;
            }
        }
    }
    f.commit()
}

/// Reads an edge list; text errors name the line.
pub fn read_edges(path: &Path, format: EdgeFormat) -> Result<Vec<(u32, u32)>> {
    let file = std::fs::File::open(path).map_err(|e| HostError::io(path, e))?;
    let bad = |detail: String| HostError::InvalidArgument(format!("{}: {detail}", path.display()));
    let mut out = Vec::new();
    match format {
        EdgeFormat::U32le => {
            let mut bytes = Vec::new();
            BufReader::new(file).read_to_end(&mut bytes).map_err(|e| HostError::io(path, e))?;
            if bytes.len() % 8 != 0 {
                return Err(bad(format!(
                    "{} bytes is not a whole number of u32 pairs (8 bytes an edge)",
                    bytes.len()
                )));
            }
            for e in bytes.chunks_exact(8) {
                let w = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().expect("4 bytes"));
                out.push((w(0), w(4)));
            }
        }
        EdgeFormat::Text => {
            for (n, line) in BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|e| HostError::io(path, e))?;
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut it = line.split_whitespace();
                let mut id = || -> Result<u32> {
                    let t = it.next().ok_or_else(|| bad(format!("line {}: two vertex ids needed", n + 1)))?;
                    t.parse().map_err(|_| bad(format!("line {}: {t:?} is not a vertex id (0..2^32)", n + 1)))
                };
                let (u, v) = (id()?, id()?);
                if it.next().is_some() {
                    return Err(bad(format!("line {}: more than two fields", n + 1)));
                }
                out.push((u, v));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn degrees(edges: &[(u32, u32)], n: usize) -> Vec<u64> {
        let mut d = vec![0u64; n];
        for (u, v) in edges {
            d[*u as usize] += 1;
            d[*v as usize] += 1;
        }
        d
    }

    #[test]
    fn the_generator_follows_rmat_and_the_seed() {
        let (scale, ef) = (12, 16);
        let raw = kronecker(scale, ef, 7, false).unwrap();
        assert_eq!(raw.len(), 16 << 12);
        assert!(raw.iter().all(|(u, v)| *u < 1 << scale && *v < 1 << scale));
        // The top level's quadrants come out in R-MAT's proportions (65,536 edges: +-0.01 is > 5 sigma).
        let top = |i: u32, j: u32| {
            raw.iter().filter(|(u, v)| u >> (scale - 1) == i && v >> (scale - 1) == j).count() as f64
                / raw.len() as f64
        };
        let (a, b, c) = RMAT;
        for (got, want) in [(top(0, 0), a), (top(0, 1), b), (top(1, 0), c), (top(1, 1), 1.0 - a - b - c)] {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
        // Heavy-tailed: the busiest vertex has far more than the average degree.
        let d = degrees(&raw, 1 << scale);
        let mean = 2.0 * raw.len() as f64 / d.len() as f64;
        assert!(*d.iter().max().unwrap() as f64 > 20.0 * mean);
        // Relabelling and shuffling keep the degrees (as a multiset) and change the labels.
        let perm = kronecker(scale, ef, 7, true).unwrap();
        let (mut d1, mut d2) = (d.clone(), degrees(&perm, 1 << scale));
        assert_ne!(d1, d2);
        d1.sort_unstable();
        d2.sort_unstable();
        assert_eq!(d1, d2);
        assert_eq!(kronecker(scale, ef, 7, true).unwrap(), perm, "the same seed, the same graph");
        assert_ne!(kronecker(scale, ef, 8, true).unwrap(), perm);
    }

    #[test]
    fn edge_files_round_trip_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let edges = kronecker(6, 4, 1, true).unwrap();
        for (name, fmt) in [("g.txt", EdgeFormat::Text), ("g.bin", EdgeFormat::U32le)] {
            let p = dir.path().join(name);
            assert_eq!(EdgeFormat::of(&p), fmt);
            write_edges(&p, &edges, fmt).unwrap();
            assert_eq!(read_edges(&p, fmt).unwrap(), edges);
        }
        let p = dir.path().join("bad.txt");
        std::fs::write(&p, "# comment\n1 2\n\n3 x\n").unwrap();
        let err = read_edges(&p, EdgeFormat::Text).unwrap_err().to_string();
        assert!(err.contains("line 4") && err.contains("\"x\""), "{err}");
        std::fs::write(&p, "1 2 3\n").unwrap();
        assert!(read_edges(&p, EdgeFormat::Text).unwrap_err().to_string().contains("more than two"));
        std::fs::write(&p, [0u8; 12]).unwrap();
        assert!(read_edges(&p, EdgeFormat::U32le).unwrap_err().to_string().contains("12 bytes"));
        assert!(kronecker(0, 4, 1, true).unwrap_err().to_string().contains("--scale"));
        assert!(kronecker(33, 4, 1, true).is_err());
        assert!(kronecker(4, 0, 1, true).unwrap_err().to_string().contains("--edge-factor"));
        assert!(kronecker(30, 16, 1, true).unwrap_err().to_string().contains("more than"));
    }
}
