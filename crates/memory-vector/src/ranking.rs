//! Ranking math of episodic recall: decay, relevance admission and MMR.
//!
//! Pure functions, no I/O. The order of use is the specification's:
//! [`admit`] on the *raw* cosine first (when recall feeds a prompt), then
//! [`decay_score`] for ordering, then [`mmr`] for diversity, then the limit.

use std::cmp::Ordering;

use crate::constants::{
    DECAY_RATE_PER_DAY, IMPORTANCE_BASE, IMPORTANCE_WEIGHT, LONG_TEXT_CHARS, LONG_TEXT_RELEVANCE_THRESHOLD,
    MINILM_ABSTAIN_BELOW, MINILM_ABSTAIN_UNNAMED_BELOW, MINILM_LONG_TEXT_RELEVANCE_THRESHOLD,
    MINILM_RELEVANCE_THRESHOLD, MMR_MAX_POOL, RELEVANCE_THRESHOLD,
};

/// Decay-adjusted score `cos × (0.7 + 0.3 × importance) × exp(−0.03 × age_days)`.
///
/// `importance` is clamped to `[0, 1]` and a negative age (a timestamp from
/// the future, clock skew) counts as zero days, so neither can inflate a
/// score.
pub fn decay_score(cosine: f32, importance: f32, age_days: f32) -> f32 {
    let importance = importance.clamp(0.0, 1.0);
    let age_days = age_days.max(0.0);
    cosine * (IMPORTANCE_BASE + IMPORTANCE_WEIGHT * importance) * (-DECAY_RATE_PER_DAY * age_days).exp()
}

/// One memory to order by [`decay_score`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayInput {
    /// The caller's row id (breaks ties: smaller first).
    pub id: u64,
    /// Raw cosine between query and memory.
    pub cosine: f32,
    /// Importance in `[0, 1]`.
    pub importance: f32,
    /// Age in days (fractional days allowed).
    pub age_days: f32,
}

/// Positions of `items` ordered by decreasing [`decay_score`], ties broken
/// by the smaller id, then by input position.
pub fn rank_by_decay(items: &[DecayInput]) -> Vec<usize> {
    let scores: Vec<f32> = items.iter().map(|m| decay_score(m.cosine, m.importance, m.age_days)).collect();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(items[a].id.cmp(&items[b].id)).then(a.cmp(&b)));
    order
}

/// Raw-cosine threshold for a memory text of `text_chars` characters under
/// the specification's gate: 0.55, relaxed to 0.42 above 300 characters
/// (long texts dilute cosine). See [`RelevanceGate`] for other models.
pub fn relevance_threshold(text_chars: usize) -> f32 {
    RelevanceGate::SPECIFICATION.threshold(text_chars)
}

/// Whether a memory may be injected into context under the specification's
/// gate: its *raw* cosine (never the decayed score) reaches
/// [`relevance_threshold`].
pub fn admit(cosine: f32, text_chars: usize) -> bool {
    RelevanceGate::SPECIFICATION.admit(cosine, text_chars)
}

/// The raw-cosine thresholds of the relevance gate, a property of the
/// embedding model: cosines of related and unrelated texts sit at different
/// heights in each model's space.
///
/// ```
/// use cairn_memory_vector::RelevanceGate;
/// let gate = RelevanceGate::for_model("all-MiniLM-L6-v2");
/// assert_eq!(gate, RelevanceGate::ALL_MINILM_L6_V2);
/// assert!(gate.admit(0.46, 64) && !RelevanceGate::SPECIFICATION.admit(0.46, 64));
/// assert_eq!(RelevanceGate::for_model("Qwen3-Embedding-0.6B"), RelevanceGate::SPECIFICATION);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelevanceGate {
    /// Threshold for texts of at most `long_text_chars` characters.
    pub short: f32,
    /// Threshold for texts longer than `long_text_chars`.
    pub long: f32,
    /// Length (characters) above which `long` applies.
    pub long_text_chars: usize,
    /// Abstention: when no stored text reaches this raw cosine, nothing is
    /// relevant and the caller admits nothing at all (0 never abstains).
    pub abstain_below: f32,
    /// Abstention for a query that names nobody in a conversation: where
    /// the stored texts are turns of named speakers and the query names
    /// none of them, the caller admits nothing unless a stored text reaches
    /// this raw cosine. At most `abstain_below`: no stronger floor; with
    /// `abstain_below` 0 the gate never abstains.
    pub abstain_unnamed_below: f32,
}

