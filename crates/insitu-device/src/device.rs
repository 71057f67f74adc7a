//! [`Device`]: one computational storage drive — flash, device memory, a controller that runs storage
//! and transfer commands in order, and a pool of compute units that run programs in FIFO order, with
//! completion events the host polls or waits for.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use insitu_flash::Flash;

use crate::command::{Command, CommandId, Completion, Properties, Response};
use crate::cputime::thread_cpu_ns;
use crate::error::{DeviceError, Result};
use crate::memory::{check_range, DeviceMemory};
use crate::meters::{DeviceCounters, Meters};
use crate::profile::Profile;
use crate::program::{ProgramContext, ProgramRegistry};

/// The shared state of a device, reachable from its worker threads and, for peer copies, from peers.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) id: u32,
    pub(crate) profile: Profile,
    flash: RwLock<Flash>,
    pub(crate) memory: DeviceMemory,
    pub(crate) meters: Meters,
    programs: ProgramRegistry,
    completions: Mutex<HashMap<CommandId, Completion>>,
    completed: Condvar,
}

impl Inner {
    pub(crate) fn flash_read(&self) -> RwLockReadGuard<'_, Flash> {
        self.flash.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn flash_write(&self) -> RwLockWriteGuard<'_, Flash> {
        self.flash.write().unwrap_or_else(|p| p.into_inner())
    }

    fn counters(&self) -> DeviceCounters {
        let mut c = self.meters.snapshot();
        let flash = self.flash_read();
        let ps = flash.page_size() as u64;
        let n = flash.ftl().nand().stats();
        c.flash_read_pages = n.pages_read;
        c.flash_read_bytes = n.pages_read * ps;
        c.flash_program_pages = n.pages_programmed;
        c.flash_program_bytes = n.pages_programmed * ps;
        c.flash_erase_blocks = n.blocks_erased;
        c
    }
}

/// A handle to another device, for device-to-device copies.
#[derive(Debug, Clone)]
pub struct Peer(Arc<Inner>);

type Job = (CommandId, Command);

/// One computational storage device.
#[derive(Debug)]
pub struct Device {
    inner: Arc<Inner>,
    controller: Option<Sender<Job>>,
    compute: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    next_id: AtomicU64,
}

impl Device {
    /// Formats a new device in `dir`.
    pub fn format(dir: &Path, id: u32, profile: Profile, capacity_bytes: u64) -> Result<Device> {
        let flash = Flash::format(dir, profile.base_geometry(), capacity_bytes)?;
        Ok(Self::start(id, profile, flash))
    }

    /// Opens (and recovers) the device in `dir`.
    pub fn open(dir: &Path, id: u32, profile: Profile) -> Result<Device> {
        let flash = Flash::open(dir)?;
        Ok(Self::start(id, profile, flash))
    }

    fn start(id: u32, profile: Profile, flash: Flash) -> Device {
        let units = profile.device.compute_units as usize;
        let inner = Arc::new(Inner {
            id,
            memory: DeviceMemory::new(profile.device.memory_bytes),
            profile,
            flash: RwLock::new(flash),
            meters: Meters::default(),
            programs: ProgramRegistry::builtin(),
            completions: Mutex::new(HashMap::new()),
            completed: Condvar::new(),
        });
        let mut workers = Vec::new();
        let (ctl_tx, ctl_rx) = mpsc::channel::<Job>();
        let ctl_rx = Arc::new(Mutex::new(ctl_rx));
        workers.push(spawn_worker(format!("dev{id}-ctl"), inner.clone(), ctl_rx));
        let (cu_tx, cu_rx) = mpsc::channel::<Job>();
        let cu_rx = Arc::new(Mutex::new(cu_rx));
        for u in 0..units {
            workers.push(spawn_worker(format!("dev{id}-cu{u}"), inner.clone(), cu_rx.clone()));
        }
        Device { inner, controller: Some(ctl_tx), compute: Some(cu_tx), workers, next_id: AtomicU64::new(1) }
    }

    pub fn id(&self) -> u32 {
        self.inner.id
    }

    pub fn profile(&self) -> &Profile {
        &self.inner.profile
    }

    /// A handle other devices use to copy into this one.
    pub fn peer(&self) -> Peer {
        Peer(self.inner.clone())
    }

