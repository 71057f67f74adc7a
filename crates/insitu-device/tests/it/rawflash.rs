//! The raw flash interface (BlueDBM §3.1) against what must hold of it: pages come back exactly as
//! written, out of order and interleaved; the NAND rules and the tag rules refuse bad commands by name;
//! the splitter shares a card among sources with back-pressure and renamed tags; the flash server hands
//! pages out in request order; the timing is what the profile's figures add up to; and the flash layer's
//! FTL behaves the same over the raw interface as over the NAND image.

use std::collections::HashMap;

use insitu_device::rawflash::{
    AddressTranslation, Delivery, Event, FlashAddr, FlashCommand, FlashController, FlashServer, Ps,
    RawConfig, RawFlashError, Source, Splitter, TaggedMedia,
};
use insitu_device::Profile;
use insitu_flash::ftl::Ftl;
use insitu_flash::nand::Nand;
use insitu_flash::raw::RawFlash;
use insitu_flash::Geometry;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn profile() -> Profile {
    Profile::load("bluedbm").unwrap()
}

fn cfg() -> RawConfig {
    RawConfig::from_profile(&profile()).unwrap()
}

/// The bluedbm geometry with few blocks per chip (2 cards x 8 buses x 8 chips x `blocks`).
fn controller(dir: &std::path::Path, blocks: u64) -> FlashController<Nand> {
    let geo = Geometry { blocks_per_chip: blocks, ..profile().base_geometry() };
    FlashController::new(Nand::open(dir, geo).unwrap(), cfg()).unwrap()
}

fn page_of(addr: &FlashAddr, salt: u8) -> Vec<u8> {
    let seed =
        (addr.card * 1000 + addr.bus * 100 + addr.chip * 10) as u64 + addr.block * 7 + addr.page as u64;
    (0..8192u64).map(|i| (i.wrapping_mul(31) ^ seed ^ salt as u64) as u8).collect()
}

/// Writes `addrs` (each block's pages in order) through the controller, one tag per command.
fn write_all(ctrl: &mut FlashController<Nand>, addrs: &[FlashAddr]) {
    for (i, a) in addrs.iter().enumerate() {
        ctrl.issue(FlashCommand::write(*a, i as u32 % 64, i as u64)).unwrap();
        loop {
            let c = ctrl.poll().unwrap();
            match c.event {
                Event::WriteDataRequest => ctrl.write_data(c.card, c.tag, &page_of(a, 0)).unwrap(),
                Event::Ack(s) => {
                    s.unwrap();
                    break;
                }
                Event::ReadData(_) => panic!("no read was issued"),
            }
        }
    }
}

#[test]
fn reads_come_back_exact_out_of_order_and_interleaved() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 2);
    // One page on each bus of card 0 (chip 0), and a second page on bus 0's chip 1.
    let mut addrs: Vec<FlashAddr> =
        (0..8).map(|bus| FlashAddr { card: 0, bus, chip: 0, block: 0, page: 0 }).collect();
    addrs.push(FlashAddr { card: 0, bus: 0, chip: 1, block: 0, page: 0 });
    write_all(&mut ctrl, &addrs);
    for (tag, a) in addrs.iter().enumerate() {
        ctrl.issue(FlashCommand::read(*a, tag as u32)).unwrap();
    }
    let mut pages: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut order = Vec::new();
    let mut slices = Vec::new();
    let mut last_at = 0;
    while let Some(c) = ctrl.poll() {
        assert!(c.at_ps >= last_at, "events come in time order");
        last_at = c.at_ps;
        match c.event {
            Event::ReadData(s) => {
                let buf = pages.entry(c.tag).or_insert_with(|| vec![0; 8192]);
                assert_eq!(s.spare, c.tag as u64, "the spare area written with the page");
                buf[s.offset()..s.offset() + s.bytes().len()].copy_from_slice(s.bytes());
                slices.push(c.tag);
                if s.last {
                    order.push(c.tag);
                }
            }
            Event::Ack(s) => panic!("reads end with their last slice, not an acknowledgement: {s:?}"),
            Event::WriteDataRequest => panic!("no write pending"),
        }
    }
    for (tag, a) in addrs.iter().enumerate() {
        assert_eq!(pages[&(tag as u32)], page_of(a, 0), "page {a}");
    }
    // The two pages of bus 0 share the bus: the second waits for the first, so it finishes last.
    assert_eq!(*order.last().unwrap(), 8, "completion order {order:?}");
    // Slices of different reads interleave on the card's path.
    let switches = slices.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches > 8 * 4, "slices of concurrent reads interleave ({switches} switches)");
}

