//! An in-memory BM25 index over stemmed words: the fast path of keyword
//! search. FTS5 scores every row a query matches through its auxiliary
//! function API (microseconds a row), so a query holding a word found in
//! half the store costs milliseconds; here the same ranking is a walk over
//! integer postings. The SQLite FTS5 table stays the durable index and the
//! fallback while this one is being built.
//!
//! Documents are the caller's `u64` ids; a text's terms are its
//! lower-cased words of two characters or more, stopwords dropped, each
//! reduced to its Snowball stem. Scoring is Okapi BM25 with FTS5's
//! constants and idf floor, so the ranking matches `bm25()` on one column.

use std::collections::{HashMap, HashSet};

use parking_lot::RwLock;

use crate::keywords;

/// Term-frequency saturation (FTS5's `k1`).
pub(crate) const K1: f64 = 1.2;
/// Length normalisation (FTS5's `b`).
pub(crate) const B: f64 = 0.75;
/// Smallest idf a matching term contributes (FTS5 clamps the same way).
pub(crate) const MIN_IDF: f64 = 1e-6;

/// The stemmed terms of `text`, in order, with repeats.
pub(crate) fn terms(text: &str) -> Vec<String> {
    keywords::words(text).map(|word| keywords::stem(&word)).collect()
}

/// The distinct stemmed terms of a query, at most `max` of them, in first-seen order.
pub(crate) fn query_terms(text: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for term in terms(text) {
        if !out.contains(&term) {
            out.push(term);
            if out.len() == max {
                break;
            }
        }
    }
    out
}

/// A document's count of one term, and the document's length in terms:
/// a search's walk over postings reads nothing else per document. Both
/// saturate at `u16::MAX`, far above what an episodic document (2,000
/// characters and its tags) holds.
#[derive(Clone, Copy)]
struct Posting {
    slot: u32,
    tf: u16,
    length: u16,
}

#[derive(Default)]
struct Inner {
    term_ids: HashMap<String, u32>,
    /// Postings by term id, each list in increasing slot order: a search
    /// walks every list of its query a block of slots at a time.
    postings: Vec<Vec<Posting>>,
    /// Slot of each document id.
    slots: HashMap<u64, u32>,
    /// By slot: the document id, its length in terms and its distinct term ids.
    docs: Vec<Option<(u64, u32, Vec<u32>)>>,
    free: Vec<u32>,
    total_len: u64,
}

/// Slots a search scores at a time: its score table (32 KB) stays in the
/// core's first-level cache, where one table over every document (4 MB at
/// a million rows) took a cache miss at nearly every posting.
const SLOTS_PER_BLOCK: u32 = 8_192;

/// A thread-safe BM25 index: many searches at once, one change at a time.
#[derive(Default)]
pub(crate) struct Bm25Index {
    inner: RwLock<Inner>,
}

