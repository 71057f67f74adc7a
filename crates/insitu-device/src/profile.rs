//! Hardware profiles: TOML data describing a device and the host it serves (geometry, bandwidths,
//! latencies, device memory, compute speed per kernel class, power). The built-in profiles live in
//! `profiles/` at the repository root and are compiled in; a path to any other TOML file works too.

use std::collections::BTreeMap;
use std::path::Path;

use insitu_flash::Geometry;
use serde::{Deserialize, Serialize};

use crate::engines::Engine;
use crate::error::{DeviceError, Result};

/// The profiles shipped with insitu, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("smartssd", include_str!("../../../profiles/smartssd.toml")),
    ("smartssd-2016", include_str!("../../../profiles/smartssd-2016.toml")),
    ("jasmine", include_str!("../../../profiles/jasmine.toml")),
    ("bluedbm", include_str!("../../../profiles/bluedbm.toml")),
    ("tiny", include_str!("../../../profiles/tiny.toml")),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NandProfile {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub pages_per_block: u32,
    pub page_size: u32,
    pub read_latency_us: f64,
    pub program_latency_us: f64,
    pub erase_latency_us: f64,
    /// The raw flash interface of the device's controller (BlueDBM §3.1), for profiles of devices that
    /// expose one: what `insitu_device::rawflash` simulates command by command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<RawInterfaceProfile>,
}

/// A raw flash interface (BlueDBM §3.1): flash cards whose buses of chips are driven by tagged commands,
/// reads answered in bursts out of order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInterfaceProfile {
    /// Flash cards; the `nand.channels` buses are split evenly among them.
    pub cards: u32,
    /// Commands in flight per card, each named by a tag.
    pub tags_per_card: u32,
    /// Bytes of one data burst between a card and its user.
    pub burst_bytes: u32,
    /// Microseconds one page occupies its flash bus, moving in or out.
    pub bus_page_us: f64,
    /// Bytes per second one card moves to or from its user, all its buses together.
    pub card_bw: f64,
    /// Microseconds a command or a burst takes between a card and its user.
    pub card_latency_us: f64,
    /// Page buffers the host interface gives the host software, each way (§3.3): reads the host can
    /// have in flight.
    pub host_page_buffers: u32,
    /// The in-store processor's string-search engines per flash bus, each with one read in flight
    /// while it searches the page before (§7.3).
    #[serde(default = "four")]
    pub search_engines_per_bus: u32,
    /// The in-store processor's nearest-neighbour (Hamming) engines per flash card, sharing the card's
    /// tags (§7.1).
    #[serde(default = "one")]
    pub nearest_engines_per_card: u32,
}

fn four() -> u32 {
    4
}

fn one() -> u32 {
    1
}

impl RawInterfaceProfile {
    /// What a new profile must also meet (not checked on one stored with an array, which would then not
    /// open at all): each in-store engine keeps a read in flight with one of its card's tags (see
    /// `isp::limits`), so default engines past the tags would refuse every in-store job.
    fn check_new(&self) -> std::result::Result<(), String> {
        for (field, v) in [
            ("search_engines_per_bus", self.search_engines_per_bus),
            ("nearest_engines_per_card", self.nearest_engines_per_card),
        ] {
            if v > self.tags_per_card {
                return Err(format!(
                    "nand.interface.{field} ({v}) is more than tags_per_card ({}): each engine keeps a read in \
                     flight with one of its card's tags",
                    self.tags_per_card
                ));
            }
        }
        Ok(())
    }

