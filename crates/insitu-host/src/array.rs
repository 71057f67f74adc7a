//! [`Array`]: N computational storage devices in a data directory, opened together under one lock (an
//! flock on the data directory itself, held by the one process using the array).
//!
//! Layout of the data directory:
//! ```text
//! array.json      configuration (device count, capacity, stripe unit, the full profile); array.b.json its copy
//! catalog.json    objects of the array (the commit point of multi-device writes); catalog.b.json its copy
//! reserve         disk space held back so that a full host disk still lets the catalog be written
//! init.incomplete only while `init` runs (an init cut off leaves it, and the next init clears its devices)
//! dev0/ dev1/ ... one device each: device.json, superblock, checkpoint, journal, nand.img, nand.oob (and
//!                 their .b copies); raw/ for a BlueDBM node's raw partition
//! fs/             the BlueDBM file system's index and journal (an appliance's)
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};

use insitu_device::protocol::{Delete, Flush, Fsck, Identify, List, SetArrayGeneration, Stat};
use insitu_device::{Device, DeviceClient, DeviceCounters, FaultPlan, Profile, MAX_NAME_BYTES};
use serde::Serialize;

use crate::catalog::{ArrayConfig, Catalog, EntryKind, ObjectEntry, QuarantinedPart};
use crate::devices::{device_dir, DeviceTransport, ScratchDir};
use crate::error::{HostError, Result};

/// Default stripe unit: large extents, so each device streams long runs (BlueDBM-style global space).
pub const DEFAULT_STRIPE_UNIT: u64 = 4 << 20;

/// Checks a name users give an object or table: the flash rules, and no `#` (it separates a table's name
/// from the names of its parts on the devices).
pub fn validate_user_name(name: &str) -> Result<()> {
    insitu_device::validate_name(name)?;
    if name.contains('#') {
        return Err(HostError::InvalidArgument(format!(
            "invalid name {name:?}: '#' is reserved for table parts"
        )));
    }
    Ok(())
}

/// Bytes the longest device object name of a table, a sort or a shuffle adds to its name. The longest are
/// the scratch objects of an out-of-core sort's runs (`NAME#order.runI`) and of a shuffle's batches parked
/// on flash (`NAME.batchI#rec`), with up to 10 digits of run or batch number (a `u32`); a table's parts
/// (`NAME#sortkeyoff` the longest) are shorter.
const LONGEST_PART_SUFFIX: usize = {
    let (run, batch) = ("#order.run".len(), ".batch#rec".len());
    (if run > batch { run } else { batch }) + 10
};

/// [`validate_user_name`] for a table or a shuffle, whose parts and scratch objects are device objects
/// named `NAME#...` or `NAME.batchI#...`: the name leaves room for the longest of those within the devices'
/// [`MAX_NAME_BYTES`] (it was refused later, naming an internal part, once a sort had 10 runs).
pub fn validate_table_name(name: &str) -> Result<()> {
    validate_user_name(name)?;
    let most = MAX_NAME_BYTES - LONGEST_PART_SUFFIX;
    if name.len() > most {
        return Err(HostError::InvalidArgument(format!(
            "invalid name {:?}...: a table's or a shuffle's name is at most {most} bytes (its parts are named \
             NAME#...), this one is {}",
            name.chars().take(24).collect::<String>(),
            name.len()
        )));
    }
    Ok(())
}

/// How to open an array.
#[derive(Debug, Default)]
pub struct OpenOptions {
    /// Where (if anywhere) to crash, for crash tests.
    pub faults: FaultPlan,
    /// How to reach the devices.
    pub transport: DeviceTransport,
    /// How long to wait for another process to release the array before failing (default: not at all).
    pub lock_wait: std::time::Duration,
    /// How long to wait for a device another process still holds once the array is ours (the servers of
    /// the command before, still checkpointing, or a device served by hand): the longer of this and 2 s.
    pub device_wait: std::time::Duration,
    /// Model host work on this host instead of the one the array's profile names (not stored).
    pub host: Option<insitu_device::HostProfile>,
}

/// What opening the array cleaned up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OpenReport {
    /// Device parts of writes that never reached the catalog, removed.
    pub removed_orphans: Vec<String>,
    /// Device parts the catalog does not list and nothing explains, kept in quarantine.
    pub quarantined: Vec<String>,
    /// What else opening found.
    pub notes: Vec<String>,
}

/// An array of devices.
#[derive(Debug)]
pub struct Array {
    dir: PathBuf,
    config: ArrayConfig,
    /// One per device: its client, or why it is offline (it did not open).
    devices: Vec<std::result::Result<DeviceClient, String>>,
    catalog: Catalog,
    /// The generation of `catalog.json` as this process last read or wrote it.
    disk_generation: u64,
    open_report: OpenReport,
    /// Objects whose parts are not the ones their entry recorded (see [`ObjectEntry::commits`]), and
    /// what differs: found at open, refused until `fsck --repair`.
    mismatched: std::collections::BTreeMap<String, String>,
    /// Parts an `rm` could not delete after its catalog write: listed in `removing` by every catalog
    /// this array writes, so that the next open deletes them.
    pub(crate) undeleted: Vec<(u32, String)>,
    /// What the command running on the array has done so far (see [`crate::progress`]).
    progress: crate::progress::Progress,
    pub(crate) faults: FaultPlan,
    /// Sockets of device servers (process transport); removed after the devices stop.
    _sockets: Option<ScratchDir>,
    _lock: File,
}

/// The blob that `parts` ((device, description) of the parts named `name`) make, if they make one
/// whole: every part `i/n` present once, one stripe unit, and each part the size its place says.
fn blob_from_parts(name: &str, parts: &[(u32, &insitu_device::ObjectMeta)]) -> Option<ObjectEntry> {
    let count = parts.first()?.1.attrs.get("part")?.split_once('/')?.1.parse::<usize>().ok()?;
    let unit: u64 = parts.first()?.1.attrs.get("stripe_unit")?.parse().ok()?;
    // Parts of two writes of one name are not one blob (parts written before writes were marked have none).
    let write = parts.first()?.1.attrs.get("write");
    if parts.iter().any(|(_, o)| o.attrs.get("write") != write) {
        return None;
    }
    if count == 0 || parts.len() != count {
        return None;
    }
    let mut devices = vec![None; count];
    for (dev, o) in parts {
        let (i, n) = o.attrs.get("part")?.split_once('/')?;
        let (i, n) = (i.parse::<usize>().ok()?, n.parse::<usize>().ok()?);
        if n != count
            || i >= count
            || devices[i].is_some()
            || o.attrs.get("stripe_unit")? != &unit.to_string()
        {
            return None;
        }
        devices[i] = Some((*dev, o.size));
    }
    let devices: Vec<(u32, u64)> = devices.into_iter().collect::<Option<_>>()?;
    let size: u64 = devices.iter().map(|d| d.1).sum();
    if parts.iter().any(|(_, o)| o.attrs.get("total_size").is_some_and(|t| *t != size.to_string())) {
        return None;
    }
    let entry = ObjectEntry {
        name: name.to_string(),
        size,
        stripe_unit: unit,
        devices: devices.iter().map(|d| d.0).collect(),
        kind: EntryKind::Blob,
        commits: Vec::new(),
    };
    (0..count).all(|i| entry.layout(i).part_size() == devices[i].1).then_some(entry)
}

/// Locks the data directory itself (flock on the directory): unlike a lock file, it cannot be deleted
/// or replaced under a running process to let a second writer in.
pub(crate) fn lock(dir: &Path) -> Result<File> {
    lock_within(dir, std::time::Duration::ZERO)
}