/// Per read (by tag): its page as assembled, when its first byte and its last came, and how many
/// events it took.
type Seen = HashMap<u32, (Vec<u8>, Ps, Ps, usize)>;

/// Runs `reads` (address, delivery), up to 128 in flight per card, on `ctrl`: what each read saw, and
/// the order reads ended in.
fn run_reads(ctrl: &mut FlashController<Nand>, reads: &[(FlashAddr, Delivery)]) -> (Seen, Vec<u32>) {
    let (mut next, mut free) = (0, vec![(0..128u32).rev().collect::<Vec<_>>(); 2]);
    let mut by_tag: HashMap<u32, u32> = HashMap::new();
    let (mut seen, mut ended) = (Seen::new(), Vec::new());
    loop {
        while next < reads.len() {
            let (a, delivery) = reads[next];
            let Some(tag) = free[a.card as usize].pop() else { break };
            ctrl.issue(FlashCommand { delivery, ..FlashCommand::read(a, tag) }).unwrap();
            by_tag.insert(a.card * 1000 + tag, next as u32);
            next += 1;
        }
        let Some(c) = ctrl.poll() else { break };
        let Event::ReadData(s) = &c.event else { panic!("a read failed: {:?}", c.event) };
        let i = by_tag[&(c.card * 1000 + c.tag)];
        let e = seen.entry(i).or_insert_with(|| (vec![0; 8192], c.at_ps, 0, 0));
        e.0[s.offset()..s.offset() + s.bytes().len()].copy_from_slice(s.bytes());
        e.1 = e.1.min(s.first_at_ps);
        (e.2, e.3) = (c.at_ps, e.3 + 1);
        if s.last {
            free[c.card as usize].push(c.tag);
            ended.push(i);
        }
    }
    (seen, ended)
}

#[test]
fn a_whole_page_read_ends_when_its_slices_would_with_the_same_bytes() {
    let mut addrs = Vec::new();
    for card in 0..2 {
        for bus in 0..8 {
            for page in 0..4 {
                addrs.push(FlashAddr { card, bus, chip: bus % 2, block: 0, page });
            }
        }
    }
    let mut rng = SmallRng::seed_from_u64(11);
    let picks: Vec<FlashAddr> = (0..1500).map(|_| addrs[rng.gen_range(0..addrs.len())]).collect();
    let mixed: Vec<(FlashAddr, Delivery)> = picks
        .iter()
        .map(|a| (*a, if rng.gen_bool(0.5) { Delivery::Page } else { Delivery::Slices }))
        .collect();
    let sliced: Vec<(FlashAddr, Delivery)> = picks.iter().map(|a| (*a, Delivery::Slices)).collect();
    let run = |reads: &[(FlashAddr, Delivery)]| {
        let dir = tempfile::tempdir().unwrap();
        let mut ctrl = controller(dir.path(), 1);
        write_all(&mut ctrl, &addrs);
        let out = run_reads(&mut ctrl, reads);
        (out, ctrl.now(), ctrl.stats())
    };
    let ((want, want_order), want_now, want_stats) = run(&sliced);
    let ((got, got_order), got_now, got_stats) = run(&mixed);
    assert_eq!(got_order, want_order, "reads end in the same order");
    assert_eq!((got_now, got_stats), (want_now, want_stats));
    let slices = cfg().slice_bytes as usize;
    for (i, (a, delivery)) in mixed.iter().enumerate() {
        let (g, w) = (&got[&(i as u32)], &want[&(i as u32)]);
        assert_eq!(g.0, page_of(a, 0), "read {i}: the page as written");
        assert_eq!((g.1, g.2), (w.1, w.2), "read {i}: first and last byte at the same times");
        let events = if *delivery == Delivery::Page { 1 } else { 8192usize.div_ceil(slices) };
        assert_eq!(g.3, events, "read {i} ({delivery:?}): events told");
    }
}

