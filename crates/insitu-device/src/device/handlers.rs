//! What the device does for each command. Host reads and writes pass the resident firmware extensions
//! (the I/O path) before and after the FTL; programs run in a [`ProgramContext`].

use std::time::Instant;

use crate::completion::Prepared;
use crate::device::state::Inner;
use crate::error::{DeviceError, Result};
use crate::firmware::{Decision, Io};
use crate::memory::check_range;
use crate::meters::Meters;
use crate::program::ProgramContext;
use crate::programs;
use crate::protocol::{
    Abort, AllocMemory, Append, Command, Commit, ConfigureIndex, CopyToPeer, CreateObject, Delete, DropIndex,
    Flush, FlushIndexes, FreeMemory, Fsck, GenerateIndex, GenerateProgress, Identify, IndexInfo, IndexStatus,
    List, LoadObject, PeerWrite, PhysicalPages, ProgramInfo, Properties, QueryIndex, QueryRows, Read,
    ReadLba, ReadMemory, ReadPages, Request, ResizeIndex, SelfSortStatus, SetArrayGeneration, SetIndexFlags,
    Stat, Statistics, StoreToObject, TrimLba, WriteLba, WriteMemory, CATALOG,
};
use crate::protocol::{
    GlobalRead, GlobalReadReply, PeerPages, PeerRawRead, RawDiscard, RawErase, RawIdentify, RawRead, RawSync,
    RawWrite,
};
use crate::protocol::{IspJob, IspNearest, IspNearestReply, IspSearch, IspSearchReply};
use crate::rawflash::RawInfo;
use crate::sys::thread_cpu_ns;

/// How a command's device CPU time is to be charged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Charge {
    /// The kernel class of the work (`transfer` for data movement).
    pub class: &'static str,
    /// CPU time of flash I/O done for a program, charged as `transfer`.
    pub io_ns: u64,
    /// CPU time of the program's work on the emulator's helper threads, beside the worker's own.
    pub helper_ns: u64,
}

/// A command the device carries out.
trait Handle: Request + Sized {
    fn handle(self, dev: &Inner) -> Result<Self::Response>;
}

/// Carries out `cmd`; returns how to charge it and its result (the caller charges the work before
/// delivering the result, so a host that sees the reply sees the work in the counters too).
pub(crate) fn dispatch(dev: &Inner, cmd: Command) -> (Charge, Prepared) {
    const TRANSFER: Charge = Charge { class: "transfer", io_ns: 0, helper_ns: 0 };
    macro_rules! handle {
        ($($name:ident),* $(,)?) => {
            match cmd {
                $(Command::$name(r) => (TRANSFER, Prepared::of::<$name>(r.handle(dev))),)*
                Command::Execute(call) => execute(dev, call),
                // The in-store processor's jobs: their device CPU is the engines' work.
                Command::IspSearch(r) => (Charge { class: "search", io_ns: 0, helper_ns: 0 }, Prepared::of::<IspSearch>(r.handle(dev))),
                Command::IspNearest(r) => (Charge { class: "hamming", io_ns: 0, helper_ns: 0 }, Prepared::of::<IspNearest>(r.handle(dev))),
            }
        };
    }
    handle! {
        Identify, Statistics, Fsck, SetArrayGeneration,
        AllocMemory, FreeMemory, LoadObject, StoreToObject, WriteMemory, ReadMemory, CopyToPeer, PeerWrite,
        CreateObject, Append, Commit, Abort, Delete, List, Stat, PhysicalPages, Read, ReadLba, WriteLba,
        TrimLba, Flush, ReadPages,
        ConfigureIndex, ResizeIndex, SetIndexFlags, GenerateIndex, DropIndex, FlushIndexes, IndexStatus,
        QueryIndex, RawIdentify, RawWrite, RawRead, RawErase, RawDiscard, RawSync, GlobalRead, PeerRawRead,
    }
}