/// [`lock`], trying again until `wait` has passed while another process holds the lock.
fn lock_within(dir: &Path, wait: std::time::Duration) -> Result<File> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match insitu_device::sys::lock_dir(dir).map_err(|e| HostError::io(dir, e))? {
            Some(f) => return Ok(f),
            None if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            None => return Err(HostError::Locked(dir.to_path_buf())),
        }
    }
}

/// Checks the arguments of a new array in `dir`; returns the stripe unit.
/// The mark of an init under way: written before the first device is formatted, removed once the
/// configuration is written. A directory that has it but no configuration holds an init cut off (a
/// SIGKILL), whose devices the next init clears.
const INIT_MARK: &str = "init.incomplete";

/// Removes what an init cut off left in `dir` (it holds [`INIT_MARK`] and no configuration; the caller
/// holds the lock): its device directories and its empty catalog. A device that opens and holds an
/// object is no init's: then nothing is removed and the error names it. Nothing else there is touched.
fn clear_cut_off_init(dir: &Path) -> Result<()> {
    let made: Vec<PathBuf> = (0..1024).map(|i| device_dir(dir, i)).filter(|d| d.exists()).collect();
    for d in &made {
        // One that does not open was cut off while it was formatted.
        let Ok(device) = Device::open(d) else { continue };
        let client = insitu_device::transport::in_process(device);
        let held = client.call(insitu_device::protocol::List).map(|l| l.len()).unwrap_or(0);
        let _ = client.close();
        if held > 0 {
            return Err(HostError::InvalidArgument(format!(
                "{} holds an init's mark ({INIT_MARK}) but {} holds {held} object(s): not a cut-off init's; \
                 move it away (or choose another directory) to create an array here",
                dir.display(),
                d.display()
            )));
        }
    }
    for d in &made {
        if d.is_dir() && !d.is_symlink() {
            std::fs::remove_dir_all(d).map_err(|e| HostError::io(d, e))?;
        } else {
            std::fs::remove_file(d).map_err(|e| HostError::io(d, e))?;
        }
    }
    remove_both(&dir.join("catalog.json"));
    Ok(())
}

fn check_new(dir: &Path, devices: u32, stripe_unit: Option<u64>) -> Result<u64> {
    if devices == 0 || devices > 1024 {
        return Err(HostError::InvalidArgument(format!("--devices must be 1 to 1024, got {devices}")));
    }
    let stripe_unit = stripe_unit.unwrap_or(DEFAULT_STRIPE_UNIT);
    if stripe_unit < 4096 {
        return Err(HostError::InvalidArgument(format!(
            "stripe unit must be at least 4096 bytes, got {stripe_unit}"
        )));
    }
    if has_config(dir) {
        return Err(HostError::ArrayExists(dir.to_path_buf()));
    }
    // In a device's directory (or deeper): its files would be mixed with the device's, and removing
    // either would take the other's data.
    let full = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if let Some(device) = full.ancestors().skip(1).find(|a| a.join("device.json").exists()) {
        return Err(HostError::InvalidArgument(format!(
            "{} is inside the device directory {}: choose a directory outside it",
            dir.display(),
            device.display()
        )));
    }
    if dir.join("device.json").exists() {
        return Err(HostError::InvalidArgument(format!(
            "{} is a device's directory (it holds device.json): choose a directory of its own for the array",
            dir.display()
        )));
    }
    // A catalog without a configuration: an init cut off between the two (its catalog is empty, and is
    // written anew), or an array that lost its configuration (its catalog lists objects: never overwritten).
    if dir.join("catalog.json").exists() || crate::catalog::second_copy(&dir.join("catalog.json")).exists() {
        let kept = match Catalog::load(dir) {
            Ok(c) => !c.objects.is_empty() || c.generation > 0 || !c.quarantine.is_empty(),
            Err(_) => true,
        };
        if kept {
            return Err(HostError::InvalidArgument(format!(
                "{} holds a catalog.json but no array.json: an array that lost its configuration, whose \
                 catalog would be overwritten; move the catalog away (or choose another directory) to create \
                 an array here",
                dir.display()
            )));
        }
    }
    Ok(stripe_unit)
}

/// Each device is formatted with the capacity asked. Its geometry holds whole erase blocks on every chip,
/// so a capacity below a block a chip is rounded up (a `bluedbm` device of 128 chips of 2 MiB blocks holds
/// 238 MiB of objects at the least): `config` records what its devices hold when that is over 5% more.
fn record_held_capacity(config: &mut ArrayConfig) {
    let asked = config.capacity_bytes;
    if let Ok(g) = config.profile.base_geometry().for_capacity(asked) {
        let held = g.logical_pages() * g.page_size as u64;
        if held > asked + asked / 20 {
            config.capacity_bytes = held;
        }
    }
}

impl Array {
    /// Creates an array of `devices` devices of `profile` in `dir` (formatted in this process).
    pub fn init(
        dir: &Path,
        devices: u32,
        profile: Profile,
        capacity_bytes: Option<u64>,
        stripe_unit: Option<u64>,
    ) -> Result<Array> {
        let stripe_unit = check_new(dir, devices, stripe_unit)?;
        // Devices without a configuration: an init cut off (it marked the directory first, and is cleared
        // and made again), or an array that lost its configuration (never formatted over).
        if !dir.join(INIT_MARK).exists() {
            if let Some(d) = (0..1024).map(|i| device_dir(dir, i)).find(|d| d.exists()) {
                return Err(HostError::InvalidArgument(format!(
                    "{} already holds {} but no array.json: an array that lost its configuration, or an \
                     init cut off by an older insitu; move it away (or choose another directory) to create an \
                     array here",
                    dir.display(),
                    d.display()
                )));
            }
        }
        let created_dir = !dir.exists();
        let had_catalog = dir.join("catalog.json").exists()
            || crate::catalog::second_copy(&dir.join("catalog.json")).exists();
        std::fs::create_dir_all(dir).map_err(|e| HostError::io(dir, e))?;
        let lock = match lock(dir) {
            Ok(l) => l,
            Err(e) => {
                if created_dir {
                    let _ = std::fs::remove_dir(dir);
                }
                return Err(e);
            }
        };
        // Another init may have finished between the checks above and the lock.
        if has_config(dir) {
            return Err(HostError::ArrayExists(dir.to_path_buf()));
        }
        let mut config = ArrayConfig::new(devices, profile, capacity_bytes, stripe_unit);
        let capacity_bytes = config.capacity_bytes;
        record_held_capacity(&mut config);
        let mut formatted = Vec::new();
        let mut made: Vec<PathBuf> = Vec::new();
        let mark = dir.join(INIT_MARK);
        let had_mark = mark.exists();
        let built = (|| {
            // The mark first (durably), so that an init cut off anywhere after it is known for one.
            if mark.exists() {
                clear_cut_off_init(dir)?;
            } else {
                insitu_device::write_atomic(&mark, b"an insitu init is under way (or was cut off)\n")?;
            }
            for i in 0..devices {
                let ddir = device_dir(dir, i);
                if !ddir.exists() {
                    made.push(ddir.clone());
                }
                let d = Device::format(&ddir, i, config.profile.clone(), capacity_bytes)
                    .map_err(HostError::device(i))?;
                formatted.push(d);
            }
            // Generation 0 with every device at transaction 0: what a fresh device records.
            Catalog::default().save(dir)?;
            // The configuration is written last: an array without it is not an array.
            config.save(dir)?;
            // Durably gone: a mark left beside a working array would let a later init take it for a
            // cut-off one's, should the array ever lose its configuration.
            // (Best effort: the array is made, and an error now would undo it.)
            let _ = std::fs::remove_file(&mark);
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            Ok(())
        })();
        if let Err(e) = built {
            // Leave nothing behind: what this init made goes, what was there before stays.
            drop(formatted);
            for d in &made {
                let _ = std::fs::remove_dir_all(d);
            }
            if !had_catalog {
                remove_both(&dir.join("catalog.json"));
            }
            // A cut-off init's mark stays until its leftovers are gone (a clearing that failed half-way is
            // tried again by the next init).
            if !had_mark {
                let _ = std::fs::remove_file(&mark);
            }
            if created_dir {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e);
        }
        let catalog = Catalog::default();
        keep_reserve(dir);
        Ok(Array {
            dir: dir.to_path_buf(),
            config,
            devices: crate::devices::in_process(formatted).into_iter().map(Ok).collect(),
            disk_generation: catalog.generation,
            catalog,
            open_report: OpenReport::default(),
            mismatched: Default::default(),
            undeleted: Vec::new(),
            progress: Default::default(),
            faults: FaultPlan::none(),
            _sockets: None,
            _lock: lock,
        })
    }