#[test]
fn a_read_behind_a_long_erase_completes_after_a_later_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 2);
    let a = FlashAddr { card: 1, bus: 2, chip: 5, block: 0, page: 0 };
    let b = FlashAddr { card: 1, bus: 3, chip: 0, block: 0, page: 0 };
    write_all(&mut ctrl, &[a, b]);
    ctrl.issue(FlashCommand::erase(FlashAddr { block: 1, ..a }, 1)).unwrap();
    ctrl.issue(FlashCommand::read(a, 2)).unwrap(); // queued behind the erase on its chip
    ctrl.issue(FlashCommand::read(b, 3)).unwrap();
    let mut done = Vec::new();
    while let Some(c) = ctrl.poll() {
        if c.event.is_done() {
            done.push(c.tag);
        }
    }
    assert_eq!(done, vec![3, 1, 2], "out of order with respect to issue");
}

#[test]
fn nand_and_tag_rules_refuse_bad_commands_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 2);
    let a = FlashAddr { card: 0, bus: 0, chip: 0, block: 0, page: 0 };
    // A raw read of an erased page fails with a status, after the cell read.
    ctrl.issue(FlashCommand::read(a, 0)).unwrap();
    let c = ctrl.poll().unwrap();
    assert!(matches!(c.event, Event::Ack(Err(RawFlashError::ErasedPage { .. }))), "{:?}", c.event);
    // A program out of order within its block is refused at once.
    let err = ctrl.issue(FlashCommand::write(FlashAddr { page: 1, ..a }, 0, 0)).unwrap_err();
    assert!(matches!(err, RawFlashError::OutOfOrder { next: 0, .. }), "{err}");
    assert!(err.to_string().contains("erase before write"), "{err}");
    // Two writes in flight to one block must still be in order: page 0, then page 1, not page 0 twice.
    ctrl.issue(FlashCommand::write(a, 1, 0)).unwrap();
    assert!(matches!(
        ctrl.issue(FlashCommand::write(a, 2, 0)),
        Err(RawFlashError::OutOfOrder { next: 1, .. })
    ));
    ctrl.issue(FlashCommand::write(FlashAddr { page: 1, ..a }, 2, 0)).unwrap();
    // Addresses past the geometry, whatever the field.
    for bad in [
        FlashAddr { card: 2, ..a },
        FlashAddr { bus: 8, ..a },
        FlashAddr { chip: 8, ..a },
        FlashAddr { block: 2, ..a },
        FlashAddr { page: 256, ..a },
    ] {
        let err = ctrl.issue(FlashCommand::read(bad, 9)).unwrap_err();
        assert!(matches!(err, RawFlashError::PastGeometry { .. }), "{bad}: {err}");
        assert!(err.to_string().contains("past the geometry"), "{err}");
    }
    // Tags: in flight, past the card's 128.
    assert!(matches!(ctrl.issue(FlashCommand::read(a, 1)), Err(RawFlashError::TagInUse { tag: 1, .. })));
    assert!(matches!(
        ctrl.issue(FlashCommand::read(a, 128)),
        Err(RawFlashError::TagOutOfRange { tags: 128, .. })
    ));
    // Data for a write that did not ask for it, and data of the wrong size.
    assert!(matches!(ctrl.write_data(0, 1, &[0; 8192]), Err(RawFlashError::NoWriteRequest { .. })));
    let req = ctrl.poll().unwrap();
    assert!(matches!(req.event, Event::WriteDataRequest));
    assert!(matches!(ctrl.write_data(0, req.tag, &[0; 100]), Err(RawFlashError::WrongLength { .. })));
    assert_eq!(ctrl.stats().failed, 1);
    assert_eq!(ctrl.media().stats().pages_programmed, 0, "nothing refused reached the cells");
}

