//! The synthetic episodic rows of the `episodic` bench and the
//! `episodic_scale` tool: 12-word sentences over a 2,000-word vocabulary
//! plus an `(entry N)` tag, and queries that are a stored row with two
//! words changed.

/// Words the sentences draw from.
pub const VOCABULARY: usize = 2_000;

/// Word `i` of the vocabulary: syllables spelling `i + 1` in base 12.
pub fn word(i: usize) -> String {
    const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pe", "da", "zu", "gra"];
    let mut out = String::new();
    let mut n = i + 1;
    while n > 0 {
        out.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
    }
    out
}

/// Row `seed`: twelve words drawn by a linear congruential generator.
pub fn sentence(seed: usize) -> String {
    let mut state = seed as u64 * 6_364_136_223_846_793_005 + 1_442_695_040_888_963_407;
    let mut words = Vec::new();
    for _ in 0..12 {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        words.push(word((state >> 33) as usize % VOCABULARY));
    }
    format!("{} (entry {seed})", words.join(" "))
}

/// Query `i` over a store of `rows` rows: a stored row with words 1 and 5
/// changed.
pub fn query(i: usize, rows: usize) -> String {
    let seed = (i * 7_919) % rows;
    let mut words: Vec<String> = sentence(seed).split(' ').map(str::to_owned).collect();
    words[1] = word(i);
    words[5] = word(i + 1);
    words.join(" ")
}
