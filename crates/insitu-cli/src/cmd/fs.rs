//! `fs`: BlueDBM's file system (§4) over the appliance's raw flash: files as lists of physical pages
//! that in-store processors can be handed.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use insitu_host::bluedbm::fs::{catalog, Access, Fs, FsFile, ViaReport};
use insitu_host::bluedbm::power::Modeled;
use insitu_host::report::Measure;
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
                let measure = Measure::start("fs put", &array)?;
                let stored = if stdin {
                    fs.put(&name, &mut BufReader::with_capacity(1 << 20, std::io::stdin().lock()), node)?
                } else {
                    let f = File::open(&file).with_context(|| format!("cannot open {}", file.display()))?;
                    // A file of known size that cannot fit is refused before a page is written.
                    if let Some(m) = f.metadata().ok().filter(|m| m.is_file()) {
                        fs.check_put(&name, m.len(), node)?;
                    }
                    fs.put(&name, &mut BufReader::with_capacity(1 << 20, f), node)?
                };
                let nodes: std::collections::BTreeSet<u32> = stored.pages.iter().map(|p| p.node).collect();
                let headline = format!(
                    "stored {} ({}) in {} on node(s) {:?}",
                    stored.name,
                    human_bytes(stored.size),
                    count(stored.pages.len() as u64, "page"),
                    nodes
                );
                let result = json!({"name": stored.name, "size": stored.size, "pages": stored.pages.len(), "nodes": nodes});
                ctx.out.report(&measure.finish(&array, headline, result)?);
            }
            FsCmd::Get { name, output, via, from } => {
                let modeled = |r: &ViaReport| r.modeled(array.profile(), fs.node_count(), fs.page_size());
                // The read's report with its modeled time and energy inside (as Python's `fs_get_via` has it).
                let report = |r: &ViaReport| {
                    let mut v = json!(r);
                    v["modeled"] = json!(modeled(r));
                    v
                };
                let read = |w: &mut dyn Write| -> Result<(u64, Option<ViaReport>)> {
                    Ok(match via {
                        None => (fs.get(&name, w)?, None),
                        Some(v) => {
                            let r = fs.get_via(&name, from, v.access(), w)?;
                            (r.bytes, Some(r))
                        }
                    })
                };
                // A read by the host through the file system is measured and modeled as every command is;
                // a read by one node over the storage network carries its own simulation.
                let measure = via.is_none().then(|| Measure::start("fs get", &array)).transpose()?;
                if output.as_os_str() == "-" {
                    let stdout = std::io::stdout();
                    let mut lock = stdout.lock();
                    let (n, via) = read(&mut lock)?;
                    lock.flush()?;
                    // The data owns stdout: what was read, and at what cost, goes to stderr.
                    if let Some(m) = measure {
                        let headline = format!("read {name} ({}) to standard output", human_bytes(n));
                        let result = json!({"name": name, "size": n, "output": "-"});
                        ctx.out.report_to_stderr(&m.finish(&array, headline, result)?);
                    } else if let Some(r) = &via {
                        ctx.out.plain_to_stderr(
                            "fs get",
                            json!({"name": name, "size": n, "output": "-", "via": report(r), "modeled": modeled(r)}),
                            &via_text(r, &modeled(r)),
                        );
                    }
                } else {
                    let mut w = insitu_host::outfile::OutFile::create(&output)?;
                    let (n, via) = read(&mut w)?;
                    w.commit()?;
                    let mut text = format!("wrote {name} ({}) to {}", human_bytes(n), output.display());
                    if let Some(m) = measure {
                        let result = json!({"name": name, "size": n, "output": output});
                        ctx.out.report(&m.finish(&array, text, result)?);
                    } else if let Some(r) = &via {
                        text = format!("{text}\n{}", via_text(r, &modeled(r)));
                        ctx.out.costed(
                            "fs get",
                            json!({"name": name, "size": n, "output": output, "via": report(r),
                                   "modeled": modeled(r)}),
                            &text,
                        );
                    }
                }
            }
            FsCmd::Ls => {
                let (files, mut text) = listing(fs.files(), &[]);
                let s = fs.stats();
                text += &format!(
                    "{} file(s), {}; pages: {} live, {} dead; {} erased block(s) free",
                    s.files,
                    human_bytes(s.bytes),
                    s.live_pages,
                    s.dead_pages,
                    s.free_blocks
                );
                ctx.out.plain("fs ls", json!({"files": files, "stats": s, "offline": []}), &text);
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
            FsCmd::Gc => {
                // What the host's disk got back is measured, not inferred: a removed file's pages were
                // given back when it was removed, and punching them again gives nothing.
                let measure = Measure::start("fs gc", &array)?;
                let (before, _) = insitu_host::stats::disk_use(array.dir());
                let g = fs.collect_garbage()?;
                let (after, _) = insitu_host::stats::disk_use(array.dir());
                let s = fs.stats();
                let headline = format!(
                    "erased {} block(s) of dead pages; cleaned {} block(s) at least half dead (moved {} live \
                     page(s)); {} erased block(s) free; the appliance's files take {} of the host's disk ({} \
                     before)",
                    g.erased_blocks,
                    g.cleaned_blocks,
                    g.moved_pages,
                    s.free_blocks,
                    human_bytes(after),
                    human_bytes(before)
                );
                let result = json!({"erased_blocks": g.erased_blocks, "cleaned_blocks": g.cleaned_blocks,
                                    "moved_pages": g.moved_pages, "discarded_pages": g.discarded_pages,
                                    "disk_bytes_before": before, "disk_bytes_after": after, "stats": s});
                ctx.out.report(&measure.finish(&array, headline, result)?);
            }
        }
        drop(fs);
        crate::cmd::close(array);
        Ok(ExitCode::SUCCESS)
    }
}

/// The files as JSON and as lines for people, those with pages on an `offline` node marked.
fn listing<'f>(files: impl Iterator<Item = &'f FsFile>, offline: &[u32]) -> (Vec<serde_json::Value>, String) {
    let (mut json, mut text) = (Vec::new(), String::new());
    for f in files {
        let nodes: std::collections::BTreeSet<u32> = f.pages.iter().map(|p| p.node).collect();
        json.push(json!({"name": f.name, "size": f.size, "pages": f.pages.len(), "nodes": nodes}));
        let down: Vec<String> = nodes.iter().filter(|n| offline.contains(n)).map(|n| n.to_string()).collect();
        let mark = match down.as_slice() {
            [] => String::new(),
            d => format!("  (pages on offline node {})", d.join(", ")),
        };
        text += &format!("{:>12}  {:>8} pages  {}{mark}\n", f.size, f.pages.len(), f.name);
    }
    (json, text)
}

impl FsCmd {
    /// `fs ls` and `fs pages` while a node is offline (`why`): from the host's index and journal alone.
    fn without_nodes(self, ctx: &Ctx, array: insitu_host::Array) -> Result<ExitCode> {
        let files = catalog(&array)?;
        let offline: Vec<u32> = array.offline().map(|(n, _)| n).collect();
        crate::cmd::close(array);
        match self {
            FsCmd::Ls => {
                eprintln!(
                    "note: the files as the host's index holds them; the nodes' space is not known while a \
                     node is offline"
                );
                let (json, mut text) = listing(files.iter(), &offline);
                text += &format!("{} file(s); offline node(s): {offline:?}", files.len());
                ctx.out.plain("fs ls", json!({"files": json, "stats": null, "offline": offline}), &text);
            }
            FsCmd::Pages { name } => {
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
