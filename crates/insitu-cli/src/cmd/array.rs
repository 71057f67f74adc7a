//! Commands on the array as a whole: `init`, `stats`, `fsck`, `profiles`, and `serve-device` (the device
//! side of `--transport process`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use insitu_host::units::{human_bytes, parse_size};
use insitu_host::{Array, Profile, ServeOptions};
use serde_json::json;

use crate::cmd::Ctx;

#[derive(Args, Debug)]
pub struct Init {
    /// Number of devices.
    #[arg(long, default_value_t = 4)]
    devices: u32,
    /// A BlueDBM appliance of this many nodes (one device each), cabled by `--topology`.
    #[arg(long, conflicts_with = "devices")]
    nodes: Option<u32>,
    /// The appliance's storage network: ring, line, mesh, full, or a topology file (.toml).
    #[arg(long)]
    topology: Option<String>,
    /// Cables between neighbours (for a topology shape).
    #[arg(long, default_value_t = 1)]
    lanes: u32,
    /// Built-in profile name (see `insitu profiles`) or path to a TOML profile.
    #[arg(long, default_value = "smartssd")]
    profile: String,
    /// Logical capacity per device (e.g. 64GiB, 4TB); the image is sparse. Default: the profile's.
    #[arg(long)]
    capacity: Option<String>,
    /// Stripe unit for objects spread over all devices (default 4MiB).
    #[arg(long)]
    stripe_unit: Option<String>,
}

impl Init {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let profile = ctx.profile(&self.profile)?;
        let capacity = self.capacity.as_deref().map(parse_size).transpose()?;
        let unit = self.stripe_unit.as_deref().map(parse_size).transpose()?;
        // An appliance's topology is checked before anything is created.
        let topology = match (&self.topology, self.nodes) {
            (Some(t), n) => Some(insitu_host::bluedbm::topology(t, n, self.lanes, &profile)?),
            (None, Some(_)) => anyhow::bail!("--nodes makes an appliance: give its --topology too"),
            (None, None) => None,
        };
        let devices = topology.as_ref().map_or(self.devices, |t| t.nodes());
        // What was in the directory before: said after, so that the array's files beside others (a
        // mistyped --data) are no surprise.
        let others: Vec<String> = std::fs::read_dir(&ctx.data)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        // Less what an init cut off before left (an empty catalog, device folders, the reserve).
        let others: Vec<String> =
            others.into_iter().filter(|n| !insitu_host::array::is_array_entry(n)).collect();
        let mut array = Array::init(&ctx.data, devices, profile, capacity, unit)?;
        if let Some(t) = topology {
            array.set_topology(t)?;
        }
        let c = array.config().clone();
        crate::cmd::close(array);
        // Said when the geometry rounded the capacity up by more than a little (a `bluedbm` node holds
        // 238 MiB of objects at the least).
        let asked = capacity.unwrap_or(c.profile.default_capacity_bytes);
        if c.capacity_bytes > asked + asked / 20 {
            let g = c.profile.base_geometry();
            eprintln!(
                "note: {} asked, {} a device: a {} device holds whole erase blocks ({}) on each of its {} chips",
                human_bytes(asked),
                human_bytes(c.capacity_bytes),
                c.profile.name,
                human_bytes(g.block_bytes()),
                g.chips()
            );
        }
        if let Some(first) = others.iter().min() {
            eprintln!(
                "note: {} held {} other entr{} ({first}{}); the array's files are beside them",
                ctx.data.display(),
                others.len(),
                if others.len() == 1 { "y" } else { "ies" },
                if others.len() > 1 { ", ..." } else { "" }
            );
        }
        // Flash images are sparse: they take disk space as pages are written. Say so when the array could
        // outgrow its file system (as LVM does for thin volumes beyond their pool).
        let most = c.capacity_bytes.saturating_mul(c.devices as u64);
        if let Some(free) = insitu_host::free_bytes(&ctx.data).filter(|f| most > *f) {
            eprintln!(
                "warning: the {} device(s) of {} can take up to {} of disk as they fill, and {} is free where \
                 {} is: writes will fail with \"No space left on device\" once it is full (what is stored stays \
                 intact; --capacity makes the devices smaller)",
                c.devices,
                human_bytes(c.capacity_bytes),
                human_bytes(most),
                human_bytes(free),
                ctx.data.display()
            );
        }
        ctx.out.plain(
            "init",
            json!({
                "data": ctx.data, "devices": c.devices, "profile": c.profile.name,
                "capacity_bytes": c.capacity_bytes, "stripe_unit": c.stripe_unit,
                "topology": c.topology.as_ref().map(|t| json!({"nodes": t.nodes(), "cables": t.cables().len()})),
            }),
            &match &c.topology {
                Some(t) => format!(
                    "created an appliance of {} {} node(s) of {} each, {} cable(s) between them, at {}",
                    c.devices,
                    c.profile.name,
                    human_bytes(c.capacity_bytes),
                    t.cables().len(),
                    ctx.data.display()
                ),
                None => format!(
                    "created an array of {} {} device(s) of {} each at {}",
                    c.devices,
                    c.profile.name,
                    human_bytes(c.capacity_bytes),
                    ctx.data.display()
                ),
            },
        );
        Ok(ExitCode::SUCCESS)
    }
}

