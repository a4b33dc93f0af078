//! Per-section character caps, scaled to the model's context window.
//!
//! Every cap is `⌊base × fraction⌋` where `base = 165,000 × window /
//! 1,000,000` (floored at 20% of 165,000). The arithmetic is done on exact
//! integers (one floor at the end), so the reference window gives the
//! specification's figures exactly and a 200K window exactly one fifth.

use std::num::NonZeroUsize;
use std::sync::LazyLock;

use lru::LruCache;
use parking_lot::Mutex;
use serde::Serialize;

use crate::constants::{
    BASE_CHARS, EPISODIC_INJECT_CAP, MIN_BASE_PERCENT, PER_MESSAGE_CHARS, REFERENCE_WINDOW_TOKENS, per_mille,
};

/// A budgeted part of the session context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapSection {
    /// Thread history, compressed around a verbatim head and tail (27%).
    CompressedHistory,
    /// Learned corrections (22.6%).
    Lessons,
    /// Thread history, truncated when no compressor is available (21%).
    HistoryBudget,
    /// Decaying daily history (16%).
    DailyHistory,
    /// Always-on skills and the skill index (15%).
    Skills,
    /// Steering files (10%).
    Steering,
    /// Semantic memory (7.7%).
    Semantic,
    /// Episodic memory (7.7%).
    Episodic,
    /// `projects.md` (3.9%).
    Projects,
    /// `preferences.md` (2.6%).
    Preferences,
    /// Fixed rules, runtime identity and date (3%).
    PreambleHeadroom,
}

impl CapSection {
    /// Every section, largest share first.
    pub const ALL: [CapSection; 11] = [
        CapSection::CompressedHistory,
        CapSection::Lessons,
        CapSection::HistoryBudget,
        CapSection::DailyHistory,
        CapSection::Skills,
        CapSection::Steering,
        CapSection::Semantic,
        CapSection::Episodic,
        CapSection::Projects,
        CapSection::Preferences,
        CapSection::PreambleHeadroom,
    ];

    /// The section's share of the base, in thousandths.
    pub fn per_mille(self) -> u64 {
        match self {
            CapSection::CompressedHistory => per_mille::COMPRESSED_HISTORY,
            CapSection::Lessons => per_mille::LESSONS,
            CapSection::HistoryBudget => per_mille::HISTORY_BUDGET,
            CapSection::DailyHistory => per_mille::DAILY_HISTORY,
            CapSection::Skills => per_mille::SKILLS,
            CapSection::Steering => per_mille::STEERING,
            CapSection::Semantic => per_mille::SEMANTIC,
            CapSection::Episodic => per_mille::EPISODIC,
            CapSection::Projects => per_mille::PROJECTS,
            CapSection::Preferences => per_mille::PREFERENCES,
            CapSection::PreambleHeadroom => per_mille::PREAMBLE_HEADROOM,
        }
    }

    /// Whether the section counts towards [`Caps::max_context`]. The
    /// truncation-fallback history budget does not: it replaces the
    /// compressed history, it never comes on top of it.
    pub fn in_max_context(self) -> bool {
        self != CapSection::HistoryBudget
    }
}

/// The caps for one model window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Caps {
    /// The window the caps were resolved for, in tokens (the reference
    /// window when none was known).
    pub window_tokens: u64,
    /// The scaled base: the flat global ceiling with `lazy_load` off.
    pub base: usize,
    /// Thread history, compressed form.
    pub compressed_history: usize,
    /// Learned corrections.
    pub lessons: usize,
    /// Thread history, truncation fallback.
    pub history_budget: usize,
    /// Decaying daily history.
    pub daily_history: usize,
    /// Always-on skills and the skill index.
    pub skills: usize,
    /// Steering files.
    pub steering: usize,
    /// Semantic memory.
    pub semantic: usize,
    /// Episodic memory.
    pub episodic: usize,
    /// `projects.md`.
    pub projects: usize,
    /// `preferences.md`.
    pub preferences: usize,
    /// Fixed rules, runtime identity and date.
    pub preamble_headroom: usize,
    /// Bound of one thread message on the truncation path, before it is
    /// clamped to the budget in use (see [`Caps::per_message_within`]).
    pub per_message: usize,
}

