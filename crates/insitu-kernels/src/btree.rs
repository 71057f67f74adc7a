//! An order-statistic B+tree over fixed-size byte keys: the index of the Self-Sorting SSD (§III-C, §IV-B).
//!
//! Entries are `(key, id)`: `key` is a fixed number of bytes (1 to [`MAX_KEY_BYTES`]) compared as `memcmp`
//! does, `id` a u64 (the record's position in its range), so duplicate keys are kept in id order and every
//! entry is unique. Leaves hold entries and are linked left to right; internal nodes hold separators and,
//! per child, the number of entries below it (subtree counts), so the entry of any rank is one descent
//! away: the paper walks the leaves from the first (Fig. 1), but a read at a random offset of the range
//! needs its rank.
//!
//! A node holds at most `fanout` entries (leaf) or children (internal); an insert that overfills a node
//! splits it in half, the paper's choice (about 69% full for random keys). Removal never merges nodes: a
//! leaf may empty out and stay linked (counts skip it). The tree counts the work it does ([`TreeWork`]:
//! nodes visited, keys compared, entry bytes moved) so a model can price it on a device's processor, and
//! its footprint in the paper's node layout ([`node_bytes`]: 2,060 bytes at fanout 128, 10-byte keys).
//!
//! Layout here (not the paper's, which is the one priced): keys are stored as big-endian u64 words, which
//! compare like the bytes; each node is one block of words in an arena, column by column (first key
//! words, other key words, ids or separators' ids, children, counts), so a node search scans one
//! contiguous column: on a machine where a cache miss costs 200 ns, a B+tree is a chain of misses.
//!
//! ```
//! use insitu_kernels::btree::BTree;
//! let mut t = BTree::new(2, 4);
//! for (i, k) in [b"qq", b"aa", b"mm", b"aa", b"zz", b"bb"].iter().enumerate() {
//!     t.insert(&k[..], i as u64);
//! }
//! let sorted: Vec<(Vec<u8>, u64)> = t.iter_from(0).map(|(k, id)| (k.to_vec(), id)).collect();
//! assert_eq!(sorted[0], (b"aa".to_vec(), 1));
//! assert_eq!(sorted[1], (b"aa".to_vec(), 3)); // duplicates in id order
//! assert_eq!(t.nth(5).map(|(k, _)| k.to_vec()), Some(b"zz".to_vec()));
//! assert_eq!(t.count_range(b"ab", b"mm"), 2); // bb, mm
//! ```

use std::cell::Cell;
use std::cmp::Ordering;

use crate::arch::claim::{Claimant, Claims};
use crate::arch::prefetch;

/// The paper's fanout (§IV-B).
pub const PAPER_FANOUT: usize = 128;
/// Longest key the tree takes.
pub const MAX_KEY_BYTES: usize = 64;

const MAX_KW: usize = MAX_KEY_BYTES / 8;
const NONE: u64 = u64::MAX;
/// Node ids with this bit set are internal nodes (the rest index the leaf arena).
const INTERNAL: u32 = 1 << 31;
/// Nodes per arena chunk (chunks never move, so growing the tree copies nothing).
const CHUNK_NODES: usize = 512;

/// Bytes of one entry in the paper's layout (the key padded to 4 bytes, and a 4-byte record address):
/// what an insert or a split moves per entry.
fn entry_bytes(key_size: usize) -> u64 {
    (key_size.div_ceil(4) * 4 + 4) as u64
}

/// Bytes of one node in the paper's layout: a 12-byte header, then `fanout` slots of the key (padded to
/// 4 bytes) and a 4-byte record address or child pointer: 12 + 128 x (12 + 4) = 2,060 for 10-byte keys
/// (§IV-B). Internal nodes here also keep a 4-byte subtree count per child (our addition, for ranks).
pub fn node_bytes(key_size: usize, fanout: usize, internal: bool) -> u64 {
    let slot = key_size.div_ceil(4) * 4 + 4 + if internal { 4 } else { 0 };
    (12 + fanout * slot) as u64
}

/// Work done by a tree since it was created (or since [`BTree::take_work`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeWork {
    /// Nodes entered by descents and leaf walks.
    pub visits: u64,
    /// Key comparisons, as a binary search of each node makes them (the device's algorithm; the search
    /// here scans a column of prefixes instead, which finds the same slot).
    pub compares: u64,
    /// Entry bytes moved (in the paper's layout) by inserts, removals and splits.
    pub moved_bytes: u64,
}

/// A key as the tree returns it.
#[derive(Clone, Copy)]
pub struct Key {
    bytes: [u8; MAX_KEY_BYTES],
    len: u8,
}

impl std::ops::Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({:02x?})", &self[..])
    }
}

/// A search target: `(key, id)` with the key as words.
struct Target {
    words: [u64; MAX_KW],
    id: u64,
}

/// Fixed-size nodes in chunks of [`CHUNK_NODES`]; ids given back are handed out again first.
#[derive(Debug)]
struct Arena {
    words: usize,
    chunks: Vec<Box<[u64]>>,
    len: usize,
    free: Vec<u32>,
}

impl Arena {
    fn new(words: usize) -> Arena {
        Arena { words, chunks: Vec::new(), len: 0, free: Vec::new() }
    }

    fn alloc(&mut self) -> usize {
        if let Some(i) = self.free.pop() {
            return i as usize;
        }
        if self.len == self.chunks.len() * CHUNK_NODES {
            self.chunks.push(vec![0u64; CHUNK_NODES * self.words].into_boxed_slice());
        }
        self.len += 1;
        self.len - 1
    }

    /// Nodes in use.
    fn used(&self) -> usize {
        self.len - self.free.len()
    }

    #[inline]
    fn get(&self, i: usize) -> &[u64] {
        let o = (i % CHUNK_NODES) * self.words;
        &self.chunks[i / CHUNK_NODES][o..o + self.words]
    }

    #[inline]
    fn get_mut(&mut self, i: usize) -> &mut [u64] {
        let o = (i % CHUNK_NODES) * self.words;
        &mut self.chunks[i / CHUNK_NODES][o..o + self.words]
    }
}

/// The column layout of a node: `[len, next, key word 0 x cap, ..., key word kw-1 x cap, ids x cap,
/// children x cap, counts x cap]` (leaves stop after the ids).
#[derive(Debug, Clone, Copy)]
struct Layout {
    kw: usize,
    cap: usize,
}

impl Layout {
    #[inline]
    fn col(self, j: usize) -> usize {
        2 + j * self.cap
    }

    #[inline]
    fn ids(self) -> usize {
        self.col(self.kw)
    }

    #[inline]
    fn children(self) -> usize {
        self.col(self.kw + 1)
    }

    #[inline]
    fn counts(self) -> usize {
        self.col(self.kw + 2)
    }

    fn leaf_words(self) -> usize {
        self.col(self.kw + 1)
    }

    fn internal_words(self) -> usize {
        self.col(self.kw + 3)
    }

    /// Compares entry `i` of `node` with `t`.
    #[inline]
    fn cmp(self, node: &[u64], i: usize, t: &Target) -> Ordering {
        for j in 0..self.kw {
            let w = node[self.col(j) + i];
            if w != t.words[j] {
                return w.cmp(&t.words[j]);
            }
        }
        node[self.ids() + i].cmp(&t.id)
    }

