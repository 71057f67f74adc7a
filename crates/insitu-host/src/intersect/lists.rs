//! Lists on devices (DaMoN '16 §3.2): entries of `s` bytes, a 4-byte little-endian ID then `s - 4` bytes of
//! payload, sorted by ID without duplicates. `put-list` loads IDs from a binary file of little-endian u32
//! or a text file of integers (the format named by `--format` or the file's extension, never guessed); `gen lists` makes the paper's synthetic pairs.

use std::path::Path;

use insitu_kernels::intersect::first_unsorted;
use insitu_kernels::le;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::array::{validate_user_name, Array};
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::{HostError, Result};
use crate::intersect::info::ListInfo;
use crate::report::{Measure, Report};
use crate::table::store::write_object;

/// The catalog entry of a list (or of an index's term table) on one device.
fn entry_for(name: &str, kind: EntryKind, size: u64, dev: u32) -> ObjectEntry {
    ObjectEntry {
        name: name.to_string(),
        size,
        stripe_unit: crate::array::DEFAULT_STRIPE_UNIT,
        devices: vec![dev],
        kind,
        commits: Vec::new(),
    }
}

/// Checks an entry size.
pub fn check_entry_size(s: u32) -> Result<()> {
    const MAX: u32 = 1 << 20;
    if s < 4 || !s.is_multiple_of(4) || s > MAX {
        return Err(HostError::InvalidArgument(format!(
            "--entry-size must be a multiple of 4 from 4 to {MAX} (1 MiB), not {s}"
        )));
    }
    Ok(())
}

/// How a file of IDs is written. Never guessed from the content: a text file with a stray character
/// must not be read as binary IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IdFormat {
    /// Little-endian unsigned 32-bit integers, back to back (`.bin`, `.u32`).
    U32Le,
    /// Decimal integers separated by white space, commas or new lines (`.txt`, `.csv`, `.tsv`).
    Text,
}

impl IdFormat {
    /// The format a file's extension names, if it names one.
    pub fn from_extension(path: &Path) -> Option<IdFormat> {
        match path.extension()?.to_str()? {
            "bin" | "u32" => Some(IdFormat::U32Le),
            "txt" | "csv" | "tsv" => Some(IdFormat::Text),
            _ => None,
        }
    }

    /// `format`, or the one `path`'s extension names; an error saying what to do when neither says.
    pub fn resolve(format: Option<IdFormat>, path: &Path) -> Result<IdFormat> {
        format.or_else(|| IdFormat::from_extension(path)).ok_or_else(|| {
            HostError::InvalidArgument(format!(
                "{}: cannot tell how its IDs are written from its name; give --format u32le (little-endian \
                 32-bit integers, as .bin and .u32 files) or --format text (decimal integers, as .txt, .csv \
                 and .tsv files)",
                path.display()
            ))
        })
    }
}

/// Reads the IDs of `path`, written as `format` says.
pub fn read_ids(path: &Path, format: IdFormat) -> Result<Vec<u32>> {
    let bytes = std::fs::read(path).map_err(|e| HostError::io(path, e))?;
    match format {
        IdFormat::Text => parse_text_ids(&bytes).map_err(|e| {
            HostError::InvalidArgument(format!("{}: {e} (read as --format text)", path.display()))
        }),
        IdFormat::U32Le => ids_from_le(&bytes).map_err(|e| {
            HostError::InvalidArgument(format!("{}: {e} (read as --format u32le)", path.display()))
        }),
    }
}

/// IDs as 4-byte little-endian integers one after another (a `.u32` file's bytes, or Python's), refused
/// unless whole; the error says why, for the caller to name where the bytes came from.
pub fn ids_from_le(bytes: &[u8]) -> std::result::Result<Vec<u32>, String> {
    if !bytes.len().is_multiple_of(4) {
        return Err(format!("{} bytes is not a whole number of 4-byte IDs", bytes.len()));
    }
    Ok(le::decode_u32s(bytes))
}

/// IDs written as decimal integers separated by white space or commas; the error names the line.
fn parse_text_ids(bytes: &[u8]) -> std::result::Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = n + 1;
        let line = std::str::from_utf8(line).map_err(|_| format!("line {line_no} is not UTF-8 text"))?;
        for word in line.split(|c: char| c.is_ascii_whitespace() || c == ',').filter(|w| !w.is_empty()) {
            match word.parse::<u32>() {
                Ok(id) => ids.push(id),
                Err(_) if ids.is_empty() && word.chars().any(|c| c.is_alphabetic()) => {
                    return Err(format!(
                        "line {line_no} looks like a header ({word:?}); a list file holds IDs only: remove that line"
                    ))
                }
                Err(_) => {
                    return Err(format!(
                        "line {line_no}: {word:?} is not an ID (a whole number from 0 to {})",
                        u32::MAX
                    ))
                }
            }
        }
    }
    Ok(ids)
}

/// The payload of an entry: deterministic bytes derived from its ID.
pub fn payload_byte(id: u32, k: usize) -> u8 {
    (id as u64).wrapping_mul(0x9E37_79B9).wrapping_add(k as u64 * 31) as u8
}