#[test]
fn timing_adds_up_from_the_profiles_figures() {
    let c = cfg();
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 4);
    let a = FlashAddr { card: 0, bus: 0, chip: 0, block: 0, page: 0 };
    write_all(&mut ctrl, &[a]);
    let t0 = ctrl.now();
    ctrl.issue(FlashCommand::read(a, 0)).unwrap();
    let mut first = None;
    let mut last = 0;
    while let Some(e) = ctrl.poll() {
        first.get_or_insert(e.at_ps);
        last = e.at_ps;
    }
    // Command in, tR, the first slice's share of the bus transfer, one slice out, back to the user.
    let n = insitu_device::rawflash::SLICES_PER_PAGE as u64;
    let first_want = t0 + c.latency_ps + c.read_ps + c.bus_page_ps / n + c.slice_ps + c.latency_ps;
    assert_eq!(first.unwrap(), first_want);
    // The last slice holds what is left of the page, and crosses the card in its share of a slice's time.
    let sb = c.slice_bytes as u64;
    let last_slice = c.slice_ps * (8192 - (n - 1) * sb) / sb;
    assert_eq!(last, t0 + c.latency_ps + c.read_ps + c.bus_page_ps + last_slice + c.latency_ps);

    // Many random reads over both cards: each card moves pages at its bandwidth, not its buses' sum.
    let mut addrs = Vec::new();
    for card in 0..2 {
        for bus in 0..8 {
            for chip in 0..8 {
                for page in 0..4 {
                    addrs.push(FlashAddr { card, bus, chip, block: 0, page });
                }
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 4);
    write_all(&mut ctrl, &addrs);
    let mut rng = SmallRng::seed_from_u64(3);
    let reads: Vec<FlashAddr> = (0..4000).map(|_| addrs[rng.gen_range(0..addrs.len())]).collect();
    let t0 = ctrl.now();
    let (mut next, mut free) = (0, vec![(0..128u32).collect::<Vec<_>>(), (0..128u32).collect()]);
    let mut bytes = 0u64;
    loop {
        while next < reads.len() {
            let a = reads[next];
            let Some(tag) = free[a.card as usize].pop() else { break };
            ctrl.issue(FlashCommand::read(a, tag)).unwrap();
            next += 1;
        }
        let Some(e) = ctrl.poll() else { break };
        if let Event::ReadData(s) = &e.event {
            bytes += s.span() as u64;
            if s.last {
                free[e.card as usize].push(e.tag);
            }
        }
    }
    let secs = (ctrl.now() - t0) as f64 / 1e12;
    let bw = bytes as f64 / secs;
    let card_bw = profile().nand.interface.unwrap().card_bw;
    assert!(bw <= 2.0 * card_bw * 1.001 && bw > 2.0 * card_bw * 0.97, "two cards moved {bw:.3e} B/s");
    assert_eq!(ctrl.stats().max_in_flight, 128);
}

#[test]
fn the_splitter_shares_a_card_with_renamed_tags_and_back_pressure() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 2);
    let addrs: Vec<FlashAddr> = (0..8)
        .flat_map(|bus| (0..8).map(move |chip| FlashAddr { card: 1, bus, chip, block: 0, page: 0 }))
        .collect();
    write_all(&mut ctrl, &addrs);
    let mut sp = Splitter::new(ctrl);
    // Three sources use the same tag numbers: 300 reads on one card of 128 tags.
    let sources = [Source::Host, Source::Isp, Source::Remote(3)];
    let mut want = HashMap::new();
    for i in 0..100u32 {
        for (k, s) in sources.iter().enumerate() {
            let a = addrs[(i as usize * 3 + k) % addrs.len()];
            sp.issue(*s, FlashCommand::read(a, i)).unwrap();
            want.insert((*s, i), a);
        }
    }
    assert_eq!(sp.waiting(), 300 - 128, "commands past the free tags wait, they are not refused");
    assert!(matches!(
        sp.issue(Source::Isp, FlashCommand::read(addrs[0], 5)),
        Err(RawFlashError::TagInUse { .. })
    ));
    let mut got: HashMap<(Source, u32), Vec<u8>> = HashMap::new();
    while let Some((s, c)) = sp.poll() {
        if let Event::ReadData(slice) = c.event {
            let buf = got.entry((s, c.tag)).or_insert_with(|| vec![0; 8192]);
            buf[slice.offset()..slice.offset() + slice.bytes().len()].copy_from_slice(slice.bytes());
        }
    }
    assert_eq!(got.len(), 300);
    for (key, a) in &want {
        assert_eq!(got[key], page_of(a, 0), "{key:?} got another page");
    }
    assert_eq!(sp.waiting(), 0);
    assert_eq!(sp.controller().stats().max_in_flight, 128);
    // A queued command the controller refuses comes back to its source as a failed status.
    let a = addrs[0];
    for t in 0..128 {
        sp.issue(Source::Host, FlashCommand::read(a, t)).unwrap();
    }
    sp.issue(Source::Isp, FlashCommand::write(a, 0, 0)).unwrap(); // page 0 is programmed: out of order
    let mut refused = false;
    while let Some((s, c)) = sp.poll() {
        if let Event::Ack(Err(RawFlashError::OutOfOrder { .. })) = c.event {
            assert_eq!((s, c.tag), (Source::Isp, 0));
            refused = true;
        }
    }
    assert!(refused);
}