    /// First of the `n` entries of `node` that is `>= t` (`upper`: `> t`). Every entry whose first word
    /// is below the target's is below the target: one pass over that column counts them (sequential
    /// loads the CPU overlaps, not a binary search's chain of misses); only equal first words are
    /// compared further.
    #[inline]
    fn search(self, node: &[u64], n: usize, t: &Target, upper: bool) -> usize {
        let first = &node[self.col(0)..self.col(0) + n];
        let mut lo = crate::arch::count_below(first, t.words[0]);
        let mut hi = lo + first[lo..].iter().take_while(|&&w| w == t.words[0]).count();
        while lo < hi {
            let mid = (lo + hi) / 2;
            let below = match self.cmp(node, mid, t) {
                Ordering::Less => true,
                Ordering::Equal => upper,
                Ordering::Greater => false,
            };
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Makes room at `pos` in every column `0..=last` (of `n` used slots) and writes `vals` there.
    #[inline]
    fn insert_at(self, node: &mut [u64], cols: usize, n: usize, pos: usize, vals: &[u64]) {
        for (j, v) in vals.iter().enumerate().take(cols) {
            let c = self.col(j);
            node.copy_within(c + pos..c + n, c + pos + 1);
            node[c + pos] = *v;
        }
    }

    /// Removes slot `pos` from every column `0..cols` (of `n` used slots).
    #[inline]
    fn remove_at(self, node: &mut [u64], cols: usize, n: usize, pos: usize) {
        for j in 0..cols {
            let c = self.col(j);
            node.copy_within(c + pos + 1..c + n, c + pos);
        }
    }
}

/// Number of comparisons a binary search over `n` entries makes.
#[inline]
fn binary_compares(n: usize) -> u64 {
    (usize::BITS - n.leading_zeros()) as u64
}

/// Batches at least this large are split between two threads by [`BTree::insert_sorted`].
const PARALLEL_MIN: usize = 1024;
/// Entries ahead whose leaf a sorted batch's insert prefetches.
const INSERT_AHEAD: usize = 4;

/// An entry as words: the key's words, then the id.
type Entry = [u64; MAX_KW + 1];

impl Target {
    fn entry(&self, lay: Layout) -> Entry {
        let mut e = [0u64; MAX_KW + 1];
        e[..lay.kw].copy_from_slice(&self.words[..lay.kw]);
        e[lay.kw] = self.id;
        e
    }
}

/// Compares entry `e` with `t`.
fn cmp_entry(lay: Layout, e: &Entry, t: &Target) -> Ordering {
    e[..lay.kw].cmp(&t.words[..lay.kw]).then(e[lay.kw].cmp(&t.id))
}

/// Nodes by id (internal ones tagged [`INTERNAL`]).
trait Nodes {
    fn node(&self, id: u32) -> &[u64];
}

/// Nodes an insert may change and make.
trait Store: Nodes {
    fn node_mut(&mut self, id: u32) -> &mut [u64];
    /// A new empty node: internal, or a leaf linked to nothing.
    fn make(&mut self, internal: bool) -> u32;
}

impl Nodes for BTree {
    #[inline]
    fn node(&self, id: u32) -> &[u64] {
        BTree::node(self, id)
    }
}

/// Nodes of one kind (leaves, or internal nodes) by index, and where new ones come from.
trait Blocks {
    fn block(&self, i: usize) -> &[u64];
    fn block_mut(&mut self, i: usize) -> &mut [u64];
    /// The index of a node to make.
    fn take(&mut self) -> usize;
}

/// A tree's own arena: new nodes are allocated in it.
impl Blocks for &mut Arena {
    #[inline]
    fn block(&self, i: usize) -> &[u64] {
        self.get(i)
    }

    #[inline]
    fn block_mut(&mut self, i: usize) -> &mut [u64] {
        self.get_mut(i)
    }

    fn take(&mut self) -> usize {
        self.alloc()
    }
}

/// The nodes of an arena one of [`BTree::insert_sorted`]'s threads reaches, claimed as it reaches them
/// (so a thread that strayed into the other's would panic rather than race it), and the ids set aside
/// for the nodes it makes (taken from the end).
struct Pooled<'c, 'a> {
    claimant: Claimant<'c, 'a>,
    pool: Vec<u32>,
}

impl Blocks for Pooled<'_, '_> {
    #[inline]
    fn block(&self, i: usize) -> &[u64] {
        self.claimant.get(i)
    }

    #[inline]
    fn block_mut(&mut self, i: usize) -> &mut [u64] {
        self.claimant.get_mut(i)
    }

    fn take(&mut self) -> usize {
        self.pool.pop().expect("run_part stops before a part runs out of ids") as usize
    }
}

/// Leaves and internal nodes: a tree's own arenas, or the part of them one of
/// [`BTree::insert_sorted`]'s threads changes (subtrees below some of the root's children).
struct Pair<B> {
    leaves: B,
    internals: B,
}

impl<B: Blocks> Nodes for Pair<B> {
    #[inline]
    fn node(&self, id: u32) -> &[u64] {
        if id & INTERNAL != 0 {
            self.internals.block((id & !INTERNAL) as usize)
        } else {
            self.leaves.block(id as usize)
        }
    }
}

impl<B: Blocks> Store for Pair<B> {
    #[inline]
    fn node_mut(&mut self, id: u32) -> &mut [u64] {
        if id & INTERNAL != 0 {
            self.internals.block_mut((id & !INTERNAL) as usize)
        } else {
            self.leaves.block_mut(id as usize)
        }
    }

    fn make(&mut self, internal: bool) -> u32 {
        let id = if internal { self.internals.take() as u32 | INTERNAL } else { self.leaves.take() as u32 };
        let node = self.node_mut(id);
        node[0] = 0;
        if !internal {
            node[1] = NONE;
        }
        id
    }
}

/// What one insert pushed up past the top of its path: the caller puts `sep` and `right` after `left`
/// in the parent, or makes a new root of them.
#[derive(Debug, Clone, Copy)]
struct Split {
    left: u32,
    right: u32,
    left_n: u64,
    right_n: u64,
    sep: Entry,
}

/// One internal node of a descent: the index of the child `t` goes below, that child, and the compares
/// a binary search of the node makes.
#[inline]
fn down(lay: Layout, node: &[u64], t: &Target) -> (usize, u32, u64) {
    let seps = node[0] as usize - 1;
    let ci = lay.search(node, seps, t, true);
    (ci, node[lay.children() + ci] as u32, binary_compares(seps))
}

/// Copies the first `dst.len()` (at most 8) bytes of `src` into `dst`: a copy of known size for the
/// widths keys and ids have most (an export makes one per key word and id of every entry, and a copy of a
/// length known only at run time is a call to `memcpy`).
#[inline(always)]
fn put_first(dst: &mut [u8], src: [u8; 8]) {
    match dst.len() {
        8 => dst.copy_from_slice(&src),
        4 => dst.copy_from_slice(&src[..4]),
        3 => dst.copy_from_slice(&src[..3]),
        2 => dst.copy_from_slice(&src[..2]),
        1 => dst[0] = src[0],
        w => dst.copy_from_slice(&src[..w]),
    }
}

/// The leaf below `top` where `t` belongs (the internal nodes' part of [`descend`], uncounted).
fn leaf_of(nodes: &(impl Nodes + ?Sized), lay: Layout, top: u32, t: &Target) -> u32 {
    let mut id = top;
    while id & INTERNAL != 0 {
        id = down(lay, nodes.node(id), t).1;
    }
    id
}

/// Walks from `top` to the leaf where `t` belongs, recording `(node, child index)` of every internal
/// node on the way in `path`; returns the leaf, `t`'s position in it, and the internal nodes' visits and
/// compares.
fn descend(
    nodes: &(impl Nodes + ?Sized),
    lay: Layout,
    top: u32,
    t: &Target,
    path: &mut Vec<(u32, usize)>,
) -> (u32, usize, u64, u64) {
    let (mut visits, mut compares) = (0u64, 0u64);
    let mut id_n = top;
    while id_n & INTERNAL != 0 {
        let (ci, child, c) = down(lay, nodes.node(id_n), t);
        visits += 1;
        compares += c;
        path.push((id_n, ci));
        id_n = child;
    }
    let leaf = nodes.node(id_n);
    (id_n, lay.search(leaf, leaf[0] as usize, t, false), visits, compares)
}

/// Inserts below some node of a store, counting the work.
struct Inserter<'s, S> {
    store: &'s mut S,
    lay: Layout,
    fanout: usize,
    entry_bytes: u64,
    work: TreeWork,
    scratch: Vec<u64>,
}

impl<'s, S: Store> Inserter<'s, S> {
    fn new(store: &'s mut S, lay: Layout, fanout: usize, key_size: usize) -> Self {
        Inserter {
            store,
            lay,
            fanout,
            entry_bytes: entry_bytes(key_size),
            work: TreeWork::default(),
            scratch: Vec::new(),
        }
    }