/// Entries of `entry_size` bytes for sorted IDs.
pub fn entries(ids: &[u32], entry_size: u32) -> Vec<u8> {
    let s = entry_size as usize;
    let mut out = Vec::with_capacity(ids.len() * s);
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend((4..s).map(|k| payload_byte(*id, k)));
    }
    out
}

/// `put-list`: stores the IDs of `path` as list `name` on device `dev`. `format` says how the file is
/// written; without it, its extension must say ([`IdFormat::from_extension`]).
pub fn put_list(
    array: &mut Array,
    path: &Path,
    format: Option<IdFormat>,
    name: &str,
    entry_size: u32,
    dev: u32,
) -> Result<Report> {
    validate_user_name(name)?;
    check_entry_size(entry_size)?;
    let format = IdFormat::resolve(format, path)?;
    array.device(dev)?;
    array.check_free(name)?;
    array.progress().stage("read", None, "IDs");
    let ids = read_ids(path, format)?;
    put_list_ids(array, &ids, &path.display().to_string(), name, entry_size, dev)
}

/// `put-list` of IDs in memory (the Python front's numpy arrays): stores `ids` as list `name` on device
/// `dev`. `label` names where the IDs came from in errors.
pub fn put_list_ids(
    array: &mut Array,
    ids: &[u32],
    label: &str,
    name: &str,
    entry_size: u32,
    dev: u32,
) -> Result<Report> {
    validate_user_name(name)?;
    check_entry_size(entry_size)?;
    array.device(dev)?;
    array.check_free(name)?;
    crate::units::check_fits_in_memory(ids.len() as u64 * entry_size as u64, "put-list's entries")?;
    if let Some(i) = first_unsorted(ids) {
        let what = if ids[i] == ids[i - 1] { "a duplicate of" } else { "smaller than" };
        return Err(HostError::InvalidArgument(format!(
            "{label}: the list must be sorted without duplicates; ID {} at position {i} is {what} the ID before it ({})",
            ids[i],
            ids[i - 1]
        )));
    }
    let measure = Measure::start("put-list", array)?;
    array.progress().stage("store", Some(ids.len() as u64), "IDs");
    let data = entries(ids, entry_size);
    write_object(array, dev, name, "list", &data)?;
    array.progress().add(ids.len() as u64);
    let info = ListInfo { entry_size, entries: ids.len() as u64 };
    array.commit_entry(entry_for(name, EntryKind::List(info), data.len() as u64, dev))?;
    let headline = format!("put-list {name}: {} entries of {entry_size} B on device {dev}", ids.len());
    measure.finish(
        array,
        headline,
        json!({ "name": name, "entries": ids.len(), "entry_size": entry_size, "device": dev }),
    )
}

/// The paper's synthetic pair (§5.1): two sorted lists of IDs uniform over `[0, 2^32)`, with the fraction
/// `ratio` of the shorter list planted in the longer; written as little-endian u32 files.
pub fn gen_lists(
    n1: u64,
    n2: u64,
    ratio: f64,
    seed: u64,
    out1: &Path,
    out2: &Path,
) -> Result<(u64, u64, u64)> {
    if !(0.0..=1.0).contains(&ratio) {
        return Err(HostError::InvalidArgument(format!("--ratio must be from 0 to 1, not {ratio}")));
    }
    // Distinct random IDs are drawn by rejection: keep to half the 32-bit space so that stays quick.
    const MAX_IDS: u64 = 1 << 31;
    for (flag, n) in [("--size1", n1), ("--size2", n2)] {
        if n > MAX_IDS {
            return Err(HostError::InvalidArgument(format!(
                "{flag} {n} asks for more distinct random 32-bit IDs than this generator makes (at most \
                 {MAX_IDS}, half of the 2^32 that exist)"
            )));
        }
    }
    // Both lists, a copy of the longer while planting, and the sort's scratch: about 4 copies of 4 bytes.
    crate::units::check_fits_in_memory((n1 + n2) * 16, "gen lists")?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let draw = |n: u64, rng: &mut SmallRng| -> Vec<u32> {
        let n = n as usize;
        let mut v: Vec<u32> = Vec::with_capacity(n + n / 64 + 16);
        while v.len() < n {
            let want = n - v.len();
            v.extend((0..want + want / 64 + 16).map(|_| rng.gen::<u32>()));
            v.sort_unstable();
            v.dedup();
        }
        // Drop the surplus at random places, not the largest IDs, so the IDs stay uniform.
        while v.len() > n {
            let i = rng.gen_range(0..v.len());
            v.swap_remove(i);
        }
        v.sort_unstable();
        v
    };
    let a = draw(n1, &mut rng);
    let b = draw(n2, &mut rng);
    // Plant `ratio` of the shorter list in the longer one, in place of as many of its own IDs (spread
    // evenly), so the longer list keeps its size.
    let plant = |short: &[u32], long: Vec<u32>, rng: &mut SmallRng| {
        let size = long.len();
        let planted = ((short.len() as f64 * ratio).round() as usize).min(size);
        let step = (short.len() / planted.max(1)).max(1);
        let drop_every = (size / planted.max(1)).max(1);
        let mut dropped = 0usize;
        let mut kept: Vec<u32> = long
            .into_iter()
            .enumerate()
            .filter(|(i, _)| {
                let drop = dropped < planted && i % drop_every == 0;
                dropped += drop as usize;
                !drop
            })
            .map(|(_, x)| x)
            .collect();
        kept.extend(short.iter().step_by(step).take(planted));
        kept.sort_unstable();
        kept.dedup();
        // A planted ID the longer list already held leaves it one short: top it up with IDs in neither
        // list, so it has its size and the common IDs stay the planted ones.
        let mut extra: Vec<u32> = Vec::new();
        while kept.len() + extra.len() < size {
            let x = rng.gen::<u32>();
            if short.binary_search(&x).is_err() && kept.binary_search(&x).is_err() {
                extra.push(x);
                if kept.len() + extra.len() == size {
                    extra.sort_unstable();
                    extra.dedup();
                }
            }
        }
        kept.extend(extra);
        kept.sort_unstable();
        kept
    };
    let (l1, l2) =
        if a.len() <= b.len() { (a.clone(), plant(&a, b, &mut rng)) } else { (plant(&b, a, &mut rng), b) };
    debug_assert_eq!((l1.len() as u64, l2.len() as u64), (n1, n2));
    for p in [out1, out2] {
        crate::outfile::OutFile::check_path(p)?;
    }
    let write = |p: &Path, v: &[u32]| -> Result<()> {
        let mut f = crate::outfile::OutFile::create(p)?;
        std::io::Write::write_all(&mut f, &le::encode_u32s(v)).map_err(|e| HostError::io(p, e))?;
        f.commit()
    };
    write(out1, &l1)?;
    write(out2, &l2)?;
    let common = insitu_kernels::intersect::intersect2(&l1, &l2).len() as u64;
    Ok((l1.len() as u64, l2.len() as u64, common))
}