#[test]
fn the_flash_server_streams_file_pages_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctrl = controller(dir.path(), 2);
    let mut rng = SmallRng::seed_from_u64(11);
    // A file of 40 pages scattered over both cards, all buses, random chips.
    let mut pages = Vec::new();
    let mut next_page: HashMap<(u32, u32, u32), u32> = HashMap::new();
    for _ in 0..40 {
        let (card, bus, chip) = (rng.gen_range(0..2), rng.gen_range(0..8), rng.gen_range(0..8));
        let p = next_page.entry((card, bus, chip)).or_insert(0);
        pages.push(FlashAddr { card, bus, chip, block: 0, page: *p });
        *p += 1;
    }
    write_all(&mut ctrl, &pages);
    let file: Vec<u8> = pages.iter().flat_map(|a| page_of(a, 0)).collect();
    let size = file.len() as u64 - 5000;
    let mut atu = AddressTranslation::new(8192);
    atu.map(77, pages.clone(), size).unwrap();
    let mut sp = Splitter::new(ctrl);
    let mut server = FlashServer::new(Source::Isp, 8, 8192);
    server.request_file(&atu, 77, 12_345, 200_000).unwrap();
    let mut out = Vec::new();
    let mut times = Vec::new();
    server
        .read_all(&mut sp, |data, at| {
            out.extend_from_slice(data);
            times.push(at);
        })
        .unwrap();
    assert_eq!(out, file[12_345..212_345]);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(sp.controller().stats().max_in_flight <= 8, "no more reads in flight than page buffers");
    // The address translation unit refuses what the host did not hand over.
    assert!(matches!(atu.translate(78, 0, 1), Err(RawFlashError::UnknownHandle(78))));
    let err = atu.translate(77, size - 10, 11).unwrap_err();
    assert!(matches!(err, RawFlashError::PastFileEnd { .. }), "{err}");
    assert!(atu.map(1, pages[..1].to_vec(), 8193).is_err());
    // An erased page in a stream fails the stream by name.
    let mut server = FlashServer::new(Source::Host, 4, 8192);
    server.request(FlashAddr { card: 0, bus: 0, chip: 0, block: 1, page: 0 });
    let err = server.read_all(&mut sp, |_, _| {}).unwrap_err();
    assert!(matches!(err, RawFlashError::ErasedPage { .. }), "{err}");
}

/// The FTL's workload: writes, overwrites, trims and enough traffic to garbage-collect.
fn drive<M: RawFlash>(ftl: &mut Ftl<M>, seed: u64) -> Vec<Vec<u8>> {
    let ps = ftl.geometry().page_size as usize;
    let lpns = ftl.geometry().logical_pages() / 2;
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..6 * lpns {
        let lpn = rng.gen_range(0..lpns);
        let n = rng.gen_range(1..4u64).min(lpns - lpn);
        if rng.gen_bool(0.1) {
            ftl.trim(lpn, n).unwrap();
        } else {
            let data: Vec<u8> = (0..n as usize * ps).map(|i| (i as u64 ^ round ^ lpn) as u8).collect();
            ftl.write(lpn, &data).unwrap();
        }
        ftl.collect_garbage().unwrap();
    }
    (0..lpns)
        .map(|l| {
            let mut buf = vec![0u8; ps];
            ftl.read(l, &mut buf).unwrap();
            buf
        })
        .collect()
}