    /// Creates an array in `dir` of `devices` devices formatted where they are served (the message
    /// transport: a Ray backend's actors format their own directories with
    /// [`crate::devices::format_device`]), and opens it over `transport`. Writes the array's metadata
    /// only; if the devices do not all open as devices `0..devices`, that is removed again.
    pub fn init_served(
        dir: &Path,
        devices: u32,
        profile: Profile,
        capacity_bytes: Option<u64>,
        stripe_unit: Option<u64>,
        transport: DeviceTransport,
    ) -> Result<Array> {
        let stripe_unit = check_new(dir, devices, stripe_unit)?;
        std::fs::create_dir_all(dir).map_err(|e| HostError::io(dir, e))?;
        let lock = lock(dir)?;
        let mut config = ArrayConfig::new(devices, profile, capacity_bytes, stripe_unit);
        record_held_capacity(&mut config);
        let had_catalog = dir.join("catalog.json").exists()
            || crate::catalog::second_copy(&dir.join("catalog.json")).exists();
        let undo = || {
            remove_both(&dir.join("array.json"));
            if !had_catalog {
                remove_both(&dir.join("catalog.json"));
            }
        };
        let made = Catalog::default().save(dir).and_then(|()| config.save(dir));
        if let Err(e) = made {
            undo();
            return Err(e);
        }
        let opened = Self::open_locked(dir, lock, OpenOptions { transport, ..OpenOptions::default() });
        match opened {
            Ok(a) if a.offline().next().is_none() => Ok(a),
            Ok(a) => {
                let (device, detail) = a
                    .offline()
                    .next()
                    .map(|(i, why)| {
                        (i, why.trim_start_matches(&format!("device {i} is offline: ")).to_string())
                    })
                    .unwrap_or_default();
                drop(a);
                undo();
                Err(HostError::Offline { device, detail })
            }
            Err(e) => {
                undo();
                Err(e)
            }
        }
    }