    fn count(&mut self, visits: u64, compares: u64, moved_entries: u64) {
        self.work.visits += visits;
        self.work.compares += compares;
        self.work.moved_bytes += moved_entries * self.entry_bytes;
    }

    /// Inserts `t` below `top` (`path` holds the internal nodes above `top`, or nothing); returns whether
    /// it was new, and what a split pushed up past the top of the path.
    fn insert(&mut self, top: u32, t: &Target, path: &mut Vec<(u32, usize)>) -> (bool, Option<Split>) {
        let lay = self.lay;
        let (id_n, pos, mut visits, mut compares) = descend(&*self.store, lay, top, t, path);
        let leaf = self.store.node(id_n);
        let n = leaf[0] as usize;
        visits += 1;
        compares += binary_compares(n);
        if pos < n && lay.cmp(leaf, pos, t) == Ordering::Equal {
            self.count(visits, compares, 0);
            return (false, None);
        }
        for &(p, ci) in path.iter() {
            self.store.node_mut(p)[lay.counts() + ci] += 1;
        }
        let leaf = self.store.node_mut(id_n);
        lay.insert_at(leaf, lay.kw + 1, n, pos, &t.entry(lay));
        leaf[0] += 1;
        self.count(visits, compares, (n - pos) as u64);
        let split = (n + 1 > self.fanout).then(|| self.split_leaf(id_n, path)).flatten();
        (true, split)
    }

    /// Splits an overfull leaf in half and pushes the new separator up the path.
    fn split_leaf(&mut self, left: u32, path: &mut Vec<(u32, usize)>) -> Option<Split> {
        let lay = self.lay;
        let right = self.store.make(false);
        let mut moved = std::mem::take(&mut self.scratch);
        moved.clear();
        let node = self.store.node_mut(left);
        let n = node[0] as usize;
        let h = n / 2;
        for j in 0..=lay.kw {
            moved.extend_from_slice(&node[lay.col(j) + h..lay.col(j) + n]);
        }
        node[0] = h as u64;
        let next = std::mem::replace(&mut node[1], right as u64);
        let r = n - h;
        let rnode = self.store.node_mut(right);
        for j in 0..=lay.kw {
            rnode[lay.col(j)..lay.col(j) + r].copy_from_slice(&moved[j * r..(j + 1) * r]);
        }
        rnode[0] = r as u64;
        rnode[1] = next;
        // The separator: the right leaf's first entry.
        let mut sep = [0u64; MAX_KW + 1];
        for (j, s) in sep.iter_mut().enumerate().take(lay.kw + 1) {
            *s = moved[j * r];
        }
        self.scratch = moved;
        self.count(1, 0, r as u64);
        self.push_up(Split { left, right, left_n: h as u64, right_n: r as u64, sep }, path)
    }

    /// Inserts separator `s.sep` and child `s.right` after child `s.left` in the parent on top of `path`,
    /// splitting parents that overfill; returns what is pushed up past the top of the path.
    fn push_up(&mut self, mut s: Split, path: &mut Vec<(u32, usize)>) -> Option<Split> {
        let lay = self.lay;
        loop {
            let Some((parent, ci)) = path.pop() else {
                return Some(s);
            };
            let node = self.store.node_mut(parent);
            let children = node[0] as usize;
            // Separator ci goes before the old separator ci (it bounds the new child ci + 1).
            lay.insert_at(node, lay.kw + 1, children - 1, ci, &s.sep);
            let (ch, co) = (lay.children(), lay.counts());
            node.copy_within(ch + ci + 1..ch + children, ch + ci + 2);
            node[ch + ci + 1] = s.right as u64;
            node.copy_within(co + ci + 1..co + children, co + ci + 2);
            node[co + ci] = s.left_n;
            node[co + ci + 1] = s.right_n;
            node[0] += 1;
            self.count(0, 0, (children - ci - 1) as u64);
            if children < self.fanout {
                return None;
            }
            // Overfull: children [h..) move to a new node, separator h-1 goes up.
            let children = children + 1;
            let h = children / 2;
            let new = self.store.make(true);
            let mut moved = std::mem::take(&mut self.scratch);
            moved.clear();
            let node = self.store.node_mut(parent);
            let mut up = [0u64; MAX_KW + 1];
            let rs = children - 1 - h; // separators that move
            for (j, u) in up.iter_mut().enumerate().take(lay.kw + 1) {
                *u = node[lay.col(j) + h - 1];
                moved.extend_from_slice(&node[lay.col(j) + h..lay.col(j) + h + rs]);
            }
            moved.extend_from_slice(&node[ch + h..ch + children]);
            moved.extend_from_slice(&node[co + h..co + children]);
            let l_n: u64 = node[co..co + h].iter().sum();
            node[0] = h as u64;
            let rc = children - h;
            let rnode = self.store.node_mut(new);
            for j in 0..=lay.kw {
                rnode[lay.col(j)..lay.col(j) + rs].copy_from_slice(&moved[j * rs..(j + 1) * rs]);
            }
            let base = (lay.kw + 1) * rs;
            rnode[ch..ch + rc].copy_from_slice(&moved[base..base + rc]);
            rnode[co..co + rc].copy_from_slice(&moved[base + rc..base + 2 * rc]);
            rnode[0] = rc as u64;
            let r_n: u64 = rnode[co..co + rc].iter().sum();
            self.scratch = moved;
            self.count(1, 0, rc as u64);
            s = Split { left: parent, right: new, left_n: l_n, right_n: r_n, sep: up };
        }
    }
}

/// One of [`BTree::insert_sorted`]'s halves: its entries, the root's children they go below and the
/// separators between those, and the ids set aside for the leaves and internal nodes it makes.
type Half = (std::ops::Range<usize>, Vec<u32>, Vec<Entry>, Vec<u32>, Vec<u32>);

/// What one of [`BTree::insert_sorted`]'s threads did: whether each of its first entries was new (it
/// stops early when the ids set aside for it run short), the splits of the root's children, each after
/// the entry that caused it, and the work below the root.
#[derive(Debug)]
struct PartDone {
    inserted: Vec<bool>,
    splits: Vec<(usize, Split)>,
    work: TreeWork,
}

/// Inserts `targets` (sorted) below `tops`, children of the root in order with the root's separators
/// `seps` between them, as the root would route them; a split of a top adds its new sibling to the tops.
#[allow(clippy::too_many_arguments)]
fn run_part(
    part: &mut Pair<Pooled<'_, '_>>,
    lay: Layout,
    fanout: usize,
    key_size: usize,
    targets: &[Target],
    tops: &mut Vec<u32>,
    seps: &mut Vec<Entry>,
    levels: usize,
) -> PartDone {
    let mut done = PartDone {
        inserted: Vec::with_capacity(targets.len()),
        splits: Vec::new(),
        work: TreeWork::default(),
    };
    let mut ins = Inserter::new(part, lay, fanout, key_size);
    let mut path = Vec::new();
    let (mut cur, mut cur_ahead) = (0usize, 0usize);
    for (i, t) in targets.iter().enumerate() {
        // One insert makes at most a leaf and an internal node per level below the root.
        if ins.store.leaves.pool.is_empty() || ins.store.internals.pool.len() < levels {
            break;
        }
        // The root's search: the child after the last separator <= t.
        while cur < seps.len() && cmp_entry(lay, &seps[cur], t) != Ordering::Greater {
            cur += 1;
        }
        // The leaf an insert a few entries on goes to, loaded meanwhile: leaves are far more than the
        // caches hold, and each insert reads and shifts most of one.
        if let Some(ahead) = targets.get(i + INSERT_AHEAD) {
            cur_ahead = cur_ahead.max(cur);
            while cur_ahead < seps.len() && cmp_entry(lay, &seps[cur_ahead], ahead) != Ordering::Greater {
                cur_ahead += 1;
            }
            let leaf = leaf_of(&*ins.store, lay, tops[cur_ahead], ahead);
            prefetch(ins.store.node(leaf), 0, lay.leaf_words());
        }
        path.clear();
        let (new, split) = ins.insert(tops[cur], t, &mut path);
        done.inserted.push(new);
        if let Some(s) = split {
            tops.insert(cur + 1, s.right);
            seps.insert(cur, s.sep);
            done.splits.push((i, s));
            cur_ahead = cur;
        }
    }
    done.work = ins.work;
    done
}

/// An order-statistic B+tree of `(key, id)` entries.
#[derive(Debug)]
pub struct BTree {
    key_size: usize,
    fanout: usize,
    layout: Layout,
    leaves: Arena,
    internals: Arena,
    root: u32,
    first_leaf: u32,
    height: u32,
    len: u64,
    work: Cell<TreeWork>,
    path: Vec<(u32, usize)>,
    scratch: Vec<u64>,
}

impl BTree {
    /// An empty tree for keys of `key_size` bytes with nodes of at most `fanout` entries.
    ///
    /// # Panics
    /// If `key_size` is not 1..=[`MAX_KEY_BYTES`] or `fanout` is below 3 (callers validate both).
    pub fn new(key_size: usize, fanout: usize) -> BTree {
        assert!(
            (1..=MAX_KEY_BYTES).contains(&key_size) && fanout >= 3,
            "key size {key_size}, fanout {fanout}"
        );
        let layout = Layout { kw: key_size.div_ceil(8), cap: fanout + 1 };
        let mut t = BTree {
            key_size,
            fanout,
            layout,
            leaves: Arena::new(layout.leaf_words()),
            internals: Arena::new(layout.internal_words()),
            root: 0,
            first_leaf: 0,
            height: 1,
            len: 0,
            work: Cell::new(TreeWork::default()),
            path: Vec::new(),
            scratch: Vec::new(),
        };
        t.root = t.new_leaf();
        t
    }