impl Bm25Index {
    /// An index over `docs` (id and text). Texts are split and stemmed on
    /// every core a batch at a time (stemming is most of the work), and
    /// inserted in their order, so the index is the same as one built
    /// document by document.
    pub(crate) fn build<'a>(docs: impl IntoIterator<Item = (u64, &'a str)>) -> Self {
        use rayon::prelude::*;
        const BATCH: usize = 8_192;
        let index = Self::default();
        {
            let mut inner = index.inner.write();
            let mut docs = docs.into_iter().peekable();
            let mut batch: Vec<(u64, &str)> = Vec::with_capacity(BATCH);
            while docs.peek().is_some() {
                batch.clear();
                batch.extend(docs.by_ref().take(BATCH));
                let stemmed: Vec<Vec<String>> = batch.par_iter().map(|(_, text)| terms(text)).collect();
                for ((id, _), terms) in batch.iter().zip(&stemmed) {
                    inner.insert(*id, terms);
                }
            }
            // Growing by doubling leaves up to half of each list unused: a
            // store of a million rows keeps about 100 bytes a row less.
            inner.postings.iter_mut().for_each(Vec::shrink_to_fit);
            inner.postings.shrink_to_fit();
            inner.docs.shrink_to_fit();
        }
        index
    }

    /// Adds (or replaces) document `id`.
    pub(crate) fn add(&self, id: u64, text: &str) {
        let terms = terms(text);
        let mut inner = self.inner.write();
        inner.remove(id);
        inner.insert(id, &terms);
    }

    /// Removes document `id`; `false` when it was not there.
    pub(crate) fn remove(&self, id: u64) -> bool {
        self.inner.write().remove(id)
    }

    /// Number of documents.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().slots.len()
    }

    /// Approximate heap bytes: postings, per-document term lists, the
    /// term and slot tables (hash tables counted at their capacity plus
    /// one control byte per bucket).
    pub(crate) fn memory_bytes(&self) -> usize {
        let inner = self.inner.read();
        let postings: usize =
            inner.postings.iter().map(|list| list.capacity() * std::mem::size_of::<Posting>()).sum::<usize>()
                + inner.postings.capacity() * std::mem::size_of::<Vec<Posting>>();
        let docs: usize =
            inner.docs.iter().map(|doc| doc.as_ref().map_or(0, |(_, _, terms)| terms.capacity() * 4)).sum::<usize>()
                + inner.docs.capacity() * std::mem::size_of::<Option<(u64, u32, Vec<u32>)>>();
        let terms: usize = inner.term_ids.keys().map(String::capacity).sum::<usize>()
            + inner.term_ids.capacity() * (std::mem::size_of::<(String, u32)>() + 1);
        let slots = inner.slots.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        postings + docs + terms + slots + inner.free.capacity() * 4
    }

    /// Every document id, unordered.
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.inner.read().slots.keys().copied().collect()
    }

    /// Brings the index to exactly the documents `wanted` (the ids its
    /// table holds now): drops the others and adds the missing ones, whose
    /// texts `load` reads. Ids must never be reused for another text.
    pub(crate) fn sync_to<E>(
        &self,
        wanted: &HashSet<u64>,
        load: impl FnOnce(&HashSet<u64>) -> Result<Vec<(u64, String)>, E>,
    ) -> Result<(), E> {
        let have: HashSet<u64> = self.ids().into_iter().collect();
        for id in have.difference(wanted) {
            self.remove(*id);
        }
        let missing: HashSet<u64> = wanted.difference(&have).copied().collect();
        if !missing.is_empty() {
            for (id, text) in load(&missing)? {
                self.add(id, &text);
            }
        }
        Ok(())
    }

    /// The largest bm25 any document could reach for `query_terms`
    /// (stemmed, distinct): each term's idf × (k1 + 1), the limit of its
    /// term-frequency factor. A term no document holds counts with the idf
    /// of a term in none, so a query whose telling words are missing has a
    /// high ceiling that its best match stays far below.
    pub(crate) fn ceiling(&self, query_terms: &[String]) -> f64 {
        let inner = self.inner.read();
        let count = inner.slots.len() as f64;
        query_terms
            .iter()
            .map(|term| {
                let df = inner.term_ids.get(term).map_or(0, |&term_id| inner.postings[term_id as usize].len()) as f64;
                ((count - df + 0.5) / (df + 0.5)).ln().max(MIN_IDF) * (K1 + 1.0)
            })
            .sum()
    }

    /// The `k` best documents for `query_terms` (stemmed, distinct), as
    /// `(id, score)` with the best first and ties broken by the lower id.
    /// Documents matching no term are not returned.
    ///
    /// A term in more than half the documents has the floor idf (1e-6): it
    /// only ranks documents that match nothing else. Its postings (for a
    /// speaker's name, say, every other row) are therefore walked only when
    /// the other terms match fewer than `k` documents.
    pub(crate) fn search(&self, query_terms: &[String], k: usize) -> Vec<(u64, f64)> {
        let inner = self.inner.read();
        let count = inner.slots.len();
        if count == 0 || k == 0 {
            return Vec::new();
        }
        let average = inner.total_len as f64 / count as f64;
        let mut weighted: Vec<(&[Posting], f64)> = Vec::new();
        let mut floor: Vec<(&[Posting], f64)> = Vec::new();
        for term in query_terms {
            let Some(&term_id) = inner.term_ids.get(term) else { continue };
            let postings = &inner.postings[term_id as usize];
            if postings.is_empty() {
                continue;
            }
            let df = postings.len() as f64;
            let idf = ((count as f64 - df + 0.5) / (df + 0.5)).ln();
            if idf > MIN_IDF { weighted.push((postings, idf)) } else { floor.push((postings, MIN_IDF)) }
        }
        let mut ranked = walk(&weighted, inner.docs.len(), average);
        if ranked.len() < k && !floor.is_empty() {
            // Walked again with the floor terms after the others, so each
            // document's score adds its terms in the same order either way.
            weighted.extend(floor);
            ranked = walk(&weighted, inner.docs.len(), average);
        }
        let id_of = |slot: u32| inner.docs[slot as usize].as_ref().map_or(u64::MAX, |(id, _, _)| *id);
        // The top k by score, ties by id: ids are read only for the
        // documents that end up in the answer or tie with its last score.
        let by_score = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0);
        let mut best: Vec<(f64, u64)> = if ranked.len() > k {
            ranked.select_nth_unstable_by(k - 1, by_score);
            let last = ranked[k - 1].0;
            // Every document scoring above `last` is among the first k - 1;
            // those scoring `last`, on either side, share the last places:
            // the lowest ids take them.
            let mut best: Vec<(f64, u64)> = ranked[..k - 1]
                .iter()
                .filter(|(score, _)| *score > last)
                .map(|&(score, slot)| (f64::from(score), id_of(slot)))
                .collect();
            let mut tied: Vec<(f64, u64)> = ranked
                .iter()
                .filter(|(score, _)| *score == last)
                .map(|&(score, slot)| (f64::from(score), id_of(slot)))
                .collect();
            tied.sort_unstable_by_key(|&(_, id)| id);
            tied.truncate(k - best.len());
            best.extend(tied);
            best
        } else {
            ranked.into_iter().map(|(score, slot)| (f64::from(score), id_of(slot))).collect()
        };
        best.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        best.into_iter().map(|(score, id)| (id, score)).collect()
    }
}

