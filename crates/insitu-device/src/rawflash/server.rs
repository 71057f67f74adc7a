//! The flash server and its address translation unit (BlueDBM §3.1.2): what an in-store processor uses
//! instead of the raw interface.
//!
//! [`FlashServer`] takes page requests in order, keeps up to `buffers` of them in flight through a
//! [`Splitter`] (one page buffer each, named by the buffer's index as its tag), collects each page's
//! out-of-order, interleaved slices into its buffer, and hands pages out in request order; a buffer is
//! reused once its page has been taken. [`AddressTranslation`] holds the physical pages of the files the
//! host handed over, so the processor asks for (file handle, offset, length) and the server reads the
//! pages behind them.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use insitu_flash::raw::RawFlash;

use super::command::{Completion, Event, FlashAddr, FlashCommand, RawFlashError, Tag};
use super::splitter::{Source, Splitter};
use crate::network::Ps;

/// Names a file whose physical pages the host handed to the address translation unit.
pub type FileHandle = u64;

/// File handle -> physical pages, as the host supplies them (§4, Fig. 8 (2)).
#[derive(Debug, Clone, Default)]
pub struct AddressTranslation {
    page_size: u64,
    files: HashMap<FileHandle, (Vec<FlashAddr>, u64)>,
}

impl AddressTranslation {
    pub fn new(page_size: u32) -> Self {
        AddressTranslation { page_size: page_size as u64, files: HashMap::new() }
    }

    /// Records that file `handle` of `size` bytes lives in `pages`, in order.
    pub fn map(&mut self, handle: FileHandle, pages: Vec<FlashAddr>, size: u64) -> Result<(), RawFlashError> {
        let room = pages.len() as u64 * self.page_size;
        if size > room {
            return Err(RawFlashError::PastFileEnd { handle, offset: 0, end: size, size: room });
        }
        self.files.insert(handle, (pages, size));
        Ok(())
    }

    pub fn unmap(&mut self, handle: FileHandle) -> bool {
        self.files.remove(&handle).is_some()
    }

    /// The pages holding bytes `offset..offset + len` of `handle`, each with the bytes of it wanted.
    pub fn translate(
        &self,
        handle: FileHandle,
        offset: u64,
        len: u64,
    ) -> Result<Vec<(FlashAddr, Range<usize>)>, RawFlashError> {
        let (pages, size) = self.files.get(&handle).ok_or(RawFlashError::UnknownHandle(handle))?;
        let end = offset.checked_add(len).filter(|e| e <= size).ok_or(RawFlashError::PastFileEnd {
            handle,
            offset,
            end: offset.saturating_add(len),
            size: *size,
        })?;
        let ps = self.page_size;
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let page = at / ps;
            let stop = ((page + 1) * ps).min(end);
            out.push((pages[page as usize], (at - page * ps) as usize..(stop - page * ps) as usize));
            at = stop;
        }
        Ok(out)
    }
}

#[derive(Debug)]
struct Buffer {
    tag: Tag,
    keep: Range<usize>,
    data: Vec<u8>,
    status: Option<Result<(), RawFlashError>>,
    at_ps: Ps,
}

/// In-order page streams over the out-of-order interface (see the [module](self) documentation).
#[derive(Debug)]
pub struct FlashServer {
    source: Source,
    page_size: usize,
    /// Requests not yet sent: (address, bytes of the page wanted).
    queued: VecDeque<(FlashAddr, Range<usize>)>,
    /// Requests in flight or done but not taken, in request order.
    buffers: VecDeque<Buffer>,
    free: Vec<Tag>,
    /// When the last page was handed out: a page leaves no earlier than the one before it.
    out_ps: Ps,
}

impl FlashServer {
    /// A server for `source` with `buffers` page buffers of `page_size` bytes.
    pub fn new(source: Source, buffers: u32, page_size: u32) -> Self {
        FlashServer {
            source,
            page_size: page_size as usize,
            queued: VecDeque::new(),
            buffers: VecDeque::new(),
            free: (0..buffers.max(1)).rev().collect(),
            out_ps: 0,
        }
    }

    pub fn source(&self) -> Source {
        self.source
    }

    /// Asks for a whole page.
    pub fn request(&mut self, addr: FlashAddr) {
        self.queued.push_back((addr, 0..self.page_size));
    }

    /// Asks for bytes `offset..offset + len` of a file the host mapped.
    pub fn request_file(
        &mut self,
        atu: &AddressTranslation,
        handle: FileHandle,
        offset: u64,
        len: u64,
    ) -> Result<(), RawFlashError> {
        self.queued.extend(atu.translate(handle, offset, len)?);
        Ok(())
    }

    /// Sends queued requests while page buffers are free.
    pub fn pump<M: RawFlash>(&mut self, splitter: &mut Splitter<M>) -> Result<(), RawFlashError> {
        while !self.free.is_empty() {
            let Some((addr, keep)) = self.queued.pop_front() else { break };
            let tag = self.free.pop().expect("checked");
            if let Err(e) = splitter.issue(self.source, FlashCommand::read_page(addr, tag)) {
                self.free.push(tag);
                return Err(e);
            }
            self.buffers.push_back(Buffer {
                tag,
                keep,
                data: vec![0; self.page_size],
                status: None,
                at_ps: 0,
            });
        }
        Ok(())
    }

    /// Takes an event of this server's source.
    pub fn accept(&mut self, c: Completion) {
        let Some(b) = self.buffers.iter_mut().find(|b| b.tag == c.tag && b.status.is_none()) else { return };
        match c.event {
            Event::ReadData(s) => {
                s.copy_to(&mut b.data[s.offset()..s.offset() + s.span()]);
                if s.last {
                    b.status = Some(Ok(()));
                    b.at_ps = c.at_ps;
                }
            }
            Event::Ack(status) => {
                b.status = Some(status.map(|_| ()));
                b.at_ps = c.at_ps;
            }
            Event::WriteDataRequest => {}
        }
    }

    /// The next page in request order, if it is complete: the bytes wanted of it and when it could leave
    /// in order (its last slice, or the page before it, whichever came later). Frees its buffer.
    pub fn next_page(&mut self) -> Option<Result<(Vec<u8>, Ps), RawFlashError>> {
        self.buffers.front()?.status.as_ref()?;
        let b = self.buffers.pop_front().expect("checked");
        self.free.push(b.tag);
        self.out_ps = self.out_ps.max(b.at_ps);
        let at = self.out_ps;
        Some(b.status.expect("checked").map(|()| {
            let mut data = b.data;
            if b.keep != (0..self.page_size) {
                data = data[b.keep].to_vec();
            }
            (data, at)
        }))
    }

    /// Whether every request was handed out.
    pub fn is_idle(&self) -> bool {
        self.queued.is_empty() && self.buffers.is_empty()
    }

    /// Runs the requests on a splitter that serves this server alone, handing each page to `f` in
    /// order with the simulated time it was complete.
    pub fn read_all<M: RawFlash>(
        &mut self,
        splitter: &mut Splitter<M>,
        mut f: impl FnMut(&[u8], Ps),
    ) -> Result<(), RawFlashError> {
        loop {
            self.pump(splitter)?;
            while let Some(page) = self.next_page() {
                let (data, at) = page?;
                f(&data, at);
                self.pump(splitter)?;
            }
            if self.is_idle() {
                return Ok(());
            }
            match splitter.poll() {
                Some((source, c)) if source == self.source => self.accept(c),
                Some(_) => {}
                None => return Err(RawFlashError::Lost { pending: self.buffers.len() + self.queued.len() }),
            }
        }
    }
}