/// `index-text`: an inverted index of a text corpus (a file, or every file under a directory, in path
/// order; a document is a file). Terms are lower-cased ASCII words of 2+ letters, digits or underscores;
/// the `max_terms` terms in the most documents (at least 2) get a posting list `NAME.TERM` (sorted document
/// IDs, entries of `entry_size` bytes) on device `dev`, and `NAME` itself holds the term table as JSON
/// (`[[term, documents], ...]`, most frequent first). All lists commit together.
pub fn index_text(
    array: &mut Array,
    root: &Path,
    name: &str,
    entry_size: u32,
    dev: u32,
    max_terms: usize,
) -> Result<Report> {
    use std::collections::HashMap;
    validate_user_name(name)?;
    check_entry_size(entry_size)?;
    array.device(dev)?;
    let meta = std::fs::metadata(root).map_err(|e| HostError::io(root, e))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).map_err(|e| HostError::io(&d, e))? {
                let p = e.map_err(|e| HostError::io(&d, e))?.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.is_file() {
                    files.push(p);
                }
            }
        }
        files.sort();
    } else {
        files.push(root.to_path_buf());
    }
    let mut postings: HashMap<String, Vec<u32>> = HashMap::new();
    for (doc, f) in files.iter().enumerate() {
        let Ok(bytes) = std::fs::read(f) else { continue };
        let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
        for w in text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.len() >= 2 && w.len() <= 64)
        {
            let p = postings.entry(w.to_string()).or_default();
            if p.last() != Some(&(doc as u32)) {
                p.push(doc as u32);
            }
        }
    }
    let mut terms: Vec<(String, Vec<u32>)> = postings.into_iter().filter(|(_, p)| p.len() >= 2).collect();
    terms.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    terms.truncate(max_terms);
    for (t, _) in &terms {
        let n = format!("{name}.{t}");
        validate_user_name(&n)?;
        array.check_free(&n)?;
    }
    array.check_free(name)?;
    let measure = Measure::start("index-text", array)?;
    let mut new = Vec::with_capacity(terms.len() + 1);
    for (t, ids) in &terms {
        let n = format!("{name}.{t}");
        let data = entries(ids, entry_size);
        write_object(array, dev, &n, "list", &data)?;
        let info = ListInfo { entry_size, entries: ids.len() as u64 };
        new.push(entry_for(&n, EntryKind::List(info), data.len() as u64, dev));
    }
    let table: Vec<(&str, usize)> = terms.iter().map(|(t, p)| (t.as_str(), p.len())).collect();
    let json = serde_json::to_vec(&table).expect("plain data serializes");
    write_object(array, dev, name, "index", &json)?;
    new.push(entry_for(name, EntryKind::Index, json.len() as u64, dev));
    array.commit_entries(new)?;
    let top: Vec<_> = table.iter().take(10).collect();
    let headline = format!(
        "index-text {name}: {} documents, {} posting lists; most frequent {}",
        files.len(),
        terms.len(),
        json!(top)
    );
    measure.finish(
        array,
        headline,
        json!({ "name": name, "documents": files.len(), "terms": terms.len(), "top": top }),
    )
}
