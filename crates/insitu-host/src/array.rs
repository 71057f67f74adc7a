//! [`Array`]: N computational storage devices in a data directory, opened together under one lock.
//!
//! Layout of the data directory:
//! ```text
//! array.json      configuration (device count, capacity, stripe unit, the full profile)
//! catalog.json    objects of the array (the commit point of multi-device writes)
//! LOCK            held (flock) by the one process using the array
//! dev0/ dev1/ ... one device each: superblock, checkpoint, journal, nand.img, nand.oob
//! ```

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use insitu_device::{Command, Device, DeviceCounters, MemHandle, Profile, Response};
use insitu_flash::FsckReport;
use serde::Serialize;

use crate::catalog::{ArrayConfig, Catalog, ObjectEntry, ARRAY_FORMAT};
use crate::error::{HostError, Result};
use crate::fault::FaultPlan;

/// Default stripe unit: large extents, so each device streams long runs (BlueDBM-style global space).
pub const DEFAULT_STRIPE_UNIT: u64 = 4 << 20;

/// Checks a name users give an object or table: the flash rules, and no `#` (it separates a table's name
/// from the names of its parts on the devices).
pub fn validate_user_name(name: &str) -> Result<()> {
    insitu_flash::validate_name(name)?;
    if name.contains('#') {
        return Err(HostError::InvalidArgument(format!(
            "invalid name {name:?}: '#' is reserved for table parts"
        )));
    }
    Ok(())
}

/// A buffer in one device's memory, freed when dropped (also when an operator fails half-way).
#[derive(Debug)]
pub struct DeviceBuffer<'a> {
    pub device: &'a Device,
    pub handle: MemHandle,
    pub bytes: u64,
}

impl<'a> DeviceBuffer<'a> {
    pub fn alloc(array: &'a Array, device: u32, bytes: u64) -> Result<DeviceBuffer<'a>> {
        let d = array.device(device)?;
        match d.call(Command::AllocMemory { bytes }).map_err(HostError::device(device))? {
            Response::Handle(handle) => Ok(DeviceBuffer { device: d, handle, bytes }),
            _ => unreachable!("AllocMemory answers with a handle"),
        }
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.device.call(Command::FreeMemory { handle: self.handle });
    }
}

/// What opening the array cleaned up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OpenReport {
    /// Device parts of writes that never reached the catalog, removed.
    pub removed_orphans: Vec<String>,
    /// Object creations rolled back by device recovery.
    pub rolled_back: Vec<String>,
    pub torn_journal_bytes: u64,
}

/// An array of devices.
#[derive(Debug)]
pub struct Array {
    dir: PathBuf,
    config: ArrayConfig,
    devices: Vec<Device>,
    catalog: Catalog,
    open_report: OpenReport,
    pub(crate) faults: FaultPlan,
    _lock: File,
}

fn lock(dir: &Path) -> Result<File> {
    let path = dir.join("LOCK");
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| HostError::io(&path, e))?;
    if !insitu_flash::try_lock_exclusive(&f).map_err(|e| HostError::io(&path, e))? {
        return Err(HostError::Locked(dir.to_path_buf()));
    }
    Ok(f)
}

fn device_dir(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("dev{i}"))
}

