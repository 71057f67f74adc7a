//! [`Device`]: one computational storage drive — flash, device memory, an admin path answered at once, a
//! controller that runs storage and transfer commands in order, and a pool of compute units that run
//! programs in FIFO order, and the in-store processor's accelerator, which runs its jobs one at a time in
//! FIFO order ([`accel`], BlueDBM §4). Replies go where the submitter says ([`ReplyTo`]): the typed result into an
//! in-process completion table, or its encoding onto a transport.

mod accel;
mod config;
mod handlers;
mod state;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use insitu_flash::Flash;

use crate::rawflash::FtlMedia;

use crate::completion::{CommandId, Completions, Prepared, Reply, ReplyTo};
use crate::device::config::DeviceConfig;
use crate::device::handlers::{dispatch, Charge};
use crate::device::state::Inner;
use crate::error::{DeviceError, Result};
use crate::fabric::Fabric;
use crate::firmware::Firmware;
use crate::media::Media;
use crate::meters::{DeviceCounters, Meters};
use crate::profile::Profile;
use crate::protocol::{Command, Queue};
use crate::rawflash::RawPartition;
use crate::sys::{lock_dir, thread_cpu_ns};

struct Job {
    id: CommandId,
    cmd: Command,
    reply: ReplyTo,
    /// The job's place in the accelerator's queue (accelerator jobs only).
    ticket: Option<accel::Ticket>,
}

#[derive(Debug)]
struct Queues {
    io: Sender<Job>,
    compute: Sender<Job>,
    accel: Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({} {})", self.id, self.cmd.name())
    }
}

/// One computational storage device, running in this process.
#[derive(Debug)]
pub struct Device {
    inner: Arc<Inner>,
    queues: Mutex<Option<Queues>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    completions: Arc<Completions>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

fn lock(dir: &Path) -> Result<std::fs::File> {
    lock_dir(dir).map_err(|e| DeviceError::io(dir, e))?.ok_or_else(|| DeviceError::InUse(dir.to_path_buf()))
}

impl Device {
    /// Formats a new device in `dir`: device `id` of an array, with `profile`'s hardware.
    pub fn format(dir: &Path, id: u32, profile: Profile, capacity_bytes: u64) -> Result<Device> {
        std::fs::create_dir_all(dir).map_err(|e| DeviceError::io(dir, e))?;
        let lock = lock(dir)?;
        let flash = Flash::format_on(dir, profile.base_geometry(), capacity_bytes, |nand| {
            FtlMedia::for_profile(nand, &profile)
        })?;
        // A raw flash interface gets a raw partition as large as the FTL's (BlueDBM §4: the file system's).
        let raw = match profile.nand.interface {
            Some(_) => Some(RawPartition::create(dir, &profile, capacity_bytes)?),
            None => None,
        };
        DeviceConfig::new(id, profile.clone()).save(dir)?;
        Self::start(Inner::new(id, dir.to_path_buf(), profile, Media::new(flash), raw, lock))
    }

    /// Opens (and recovers) the device in `dir`. Fails with [`DeviceError::InUse`] while another process
    /// serves it.
    pub fn open(dir: &Path) -> Result<Device> {
        Self::open_within(dir, std::time::Duration::ZERO)
    }

    /// Opens the device in `dir` as [`Device::open`] does, waiting up to `patience` while another process
    /// holds it (a server of the previous command still checkpointing, or another host's).
    pub fn open_within(dir: &Path, patience: std::time::Duration) -> Result<Device> {
        let t0 = std::time::Instant::now();
        loop {
            match Self::open_now(dir) {
                Err(DeviceError::InUse(_)) if t0.elapsed() < patience => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => return other,
            }
        }
    }