fn execute(dev: &Inner, call: crate::protocol::ProgramCall) -> (Charge, Prepared) {
    let (program, class) = (call.id(), call.kernel_class());
    let ctx = ProgramContext::new(
        &dev.media,
        &dev.memory,
        &dev.meters,
        program,
        dev.profile.device.compute_units,
        dev.profile.kernels.shuffle_scratchpad_bytes,
    );
    let (cpu0, t0) = (thread_cpu_ns(), Instant::now());
    let r = programs::run(&ctx, call, |ok| {
        if ok {
            let own = thread_cpu_ns().saturating_sub(cpu0) + ctx.helper_ns.get();
            let cpu = own.saturating_sub(ctx.io_ns.get());
            dev.meters.record_program(
                program,
                class,
                ctx.pieces.get(),
                cpu,
                t0.elapsed().as_nanos() as u64,
                ctx.bytes_in.get(),
            );
        }
    });
    (Charge { class, io_ns: ctx.io_ns.get(), helper_ns: ctx.helper_ns.get() }, r)
}

/// Runs a host I/O request through the firmware extensions around `ftl`: an extension may take it over
/// (`Done`), else the FTL carries it out and the extensions see it afterwards.
fn io_path<T>(
    dev: &Inner,
    io: Io<'_>,
    ftl: impl FnOnce() -> Result<T>,
    taken: impl FnOnce(Vec<u8>) -> Result<T>,
) -> Result<T> {
    if dev.io_path.is_empty() {
        return ftl();
    }
    let fw = dev.firmware_context();
    match dev.io_path.before(&fw, &io)? {
        Decision::Done(data) => taken(data),
        Decision::Pass => {
            let r = ftl()?;
            dev.io_path.after(&fw, &io)?;
            Ok(r)
        }
    }
}

/// A host read of `len` bytes through the I/O path (an extension that serves it must answer exactly `len`
/// bytes), sent over the host link.
fn host_read(dev: &Inner, io: Io<'_>, len: u64, ftl: impl FnOnce() -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    let data = io_path(dev, io, ftl, |data| {
        if data.len() as u64 != len {
            return Err(crate::error::DeviceError::Protocol(format!(
                "a firmware extension answered a read of {len} bytes with {}",
                data.len()
            )));
        }
        Ok(data)
    })?;
    Meters::add(&dev.meters.device_to_host, len);
    Ok(data)
}

impl Handle for Identify {
    fn handle(self, dev: &Inner) -> Result<Properties> {
        // One read guard for every figure (taken after `host_lbas`, which takes its own): a second read
        // of the lock while a writer waits would deadlock.
        let lba_blocks = dev.host_lbas();
        let flash = dev.media.read();
        Ok(Properties {
            device_id: dev.id,
            profile: dev.profile.name.clone(),
            memory_bytes: dev.memory.capacity(),
            memory_available: dev.memory.available(),
            compute_units: dev.profile.device.compute_units,
            programs: CATALOG
                .iter()
                .map(|(id, class, what)| ProgramInfo {
                    id: id.to_string(),
                    kernel_class: class.to_string(),
                    description: what.to_string(),
                })
                .collect(),
            firmware: dev.io_path.names(),
            lba_blocks,
            lba_block_size: flash.page_size(),
            flash: flash.stats(),
            next_txn: flash.next_txn(),
            array_generation: flash.array_generation(),
            ftl_raw: flash.ftl().nand().controller_stats(),
        })
    }
}

impl Handle for SetArrayGeneration {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.media.write().set_array_generation(self.generation)?)
    }
}

impl Handle for Statistics {
    fn handle(self, dev: &Inner) -> Result<crate::meters::DeviceCounters> {
        Ok(dev.counters())
    }
}

impl Handle for Fsck {
    fn handle(self, dev: &Inner) -> Result<insitu_flash::FsckReport> {
        let mut report = dev.media.read().fsck();
        // The raw partition's pages are checked by the file system that owns them (the host reads them
        // back): every one is checked again, not taken as checked by an earlier read.
        match dev.raw() {
            Ok(raw) => raw.forget_verified(),
            Err(e @ DeviceError::RawFlashMissing(_)) => report.problems.push(e.to_string()),
            Err(_) => {}
        }
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.fsck(&fw, &mut report))?;
        // Mended at an open (see `DeviceConfig::load`): said until the damaged copy is looked at.
        if dev.dir.join("device.json.damaged").exists() {
            report.notes.push(
                "device.json was damaged and mended from its second copy (device.b.json); the damaged file \
                 is kept as device.json.damaged (remove it once looked at)"
                    .into(),
            );
        }
        Ok(report)
    }
}