    /// The tree's arenas as an insert's store.
    fn arenas(&mut self) -> Pair<&mut Arena> {
        Pair { leaves: &mut self.leaves, internals: &mut self.internals }
    }

    fn new_leaf(&mut self) -> u32 {
        self.arenas().make(false)
    }

    fn new_internal(&mut self) -> u32 {
        self.arenas().make(true)
    }

    #[inline]
    fn node(&self, id: u32) -> &[u64] {
        if id & INTERNAL != 0 {
            self.internals.get((id & !INTERNAL) as usize)
        } else {
            self.leaves.get(id as usize)
        }
    }

    #[inline]
    fn node_mut(&mut self, id: u32) -> &mut [u64] {
        if id & INTERNAL != 0 {
            self.internals.get_mut((id & !INTERNAL) as usize)
        } else {
            self.leaves.get_mut(id as usize)
        }
    }

    #[inline]
    fn target(&self, key: &[u8], id: u64) -> Target {
        let mut words = [0u64; MAX_KW];
        let mut chunks = key.chunks_exact(8);
        for (w, c) in words.iter_mut().zip(&mut chunks) {
            *w = u64::from_be_bytes(c.try_into().expect("8 bytes"));
        }
        // The last bytes, zero-padded, shifted in one by one (a copy of a length unknown here is a call).
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let w = tail.iter().fold(0u64, |w, &b| (w << 8) | b as u64);
            words[key.len() / 8] = w << (8 * (8 - tail.len()));
        }
        Target { words, id }
    }

    fn key_of(&self, node: &[u64], i: usize) -> Key {
        let mut k = Key { bytes: [0u8; MAX_KEY_BYTES], len: self.key_size as u8 };
        for j in 0..self.layout.kw {
            k.bytes[j * 8..j * 8 + 8].copy_from_slice(&node[self.layout.col(j) + i].to_be_bytes());
        }
        k
    }

    pub fn key_size(&self) -> usize {
        self.key_size
    }

