//! [`Array`]: N computational storage devices in a data directory, opened together under one lock (an
//! flock on the data directory itself, held by the one process using the array).
//!
//! Layout of the data directory:
//! ```text
//! array.json      configuration (device count, capacity, stripe unit, the full profile)
//! catalog.json    objects of the array (the commit point of multi-device writes)
//! dev0/ dev1/ ... one device each: device.json, superblock, checkpoint, journal, nand.img, nand.oob
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};

use insitu_device::protocol::{Delete, Fsck, List, Stat};
use insitu_device::{Device, DeviceClient, DeviceCounters, FaultPlan, Profile};
use serde::Serialize;

use crate::catalog::{ArrayConfig, Catalog, EntryKind, ObjectEntry, ARRAY_FORMAT};
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

/// How to open an array.
#[derive(Debug, Default)]
pub struct OpenOptions {
    /// Where (if anywhere) to crash, for crash tests.
    pub faults: FaultPlan,
    /// How to reach the devices.
    pub transport: DeviceTransport,
}

/// What opening the array cleaned up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OpenReport {
    /// Device parts of writes that never reached the catalog, removed.
    pub removed_orphans: Vec<String>,
}

/// An array of devices.
#[derive(Debug)]
pub struct Array {
    dir: PathBuf,
    config: ArrayConfig,
    devices: Vec<DeviceClient>,
    catalog: Catalog,
    open_report: OpenReport,
    pub(crate) faults: FaultPlan,
    /// Sockets of device servers (process transport); removed after the devices stop.
    _sockets: Option<ScratchDir>,
    _lock: File,
}