impl Handle for AllocMemory {
    fn handle(self, dev: &Inner) -> Result<u64> {
        dev.memory.alloc(self.bytes)
    }
}

impl Handle for FreeMemory {
    fn handle(self, dev: &Inner) -> Result<()> {
        dev.memory.free(self.handle)
    }
}

impl Handle for LoadObject {
    fn handle(self, dev: &Inner) -> Result<()> {
        let buf = dev.memory.buffer(self.dst)?;
        let mut data = buf.lock();
        let r = check_range(self.dst, data.len(), self.dst_offset, self.len)?;
        dev.media.read().read(&self.name, self.offset, &mut data[r])?;
        Meters::add(&dev.meters.flash_to_device_mem, self.len);
        Ok(())
    }
}

impl Handle for StoreToObject {
    fn handle(self, dev: &Inner) -> Result<()> {
        let buf = dev.memory.buffer(self.src)?;
        let data = buf.read();
        let r = check_range(self.src, data.len(), self.offset, self.len)?;
        dev.media.write().append(self.txn, &data[r])?;
        Meters::add(&dev.meters.device_mem_to_flash, self.len);
        Ok(())
    }
}

/// Writes `data` into buffer `dst` at `offset`.
fn write_into(dev: &Inner, dst: u64, offset: u64, data: &[u8]) -> Result<()> {
    let buf = dev.memory.buffer(dst)?;
    let mut mem = buf.lock();
    let r = check_range(dst, mem.len(), offset, data.len() as u64)?;
    insitu_kernels::arch::copy(&mut mem[r], data);
    Ok(())
}

impl Handle for WriteMemory {
    fn handle(self, dev: &Inner) -> Result<()> {
        write_into(dev, self.dst, self.offset, &self.data)?;
        Meters::add(&dev.meters.host_to_device, self.data.len() as u64);
        Ok(())
    }
}

impl Handle for ReadMemory {
    fn handle(self, dev: &Inner) -> Result<Vec<u8>> {
        let buf = dev.memory.buffer(self.src)?;
        let mem = buf.read();
        let r = check_range(self.src, mem.len(), self.offset, self.len)?;
        Meters::add(&dev.meters.device_to_host, self.len);
        Ok(mem[r].to_vec())
    }
}

impl Handle for CopyToPeer {
    fn handle(self, dev: &Inner) -> Result<()> {
        // Only the bytes asked for leave the buffer.
        let data = {
            let buf = dev.memory.buffer(self.src)?;
            let mem = buf.read();
            let r = check_range(self.src, mem.len(), self.offset, self.len)?;
            mem[r].to_vec()
        };
        let hops = dev.fabric(self.peer)?.deliver(self.peer, self.dst, self.dst_offset, data)?;
        Meters::add(&dev.meters.device_to_device_out, self.len);
        Meters::add(&dev.meters.device_to_device_hops_out, hops as u64);
        Ok(())
    }
}

impl Handle for PeerWrite {
    fn handle(self, dev: &Inner) -> Result<()> {
        write_into(dev, self.dst, self.offset, &self.data)?;
        Meters::add(&dev.meters.device_to_device_in, self.data.len() as u64);
        Meters::add(&dev.meters.device_to_device_hops_in, self.hops as u64);
        Ok(())
    }
}

impl Handle for CreateObject {
    fn handle(self, dev: &Inner) -> Result<u64> {
        Ok(dev.media.write().create_object(&self.name, &self.kind, self.attrs, self.expected_size)?)
    }
}

impl Handle for Append {
    fn handle(self, dev: &Inner) -> Result<()> {
        Meters::add(&dev.meters.host_to_device, self.data.len() as u64);
        if dev.io_path.is_empty() {
            return Ok(dev.media.write().append(self.txn, &self.data)?);
        }
        let (object, offset) = {
            let flash = dev.media.read();
            let (name, size) =
                flash.pending_object(self.txn).ok_or(insitu_flash::FlashError::UnknownTxn(self.txn))?;
            (name.to_string(), size)
        };
        let io = Io::Append { object: &object, offset, data: &self.data };
        io_path(dev, io, || Ok(dev.media.write().append(self.txn, &self.data)?), |_| Ok(()))
    }
}

