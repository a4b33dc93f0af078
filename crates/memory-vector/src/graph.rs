//! The HNSW graph behind [`HnswIndex`](crate::HnswIndex): hierarchical
//! navigable small-world search (Malkov & Yashunin) over unit vectors,
//! scored by dot product (the cosine).
//!
//! Layout, chosen for the search walk: vectors in one node-major `Vec<f32>`,
//! their SQ8 codes (see the `quant` module) in one node-major `Vec<i8>`,
//! ground-layer links in one flat array with a fixed stride per node
//! (`[count, id, id, ...]`), upper-layer links (a few percent of nodes) in
//! per-node lists. Nodes are numbered `0..len` in insertion order; the
//! index's slot table gives them meaning. A search keeps its visited marks,
//! candidate heaps and result buffer in per-thread scratch space reused from
//! one query to the next, so a query allocates only its answer.
//!
//! A search walks the graph on the codes, a quarter of the memory of the
//! vectors, then re-scores the `ef` nodes it kept with the full vectors and
//! returns the best `k` of those, so returned similarities are exact.
//! Linking a new node walks on the codes too, with `ef_construction`
//! candidates re-scored on the full vectors before the neighbour heuristic
//! picks among them (measured at 100k MiniLM vectors: build 35 s instead
//! of 63 s on two threads, recall@10 at ef 96 0.991 instead of 0.992).
//!
//! Insertion takes `&self`: ground-layer links are atomics written under a
//! per-node lock, so a bulk build inserts from many threads at once.

use std::cell::RefCell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::{Mutex, RwLock};
use rayon::prelude::*;

use crate::constants::{HNSW_LEVEL_SEED, HNSW_MAX_LAYERS};
use crate::distance::dot;
use crate::quant::{CodeBook, PreparedQuery, Sq8};

/// A node and its similarity to the current query. Ordered by similarity,
/// then by node number, so every heap operation is deterministic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scored {
    pub(crate) sim: f32,
    pub(crate) node: u32,
}

impl Eq for Scored {}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.sim.total_cmp(&other.sim).then_with(|| other.node.cmp(&self.node))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

/// Reverse order, so a `BinaryHeap<Worst>` pops the least similar first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Worst(Scored);

impl Ord for Worst {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other.0.cmp(&self.0)
    }
}

impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

/// Per-thread search state, reused across queries and graphs.
#[derive(Default)]
struct Scratch {
    /// `marks[node] == epoch` means visited in the current walk.
    marks: Vec<u32>,
    epoch: u32,
    candidates: BinaryHeap<Scored>,
    results: BinaryHeap<Worst>,
    neighbours: Vec<u32>,
    sims: Vec<f32>,
    prepared: PreparedQuery,
}

impl Scratch {
    /// Starts a walk over a graph of `len` nodes with nothing visited.
    fn begin(&mut self, len: usize) {
        if self.marks.len() < len {
            self.marks.resize(len, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|mark| *mark = 0);
            self.epoch = 1;
        }
        self.candidates.clear();
        self.results.clear();
    }