#[test]
fn the_ftl_over_the_raw_interface_behaves_as_over_the_nand_image() {
    let geo = Geometry {
        channels: 4,
        chips_per_channel: 2,
        blocks_per_chip: 6,
        pages_per_block: 8,
        page_size: 512,
    };
    let mut c = cfg();
    c.cards = 2;
    c.slice_bytes = 32;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut plain = Ftl::on_fresh_media(Nand::open(d1.path(), geo).unwrap(), d1.path()).unwrap();
    let tagged = TaggedMedia::new(Nand::open(d2.path(), geo).unwrap(), c).unwrap();
    let mut raw = Ftl::on_fresh_media(tagged, d2.path()).unwrap();
    let a = drive(&mut plain, 5);
    let b = drive(&mut raw, 5);
    assert_eq!(a, b, "the same data");
    assert!(plain.stats().gc_runs > 0, "the workload garbage-collects");
    assert_eq!(plain.stats(), raw.stats(), "the same FTL work");
    assert_eq!(plain.nand().stats(), raw.nand().stats(), "the same page reads, programs and erases");
    assert_eq!(plain.nand().blocks(), raw.nand().blocks(), "the same wear");
    assert!(raw.check_invariants().is_empty());
    let rs = raw.nand().raw_stats();
    assert_eq!(
        (rs.writes, rs.erases),
        (raw.nand().stats().pages_programmed, raw.nand().stats().blocks_erased)
    );
    assert!(raw.nand().now() > 0, "the raw interface timed the FTL's work");
}

/// A new `bluedbm` device of 64 MiB in `tmp`, served over `via`; its directory too, to reopen it.
fn bluedbm_device(tmp: &std::path::Path, via: crate::Via) -> (std::path::PathBuf, crate::Served) {
    let dev_dir = tmp.join("dev");
    drop(insitu_device::Device::format(&dev_dir, 0, profile(), 64 << 20).unwrap());
    let served = crate::serve(&dev_dir, tmp, via);
    (dev_dir, served)
}

#[test]
fn a_bluedbm_devices_ftl_is_a_user_of_the_raw_interface() {
    use insitu_device::protocol::Identify;
    use insitu_device::{transport, Device};
    for via in crate::BOTH {
        let dir = tempfile::tempdir().unwrap();
        let (dev_dir, served) = bluedbm_device(dir.path(), via);
        let dev = &served.dev;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        crate::put(dev, "obj", &data);
        assert_eq!(crate::read_all(dev, "obj"), data, "{via:?}");
        let p = dev.call(Identify).unwrap();
        let raw = p.ftl_raw.expect("the bluedbm profile has a raw interface");
        // Every page the FTL programmed and read went through the controller as a tagged command.
        assert_eq!(raw.writes, p.flash.nand.pages_programmed, "{via:?}");
        assert_eq!(raw.reads, p.flash.nand.pages_read, "{via:?}");
        assert!(raw.writes >= data.len().div_ceil(8192) as u64 && raw.failed == 0, "{raw:?}");
        drop(served);
        // Reopened through the controller again: the journal replays, the object reads back.
        let dev = transport::in_process(Device::open(&dev_dir).unwrap());
        assert_eq!(crate::read_all(&dev, "obj"), data, "{via:?}");
        assert!(dev.call(Identify).unwrap().ftl_raw.is_some_and(|r| r.reads > 0));
        dev.close().unwrap();
    }
    // A profile without one keeps its FTL on the image.
    let dir = tempfile::tempdir().unwrap();
    let dev = crate::tiny(dir.path(), 0);
    assert!(dev.call(insitu_device::protocol::Identify).unwrap().ftl_raw.is_none());
}