impl Handle for Commit {
    fn handle(self, dev: &Inner) -> Result<insitu_flash::ObjectMeta> {
        Ok(dev.media.write().commit(self.txn)?)
    }
}

impl Handle for Abort {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.media.write().abort(self.txn)?)
    }
}

impl Handle for Delete {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.media.write().delete(&self.name)?)
    }
}

impl Handle for List {
    fn handle(self, dev: &Inner) -> Result<Vec<insitu_flash::ObjectMeta>> {
        Ok(dev.media.read().objects().cloned().collect())
    }
}

impl Handle for Stat {
    fn handle(self, dev: &Inner) -> Result<insitu_flash::ObjectMeta> {
        Ok(dev.media.read().stat(&self.name)?.clone())
    }
}

impl Handle for PhysicalPages {
    fn handle(self, dev: &Inner) -> Result<Vec<(u64, insitu_flash::PhysicalPage)>> {
        Ok(dev.media.read().physical_pages(&self.name)?)
    }
}

impl Handle for Read {
    fn handle(self, dev: &Inner) -> Result<Vec<u8>> {
        let Read { name, offset, len, buf } = self;
        host_read(dev, Io::ReadObject { object: &name, offset, len }, len, || {
            // Conventional read: flash -> controller DRAM -> host link. The range is checked before a
            // byte of the host's buffer is touched.
            let size = dev.media.read().stat(&name)?.size;
            if offset.checked_add(len).is_none_or(|end| end > size) {
                return Err(insitu_flash::FlashError::ReadPastEnd {
                    name: name.clone(),
                    offset,
                    end: offset.saturating_add(len),
                    size,
                }
                .into());
            }
            let _staging = dev.memory.reserve(len.min(dev.memory.capacity()))?;
            let mut data = buf;
            data.resize(len as usize, 0);
            dev.media.read().read(&name, offset, &mut data)?;
            Meters::add(&dev.meters.flash_to_device_mem, len);
            Ok(data)
        })
    }
}

/// Refuses block I/O past the LBAs the host may address (the firmware keeps the pages above them).
fn check_lbas(dev: &Inner, lba: u64, blocks: u64) -> Result<()> {
    let pages = dev.host_lbas();
    if lba.checked_add(blocks).is_none_or(|end| end > pages) {
        return Err(insitu_flash::FlashError::LbaOutOfRange {
            start: lba,
            end: lba.saturating_add(blocks),
            pages,
        }
        .into());
    }
    Ok(())
}

impl Handle for ReadLba {
    fn handle(self, dev: &Inner) -> Result<Vec<u8>> {
        check_lbas(dev, self.lba, self.blocks)?;
        let page_size = dev.media.read().page_size() as u64;
        let len = self.blocks * page_size;
        host_read(dev, Io::ReadLba { lba: self.lba, blocks: self.blocks }, len, || {
            let mut data = vec![0u8; len as usize];
            dev.media.read().lba_read(self.lba, &mut data)?;
            Meters::add(&dev.meters.flash_to_device_mem, len);
            Ok(data)
        })
    }
}

impl Handle for WriteLba {
    fn handle(self, dev: &Inner) -> Result<()> {
        let ps = dev.media.read().page_size() as u64;
        check_lbas(dev, self.lba, self.data.len() as u64 / ps)?;
        Meters::add(&dev.meters.host_to_device, self.data.len() as u64);
        let io = Io::WriteLba { lba: self.lba, data: &self.data };
        io_path(dev, io, || Ok(dev.media.write().lba_write(self.lba, &self.data)?), |_| Ok(()))
    }
}

impl Handle for TrimLba {
    fn handle(self, dev: &Inner) -> Result<()> {
        check_lbas(dev, self.lba, self.blocks)?;
        let io = Io::TrimLba { lba: self.lba, blocks: self.blocks };
        io_path(dev, io, || Ok(dev.media.write().lba_trim(self.lba, self.blocks)?), |_| Ok(()))
    }
}

impl Handle for Flush {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.media.write().sync()?)
    }
}