    fn open_now(dir: &Path) -> Result<Device> {
        let lock = lock(dir)?;
        let config = DeviceConfig::load(dir)?;
        let flash = Flash::open_on(dir, |nand| FtlMedia::for_profile(nand, &config.profile))?;
        let raw = match RawPartition::exists(dir) {
            true => Some(RawPartition::open(dir, &config.profile, flash.capacity_bytes())?),
            false => None,
        };
        Self::start(Inner::new(config.id, dir.to_path_buf(), config.profile, Media::new(flash), raw, lock))
    }

    /// With the user's consent (`fsck --repair`), mends what stops the device in `dir` from opening and
    /// can be mended: a journal damaged inside is cut at the damage (see [`Flash::repair_journal`]).
    /// Says what it did; nothing when there was nothing to do.
    pub fn repair(dir: &Path) -> Result<Vec<String>> {
        let _lock = lock(dir)?;
        Ok(Flash::repair_journal(dir)?.into_iter().collect())
    }

    /// Whether the device in `dir` had its journal cut at its damage by a [`Device::repair`], now or
    /// before (the lost transactions' records are gone: what expected them must expect the device as it is).
    pub fn journal_was_cut(dir: &Path) -> bool {
        insitu_flash::persist::Journal::was_cut(dir)
    }

    fn start(inner: Inner) -> Result<Device> {
        inner.mount_firmware()?;
        let units = inner.profile.device.compute_units as usize;
        let id = inner.id;
        let inner = Arc::new(inner);
        let mut workers = Vec::new();
        let (io_tx, io_rx) = mpsc::channel::<Job>();
        workers.push(spawn_worker(format!("dev{id}-ctl"), inner.clone(), Arc::new(Mutex::new(io_rx))));
        let (cu_tx, cu_rx) = mpsc::channel::<Job>();
        let cu_rx = Arc::new(Mutex::new(cu_rx));
        for u in 0..units {
            workers.push(spawn_worker(format!("dev{id}-cu{u}"), inner.clone(), cu_rx.clone()));
        }
        let (isp_tx, isp_rx) = mpsc::channel::<Job>();
        workers.push(spawn_worker(format!("dev{id}-isp"), inner.clone(), Arc::new(Mutex::new(isp_rx))));
        Ok(Device {
            inner,
            queues: Mutex::new(Some(Queues { io: io_tx, compute: cu_tx, accel: isp_tx })),
            workers: Mutex::new(workers),
            completions: Arc::new(Completions::default()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        })
    }

    pub fn id(&self) -> u32 {
        self.inner.id
    }

    pub fn profile(&self) -> &Profile {
        &self.inner.profile
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Installs a resident firmware extension on the I/O path (see [`crate::firmware`]).
    pub fn install_firmware(&self, fw: Arc<dyn Firmware>) {
        self.inner.io_path.install(fw);
    }

    /// Connects the device to the fabric its [`crate::protocol::CopyToPeer`] commands use.
    pub fn set_fabric(&self, fabric: Arc<dyn Fabric>) {
        self.inner.set_fabric(fabric);
    }

    /// Queues command `id`, whose reply goes to `reply`. Admin commands are answered at once, on the
    /// calling thread (a counter snapshot is not counted as a command: reading the meters must not move
    /// them).
    pub fn submit_to(&self, id: CommandId, cmd: Command, reply: ReplyTo) -> Result<()> {
        let queue = cmd.queue();
        let queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let q = queues.as_ref().ok_or(DeviceError::ShutDown(self.inner.id))?;
        if queue == Queue::Admin {
            drop(queues);
            let counted = !matches!(cmd, Command::Statistics(_));
            let (_, r) = dispatch(&self.inner, cmd);
            if counted {
                Meters::add(&self.inner.meters.commands, 1);
            }
            reply.deliver(id, r);
            return Ok(());
        }
        let (tx, ticket) = match queue {
            Queue::Compute => (&q.compute, None),
            Queue::Accel => (&q.accel, Some(self.inner.accel.enqueue())),
            _ => (&q.io, None),
        };
        tx.send(Job { id, cmd, reply, ticket }).map_err(|_| DeviceError::ShutDown(self.inner.id))
    }

    /// Queues a command whose reply lands in this device's own completion table; returns its id.
    pub fn submit(&self, cmd: Command) -> Result<CommandId> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.submit_to(id, cmd, ReplyTo::Table(self.completions.clone()))?;
        Ok(id)
    }

    /// The reply of `id` if it has arrived (consumed), else `None`.
    pub fn poll(&self, id: CommandId) -> Option<Reply> {
        self.completions.poll(id)
    }

    /// Waits for the reply of `id`.
    pub fn wait(&self, id: CommandId) -> Reply {
        self.completions.wait(id)
    }

    /// Nobody will take the reply of `id`.
    pub fn abandon(&self, id: CommandId) {
        self.completions.abandon(id);
    }

    /// A snapshot of the device's counters.
    pub fn counters(&self) -> DeviceCounters {
        self.inner.counters()
    }

    /// Finishes every queued command, stops the workers, saves the firmware's indexes and checkpoints the
    /// flash (if anything changed) so the next open is quick, then lets go of the device directory. Later submissions fail with
    /// [`DeviceError::ShutDown`]. Closing again (or from another thread at the same time) waits for the
    /// first close and does nothing more.
    pub fn close(&self) -> Result<()> {
        let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.stop(&mut workers);
        let saved = self.inner.selfsort.flush(&self.inner.firmware_context());
        let r = self.inner.media.write().checkpoint_at_close();
        // The raw partition's programmed pages, and its erase counts when blocks were erased since they
        // were saved (a file system's cleaning erases without a sync after).
        let raw = self
            .inner
            .raw
            .as_ref()
            .map_or(Ok(()), |p| p.lock().unwrap_or_else(|e| e.into_inner()).sync_if_changed());
        self.closed.store(true, Ordering::Release);
        self.inner.release_lock();
        saved?;
        raw?;
        Ok(r?)
    }

    /// Stops taking commands and waits for the workers to finish the queued ones.
    fn stop(&self, workers: &mut Vec<JoinHandle<()>>) {
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).take();
        for w in workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let mut workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|p| p.into_inner()));
        self.stop(&mut workers);
    }
}