    pub fn fanout(&self) -> usize {
        self.fanout
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Levels, counting the leaves (1 for a tree that is one leaf).
    pub fn height(&self) -> u32 {
        self.height
    }

    /// `(leaves, internal nodes)`.
    pub fn nodes(&self) -> (u64, u64) {
        (self.leaves.used() as u64, self.internals.used() as u64)
    }

    /// Bytes of all nodes in the paper's layout ([`node_bytes`]).
    pub fn footprint_bytes(&self) -> u64 {
        let (l, i) = self.nodes();
        l * node_bytes(self.key_size, self.fanout, false) + i * node_bytes(self.key_size, self.fanout, true)
    }

    /// Most bytes (paper's layout) that `inserts` more inserts can add: a split on every level and a new
    /// root each. What to have room for before inserting.
    pub fn growth_bound_bytes(&self, inserts: u64) -> u64 {
        inserts * (self.height as u64 + 1) * node_bytes(self.key_size, self.fanout, true)
    }

    /// Most bytes (paper's layout) that `inserts` more inserts can add, counted closer than
    /// [`BTree::growth_bound_bytes`] for many inserts at once: a node split in half takes at least half a
    /// node's entries more to split again, so beyond one split of every node there now, each level splits
    /// at most once per half a fanout of splits below it.
    pub fn batch_growth_bound_bytes(&self, inserts: u64) -> u64 {
        let half = (self.fanout as u64).div_ceil(2);
        let (leaves, internals) = self.nodes();
        let leaf_splits = inserts.min(leaves + inserts / half + 1);
        // Internal splits: every node once, then per level a split per `half` splits below (the levels'
        // sum at most twice the first's, counting the nodes' own splits again), and a new root per level
        // the tree can gain (a level per doubling of the leaves at least).
        let internal_splits = 2 * internals + 2 * (leaf_splits / half + 1) + self.new_levels_bound(inserts);
        leaf_splits * node_bytes(self.key_size, self.fanout, false)
            + internal_splits * node_bytes(self.key_size, self.fanout, true)
    }

    /// Most levels `inserts` more inserts can add: the leaves at most double per level added.
    pub fn new_levels_bound(&self, inserts: u64) -> u64 {
        let (leaves, _) = self.nodes();
        let most = leaves + inserts + 1;
        u64::from(64 - most.leading_zeros()) + 1
    }

    /// The work done since the last call.
    pub fn take_work(&self) -> TreeWork {
        self.work.replace(TreeWork::default())
    }

    fn count(&self, visits: u64, compares: u64, moved_entries: u64) {
        let moved_bytes = moved_entries * entry_bytes(self.key_size);
        self.add_work(TreeWork { visits, compares, moved_bytes });
    }

    /// Walks from the root to the leaf where `t` belongs, recording `(node, child index)` of every internal
    /// node in `path`; returns the leaf, `t`'s position in it, and the internal nodes' visits and compares.
    fn descend(&self, t: &Target, path: &mut Vec<(u32, usize)>) -> (u32, usize, u64, u64) {
        path.clear();
        descend(self, self.layout, self.root, t, path)
    }

    /// An inserter over the tree's own arenas; its work is added to the tree's when `f` returns.
    fn with_inserter<R>(&mut self, f: impl FnOnce(&mut Inserter<'_, Pair<&mut Arena>>) -> R) -> R {
        let mut store = Pair { leaves: &mut self.leaves, internals: &mut self.internals };
        let mut ins = Inserter::new(&mut store, self.layout, self.fanout, self.key_size);
        ins.scratch = std::mem::take(&mut self.scratch);
        let r = f(&mut ins);
        self.scratch = std::mem::take(&mut ins.scratch);
        let work = ins.work;
        self.add_work(work);
        r
    }

    fn add_work(&self, more: TreeWork) {
        let mut w = self.work.get();
        w.visits += more.visits;
        w.compares += more.compares;
        w.moved_bytes += more.moved_bytes;
        self.work.set(w);
    }

    /// A new root above the two halves of the old one.
    fn new_root(&mut self, s: Split) {
        let lay = self.layout;
        let root = self.new_internal();
        let node = self.node_mut(root);
        for (j, w) in s.sep.iter().enumerate().take(lay.kw + 1) {
            node[lay.col(j)] = *w;
        }
        node[lay.children()] = s.left as u64;
        node[lay.children() + 1] = s.right as u64;
        node[lay.counts()] = s.left_n;
        node[lay.counts() + 1] = s.right_n;
        node[0] = 2;
        self.root = root;
        self.height += 1;
    }

    /// Inserts `(key, id)`; false if that exact entry is already present.
    ///
    /// # Panics
    /// If `key` is not `key_size` bytes long.
    pub fn insert(&mut self, key: &[u8], id: u64) -> bool {
        assert_eq!(key.len(), self.key_size, "key of the wrong size");
        let t = self.target(key, id);
        self.insert_target(&t)
    }

    fn insert_target(&mut self, t: &Target) -> bool {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let root = self.root;
        let (inserted, split) = self.with_inserter(|ins| ins.insert(root, t, &mut path));
        if let Some(s) = split {
            self.new_root(s);
        }
        self.len += inserted as u64;
        self.path = path;
        inserted
    }

    /// Inserts `entries`, sorted by `(key, id)`, as [`BTree::insert`] would one after another: the same
    /// tree, the same counted work; returns whether each entry was new. Two threads share the work when
    /// the batch is large and the root has children: the entries below the root's first children go to
    /// one, the rest to the other, and each inserts into its own subtrees (and makes its nodes at ids set
    /// aside for it beforehand). What those inserts would have done at the root (a visit and a search per
    /// entry, a count raised, a separator added when a child split, the root split in turn) is then
    /// replayed here in the entries' order, which is the order one thread would have done it in: the
    /// root's children never see each other's entries, so only the root's state depends on the order.
    ///
    /// Entries out of order are inserted one by one.
    ///
    /// # Panics
    /// If a key has the wrong size.
    pub fn insert_sorted(&mut self, entries: &[(&[u8], u64)]) -> Vec<bool> {
        let targets: Vec<Target> = entries
            .iter()
            .map(|&(k, id)| {
                assert_eq!(k.len(), self.key_size, "key of the wrong size");
                self.target(k, id)
            })
            .collect();
        let lay = self.layout;
        // Entries out of order would reach the wrong children of the root: those are inserted one by one.
        let sorted = targets.windows(2).all(|w| cmp_entry(lay, &w[0].entry(lay), &w[1]) != Ordering::Greater);
        let parallel = sorted
            && targets.len() >= PARALLEL_MIN
            && self.root & INTERNAL != 0
            && std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
        let Some((j, s)) = parallel.then(|| self.halves(&targets)).flatten() else {
            return targets.iter().map(|t| self.insert_target(t)).collect();
        };
        // The root's children and separators, cut at child `j`.
        let root = self.node(self.root);
        let kids = root[0] as usize;
        let children: Vec<u32> =
            root[lay.children()..lay.children() + kids].iter().map(|&c| c as u32).collect();
        let seps: Vec<Entry> = (0..kids - 1)
            .map(|i| {
                let mut e = [0u64; MAX_KW + 1];
                for (w, x) in e.iter_mut().enumerate().take(lay.kw + 1) {
                    *x = root[lay.col(w) + i];
                }
                e
            })
            .collect();
        // Internal levels between the root and the leaves: the most internal nodes one insert makes there.
        let levels = self.height as usize - 2;
        let top_height = self.height - 1;
        let mut parts = [
            (0..s, children[..j].to_vec(), seps[..j - 1].to_vec()),
            (s..targets.len(), children[j..].to_vec(), seps[j..].to_vec()),
        ]
        .map(|(range, tops, seps)| {
            let n = range.end - range.start;
            let leaves: Vec<u32> = (0..n / 8 + 8).map(|_| self.leaves.alloc() as u32).collect();
            let internals: Vec<u32> =
                (0..n / 32 + 2 * levels + 8).map(|_| self.internals.alloc() as u32 | INTERNAL).collect();
            (range, tops, seps, leaves, internals)
        });
        let (fanout, ks) = (self.fanout, self.key_size);
        let (leaf_words, internal_words) = (self.leaves.words, self.internals.words);
        let mut leaf_claims = Claims::new(&mut self.leaves.chunks, CHUNK_NODES, leaf_words);
        let mut internal_claims = Claims::new(&mut self.internals.chunks, CHUNK_NODES, internal_words);
        let [l0, l1] = leaf_claims.claimants::<2>();
        let [i0, i1] = internal_claims.claimants::<2>();
        let targets = &targets;
        let run = |(range, tops, seps, leaves, internals): &mut Half, leaf_c, internal_c| {
            let mut part = Pair {
                leaves: Pooled { claimant: leaf_c, pool: std::mem::take(leaves) },
                internals: Pooled { claimant: internal_c, pool: std::mem::take(internals) },
            };
            let done = run_part(&mut part, lay, fanout, ks, &targets[range.clone()], tops, seps, levels);
            *leaves = part.leaves.pool;
            *internals = part.internals.pool;
            done
        };
        let [first, second] = &mut parts;
        let (a, b) = std::thread::scope(|scope| {
            let other = scope.spawn(|| run(first, l0, i0));
            let b = run(second, l1, i1);
            (other.join().expect("the other half of an insert does not panic"), b)
        });
        drop((leaf_claims, internal_claims));
        for (_, _, _, leaves, internals) in &parts {
            self.leaves.free.extend(leaves.iter().rev());
            self.internals.free.extend(internals.iter().rev().map(|i| i & !INTERNAL));
        }
        let mut inserted = Vec::with_capacity(targets.len());
        for (done, (range, ..)) in [a, b].into_iter().zip(&parts) {
            self.add_work(done.work);
            self.len += done.inserted.iter().filter(|&&n| n).count() as u64;
            self.replay(&targets[range.start..range.start + done.inserted.len()], &done, top_height);
            inserted.extend_from_slice(&done.inserted);
            for t in &targets[range.start + done.inserted.len()..range.end] {
                inserted.push(self.insert_target(t));
            }
        }
        inserted
    }

    /// Where [`BTree::insert_sorted`] cuts `targets` (sorted): the first child of the root the second half
    /// goes below and the first target that goes there, both halves non-empty and as even as the root's
    /// children allow; none if every target goes below one child.
    fn halves(&self, targets: &[Target]) -> Option<(usize, usize)> {
        let lay = self.layout;
        let root = self.node(self.root);
        let seps = root[0] as usize - 1;
        let child = |t: &Target| lay.search(root, seps, t, true);
        let m = targets.len();
        let mid = child(&targets[m / 2]);
        [mid, mid + 1]
            .into_iter()
            .filter(|&j| j >= 1 && j <= seps)
            .map(|j| (j, targets.partition_point(|t| child(t) < j)))
            .filter(|&(_, s)| s > 0 && s < m)
            .min_by_key(|&(_, s)| s.abs_diff(m / 2))
    }

    /// Does at the levels above the root's children (`top_height` levels up from the leaves) what the
    /// inserts of `targets` that a thread carried out below them would have done there, in order.
    fn replay(&mut self, targets: &[Target], done: &PartDone, top_height: u32) {
        let lay = self.layout;
        let mut path = std::mem::take(&mut self.path);
        let mut splits = done.splits.iter().peekable();
        for (i, t) in targets.iter().enumerate() {
            path.clear();
            let (mut id_n, mut visits, mut compares) = (self.root, 0u64, 0u64);
            for _ in 0..self.height - top_height {
                let (ci, child, c) = down(lay, self.node(id_n), t);
                visits += 1;
                compares += c;
                path.push((id_n, ci));
                id_n = child;
            }
            self.count(visits, compares, 0);
            if done.inserted[i] {
                for &(p, ci) in &path {
                    let c = lay.counts();
                    self.node_mut(p)[c + ci] += 1;
                }
            }
            while let Some((_, s)) = splits.next_if(|(at, _)| *at == i) {
                debug_assert_eq!(s.left, id_n, "a split of the child the entry went to");
                if let Some(up) = self.with_inserter(|ins| ins.push_up(*s, &mut path)) {
                    self.new_root(up);
                }
            }
        }
        self.path = path;
    }

    /// Removes `(key, id)`; false if it is not there. Nodes are never merged.
    pub fn remove(&mut self, key: &[u8], id: u64) -> bool {
        if key.len() != self.key_size {
            return false;
        }
        let lay = self.layout;
        let t = self.target(key, id);
        let mut path = std::mem::take(&mut self.path);
        let (id_n, pos, visits, compares) = self.descend(&t, &mut path);
        let leaf = self.node(id_n);
        let n = leaf[0] as usize;
        let found = pos < n && lay.cmp(leaf, pos, &t) == Ordering::Equal;
        self.count(
            visits + 1,
            compares + binary_compares(n) + 1,
            if found { (n - pos - 1) as u64 } else { 0 },
        );
        if found {
            for &(p, ci) in &path {
                let c = lay.counts();
                self.node_mut(p)[c + ci] -= 1;
            }
            let leaf = self.node_mut(id_n);
            lay.remove_at(leaf, lay.kw + 1, n, pos);
            leaf[0] -= 1;
            self.len -= 1;
        }
        self.path = path;
        found
    }

    /// Where the entry of rank `rank` (0-based, in key order) is, if there is one.
    pub fn cursor(&self, rank: u64) -> Option<Cursor> {
        if rank >= self.len {
            return None;
        }
        let lay = self.layout;
        let (mut r, mut id_n, mut visits, mut steps) = (rank, self.root, 0u64, 0u64);
        while id_n & INTERNAL != 0 {
            let node = self.node(id_n);
            let counts = &node[lay.counts()..lay.counts() + node[0] as usize];
            let mut i = 0;
            while r >= counts[i] {
                r -= counts[i];
                i += 1;
            }
            visits += 1;
            steps += binary_compares(counts.len());
            id_n = node[lay.children() + i] as u32;
        }
        // Summing counts is arithmetic, priced like the comparisons of a search of the node.
        self.count(visits + 1, steps, 0);
        Some(Cursor { leaf: id_n, pos: r as usize })
    }

    /// The entry of rank `rank`.
    pub fn nth(&self, rank: u64) -> Option<(Key, u64)> {
        self.cursor(rank).map(|c| self.entry(c))
    }

    /// The entry a cursor points at.
    pub fn entry(&self, c: Cursor) -> (Key, u64) {
        let node = self.node(c.leaf);
        (self.key_of(node, c.pos), node[self.layout.ids() + c.pos])
    }

    /// Entries in key order from rank `rank`.
    pub fn iter_from(&self, rank: u64) -> Iter<'_> {
        Iter { ids: self.ids_from(rank) }
    }

    /// The ids of the entries in key order from rank `rank` (what a redirected read needs).
    pub fn ids_from(&self, rank: u64) -> Ids<'_> {
        let cursor = self.cursor(rank);
        Ids { tree: self, cursor, left: self.len.saturating_sub(rank), visits: 0 }
    }