    /// Marks `node` visited; false when it already was.
    #[inline]
    fn visit(&mut self, node: u32) -> bool {
        let mark = &mut self.marks[node as usize];
        if *mark == self.epoch {
            return false;
        }
        *mark = self.epoch;
        true
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Counts one similarity evaluation. Tests can make it fail on purpose to
/// exercise an insert that stops half-way.
#[inline(always)]
fn count_eval() {
    #[cfg(test)]
    crate::distance::FAIL_AFTER_EVALS.with(|cell| {
        if let Some(left) = cell.get() {
            if left == 0 {
                cell.set(None);
                panic!("injected distance failure");
            }
            cell.set(Some(left - 1));
        }
    });
}

/// Similarity of two unit vectors.
#[inline]
fn similarity(a: &[f32], b: &[f32]) -> f32 {
    count_eval();
    dot(a, b)
}

/// Asks the CPU to start loading every cache line of `data` into cache.
/// Only a hint: it changes no result.
#[inline(always)]
fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        const LINE: usize = 64;
        let start = data.as_ptr().cast::<u8>();
        let bytes = std::mem::size_of_val(data);
        let mut offset = 0;
        while offset < bytes {
            #[allow(unsafe_code)]
            // SAFETY: `_mm_prefetch` needs only SSE, which every x86-64 CPU
            // has; a prefetch performs no architectural memory access and
            // cannot fault, and `offset < bytes` keeps the address inside
            // the live slice.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(start.add(offset).cast());
            }
            offset += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// The level of node `node`: geometric with ratio `1 / m`, drawn from a
/// hash of the node number so a build is reproducible.
fn level_of(node: usize, level_mult: f64) -> u8 {
    let mut x = (node as u64) ^ HNSW_LEVEL_SEED;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    // Uniform in (0, 1]: never zero, so the logarithm is finite.
    let uniform = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let level = (-uniform.ln() * level_mult).floor();
    (level as usize).min(HNSW_MAX_LAYERS - 1) as u8
}

/// What a snapshot holds for each node besides its links.
pub(crate) enum Stored {
    /// The full unit vectors, node-major.
    Vectors(Vec<f32>),
    /// The SQ8 codes only, node-major (a graph that keeps no vectors).
    Codes(Vec<i8>),
}

/// Entry point of the walk: the node on the highest layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    node: u32,
    level: u8,
}

/// The graph. See the module documentation for the layout.
pub(crate) struct Graph {
    dim: usize,
    m: usize,
    m0: usize,
    ef_construction: usize,
    level_mult: f64,
    /// Whether `vectors` holds every node's vector; without them the codes
    /// stand in for the vectors everywhere.
    full: bool,
    vectors: Vec<f32>,
    /// SQ8 codes of `vectors`, node-major.
    codes: CodeBook,
    levels: Vec<u8>,
    /// Per node `1 + m0` slots: the link count, then the links.
    links0: Vec<AtomicU32>,
    /// Per node, its links on layers `1..=level` (empty for most nodes).
    upper: Vec<RwLock<Vec<Vec<u32>>>>,
    /// Serialises link edits of one node.
    locks: Vec<Mutex<()>>,
    entry: RwLock<Option<Entry>>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("dim", &self.dim)
            .field("m", &self.m)
            .field("len", &self.len())
            .field("entry", &*self.entry.read())
            .finish_non_exhaustive()
    }
}

impl Graph {
    /// An empty graph for `dim`-dimensional vectors with `m` links per node
    /// (`2 × m` on the ground layer).
    #[cfg(test)]
    pub(crate) fn new(dim: usize, m: usize, ef_construction: usize) -> Self {
        Graph::with_vectors(dim, m, ef_construction, true)
    }

    /// [`Graph::new`], keeping the full vectors only when `full`.
    pub(crate) fn with_vectors(dim: usize, m: usize, ef_construction: usize, full: bool) -> Self {
        Graph {
            dim,
            m,
            m0: 2 * m,
            ef_construction,
            level_mult: 1.0 / (m.max(2) as f64).ln(),
            full,
            vectors: Vec::new(),
            codes: CodeBook::new(dim),
            levels: Vec::new(),
            links0: Vec::new(),
            upper: Vec::new(),
            locks: Vec::new(),
            entry: RwLock::new(None),
        }
    }