fn spawn_worker(name: String, inner: Arc<Inner>, rx: Arc<Mutex<Receiver<Job>>>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name)
        .spawn(move || loop {
            let job = { rx.lock().unwrap_or_else(|p| p.into_inner()).recv() };
            let Ok(Job { id, cmd, reply, ticket }) = job else { return };
            let cpu0 = thread_cpu_ns();
            if let Some(t) = ticket {
                inner.accel.begin(t);
            }
            // A handler that panics (a bug) fails its command with an error naming it, and the device
            // goes on: its state is journaled and its locks are taken over, as after a crash.
            let name = cmd.name();
            let (charge, r) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(&inner, cmd)))
                    .unwrap_or_else(|panic| {
                        let why = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "no message".into());
                        let e = DeviceError::ProgramFailed {
                            program: name.into(),
                            detail: format!("the device's handler panicked ({why}); this is a bug in insitu"),
                        };
                        (Charge { class: "transfer", io_ns: 0, helper_ns: 0 }, Prepared::failed(e))
                    });
            if ticket.is_some() {
                inner.accel.end();
            }
            let cpu_ns = thread_cpu_ns().saturating_sub(cpu0) + charge.helper_ns;
            // A program's own flash I/O (page reads and checks, programming) is data movement, priced by
            // bandwidth like every transfer; only the rest is its kernel's compute.
            let io = charge.io_ns.min(cpu_ns);
            inner.meters.charge_cpu(charge.class, cpu_ns - io);
            if io > 0 {
                inner.meters.charge_cpu("transfer", io);
            }
            Meters::add(&inner.meters.commands, 1);
            reply.deliver(id, r);
        })
        .expect("spawning a device worker thread")
}
