//! `insitu demo`: the tour a newcomer runs first. It builds an array, stores a generated text corpus
//! (striped over the devices), searches it inside the devices and on the host, checks both give the same
//! answer, reads the object back and verifies it byte for byte, and checks the array.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use insitu_host::blob::{self, Placement};
use insitu_host::search::{self, SearchPlacement};
use insitu_host::units::{human_bytes, parse_size};
use insitu_host::{Array, OpenOptions, Profile, Report};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cmd::Ctx;
use crate::output::{self, Output};

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "data",
    "storage",
    "flash",
    "page",
    "block",
    "device",
    "host",
    "sort",
    "shuffle",
    "table",
    "key",
    "index",
    "query",
    "memory",
    "bandwidth",
    "latency",
    "energy",
    "kernel",
    "partition",
    "list",
    "intersection",
    "search",
    "network",
    "node",
    "controller",
    "firmware",
    "program",
    "write",
    "read",
    "erase",
    "garbage",
    "collection",
    "wear",
    "leveling",
    "computational",
    "accelerator",
];
/// The demo searches for a phrase that the generator plants now and then, so the count is non-trivial.
const NEEDLE: &str = "in-storage computing";

/// Writes `size` bytes of Zipf-ish English-like text with the needle planted, deterministically from
/// `seed`; returns the CRC-32 of what it wrote. The file appears whole or not at all; the caller checks a
/// command's output path first (the demo writes its corpus into its own array's folder).
pub fn generate_corpus(path: &Path, size: u64, seed: u64) -> Result<u32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut w = insitu_host::outfile::OutFile::create_in_array(path)?;
    let mut crc = crc32fast::Hasher::new();
    let mut written = 0u64;
    let mut line = String::with_capacity(256);
    while written < size {
        line.clear();
        for _ in 0..12 {
            let r: f64 = rng.gen();
            let i = ((r * r * r) * WORDS.len() as f64) as usize;
            if rng.gen_ratio(1, 997) {
                line.push_str(NEEDLE);
            } else {
                line.push_str(WORDS[i.min(WORDS.len() - 1)]);
            }
            line.push(' ');
        }
        line.push('\n');
        let take = (line.len() as u64).min(size - written) as usize;
        w.write_all(&line.as_bytes()[..take])?;
        crc.update(&line.as_bytes()[..take]);
        written += take as u64;
    }
    w.commit()?;
    Ok(crc.finalize())
}

#[derive(Args, Debug)]
pub struct Demo {
    /// Size of the generated corpus.
    #[arg(long, default_value = "256MiB")]
    size: String,
    /// Number of devices of the demo array.
    #[arg(long, default_value_t = 4)]
    devices: u32,
    /// Hardware profile of the devices (`insitu profiles` lists them).
    #[arg(long, default_value = "smartssd")]
    profile: String,
}

impl Demo {
    pub fn run(self, ctx: &Ctx) -> Result<std::process::ExitCode> {
        // The demo clears what an earlier demo left, and nothing else: a folder it did not make (an
        // array, one whose array.json was lost, anyone's files) is refused, unless it is empty.
        let data = &ctx.data;
        if data.exists() && !data.join(".insitu-demo").exists() {
            let empty = data.read_dir().map(|mut d| d.next().is_none());
            match empty {
                Ok(true) => {}
                Ok(false) => bail!(
                    "{} holds files the demo did not make; give the demo another --data (a new or empty folder)",
                    data.display()
                ),
                Err(e) => bail!("cannot read {} ({e}); give the demo another --data", data.display()),
            }
        }
        run(ctx, parse_size(&self.size)?, self.devices, &self.profile)?;
        Ok(std::process::ExitCode::SUCCESS)
    }
}