    fn validate(&self, nand: &NandProfile) -> std::result::Result<(), String> {
        if self.cards == 0 || !nand.channels.is_multiple_of(self.cards) {
            return Err(format!(
                "nand.interface.cards must divide nand.channels ({}), got {}",
                nand.channels, self.cards
            ));
        }
        for (field, v) in [
            ("host_page_buffers", self.host_page_buffers),
            ("search_engines_per_bus", self.search_engines_per_bus),
            ("nearest_engines_per_card", self.nearest_engines_per_card),
        ] {
            if v == 0 {
                return Err(format!("nand.interface.{field} must be at least 1"));
            }
        }
        if !(1..=65_536).contains(&self.tags_per_card) {
            return Err(format!(
                "nand.interface.tags_per_card must be 1 to 65536, got {}",
                self.tags_per_card
            ));
        }
        if self.burst_bytes == 0 || !nand.page_size.is_multiple_of(self.burst_bytes) {
            return Err(format!(
                "nand.interface.burst_bytes must divide the page size ({}), got {}",
                nand.page_size, self.burst_bytes
            ));
        }
        for (field, v) in [("bus_page_us", self.bus_page_us), ("card_bw", self.card_bw)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("nand.interface.{field} must be a positive number, got {v}"));
            }
        }
        if !(self.card_latency_us.is_finite() && self.card_latency_us >= 0.0) {
            return Err(format!(
                "nand.interface.card_latency_us must be zero or more, got {}",
                self.card_latency_us
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub memory_bytes: u64,
    pub compute_units: u32,
    /// Flash -> device memory, bytes/s (the internal path).
    pub internal_read_bw: f64,
    /// Device memory -> flash, bytes/s.
    pub internal_write_bw: f64,
    /// Device memory bandwidth, bytes/s.
    pub memory_bw: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostLinkProfile {
    /// Device -> host, bytes/s, per device.
    pub read_bw: f64,
    /// Host -> device, bytes/s, per device.
    pub write_bw: f64,
    pub latency_us: f64,
    /// What all devices together can move to or from the host, bytes/s (a switch or root complex).
    pub shared_bw: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkProfile {
    /// Device <-> device, bytes/s per link.
    pub link_bw: f64,
    pub hop_latency_us: f64,
    /// The storage network's ports, links and packets (BlueDBM §3.2), for profiles of devices that have
    /// one: what `insitu_device::network` simulates packet by packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageNetworkProfile>,
}

/// A storage network built into the devices (BlueDBM §3.2): serial links between device ports, packets
/// of flits, link-level credits, logical endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageNetworkProfile {
    /// Network ports per device.
    pub ports: u32,
    /// Serial line rate of one link, bits/s, before the line code.
    pub line_rate_bps: f64,
    /// The line code as (data bits, coded bits), e.g. 64b/66b.
    pub line_code: [u32; 2],
    /// Bits one flit occupies on the link (payload, packet header and framing), before the line code.
    pub flit_wire_bits: u32,
    /// Payload bits one flit carries.
    pub flit_payload_bits: u32,
    /// Flits the receiving port of a link buffers: the credits its sender starts with.
    pub link_buffer_flits: u32,
    /// Logical endpoints (virtual channels) per node.
    pub endpoints: u32,
    /// Flits an endpoint's receive queue holds before back-pressure reaches the links.
    pub endpoint_queue_flits: u32,
}

impl StorageNetworkProfile {
    /// Payload bytes per second one link sustains for one stream: line rate, less the line code, less
    /// the flits' headers and framing.
    pub fn payload_bw(&self) -> f64 {
        let [data, coded] = self.line_code;
        self.line_rate_bps * data as f64 / coded as f64 * self.flit_payload_bits as f64
            / self.flit_wire_bits as f64
            / 8.0
    }

    /// Picoseconds one flit occupies a link.
    pub fn flit_ps(&self) -> f64 {
        let [data, coded] = self.line_code;
        self.flit_wire_bits as f64 * coded as f64 / data as f64 / self.line_rate_bps * 1e12
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let [data, coded] = self.line_code;
        if !(self.line_rate_bps.is_finite() && self.line_rate_bps > 0.0) {
            return Err(format!(
                "network.storage.line_rate_bps must be positive, got {}",
                self.line_rate_bps
            ));
        }
        if data == 0 || coded < data {
            return Err(format!(
                "network.storage.line_code must be [data, coded] with 0 < data <= coded, got {:?}",
                self.line_code
            ));
        }
        if self.flit_payload_bits == 0 || self.flit_wire_bits < self.flit_payload_bits {
            return Err("network.storage: a flit needs 0 < flit_payload_bits <= flit_wire_bits".into());
        }
        if !(1..=64).contains(&self.ports) || !(1..=64).contains(&self.endpoints) {
            return Err("network.storage: ports and endpoints must be 1 to 64".into());
        }
        if self.link_buffer_flits < 2 || self.endpoint_queue_flits < self.link_buffer_flits {
            return Err(
                "network.storage: link_buffer_flits must be at least 2, endpoint_queue_flits at least that"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Power of one device (the host's is in its [`HostProfile`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerProfile {
    pub device_active_w: f64,
    pub device_idle_w: f64,
    /// Read from profiles written before host profiles existed, and ignored.
    #[serde(default, skip_serializing)]
    pub host_active_w: Option<f64>,
    #[serde(default, skip_serializing)]
    pub host_idle_w: Option<f64>,
}

/// The host a device profile is used with: the machine of its paper's experiments, as data (cores,
/// memory bandwidth, power, and the engine that prices the work of host placements).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostProfile {
    pub name: String,
    pub description: String,
    /// Cores work can be spread over.
    pub cores: u32,
    /// Bytes/s all cores together move to and from memory.
    pub memory_bw: f64,
    pub active_w: f64,
    pub idle_w: f64,
    /// One core: what host work costs on it.
    pub cpu: Engine,
    /// An accelerator card beside the host (NASCENT's FPGA baseline, §4.3 footnote), if the host has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<Accelerator>,
    /// A hard disk beside the host, if it has one (BlueDBM §7.1's "DRAM + 5% disk").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<Disk>,
    /// The host's I/O path to its drives.
    #[serde(default)]
    pub storage: StorageStack,
    /// Bytes of DRAM traffic a unit of host work causes beyond the caches, by work item (a row fetched at
    /// a random place is a cache line; a byte copied is read and written): all threads share `memory_bw`,
    /// so work spread over more threads stops scaling where their traffic fills it. Items not listed
    /// cause none (sorts price their passes over memory in their engine).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_bytes: BTreeMap<String, f64>,
}

/// A hard disk: what one random access costs, and its streaming rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disk {
    /// Microseconds of one random access (seek and rotation).
    pub access_us: f64,
    /// Bytes per second once streaming.
    pub bw: f64,
}

/// How the host's software reaches its drives (the operating system's block layer and driver, and the
/// program reading through them): every byte the host moves to or from a device goes in requests of at
/// most `request_bytes`, each costing the host `request_cycles` plus `byte_cycles` a byte of one core, and
/// each waiting for the device (its read latency, or its link's latency for a write) plus its transfer.
/// Each host thread keeps `queue_depth` requests in flight: a program reading synchronously through the
/// readahead of a file system keeps one, and then the device's latency is paid request after request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageStack {
    pub request_bytes: u64,
    /// Requests in flight per host thread.
    pub queue_depth: u32,
    pub request_cycles: f64,
    pub byte_cycles: f64,
}

impl Default for StorageStack {
    /// A host that issues large requests deep enough to hide the device's latency, at no CPU cost (the
    /// model before host storage stacks, for profiles stored without one).
    fn default() -> StorageStack {
        StorageStack { request_bytes: 1 << 20, queue_depth: 64, request_cycles: 0.0, byte_cycles: 0.0 }
    }
}

/// An accelerator on the host's bus: its engine and its power.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    pub description: String,
    pub engine: Engine,
    pub active_w: f64,
    pub idle_w: f64,
    /// How the accelerator's host program moves data to and from the drives, where it differs from the
    /// host's own programs (`HostProfile::storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageStack>,
}

/// The host profiles shipped with insitu, by name (`profiles/hosts/`).
pub const BUILTIN_HOSTS: &[(&str, &str)] = &[
    ("i7-8700", include_str!("../../../profiles/hosts/i7-8700.toml")),
    ("skylake-sp-44", include_str!("../../../profiles/hosts/skylake-sp-44.toml")),
    ("i7-2016", include_str!("../../../profiles/hosts/i7-2016.toml")),
    ("core-i5-jasmine", include_str!("../../../profiles/hosts/core-i5-jasmine.toml")),
    ("xeon-bluedbm", include_str!("../../../profiles/hosts/xeon-bluedbm.toml")),
    ("tiny-host", include_str!("../../../profiles/hosts/tiny-host.toml")),
];

impl HostProfile {
    /// A host with no prices (see [`Engine::unknown`]).
    pub fn unknown() -> HostProfile {
        HostProfile {
            name: "unknown".into(),
            description: "a host not described (a profile stored by an older insitu)".into(),
            cores: 1,
            memory_bw: 1.0e9,
            active_w: 0.0,
            idle_w: 0.0,
            cpu: Engine::unknown(),
            accelerator: None,
            disk: None,
            storage: StorageStack::default(),
            memory_bytes: BTreeMap::new(),
        }
    }

    /// A built-in host profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<HostProfile> {
        let text = match BUILTIN_HOSTS.iter().find(|(n, _)| *n == name_or_path) {
            Some((_, text)) => text.to_string(),
            None => {
                let path = Path::new(name_or_path);
                if !(name_or_path.ends_with(".toml") || path.exists()) {
                    return Err(DeviceError::UnknownProfile {
                        name: name_or_path.to_string(),
                        known: BUILTIN_HOSTS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
                    });
                }
                std::fs::read_to_string(path).map_err(|e| DeviceError::InvalidProfile {
                    profile: name_or_path.to_string(),
                    detail: format!("cannot read it: {e}"),
                })?
            }
        };
        let invalid =
            |detail: String| DeviceError::InvalidProfile { profile: name_or_path.to_string(), detail };
        let h: HostProfile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        h.validate().map_err(invalid)?;
        Ok(h)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if self.cores == 0 || self.cores > 4096 {
            return Err(format!("host.cores must be 1 to 4096, got {}", self.cores));
        }
        if !(self.memory_bw.is_finite() && self.memory_bw > 0.0) {
            return Err(format!("host.memory_bw must be a positive number, got {}", self.memory_bw));
        }
        let mut watts = vec![("host.active_w", self.active_w), ("host.idle_w", self.idle_w)];
        if let Some(a) = &self.accelerator {
            watts.extend([("host.accelerator.active_w", a.active_w), ("host.accelerator.idle_w", a.idle_w)]);
            a.engine.validate("host.accelerator.engine")?;
        }
        for (field, v) in watts {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{field} must be zero or more, got {v}"));
            }
        }
        self.storage.validate("host.storage")?;
        if let Some(s) = self.accelerator.as_ref().and_then(|a| a.storage.as_ref()) {
            s.validate("host.accelerator.storage")?;
        }
        if let Some((item, v)) = self.memory_bytes.iter().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
            return Err(format!("host.memory_bytes.{item:?} must be zero or more, got {v}"));
        }
        if let Some(d) = &self.disk {
            for (field, v) in [("host.disk.access_us", d.access_us), ("host.disk.bw", d.bw)] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{field} must be a positive number, got {v}"));
                }
            }
        }
        for (at, engine) in std::iter::once(("host.cpu", &self.cpu))
            .chain(self.accelerator.as_ref().map(|a| ("host.accelerator.engine", &a.engine)))
        {
            if engine.shuffle_scratchpad_bytes.is_some() {
                return Err(format!(
                    "{at}.shuffle_scratchpad_bytes: only a device's kernels shuffle in tiles of a scratchpad \
                     (the host's baselines shuffle in its memory)"
                ));
            }
        }
        self.cpu.validate("host.cpu")
    }
}