impl Handle for ReadPages {
    fn handle(self, dev: &Inner) -> Result<Vec<u8>> {
        let flash = dev.media.read();
        let geo = *flash.geometry();
        let bad =
            |why: String| crate::error::DeviceError::Flash(insitu_flash::FlashError::NandViolation(why));
        let ppn = geo.ppn_of(&self.start).ok_or_else(|| bad(format!("no physical page {}", self.start)))?;
        if ppn + self.count as u64 > geo.total_pages() {
            return Err(bad(format!("read of pages {ppn}+{} past the array", self.count)));
        }
        let mut data = vec![0u8; self.count as usize * geo.page_size as usize];
        insitu_flash::raw::RawFlash::read_tagged(flash.ftl().nand(), ppn, &mut data)?;
        Meters::add(&dev.meters.flash_to_device_mem, data.len() as u64);
        Meters::add(&dev.meters.device_to_host, data.len() as u64);
        Ok(data)
    }
}

impl Handle for RawIdentify {
    fn handle(self, dev: &Inner) -> Result<RawInfo> {
        Ok(dev.raw()?.info())
    }
}

impl Handle for RawWrite {
    fn handle(self, dev: &Inner) -> Result<()> {
        dev.raw()?.write(&self.pages, &self.data)?;
        Meters::add(&dev.meters.host_to_device, self.data.len() as u64);
        Ok(())
    }
}

impl Handle for RawRead {
    fn handle(self, dev: &Inner) -> Result<Vec<u8>> {
        let mut raw = dev.raw()?;
        if self.recheck {
            raw.forget_checks(&self.addrs)?;
        }
        let out = raw.read(&self.addrs)?;
        Meters::add(&dev.meters.device_to_host, out.len() as u64);
        Ok(out)
    }
}

impl Handle for RawErase {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.raw()?.erase(&self.addrs)?)
    }
}

impl Handle for RawDiscard {
    fn handle(self, dev: &Inner) -> Result<()> {
        Ok(dev.raw()?.discard(&self.addrs)?)
    }
}

impl Handle for RawSync {
    fn handle(self, dev: &Inner) -> Result<()> {
        dev.raw()?.sync()
    }
}

impl Handle for GlobalRead {
    fn handle(self, dev: &Inner) -> Result<GlobalReadReply> {
        let cfg = crate::cluster::ClusterConfig::from_profile(&dev.profile)?;
        let page_size = dev.raw()?.page_size();
        let reply = crate::global::read(
            dev.id,
            &cfg,
            page_size,
            &self,
            |source, reads| Ok(dev.raw()?.read_at(source, reads)?),
            // A node that cannot answer is named (the read fails rather than return anything partial); what
            // a node answers, a refused address, comes back as it is.
            |node, req| {
                use crate::error::DeviceError;
                dev.fabric(node).and_then(|f| f.raw_read(node, req)).map_err(|e| match e {
                    DeviceError::Disconnected(_) | DeviceError::ShutDown(_) | DeviceError::NoPeer(_) => {
                        DeviceError::StorageNetwork(format!("node {node} did not answer: {e}"))
                    }
                    other => other,
                })
            },
        )?;
        let local = reply.local_pages * page_size as u64;
        // This node's pages in its host's memory (H-D) never touch the device.
        let dram = self.access == crate::cluster::Access::HostRemoteDram;
        Meters::add(&dev.meters.flash_to_device_mem, if dram { 0 } else { local });
        let bytes = reply.pages * page_size as u64;
        Meters::add(&dev.meters.device_to_device_in, bytes - local);
        Meters::add(&dev.meters.device_to_host, bytes - if dram { local } else { 0 });
        Ok(reply)
    }
}

impl Handle for PeerRawRead {
    fn handle(self, dev: &Inner) -> Result<PeerPages> {
        use crate::cluster::Access;
        let page_size = dev.raw()?.page_size();
        let got = crate::global::serve(
            &self,
            page_size,
            || crate::cluster::ClusterConfig::from_profile(&dev.profile),
            |source, reads| Ok(dev.raw()?.read_at(source, reads)?),
        )?;
        let bytes = (self.addrs.len() * page_size) as u64;
        if self.access != Access::HostRemoteDram {
            Meters::add(&dev.meters.flash_to_device_mem, bytes);
        }
        // Through this node's host: up into its memory (H-RH-F), and down again.
        if self.access == Access::HostRemoteHost {
            Meters::add(&dev.meters.device_to_host, bytes);
        }
        if matches!(self.access, Access::HostRemoteHost | Access::HostRemoteDram) {
            Meters::add(&dev.meters.host_to_device, bytes);
        }
        Meters::add(&dev.meters.device_to_device_out, bytes);
        Ok(got)
    }
}

