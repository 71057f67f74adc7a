//! [`Command`]: every request as one serde type, which is what a transport carries. Bulk data (what
//! `Append`, `WriteMemory`, `WriteLba` and `PeerWrite` carry) is taken out before the header is encoded and
//! travels beside it as is.

use serde::{Deserialize, Serialize};

use crate::protocol::admin::{Fsck, Identify, SetArrayGeneration, Statistics};
use crate::protocol::index::{
    ConfigureIndex, DropIndex, FlushIndexes, GenerateIndex, IndexStatus, QueryIndex, ResizeIndex,
    SetIndexFlags,
};
use crate::protocol::isp::{IspNearest, IspSearch};
use crate::protocol::memory::{
    AllocMemory, CopyToPeer, FreeMemory, LoadObject, PeerWrite, ReadMemory, StoreToObject, WriteMemory,
};
use crate::protocol::programs::{Execute, Program, ProgramCall};
use crate::protocol::raw::{
    GlobalRead, PeerRawRead, RawDiscard, RawErase, RawIdentify, RawRead, RawSync, RawWrite,
};
use crate::protocol::request::{Queue, Request};
use crate::protocol::storage::{
    Abort, Append, Commit, CreateObject, Delete, Flush, List, PhysicalPages, Read, ReadLba, ReadPages, Stat,
    TrimLba, WriteLba,
};

/// A request that can be sent: a [`Request`] that converts into the wire [`Command`].
pub trait Call: Request + Into<Command> {}

impl<R: Request + Into<Command>> Call for R {}

macro_rules! commands {
    ($($name:ident),* $(,)?) => {
        /// One request to a device, whichever it is.
        #[derive(Debug, Serialize, Deserialize)]
        pub enum Command {
            $($name($name),)*
            /// A program run (its typed result is chosen by the program, see [`Execute`]).
            Execute(ProgramCall),
        }

        $(
            impl From<$name> for Command {
                fn from(r: $name) -> Command {
                    Command::$name(r)
                }
            }
        )*

        impl Command {
            /// The queue that runs it.
            pub fn queue(&self) -> Queue {
                match self {
                    $(Command::$name(_) => <$name as Request>::QUEUE,)*
                    Command::Execute(_) => Queue::Compute,
                }
            }

            /// Its name, for errors and traces.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Command::$name(_) => stringify!($name),)*
                    Command::Execute(c) => c.id(),
                }
            }
        }
    };
}

commands! {
    Identify, Statistics, Fsck, SetArrayGeneration,
    AllocMemory, FreeMemory, LoadObject, StoreToObject, WriteMemory, ReadMemory, CopyToPeer, PeerWrite,
    CreateObject, Append, Commit, Abort, Delete, List, Stat, PhysicalPages, Read, ReadLba, WriteLba, TrimLba,
    Flush, ReadPages,
    ConfigureIndex, ResizeIndex, SetIndexFlags, GenerateIndex, DropIndex, FlushIndexes, IndexStatus, QueryIndex,
    RawIdentify, RawWrite, RawRead, RawErase, RawDiscard, RawSync, GlobalRead, PeerRawRead, IspSearch, IspNearest,
}

impl<P: Program> From<Execute<P>> for Command {
    fn from(e: Execute<P>) -> Command {
        Command::Execute(P::call(e.args))
    }
}

impl Command {
    /// Takes out the bulk data the command carries (empty for most).
    pub fn take_bulk(&mut self) -> Vec<u8> {
        match self {
            Command::Append(Append { data, .. })
            | Command::WriteMemory(WriteMemory { data, .. })
            | Command::WriteLba(WriteLba { data, .. })
            | Command::PeerWrite(PeerWrite { data, .. })
            | Command::RawWrite(RawWrite { data, .. }) => std::mem::take(data),
            _ => Vec::new(),
        }
    }

    /// Puts bulk data back in (on the receiving side of a transport).
    pub fn put_bulk(&mut self, bulk: Vec<u8>) {
        match self {
            Command::Append(Append { data, .. })
            | Command::WriteMemory(WriteMemory { data, .. })
            | Command::WriteLba(WriteLba { data, .. })
            | Command::PeerWrite(PeerWrite { data, .. })
            | Command::RawWrite(RawWrite { data, .. }) => *data = bulk,
            _ => {}
        }
    }
}