impl StorageStack {
    fn validate(&self, at: &str) -> std::result::Result<(), String> {
        if self.request_bytes == 0 {
            return Err(format!("{at}.request_bytes must be at least 1"));
        }
        if !(1..=65_536).contains(&self.queue_depth) {
            return Err(format!("{at}.queue_depth must be 1 to 65536, got {}", self.queue_depth));
        }
        for (field, v) in [("request_cycles", self.request_cycles), ("byte_cycles", self.byte_cycles)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{at}.{field} must be zero or more, got {v}"));
            }
        }
        Ok(())
    }
}

/// A profile as written: the host by name (or inline), and what older profiles held that is no longer
/// used (`[compute]` factors), accepted so that arrays made before keep opening.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: String,
    description: String,
    default_capacity_bytes: u64,
    nand: NandProfile,
    device: DeviceProfile,
    host_link: HostLinkProfile,
    network: NetworkProfile,
    #[serde(default)]
    kernels: Option<Engine>,
    #[serde(default)]
    host: Option<HostRef>,
    power: PowerProfile,
    /// DaMoN '16's Table 1 as figures, in profiles written before the engines priced the intersection
    /// (`intersect.*` cycles): read and ignored.
    #[serde(default)]
    #[allow(dead_code)]
    cpu: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    firmware: FirmwareProfile,
    #[serde(default)]
    #[allow(dead_code)]
    compute: Option<serde::de::IgnoredAny>,
}