fn run(ctx: &Ctx, size: u64, devices: u32, profile: &str) -> Result<()> {
    let (data, out): (&Path, &Output) = (&ctx.data, &ctx.out);
    if data.join(".insitu-demo").exists() {
        // Said, not done silently: whatever was added to the earlier demo's array goes with it.
        eprintln!("note: replacing the demo array an earlier `insitu demo` made at {}", data.display());
        std::fs::remove_dir_all(data)
            .with_context(|| format!("cannot clear the old demo at {}", data.display()))?;
    }
    let profile = ctx.profile(profile)?;
    let capacity = (size * 2 / devices as u64).max(256 << 20);
    // The mark first: a demo killed while it makes the array leaves a folder the next demo clears.
    std::fs::create_dir_all(data).with_context(|| format!("cannot make {}", data.display()))?;
    std::fs::write(data.join(".insitu-demo"), b"made by `insitu demo`\n")?;
    let array = Array::init(data, devices, profile, Some(capacity), None)?;
    crate::cmd::close(array);
    let opts = OpenOptions { transport: ctx.transport.clone(), host: ctx.host.clone(), ..Default::default() };
    let mut array = Array::open(data, opts)?;

    let corpus = data.join("corpus.txt");
    eprintln!("generating a {} text corpus ...", human_bytes(size));
    let want_crc = format!("{:08x}", generate_corpus(&corpus, size, 42)?);

    let bar = output::progress(size, "put");
    let put = blob::put(&mut array, &corpus, "corpus", Placement::Striped, &|d, _| {
        bar.set_position(d);
        Ok(())
    })?;
    bar.finish_and_clear();
    std::fs::remove_file(&corpus)?;
    let dev = search::search(&array, "corpus", NEEDLE.as_bytes(), SearchPlacement::Device, false)?;
    let host = search::search(&array, "corpus", NEEDLE.as_bytes(), SearchPlacement::Host, false)?;
    ensure!(dev.result["count"] == host.result["count"], "device and host placements disagree");
    let mut sink = CrcWriter::default();
    let get = blob::get(&array, "corpus", &mut sink, &blob::no_progress)?;
    let got_crc = format!("{:08x}", sink.0.finalize());
    ensure!(got_crc == want_crc, "the object read back differs from the file stored");
    let problems = array.fsck()?;
    ensure!(problems.is_empty(), "fsck found problems: {problems:?}");

    if out.json {
        println!(
            "{}",
            serde_json::json!({ "op": "demo", "result": { "put": put, "search_device": dev, "search_host": host, "get": get, "fsck": "clean" } })
        );
    } else {
        println!(
            "insitu demo: {} devices ({}), a {} corpus striped over them\n",
            devices,
            array.profile().name,
            human_bytes(size)
        );
        println!("{}\n", output::summary(&put));
        println!("{}\n", output::summary(&dev));
        println!("{}\n", output::summary(&host));
        println!("{}", side_by_side(&dev, &host));
        println!("\nthe same search priced on every built-in profile ({devices} devices):");
        println!(
            "{:<16}{:>16}{:>16}{:>12}{:>16}",
            "profile", "device (s)", "host (s)", "speed-up", "energy saved"
        );
        for (name, _) in insitu_host::profile::BUILTIN {
            let p = Profile::load(name)?;
            let (d, h) = (dev.remodel(&p), host.remodel(&p));
            println!(
                "{:<16}{:>16.5}{:>16.5}{:>11.2}x{:>15.2}x",
                name,
                d.time_s,
                h.time_s,
                h.time_s / d.time_s,
                h.energy_j / d.energy_j
            );
        }
        println!(
            "\nread back: {} bytes, crc32 {} matches the file; fsck: clean",
            get.result["size"], want_crc
        );
        // Name this binary as the user can run it: by its path unless it is the `insitu` on PATH.
        let exe = std::env::current_exe().ok();
        let on_path = std::env::var_os("PATH").is_some_and(|p| {
            std::env::split_paths(&p).any(|d| {
                let c = d.join("insitu");
                exe.as_ref().is_some_and(|e| c.canonicalize().ok().as_ref() == Some(e))
            })
        });
        let cwd = std::env::current_dir().unwrap_or_default();
        let shown = match (&exe, on_path) {
            (Some(e), false) => match e.strip_prefix(&cwd) {
                Ok(rel) => format!("./{}", rel.display()),
                Err(_) => e.display().to_string(),
            },
            _ => "insitu".to_string(),
        };
        println!(
            "the array stays at {}: try `{shown} --data {} search corpus flash --placement host`",
            data.display(),
            data.display()
        );
    }
    crate::cmd::close(array);
    Ok(())
}

fn side_by_side(dev: &Report, host: &Report) -> String {
    let ratio = |a: f64, b: f64| if a > 0.0 { b / a } else { f64::NAN };
    format!(
        "search {:?}: {} matches either way\n\
         {:<28}{:>14}{:>14}{:>10}\n\
         {:<28}{:>14.4}{:>14.4}{:>9.1}x\n\
         {:<28}{:>14.4}{:>14.4}{:>9.1}x\n\
         {:<28}{:>14}{:>14}\n\
         {:<28}{:>14.5}{:>14.5}{:>9.1}x\n\
         {:<28}{:>14.3}{:>14.3}{:>9.1}x",
        NEEDLE,
        dev.result["count"],
        "",
        "device",
        "host",
        "host/dev",
        "measured wall (s)",
        dev.wall_s,
        host.wall_s,
        ratio(dev.wall_s, host.wall_s),
        "host cpu (s)",
        dev.host_cpu_s,
        host.host_cpu_s,
        ratio(dev.host_cpu_s, host.host_cpu_s),
        "bytes over the host link",
        human_bytes(dev.bytes.device_to_host),
        human_bytes(host.bytes.device_to_host),
        "modeled time (s)",
        dev.modeled.time_s,
        host.modeled.time_s,
        ratio(dev.modeled.time_s, host.modeled.time_s),
        "modeled energy (J)",
        dev.modeled.energy_j,
        host.modeled.energy_j,
        ratio(dev.modeled.energy_j, host.modeled.energy_j),
    )
}

#[derive(Default)]
struct CrcWriter(crc32fast::Hasher);

impl Write for CrcWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