#[test]
fn a_devices_raw_partition_answers_over_every_transport_and_survives_reopening() {
    use insitu_device::protocol::{RawErase, RawIdentify, RawRead, RawSync, RawWrite};
    use insitu_device::{transport, Device, DeviceError};
    for via in crate::BOTH {
        let dir = tempfile::tempdir().unwrap();
        let (dev_dir, served) = bluedbm_device(dir.path(), via);
        let dev = &served.dev;
        let info = dev.call(RawIdentify).unwrap();
        assert_eq!((info.cards, info.buses_per_card, info.chips_per_bus), (2, 8, 8));
        assert!(info.written.is_empty());
        // Two blocks on different cards, three pages each, written in one batch.
        let a = FlashAddr { card: 0, bus: 1, chip: 2, block: 0, page: 0 };
        let b = FlashAddr { card: 1, bus: 7, chip: 7, block: 0, page: 0 };
        let pages: Vec<(FlashAddr, u64)> = (0..3)
            .flat_map(|p| {
                [(FlashAddr { page: p, ..a }, 10 + p as u64), (FlashAddr { page: p, ..b }, 20 + p as u64)]
            })
            .collect();
        let data: Vec<u8> = pages.iter().flat_map(|(addr, _)| page_of(addr, 1)).collect();
        dev.call(RawWrite { pages: pages.clone(), data: data.clone() }).unwrap();
        dev.call(RawSync).unwrap();
        let addrs: Vec<FlashAddr> = pages.iter().map(|p| p.0).collect();
        let back = dev.call(RawRead { addrs: addrs.clone(), recheck: false }).unwrap();
        assert_eq!(&back[..data.len()], &data[..], "{via:?}");
        let spares: Vec<u64> =
            back[data.len()..].chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(spares, pages.iter().map(|p| p.1).collect::<Vec<_>>());
        // A byte changed behind the device after that read: a plain read takes the page as checked, one
        // with `recheck` (what cleaning moves) checks every byte again and fails naming the checksum.
        {
            use std::os::unix::fs::FileExt;
            let path = dev_dir.join("raw").join("nand.img");
            let image = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
            let all = std::fs::read(&path).unwrap();
            let first = page_of(&a, 1);
            let at =
                all.chunks(8192).position(|p| p == &first[..]).expect("page a in the image") as u64 * 8192;
            image.write_all_at(&[first[100] ^ 0xff], at + 100).unwrap();
            dev.call(RawRead { addrs: vec![a], recheck: false }).unwrap();
            let err = dev.call(RawRead { addrs: vec![a], recheck: true }).unwrap_err().to_string();
            assert!(err.contains("checksum"), "{via:?}: {err}");
            image.write_all_at(&[first[100]], at + 100).unwrap();
            dev.call(RawRead { addrs: vec![a], recheck: true }).unwrap();
        }
        // Refused by name, nothing written: out of order, past the geometry, an erased page.
        let err = dev
            .call(RawWrite { pages: vec![(FlashAddr { page: 5, ..a }, 0)], data: vec![0; 8192] })
            .unwrap_err();
        assert!(err.to_string().contains("out of order"), "{via:?}: {err}");
        let err = dev.call(RawRead { addrs: vec![FlashAddr { chip: 9, ..a }], recheck: false }).unwrap_err();
        assert!(err.to_string().contains("past the geometry"), "{via:?}: {err}");
        let err = dev.call(RawRead { addrs: vec![FlashAddr { page: 3, ..a }], recheck: false }).unwrap_err();
        assert!(matches!(err, DeviceError::RawFlash(RawFlashError::ErasedPage { .. })), "{via:?}: {err}");
        let info = dev.call(RawIdentify).unwrap();
        assert_eq!(info.written, vec![(a, 3), (b, 3)]);
        assert!(info.modeled_ps > 0 && info.stats.writes == 6);
        drop(served);
        // Reopened: the write pointers come back from the spare areas, the pages are intact.
        let dev = transport::in_process(Device::open(&dev_dir).unwrap());
        assert_eq!(dev.call(RawIdentify).unwrap().written, vec![(a, 3), (b, 3)]);
        assert_eq!(
            &dev.call(RawRead { addrs: addrs.clone(), recheck: false }).unwrap()[..data.len()],
            &data[..]
        );
        dev.call(RawErase { addrs: vec![a] }).unwrap();
        assert_eq!(dev.call(RawIdentify).unwrap().written, vec![(b, 3)]);
        dev.call(RawWrite { pages: vec![(a, 1)], data: vec![7; 8192] }).unwrap();
        dev.call(RawErase { addrs: vec![a, b] }).unwrap();
        dev.call(RawSync).unwrap();
        assert_eq!(dev.call(RawIdentify).unwrap().erases, 3);
        dev.close().unwrap();
        // Erase counts outlive the process (as of the last sync).
        let dev = transport::in_process(Device::open(&dev_dir).unwrap());
        let info = dev.call(RawIdentify).unwrap();
        assert_eq!((info.erases, info.written.len()), (3, 0), "{via:?}");
        dev.close().unwrap();
    }
    // A device without a raw interface says so.
    let dir = tempfile::tempdir().unwrap();
    let dev = crate::tiny(dir.path(), 0);
    let err = dev.call(insitu_device::protocol::RawIdentify).unwrap_err();
    assert!(matches!(err, insitu_device::DeviceError::NoRawFlash(0)), "{err}");
}