impl RelevanceGate {
    /// The specification's gate, set for Qwen3-Embedding: 0.55, and 0.42
    /// above 300 characters.
    pub const SPECIFICATION: RelevanceGate = RelevanceGate {
        short: RELEVANCE_THRESHOLD,
        long: LONG_TEXT_RELEVANCE_THRESHOLD,
        long_text_chars: LONG_TEXT_CHARS,
        abstain_below: 0.0,
        abstain_unnamed_below: 0.0,
    };

    /// all-MiniLM-L6-v2: the cosine that only 1 % of human-rated unrelated
    /// pairs reach, on a public corpus that has nothing to do with the
    /// evaluation data (see [`MINILM_RELEVANCE_THRESHOLD`]).
    pub const ALL_MINILM_L6_V2: RelevanceGate = RelevanceGate {
        short: MINILM_RELEVANCE_THRESHOLD,
        long: MINILM_LONG_TEXT_RELEVANCE_THRESHOLD,
        long_text_chars: LONG_TEXT_CHARS,
        abstain_below: MINILM_ABSTAIN_BELOW,
        abstain_unnamed_below: MINILM_ABSTAIN_UNNAMED_BELOW,
    };

    /// The gate of the model named `model_id` (the model folder's name, as
    /// embedders report it; case and an `owner/` prefix are ignored).
    /// Models without a calibrated gate use [`RelevanceGate::SPECIFICATION`].
    pub fn for_model(model_id: &str) -> RelevanceGate {
        let name = model_id.rsplit('/').next().unwrap_or(model_id).to_ascii_lowercase();
        if name == "all-minilm-l6-v2" { RelevanceGate::ALL_MINILM_L6_V2 } else { RelevanceGate::SPECIFICATION }
    }

    /// The threshold for a text of `text_chars` characters.
    pub fn threshold(&self, text_chars: usize) -> f32 {
        if text_chars > self.long_text_chars { self.long } else { self.short }
    }

    /// Whether a raw cosine reaches the threshold for a text of `text_chars` characters.
    pub fn admit(&self, cosine: f32, text_chars: usize) -> bool {
        cosine >= self.threshold(text_chars)
    }

    /// Whether a query whose best raw cosine to any stored text is
    /// `best_cosine` should get nothing at all ([`Self::abstain_below`]).
    pub fn abstains(&self, best_cosine: f32) -> bool {
        self.abstain_below > 0.0 && best_cosine < self.abstain_below
    }

    /// Whether a query that names nobody in a conversation, whose best raw
    /// cosine to any stored text is `best_cosine`, should get nothing at all:
    /// under [`Self::abstain_unnamed_below`] or [`Self::abstain_below`],
    /// whichever is higher. A gate whose `abstain_below` is 0 never abstains.
    pub fn abstains_unnamed(&self, best_cosine: f32) -> bool {
        self.abstain_below > 0.0 && best_cosine < self.abstain_below.max(self.abstain_unnamed_below)
    }

    /// The lower of the two thresholds: no cosine under it can be admitted.
    pub fn lowest(&self) -> f32 {
        self.short.min(self.long)
    }
}

/// The set of lower-cased words of a text (split on anything that is not
/// alphanumeric), as MMR compares texts by. Words are kept as sorted,
/// deduplicated 64-bit hashes of their lower-cased form, so building a set
/// allocates one vector and comparing two is a merge of integers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WordSet(Vec<u64>);