/// `host = "NAME"` or a `[host]` table. Read by hand rather than as an untagged enum, so that a table with
/// a mistake is refused with the mistake named (a missing or unknown field), not as "no variant matched".
enum HostRef {
    Name(String),
    Inline(Box<HostProfile>),
}

impl<'de> Deserialize<'de> for HostRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<HostRef, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = HostRef;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a host profile's name or a [host] table")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<HostRef, E> {
                Ok(HostRef::Name(v.to_string()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<HostRef, A::Error> {
                let h = HostProfile::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map_err(|e| serde::de::Error::custom(format!("[host]: {e}")))?;
                Ok(HostRef::Inline(Box::new(h)))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl TryFrom<ProfileFile> for Profile {
    type Error = String;

    fn try_from(f: ProfileFile) -> std::result::Result<Profile, String> {
        // A profile stored by an older insitu has no kernels or host: those of the built-in profile of
        // the same name stand in (its other figures are kept as stored).
        let builtin = || {
            BUILTIN
                .iter()
                .find(|(n, _)| *n == f.name)
                .and_then(|(_, text)| toml::from_str::<Profile>(text).ok())
        };
        // A stored profile of another name keeps its data readable: its work is modeled as unpriced (the
        // model names it) until the array is given engines. A profile file must have them.
        let stored = f.compute.is_some();
        let kernels = match f.kernels {
            Some(k) => k,
            None => match builtin().map(|p| p.kernels) {
                Some(k) => k,
                None if stored => Engine::unknown(),
                None => {
                    return Err(format!(
                        "profile {} has no [kernels] section (the engines that price device work)",
                        f.name
                    ))
                }
            },
        };
        let host = match f.host {
            Some(HostRef::Inline(h)) => *h,
            Some(HostRef::Name(n)) => HostProfile::load(&n).map_err(|e| e.to_string())?,
            None => match builtin().map(|p| p.host) {
                Some(h) => h,
                None if stored => HostProfile::unknown(),
                None => {
                    return Err(format!(
                        "profile {} names no host (`host = \"i7-8700\"` or a [host] table)",
                        f.name
                    ))
                }
            },
        };
        Ok(Profile {
            name: f.name,
            description: f.description,
            default_capacity_bytes: f.default_capacity_bytes,
            nand: f.nand,
            device: f.device,
            host_link: f.host_link,
            network: f.network,
            kernels,
            host,
            power: f.power,
            firmware: f.firmware,
        })
    }
}

/// The processor that runs resident firmware on the I/O path (the Self-Sorting SSD's index), and what the
/// firmware keeps in device memory beside it. Firmware time is modeled from counted work: each unit of
/// work (a tree node visited, a key compared, a byte moved...) costs `cycles` at `clock_hz`, so the same
/// run gives the same modeled time on any machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirmwareProfile {
    pub clock_hz: f64,
    /// Cycles per unit of counted firmware work, by the work's name (see `insitu_device::firmware::work`).
    pub cycles: BTreeMap<String, f64>,
    /// The FTL's page map (4 bytes per logical page) lives in device memory: one DRAM for everything, as
    /// on the OpenSSD Jasmine, so it counts against `device.memory_bytes`.
    #[serde(default)]
    pub ftl_map_in_memory: bool,
    /// Device memory the firmware keeps for its I/O buffers.
    #[serde(default)]
    pub io_buffer_bytes: u64,
}

impl Default for FirmwareProfile {
    /// A 1 GHz controller core with caches (for profiles that do not say).
    fn default() -> FirmwareProfile {
        let cycles = [
            ("index.visit", 10.0),
            ("index.compare", 8.0),
            ("index.move_byte", 0.125),
            ("index.record", 20.0),
            ("index.copy_byte", 0.125),
            ("merge.compare", 10.0),
        ];
        FirmwareProfile {
            clock_hz: 1.0e9,
            cycles: cycles.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ftl_map_in_memory: false,
            io_buffer_bytes: 0,
        }
    }
}

impl FirmwareProfile {
    /// Seconds the firmware's processor takes for `count` units of work `name` (unpriced work is free).
    pub fn seconds(&self, name: &str, count: u64) -> f64 {
        self.cycles.get(name).map_or(0.0, |c| count as f64 * c / self.clock_hz)
    }
}

/// A whole hardware profile: a device, and the host it is used with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ProfileFile")]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub default_capacity_bytes: u64,
    pub nand: NandProfile,
    pub device: DeviceProfile,
    pub host_link: HostLinkProfile,
    pub network: NetworkProfile,
    /// The engines that run the device's programs (FPGA kernels or embedded cores).
    pub kernels: Engine,
    /// The host: its cores and what host work costs there.
    pub host: HostProfile,
    pub power: PowerProfile,
    #[serde(default)]
    pub firmware: FirmwareProfile,
}

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::from_toml(text, name_or_path);
        }
        let path = Path::new(name_or_path);
        if name_or_path.ends_with(".toml") || path.exists() {
            let text = std::fs::read_to_string(path).map_err(|e| DeviceError::InvalidProfile {
                profile: name_or_path.to_string(),
                detail: format!("cannot read it: {e}"),
            })?;
            return Self::from_toml(&text, name_or_path);
        }
        Err(DeviceError::UnknownProfile {
            name: name_or_path.to_string(),
            known: BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        })
    }

    /// Parses and validates a profile.
    pub fn from_toml(text: &str, origin: &str) -> Result<Profile> {
        let p: Profile = toml::from_str(text).map_err(|e| DeviceError::InvalidProfile {
            profile: origin.to_string(),
            detail: e.to_string(),
        })?;
        p.validate()?;
        if let Some(raw) = &p.nand.interface {
            raw.check_new()
                .map_err(|detail| DeviceError::InvalidProfile { profile: p.name.clone(), detail })?;
        }
        Ok(p)
    }

    /// Checks every figure: positive bandwidths, latencies and powers, a usable geometry, some memory.
    pub fn validate(&self) -> Result<()> {
        let bad = |detail: String| Err(DeviceError::InvalidProfile { profile: self.name.clone(), detail });
        let positive = [
            ("nand.read_latency_us", self.nand.read_latency_us),
            ("nand.program_latency_us", self.nand.program_latency_us),
            ("nand.erase_latency_us", self.nand.erase_latency_us),
            ("device.internal_read_bw", self.device.internal_read_bw),
            ("device.internal_write_bw", self.device.internal_write_bw),
            ("device.memory_bw", self.device.memory_bw),
            ("host_link.read_bw", self.host_link.read_bw),
            ("host_link.write_bw", self.host_link.write_bw),
            ("host_link.shared_bw", self.host_link.shared_bw),
            ("network.link_bw", self.network.link_bw),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{field} must be a positive number, got {v}"));
            }
        }
        let non_negative = [
            ("host_link.latency_us", self.host_link.latency_us),
            ("network.hop_latency_us", self.network.hop_latency_us),
            ("power.device_active_w", self.power.device_active_w),
            ("power.device_idle_w", self.power.device_idle_w),
        ];
        for (field, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{field} must be zero or more, got {v}"));
            }
        }
        self.kernels.validate("kernels").or_else(bad)?;
        self.host.validate().or_else(bad)?;
        if self.device.memory_bytes < 1 << 20 {
            return bad(format!(
                "device.memory_bytes must be at least 1 MiB, got {}",
                self.device.memory_bytes
            ));
        }
        if self.device.compute_units == 0 || self.device.compute_units > 256 {
            return bad(format!("device.compute_units must be 1 to 256, got {}", self.device.compute_units));
        }
        if !(self.firmware.clock_hz.is_finite() && self.firmware.clock_hz > 0.0) {
            return bad(format!(
                "firmware.clock_hz must be a positive number, got {}",
                self.firmware.clock_hz
            ));
        }
        for (work, v) in &self.firmware.cycles {
            if !(v.is_finite() && *v >= 0.0) {
                return bad(format!("firmware.cycles.{work} must be zero or more, got {v}"));
            }
        }
        if self.firmware.io_buffer_bytes >= self.device.memory_bytes {
            return bad(format!(
                "firmware.io_buffer_bytes ({}) leaves no device memory of {}",
                self.firmware.io_buffer_bytes, self.device.memory_bytes
            ));
        }
        if self.default_capacity_bytes == 0 {
            return bad("default_capacity_bytes must be positive".into());
        }
        self.base_geometry().validate().or_else(|e| bad(format!("nand: {e}")))?;
        if let Some(net) = &self.network.storage {
            net.validate().or_else(bad)?;
        }
        if let Some(raw) = &self.nand.interface {
            raw.validate(&self.nand).or_else(bad)?;
        }
        Ok(())
    }

    /// The NAND geometry before sizing for a capacity (one block per chip).
    pub fn base_geometry(&self) -> Geometry {
        Geometry {
            channels: self.nand.channels,
            chips_per_channel: self.nand.chips_per_channel,
            blocks_per_chip: 1,
            pages_per_block: self.nand.pages_per_block,
            page_size: self.nand.page_size,
        }
    }

    /// Device memory the firmware keeps for itself on a device of `logical_pages` pages: the FTL's page
    /// map (4 bytes a page) if it lives in device memory, and the I/O buffers.
    pub fn firmware_memory_bytes(&self, logical_pages: u64) -> u64 {
        let map = if self.firmware.ftl_map_in_memory { logical_pages * 4 } else { 0 };
        map + self.firmware.io_buffer_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_loads_and_validates() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name).unwrap();
            assert_eq!(&p.name, name);
        }
        let p = Profile::load("smartssd").unwrap();
        assert_eq!(p.device.memory_bytes, 4 << 30);
        assert_eq!(p.device.internal_read_bw, 3.0e9);
        assert_eq!(Profile::load("smartssd-2016").unwrap().host_link.read_bw, 550e6);
        assert_eq!(Profile::load("jasmine").unwrap().nand.page_size, 16384);
        assert_eq!(Profile::load("bluedbm").unwrap().network.hop_latency_us, 0.48);
    }

    #[test]
    fn bluedbm_link_price_is_what_its_packet_format_sustains() {
        let p = Profile::load("bluedbm").unwrap();
        let net = p.network.storage.as_ref().unwrap();
        // 10 Gb/s x 64/66 x 106/128 payload bits per flit: 8.03 Gb/s (§6.3 measured 8.2).
        assert!(
            (net.payload_bw() - p.network.link_bw).abs() / p.network.link_bw < 1e-3,
            "{}",
            net.payload_bw()
        );
        assert!((net.flit_ps() - 13_200.0).abs() < 1e-6);
        let text = BUILTIN[3].1.replace("flit_payload_bits = 106", "flit_payload_bits = 200");
        assert!(Profile::from_toml(&text, "b.toml").unwrap_err().to_string().contains("flit_payload_bits"));
    }

    #[test]
    fn every_engine_prices_all_the_work_programs_and_host_operators_count() {
        use crate::work::{self, Ledger, SortClass};
        let mut all = Ledger::new();
        for item in [
            work::DECODE_CODES,
            work::DECODE_OUT_BYTES,
            work::GATHER_ROWS,
            work::GATHER_BYTES,
            work::SEARCH_BYTES,
            work::SHUFFLE_HASH_ROWS,
            work::SHUFFLE_GATHER_ROWS,
            work::SHUFFLE_GATHER_BYTES,
            work::SHUFFLE_MERGE_BYTES,
            work::ENCODE_BYTES,
            work::INTERSECT_ENTRIES,
            work::INTERSECT_SKIPPED,
            work::INTERSECT_ACCESSES,
        ] {
            work::add(&mut all, item, 1000);
        }
        SortClass::count(&mut all, work::SORT, 32, 1000);
        SortClass::count(&mut all, work::SHUFFLE_SORT, 64, 1000);
        work::count_merge(&mut all, 4, 1000);
        for (name, _) in BUILTIN {
            let p = Profile::load(name).unwrap();
            let mut engines = vec![("kernels", &p.kernels), ("host cpu", &p.host.cpu)];
            if let Some(a) = &p.host.accelerator {
                engines.push(("accelerator", &a.engine));
            }
            for (what, e) in engines {
                let priced = e.price(&all);
                assert!(priced.unpriced.is_empty(), "{name} {what}: {:?}", priced.unpriced);
                assert!(
                    priced.stages.contains_key("sort") && priced.stages.contains_key("merge"),
                    "{name} {what}"
                );
            }
        }
        for (name, _) in BUILTIN_HOSTS {
            assert_eq!(&HostProfile::load(name).unwrap().name, name);
        }
        assert_eq!(Profile::load("smartssd").unwrap().host.name, "i7-8700");
        assert!(HostProfile::load("nope").unwrap_err().to_string().contains("i7-8700"));
    }

    #[test]
    fn a_profile_stored_before_engines_existed_still_opens() {
        // What array.json and device.json held before: [compute] factors, host power in [power], no
        // kernels and no host. The built-in profile of the same name supplies them.
        let mut v = serde_json::to_value(Profile::load("smartssd").unwrap()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("kernels");
        o.remove("host");
        o.insert(
            "compute".into(),
            serde_json::json!({"host_factor": 1.0, "device_factor": {"default": 1.0}}),
        );
        o["power"]["host_active_w"] = 65.0.into();
        o["power"]["host_idle_w"] = 10.0.into();
        o["device"]["memory_bw"] = 1.0e9.into();
        let p: Profile = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(p.kernels, Profile::load("smartssd").unwrap().kernels);
        assert_eq!(p.host.name, "i7-8700");
        assert_eq!(p.device.memory_bw, 1.0e9); // what was stored is kept
                                               // One of another name still opens (its data stays readable); its work is named unpriced.
        v["name"] = "mine".into();
        let p: Profile = serde_json::from_value(v.clone()).unwrap();
        let mut l = crate::work::Ledger::new();
        crate::work::add(&mut l, crate::work::SEARCH_BYTES, 1);
        crate::work::SortClass::count(&mut l, crate::work::SORT, 32, 8);
        assert_eq!(p.kernels.price(&l).unpriced.len(), 3);
        assert_eq!(p.host.name, "unknown");
        // A profile file without engines is refused by name.
        v.as_object_mut().unwrap().remove("compute");
        let err = serde_json::from_value::<Profile>(v).unwrap_err().to_string();
        assert!(err.contains("mine") && err.contains("[kernels]"), "{err}");
        // One stored while the intersection model read DaMoN '16's Table 1 from [cpu] opens, [cpu] ignored.
        let mut v = serde_json::to_value(Profile::load("smartssd-2016").unwrap()).unwrap();
        v["cpu"] = serde_json::json!({"host_mem_access_ns": 5.0, "device_copy_ns": 150.0, "core_memory_bytes": 262144});
        let p: Profile = serde_json::from_value(v).unwrap();
        assert_eq!(p, Profile::load("smartssd-2016").unwrap());
        // A stored profile round-trips, its host inline.
        let p = Profile::load("tiny").unwrap();
        let back: Profile = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        // A mistake in an inline host is named.
        let mut v = serde_json::to_value(&p).unwrap();
        v["host"].as_object_mut().unwrap().remove("cores");
        let err = serde_json::from_value::<Profile>(v).unwrap_err().to_string();
        assert!(err.contains("[host]") && err.contains("missing field `cores`"), "{err}");
    }

    #[test]
    fn unknown_and_invalid_profiles_are_named() {
        let err = Profile::load("nope").unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("smartssd"), "{err}");
        let text = BUILTIN[4].1.replace("read_bw = 0.5e9", "read_bw = -1.0");
        let err = Profile::from_toml(&text, "bad.toml").unwrap_err().to_string();
        assert!(err.contains("host_link.read_bw"), "{err}");
        let text = BUILTIN[4].1.replace("page_size = 4096", "page_size = 1000");
        assert!(Profile::from_toml(&text, "bad.toml").unwrap_err().to_string().contains("page_size"));
        let text = BUILTIN[4].1.replace("compute_units = 2", "compute_units = 0");
        assert!(Profile::from_toml(&text, "bad.toml").is_err());
        assert!(Profile::from_toml("name = 3", "x").unwrap_err().to_string().contains("x"));
        let smartssd = BUILTIN.iter().find(|(n, _)| *n == "smartssd").unwrap().1;
        let text = smartssd.replace("shuffle_scratchpad_bytes = 2359296", "shuffle_scratchpad_bytes = 0");
        assert_ne!(text, smartssd);
        let err = Profile::from_toml(&text, "bad.toml").unwrap_err().to_string();
        assert!(err.contains("kernels.shuffle_scratchpad_bytes"), "{err}");
        let bluedbm = BUILTIN.iter().find(|(n, _)| *n == "bluedbm").unwrap().1;
        let text = bluedbm.replace("tags_per_card = 128 ", "tags_per_card = 2 ");
        assert_ne!(text, bluedbm);
        let err = Profile::from_toml(&text, "bad.toml").unwrap_err().to_string();
        assert!(err.contains("search_engines_per_bus (4) is more than tags_per_card (2)"), "{err}");
    }

    #[test]
    fn a_host_storage_stack_is_checked_and_defaults_when_absent() {
        let i7 = BUILTIN_HOSTS[0].1;
        let h: HostProfile = toml::from_str(i7).unwrap();
        assert_eq!((h.storage.request_bytes, h.storage.queue_depth), (131_072, 1));
        assert_eq!(h.accelerator.as_ref().and_then(|a| a.storage.as_ref()).map(|s| s.queue_depth), Some(8));
        h.validate().unwrap();
        let bad: HostProfile = toml::from_str(&i7.replacen("queue_depth = 1", "queue_depth = 0", 1)).unwrap();
        assert!(bad.validate().unwrap_err().contains("host.storage.queue_depth"));
        let bad: HostProfile =
            toml::from_str(&i7.replace("\"gather.rows\" = 64.0", "\"gather.rows\" = -1.0")).unwrap();
        assert!(bad.validate().unwrap_err().contains("memory_bytes"));
        // A host stored before storage stacks and memory traffic: deep queues, no costs.
        let start = i7.find("[storage]").unwrap();
        let end = start + i7[start..].find("\n\n").unwrap();
        let old = i7[..start].to_string() + &i7[end..];
        let old = &old[..old.find("[memory_bytes]").unwrap()];
        let h: HostProfile = toml::from_str(old).unwrap();
        assert_eq!(h.storage, StorageStack::default());
        assert!(h.memory_bytes.is_empty());
    }
}
