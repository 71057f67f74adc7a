//! The in-store processor's engines (BlueDBM §7), run on a node's raw flash partition: the pages a job
//! names are split among the engines, streamed to them through the splitter as the ISP's source
//! ([`RawPartition::stream`]: the flash simulation decides when each page arrives), and each engine
//! works a page at the price of its kernel on the profile. Results are computed on the real pages.
//!
//! - **String search** (§7.3): `search_engines_per_bus` Morris-Pratt engines on each flash bus, each
//!   taking the bus's pages in turn, one read in flight while it searches the page before.
//! - **Nearest neighbour** (§7.1): `nearest_engines_per_card` Hamming engines on each card, sharing the
//!   card's tags, each comparing a page with every query as it arrives.

use insitu_kernels::hamming::{distance, Nearest};
use insitu_kernels::search::{MorrisPratt, PageScan};

use crate::engines::Engine;
use crate::error::{DeviceError, Result};
use crate::network::Ps;
use crate::profile::{Profile, RawInterfaceProfile};
use crate::protocol::{IspNearest, IspSearch};
use crate::rawflash::{FlashAddr, RawPartition};
use crate::work::{self, Ledger};

fn refuse(detail: String) -> DeviceError {
    DeviceError::Isp(detail)
}

/// A query's nearest items, (item, distance), closest first.
pub type Neighbours = Vec<(u32, u32)>;

/// What a job did, beside its results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ran {
    pub service_ps: Ps,
    pub engines: u32,
    pub bytes_scanned: u64,
    pub work: Ledger,
}

fn interface(profile: &Profile) -> Result<&RawInterfaceProfile> {
    profile.nand.interface.as_ref().ok_or_else(|| {
        refuse(format!("profile {} has no raw flash interface, so no in-store processor", profile.name))
    })
}

/// Picoseconds `engine` takes for one unit of `item`; refused when the engine has no price for it.
fn price(engine: &Engine, item: &str, profile: &Profile) -> Result<f64> {
    const UNITS: u64 = 1 << 20;
    let mut l = Ledger::new();
    work::add(&mut l, item, UNITS);
    let p = engine.price(&l);
    if !p.unpriced.is_empty() {
        return Err(refuse(format!(
            "profile {} has no price for {item} on its in-store processor",
            profile.name
        )));
    }
    Ok(p.seconds() * 1e12 / UNITS as f64)
}

/// The engines a group (a bus, a card) gets and the gap between reads a job's limits ask for (0: no
/// throttle). Refuses no engines, more engines than the card has tags (each keeps a read in flight), and a
/// throttle below a page a second.
fn limits(
    limits: crate::protocol::IspLimits,
    default: u32,
    ri: &RawInterfaceProfile,
    page_size: usize,
) -> Result<(u32, Ps)> {
    let engines = limits.engines.unwrap_or(default);
    if engines == 0 || engines > ri.tags_per_card {
        return Err(refuse(format!(
            "a job takes 1 to {} engines a bus or card (each keeps a read in flight with one of the card's \
             tags), not {engines}",
            ri.tags_per_card
        )));
    }
    let gap = match limits.throttle_bw {
        None => 0,
        Some(bw) if bw.is_finite() && bw >= page_size as f64 => (page_size as f64 / bw * 1e12).round() as Ps,
        Some(bw) => {
            return Err(refuse(format!(
                "a flash throttle must be at least a page ({page_size} B) a second, not {bw} B/s"
            )))
        }
    };
    Ok((engines, gap))
}

/// The job's pages split among `per_group` engines per group, a group being what `group(addr)` says
/// (a bus, a card), pages of a group dealt to its engines in turn: each engine's addresses and the
/// job's index of each.
fn deal(
    pages: &[FlashAddr],
    groups: u32,
    per_group: u32,
    group: impl Fn(&FlashAddr) -> u32,
) -> (Vec<Vec<FlashAddr>>, Vec<Vec<usize>>) {
    let (groups, per_group) = (groups as usize, per_group as usize);
    let n = groups * per_group;
    let (mut addrs, mut index) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    let mut turn = vec![0usize; groups];
    for (j, a) in pages.iter().enumerate() {
        let g = group(a) as usize;
        let e = g * per_group + turn[g] % per_group;
        turn[g] += 1;
        addrs[e].push(*a);
        index[e].push(j);
    }
    (addrs, index)
}

/// Checks the lengths of a job's per-page lists and the pages' cards and buses.
fn check_pages(
    pages: &[FlashAddr],
    lists: &[(&str, usize)],
    raw: &RawInterfaceProfile,
    buses: u32,
) -> Result<()> {
    for (what, len) in lists {
        if *len != pages.len() {
            return Err(refuse(format!("the job names {} pages but {len} {what}", pages.len())));
        }
    }
    if let Some(a) = pages.iter().find(|a| a.card >= raw.cards || a.bus >= buses) {
        return Err(refuse(format!("page {a} is past this node's {} cards of {buses} buses", raw.cards)));
    }
    Ok(())
}

fn spare_error(at: &FlashAddr, found: u64, want: u64) -> DeviceError {
    refuse(format!(
        "page {at} holds spare-area record {found:#x}, not the {want:#x} the job expects (the file system's map \
         does not match the flash)"
    ))
}