    /// Number of entries `< (key, id)`, or `<= (key, id)` with `inclusive`; 0 for a key of the wrong size.
    pub fn rank(&self, key: &[u8], id: u64, inclusive: bool) -> u64 {
        if key.len() != self.key_size {
            return 0;
        }
        let lay = self.layout;
        let t = self.target(key, id);
        let (mut rank, mut id_n, mut visits, mut compares) = (0u64, self.root, 0u64, 0u64);
        while id_n & INTERNAL != 0 {
            let node = self.node(id_n);
            let (ci, child, c) = down(lay, node, &t);
            rank += node[lay.counts()..lay.counts() + ci].iter().sum::<u64>();
            visits += 1;
            compares += c;
            id_n = child;
        }
        let leaf = self.node(id_n);
        let n = leaf[0] as usize;
        let pos = lay.search(leaf, n, &t, inclusive);
        self.count(visits + 1, compares + binary_compares(n), 0);
        rank + pos as u64
    }

    /// Ranks `lo..hi` of the entries whose key lies in `lo_key..=hi_key` (keys of `key_size` bytes).
    pub fn key_range(&self, lo_key: &[u8], hi_key: &[u8]) -> std::ops::Range<u64> {
        let lo = self.rank(lo_key, 0, false);
        let hi = self.rank(hi_key, u64::MAX, true).max(lo);
        lo..hi
    }

    /// Number of entries whose key lies in `lo_key..=hi_key`.
    pub fn count_range(&self, lo_key: &[u8], hi_key: &[u8]) -> u64 {
        let r = self.key_range(lo_key, hi_key);
        r.end - r.start
    }

    /// A tree of `entries` (sorted by `(key, id)`, unique), leaves filled to `fill` entries: the fast way
    /// to restore an index saved in order.
    ///
    /// # Panics
    /// If `fill` is 0 or above the fanout, or a key has the wrong size; debug builds also check the order.
    pub fn bulk_load<'k>(
        key_size: usize,
        fanout: usize,
        fill: usize,
        entries: impl IntoIterator<Item = (&'k [u8], u64)>,
    ) -> BTree {
        assert!(fill >= 1 && fill <= fanout, "fill {fill} of fanout {fanout}");
        let mut t = BTree::new(key_size, fanout);
        let lay = t.layout;
        // (node, entries below, first entry) of the level being built.
        let mut level: Vec<(u32, u64, [u64; MAX_KW + 1])> = Vec::new();
        let mut leaf = t.root;
        let mut last: Option<(Vec<u8>, u64)> = None;
        for (k, id) in entries {
            assert_eq!(k.len(), key_size, "key of the wrong size");
            if cfg!(debug_assertions) {
                let e = (k.to_vec(), id);
                debug_assert!(last.as_ref().is_none_or(|l| *l < e), "bulk_load needs sorted, unique entries");
                last = Some(e);
            }
            let tw = t.target(k, id);
            if t.node(leaf)[0] as usize == fill {
                let next = t.new_leaf();
                t.node_mut(leaf)[1] = next as u64;
                leaf = next;
            }
            let node = t.node_mut(leaf);
            let n = node[0] as usize;
            if n == 0 {
                let mut first = [0u64; MAX_KW + 1];
                first[..lay.kw].copy_from_slice(&tw.words[..lay.kw]);
                first[lay.kw] = id;
                level.push((leaf, 0, first));
            }
            for j in 0..lay.kw {
                node[lay.col(j) + n] = tw.words[j];
            }
            node[lay.ids() + n] = id;
            node[0] += 1;
            level.last_mut().expect("a leaf was started").1 += 1;
            t.len += 1;
        }
        while level.len() > 1 {
            // Internal nodes full, in groups of even size (never a node of one child).
            let groups = level.len().div_ceil(fanout);
            let mut up = Vec::with_capacity(groups);
            let mut start = 0;
            for g in 0..groups {
                let end = start + (level.len() - start) / (groups - g);
                let group = &level[start..end];
                start = end;
                let id = t.new_internal();
                let node = t.node_mut(id);
                for (i, (child, n, first)) in group.iter().enumerate() {
                    if i > 0 {
                        for (j, w) in first.iter().enumerate().take(lay.kw + 1) {
                            node[lay.col(j) + i - 1] = *w;
                        }
                    }
                    node[lay.children() + i] = *child as u64;
                    node[lay.counts() + i] = *n;
                }
                node[0] = group.len() as u64;
                up.push((id, group.iter().map(|g| g.1).sum(), group[0].2));
            }
            level = up;
            t.height += 1;
        }
        if let Some((root, _, _)) = level.first() {
            t.root = *root;
        }
        t
    }

