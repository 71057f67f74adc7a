//! `fs`: BlueDBM's file system (§4) over the appliance's raw flash: files as lists of physical pages
//! that in-store processors can be handed.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use insitu_host::bluedbm::fs::{catalog, Access, Fs, ViaReport};
use insitu_host::bluedbm::ops;
use insitu_host::bluedbm::power::Modeled;
use insitu_host::HostError;
use serde_json::json;

use crate::cmd::{name_for, Ctx};
use insitu_host::units::{count, human_bytes};

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum Via {
    Isp,
    Host,
}

impl Via {
    fn access(self) -> Access {
        match self {
            Via::Isp => Access::IspFlash,
            Via::Host => Access::HostFlash,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum FsCmd {
    /// Store a file, striped over every node's cards and buses (or kept on one node).
    Put {
        /// The file to store (`-`: standard input, with --name).
        file: PathBuf,
        /// Name in the file system (default: the file's name).
        #[arg(long)]
        name: Option<String>,
        /// Keep the file on this node.
        #[arg(long)]
        node: Option<u32>,
    },
    /// Write a file out (to stdout unless -o is given, as `insitu get`). By default each node's host reads
    /// its pages; with `--via`, one node reads them all over the storage network (BlueDBM §3, §6.4) and the
    /// read is modeled.
    Get {
        /// The file's name in the file system.
        name: String,
        /// Where to write the file (- for standard output).
        #[arg(short, long, default_value = "-")]
        output: PathBuf,
        /// Who reads: node `--from`'s in-store processor (`isp`: ISP-Local and ISP-F) or its host
        /// through its device (`host`: Host-Local and H-F); remote pages come through their nodes'
        /// splitters and no other host.
        #[arg(long, value_enum)]
        via: Option<Via>,
        /// The reading node (with `--via`).
        #[arg(long, default_value_t = 0, requires = "via")]
        from: u32,
    },
    /// Files, their sizes and where they live; space in pages.
    Ls,
    /// Remove a file (its pages' disk space is given back at once; their flash, by cleaning: `fs gc`, or a
    /// put that needs the room).
    Rm {
        /// The file to remove.
        name: String,
    },
    /// A file's physical pages, one per line: node card bus chip block page.
    Pages {
        /// The file.
        name: String,
    },
    /// Reclaim dead pages: erase every block whose pages are all dead, clean every closed block at least
    /// half dead (its live pages moved, then erased), give back the disk space of the rest.
    Gc,
}

impl FsCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        if let FsCmd::Get { output, .. } = &self {
            ctx.out.data_to_stdout(output.as_os_str() == "-");
        }
        let array = ctx.open()?;
        // The listing and the page table are the host's: read without the nodes (and without opening the
        // file system, which would recover its journal) while one is offline.
        if array.offline().next().is_some() && matches!(self, FsCmd::Ls | FsCmd::Pages { .. }) {
            return self.without_nodes(ctx, array);
        }
        let mut fs = Fs::open(&array)?;
        let r = fs.report();
        if !r.damaged.is_empty() {
            eprintln!(
                "damaged: {} name(s) pages that are not programmed (rm removes them)",
                r.damaged.join(", ")
            );
        }
        if r.torn_journal_bytes > 0 {
            eprintln!(
                "recovered: cut {} byte(s) of a torn record from the file system's journal",
                r.torn_journal_bytes
            );
        }
        for n in &r.notes {
            eprintln!("recovered: {n}");
        }
        match self {
            FsCmd::Put { file, name, node } => {
                let stdin = file.as_os_str() == "-";
                if stdin && name.is_none() {
                    anyhow::bail!("reading standard input (-) needs --name for the file");
                }
                let name = name_for(name, &file, true, "file")?;
                let report = if stdin {
                    let mut input = BufReader::with_capacity(1 << 20, std::io::stdin().lock());
                    ops::put(&array, &mut fs, &name, &mut input, None, node)?
                } else {
                    let f = File::open(&file).with_context(|| format!("cannot open {}", file.display()))?;
                    // A file of known size that cannot fit is refused before a page is written.
                    let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
                    ops::put(&array, &mut fs, &name, &mut BufReader::with_capacity(1 << 20, f), size, node)?
                };
                ctx.out.report(&report);
            }
            FsCmd::Get { name, output, via, from } => {
                let modeled = |r: &ViaReport| r.modeled(array.profile(), fs.node_count(), fs.page_size());
                // The read's report with its modeled time and energy inside (as Python's `fs_get_via` has it).
                let report = |r: &ViaReport| {
                    let mut v = json!(r);
                    v["modeled"] = json!(modeled(r));
                    v
                };
                // A read by the host through the file system is measured and modeled as every command is;
                // a read by one node over the storage network carries its own simulation.
                match via {
                    None if output.as_os_str() == "-" => {
                        let stdout = std::io::stdout();
                        let mut lock = stdout.lock();
                        let r = ops::get(&array, &fs, &name, &mut lock, Some("-"))?;
                        lock.flush()?;
                        // The data owns stdout: what was read, and at what cost, goes to stderr.
                        ctx.out.report_to_stderr(&r);
                    }
                    None => {
                        let mut w = insitu_host::outfile::OutFile::create(&output)?;
                        let r = ops::get(&array, &fs, &name, &mut w, Some(&output.display().to_string()))?;
                        w.commit()?;
                        ctx.out.report(&r);
                    }
                    Some(via) if output.as_os_str() == "-" => {
                        let stdout = std::io::stdout();
                        let mut lock = stdout.lock();
                        let r = fs.get_via(&name, from, via.access(), &mut lock)?;
                        lock.flush()?;
                        ctx.out.plain_to_stderr(
                        "fs get",
                        json!({"name": name, "size": r.bytes, "output": "-", "via": report(&r), "modeled": modeled(&r)}),
                        &via_text(&r, &modeled(&r)),
                    );
                    }
                    Some(via) => {
                        let mut w = insitu_host::outfile::OutFile::create(&output)?;
                        let r = fs.get_via(&name, from, via.access(), &mut w)?;
                        w.commit()?;
                        let text = format!(
                            "wrote {name} ({}) to {}\n{}",
                            human_bytes(r.bytes),
                            output.display(),
                            via_text(&r, &modeled(&r))
                        );
                        ctx.out.costed(
                            "fs get",
                            json!({"name": name, "size": r.bytes, "output": output, "via": report(&r),
                               "modeled": modeled(&r)}),
                            &text,
                        );
                    }
                }
            }
            FsCmd::Ls => {
                let (result, text) = ops::listing(&array, Some(&fs))?;
                ctx.out.plain("fs ls", result, &text);
            }
            FsCmd::Rm { name } => {
                fs.remove(&name)?;
                ctx.out.plain("fs rm", json!({"removed": name}), &format!("removed {name}"));
            }
            FsCmd::Pages { name } => {
                let f = fs.file(&name)?;
                let text: Vec<String> = f.pages.iter().map(|p| p.to_string()).collect();
                ctx.out.plain("fs pages", json!({"name": name, "pages": f.pages}), &text.join("\n"));
            }
            FsCmd::Gc => ctx.out.report(&ops::gc(&array, &mut fs)?),
        }
        drop(fs);
        crate::cmd::close(array);
        Ok(ExitCode::SUCCESS)
    }
}

impl FsCmd {
    /// `fs ls` and `fs pages` while a node is offline (`why`): from the host's index and journal alone.
    fn without_nodes(self, ctx: &Ctx, array: insitu_host::Array) -> Result<ExitCode> {
        match self {
            FsCmd::Ls => {
                eprintln!(
                    "note: the files as the host's index holds them; the nodes' space is not known while a \
                     node is offline"
                );
                let (result, text) = ops::listing(&array, None)?;
                crate::cmd::close(array);
                ctx.out.plain("fs ls", result, &text);
            }
            FsCmd::Pages { name } => {
                let files = catalog(&array)?;
                crate::cmd::close(array);
                let f =
                    files.iter().find(|f| f.name == name).ok_or_else(|| HostError::NoFile(name.clone()))?;
                let text: Vec<String> = f.pages.iter().map(|p| p.to_string()).collect();
                ctx.out.plain("fs pages", json!({"name": name, "pages": f.pages}), &text.join("\n"));
            }
            _ => unreachable!("only the listing and the page table are read without the nodes"),
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// A read by one node, for people: who read, where the pages came from, modeled and measured.
fn via_text(r: &ViaReport, m: &Modeled) -> String {
    let who = match r.access {
        Access::IspFlash => format!("node {}'s in-store processor", r.origin),
        _ => format!("node {}'s host", r.origin),
    };
    let gbps = |s: f64| if s > 0.0 { r.bytes as f64 / s / 1e9 } else { 0.0 };
    format!(
        "  read by {who}: {}, {} on node {}; {} from other nodes over the storage network ({} in {}, {})\n  modeled   {}: {:.6} s ({:.2} GB/s), {:.3} J on {} node(s)   measured here: {:.3} s ({:.2} GB/s)",
        count(r.pages, "page"),
        r.local_pages,
        r.origin,
        r.pages - r.local_pages,
        human_bytes(r.network_bytes),
        count(r.network_messages, "message"),
        count(r.hops, "hop"),
        m.profile,
        r.modeled_s,
        gbps(r.modeled_s),
        m.energy_j,
        m.nodes,
        r.wall_s,
        gbps(r.wall_s),
    )
}