    /// Opens the array in `dir`: takes the lock, opens (and recovers) every device in parallel over the
    /// transport asked for, and removes device parts of writes that never committed.
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Array> {
        if !has_config(dir) {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let lock = lock_within(dir, opts.lock_wait)?;
        Self::open_locked(dir, lock, opts)
    }

    fn open_locked(dir: &Path, lock: File, opts: OpenOptions) -> Result<Array> {
        keep_reserve(dir);
        let (mut config, config_note) = ArrayConfig::load_noted(dir)?;
        let (catalog, catalog_note) = Catalog::load_noted(dir)?;
        // A first copy damaged or gone is mended from the second (this process holds the lock), the
        // damaged one kept beside it.
        let mut restored = Vec::new();
        if let Some(why) = config_note {
            restored.push(crate::catalog::restore_first_copy(&dir.join("array.json"), &why)?);
        }
        if let Some(why) = catalog_note {
            restored.push(crate::catalog::restore_first_copy(&dir.join("catalog.json"), &why)?);
        }
        // An array made before the second copies gets them now.
        if !crate::catalog::second_copy(&dir.join("array.json")).exists() {
            let _ = config.save(dir);
        }
        if !crate::catalog::second_copy(&dir.join("catalog.json")).exists() {
            let _ = catalog.save(dir);
        }
        if let Some(h) = &opts.host {
            config.profile.host = h.clone();
        }
        let wait = opts.lock_wait.max(opts.device_wait);
        let opened = crate::devices::open(dir, config.devices, &opts.transport, wait)?;
        // A device that does not open is offline: the others serve what does not need it. With none
        // open there is nothing to serve.
        if opened.clients.iter().all(|c| c.is_err()) {
            if let Some(Err(e)) = opened.clients.into_iter().next() {
                return Err(e);
            }
            return Err(HostError::InvalidArgument("the array has no devices".into()));
        }
        let mut open_report = OpenReport { notes: restored, ..OpenReport::default() };
        let devices = opened
            .clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                c.map_err(|e| {
                    let detail = e.to_string();
                    open_report.notes.push(format!(
                        "device {i} is offline ({detail}); objects with a part on it cannot be used until it opens"
                    ));
                    detail
                })
            })
            .collect();
        let mut array = Array {
            dir: dir.to_path_buf(),
            config,
            devices,
            disk_generation: catalog.generation,
            catalog,
            open_report,
            mismatched: Default::default(),
            undeleted: Vec::new(),
            progress: Default::default(),
            faults: opts.faults,
            _sockets: opened.sockets,
            _lock: lock,
        };
        array.reconcile()?;
        Ok(array)
    }

    /// Ties the catalog to the devices' state (see [`Catalog`]): refuses a device older than the
    /// catalog, removes the parts of writes and removals that were cut off, and keeps any other part the
    /// catalog does not list in quarantine (a catalog older than the devices lists too little).
    fn reconcile(&mut self) -> Result<()> {
        // A device older than the catalog is taken offline, named: it would serve old bytes.
        let mut props = Vec::new();
        for i in 0..self.devices.len() {
            let Ok(d) = &self.devices[i] else { continue };
            let p = d.call(Identify).map_err(HostError::device(i as u32))?;
            let recorded = self.catalog.next_txns.get(i).copied().unwrap_or(0);
            if p.next_txn < recorded {
                let e = HostError::Corrupt {
                    what: "device",
                    path: device_dir(&self.dir, i as u32),
                    detail: format!(
                        "it has made {} write transactions, and the catalog (generation {}) recorded {recorded}: \
                         the folder is an older copy or lost its last writes. Nothing on it was changed; put \
                         back the device's current folder",
                        p.next_txn, self.catalog.generation
                    ),
                };
                self.open_report.notes.push(format!(
                    "device {i} is offline ({e}); objects with a part on it cannot be used until it is mended"
                ));
                if let Ok(d) = std::mem::replace(&mut self.devices[i], Err(e.to_string())) {
                    let _ = d.close();
                }
                continue;
            }
            props.push(p);
        }
        if props.is_empty() {
            return Err(HostError::InvalidArgument(format!(
                "no device of the array at {} can be used: {}",
                self.dir.display(),
                self.offline().map(|(i, why)| format!("device {i}: {why}")).collect::<Vec<_>>().join("; ")
            )));
        }
        let newest = props.iter().map(|p| p.array_generation).max().unwrap_or(0);
        let behind = newest > self.catalog.generation || self.catalog.rebuilt;
        if behind {
            self.open_report.notes.push(format!(
                "catalog.json is older than the devices (generation {} < {newest}): it was restored from an \
                 older copy or lost its last write; parts it does not list are kept in quarantine, none is \
                 removed",
                self.catalog.generation
            ));
        }
        let mut known = std::collections::HashSet::new();
        for e in self.catalog.objects.values() {
            for (i, dev) in e.devices.iter().enumerate() {
                for name in e.device_objects(i) {
                    known.insert((*dev, name));
                }
            }
        }
        for q in &self.catalog.quarantine {
            known.insert((q.device, q.name.clone()));
        }
        let removing: std::collections::HashSet<(u32, String)> =
            self.catalog.removing.iter().cloned().collect();
        let mut changed = behind || !removing.is_empty();
        let mut found = std::collections::HashMap::new();
        for d in self.devices.iter().filter_map(|d| d.as_ref().ok()) {
            let recorded = self.catalog.next_txns.get(d.id() as usize).copied().unwrap_or(0);
            for o in d.call(List).map_err(HostError::device(d.id()))? {
                let key = (d.id(), o.name.clone());
                if known.contains(&key) {
                    found.insert(key, o.txn);
                    continue;
                }
                let cut_off_write = o.txn >= recorded;
                if !behind && (cut_off_write || removing.contains(&key)) {
                    d.call(Delete { name: o.name.clone() }).map_err(HostError::device(d.id()))?;
                    self.open_report.removed_orphans.push(format!("dev{}:{}", d.id(), o.name));
                    continue;
                }
                let why = if behind {
                    format!("the catalog was older than the devices (generation {})", self.catalog.generation)
                } else {
                    format!(
                        "made before the catalog's last write (transaction {} < {recorded}) but not listed by it",
                        o.txn
                    )
                };
                self.open_report.quarantined.push(format!("dev{}:{}", d.id(), o.name));
                self.catalog.quarantine.push(QuarantinedPart {
                    device: d.id(),
                    name: o.name,
                    kind: o.kind,
                    size: o.size,
                    why,
                });
                changed = true;
            }
        }
        self.find_mismatched(&found);
        if changed {
            // Removals on a device that is offline are still to be done when it is back.
            let offline: Vec<u32> = self.offline().map(|(i, _)| i).collect();
            self.catalog.removing.retain(|(dev, _)| offline.contains(dev));
            // Past every generation a device has seen, so the catalog is the newest again.
            self.catalog.generation = self.catalog.generation.max(newest);
            self.catalog.rebuilt = false;
            self.save_catalog()?;
        }
        Ok(())
    }

    /// Finds the entries whose parts on the online devices are not the ones they recorded: made by another
    /// write (the catalog, or a device, is an older or newer copy than the other).
    fn find_mismatched(&mut self, found: &std::collections::HashMap<(u32, String), u64>) {
        for e in self.catalog.objects.values() {
            if e.commits.len() != e.devices.len() {
                continue;
            }
            let mut why = None;
            'parts: for (i, dev) in e.devices.iter().enumerate() {
                if self.device(*dev).is_err() {
                    continue;
                }
                for (name, want) in e.device_objects(i).into_iter().zip(&e.commits[i]) {
                    match found.get(&(*dev, name.clone())) {
                        Some(got) if got == want => {}
                        Some(got) => {
                            why = Some(format!(
                                "its part {name:?} on dev{dev} was made by write transaction {got}, the catalog \
                                 recorded {want}"
                            ));
                            break 'parts;
                        }
                        // A missing part is damage, which fsck reports; the rest of the object stays.
                        None => {}
                    }
                }
            }
            if let Some(why) = why {
                self.open_report.notes.push(format!(
                    "{} {:?} does not match its parts ({why}): the catalog or a device is another copy; it is \
                     refused until `insitu fsck --repair` lists it again from its parts",
                    e.kind.name(),
                    e.name
                ));
                self.mismatched.insert(e.name.clone(), why);
            }
        }
    }

    /// `fsck --repair`: takes out of the catalog every entry whose parts are not the ones it recorded and
    /// whose parts describe an object whole, keeping the parts in quarantine, from where
    /// [`Array::restore_quarantined`] lists them again. Returns the names taken out, and those left as they
    /// are (their parts describe nothing whole: reads keep refusing them, `rm` removes them).
    pub fn unlist_mismatched(&mut self) -> Result<(Vec<String>, Vec<String>)> {
        let (mut unlisted, mut left) = (Vec::new(), Vec::new());
        for name in self.mismatched.keys().cloned().collect::<Vec<_>>() {
            let Some(e) = self.catalog.objects.get(&name).cloned() else { continue };
            let why =
                format!("listed by entry {name:?}, which did not match it ({})", self.mismatched[&name]);
            let mut parts = Vec::new();
            for (i, dev) in e.devices.iter().enumerate() {
                let Ok(d) = self.device(*dev) else { continue };
                let listed = d.call(List).map_err(HostError::device(*dev))?;
                for part in e.device_objects(i) {
                    if let Some(o) = listed.iter().find(|o| o.name == part) {
                        parts.push((*dev, o.clone()));
                    }
                }
            }
            let refs: Vec<(u32, &insitu_device::ObjectMeta)> = parts.iter().map(|(d, o)| (*d, o)).collect();
            if self.entry_from_parts(&name, &refs).is_none() {
                left.push(name);
                continue;
            }
            self.catalog.objects.remove(&name);
            self.mismatched.remove(&name);
            for (device, o) in parts {
                self.catalog.quarantine.push(QuarantinedPart {
                    device,
                    name: o.name,
                    kind: o.kind,
                    size: o.size,
                    why: why.clone(),
                });
            }
            unlisted.push(name);
        }
        if !unlisted.is_empty() {
            self.save_catalog()?;
        }
        Ok((unlisted, left))
    }

    /// The object `name` that `parts` ((device, description) of its device objects) describe whole, if any.
    fn entry_from_parts(
        &self,
        name: &str,
        parts: &[(u32, &insitu_device::ObjectMeta)],
    ) -> Option<ObjectEntry> {
        let blob: Vec<(u32, &insitu_device::ObjectMeta)> =
            parts.iter().filter(|(_, o)| o.kind == "stripe" && o.name == name).copied().collect();
        if !blob.is_empty() {
            return blob_from_parts(name, &blob);
        }
        let mut split: std::collections::BTreeMap<
            u32,
            std::collections::BTreeMap<String, &insitu_device::ObjectMeta>,
        > = Default::default();
        for (dev, o) in parts {
            if let Some((_, suffix)) = o.name.split_once('#').filter(|(base, _)| *base == name) {
                split.entry(*dev).or_default().insert(suffix.to_string(), *o);
            }
        }
        self.described_by_parts(name, &split)
    }

    /// With no copy of the catalog readable (`why`), keeps what is there as `NAME.damaged` and starts an
    /// empty catalog marked [`Catalog::rebuilt`]: the open keeps every part it finds in quarantine, for the
    /// repair to restore the objects they describe; none is deleted.
    fn restart_catalog(dir: &Path, why: &HostError) -> Result<Catalog> {
        for name in ["catalog.json", "catalog.b.json"] {
            let p = dir.join(name);
            if p.exists() {
                let kept = dir.join(format!("{name}.damaged"));
                std::fs::rename(&p, &kept).map_err(|e| HostError::io(&p, e))?;
            }
        }
        let c = Catalog { rebuilt: true, ..Catalog::default() };
        c.save(dir).map_err(|e| HostError::InvalidArgument(format!("{why}; and a new catalog: {e}")))?;
        Ok(c)
    }

    /// `fsck --repair`, before the array opens: mends what keeps a device from opening and can be mended
    /// with the user's consent (a journal damaged inside is cut at the damage, the whole journal kept
    /// beside it). Returns what was done, device by device.
    pub fn repair_devices(dir: &Path) -> Result<Vec<String>> {
        let config = ArrayConfig::load(dir)?;
        let _held = lock(dir)?;
        let mut done = Vec::new();
        let mut catalog = match Catalog::load(dir) {
            Ok(c) => c,
            Err(e) if crate::catalog::damaged_or_gone(&e) => {
                let c = Self::restart_catalog(dir, &e)?;
                done.push(format!(
                    "catalog: no copy could be read ({e}); started an empty one: every part on the devices is \
                     kept in quarantine at the open below, and the objects they describe whole are restored"
                ));
                c
            }
            Err(e) => return Err(e),
        };
        for i in 0..config.devices {
            let ddir = device_dir(dir, i);
            let notes = match Device::repair(&ddir) {
                Ok(n) => n,
                Err(e) => {
                    done.push(format!("device {i}: not repaired: {e}"));
                    continue;
                }
            };
            // A cut journal, now or by an earlier repair that was itself cut off before the catalog was
            // written (its copy of the whole journal says so), lost the transactions of the dropped
            // records, with the user's consent: the catalog then expects what the device has, so it is
            // not taken for an older copy. What the dropped records held is missing from its objects,
            // which fsck reports.
            let cut_before = Device::journal_was_cut(&ddir);
            if notes.is_empty() && !cut_before {
                continue;
            }
            let next = Device::open(&ddir).map_err(HostError::device(i)).and_then(|d| {
                let client = insitu_device::transport::in_process(d);
                let next = client.call(Identify).map_err(HostError::device(i))?.next_txn;
                client.close().map_err(HostError::device(i))?;
                Ok(next)
            });
            match next {
                Ok(next) => {
                    if let Some(recorded) = catalog.next_txns.get_mut(i as usize) {
                        if *recorded > next {
                            *recorded = next;
                            catalog.save(dir)?;
                        }
                    }
                    done.extend(notes.into_iter().map(|n| format!("device {i}: {n}")));
                }
                Err(e) => done.push(format!("device {i}: not repaired: {e}")),
            }
        }
        Ok(done)
    }

    /// `fsck --repair`: puts back into the catalog every object kept whole in quarantine that its parts
    /// describe (a blob: each part says which of how many it is, the stripe unit and the total size; a
    /// table or a shuffle output: its first object in each part carries the catalog's description, see
    /// `catalog::part_attrs`), under its own name when that is free. Returns what was restored.
    pub fn restore_quarantined(&mut self) -> Result<Vec<String>> {
        use std::collections::BTreeMap;
        // The parts' own descriptions, from their devices.
        let mut metas = BTreeMap::new();
        for q in &self.catalog.quarantine {
            let Ok(d) = self.device(q.device) else { continue };
            if let Ok(list) = d.call(List) {
                for o in list.into_iter().filter(|o| o.name == q.name) {
                    metas.insert((q.device, q.name.clone()), o);
                }
            }
        }
        let mut blobs: BTreeMap<&str, Vec<(u32, &insitu_device::ObjectMeta)>> = BTreeMap::new();
        // Parts of tables and shuffle outputs, by object, device and suffix.
        let mut split: BTreeMap<&str, BTreeMap<u32, BTreeMap<String, &insitu_device::ObjectMeta>>> =
            BTreeMap::new();
        for ((dev, name), o) in &metas {
            if o.kind == "stripe" {
                blobs.entry(name.as_str()).or_default().push((*dev, o));
            } else if let Some((base, suffix)) = name.split_once('#') {
                split.entry(base).or_default().entry(*dev).or_default().insert(suffix.to_string(), o);
            }
        }
        let mut entries: Vec<ObjectEntry> =
            blobs.into_iter().filter_map(|(name, parts)| blob_from_parts(name, &parts)).collect();
        entries.extend(split.into_iter().filter_map(|(name, parts)| self.described_by_parts(name, &parts)));
        let mut restored = Vec::new();
        for mut entry in entries {
            if self.catalog.objects.contains_key(&entry.name) {
                continue;
            }
            entry.commits = self.part_commits(std::slice::from_ref(&entry))?.pop().unwrap_or_default();
            restored.push(format!(
                "{} ({}, {} bytes on device(s) {:?})",
                entry.name,
                entry.kind.name(),
                entry.size,
                entry.devices
            ));
            let parts: std::collections::HashSet<(u32, String)> = entry
                .devices
                .iter()
                .enumerate()
                .flat_map(|(i, d)| entry.device_objects(i).into_iter().map(move |n| (*d, n)))
                .collect();
            self.catalog.quarantine.retain(|q| !parts.contains(&(q.device, q.name.clone())));
            self.catalog.objects.insert(entry.name.clone(), entry);
        }
        if !restored.is_empty() {
            self.save_catalog()?;
        }
        Ok(restored)
    }

    /// The table or shuffle output `name` that its parts (by device, then suffix) describe whole, if
    /// they do: every part `i/n` on the device the others name, all carrying the same description.
    fn described_by_parts(
        &self,
        name: &str,
        parts: &std::collections::BTreeMap<
            u32,
            std::collections::BTreeMap<String, &insitu_device::ObjectMeta>,
        >,
    ) -> Option<ObjectEntry> {
        let (first, head_key) = parts.values().find_map(|p| {
            p.get("rows").filter(|o| o.attrs.contains_key("table")).map(|o| (*o, "table")).or_else(|| {
                p.get("data").filter(|o| o.attrs.contains_key("shuffle")).map(|o| (*o, "shuffle"))
            })
        })?;
        let head = first.attrs.get(head_key)?;
        let devices: Vec<u32> = serde_json::from_str(first.attrs.get("devices")?).ok()?;
        let said = first.attrs.get("devices")?;
        if devices.len() != parts.len() || devices.iter().any(|d| !parts.contains_key(d)) {
            return None;
        }
        let lead = if head_key == "table" { "rows" } else { "data" };
        for (i, dev) in devices.iter().enumerate() {
            let o = parts[dev].get(lead)?;
            if o.attrs.get(head_key) != Some(head)
                || o.attrs.get("devices") != Some(said)
                || o.attrs.get("write") != first.attrs.get("write")
                || o.attrs.get("part") != Some(&format!("{i}/{}", devices.len()))
            {
                return None;
            }
        }
        let sizes = |dev: &u32| -> std::collections::BTreeMap<String, u64> {
            parts[dev].iter().map(|(s, o)| (s.clone(), o.size)).collect()
        };
        let (kind, size) = if head_key == "table" {
            let head: crate::table::TableInfo = serde_json::from_str(head).ok()?;
            let infos = devices
                .iter()
                .map(|d| {
                    let read = |obj: &str| -> Option<Vec<u8>> {
                        let dev = self.device(*d).ok()?;
                        let size = dev.call(Stat { name: obj.to_string() }).ok()?.size;
                        let cmd = insitu_device::protocol::Read {
                            name: obj.to_string(),
                            offset: 0,
                            len: size,
                            buf: Vec::new(),
                        };
                        dev.call(cmd).ok()
                    };
                    crate::table::info::part_from_objects(name, &head, &sizes(d), &read)
                })
                .collect::<Option<Vec<_>>>()?;
            let size = devices.iter().map(|d| parts[d]["rows"].size).sum();
            (EntryKind::Table(crate::table::TableInfo { parts: infos, ..head }), size)
        } else {
            let info: crate::psacs::info::ShuffleInfo = serde_json::from_str(head).ok()?;
            let whole = devices.iter().all(|d| {
                let mut s: Vec<&String> = parts[d].keys().collect();
                s.sort();
                s == ["data", "index"]
            });
            if !whole || info.parts.len() != devices.len() {
                return None;
            }
            (EntryKind::Shuffle(info), devices.iter().map(|d| parts[d]["data"].size).sum())
        };
        Some(ObjectEntry { name: name.to_string(), size, stripe_unit: 0, devices, kind, commits: Vec::new() })
    }

    /// Removes the parts kept in quarantine (`fsck --repair`); returns their names.
    pub fn remove_quarantined(&mut self) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        let mut kept = Vec::new();
        for q in std::mem::take(&mut self.catalog.quarantine) {
            // A part on a device that is offline stays listed until the device is back.
            let Ok(d) = self.device(q.device) else {
                kept.push(q);
                continue;
            };
            let listed = d.call(List).map_err(HostError::device(q.device));
            let gone = listed.and_then(|l| match l.iter().any(|o| o.name == q.name) {
                true => d.call(Delete { name: q.name.clone() }).map_err(HostError::device(q.device)),
                false => Ok(()),
            });
            match gone {
                Ok(()) => removed.push(format!("dev{}:{}", q.device, q.name)),
                Err(e) => {
                    kept.push(q);
                    self.catalog.quarantine.extend(kept);
                    return Err(e);
                }
            }
        }
        self.catalog.quarantine = kept;
        if !removed.is_empty() {
            self.save_catalog()?;
        }
        Ok(removed)
    }

    /// Stops every device after a checkpoint.
    /// Closes every device (each checkpoints); a device that fails to close does not keep the others
    /// from closing. Returns the first failure.
    pub fn close(self) -> Result<()> {
        let mut first = Ok(());
        for d in self.devices() {
            if let Err(e) = d.close() {
                if first.is_ok() {
                    first = Err(HostError::Device { device: d.id(), error: e });
                }
            }
        }
        first
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes the array an appliance whose devices (its nodes) are cabled by `topology` (BlueDBM §3.2):
    /// the topology must have one node per device and fit the profile's storage network.
    pub fn set_topology(&mut self, topology: insitu_device::network::Topology) -> Result<()> {
        let net = self.config.profile.network.storage.as_ref().ok_or_else(|| {
            HostError::InvalidArgument(format!(
                "profile {} has no storage network ([network.storage]); try --profile bluedbm",
                self.config.profile.name
            ))
        })?;
        if topology.nodes() != self.config.devices || topology.ports() > net.ports {
            return Err(HostError::InvalidArgument(format!(
                "the topology has {} nodes of {} ports; the appliance has {} nodes of {} ports",
                topology.nodes(),
                topology.ports(),
                self.config.devices,
                net.ports
            )));
        }
        self.config.topology = Some(topology);
        self.config.save(&self.dir)
    }

    pub fn config(&self) -> &ArrayConfig {
        &self.config
    }

    pub fn profile(&self) -> &Profile {
        &self.config.profile
    }

    /// Whether `dir` holds an array (its configuration), without opening it.
    pub fn exists_at(dir: &Path) -> bool {
        has_config(dir)
    }

    /// What to say of a device program's memory budget: one larger than a device's memory is cut to
    /// what the device has free, and a placement that does not run on the devices does not use it.
    pub(crate) fn memory_budget_warning(&self, budget: Option<u64>, on_devices: bool) -> Option<String> {
        let b = budget?;
        let memory = self.profile().device.memory_bytes;
        if !on_devices {
            Some(
                "a memory budget is the device placement's, unused here: this placement does not run on the devices"
                    .into(),
            )
        } else if b > memory {
            Some(format!(
                "the memory budget ({}) is more than a device's memory ({}): each device used at most what it \
                 had free",
                crate::units::human_bytes(b),
                crate::units::human_bytes(memory)
            ))
        } else {
            None
        }
    }

    /// The devices that are online (all of them unless one did not open).
    pub fn devices(&self) -> impl Iterator<Item = &DeviceClient> {
        self.devices.iter().filter_map(|d| d.as_ref().ok())
    }

    /// How many devices the array has, online or not.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// The devices that did not open, and why.
    pub fn offline(&self) -> impl Iterator<Item = (u32, &str)> {
        self.devices.iter().enumerate().filter_map(|(i, d)| d.as_ref().err().map(|e| (i as u32, e.as_str())))
    }

    pub fn device(&self, id: u32) -> Result<&DeviceClient> {
        match self.devices.get(id as usize) {
            Some(Ok(d)) => Ok(d),
            Some(Err(detail)) => Err(HostError::Offline { device: id, detail: detail.clone() }),
            None => Err(HostError::NoSuchDevice { device: id, count: self.devices.len() as u32 }),
        }
    }

    /// Waits for commands started on several devices, counting each as it ends in the progress; the first
    /// error (once all have ended) names its device.
    pub(crate) fn wait_all<R: insitu_device::protocol::Call>(
        &self,
        running: Vec<insitu_device::transport::Pending<'_, R>>,
    ) -> Result<Vec<R::Response>> {
        let mut outputs = Vec::with_capacity(running.len());
        let mut first_err = None;
        for p in running {
            let dev = p.client().id();
            let r = p.wait();
            self.progress.add(1);
            match r {
                Ok(o) => outputs.push(o),
                Err(e) => {
                    first_err.get_or_insert(HostError::Device { device: dev, error: e });
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(outputs),
        }
    }

    /// What the command running on the array has done so far; clone it to watch from another thread.
    pub fn progress(&self) -> &crate::progress::Progress {
        &self.progress
    }

    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn entry(&self, name: &str) -> Result<&ObjectEntry> {
        if let Some(why) = self.mismatched.get(name) {
            return Err(HostError::Damaged {
                name: name.to_string(),
                detail: format!(
                    "it does not match its parts ({why}): the catalog or a device is another copy than the \
                     other; `insitu fsck --repair` lists it again from what its parts describe"
                ),
            });
        }
        self.catalog.objects.get(name).ok_or_else(|| HostError::NotFound(name.to_string()))
    }

    /// The entry of an object stored as bytes under its own name (a blob, a list, an index).
    pub fn blob_entry(&self, name: &str) -> Result<&ObjectEntry> {
        let e = self.entry(name)?;
        match &e.kind {
            k if k.is_bytes() => Ok(e),
            EntryKind::Table(_) => {
                Err(HostError::InvalidArgument(format!("{name:?} is a table: use get-table, sort or rm")))
            }
            _ => Err(HostError::InvalidArgument(format!(
                "{name:?} is a {} output: use shuffle-read or rm",
                e.kind.name()
            ))),
        }
    }

    /// The entry of a table and its description.
    pub fn table_entry(&self, name: &str) -> Result<(&ObjectEntry, &crate::table::TableInfo)> {
        let e = self.entry(name)?;
        match &e.kind {
            EntryKind::Table(t) => Ok((e, t)),
            k => Err(HostError::InvalidArgument(format!("{name:?} is a {}, not a table", k.name()))),
        }
    }

    /// Fails if `name` is taken (by an object, or by parts kept in quarantine).
    pub(crate) fn check_free(&self, name: &str) -> Result<()> {
        if self.catalog.objects.contains_key(name) {
            return Err(HostError::AlreadyExists(name.to_string()));
        }
        if let Some(q) = self.catalog.quarantine.iter().find(|q| q.belongs_to(name)) {
            return Err(HostError::InvalidArgument(format!(
                "{name:?} is taken by a part kept in quarantine (dev{}: {:?}, {}); `insitu fsck` lists such \
                 parts and `insitu fsck --repair` removes them",
                q.device, q.name, q.why
            )));
        }
        Ok(())
    }

    /// Writes the catalog as a new generation, with each device's next transaction id, then has every
    /// device record the generation. The catalog write is the commit point; a device that misses the
    /// generation only lags, which the next open sees and mends.
    fn save_catalog(&mut self) -> Result<()> {
        // An offline device keeps the id recorded before: it cannot have made anything since. An online
        // one syncs first, so the id recorded is one its journal holds even after a power cut.
        let next_txns = (0..self.devices.len())
            .map(|i| match &self.devices[i] {
                Ok(d) => d
                    .call(Flush)
                    .and_then(|()| d.call(Identify))
                    .map(|p| p.next_txn)
                    .map_err(HostError::device(i as u32)),
                Err(_) => Ok(self.catalog.next_txns.get(i).copied().unwrap_or(0)),
            })
            .collect::<Result<Vec<u64>>>()?;
        // The lock keeps other writers out; should one get in all the same, this write is refused rather
        // than made over theirs.
        let on_disk = Catalog::load(&self.dir)?.generation;
        if on_disk != self.disk_generation {
            return Err(HostError::Corrupt {
                what: "catalog",
                path: self.dir.join("catalog.json"),
                detail: format!(
                    "it changed under this process (generation {on_disk} on disk, {} when read): another \
                     writer? Nothing was committed",
                    self.disk_generation
                ),
            });
        }
        let before = (self.catalog.generation, std::mem::replace(&mut self.catalog.next_txns, next_txns));
        for p in &self.undeleted {
            if !self.catalog.removing.contains(p) {
                self.catalog.removing.push(p.clone());
            }
        }
        self.catalog.generation += 1;
        release_reserve_if_short(&self.dir);
        if let Err(e) = self.catalog.save(&self.dir) {
            (self.catalog.generation, self.catalog.next_txns) = before;
            return Err(e);
        }
        self.disk_generation = self.catalog.generation;
        let generation = self.catalog.generation;
        for d in self.devices() {
            let _ = d.call(SetArrayGeneration { generation });
        }
        Ok(())
    }

    /// Adds an entry and makes the catalog durable (the commit point of a write).
    pub(crate) fn commit_entry(&mut self, entry: ObjectEntry) -> Result<()> {
        self.commit_entries(vec![entry])
    }

    /// Adds several entries with one durable catalog write (bulk loads such as an index's lists).
    pub(crate) fn commit_entries(&mut self, entries: Vec<ObjectEntry>) -> Result<()> {
        let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
        let commits = self.part_commits(&entries)?;
        for (mut e, c) in entries.into_iter().zip(commits) {
            e.commits = c;
            self.mismatched.remove(&e.name);
            self.catalog.objects.insert(e.name.clone(), e);
        }
        let removing = std::mem::take(&mut self.catalog.removing);
        if let Err(err) = self.save_catalog() {
            for n in names {
                self.catalog.objects.remove(&n);
            }
            self.catalog.removing = removing;
            return Err(err);
        }
        Ok(())
    }

    /// The write transaction of every device object of each entry's parts ([`ObjectEntry::commits`]):
    /// asked object by object for one entry, from each device's list for several.
    fn part_commits(&self, entries: &[ObjectEntry]) -> Result<Vec<Vec<Vec<u64>>>> {
        let mut listed: std::collections::HashMap<u32, std::collections::HashMap<String, u64>> =
            Default::default();
        if entries.len() > 1 {
            for dev in
                entries.iter().flat_map(|e| e.devices.iter()).collect::<std::collections::BTreeSet<_>>()
            {
                let list = self.device(*dev)?.call(List).map_err(HostError::device(*dev))?;
                listed.insert(*dev, list.into_iter().map(|o| (o.name, o.txn)).collect());
            }
        }
        entries
            .iter()
            .map(|e| {
                e.devices
                    .iter()
                    .enumerate()
                    .map(|(i, dev)| {
                        e.device_objects(i)
                            .into_iter()
                            .map(|name| match listed.get(dev) {
                                Some(l) => l.get(&name).copied().ok_or_else(|| HostError::Damaged {
                                    name: name.clone(),
                                    detail: format!("not on dev{dev}"),
                                }),
                                None => Ok(self
                                    .device(*dev)?
                                    .call(Stat { name })
                                    .map_err(HostError::device(*dev))?
                                    .txn),
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    /// Removes an entry durably; returns it.
    pub(crate) fn remove_entry(&mut self, name: &str) -> Result<ObjectEntry> {
        // An entry that does not match its parts may go too (`fsck` says so first): the user names it.
        let entry = self.catalog.objects.get(name).ok_or_else(|| HostError::NotFound(name.to_string()))?;
        // Every part must be reachable to be removed: refuse while a device holding one is offline.
        for dev in &entry.devices {
            self.device(*dev)?;
        }
        let e = self.catalog.objects.remove(name).ok_or_else(|| HostError::NotFound(name.to_string()))?;
        let parts = e
            .devices
            .iter()
            .enumerate()
            .flat_map(|(i, dev)| e.device_objects(i).into_iter().map(move |n| (*dev, n)))
            .collect();
        let before = std::mem::replace(&mut self.catalog.removing, parts);
        if let Err(err) = self.save_catalog() {
            self.catalog.objects.insert(name.to_string(), e);
            self.catalog.removing = before;
            return Err(err);
        }
        self.mismatched.remove(name);
        Ok(e)
    }

    /// Counters of every device.
    /// Counters of every device (zeros for one that is offline).
    pub fn counters(&self) -> Result<Vec<DeviceCounters>> {
        self.counters_each().into_iter().collect()
    }

    /// [`Array::counters`], device by device: each one's counters or why it did not answer.
    pub fn counters_each(&self) -> Vec<Result<DeviceCounters>> {
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Ok(d) => d.counters().map_err(HostError::device(i as u32)),
                Err(_) => Ok(DeviceCounters::default()),
            })
            .collect()
    }

    /// Checks every device (FTL invariants, namespace, a scrub of every page) and the catalog against the
    /// devices' parts. (An appliance's file system is checked beside: [`crate::fsck::check`].)
    pub fn fsck(&self) -> Result<Vec<String>> {
        Ok(self.check()?.problems)
    }

    /// [`Array::fsck`], with what the devices noted besides the problems (the state of their indexes).
    pub fn check(&self) -> Result<FsckSummary> {
        let mut problems = Vec::new();
        let mut notes = Vec::new();
        for (i, why) in self.offline() {
            problems.push(format!("dev{i}: offline: {why}"));
        }
        for d in self.devices() {
            match d.call(Fsck) {
                Ok(r) => {
                    problems.extend(r.problems.into_iter().map(|x| format!("dev{}: {x}", d.id())));
                    notes.extend(r.notes.into_iter().map(|x| format!("dev{}: {x}", d.id())));
                }
                Err(e) => problems.push(format!("dev{}: {e}", d.id())),
            }
        }
        for e in self.catalog.objects.values() {
            for (i, dev) in e.devices.iter().enumerate() {
                let d = match self.device(*dev) {
                    Ok(d) => d,
                    Err(err) => {
                        problems.push(format!("object {:?}: part {i}: {err}", e.name));
                        continue;
                    }
                };
                if !e.kind.is_bytes() {
                    for name in e.device_objects(i) {
                        if let Err(err) = d.call(Stat { name: name.clone() }) {
                            problems.push(format!(
                                "{} {:?}: part {i} on dev{dev}: {err}",
                                e.kind.name(),
                                e.name
                            ));
                        }
                    }
                    continue;
                }
                match d.call(Stat { name: e.name.clone() }) {
                    Ok(o) => {
                        let want = e.layout(i).part_size();
                        if o.size != want {
                            problems.push(format!(
                                "object {:?}: part {i} on dev{dev} holds {} bytes, {want} expected",
                                e.name, o.size
                            ));
                        }
                    }
                    Err(err) => problems.push(format!("object {:?}: part {i} on dev{dev}: {err}", e.name)),
                }
            }
        }
        for (name, why) in &self.mismatched {
            problems.push(format!(
                "object {name:?} does not match its parts ({why}); `insitu fsck --repair` lists it again from \
                 what its parts describe"
            ));
        }
        for q in &self.catalog.quarantine {
            problems.push(format!(
                "dev{}: part {:?} ({}, {} bytes) is listed by no object and kept in quarantine: {}; \
                 `insitu fsck --repair` removes it",
                q.device, q.name, q.kind, q.size, q.why
            ));
        }
        notes.extend(self.open_report.notes.iter().cloned());
        Ok(FsckSummary { problems, notes })
    }

    /// Checks an array that may not open: reports what prevents it instead of failing.
    /// Waits up to `wait` for another process to release the array, and up to `device_wait` (at least
    /// 2 s) for a device another process holds ([`OpenOptions::device_wait`]).
    pub fn fsck_dir(
        dir: &Path,
        transport: &DeviceTransport,
        wait: std::time::Duration,
        device_wait: std::time::Duration,
    ) -> Result<FsckSummary> {
        Self::fsck_dir_with(dir, transport, wait, device_wait, Array::check)
    }

    /// [`Array::fsck_dir`], checking an array that opens with `check`.
    pub fn fsck_dir_with(
        dir: &Path,
        transport: &DeviceTransport,
        wait: std::time::Duration,
        device_wait: std::time::Duration,
        check: impl Fn(&Array) -> Result<FsckSummary>,
    ) -> Result<FsckSummary> {
        if !has_config(dir) {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let held = lock_within(dir, wait)?;
        // A second handle on the same open directory keeps the lock while the diagnosis below runs, after
        // a failed open has dropped the first.
        let _kept = held.try_clone().map_err(|e| HostError::io(dir, e))?;
        let opts =
            OpenOptions { transport: transport.clone(), lock_wait: wait, device_wait, ..Default::default() };
        match Array::open_locked(dir, held, opts) {
            Ok(a) => {
                let s = check(&a)?;
                a.close()?;
                Ok(s)
            }
            Err(e) => {
                // Say which part cannot be opened, and check the devices that can (at once: the open
                // above waited for them).
                let mut problems = vec![e.to_string()];
                let mut notes = Vec::new();
                if let Ok(config) = ArrayConfig::load(dir) {
                    for i in 0..config.devices {
                        match crate::devices::open_one(dir, i, transport, std::time::Duration::ZERO) {
                            Ok((d, _sockets)) => {
                                if let Ok(r) = d.call(Fsck) {
                                    problems.extend(r.problems.into_iter().map(|x| format!("dev{i}: {x}")));
                                    notes.extend(r.notes.into_iter().map(|x| format!("dev{i}: {x}")));
                                }
                                let _ = d.close();
                            }
                            Err(err) => {
                                if !problems.iter().any(|p| p.contains(&err.to_string())) {
                                    problems.push(err.to_string());
                                }
                            }
                        }
                    }
                }
                Ok(FsckSummary { problems, notes })
            }
        }
    }
}

/// What a consistency check found: problems, and notes on what was checked and found in order.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FsckSummary {
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// A file of [`RESERVE_BYTES`] kept in the array's folder and given up when the host's file system is
/// too full for a catalog commit: a disk the devices' images filled still lets `rm` commit, and the
/// removal then gives the images' space back (the flash layer does when the disk is short), so the array
/// can take new data again. Made again at the next open that finds room.
const RESERVE: &str = "reserve";
const RESERVE_BYTES: u64 = 1 << 20;

/// Whether `name` is one of the entries an array keeps in its data directory (see the layout above): what
/// an `init` cut off before may have left there, not a file of someone else's.
pub fn is_array_entry(name: &str) -> bool {
    matches!(
        name,
        "array.json" | "array.b.json" | "catalog.json" | "catalog.b.json" | INIT_MARK | RESERVE | "fs"
    ) || name.strip_prefix("dev").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `dir` holds an array's configuration (`array.json`, or its second copy).
fn has_config(dir: &Path) -> bool {
    dir.join("array.json").exists() || crate::catalog::second_copy(&dir.join("array.json")).exists()
}

/// Removes `dir`, the array a run of the repros made there before (holding its configuration, or nothing):
/// a folder of anything else under a `--work` the user named is refused by name, not deleted.
pub(crate) fn clear_array_dir(dir: &Path) -> Result<()> {
    let empty = || std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none());
    if !dir.exists() {
        return Ok(());
    }
    if !has_config(dir) && !empty() {
        return Err(HostError::InvalidArgument(format!(
            "{} is in the way: it is not an array a repro made there (no array.json); move it, or give another --work",
            dir.display()
        )));
    }
    std::fs::remove_dir_all(dir).map_err(|e| HostError::io(dir, e))
}

/// Removes a metadata file and its second copy.
fn remove_both(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(crate::catalog::second_copy(path));
}

/// Makes the reserve if it is missing and the disk has room for it a few times over (so that making it
/// does not itself fill the disk, and the next command's catalog write fits beside it). Best effort: an
/// array works without it.
fn keep_reserve(dir: &Path) {
    let path = dir.join(RESERVE);
    if path.exists() || insitu_device::free_bytes(dir).is_none_or(|f| f < 4 * RESERVE_BYTES) {
        return;
    }
    // Written, not only sized, so that the file system holds the blocks.
    let made = std::fs::write(&path, vec![0u8; RESERVE_BYTES as usize]);
    if made.is_err() {
        let _ = std::fs::remove_file(&path);
    }
}

/// Gives the reserve up when the disk has less free than it holds.
pub(crate) fn release_reserve_if_short(dir: &Path) {
    if insitu_device::free_bytes(dir).is_some_and(|f| f < RESERVE_BYTES) {
        let _ = std::fs::remove_file(dir.join(RESERVE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repro_clears_only_an_array_it_made_or_an_empty_folder() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("nascent-1");
        clear_array_dir(&d).unwrap(); // not there: nothing to do
        std::fs::create_dir(&d).unwrap();
        clear_array_dir(&d).unwrap();
        assert!(!d.exists(), "an empty folder goes");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(crate::catalog::second_copy(&d.join("array.json")), b"{}").unwrap();
        std::fs::create_dir(d.join("dev0")).unwrap();
        clear_array_dir(&d).unwrap();
        assert!(!d.exists(), "an array goes, whole");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("thesis.txt"), b"precious").unwrap();
        let e = clear_array_dir(&d).unwrap_err().to_string();
        assert!(e.contains("is in the way") && e.contains("--work"), "{e}");
        assert_eq!(std::fs::read(d.join("thesis.txt")).unwrap(), b"precious");
    }
}