impl Caps {
    /// The cap of one section.
    pub fn get(&self, section: CapSection) -> usize {
        match section {
            CapSection::CompressedHistory => self.compressed_history,
            CapSection::Lessons => self.lessons,
            CapSection::HistoryBudget => self.history_budget,
            CapSection::DailyHistory => self.daily_history,
            CapSection::Skills => self.skills,
            CapSection::Steering => self.steering,
            CapSection::Semantic => self.semantic,
            CapSection::Episodic => self.episodic,
            CapSection::Projects => self.projects,
            CapSection::Preferences => self.preferences,
            CapSection::PreambleHeadroom => self.preamble_headroom,
        }
    }

    /// The sum of the section caps (the fallback history budget excluded,
    /// since it replaces the compressed history): 190,575 at the reference
    /// window. The global ceiling with `lazy_load` on.
    pub fn max_context(&self) -> usize {
        CapSection::ALL.iter().filter(|section| section.in_max_context()).map(|section| self.get(*section)).sum()
    }

    /// The global ceiling: the flat base with `lazy_load` off, the sum of
    /// the section caps with it on.
    pub fn ceiling(&self, lazy_load: bool) -> usize {
        if lazy_load { self.max_context() } else { self.base }
    }

    /// The per-message cap clamped to `budget`, so one large message can
    /// never take more than the whole history budget.
    pub fn per_message_within(&self, budget: usize) -> usize {
        self.per_message.min(budget)
    }

    /// The bound of the episodic block in a message: `min(3,000, episodic)`.
    pub fn episodic_inject(&self) -> usize {
        EPISODIC_INJECT_CAP.min(self.episodic)
    }

    fn compute(window_tokens: u64) -> Caps {
        // base × REFERENCE, kept as an integer so each cap floors once.
        let scaled = u128::from(BASE_CHARS) * u128::from(window_tokens);
        let floor = u128::from(BASE_CHARS) * u128::from(MIN_BASE_PERCENT) / 100 * u128::from(REFERENCE_WINDOW_TOKENS);
        let numerator = scaled.max(floor);
        let reference = u128::from(REFERENCE_WINDOW_TOKENS);
        let cap = |section: CapSection| to_usize(numerator * u128::from(section.per_mille()) / (reference * 1_000));
        Caps {
            window_tokens,
            base: to_usize(numerator / reference),
            compressed_history: cap(CapSection::CompressedHistory),
            lessons: cap(CapSection::Lessons),
            history_budget: cap(CapSection::HistoryBudget),
            daily_history: cap(CapSection::DailyHistory),
            skills: cap(CapSection::Skills),
            steering: cap(CapSection::Steering),
            semantic: cap(CapSection::Semantic),
            episodic: cap(CapSection::Episodic),
            projects: cap(CapSection::Projects),
            preferences: cap(CapSection::Preferences),
            preamble_headroom: cap(CapSection::PreambleHeadroom),
            per_message: to_usize(numerator * u128::from(PER_MESSAGE_CHARS) / (u128::from(BASE_CHARS) * reference)),
        }
    }
}

fn to_usize(value: u128) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// Distinct windows remembered (the same bound as a default `lru_cache`).
const CACHED_WINDOWS: usize = 128;

static CACHE: LazyLock<Mutex<LruCache<u64, Caps>>> =
    LazyLock::new(|| Mutex::new(LruCache::new(NonZeroUsize::new(CACHED_WINDOWS).expect("non-zero constant"))));