    /// Writes every entry in order: the keys one after another into `keys` (`key_size` bytes each) and the
    /// ids into `ids` (`id_width` bytes each, little-endian), leaf by leaf from the columns (what a saved
    /// image holds; [`BTree::bulk_load`] reads it back).
    ///
    /// # Panics
    /// If `keys` is not `len() * key_size` bytes, `ids` not `len() * id_width`, `id_width` not 1..=8, or an
    /// id does not fit `id_width` bytes.
    pub fn export_into(&self, keys: &mut [u8], ids: &mut [u8], id_width: usize) {
        let (n, ks, lay) = (self.len as usize, self.key_size, self.layout);
        assert!((1..=8).contains(&id_width), "ids of {id_width} bytes");
        assert!(
            keys.len() == n * ks && ids.len() == n * id_width,
            "export of {n} entries into buffers of the wrong size"
        );
        let (mut at, mut leaf) = (0usize, self.first_leaf as u64);
        while leaf != NONE {
            let node = self.node(leaf as u32);
            let m = node[0] as usize;
            for j in 0..lay.kw {
                let (from, w) = (j * 8, (ks - j * 8).min(8));
                for (i, word) in node[lay.col(j)..lay.col(j) + m].iter().enumerate() {
                    put_first(&mut keys[(at + i) * ks + from..(at + i) * ks + from + w], word.to_be_bytes());
                }
            }
            for (i, &id) in node[lay.ids()..lay.ids() + m].iter().enumerate() {
                assert!(id_width == 8 || id >> (8 * id_width) == 0, "id {id} does not fit {id_width} bytes");
                put_first(&mut ids[(at + i) * id_width..(at + i + 1) * id_width], id.to_le_bytes());
            }
            at += m;
            leaf = node[1];
        }
        debug_assert_eq!(at, n, "the leaves hold every entry");
    }

    /// `(height, leaves, internal nodes)` of the tree [`BTree::bulk_load`] builds from `n` entries: what a
    /// tree restored later will take, known before it is built.
    pub fn bulk_load_shape(fanout: usize, fill: usize, n: u64) -> (u32, u64, u64) {
        let leaves = n.div_ceil(fill as u64).max(1);
        let (mut level, mut height, mut internals) = (leaves, 1u32, 0u64);
        while level > 1 {
            level = level.div_ceil(fanout as u64);
            internals += level;
            height += 1;
        }
        (height, leaves, internals)
    }

    /// Checks every invariant (order within and across nodes, separators, subtree counts, the leaf
    /// chain, the length); returns the first violation found.
    pub fn check(&self) -> Result<(), String> {
        let lay = self.layout;
        let mut prev: Option<(Vec<u8>, u64)> = None;
        let mut total = 0u64;
        let mut leaf = self.first_leaf as u64;
        while leaf != NONE {
            let node = self.node(leaf as u32);
            for i in 0..node[0] as usize {
                let e = (self.key_of(node, i).to_vec(), node[lay.ids() + i]);
                if prev.as_ref().is_some_and(|p| *p >= e) {
                    return Err(format!("leaf {leaf}: entry {i} is out of order"));
                }
                prev = Some(e);
            }
            total += node[0];
            leaf = node[1];
        }
        if total != self.len {
            return Err(format!("the leaf chain holds {total} entries, the tree says {}", self.len));
        }
        self.check_node(self.root, None, None).map(|_| ())
    }

    /// Checks the subtree at `id` against its bounds; returns its entry count.
    fn check_node(&self, id: u32, lo: Option<(Key, u64)>, hi: Option<(Key, u64)>) -> Result<u64, String> {
        let lay = self.layout;
        let node = self.node(id);
        let n = node[0] as usize;
        let entry = |i: usize| (self.key_of(node, i), node[lay.ids() + i]);
        let inside = |e: &(Key, u64)| {
            lo.is_none_or(|l| (&l.0[..], l.1) <= (&e.0[..], e.1))
                && hi.is_none_or(|h| (&e.0[..], e.1) < (&h.0[..], h.1))
        };
        if id & INTERNAL == 0 {
            if n > self.fanout {
                return Err(format!("leaf {id} holds {n} entries"));
            }
            if let Some(i) = (0..n).find(|&i| !inside(&entry(i))) {
                return Err(format!("leaf {id}: entry {i} lies outside its parent's separators"));
            }
            return Ok(n as u64);
        }
        if !(2..=self.fanout).contains(&n) {
            return Err(format!("internal node {} has {n} children", id & !INTERNAL));
        }
        let mut total = 0;
        for i in 0..n {
            let clo = if i == 0 { lo } else { Some(entry(i - 1)) };
            let chi = if i + 1 == n { hi } else { Some(entry(i)) };
            let below = self.check_node(node[lay.children() + i] as u32, clo, chi)?;
            if below != node[lay.counts() + i] {
                return Err(format!(
                    "internal node {}: child {i} holds {below}, counted {}",
                    id & !INTERNAL,
                    node[lay.counts() + i]
                ));
            }
            total += below;
        }
        Ok(total)
    }
}

/// A position in the leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    leaf: u32,
    pos: usize,
}

/// Ids of entries in key order (see [`BTree::ids_from`]).
#[derive(Debug)]
pub struct Ids<'a> {
    tree: &'a BTree,
    cursor: Option<Cursor>,
    left: u64,
    visits: u64,
}

impl Ids<'_> {
    /// The entry the next call returns the id of.
    fn advance(&mut self) -> Option<Cursor> {
        let c = self.cursor?;
        self.left -= 1;
        let t = self.tree;
        let (mut leaf, mut pos) = (c.leaf as u64, c.pos + 1);
        while pos >= t.node(leaf as u32)[0] as usize {
            leaf = t.node(leaf as u32)[1];
            pos = 0;
            self.visits += 1;
            if leaf == NONE {
                break;
            }
        }
        self.cursor = (leaf != NONE && self.left > 0).then_some(Cursor { leaf: leaf as u32, pos });
        Some(c)
    }
}

impl Iterator for Ids<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let c = self.advance()?;
        Some(self.tree.node(c.leaf)[self.tree.layout.ids() + c.pos])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl Drop for Ids<'_> {
    fn drop(&mut self) {
        self.tree.count(self.visits, 0, 0);
    }
}

/// Entries in key order (see [`BTree::iter_from`]).
#[derive(Debug)]
pub struct Iter<'a> {
    ids: Ids<'a>,
}