/// Runs a string-search job ([`IspSearch`]) on `raw`.
pub fn search(
    raw: &mut RawPartition,
    profile: &Profile,
    job: &IspSearch,
) -> Result<(Vec<PageScan>, Vec<Vec<u32>>, Ran)> {
    let mp = MorrisPratt::with_table(&job.needle, &job.failure).map_err(|e| refuse(e.to_string()))?;
    let ri = interface(profile)?;
    let buses = profile.nand.channels / ri.cards;
    let mut lists = vec![("spare records", job.spares.len()), ("lengths", job.lens.len())];
    if let Some(s) = &job.seams {
        lists.push(("seam states", s.len()));
    }
    check_pages(&job.pages, &lists, ri, buses)?;
    let ps = raw.page_size();
    if let Some(l) = job.lens.iter().find(|l| **l as usize > ps) {
        return Err(refuse(format!("a page holds {ps} bytes, not {l}")));
    }
    let n1 = job.needle.len() - 1;
    if let Some(s) = job.seams.as_ref().and_then(|s| s.iter().find(|s| **s as usize > n1)) {
        return Err(refuse(format!("engine state {s} is past the needle's {} bytes", job.needle.len())));
    }
    // The seam pass reads whole pages (flash reads pages) but searches only their first len - 1 bytes.
    let per_page = |j: usize| match &job.seams {
        None => job.lens[j] as u64,
        Some(_) => (job.lens[j] as usize).min(n1) as u64,
    };
    let scanned: u64 = (0..job.pages.len()).map(per_page).sum();
    let byte_ps = price(&profile.kernels, work::SEARCH_BYTES, profile)?;
    let (per_bus, gap) = limits(job.limits, ri.search_engines_per_bus, ri, ps)?;
    let (engines, index) = deal(&job.pages, ri.cards * buses, per_bus, |a| a.card * buses + a.bus);
    // An engine's time on a page: the bytes it searches there.
    let work = |e: usize, i: usize| (per_page(index[e][i]) as f64 * byte_ps).round() as Ps;
    let n = job.pages.len();
    let (mut scans, mut seams) = match job.seams {
        None => (vec![PageScan::default(); n], Vec::new()),
        Some(_) => (Vec::new(), vec![Vec::new(); n]),
    };
    let mut bad = None;
    let end = raw.stream(&engines, 1, &work, gap, |e, i, page, spare| {
        let j = index[e][i];
        if spare != job.spares[j] {
            bad.get_or_insert(spare_error(&job.pages[j], spare, job.spares[j]));
            return;
        }
        let page = &page[..job.lens[j] as usize];
        match &job.seams {
            None => scans[j] = mp.scan_page(page),
            Some(states) => seams[j] = mp.seam_starts(states[j], page),
        }
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    let mut w = Ledger::new();
    work::add(&mut w, work::SEARCH_BYTES, scanned);
    let ran = Ran { service_ps: end, engines: ri.cards * buses * per_bus, bytes_scanned: scanned, work: w };
    Ok((scans, seams, ran))
}

/// Runs a nearest-neighbour job ([`IspNearest`]) on `raw`: every page compared with every query.
pub fn nearest(
    raw: &mut RawPartition,
    profile: &Profile,
    job: &IspNearest,
) -> Result<(Vec<Neighbours>, Ran)> {
    let ri = interface(profile)?;
    let buses = profile.nand.channels / ri.cards;
    check_pages(
        &job.pages,
        &[("spare records", job.spares.len()), ("item numbers", job.items.len())],
        ri,
        buses,
    )?;
    let ps = raw.page_size();
    if job.queries.is_empty() || !job.queries.len().is_multiple_of(ps) {
        return Err(refuse(format!(
            "the queries are {} bytes, not a whole number of {ps}-byte items",
            job.queries.len()
        )));
    }
    let queries: Vec<&[u8]> = job.queries.chunks(ps).collect();
    let (per_card, gap) = limits(job.limits, ri.nearest_engines_per_card, ri, ps)?;
    let page_ps =
        (price(&profile.kernels, work::HAMMING_BYTES, profile)? * (ps * queries.len()) as f64).round() as Ps;
    let (engines, index) = deal(&job.pages, ri.cards, per_card, |a| a.card);
    let depth = (ri.tags_per_card / per_card).max(1);
    // No more of the nearest than there are items.
    let k = (job.k as usize).min(job.pages.len());
    let mut best: Vec<Nearest> = queries.iter().map(|_| Nearest::new(k)).collect();
    let mut bad = None;
    let end = raw.stream(&engines, depth, &|_, _| page_ps, gap, |e, i, page, spare| {
        let j = index[e][i];
        if spare != job.spares[j] {
            bad.get_or_insert(spare_error(&job.pages[j], spare, job.spares[j]));
            return;
        }
        for (q, b) in queries.iter().zip(best.iter_mut()) {
            b.push(job.items[j], distance(q, page));
        }
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    let bytes = (job.pages.len() * ps * queries.len()) as u64;
    let mut w = Ledger::new();
    work::add(&mut w, work::HAMMING_BYTES, bytes);
    let ran = Ran { service_ps: end, engines: ri.cards * per_card, bytes_scanned: bytes, work: w };
    Ok((best.into_iter().map(Nearest::into_sorted).collect(), ran))
}