/// The caps for a model window in tokens; `None` (an unknown or `auto`
/// model) means the reference window, so an unknown model never shrinks
/// the budget. Results are cached per window.
///
/// ```
/// use cairn_context::resolve_caps;
///
/// let reference = resolve_caps(None);
/// assert_eq!(reference.lessons, 37_290);
/// assert_eq!(reference.max_context(), 190_575);
/// assert_eq!(resolve_caps(Some(200_000)).lessons, 37_290 / 5);
/// ```
pub fn resolve_caps(window_tokens: Option<u64>) -> Caps {
    let window = window_tokens.unwrap_or(REFERENCE_WINDOW_TOKENS);
    if let Some(caps) = CACHE.lock().get(&window) {
        return *caps;
    }
    let caps = Caps::compute(window);
    CACHE.lock().put(window, caps);
    caps
}

/// The caps at the reference window.
pub fn reference_caps() -> Caps {
    resolve_caps(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_window_gives_the_specified_figures_exactly() {
        let caps = resolve_caps(None);
        let figures: Vec<usize> = CapSection::ALL.iter().map(|section| caps.get(*section)).collect();
        assert_eq!(figures, [44_550, 37_290, 34_650, 26_400, 24_750, 16_500, 12_705, 12_705, 6_435, 4_290, 4_950]);
        assert_eq!(caps.max_context(), 190_575);
        assert_eq!(caps.base, 165_000);
        assert_eq!(caps.per_message, 8_000);
        assert_eq!(caps.ceiling(false), 165_000);
        assert_eq!(caps.ceiling(true), 190_575);
        assert_eq!(caps.episodic_inject(), 3_000);
        assert_eq!(resolve_caps(Some(REFERENCE_WINDOW_TOKENS)), caps);
    }

    #[test]
    fn a_200k_window_gives_exactly_one_fifth() {
        let reference = resolve_caps(None);
        let small = resolve_caps(Some(200_000));
        for section in CapSection::ALL {
            assert_eq!(small.get(section) * 5, reference.get(section), "{section:?}");
        }
        assert_eq!(small.base * 5, reference.base);
        assert_eq!(small.per_message * 5, reference.per_message);
        assert_eq!(small.max_context() * 5, reference.max_context());
        assert_eq!(small.episodic_inject(), 2_541);
    }

    #[test]
    fn tiny_windows_hit_the_floor() {
        let floor = resolve_caps(Some(200_000));
        for window in [0, 1, 1_000, 128_000, 199_999] {
            let caps = resolve_caps(Some(window));
            assert_eq!(caps.window_tokens, window);
            assert_eq!(Caps { window_tokens: 200_000, ..caps }, floor, "window {window}");
        }
        assert_eq!(floor.base, 33_000);
    }

    #[test]
    fn larger_windows_scale_up_linearly() {
        let reference = resolve_caps(None);
        let double = resolve_caps(Some(2_000_000));
        for section in CapSection::ALL {
            assert_eq!(double.get(section), reference.get(section) * 2);
        }
        // 400K is 2/5 of the reference; 37,290 × 2 / 5 = 14,916.
        assert_eq!(resolve_caps(Some(400_000)).lessons, 14_916);
        // Odd windows floor once, at the end: 165,000 × 0.226 × 0.333333 = 12,429.9987.
        assert_eq!(resolve_caps(Some(333_333)).lessons, 12_429);
    }

    #[test]
    fn per_message_is_clamped_to_the_budget() {
        let caps = resolve_caps(None);
        assert_eq!(caps.per_message_within(34_650), 8_000);
        assert_eq!(caps.per_message_within(5_000), 5_000);
    }

    #[test]
    fn cached_caps_equal_fresh_ones() {
        for window in [200_000, 1_000_000, 1_048_576, 7] {
            assert_eq!(resolve_caps(Some(window)), Caps::compute(window));
            assert_eq!(resolve_caps(Some(window)), Caps::compute(window));
        }
    }
}