/// Every document matching one of `terms` (each a postings list in slot
/// order and its idf) with its score, in slot order. Each document's
/// score adds its terms' shares in the order of `terms`.
fn walk(terms: &[(&[Posting], f64)], slots: usize, average: f64) -> Vec<(f32, u32)> {
    let expected: usize = terms.iter().map(|(postings, _)| postings.len()).sum();
    let mut ranked: Vec<(f32, u32)> = Vec::with_capacity(expected);
    let mut cursors = vec![0usize; terms.len()];
    let mut scores = vec![0.0f32; SLOTS_PER_BLOCK as usize];
    // The block's slots scored so far, `len` of them, and one place more:
    // each posting writes its slot at `len` and counts it only when new.
    // Branch-free, because whether a slot is new depends on a load, and a
    // branch on it would mispredict about half the time.
    let mut touched = vec![0u32; SLOTS_PER_BLOCK as usize + 1];
    let average = average.max(f64::MIN_POSITIVE);
    let mut start = 0u32;
    while (start as usize) < slots {
        let end = start.saturating_add(SLOTS_PER_BLOCK);
        let mut len = 0;
        for ((postings, idf), cursor) in terms.iter().zip(&mut cursors) {
            for posting in &postings[*cursor..] {
                if posting.slot >= end {
                    break;
                }
                *cursor += 1;
                let offset = (posting.slot - start) as usize;
                let tf = f64::from(posting.tf);
                let norm = K1 * (1.0 - B + B * f64::from(posting.length) / average);
                let score = &mut scores[offset];
                touched[len] = posting.slot;
                len += usize::from(*score == 0.0);
                *score += (idf * tf * (K1 + 1.0) / (tf + norm)) as f32;
            }
        }
        ranked.extend(touched[..len].iter().map(|&slot| (std::mem::take(&mut scores[(slot - start) as usize]), slot)));
        start = end;
    }
    ranked
}