/// Locks the data directory itself (flock on the directory): unlike a lock file, it cannot be deleted
/// or replaced under a running process to let a second writer in.
fn lock(dir: &Path) -> Result<File> {
    insitu_device::sys::lock_dir(dir)
        .map_err(|e| HostError::io(dir, e))?
        .ok_or_else(|| HostError::Locked(dir.to_path_buf()))
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
        if devices == 0 || devices > 1024 {
            return Err(HostError::InvalidArgument(format!("--devices must be 1..=1024, got {devices}")));
        }
        let stripe_unit = stripe_unit.unwrap_or(DEFAULT_STRIPE_UNIT);
        if stripe_unit < 4096 {
            return Err(HostError::InvalidArgument(format!(
                "stripe unit must be at least 4096 bytes, got {stripe_unit}"
            )));
        }
        if dir.join("array.json").exists() {
            return Err(HostError::ArrayExists(dir.to_path_buf()));
        }
        let created_dir = !dir.exists();
        let had_catalog = dir.join("catalog.json").exists();
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
        let capacity_bytes = capacity_bytes.unwrap_or(profile.default_capacity_bytes);
        let config = ArrayConfig {
            format: ARRAY_FORMAT,
            devices,
            capacity_bytes,
            stripe_unit,
            profile,
            topology: None,
        };
        let mut formatted = Vec::new();
        let mut made: Vec<PathBuf> = Vec::new();
        let built = (|| {
            for i in 0..devices {
                let ddir = device_dir(dir, i);
                if !ddir.exists() {
                    made.push(ddir.clone());
                }
                let d = Device::format(&ddir, i, config.profile.clone(), capacity_bytes)
                    .map_err(HostError::device(i))?;
                formatted.push(d);
            }
            Catalog::default().save(dir)?;
            // The configuration is written last: an array without it is not an array.
            config.save(dir)
        })();
        if let Err(e) = built {
            // Leave nothing behind: what this init made goes, what was there before stays.
            drop(formatted);
            for d in &made {
                let _ = std::fs::remove_dir_all(d);
            }
            if !had_catalog {
                let _ = std::fs::remove_file(dir.join("catalog.json"));
            }
            if created_dir {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e);
        }
        let catalog = Catalog::default();
        Ok(Array {
            dir: dir.to_path_buf(),
            config,
            devices: crate::devices::in_process(formatted),
            catalog,
            open_report: OpenReport::default(),
            faults: FaultPlan::none(),
            _sockets: None,
            _lock: lock,
        })
    }

    /// Opens the array in `dir`: takes the lock, opens (and recovers) every device in parallel over the
    /// transport asked for, and removes device parts of writes that never committed.
    pub fn open(dir: &Path, opts: OpenOptions) -> Result<Array> {
        if !dir.join("array.json").exists() {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let lock = lock(dir)?;
        Self::open_locked(dir, lock, opts)
    }

    fn open_locked(dir: &Path, lock: File, opts: OpenOptions) -> Result<Array> {
        let config = ArrayConfig::load(dir)?;
        let catalog = Catalog::load(dir)?;
        let opened = crate::devices::open(dir, config.devices, &opts.transport)?;
        let mut array = Array {
            dir: dir.to_path_buf(),
            config,
            devices: opened.clients,
            catalog,
            open_report: OpenReport::default(),
            faults: opts.faults,
            _sockets: opened.sockets,
            _lock: lock,
        };
        array.reconcile()?;
        Ok(array)
    }

    /// Removes device parts that the catalog does not know (an interrupted `put` or `rm`).
    fn reconcile(&mut self) -> Result<()> {
        let mut known = std::collections::HashSet::new();
        for e in self.catalog.objects.values() {
            for (i, dev) in e.devices.iter().enumerate() {
                for name in e.device_objects(i) {
                    known.insert((*dev, name));
                }
            }
        }
        for d in &self.devices {
            for o in d.call(List).map_err(HostError::device(d.id()))? {
                if !known.contains(&(d.id(), o.name.clone())) {
                    d.call(Delete { name: o.name.clone() }).map_err(HostError::device(d.id()))?;
                    self.open_report.removed_orphans.push(format!("dev{}:{}", d.id(), o.name));
                }
            }
        }
        Ok(())
    }

    /// Stops every device after a checkpoint.
    pub fn close(self) -> Result<()> {
        for d in &self.devices {
            d.close().map_err(HostError::device(d.id()))?;
        }
        Ok(())
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

    pub fn devices(&self) -> &[DeviceClient] {
        &self.devices
    }

    pub fn device(&self, id: u32) -> Result<&DeviceClient> {
        self.devices
            .get(id as usize)
            .ok_or(HostError::NoSuchDevice { device: id, count: self.devices.len() as u32 })
    }

    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn entry(&self, name: &str) -> Result<&ObjectEntry> {
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

    /// Fails if `name` is taken.
    pub(crate) fn check_free(&self, name: &str) -> Result<()> {
        if self.catalog.objects.contains_key(name) {
            return Err(HostError::AlreadyExists(name.to_string()));
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
        for e in entries {
            self.catalog.objects.insert(e.name.clone(), e);
        }
        if let Err(err) = self.catalog.save(&self.dir) {
            for n in names {
                self.catalog.objects.remove(&n);
            }
            return Err(err);
        }
        Ok(())
    }

    /// Removes an entry durably; returns it.
    pub(crate) fn remove_entry(&mut self, name: &str) -> Result<ObjectEntry> {
        let e = self.catalog.objects.remove(name).ok_or_else(|| HostError::NotFound(name.to_string()))?;
        if let Err(err) = self.catalog.save(&self.dir) {
            self.catalog.objects.insert(name.to_string(), e);
            return Err(err);
        }
        Ok(e)
    }

    /// Counters of every device.
    pub fn counters(&self) -> Result<Vec<DeviceCounters>> {
        self.devices.iter().map(|d| d.counters().map_err(HostError::device(d.id()))).collect()
    }

    /// Checks every device (FTL invariants, namespace, a scrub of every page) and the catalog against the
    /// devices' parts.
    pub fn fsck(&self) -> Result<Vec<String>> {
        Ok(self.check()?.problems)
    }

    /// [`Array::fsck`], with what the devices noted besides the problems (the state of their indexes).
    pub fn check(&self) -> Result<FsckSummary> {
        let mut problems = Vec::new();
        let mut notes = Vec::new();
        for d in &self.devices {
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
                let Ok(d) = self.device(*dev) else {
                    problems.push(format!("object {:?}: part {i} on missing device {dev}", e.name));
                    continue;
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
        Ok(FsckSummary { problems, notes })
    }

    /// Checks an array that may not open: reports what prevents it instead of failing.
    pub fn fsck_dir(dir: &Path, transport: &DeviceTransport) -> Result<FsckSummary> {
        if !dir.join("array.json").exists() {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let held = lock(dir)?;
        let opts = OpenOptions { transport: transport.clone(), ..Default::default() };
        match Array::open_locked(dir, held, opts) {
            Ok(a) => {
                let s = a.check()?;
                a.close()?;
                Ok(s)
            }
            Err(e) => {
                let _held = lock(dir)?;
                // Say which part cannot be opened, and check the devices that can.
                let mut problems = vec![e.to_string()];
                let mut notes = Vec::new();
                if let Ok(config) = ArrayConfig::load(dir) {
                    for i in 0..config.devices {
                        match crate::devices::open_one(dir, i, transport) {
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