/// Runs an in-store processor job on the accelerator: its queueing as the scheduler saw it, the job's
/// work and bytes on the meters, and its modeled service time handed back to the scheduler.
fn isp_job<T>(
    dev: &Inner,
    run: impl FnOnce(&mut crate::rawflash::RawPartition) -> Result<(T, crate::isp::Ran)>,
) -> Result<(T, IspJob)> {
    let started = dev.accel.started();
    let t0 = Instant::now();
    let (out, ran) = {
        let mut raw = dev.raw()?;
        let r = run(&mut raw)?;
        (r.0, r.1)
    };
    dev.accel.served(ran.service_ps);
    dev.meters.add_ledger(&ran.work);
    let job = IspJob {
        seq: started.map_or(0, |s| s.seq),
        ahead: started.map_or(0, |s| s.ahead),
        queue_ps: started.map_or(0, |s| s.queue_ps),
        service_ps: ran.service_ps,
        queued_s: started.map_or(0.0, |s| s.queued_s),
        run_s: t0.elapsed().as_secs_f64(),
        engines: ran.engines,
        pages: 0,
        bytes_scanned: ran.bytes_scanned,
    };
    Ok((out, job))
}

impl Handle for IspSearch {
    fn handle(self, dev: &Inner) -> Result<IspSearchReply> {
        let ((scans, seam_starts), mut job) = isp_job(dev, |raw| {
            let (a, b, ran) = crate::isp::search(raw, &dev.profile, &self)?;
            Ok(((a, b), ran))
        })?;
        job.pages = self.pages.len() as u64;
        Meters::add(&dev.meters.flash_to_device_mem, job.pages * dev.raw()?.page_size() as u64);
        Ok(IspSearchReply { scans, seam_starts, job })
    }
}

impl Handle for IspNearest {
    fn handle(self, dev: &Inner) -> Result<IspNearestReply> {
        let (nearest, mut job) = isp_job(dev, |raw| crate::isp::nearest(raw, &dev.profile, &self))?;
        job.pages = self.pages.len() as u64;
        Meters::add(&dev.meters.flash_to_device_mem, job.pages * dev.raw()?.page_size() as u64);
        Ok(IspNearestReply { nearest, job })
    }
}

impl Handle for ConfigureIndex {
    fn handle(self, dev: &Inner) -> Result<IndexInfo> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.configure(&fw, self.config))
    }
}

impl Handle for ResizeIndex {
    fn handle(self, dev: &Inner) -> Result<IndexInfo> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.resize(&fw, self.index, self.records))
    }
}

impl Handle for SetIndexFlags {
    fn handle(self, dev: &Inner) -> Result<IndexInfo> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.set_flags(&fw, self.index, self.sort_on_write, self.active_read))
    }
}

impl Handle for GenerateIndex {
    fn handle(self, dev: &Inner) -> Result<GenerateProgress> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.generate(&fw, self.index, self.max_records))
    }
}

impl Handle for DropIndex {
    fn handle(self, dev: &Inner) -> Result<()> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.drop_index(&fw, self.index))
    }
}

impl Handle for FlushIndexes {
    fn handle(self, dev: &Inner) -> Result<()> {
        dev.selfsort.flush(&dev.firmware_context())
    }
}

impl Handle for IndexStatus {
    fn handle(self, dev: &Inner) -> Result<SelfSortStatus> {
        let fw = dev.firmware_context();
        dev.selfsort.with(|st| st.status(&fw))
    }
}

impl Handle for QueryIndex {
    fn handle(self, dev: &Inner) -> Result<QueryRows> {
        let fw = dev.firmware_context();
        let rows = dev
            .selfsort
            .with(|st| st.query(&fw, self.index, &self.query, self.skip, self.limit, self.count_only))?;
        Meters::add(&dev.meters.device_to_host, rows.records.len() as u64);
        Ok(rows)
    }
}