    /// Queues a command; returns its id at once.
    pub fn submit(&self, cmd: Command) -> Result<CommandId> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let queue = if cmd.is_compute() { &self.compute } else { &self.controller };
        queue
            .as_ref()
            .ok_or(DeviceError::ShutDown(self.inner.id))?
            .send((id, cmd))
            .map_err(|_| DeviceError::ShutDown(self.inner.id))?;
        Ok(id)
    }

    /// Queues several commands in order.
    pub fn submit_batch(&self, cmds: Vec<Command>) -> Result<Vec<CommandId>> {
        cmds.into_iter().map(|c| self.submit(c)).collect()
    }

    /// The completion of `id` if it has finished (consumed), else `None`.
    pub fn poll(&self, id: CommandId) -> Option<Completion> {
        self.inner.completions.lock().unwrap_or_else(|p| p.into_inner()).remove(&id)
    }

    /// Waits for the completion of `id`.
    pub fn wait(&self, id: CommandId) -> Completion {
        let mut done = self.inner.completions.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(c) = done.remove(&id) {
                return c;
            }
            done = self.inner.completed.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Submits a command and waits for its result.
    pub fn call(&self, cmd: Command) -> Result<Response> {
        let id = self.submit(cmd)?;
        self.wait(id).result
    }

    /// A snapshot of the device's counters.
    pub fn counters(&self) -> DeviceCounters {
        self.inner.counters()
    }

    /// Stops the workers and checkpoints the flash (if anything changed) so the next open is quick.
    pub fn close(mut self) -> Result<()> {
        self.stop();
        self.inner.flash_write().checkpoint_if_dirty()?;
        Ok(())
    }

    fn stop(&mut self) {
        self.controller = None;
        self.compute = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_worker(name: String, inner: Arc<Inner>, rx: Arc<Mutex<Receiver<Job>>>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || loop {
            let job = { rx.lock().unwrap_or_else(|p| p.into_inner()).recv() };
            let Ok((id, cmd)) = job else { return };
            let class = command_class(&inner, &cmd);
            let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
            let io_ns = Cell::new(0u64);
            let result = execute(&inner, cmd, &io_ns);
            let (cpu_ns, wall_ns) = (thread_cpu_ns().saturating_sub(cpu0), t0.elapsed().as_nanos() as u64);
            // A program's own flash I/O (page reads and checks, programming) is data movement, priced by
            // bandwidth like every transfer; only the rest is its kernel's compute.
            let io = io_ns.get().min(cpu_ns);
            inner.meters.charge_cpu(&class, cpu_ns - io);
            if io > 0 {
                inner.meters.charge_cpu("transfer", io);
            }
            Meters::add(&inner.meters.commands, 1);
            let mut done = inner.completions.lock().unwrap_or_else(|p| p.into_inner());
            done.insert(id, Completion { id, result, cpu_ns, wall_ns });
            inner.completed.notify_all();
        })
        .expect("spawning a device worker thread")
}

fn command_class(inner: &Inner, cmd: &Command) -> String {
    match cmd {
        Command::Execute { program, .. } => inner
            .programs
            .get(program)
            .map(|p| p.kernel_class().to_string())
            .unwrap_or_else(|_| "transfer".into()),
        _ => "transfer".into(),
    }
}

fn execute(inner: &Inner, cmd: Command, io_ns: &Cell<u64>) -> Result<Response> {
    let m = &inner.meters;
    match cmd {
        Command::Identify => Ok(Response::Properties(Box::new(Properties {
            device_id: inner.id,
            profile: inner.profile.name.clone(),
            memory_bytes: inner.memory.capacity(),
            memory_available: inner.memory.available(),
            compute_units: inner.profile.device.compute_units,
            programs: inner.programs.list(),
            flash: inner.flash_read().stats(),
        }))),
        Command::Statistics => Ok(Response::Statistics(Box::new(inner.counters()))),
        Command::AllocMemory { bytes } => Ok(Response::Handle(inner.memory.alloc(bytes)?)),
        Command::FreeMemory { handle } => inner.memory.free(handle).map(|_| Response::Done),
        Command::LoadObject { name, offset, len, dst, dst_offset } => {
            let buf = inner.memory.buffer(dst)?;
            let mut data = buf.lock();
            let r = check_range(dst, data.len(), dst_offset, len)?;
            inner.flash_read().read(&name, offset, &mut data[r])?;
            Meters::add(&m.flash_to_device_mem, len);
            Ok(Response::Done)
        }
        Command::StoreToObject { src, offset, len, txn } => {
            let buf = inner.memory.buffer(src)?;
            let data = buf.lock();
            let r = check_range(src, data.len(), offset, len)?;
            inner.flash_write().append(txn, &data[r])?;
            Meters::add(&m.device_mem_to_flash, len);
            Ok(Response::Done)
        }
        Command::WriteMemory { dst, offset, data } => {
            let buf = inner.memory.buffer(dst)?;
            let mut mem = buf.lock();
            let r = check_range(dst, mem.len(), offset, data.len() as u64)?;
            mem[r].copy_from_slice(&data);
            Meters::add(&m.host_to_device, data.len() as u64);
            Ok(Response::Done)
        }
        Command::ReadMemory { src, offset, len } => {
            let buf = inner.memory.buffer(src)?;
            let mem = buf.lock();
            let r = check_range(src, mem.len(), offset, len)?;
            Meters::add(&m.device_to_host, len);
            Ok(Response::Data(mem[r].to_vec()))
        }
        Command::CopyToPeer { src, offset, len, peer, dst, dst_offset } => {
            let from = inner.memory.buffer(src)?;
            let to = peer.0.memory.buffer(dst)?;
            let data = from.lock().clone();
            let r = check_range(src, data.len(), offset, len)?;
            let mut target = to.lock();
            let w = check_range(dst, target.len(), dst_offset, len)?;
            target[w].copy_from_slice(&data[r]);
            Meters::add(&m.device_to_device_out, len);
            Meters::add(&peer.0.meters.device_to_device_in, len);
            Ok(Response::Done)
        }
        Command::Execute { program, args, buffers } => {
            let p = inner.programs.get(&program)?;
            let ctx = ProgramContext {
                inner,
                buffers: &buffers,
                program: p.id(),
                bytes_in: 0.into(),
                io_ns: 0.into(),
            };
            let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
            let out = p.run(&ctx, &args);
            let io = ctx.io_ns.get();
            io_ns.set(io);
            let out = out?;
            inner.meters.record_program(
                p.id(),
                p.kernel_class(),
                thread_cpu_ns().saturating_sub(cpu0).saturating_sub(io),
                t0.elapsed().as_nanos() as u64,
                ctx.bytes_in.get(),
            );
            Ok(Response::Output(out))
        }
        Command::CreateObject { name, kind, attrs, expected_size } => {
            Ok(Response::Txn(inner.flash_write().create_object(&name, &kind, attrs, expected_size)?))
        }
        Command::Append { txn, data } => {
            Meters::add(&m.host_to_device, data.len() as u64);
            inner.flash_write().append(txn, &data)?;
            Ok(Response::Done)
        }
        Command::Commit { txn } => Ok(Response::Object(inner.flash_write().commit(txn)?)),
        Command::Abort { txn } => inner.flash_write().abort(txn).map(|_| Response::Done).map_err(Into::into),
        Command::Delete { name } => {
            inner.flash_write().delete(&name).map(|_| Response::Done).map_err(Into::into)
        }
        Command::List => Ok(Response::Objects(inner.flash_read().objects().cloned().collect())),
        Command::Stat { name } => Ok(Response::Object(inner.flash_read().stat(&name)?.clone())),
        Command::PhysicalPages { name } => Ok(Response::Pages(inner.flash_read().physical_pages(&name)?)),
        Command::Read { name, offset, len, buf } => {
            // Conventional read: flash -> controller DRAM -> host link.
            let _staging = inner.memory.reserve(len.min(inner.memory.capacity()))?;
            let mut data = buf;
            data.resize(len as usize, 0);
            inner.flash_read().read(&name, offset, &mut data)?;
            Meters::add(&m.flash_to_device_mem, len);
            Meters::add(&m.device_to_host, len);
            Ok(Response::Data(data))
        }
        Command::ReadLba { lba, blocks } => {
            let flash = inner.flash_read();
            let len = blocks * flash.page_size() as u64;
            let mut data = vec![0u8; len as usize];
            flash.lba_read(lba, &mut data)?;
            Meters::add(&m.flash_to_device_mem, len);
            Meters::add(&m.device_to_host, len);
            Ok(Response::Data(data))
        }
        Command::WriteLba { lba, data } => {
            Meters::add(&m.host_to_device, data.len() as u64);
            inner.flash_write().lba_write(lba, &data)?;
            Ok(Response::Done)
        }
        Command::TrimLba { lba, blocks } => {
            inner.flash_write().lba_trim(lba, blocks).map(|_| Response::Done).map_err(Into::into)
        }
        Command::Flush => inner.flash_write().sync().map(|_| Response::Done).map_err(Into::into),
        Command::Fsck => Ok(Response::Fsck(inner.flash_read().fsck())),
    }
}