    /// Number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.levels.len()
    }

    /// The stored (unit) vector of `node`; only a graph that keeps its
    /// vectors has one.
    #[inline]
    pub(crate) fn vector(&self, node: usize) -> &[f32] {
        debug_assert!(self.full, "a codes-only graph keeps no vectors");
        &self.vectors[node * self.dim..(node + 1) * self.dim]
    }

    /// Whether the graph keeps every vector in full (else codes only).
    pub(crate) fn keeps_vectors(&self) -> bool {
        self.full
    }

    /// `node`'s vector: the stored one, or the one its codes stand for.
    pub(crate) fn vector_into(&self, node: usize, out: &mut Vec<f32>) {
        if self.full {
            out.clear();
            out.extend_from_slice(self.vector(node));
        } else {
            self.codes.grid().decode_into(self.code(node), out);
        }
    }

    /// Whether `vector × scale` (a unit vector) is the vector `node` was
    /// added with, as far as the graph can tell: equal to the stored one
    /// within float rounding, or coding to the node's codes within one
    /// level in every dimension.
    pub(crate) fn holds_vector(&self, node: usize, vector: &[f32], scale: f32) -> bool {
        if self.full {
            return self.vector(node).iter().zip(vector).all(|(a, b)| (a - b * scale).abs() <= 1e-5);
        }
        self.codes.grid().within_one_level(self.code(node), vector, scale)
    }

    /// Similarity of `query` (a unit vector) to `node`: exact on a graph
    /// that keeps its vectors, from the codes in `f32` otherwise.
    #[inline]
    pub(crate) fn query_sim(&self, query: &[f32], node: usize) -> f32 {
        if self.full {
            similarity(query, self.vector(node))
        } else {
            count_eval();
            self.codes.grid().decoded_dot(query, self.code(node))
        }
    }

    /// Similarity of two nodes, as [`Graph::query_sim`] measures it.
    #[inline]
    fn pair_sim(&self, a: usize, b: usize) -> f32 {
        if self.full {
            similarity(self.vector(a), self.vector(b))
        } else {
            count_eval();
            self.codes.grid().code_dot(self.code(a), self.code(b))
        }
    }

    /// Frees the full vectors: from now on the codes stand in for them.
    pub(crate) fn drop_vectors(&mut self) {
        self.full = false;
        self.vectors = Vec::new();
    }

    /// Every code, node-major (a codes-only snapshot's body).
    pub(crate) fn codes(&self) -> &[i8] {
        self.codes.all()
    }

    /// The SQ8 codes of `node`.
    #[inline]
    fn code(&self, node: usize) -> &[i8] {
        self.codes.code(node)
    }

    /// Approximate similarity of `node` to a prepared query, from its codes.
    #[inline(always)]
    fn coded_sim(&self, query: &PreparedQuery, node: u32) -> f32 {
        count_eval();
        query.sim(self.code(node as usize))
    }

    /// All vectors, node-major.
    pub(crate) fn vectors(&self) -> &[f32] {
        &self.vectors
    }

    fn stride(&self) -> usize {
        self.m0 + 1
    }

    /// Appends the storage of nodes for `data` (row-major unit vectors)
    /// without linking them.
    fn push_nodes(&mut self, data: &[f32]) {
        let first = self.len();
        let added = data.len() / self.dim;
        if self.full {
            self.vectors.extend_from_slice(data);
            self.codes.extend(&self.vectors, first);
        } else {
            self.codes.extend_rows(data);
        }
        self.add_node_slots(first, added);
    }

    /// The links, levels and locks of nodes `first..first + added`.
    fn add_node_slots(&mut self, first: usize, added: usize) {
        self.links0.extend((0..added * self.stride()).map(|_| AtomicU32::new(0)));
        for node in first..first + added {
            let level = level_of(node, self.level_mult);
            self.levels.push(level);
            self.upper.push(RwLock::new(vec![Vec::new(); level as usize]));
            self.locks.push(Mutex::new(()));
        }
    }

    /// Adds one node and links it. A panic inside leaves the node stored
    /// and possibly half-linked, which searches tolerate.
    pub(crate) fn insert(&mut self, unit: &[f32]) {
        debug_assert_eq!(unit.len(), self.dim);
        self.push_nodes(unit);
        self.link(self.len() - 1, unit);
    }

    /// Builds a graph over `data` (row-major unit vectors), linking nodes in
    /// parallel on the current rayon pool.
    #[cfg(test)]
    pub(crate) fn build(dim: usize, m: usize, ef_construction: usize, data: &[f32]) -> Self {
        Graph::build_owned(dim, m, ef_construction, data.to_vec(), true)
    }

    /// [`Graph::build`] over `data`, which it takes: linked on the full
    /// vectors (exact and fast), which are then kept only when `full`.
    pub(crate) fn build_owned(dim: usize, m: usize, ef_construction: usize, data: Vec<f32>, full: bool) -> Self {
        let mut graph = Graph::with_vectors(dim, m, ef_construction, true);
        let added = data.len() / dim;
        graph.vectors = data;
        graph.codes.extend(&graph.vectors, 0);
        graph.add_node_slots(0, added);
        let len = graph.len();
        if len > 0 {
            let graph = &graph;
            graph.link(0, graph.vector(0));
            // The first few hundred nodes alone set up the upper layers.
            let serial = len.min(256);
            (1..serial).for_each(|node| graph.link(node, graph.vector(node)));
            (serial..len).into_par_iter().for_each(|node| graph.link(node, graph.vector(node)));
        }
        if !full {
            graph.drop_vectors();
        }
        graph
    }

    /// The ground-layer links of `node`, written into `out`.
    #[inline]
    fn links0_into(&self, node: u32, out: &mut Vec<u32>) {
        out.clear();
        let base = node as usize * self.stride();
        let count = (self.links0[base].load(Ordering::Acquire) as usize).min(self.m0);
        out.extend(self.links0[base + 1..base + 1 + count].iter().map(|link| link.load(Ordering::Relaxed)));
    }

    /// The links of `node` on `layer`, written into `out`.
    #[inline]
    fn links_into(&self, node: u32, layer: u8, out: &mut Vec<u32>) {
        if layer == 0 {
            self.links0_into(node, out);
        } else {
            out.clear();
            if let Some(links) = self.upper[node as usize].read().get(layer as usize - 1) {
                out.extend_from_slice(links);
            }
        }
    }

    fn set_links(&self, node: u32, layer: u8, links: &[u32]) {
        if layer == 0 {
            let base = node as usize * self.stride();
            let count = links.len().min(self.m0);
            for (slot, &link) in self.links0[base + 1..base + 1 + count].iter().zip(links) {
                slot.store(link, Ordering::Relaxed);
            }
            self.links0[base].store(count as u32, Ordering::Release);
        } else if let Some(list) = self.upper[node as usize].write().get_mut(layer as usize - 1) {
            list.clear();
            list.extend_from_slice(links);
        }
    }

    /// Greedy descent on one layer from `from` towards the query.
    fn greedy(&self, query: &PreparedQuery, mut from: Scored, layer: u8, buffer: &mut Vec<u32>) -> Scored {
        loop {
            let mut moved = false;
            self.links_into(from.node, layer, buffer);
            for &next in buffer.iter() {
                let sim = self.coded_sim(query, next);
                let candidate = Scored { sim, node: next };
                if candidate > from {
                    from = candidate;
                    moved = true;
                }
            }
            if !moved {
                return from;
            }
        }
    }

    /// Best-first search of one layer from `start`, keeping the `ef` most
    /// similar nodes in `scratch.results`.
    fn search_layer(&self, query: &PreparedQuery, start: Scored, ef: usize, layer: u8, scratch: &mut Scratch) {
        scratch.begin(self.len());
        scratch.visit(start.node);
        scratch.candidates.push(start);
        scratch.results.push(Worst(start));
        let mut neighbours = std::mem::take(&mut scratch.neighbours);
        let mut sims = std::mem::take(&mut scratch.sims);
        while let Some(current) = scratch.candidates.pop() {
            let worst = scratch.results.peek().map_or(f32::NEG_INFINITY, |w| w.0.sim);
            if current.sim < worst && scratch.results.len() >= ef {
                break;
            }
            self.links_into(current.node, layer, &mut neighbours);
            // Unvisited neighbours first, their codes requested from memory
            // together, then scored: the loads overlap instead of queueing.
            neighbours.retain(|&next| scratch.visit(next));
            for &next in &neighbours {
                prefetch(self.code(next as usize));
            }
            sims.clear();
            sims.extend(neighbours.iter().map(|&next| self.coded_sim(query, next)));
            for (&next, &sim) in neighbours.iter().zip(&sims) {
                let full = scratch.results.len() >= ef;
                if full && sim <= scratch.results.peek().map_or(f32::NEG_INFINITY, |w| w.0.sim) {
                    continue;
                }
                let scored = Scored { sim, node: next };
                scratch.candidates.push(scored);
                scratch.results.push(Worst(scored));
                if scratch.results.len() > ef {
                    scratch.results.pop();
                }
            }
        }
        scratch.neighbours = neighbours;
        scratch.sims = sims;
    }

    /// Walks from the entry point down to layer 1 greedily.
    fn descend(&self, query: &PreparedQuery, entry: Entry, down_to: u8, buffer: &mut Vec<u32>) -> Scored {
        let mut at = Scored { sim: self.coded_sim(query, entry.node), node: entry.node };
        let mut layer = entry.level;
        while layer > down_to {
            at = self.greedy(query, at, layer, buffer);
            layer -= 1;
        }
        at
    }

    /// The `k` nodes most similar to `query` (a unit vector), best first,
    /// exploring `ef` candidates on the ground layer by their codes and
    /// ranking those by their full vectors.
    pub(crate) fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<Scored> {
        let Some(entry) = *self.entry.read() else { return Vec::new() };
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let scratch = &mut *scratch;
            let mut prepared = std::mem::take(&mut scratch.prepared);
            self.codes.prepare_into(query, &mut prepared);
            let mut buffer = std::mem::take(&mut scratch.neighbours);
            let start = self.descend(&prepared, entry, 0, &mut buffer);
            scratch.neighbours = buffer;
            self.search_layer(&prepared, start, ef.max(k), 0, scratch);
            scratch.prepared = prepared;
            let mut found: Vec<Scored> = scratch
                .results
                .drain()
                .map(|Worst(scored)| Scored { sim: self.query_sim(query, scored.node as usize), ..scored })
                .collect();
            found.sort_unstable_by(|a, b| b.cmp(a));
            found.truncate(k);
            found
        })
    }

    /// Links node `node` (already stored; `vector` is its unit vector) into
    /// the graph.
    fn link(&self, node: usize, vector: &[f32]) {
        let node32 = node as u32;
        let level = self.levels[node];
        let entry = {
            let current = *self.entry.read();
            match current {
                Some(entry) => entry,
                None => {
                    let mut slot = self.entry.write();
                    match *slot {
                        Some(entry) => entry,
                        None => {
                            *slot = Some(Entry { node: node32, level });
                            return;
                        }
                    }
                }
            }
        };
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let scratch = &mut *scratch;
            let mut prepared = std::mem::take(&mut scratch.prepared);
            self.codes.prepare_into(vector, &mut prepared);
            self.link_walk(node32, vector, level, entry, &prepared, scratch);
            scratch.prepared = prepared;
        });
        if level > entry.level {
            let mut slot = self.entry.write();
            if slot.is_none_or(|current| level > current.level) {
                *slot = Some(Entry { node: node32, level });
            }
        }
    }

    /// The walk of [`Graph::link`]: on each layer from the node's level
    /// down, find `ef_construction` candidates by their codes, score them
    /// with the full vectors, and link the node to the heuristic's choice.
    fn link_walk(
        &self,
        node: u32,
        vector: &[f32],
        level: u8,
        entry: Entry,
        query: &PreparedQuery,
        scratch: &mut Scratch,
    ) {
        let mut buffer = std::mem::take(&mut scratch.neighbours);
        let mut at = self.descend(query, entry, level, &mut buffer);
        scratch.neighbours = buffer;
        let mut candidates: Vec<Scored> = Vec::with_capacity(self.ef_construction);
        for layer in (0..=level.min(entry.level)).rev() {
            self.search_layer(query, at, self.ef_construction, layer, scratch);
            candidates.clear();
            candidates.extend(
                scratch
                    .results
                    .drain()
                    .filter(|w| w.0.node != node)
                    .map(|Worst(scored)| Scored { sim: self.query_sim(vector, scored.node as usize), ..scored }),
            );
            candidates.sort_unstable_by(|a, b| b.cmp(a));
            if let Some(&best) = candidates.first() {
                at = Scored { sim: self.coded_sim(query, best.node), ..best };
            }
            let chosen = self.select(&candidates, self.m);
            {
                let _lock = self.locks[node as usize].lock();
                self.set_links(node, layer, &chosen);
            }
            let cap = if layer == 0 { self.m0 } else { self.m };
            for &neighbour in &chosen {
                self.add_link(neighbour, node, layer, cap);
            }
        }
    }

    /// The neighbour-selection heuristic: walking `candidates` best first,
    /// keep one only when it is closer to the base node than to every node
    /// already kept, so links spread in different directions. Fewer
    /// candidates than `limit` are all kept.
    fn select(&self, candidates: &[Scored], limit: usize) -> Vec<u32> {
        if candidates.len() < limit {
            return candidates.iter().map(|c| c.node).collect();
        }
        let mut kept: Vec<u32> = Vec::with_capacity(limit);
        for candidate in candidates {
            if kept.len() >= limit {
                break;
            }
            let diverse =
                kept.iter().all(|&other| self.pair_sim(candidate.node as usize, other as usize) < candidate.sim);
            if diverse {
                kept.push(candidate.node);
            }
        }
        kept
    }

    /// Adds the back link `from → to` on `layer`, pruning `from`'s list
    /// with the heuristic when it is full.
    fn add_link(&self, from: u32, to: u32, layer: u8, cap: usize) {
        let _lock = self.locks[from as usize].lock();
        let mut links = Vec::with_capacity(cap + 1);
        self.links_into(from, layer, &mut links);
        if links.contains(&to) {
            return;
        }
        if links.len() < cap {
            links.push(to);
            self.set_links(from, layer, &links);
            return;
        }
        let mut scored: Vec<Scored> = links
            .iter()
            .chain(std::iter::once(&to))
            .map(|&node| Scored { sim: self.pair_sim(from as usize, node as usize), node })
            .collect();
        scored.sort_unstable_by(|a, b| b.cmp(a));
        let kept = self.select(&scored, cap);
        self.set_links(from, layer, &kept);
    }

    /// Approximate heap bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        let upper: usize = self
            .upper
            .iter()
            .map(|lists| {
                let lists = lists.read();
                lists.iter().map(|l| 24 + l.capacity() * 4).sum::<usize>() + 8
            })
            .sum();
        self.vectors.capacity() * 4
            + self.codes.memory_bytes()
            + self.links0.capacity() * 4
            + self.levels.capacity()
            + self.locks.capacity() * std::mem::size_of::<Mutex<()>>()
            + self.upper.capacity() * std::mem::size_of::<RwLock<Vec<Vec<u32>>>>()
            + upper
    }

    /// Serialises the graph's structure (not its vectors) for a snapshot:
    /// the code grid, the entry point and every node's links.
    pub(crate) fn encode_links(&self, out: &mut crate::snapshot::Encoder) {
        let (grid, trained_at) = self.codes.parts();
        out.u64(trained_at as u64);
        let (mid, step) = grid.parts();
        out.f32s(mid);
        out.f32s(step);
        match *self.entry.read() {
            Some(entry) => {
                out.u8(1);
                out.u32(entry.node);
                out.u8(entry.level);
            }
            None => out.u8(0),
        }
        let mut links = Vec::new();
        for node in 0..self.len() {
            let level = self.levels[node];
            out.u8(level);
            for layer in 0..=level {
                self.links_into(node as u32, layer, &mut links);
                out.u32(links.len() as u32);
                for &link in &links {
                    out.u32(link);
                }
            }
        }
    }

    /// Rebuilds a graph from [`Graph::encode_links`] output and its vectors,
    /// checking every count and link against the node count.
    pub(crate) fn decode(
        dim: usize,
        m: usize,
        ef_construction: usize,
        stored: Stored,
        d: &mut crate::snapshot::Decoder<'_>,
    ) -> std::result::Result<Self, String> {
        let len = match &stored {
            Stored::Vectors(vectors) => vectors.len() / dim,
            Stored::Codes(codes) => codes.len() / dim,
        };
        let mut graph = Graph::with_vectors(dim, m, ef_construction, matches!(stored, Stored::Vectors(_)));
        let trained_at = d.usize("code grid size").map_err(|e| e.to_string())?;
        let mid = d.f32s(dim, "code grid centres").map_err(|e| e.to_string())?;
        let step = d.f32s(dim, "code grid steps").map_err(|e| e.to_string())?;
        let grid = Sq8::from_parts(mid, step)
            .ok_or("the code grid holds a non-finite centre or a step that is not positive")?;
        let vectors = match stored {
            Stored::Vectors(vectors) => {
                graph.codes = CodeBook::with_grid(grid, trained_at, &vectors);
                vectors
            }
            Stored::Codes(codes) => {
                graph.codes = CodeBook::with_codes(grid, trained_at, codes);
                Vec::new()
            }
        };
        let entry = match d.u8("entry flag").map_err(|e| e.to_string())? {
            0 => None,
            1 => {
                let node = d.u32("entry node").map_err(|e| e.to_string())?;
                let level = d.u8("entry level").map_err(|e| e.to_string())?;
                Some(Entry { node, level })
            }
            other => return Err(format!("bad entry flag {other}")),
        };
        graph.vectors = vectors;
        graph.links0 = (0..len * graph.stride()).map(|_| AtomicU32::new(0)).collect();
        graph.levels.reserve(len);
        graph.upper.reserve(len);
        graph.locks.reserve(len);
        for node in 0..len {
            let level = d.u8("node level").map_err(|e| e.to_string())?;
            if level as usize >= HNSW_MAX_LAYERS {
                return Err(format!("node {node} has level {level}"));
            }
            let mut upper = Vec::with_capacity(level as usize);
            for layer in 0..=level {
                let count = d.u32("link count").map_err(|e| e.to_string())? as usize;
                let cap = if layer == 0 { graph.m0 } else { graph.m };
                if count > cap {
                    return Err(format!("node {node} has {count} links on layer {layer}, at most {cap} allowed"));
                }
                let mut links = Vec::with_capacity(count);
                for _ in 0..count {
                    let link = d.u32("link").map_err(|e| e.to_string())?;
                    if link as usize >= len {
                        return Err(format!("node {node} links to missing node {link}"));
                    }
                    links.push(link);
                }
                if layer == 0 {
                    let base = node * graph.stride();
                    graph.links0[base].store(count as u32, Ordering::Relaxed);
                    for (slot, link) in graph.links0[base + 1..].iter().zip(links) {
                        slot.store(link, Ordering::Relaxed);
                    }
                } else {
                    upper.push(links);
                }
            }
            graph.levels.push(level);
            graph.upper.push(RwLock::new(upper));
            graph.locks.push(Mutex::new(()));
        }
        match entry {
            Some(entry) if entry.node as usize >= len || graph.levels[entry.node as usize] != entry.level => {
                return Err(format!("entry node {} is not on layer {}", entry.node, entry.level));
            }
            None if len > 0 => return Err("a non-empty graph has no entry node".into()),
            _ => {}
        }
        *graph.entry.get_mut() = entry;
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::random_unit as unit;

    fn exact(data: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<u32> {
        let mut all: Vec<Scored> =
            data.chunks_exact(dim).enumerate().map(|(i, v)| Scored { sim: dot(query, v), node: i as u32 }).collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.into_iter().take(k).map(|s| s.node).collect()
    }

    #[test]
    fn levels_are_geometric_and_reproducible() {
        let mult = 1.0 / 16f64.ln();
        let levels: Vec<u8> = (0..100_000).map(|n| level_of(n, mult)).collect();
        assert_eq!(levels, (0..100_000).map(|n| level_of(n, mult)).collect::<Vec<_>>());
        let above0 = levels.iter().filter(|&&l| l > 0).count() as f64 / levels.len() as f64;
        assert!((above0 - 1.0 / 16.0).abs() < 0.01, "share above layer 0: {above0}");
        assert!(levels.iter().all(|&l| (l as usize) < HNSW_MAX_LAYERS));
    }

    #[test]
    fn built_and_incremental_graphs_find_the_true_neighbours() {
        let dim = 24;
        let data: Vec<f32> = (0..2_000u64).flat_map(|i| unit(i, dim)).collect();
        let built = Graph::build(dim, 8, 64, &data);
        let mut grown = Graph::new(dim, 8, 64);
        for row in data.chunks_exact(dim) {
            grown.insert(row);
        }
        for graph in [&built, &grown] {
            assert_eq!(graph.len(), 2_000);
            let mut overlap = 0;
            for q in 0..50u64 {
                let query = unit(10_000 + q, dim);
                let found = graph.search(&query, 10, 64);
                assert_eq!(found.len(), 10);
                assert!(found.windows(2).all(|w| w[0].sim >= w[1].sim), "best first");
                let truth = exact(&data, dim, &query, 10);
                overlap += found.iter().filter(|s| truth.contains(&s.node)).count();
            }
            assert!(overlap >= 475, "recall@10 {}", overlap as f64 / 500.0);
        }
        // Nodes are reachable: searching for a node's own vector finds it.
        // HNSW does not promise this for every node (a parallel build on
        // uniform random vectors, the hardest case, leaves about 0.1 % of
        // them off the path at ef 32), so the test bounds the share.
        let lost = (0..2_000).filter(|&node| built.search(built.vector(node), 1, 32)[0].node != node as u32).count();
        assert!(lost <= 20, "{lost} of 2000 nodes not found from their own vector");
    }

    #[test]
    fn links_respect_their_caps_and_point_at_nodes() {
        let dim = 8;
        let data: Vec<f32> = (0..600u64).flat_map(|i| unit(i, dim)).collect();
        let graph = Graph::build(dim, 4, 32, &data);
        let mut links = Vec::new();
        for node in 0..graph.len() as u32 {
            for layer in 0..=graph.levels[node as usize] {
                graph.links_into(node, layer, &mut links);
                assert!(links.len() <= if layer == 0 { 8 } else { 4 });
                assert!(links.iter().all(|&l| (l as usize) < graph.len() && l != node));
            }
        }
    }

    #[test]
    fn encoded_links_round_trip_and_bad_links_are_refused() {
        let dim = 8;
        let data: Vec<f32> = (0..300u64).flat_map(|i| unit(i, dim)).collect();
        let graph = Graph::build(dim, 4, 32, &data);
        let mut out = crate::snapshot::Encoder::default();
        graph.encode_links(&mut out);
        let path = std::path::Path::new("test");
        let back = Graph::decode(
            dim,
            4,
            32,
            Stored::Vectors(data.clone()),
            &mut crate::snapshot::Decoder::new(&out.bytes, path),
        )
        .unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for node in 0..300u32 {
            assert_eq!(back.levels[node as usize], graph.levels[node as usize]);
            for layer in 0..=graph.levels[node as usize] {
                graph.links_into(node, layer, &mut a);
                back.links_into(node, layer, &mut b);
                assert_eq!(a, b);
            }
        }
        assert_eq!(back.search(&unit(7, dim), 5, 16), graph.search(&unit(7, dim), 5, 16));
        // Layout: the code grid (8 + 2 × 4 × dim bytes), entry flag, entry
        // node, entry level, then node 0's level, its ground-layer link
        // count and its first link (at byte 11 after the grid).
        let grid = 8 + 2 * 4 * dim;
        let decode = |bytes: &[u8]| {
            Graph::decode(dim, 4, 32, Stored::Vectors(data.clone()), &mut crate::snapshot::Decoder::new(bytes, path))
                .unwrap_err()
        };
        let mut bad = out.bytes.clone();
        bad[grid + 11..grid + 15].copy_from_slice(&300u32.to_le_bytes());
        assert!(decode(&bad).contains("missing node 300"), "{}", decode(&bad));
        let mut bad = out.bytes.clone();
        bad[grid + 1..grid + 5].copy_from_slice(&299u32.to_le_bytes());
        bad[grid + 5] = 9;
        assert!(decode(&bad).contains("entry node 299"), "{}", decode(&bad));
        let mut bad = out.bytes.clone();
        bad[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
        bad[8 + 4 * dim..12 + 4 * dim].copy_from_slice(&0f32.to_le_bytes());
        assert!(decode(&bad).contains("code grid"), "{}", decode(&bad));
        let short = &out.bytes[..out.bytes.len() - 2];
        assert!(
            Graph::decode(dim, 4, 32, Stored::Vectors(data), &mut crate::snapshot::Decoder::new(short, path)).is_err()
        );
    }

    #[test]
    fn empty_and_single_node_graphs() {
        let mut graph = Graph::new(3, 4, 16);
        assert!(graph.search(&[1.0, 0.0, 0.0], 5, 10).is_empty());
        graph.insert(&[0.0, 1.0, 0.0]);
        let found = graph.search(&[1.0, 0.0, 0.0], 5, 10);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].node, 0);
    }
}
