//! Device memory (FPGA DRAM / controller DRAM), bounded by the profile. Every byte a program or the host
//! places in the device is accounted here; allocating beyond the bound fails with a clear error, so
//! operators tile their work to fit (NASCENT §3.4, PSACS §IV-B).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{DeviceError, Result};

/// Handle of a buffer in device memory, as the host sees it.
pub type MemHandle = u64;

#[derive(Debug)]
struct Budget {
    capacity: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

/// Accounting for `bytes` of device memory, released when dropped.
#[derive(Debug)]
pub struct MemReservation {
    budget: Arc<Budget>,
    bytes: u64,
}

impl MemReservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Accounts for `more` bytes on top (fails, changing nothing, past the bound).
    pub fn grow(&mut self, more: u64) -> Result<()> {
        let b = &self.budget;
        let mut used = b.used.load(Ordering::Acquire);
        loop {
            let new =
                used.checked_add(more).filter(|n| *n <= b.capacity).ok_or(DeviceError::MemoryExhausted {
                    requested: more,
                    available: b.capacity.saturating_sub(used),
                    capacity: b.capacity,
                })?;
            match b.used.compare_exchange_weak(used, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.bytes += more;
                    b.peak.fetch_max(new, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    /// Gives back all but `keep` bytes.
    pub fn shrink_to(&mut self, keep: u64) {
        if keep < self.bytes {
            self.budget.used.fetch_sub(self.bytes - keep, Ordering::AcqRel);
            self.bytes = keep;
        }
    }
}

impl Drop for MemReservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// A host-addressable buffer in device memory. Several programs may read it at once.
#[derive(Debug)]
pub struct Buffer {
    data: RwLock<Vec<u8>>,
    _reservation: MemReservation,
}

impl Buffer {
    /// Locks the buffer's bytes for writing.
    pub fn lock(&self) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks the buffer's bytes for reading (shared with other readers).
    pub fn read(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// The device memory of one device.
#[derive(Debug)]
pub struct DeviceMemory {
    budget: Arc<Budget>,
    buffers: Mutex<HashMap<MemHandle, Arc<Buffer>>>,
    next: AtomicU64,
}

impl DeviceMemory {
    pub fn new(capacity: u64) -> DeviceMemory {
        DeviceMemory {
            budget: Arc::new(Budget { capacity, used: AtomicU64::new(0), peak: AtomicU64::new(0) }),
            buffers: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.budget.capacity
    }

    pub fn used(&self) -> u64 {
        self.budget.used.load(Ordering::Acquire)
    }

    pub fn available(&self) -> u64 {
        self.capacity().saturating_sub(self.used())
    }

    /// Highest use seen since creation.
    pub fn peak(&self) -> u64 {
        self.budget.peak.load(Ordering::Relaxed)
    }

    /// Accounts for `bytes` of device memory (a program's scratch space).
    pub fn reserve(&self, bytes: u64) -> Result<MemReservation> {
        let mut r = MemReservation { budget: self.budget.clone(), bytes: 0 };
        r.grow(bytes)?;
        Ok(r)
    }

    /// Allocates a zeroed, host-addressable buffer.
    pub fn alloc(&self, bytes: u64) -> Result<MemHandle> {
        let reservation = self.reserve(bytes)?;
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        let buf =
            Arc::new(Buffer { data: RwLock::new(vec![0u8; bytes as usize]), _reservation: reservation });
        self.lock_buffers().insert(handle, buf);
        Ok(handle)
    }

    pub fn free(&self, handle: MemHandle) -> Result<()> {
        self.lock_buffers().remove(&handle).map(|_| ()).ok_or(DeviceError::UnknownHandle(handle))
    }

    pub fn buffer(&self, handle: MemHandle) -> Result<Arc<Buffer>> {
        self.lock_buffers().get(&handle).cloned().ok_or(DeviceError::UnknownHandle(handle))
    }

    fn lock_buffers(&self) -> MutexGuard<'_, HashMap<MemHandle, Arc<Buffer>>> {
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Checks that `offset..offset + len` lies inside a buffer of `buf_len` bytes.
pub fn check_range(
    handle: MemHandle,
    buf_len: usize,
    offset: u64,
    len: u64,
) -> Result<std::ops::Range<usize>> {
    let end = offset.checked_add(len).filter(|e| *e <= buf_len as u64).ok_or(DeviceError::OutOfBounds {
        handle,
        offset,
        end: offset.saturating_add(len),
        len: buf_len as u64,
    })?;
    Ok(offset as usize..end as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_bounded_and_released() {
        let m = DeviceMemory::new(1000);
        let a = m.alloc(600).unwrap();
        let err = m.alloc(500).unwrap_err().to_string();
        assert!(err.contains("device memory exhausted") && err.contains("400 of 1000"), "{err}");
        {
            let _r = m.reserve(400).unwrap();
            assert_eq!(m.available(), 0);
        }
        m.free(a).unwrap();
        assert_eq!(m.used(), 0);
        assert_eq!(m.peak(), 1000);
        assert!(m.free(a).is_err());
        assert!(check_range(1, 10, 5, 6).is_err());
    }
}
