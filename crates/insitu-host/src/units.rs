//! Sizes as people write them: `4096`, `64KiB`, `1.5GB`, `4TB`. Decimal suffixes (KB, MB, GB, TB) are
//! powers of 1000, as in the papers; binary ones (KiB, MiB, GiB, TiB) powers of 1024.

use crate::error::{HostError, Result};

/// Parses a size in bytes.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        HostError::InvalidArgument(format!("{s:?} is not a size (examples: 4096, 64KiB, 1.5GB, 4TB, 1PiB)"))
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "p" | "pb" => 1e15,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "pib" => 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let v = n * mult;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(v.round() as u64)
}

/// Fails, saying so, when `bytes` of memory for `what` are more than this machine has available
/// (`MemAvailable` of `/proc/meminfo`; no check where that cannot be read): better than an allocation
/// that aborts the process or a kill by the OOM killer with no message.
pub fn check_fits_in_memory(bytes: u64, what: &str) -> Result<()> {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    match available {
        Some(a) if bytes > a => Err(HostError::InvalidArgument(format!(
            "{what} would need about {} of memory and this machine has {} available",
            human_bytes(bytes),
            human_bytes(a)
        ))),
        _ => Ok(()),
    }
}

/// Formats bytes with a binary unit, e.g. `1.50 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// `n` and a noun, singular for one: `count(1, "page")` is `1 page`, `count(3, "page")` `3 pages`; a noun
/// whose plural is not NOUN + s gives both, `"vertex/vertices"`.
pub fn count(n: u64, noun: &str) -> String {
    let (one, many) = match noun.split_once('/') {
        Some((one, many)) => (one, many.to_string()),
        None => (noun, format!("{noun}s")),
    };
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_singular_for_one() {
        assert_eq!(count(1, "page"), "1 page");
        assert_eq!(count(0, "page"), "0 pages");
        assert_eq!(count(2, "vertex/vertices"), "2 vertices");
        assert_eq!(count(1, "vertex/vertices"), "1 vertex");
    }

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("50MB").unwrap(), 50_000_000);
        assert_eq!(parse_size("64GiB").unwrap(), 64 << 30);
        assert_eq!(parse_size("4TB").unwrap(), 4_000_000_000_000);
        assert_eq!(parse_size("1PB").unwrap(), 1_000_000_000_000_000);
        assert_eq!(parse_size("2PiB").unwrap(), 2 << 50);
        assert_eq!(parse_size("1.5 KiB").unwrap(), 1536);
        assert!(parse_size("ten").is_err());
        assert!(parse_size("5XB").is_err());
        assert_eq!(human_bytes(1536), "1.50 KiB");
    }
}