impl Array {
    /// Creates an array of `devices` devices of `profile` in `dir`.
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
        std::fs::create_dir_all(dir).map_err(|e| HostError::io(dir, e))?;
        let lock = lock(dir)?;
        let capacity_bytes = capacity_bytes.unwrap_or(profile.default_capacity_bytes);
        let config = ArrayConfig { format: ARRAY_FORMAT, devices, capacity_bytes, stripe_unit, profile };
        let mut opened = Vec::new();
        for i in 0..devices {
            let d = Device::format(&device_dir(dir, i), i, config.profile.clone(), capacity_bytes)
                .map_err(HostError::device(i))?;
            opened.push(d);
        }
        let catalog = Catalog::default();
        catalog.save(dir)?;
        // The configuration is written last: an array without it is not an array (init can be re-run).
        config.save(dir)?;
        Ok(Array {
            dir: dir.to_path_buf(),
            config,
            devices: opened,
            catalog,
            open_report: OpenReport::default(),
            faults: FaultPlan::none(),
            _lock: lock,
        })
    }

    /// Opens the array in `dir`: takes the lock, opens (and recovers) every device in parallel, and removes
    /// device parts of writes that never committed.
    pub fn open(dir: &Path, faults: FaultPlan) -> Result<Array> {
        if !dir.join("array.json").exists() {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let lock = lock(dir)?;
        Self::open_locked(dir, lock, faults)
    }

    fn open_locked(dir: &Path, lock: File, faults: FaultPlan) -> Result<Array> {
        let config = ArrayConfig::load(dir)?;
        let catalog = Catalog::load(dir)?;
        let results: Vec<Result<Device>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..config.devices)
                .map(|i| {
                    let profile = config.profile.clone();
                    s.spawn(move || {
                        Device::open(&device_dir(dir, i), i, profile).map_err(HostError::device(i))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("device open thread panicked")).collect()
        });
        let devices = results.into_iter().collect::<Result<Vec<_>>>()?;
        let mut array = Array {
            dir: dir.to_path_buf(),
            config,
            devices,
            catalog,
            open_report: OpenReport::default(),
            faults,
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
            let Response::Objects(objs) = d.call(Command::List).map_err(HostError::device(d.id()))? else {
                continue;
            };
            for o in objs {
                if !known.contains(&(d.id(), o.name.clone())) {
                    d.call(Command::Delete { name: o.name.clone() }).map_err(HostError::device(d.id()))?;
                    self.open_report.removed_orphans.push(format!("dev{}:{}", d.id(), o.name));
                }
            }
        }
        Ok(())
    }

    /// Stops every device after a checkpoint.
    pub fn close(self) -> Result<()> {
        for d in self.devices {
            let id = d.id();
            d.close().map_err(HostError::device(id))?;
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &ArrayConfig {
        &self.config
    }

    pub fn profile(&self) -> &Profile {
        &self.config.profile
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    pub fn device(&self, id: u32) -> Result<&Device> {
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

    /// The entry of a plain object (not a table).
    pub fn blob_entry(&self, name: &str) -> Result<&ObjectEntry> {
        let e = self.entry(name)?;
        if e.table.is_some() {
            return Err(HostError::InvalidArgument(format!(
                "{name:?} is a table: use get-table, sort or rm"
            )));
        }
        Ok(e)
    }

    /// The entry of a table.
    pub fn table_entry(&self, name: &str) -> Result<&ObjectEntry> {
        let e = self.entry(name)?;
        if e.table.is_none() {
            return Err(HostError::InvalidArgument(format!("{name:?} is a plain object, not a table")));
        }
        Ok(e)
    }

    /// Adds an entry and makes the catalog durable (the commit point of a write).
    pub(crate) fn commit_entry(&mut self, entry: ObjectEntry) -> Result<()> {
        self.catalog.objects.insert(entry.name.clone(), entry);
        self.catalog.save(&self.dir)
    }

    /// Adds several entries with one durable catalog write (bulk loads such as an index's lists).
    pub(crate) fn commit_entries(&mut self, entries: Vec<ObjectEntry>) -> Result<()> {
        for e in entries {
            self.catalog.objects.insert(e.name.clone(), e);
        }
        self.catalog.save(&self.dir)
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
    pub fn counters(&self) -> Vec<DeviceCounters> {
        self.devices.iter().map(|d| d.counters()).collect()
    }

    /// Checks every device (FTL invariants, namespace, a scrub of every page) and the catalog against the
    /// devices' parts.
    pub fn fsck(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        for d in &self.devices {
            match d.call(Command::Fsck) {
                Ok(Response::Fsck(FsckReport { problems: p, .. })) => {
                    problems.extend(p.into_iter().map(|x| format!("dev{}: {x}", d.id())));
                }
                Ok(_) => {}
                Err(e) => problems.push(format!("dev{}: {e}", d.id())),
            }
        }
        for e in self.catalog.objects.values() {
            for (i, dev) in e.devices.iter().enumerate() {
                let Ok(d) = self.device(*dev) else {
                    problems.push(format!("object {:?}: part {i} on missing device {dev}", e.name));
                    continue;
                };
                if e.table.is_some() || e.shuffle.is_some() {
                    for name in e.device_objects(i) {
                        if let Err(err) = d.call(Command::Stat { name: name.clone() }) {
                            problems.push(format!("{} {:?}: part {i} on dev{dev}: {err}", e.kind, e.name));
                        }
                    }
                    continue;
                }
                match d.call(Command::Stat { name: e.name.clone() }) {
                    Ok(Response::Object(o)) => {
                        let want = e.layout(i).part_size();
                        if o.size != want {
                            problems.push(format!(
                                "object {:?}: part {i} on dev{dev} holds {} bytes, {want} expected",
                                e.name, o.size
                            ));
                        }
                    }
                    Ok(_) => {}
                    Err(err) => problems.push(format!("object {:?}: part {i} on dev{dev}: {err}", e.name)),
                }
            }
        }
        Ok(problems)
    }

    /// Checks an array that may not open: reports what prevents it instead of failing.
    pub fn fsck_dir(dir: &Path) -> Result<Vec<String>> {
        if !dir.join("array.json").exists() {
            return Err(HostError::NoArray(dir.to_path_buf()));
        }
        let held = lock(dir)?;
        match Array::open_locked(dir, held, FaultPlan::none()) {
            Ok(a) => {
                let p = a.fsck()?;
                a.close()?;
                Ok(p)
            }
            Err(e) => {
                let _held = lock(dir)?;
                // Say which part cannot be opened, and check the devices that can.
                let mut problems = vec![e.to_string()];
                if let Ok(config) = ArrayConfig::load(dir) {
                    for i in 0..config.devices {
                        match Device::open(&device_dir(dir, i), i, config.profile.clone()) {
                            Ok(d) => {
                                if let Ok(Response::Fsck(r)) = d.call(Command::Fsck) {
                                    problems.extend(r.problems.into_iter().map(|x| format!("dev{i}: {x}")));
                                }
                            }
                            Err(err) => {
                                let s = format!("dev{i}: {err}");
                                if !problems.iter().any(|p| p.contains(&err.to_string())) {
                                    problems.push(s);
                                }
                            }
                        }
                    }
                }
                Ok(problems)
            }
        }
    }
}