impl Iterator for Iter<'_> {
    type Item = (Key, u64);

    fn next(&mut self) -> Option<(Key, u64)> {
        let c = self.ids.advance()?;
        Some(self.ids.tree.entry(c))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ids.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn contents(t: &BTree) -> Vec<(Vec<u8>, u64)> {
        t.iter_from(0).map(|(k, id)| (k.to_vec(), id)).collect()
    }

    /// Batches of sorted entries (random keys from a small alphabet, so some repeat and some entries are
    /// already in the tree) inserted by `insert_sorted` and one by one: the same entries, nodes, height
    /// and counted work, every invariant holding, for fanouts small enough that the root splits and the
    /// ids set aside for a half run out (the rest of it is then inserted here, one by one).
    #[test]
    fn sorted_batches_on_two_threads_make_the_tree_one_thread_makes() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        for (fanout, ks, batch, batches, alphabet) in
            [(4, 3, 1500, 6, 6u8), (7, 10, 2000, 5, 255), (128, 10, 8192, 12, 255), (16, 9, 1100, 8, 3)]
        {
            let mut rng = SmallRng::seed_from_u64(fanout as u64 * 31 + ks as u64);
            let (mut par, mut seq) = (BTree::new(ks, fanout), BTree::new(ks, fanout));
            for b in 0..batches {
                let mut entries: Vec<(Vec<u8>, u64)> = (0..batch)
                    .map(|_| {
                        let key: Vec<u8> = (0..ks).map(|_| rng.gen_range(0..alphabet)).collect();
                        // Ids from a range wider than the batch, so some entries repeat exactly.
                        (key, rng.gen_range(0..(batch as u64 * (b + 1) as u64)))
                    })
                    .collect();
                entries.sort();
                entries.dedup();
                let refs: Vec<(&[u8], u64)> = entries.iter().map(|(k, id)| (&k[..], *id)).collect();
                let (before, bound) =
                    (par.footprint_bytes(), par.batch_growth_bound_bytes(refs.len() as u64));
                let got = par.insert_sorted(&refs);
                assert!(
                    par.footprint_bytes() - before <= bound,
                    "fanout {fanout}, batch {b}: grew past the bound"
                );
                let want: Vec<bool> = refs.iter().map(|&(k, id)| seq.insert(k, id)).collect();
                assert_eq!(got, want, "fanout {fanout}, batch {b}");
                assert_eq!(par.take_work(), seq.take_work(), "fanout {fanout}, batch {b}");
                assert_eq!((par.len(), par.height(), par.nodes()), (seq.len(), seq.height(), seq.nodes()));
                par.check().unwrap();
            }
            // A batch out of order is inserted one by one, and right.
            let mut late: Vec<(Vec<u8>, u64)> = (0..1500u64)
                .map(|i| ((0..ks).map(|_| rng.gen_range(0..alphabet)).collect(), 1 << 40 | i))
                .collect();
            late.sort();
            late.reverse();
            let refs: Vec<(&[u8], u64)> = late.iter().map(|(k, id)| (&k[..], *id)).collect();
            assert!(par.insert_sorted(&refs).iter().all(|&n| n));
            refs.iter().for_each(|&(k, id)| assert!(seq.insert(k, id)));
            assert_eq!(par.take_work(), seq.take_work(), "fanout {fanout}, out of order");
            par.check().unwrap();
            assert_eq!(contents(&par), contents(&seq), "fanout {fanout}");
            assert!(par.height() >= 3, "fanout {fanout}: the root's children are internal nodes");
            assert_eq!(par.footprint_bytes(), seq.footprint_bytes());
        }
    }

    #[test]
    fn the_papers_node_is_2060_bytes() {
        assert_eq!(node_bytes(10, PAPER_FANOUT, false), 2060);
    }

    #[test]
    fn random_inserts_fill_leaves_about_two_thirds_as_the_paper_says() {
        // §IV-B: 524,288 records, 12,103 KB of nodes -> ~5,900 nodes, ~88 entries a leaf (~69%).
        let mut t = BTree::new(10, PAPER_FANOUT);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for id in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t.insert(&x.to_be_bytes()[..].repeat(2)[..10], id);
        }
        t.check().unwrap();
        let (leaves, _) = t.nodes();
        let fill = t.len() as f64 / leaves as f64 / PAPER_FANOUT as f64;
        assert!((0.64..0.75).contains(&fill), "leaf fill {fill}");
        let w = t.take_work();
        assert!(w.visits >= 200_000 * 2 && w.compares > w.visits && w.moved_bytes > 0, "{w:?}");
    }

    #[test]
    fn sorted_inserts_and_removal_keep_order_and_counts() {
        let mut t = BTree::new(4, 4);
        for i in 0..100u32 {
            assert!(t.insert(&i.to_be_bytes(), 7));
        }
        assert!(!t.insert(&5u32.to_be_bytes(), 7));
        for i in (0..100u32).step_by(3) {
            assert!(t.remove(&i.to_be_bytes(), 7));
        }
        assert!(!t.remove(&0u32.to_be_bytes(), 7));
        t.check().unwrap();
        assert_eq!(t.len(), 66);
        assert_eq!(&t.nth(0).unwrap().0[..], 1u32.to_be_bytes());
        // Remove everything: empty leaves stay linked, iteration and ranks skip them.
        for i in 0..100u32 {
            t.remove(&i.to_be_bytes(), 7);
        }
        assert!(t.is_empty() && t.nth(0).is_none() && t.iter_from(0).next().is_none());
        assert!(t.insert(&9u32.to_be_bytes(), 1));
        assert_eq!(contents(&t), vec![(9u32.to_be_bytes().to_vec(), 1)]);
        t.check().unwrap();
    }

    #[test]
    fn long_keys_compare_past_the_first_word() {
        let mut t = BTree::new(20, 5);
        let key = |last: u8| {
            let mut k = [7u8; 20];
            k[19] = last;
            k
        };
        for (i, b) in [9u8, 3, 200, 3, 0].iter().enumerate() {
            t.insert(&key(*b), i as u64);
        }
        let got: Vec<(u8, u64)> = t.iter_from(0).map(|(k, id)| (k[19], id)).collect();
        assert_eq!(got, vec![(0, 4), (3, 1), (3, 3), (9, 0), (200, 2)]);
        assert_eq!(t.count_range(&key(3), &key(9)), 3);
        t.check().unwrap();
    }

    proptest! {
        #[test]
        fn matches_a_sorted_vector(
            ops in proptest::collection::vec((any::<bool>(), 0u8..6, 0u8..4, 0u64..8), 0..600),
            fanout in 3usize..9,
            key_size in 2usize..20,
        ) {
            let mut t = BTree::new(key_size, fanout);
            let mut model: Vec<(Vec<u8>, u64)> = Vec::new();
            let key = |a: u8, b: u8| { let mut k = vec![0u8; key_size]; k[0] = a; k[key_size - 1] = b; k };
            for (ins, a, b, id) in ops {
                let k = key(a, b);
                if ins {
                    let fresh = !model.contains(&(k.clone(), id));
                    prop_assert_eq!(t.insert(&k, id), fresh);
                    if fresh { model.push((k, id)); }
                } else {
                    let there = model.iter().position(|e| *e == (k.clone(), id));
                    prop_assert_eq!(t.remove(&k, id), there.is_some());
                    if let Some(p) = there { model.remove(p); }
                }
            }
            prop_assert_eq!(t.check(), Ok(()));
            model.sort();
            let sorted = model;
            prop_assert_eq!(contents(&t), sorted.clone());
            for (r, e) in sorted.iter().enumerate() {
                let (k, id) = t.nth(r as u64).unwrap();
                prop_assert_eq!((k.to_vec(), id), e.clone());
                prop_assert_eq!(t.rank(&e.0, e.1, false), r as u64);
                prop_assert_eq!(t.rank(&e.0, e.1, true), r as u64 + 1);
                let tail: Vec<u64> = t.ids_from(r as u64).collect();
                let want: Vec<u64> = sorted[r..].iter().map(|e| e.1).collect();
                prop_assert_eq!(tail, want);
            }
            for lo in 0u8..6 {
                for hi in lo..6 {
                    let want = sorted.iter().filter(|(k, _)| k[0] >= lo && k[0] <= hi).count() as u64;
                    let (mut lk, mut hk) = (vec![0u8; key_size], vec![255u8; key_size]);
                    lk[0] = lo;
                    hk[0] = hi;
                    prop_assert_eq!(t.count_range(&lk, &hk), want);
                }
            }
            // What a saved image holds: every entry in order, keys and ids apart (ids here below 8: one byte
            // or eight).
            for w in [1usize, 8] {
                let (mut ek, mut ei) = (vec![0u8; sorted.len() * key_size], vec![0u8; sorted.len() * w]);
                t.export_into(&mut ek, &mut ei, w);
                let exported: Vec<(Vec<u8>, u64)> = ek
                    .chunks(key_size)
                    .zip(ei.chunks(w))
                    .map(|(k, i)| { let mut b = [0u8; 8]; b[..w].copy_from_slice(i); (k.to_vec(), u64::from_le_bytes(b)) })
                    .collect();
                prop_assert_eq!(&exported, &sorted);
            }
            let bulk = BTree::bulk_load(key_size, fanout, fanout, sorted.iter().map(|(k, id)| (&k[..], *id)));
            prop_assert_eq!(bulk.check(), Ok(()));
            for fill in [1, fanout / 2 + 1, fanout] {
                let b = BTree::bulk_load(key_size, fanout, fill, sorted.iter().map(|(k, id)| (&k[..], *id)));
                let (l, i) = b.nodes();
                prop_assert_eq!(BTree::bulk_load_shape(fanout, fill, sorted.len() as u64), (b.height(), l, i));
            }
            prop_assert_eq!(contents(&bulk), sorted);
        }
    }
}