impl Inner {
    fn insert(&mut self, id: u64, terms: &[String]) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.docs.push(None);
                (self.docs.len() - 1) as u32
            }
        };
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for term in terms {
            let next = self.term_ids.len() as u32;
            let term_id = *self.term_ids.entry(term.clone()).or_insert(next);
            if term_id as usize == self.postings.len() {
                self.postings.push(Vec::new());
            }
            match counts.iter_mut().find(|(seen, _)| *seen == term_id) {
                Some((_, count)) => *count += 1,
                None => counts.push((term_id, 1)),
            }
        }
        let length = terms.len() as u32;
        let short = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
        for (term_id, tf) in &counts {
            let postings = &mut self.postings[*term_id as usize];
            // New slots come last; a freed slot reused goes back in its place.
            let posting = Posting { slot, tf: short(*tf), length: short(length) };
            if postings.last().is_none_or(|last| last.slot < slot) {
                postings.push(posting);
            } else {
                let at = postings.partition_point(|posting| posting.slot < slot);
                postings.insert(at, posting);
            }
        }
        self.total_len += u64::from(length);
        self.docs[slot as usize] = Some((id, length, counts.into_iter().map(|(term_id, _)| term_id).collect()));
        self.slots.insert(id, slot);
    }

    fn remove(&mut self, id: u64) -> bool {
        let Some(slot) = self.slots.remove(&id) else { return false };
        if let Some((_, length, term_ids)) = self.docs[slot as usize].take() {
            self.total_len -= u64::from(length);
            for term_id in term_ids {
                let postings = &mut self.postings[term_id as usize];
                if let Ok(position) = postings.binary_search_by_key(&slot, |posting| posting.slot) {
                    postings.remove(position);
                }
            }
        }
        self.free.push(slot);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Vec<String> {
        query_terms(text, 32)
    }

    #[test]
    fn scores_match_hand_computed_bm25() {
        // Three documents; "tea" is in two of them.
        let index = Bm25Index::build([(1, "green tea tea"), (2, "black tea with milk"), (3, "coffee beans")]);
        // Terms: [green, tea, tea] (3), [black, tea, milk] (3; "with" is a stopword), [coffe, bean] (2).
        let average = 8.0 / 3.0;
        let idf = ((3.0 - 2.0 + 0.5) / (2.0 + 0.5f64)).ln().max(MIN_IDF);
        let expect = |tf: f64, length: f64| idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average));
        let hits = index.search(&q("tea"), 10);
        assert_eq!(hits.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2]);
        assert!((hits[0].1 - expect(2.0, 3.0)).abs() < 1e-12);
        assert!((hits[1].1 - expect(1.0, 3.0)).abs() < 1e-12);
        // A term in one document of three has a positive idf.
        let milk = index.search(&q("milk"), 10);
        assert_eq!(milk.len(), 1);
        assert!(milk[0].1 > hits[0].1);
    }

    #[test]
    fn stems_join_inflections_and_stopwords_never_match() {
        let index = Bm25Index::build([(7, "Deploying the gateways"), (8, "the and of")]);
        assert_eq!(index.search(&q("deploy gateway"), 5).first().map(|(id, _)| *id), Some(7));
        assert!(index.search(&q("the of"), 5).is_empty());
        assert!(index.search(&[], 5).is_empty());
    }

    #[test]
    fn removed_documents_never_surface_and_slots_are_reused() {
        let index = Bm25Index::build((1..=100u64).map(|id| (id, if id % 2 == 0 { "even tide" } else { "odd tide" })));
        for id in (2..=100).step_by(2) {
            assert!(index.remove(id));
        }
        assert!(!index.remove(2));
        assert_eq!(index.len(), 50);
        assert!(index.search(&q("even"), 100).is_empty());
        assert!(index.search(&q("tide"), 100).iter().all(|(id, _)| id % 2 == 1));
        index.add(1_000, "even again");
        assert_eq!(index.search(&q("even"), 10), vec![(1_000, index.search(&q("even"), 10)[0].1)]);
        assert_eq!(index.inner.read().docs.len(), 100, "a freed slot is reused");
        // Re-adding an id replaces its text.
        index.add(1_000, "odd now");
        assert!(index.search(&q("even"), 10).is_empty());
    }

    #[test]
    fn sync_drops_extra_ids_and_loads_only_the_missing_ones() {
        let index = Bm25Index::build([(1, "old harbour"), (2, "kept lantern")]);
        let wanted: HashSet<u64> = [2, 3].into_iter().collect();
        let mut asked = Vec::new();
        index
            .sync_to(&wanted, |missing| {
                asked.extend(missing.iter().copied());
                Ok::<_, ()>(vec![(3, "new meadow".to_owned())])
            })
            .unwrap();
        assert_eq!(asked, [3]);
        let mut ids = index.ids();
        ids.sort_unstable();
        assert_eq!(ids, [2, 3]);
        assert!(index.search(&q("harbour"), 5).is_empty());
        assert_eq!(index.search(&q("meadow"), 5)[0].0, 3);
        // In step: nothing to load, and a loader error is never reached.
        index.sync_to(&wanted, |_| Err("not called")).unwrap();
        assert_eq!(index.sync_to(&[4].into_iter().collect(), |_| Err("refused")), Err("refused"));
    }

    #[test]
    fn top_k_is_the_head_of_the_full_order_with_ties_by_id() {
        let docs: Vec<(u64, String)> = (0..500u64)
            .map(|id| (id, format!("alpha {} beta{}", "gamma ".repeat((id % 7) as usize), id % 3)))
            .collect();
        let index = Bm25Index::build(docs.iter().map(|(id, text)| (*id, text.as_str())));
        let all = index.search(&q("alpha gamma beta1"), usize::MAX);
        assert_eq!(all.len(), 500);
        for window in all.windows(2) {
            assert!(window[0].1 > window[1].1 || (window[0].1 == window[1].1 && window[0].0 < window[1].0));
        }
        // "alpha" is in every document: the top 17 come from the other terms
        // alone, in the same order, scores lower by at most alpha's floor share.
        let top = index.search(&q("alpha gamma beta1"), 17);
        assert_eq!(
            top.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            all[..17].iter().map(|(id, _)| *id).collect::<Vec<_>>()
        );
        assert!(top.iter().zip(&all).all(|(a, b)| (b.1 - a.1) >= 0.0 && (b.1 - a.1) < 1e-5));
    }

    #[test]
    fn a_search_across_many_blocks_scores_every_document_as_one_table_would() {
        // Three blocks of slots and a half, then a tenth removed and their
        // slots reused by new documents, so postings are inserted mid-list.
        let text = |id: u64| format!("a{} b{} c{} d{}", id % 7, id % 11, id % 13, id % 3);
        let rows = 3 * u64::from(SLOTS_PER_BLOCK) + 4_000;
        let texts: Vec<String> = (0..rows).map(text).collect();
        let index = Bm25Index::build(texts.iter().zip(0..).map(|(text, id)| (id, text.as_str())));
        for id in (0..rows).step_by(10) {
            index.remove(id);
        }
        for id in rows..rows + 1_500 {
            index.add(id, &text(id));
        }
        let live: Vec<u64> = (0..rows + 1_500).filter(|id| id >= &rows || id % 10 != 0).collect();
        let docs: Vec<Vec<String>> = live.iter().map(|&id| terms(&text(id))).collect();
        let average = docs.iter().map(Vec::len).sum::<usize>() as f64 / docs.len() as f64;
        let query = q("a3 a4 b5 c12 d2");
        let df: Vec<f64> =
            query.iter().map(|term| docs.iter().filter(|doc| doc.contains(term)).count() as f64).collect();
        let mut expected: Vec<(u64, f64)> = live
            .iter()
            .zip(&docs)
            .filter_map(|(&id, doc)| {
                let mut score = 0.0f32;
                for (term, df) in query.iter().zip(&df) {
                    let tf = doc.iter().filter(|t| *t == term).count() as f64;
                    if tf > 0.0 {
                        let idf = ((docs.len() as f64 - df + 0.5) / (df + 0.5)).ln();
                        let norm = K1 * (1.0 - B + B * doc.len() as f64 / average);
                        score += (idf * tf * (K1 + 1.0) / (tf + norm)) as f32;
                    }
                }
                (score > 0.0).then_some((id, f64::from(score)))
            })
            .collect();
        expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        assert!(expected.len() > SLOTS_PER_BLOCK as usize, "the query matches documents in every block");
        assert!(expected.iter().any(|(id, _)| *id >= rows), "and documents in reused slots");
        assert_eq!(index.search(&query, usize::MAX), expected);
        assert_eq!(index.search(&query, 40), expected[..40]);
    }

    #[test]
    fn terms_in_most_documents_still_rank_when_little_else_matches() {
        let mut docs: Vec<(u64, String)> = (0..20u64).map(|id| (id, format!("alice said item{id}"))).collect();
        docs.push((100, "bob said lighthouse".to_owned()));
        let index = Bm25Index::build(docs.iter().map(|(id, text)| (*id, text.as_str())));
        // "alice" is in 20 of 21 documents: floor idf. "lighthouse" matches one.
        let hits = index.search(&q("alice lighthouse"), 5);
        assert_eq!(hits[0].0, 100);
        assert_eq!(hits.len(), 5, "alice's documents fill the rest: {hits:?}");
        assert!(hits[1..].iter().all(|(id, score)| *id < 20 && *score < 1e-5));
        // With enough strong matches the floor term adds nothing.
        assert_eq!(index.search(&q("alice lighthouse"), 1), vec![(100, hits[0].1)]);
    }

    #[test]
    fn concurrent_changes_and_searches_keep_postings_consistent() {
        let index = std::sync::Arc::new(Bm25Index::default());
        std::thread::scope(|scope| {
            for writer in 0..4u64 {
                let index = &index;
                scope.spawn(move || {
                    for i in 0..500u64 {
                        let id = writer * 1_000 + i;
                        index.add(id, &format!("shared word{} writer{writer}", i % 10));
                        if i % 3 == 0 {
                            index.remove(id);
                        }
                    }
                });
            }
            for _ in 0..4 {
                let index = &index;
                scope.spawn(move || {
                    for _ in 0..200 {
                        let hits = index.search(&q("shared word3"), 50);
                        assert!(hits.iter().all(|(_, score)| *score > 0.0));
                        assert!(hits.windows(2).all(|pair| pair[0].1 >= pair[1].1));
                    }
                });
            }
        });
        // At rest: every kept document is found, no removed one is.
        let hits = index.search(&q("shared"), usize::MAX);
        let expected = 4 * (500 - 167);
        assert_eq!(hits.len(), expected);
        assert_eq!(index.len(), expected);
        assert!(hits.iter().all(|(id, _)| id % 1_000 % 3 != 0));
        let inner = index.inner.read();
        let postings: usize = inner.postings.iter().map(Vec::len).sum();
        let expected_postings: usize = inner.docs.iter().flatten().map(|(_, _, terms)| terms.len()).sum();
        assert_eq!(postings, expected_postings);
        assert!(
            inner.postings.iter().all(|list| list.windows(2).all(|pair| pair[0].slot < pair[1].slot)),
            "every postings list stays in slot order"
        );
    }
}