/// Longest ASCII word lower-cased on the stack before hashing.
const STACK_WORD: usize = 64;

/// Hash of a word's lower-cased form (`str::to_lowercase`), the same for
/// every spelling that lower-cases to the same text.
fn word_hash(word: &str) -> u64 {
    use std::hash::Hasher;
    // A fixed-key SipHash: the same hashes in every process.
    let mut hasher = std::hash::DefaultHasher::new();
    if word.is_ascii() && word.len() <= STACK_WORD {
        let mut buffer = [0u8; STACK_WORD];
        let lower = &mut buffer[..word.len()];
        lower.copy_from_slice(word.as_bytes());
        lower.make_ascii_lowercase();
        hasher.write(lower);
    } else {
        hasher.write(word.to_lowercase().as_bytes());
    }
    hasher.finish()
}

impl WordSet {
    /// Tokenises `text`.
    pub fn new(text: &str) -> Self {
        let mut words: Vec<u64> =
            text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(word_hash).collect();
        words.sort_unstable();
        words.dedup();
        WordSet(words)
    }

    /// Number of distinct words.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text had no words.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Jaccard similarity `|A ∩ B| / |A ∪ B|`; two empty sets score 0.
    pub fn jaccard(&self, other: &WordSet) -> f32 {
        let (mut i, mut j, mut common) = (0, 0, 0usize);
        while i < self.0.len() && j < other.0.len() {
            match self.0[i].cmp(&other.0[j]) {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    common += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        let union = self.0.len() + other.0.len() - common;
        if union == 0 { 0.0 } else { common as f32 / union as f32 }
    }
}

/// Jaccard similarity of the word sets of two texts.
pub fn jaccard(a: &str, b: &str) -> f32 {
    WordSet::new(a).jaccard(&WordSet::new(b))
}

/// One MMR candidate: its relevance (normally the [`decay_score`]) and text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MmrCandidate<'a> {
    /// Relevance to the query; higher is better.
    pub relevance: f32,
    /// Text compared by word-set Jaccard similarity.
    pub text: &'a str,
}

/// Maximal Marginal Relevance: greedily picks up to `limit` candidates,
/// each maximising `λ × relevance − (1 − λ) × max Jaccard(to already picked)`.
///
/// Returns positions into `candidates` in pick order. The pool is the
/// [`MMR_MAX_POOL`] (1,000) most relevant candidates, never cut down toward
/// `limit` (picking from the tail is the point of MMR). Ties are broken
/// deterministically: higher MMR value, then higher relevance, then the
/// earlier position.
///
/// The work is done lazily with the same result: the pool is walked in
/// relevance order and, for `λ` in `[0, 1]`, a round stops as soon as
/// `λ × relevance` (an upper bound of every later value) cannot beat the
/// best value found; a candidate's word set and its similarity to the
/// picks are computed only when the walk reaches it.
pub fn mmr(candidates: &[MmrCandidate<'_>], lambda: f32, limit: usize) -> Vec<usize> {
    let _span = tracing::trace_span!("mmr", n = candidates.len(), limit).entered();
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    pool.sort_by(|&a, &b| candidates[b].relevance.total_cmp(&candidates[a].relevance).then(a.cmp(&b)));
    pool.truncate(MMR_MAX_POOL);
    let bounded = (0.0..=1.0).contains(&lambda);
    let mut words: Vec<WordSet> = vec![WordSet::default(); pool.len()];
    let mut tokenised = vec![false; pool.len()];
    // max_similarity[p]: largest Jaccard of pool entry p to the first
    // compared[p] picks.
    let mut max_similarity = vec![0.0f32; pool.len()];
    let mut compared = vec![0usize; pool.len()];
    let mut taken = vec![false; pool.len()];
    // Pool positions of the picks, in pick order.
    let mut picks: Vec<usize> = Vec::with_capacity(limit.min(pool.len()));
    while picks.len() < limit.min(pool.len()) {
        let mut best: Option<(usize, f32)> = None;
        for p in 0..pool.len() {
            if taken[p] {
                continue;
            }
            let relevance = candidates[pool[p]].relevance;
            // With λ in [0, 1] a value is at most λ × relevance, and the
            // pool is sorted by relevance: nothing from here on can win.
            if bounded && best.is_some_and(|(_, best_value)| lambda * relevance <= best_value) {
                break;
            }
            if compared[p] < picks.len() {
                if !tokenised[p] {
                    words[p] = WordSet::new(candidates[pool[p]].text);
                    tokenised[p] = true;
                }
                for &q in &picks[compared[p]..] {
                    max_similarity[p] = max_similarity[p].max(words[p].jaccard(&words[q]));
                }
                compared[p] = picks.len();
            }
            let value = lambda * relevance - (1.0 - lambda) * max_similarity[p];
            let better = match best {
                None => true,
                Some((_, best_value)) => match value.total_cmp(&best_value) {
                    Ordering::Greater => true,
                    Ordering::Less => false,
                    // The pool is sorted by relevance, then position, and is
                    // walked in that order: keeping the earlier entry on an
                    // equal value applies both remaining tie-breaks.
                    Ordering::Equal => false,
                },
            };
            if better {
                best = Some((p, value));
            }
        }
        let Some((chosen, _)) = best else { break };
        taken[chosen] = true;
        if !tokenised[chosen] {
            words[chosen] = WordSet::new(candidates[pool[chosen]].text);
            tokenised[chosen] = true;
        }
        picks.push(chosen);
    }
    picks.into_iter().map(|p| pool[p]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::MMR_LAMBDA;

    #[test]
    fn a_query_naming_nobody_abstains_under_the_higher_floor_and_a_zero_floor_never() {
        let gate = RelevanceGate::ALL_MINILM_L6_V2;
        let between = (gate.abstain_below + gate.abstain_unnamed_below) / 2.0;
        // (gate, best cosine, abstains, abstains when the query names nobody)
        let cases = [
            (gate, gate.abstain_below - 0.01, true, true),
            (gate, between, false, true),
            (gate, gate.abstain_unnamed_below, false, false),
            (RelevanceGate { abstain_unnamed_below: 0.0, ..gate }, between, false, false),
            (RelevanceGate { abstain_below: 0.0, ..gate }, between, false, false),
            (RelevanceGate::SPECIFICATION, 0.01, false, false),
        ];
        for (gate, best, abstains, unnamed) in cases {
            assert_eq!((gate.abstains(best), gate.abstains_unnamed(best)), (abstains, unnamed), "{gate:?} at {best}");
        }
    }

    #[test]
    fn decay_score_table() {
        // (cosine, importance, age_days, expected) — hand-computed.
        let table: &[(f32, f32, f32, f32)] = &[
            (1.0, 1.0, 0.0, 1.0),
            (1.0, 0.0, 0.0, 0.7),
            (0.9, 0.8, 30.0, 0.9 * 0.94 * 0.406_569_66), // the spec's ≈ 0.34 example
            (0.5, 0.5, 10.0, 0.5 * 0.85 * 0.740_818_2),
            (1.0, 1.0, 23.104_906, 0.5), // half-life: ln 2 / 0.03 days
            (0.8, 2.0, 0.0, 0.8),        // importance clamped to 1
            (0.8, -1.0, 0.0, 0.56),      // importance clamped to 0
            (0.8, 1.0, -5.0, 0.8),       // future timestamp counts as age 0
            (-0.5, 1.0, 0.0, -0.5),
        ];
        for &(cosine, importance, age, expected) in table {
            let got = decay_score(cosine, importance, age);
            assert!(
                (got - expected).abs() < 1e-5,
                "decay_score({cosine}, {importance}, {age}) = {got}, want {expected}"
            );
        }
    }

    #[test]
    fn rank_by_decay_table_with_ties() {
        let m = |id, cosine, importance, age_days| DecayInput { id, cosine, importance, age_days };
        let items = [
            m(1, 0.90, 0.8, 30.0), // 0.3440
            m(2, 0.60, 0.5, 0.0),  // 0.5100
            m(3, 0.70, 1.0, 10.0), // 0.5186
            m(9, 0.60, 0.5, 0.0),  // 0.5100, ties with id 2
            m(4, 0.95, 0.0, 60.0), // 0.1098
            m(5, 0.50, 1.0, 0.0),  // 0.5000
            m(2, 0.60, 0.5, 0.0),  // 0.5100, same id and inputs as position 1
        ];
        // Equal scores: smaller id first, then earlier position.
        assert_eq!(rank_by_decay(&items), vec![2, 1, 6, 3, 5, 0, 4]);
        assert_eq!(rank_by_decay(&[]), Vec::<usize>::new());
    }

    #[test]
    fn admission_reads_raw_cosine_with_long_text_relaxation() {
        let table: &[(f32, usize, bool)] = &[
            (0.55, 10, true),
            (0.5499, 10, false),
            (0.42, 300, false), // exactly 300 chars is not "above 300"
            (0.54, 300, false),
            (0.42, 301, true),
            (0.4199, 301, false),
            (0.99, 2000, true),
        ];
        for &(cosine, chars, expected) in table {
            assert_eq!(admit(cosine, chars), expected, "admit({cosine}, {chars})");
        }
        assert_eq!(relevance_threshold(0), 0.55);
        assert_eq!(relevance_threshold(301), 0.42);
    }

    #[test]
    fn each_model_has_its_gate() {
        let table: &[(&str, RelevanceGate)] = &[
            ("all-MiniLM-L6-v2", RelevanceGate::ALL_MINILM_L6_V2),
            ("sentence-transformers/all-MiniLM-L6-v2", RelevanceGate::ALL_MINILM_L6_V2),
            ("ALL-MINILM-L6-V2", RelevanceGate::ALL_MINILM_L6_V2),
            ("Qwen3-Embedding-0.6B", RelevanceGate::SPECIFICATION),
            // Not calibrated: the specification's gate.
            ("all-MiniLM-L12-v2", RelevanceGate::SPECIFICATION),
            ("all-MiniLM-L6-v2-finetuned", RelevanceGate::SPECIFICATION),
            ("hash-trigram", RelevanceGate::SPECIFICATION),
            ("", RelevanceGate::SPECIFICATION),
        ];
        for (model_id, expected) in table {
            assert_eq!(RelevanceGate::for_model(model_id), *expected, "{model_id:?}");
        }
        let minilm = RelevanceGate::ALL_MINILM_L6_V2;
        assert!(minilm.short < RelevanceGate::SPECIFICATION.short && minilm.long < RelevanceGate::SPECIFICATION.short);
        // (cosine, characters, admitted) at the MiniLM thresholds.
        let table: &[(f32, usize, bool)] = &[
            (minilm.short, 300, true),
            (minilm.short - 1e-4, 300, false),
            (minilm.long, 301, true),
            (minilm.long - 1e-4, 301, false),
            (0.46, 70, true), // a plainly related pair that the specification's 0.55 refuses
        ];
        for &(cosine, chars, expected) in table {
            assert_eq!(minilm.admit(cosine, chars), expected, "admit({cosine}, {chars})");
        }
        assert_eq!(minilm.lowest(), minilm.short.min(minilm.long));
        assert_eq!(RelevanceGate::SPECIFICATION.lowest(), 0.42);
    }

    #[test]
    fn word_sets_and_jaccard() {
        assert_eq!(WordSet::new("The cat, the HAT!"), WordSet::new("cat hat the"));
        assert_eq!(WordSet::new("The cat, the HAT!").len(), 3);
        // Lower-casing follows `str::to_lowercase`, also outside ASCII and
        // for words too long for the stack buffer.
        assert_eq!(jaccard("ΟΔΟΣ Straße", "οδος STRASSE straße"), 2.0 / 3.0, "final sigma; ß stays ß");
        assert_eq!(jaccard("\u{212A}elvin", "kelvin"), 1.0, "the Kelvin sign lower-cases to k");
        let long = "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(3);
        assert_eq!(jaccard(&long, &long.to_uppercase()), 1.0);
        assert_eq!(jaccard("a b c", "a b d"), 0.5);
        assert_eq!(jaccard("a b", "A, B."), 1.0);
        assert_eq!(jaccard("", ""), 0.0);
        assert_eq!(jaccard("x", ""), 0.0);
        assert_eq!(jaccard("red apple pie", "blue ocean wave"), 0.0);
    }

    fn c(relevance: f32, text: &str) -> MmrCandidate<'_> {
        MmrCandidate { relevance, text }
    }

    /// MMR as the specification states it: every round scores every
    /// remaining candidate against every pick so far.
    fn eager_mmr(candidates: &[MmrCandidate<'_>], lambda: f32, limit: usize) -> Vec<usize> {
        let mut pool: Vec<usize> = (0..candidates.len()).collect();
        pool.sort_by(|&a, &b| candidates[b].relevance.total_cmp(&candidates[a].relevance).then(a.cmp(&b)));
        pool.truncate(MMR_MAX_POOL);
        let words: Vec<WordSet> = pool.iter().map(|&i| WordSet::new(candidates[i].text)).collect();
        let mut max_similarity = vec![0.0f32; pool.len()];
        let mut taken = vec![false; pool.len()];
        let mut picked = Vec::new();
        while picked.len() < limit.min(pool.len()) {
            let mut best: Option<(usize, f32)> = None;
            for p in (0..pool.len()).filter(|&p| !taken[p]) {
                let value = lambda * candidates[pool[p]].relevance - (1.0 - lambda) * max_similarity[p];
                if best.is_none_or(|(_, b)| value > b) {
                    best = Some((p, value));
                }
            }
            let (chosen, _) = best.unwrap();
            taken[chosen] = true;
            picked.push(pool[chosen]);
            for p in (0..pool.len()).filter(|&p| !taken[p]) {
                max_similarity[p] = max_similarity[p].max(words[p].jaccard(&words[chosen]));
            }
        }
        picked
    }

    #[test]
    fn lazy_mmr_picks_exactly_what_the_eager_definition_picks() {
        let vocabulary = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for round in 0..300 {
            let n = if round == 0 { MMR_MAX_POOL + 100 } else { next(60) };
            let texts: Vec<String> = (0..n)
                .map(|_| (0..1 + next(5)).map(|_| vocabulary[next(vocabulary.len())]).collect::<Vec<_>>().join(" "))
                .collect();
            // Few distinct relevances, so ties are common.
            let relevances: Vec<f32> = (0..n).map(|_| next(6) as f32 / 5.0).collect();
            let candidates: Vec<MmrCandidate<'_>> =
                texts.iter().zip(&relevances).map(|(text, &relevance)| c(relevance, text)).collect();
            for lambda in [0.0, 0.3, MMR_LAMBDA, 1.0, 1.5] {
                for limit in [0, 1, 3, 8, 100] {
                    assert_eq!(
                        mmr(&candidates, lambda, limit),
                        eager_mmr(&candidates, lambda, limit),
                        "round {round}, λ {lambda}, limit {limit}"
                    );
                }
            }
        }
    }

    #[test]
    fn mmr_table() {
        struct Case {
            name: &'static str,
            candidates: Vec<MmrCandidate<'static>>,
            lambda: f32,
            limit: usize,
            expected: Vec<usize>,
        }
        let cases = vec![
            Case {
                name: "disjoint texts keep relevance order",
                candidates: vec![c(0.2, "one"), c(0.9, "two"), c(0.5, "three")],
                lambda: MMR_LAMBDA,
                limit: 3,
                expected: vec![1, 2, 0],
            },
            Case {
                // pick 0 (0.54); then 1: 0.6·0.85 − 0.4·1 = 0.11 < 2: 0.6·0.5 = 0.30.
                name: "near duplicate is pushed behind a diverse item",
                candidates: vec![c(0.9, "red apple pie"), c(0.85, "red apple pie"), c(0.5, "blue ocean wave")],
                lambda: MMR_LAMBDA,
                limit: 3,
                expected: vec![0, 2, 1],
            },
            Case {
                name: "limit cuts after diversification",
                candidates: vec![c(0.9, "red apple pie"), c(0.85, "red apple pie"), c(0.5, "blue ocean wave")],
                lambda: MMR_LAMBDA,
                limit: 2,
                expected: vec![0, 2],
            },
            Case {
                name: "lambda 1 is plain relevance order",
                candidates: vec![c(0.9, "red apple pie"), c(0.85, "red apple pie"), c(0.5, "blue ocean wave")],
                lambda: 1.0,
                limit: 3,
                expected: vec![0, 1, 2],
            },
            Case {
                // After 0 (rel 1): 1 (Jaccard 2/4 with 0) scores
                // 0.5·0.75 − 0.5·0.5 = 0.125 and 2
                // scores 0.5·0.25 = 0.125: equal, higher relevance wins.
                name: "equal MMR value: higher relevance first",
                candidates: vec![c(1.0, "a b d"), c(0.75, "a b c"), c(0.25, "q r s")],
                lambda: 0.5,
                limit: 3,
                expected: vec![0, 1, 2],
            },
            Case {
                // Same inputs, the tie now between 1 and 2 in the input list
                // reversed: the result follows relevance, not position.
                name: "equal MMR value is independent of input order",
                candidates: vec![c(0.25, "q r s"), c(0.75, "a b c"), c(1.0, "a b d")],
                lambda: 0.5,
                limit: 3,
                expected: vec![2, 1, 0],
            },
            Case {
                name: "equal relevance and value: earlier position first",
                candidates: vec![c(0.5, "one"), c(0.7, "two"), c(0.5, "three")],
                lambda: MMR_LAMBDA,
                limit: 3,
                expected: vec![1, 0, 2],
            },
            Case {
                name: "empty input and zero limit",
                candidates: vec![],
                lambda: MMR_LAMBDA,
                limit: 5,
                expected: vec![],
            },
            Case {
                name: "limit zero",
                candidates: vec![c(0.5, "one")],
                lambda: MMR_LAMBDA,
                limit: 0,
                expected: vec![],
            },
        ];
        for case in cases {
            assert_eq!(mmr(&case.candidates, case.lambda, case.limit), case.expected, "{}", case.name);
        }
    }

    #[test]
    fn mmr_pool_is_capped_at_the_most_relevant_thousand() {
        // 1,000 near-identical texts, relevance 0.9 down to ~0.8, plus one
        // diverse text with relevance 0.5. After the first pick, a copy
        // scores at most 0.6·0.9 − 0.4·1 = 0.14 and the diverse text 0.30.
        let same = "the same words every time";
        let build = |diverse_rank: usize| {
            let mut out = Vec::new();
            for i in 0..1000 {
                out.push(c(0.9 - i as f32 * 1e-4, same));
            }
            out.insert(diverse_rank, c(0.5, "something else entirely"));
            out
        };
        // Diverse text ranked 1,001st by relevance: outside the pool.
        let outside = build(1000);
        assert_eq!(mmr(&outside, MMR_LAMBDA, 2), vec![0, 1]);
        // Make it rank 1,000th by giving the last copy a lower relevance.
        let mut inside = build(1000);
        inside[999].relevance = 0.1;
        assert_eq!(mmr(&inside, MMR_LAMBDA, 2), vec![0, 1000]);
        // However large the limit, at most 1,000 come back.
        let picked = mmr(&outside, MMR_LAMBDA, 5000);
        assert_eq!(picked.len(), MMR_MAX_POOL);
        assert!(!picked.contains(&1000));
    }
}