pub fn stats(ctx: &Ctx) -> Result<ExitCode> {
    let array = ctx.open()?;
    let (json, text) = insitu_host::stats::stats(&array)?;
    crate::cmd::close(array);
    ctx.out.plain("stats", json, &text);
    Ok(ExitCode::SUCCESS)
}

pub fn fsck(ctx: &Ctx, repair: bool) -> Result<ExitCode> {
    if repair {
        for done in Array::repair_devices(&ctx.data)? {
            eprintln!("repair: {done}");
        }
        for done in insitu_host::bluedbm::fs::repair(&ctx.data)? {
            eprintln!("repair: {done}");
        }
        let mut array = ctx.open()?;
        let (unlisted, left) = array.unlist_mismatched()?;
        for name in unlisted {
            eprintln!("repair: {name} did not match its parts: its parts are kept in quarantine");
        }
        for name in left {
            eprintln!(
                "repair: {name} does not match its parts, and they do not describe an object whole: left as it \
                 is (reads refuse it; `insitu rm {name}` removes it and its parts)"
            );
        }
        for r in array.restore_quarantined()? {
            eprintln!("repair: restored object {r} from parts kept in quarantine");
        }
        let removed = array.remove_quarantined()?;
        crate::cmd::close(array);
        if !removed.is_empty() && !ctx.quiet {
            eprintln!(
                "repair: removed {} part(s) kept in quarantine: {}",
                removed.len(),
                crate::cmd::few(&removed)
            );
        }
    }
    // Every page of every device and file is read back: a spinner shows it working.
    let summary = crate::output::busy("checking", || {
        let device_wait = std::time::Duration::from_secs_f64(ctx.wait_s);
        ctx.when_free(|wait| insitu_host::fsck::check_dir(&ctx.data, &ctx.transport, wait, device_wait))
    })?;
    let (problems, notes) = (&summary.problems, &summary.notes);
    let ok = problems.is_empty();
    let mut text = if ok {
        format!("{}: clean", ctx.data.display())
    } else {
        format!("{}: {} problem(s)\n  {}", ctx.data.display(), problems.len(), problems.join("\n  "))
    };
    for n in notes {
        text.push_str(&format!("\n  {n}"));
    }
    ctx.out.plain("fsck", json!({ "ok": ok, "problems": problems, "notes": notes }), &text);
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

pub fn profiles(ctx: &Ctx) -> Result<ExitCode> {
    let mut list = Vec::new();
    let mut text = String::new();
    for (name, _) in insitu_host::profile::BUILTIN {
        let p = Profile::load(name)?;
        text.push_str(&format!("{:<14} {} (host: {})\n", p.name, p.description, p.host.name));
        list.push(json!({ "name": p.name, "description": p.description, "host": p.host.name }));
    }
    text.push_str("\nhosts (--host-profile):\n");
    let mut hosts = Vec::new();
    for (name, _) in insitu_host::profile::BUILTIN_HOSTS {
        let h = insitu_host::profile::HostProfile::load(name)?;
        text.push_str(&format!("{:<16} {}\n", h.name, h.description));
        hosts.push(json!({ "name": h.name, "description": h.description }));
    }
    let list = json!({ "devices": list, "hosts": hosts });
    ctx.out.plain("profiles", list, text.trim_end());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ServeDevice {
    /// The device's directory (`devN` of an array).
    dir: PathBuf,
    /// The Unix socket to serve on (default: DIR/device.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Another device of the array, for device-to-device copies: ID=SOCKET (repeatable).
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(u32, PathBuf)>,
    /// Stop when the first host that connects disconnects (how the CLI runs its servers).
    #[arg(long)]
    exit_with_owner: bool,
}

fn parse_peer(s: &str) -> std::result::Result<(u32, PathBuf), String> {
    let (id, path) = s.split_once('=').ok_or_else(|| format!("{s:?}: use ID=SOCKET"))?;
    Ok((id.parse().map_err(|_| format!("{id:?} is not a device id"))?, PathBuf::from(path)))
}

impl ServeDevice {
    /// Serves the device; `wait_s` is how long to wait while another process holds it (`--wait`).
    pub fn run(self, wait_s: f64) -> Result<ExitCode> {
        crate::sys::ignore_sigpipe();
        let socket = self.socket.unwrap_or_else(|| self.dir.join("device.sock"));
        let opts = ServeOptions {
            dir: self.dir,
            socket,
            peers: self.peers,
            exit_with_owner: self.exit_with_owner,
            lock_wait: std::time::Duration::from_secs_f64(wait_s),
        };
        match insitu_host::serve_device(&opts) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            // Its host reads why from the `error` line on stdout and names the device itself: the same
            // fault printed here too would say it twice, the first time without the device's number.
            Err(_) if opts.exit_with_owner => Ok(ExitCode::FAILURE),
            Err(e) => Err(e.into()),
        }
    }
}
