//! Host-aware context: the rules each surface receives, session context
//! that stays byte-identical while memory is unchanged, and the absolute
//! ceiling on what any build injects.

use std::sync::Arc;

use cairn_context::{
    BuiltContext, ContextBuilder, EpisodicFragment, MarkdownSections, MessageRequest, RecalledFragments,
    RuntimeIdentity, SectionName, SessionRequest, Surface, constants,
};
use cairn_memory_core::{LessonCategory, ManualZonedClock, MemoryConfig, MemoryDb, MemoryFiles, Source, ZonedClock};
use jiff::SignedDuration;
use serde_json::json;
use support::long_lessons;

mod support;

const ALL_SURFACES: [Surface; 11] = [
    Surface::Dashboard,
    Surface::Slack,
    Surface::Discord,
    Surface::Telegram,
    Surface::Wecom,
    Surface::Weixin,
    Surface::Webex,
    Surface::Teams,
    Surface::Cli,
    Surface::ClaudeCode,
    Surface::KiroCli,
];

#[test]
fn only_agent_hosts_are_agent_hosts() {
    let hosts: Vec<&str> =
        ALL_SURFACES.into_iter().filter(|surface| surface.is_agent_host()).map(Surface::as_str).collect();
    assert_eq!(hosts, ["claude-code", "kiro-cli"]);
}

/// What reached the model, as the rules a surface can or cannot honour.
#[derive(Debug, PartialEq, Eq)]
struct Rules {
    diff_rule: bool,
    options_rule: bool,
    options_hint: bool,
    quoting_rule: bool,
}

fn rules(session: &BuiltContext, message: &BuiltContext) -> Rules {
    Rules {
        diff_rule: session.text.contains("```diff"),
        options_rule: session.text.contains("`OPTIONS: first | second | third`; the host renders it as buttons"),
        options_hint: message.section(SectionName::OptionsHint).is_some() || message.text.contains("OPTIONS"),
        quoting_rule: session.text.contains("not instructions to you."),
    }
}

const CHAT: Rules = Rules { diff_rule: true, options_rule: true, options_hint: true, quoting_rule: true };
const HOST: Rules = Rules { diff_rule: false, options_rule: false, options_hint: false, quoting_rule: true };

/// Builds a session and an interactive first message for the request's
/// surface and the runtime's, and compares what reached the model.
#[track_caller]
fn check(surface: Option<Surface>, runtime: Option<Surface>, expected: &Rules) {
    let builder = ContextBuilder::new();
    let runtime = runtime.map(RuntimeIdentity::new);
    let session =
        builder.build_session_context(&SessionRequest { surface, runtime: runtime.as_ref(), ..Default::default() });
    let message = builder.build_message(&MessageRequest {
        message: "which one?",
        interactive: true,
        surface,
        runtime: runtime.as_ref(),
        ..Default::default()
    });
    assert_eq!(&rules(&session, &message), expected, "surface {surface:?}, runtime {runtime:?}");
    assert!(session.text.starts_with("[CRITICAL RULES]\n- "), "{}", session.text);
    assert!(message.text.ends_with("which one?"));
}

#[test]
fn agent_hosts_get_no_rule_they_cannot_honour() {
    for surface in ALL_SURFACES {
        let expected = if surface.is_agent_host() { &HOST } else { &CHAT };
        check(Some(surface), None, expected);
        check(None, Some(surface), expected);
    }
}

#[test]
fn without_a_surface_the_spec_rules_apply() {
    check(None, None, &CHAT);
}

#[test]
fn the_request_surface_wins_over_the_runtime_identity() {
    check(Some(Surface::ClaudeCode), Some(Surface::Dashboard), &HOST);
    check(Some(Surface::Dashboard), Some(Surface::KiroCli), &CHAT);
}

#[test]
fn host_rules_are_exactly_the_host_body() {
    let session = ContextBuilder::new()
        .build_session_context(&SessionRequest { surface: Some(Surface::KiroCli), ..Default::default() });
    assert_eq!(
        session.text,
        format!(
            "{}\n{}\n{}",
            constants::CRITICAL_RULES_HEADER,
            constants::AGENT_HOST_CRITICAL_RULES_BODY,
            constants::CRITICAL_RULES_FOOTER
        )
    );
    for machinery in ["OPTIONS", "diff", "button", "thread history", "channel history"] {
        assert!(!session.text.contains(machinery), "{machinery:?} in {}", session.text);
    }
}

/// A home whose Markdown memory reads the given clock.
struct DatedHome {
    _dir: tempfile::TempDir,
    clock: Arc<ManualZonedClock>,
    builder: ContextBuilder,
}

fn dated_home() -> DatedHome {
    let dir = tempfile::tempdir().unwrap();
    let database = Arc::new(MemoryDb::open_in_home(dir.path(), MemoryConfig::default()).unwrap());
    database.write_semantic("pref.editor", &json!("helix"), 1.0, Source::UserExplicit).unwrap();
    database.write_lesson("run cargo fmt before committing", None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    let clock = Arc::new(ManualZonedClock::new("2026-05-29T16:40:00+02:00[Europe/Paris]".parse().unwrap()));
    let files = MemoryFiles::open(dir.path()).unwrap().with_clock(clock.clone());
    files.write_preferences("# Preferences\n\n- short answers\n").unwrap();
    files.append_history("Reviewed the channel buffer design.").unwrap();
    clock.set("2026-05-30T09:15:00+02:00[Europe/Paris]".parse().unwrap());
    files.append_history("Agreed to keep the builder synchronous.").unwrap();
    let builder = ContextBuilder::new()
        .with_markdown(Arc::new(files))
        .with_semantic(database.clone())
        .with_lessons(database)
        .with_max_inject_chars(24_000);
    DatedHome { _dir: dir, clock, builder }
}

impl DatedHome {
    /// A host's session start at the clock's current instant.
    fn session_start(&self) -> BuiltContext {
        let runtime = RuntimeIdentity::new(Surface::ClaudeCode).dated(&self.clock.now());
        self.builder.build_session_context(&SessionRequest {
            query: "editor",
            runtime: Some(&runtime),
            surface: Some(Surface::ClaudeCode),
            ..Default::default()
        })
    }
}

#[test]
fn session_context_is_byte_identical_while_memory_is_unchanged() {
    let home = dated_home();
    let first = home.session_start();
    assert!(first.text.contains("\ndate: 2026-05-30\n"), "{}", first.text);
    assert!(first.text.contains("Agreed to keep the builder synchronous."), "{}", first.text);
    for step in [SignedDuration::from_secs(60), SignedDuration::from_secs(3_600), SignedDuration::from_secs(7)] {
        home.clock.advance(step);
        let later = home.session_start();
        assert_eq!(later.text, first.text, "after {step:?}");
        assert_eq!(later.sections, first.sections);
    }
    // The date is the one thing that moves, at midnight.
    home.clock.set("2026-05-31T00:00:30+02:00[Europe/Paris]".parse().unwrap());
    let tomorrow = home.session_start();
    assert!(tomorrow.text.contains("date: 2026-05-31"), "{}", tomorrow.text);
    assert_ne!(tomorrow.text, first.text);
}

#[test]
fn a_stated_time_stamp_reaches_the_prompt_as_a_date() {
    let builder = ContextBuilder::new();
    let at = |stamp: &str| {
        let runtime = RuntimeIdentity { date: Some(stamp.into()), ..RuntimeIdentity::new(Surface::KiroCli) };
        builder.build_session_context(&SessionRequest { runtime: Some(&runtime), ..Default::default() }).text
    };
    let morning = at("2026-05-30T09:15:00Z");
    assert_eq!(morning, at("2026-05-30T09:16:00Z"));
    assert!(morning.ends_with("[RUNTIME]\nsurface: kiro-cli\ndate: 2026-05-30"), "{morning}");
}

/// Sections a session build over a fixed source set produces, large
/// enough to overflow a small absolute ceiling.
fn oversized_builder() -> ContextBuilder {
    let history = format!("### 2026-05-30\n{}", "#### 09:15\nA long day of work on the builder.\n".repeat(400));
    let markdown = MarkdownSections {
        preferences: Some(cairn_context::CitedText::new("- short answers\n".repeat(100), "memory/preferences.md")),
        projects: Some(cairn_context::CitedText::new("- cairn: Rust\n".repeat(200), "memory/projects.md")),
        recent_history: Some(cairn_context::CitedText::new(history, "memory/history/ 2026-05-30")),
    };
    ContextBuilder::new().with_markdown(Arc::new(markdown)).with_lessons(Arc::new(long_lessons(5, 40)))
}

#[track_caller]
fn assert_accounted(built: &BuiltContext) {
    let sum: usize = built.sections.iter().map(|section| section.chars).sum();
    assert_eq!(sum, built.total_chars(), "every character is attributed to one section");
}

#[test]
fn the_absolute_ceiling_bounds_a_session_whatever_the_window() {
    let unbounded = oversized_builder().build_session_context(&SessionRequest::default());
    assert!(unbounded.total_chars() > 5_000, "the case must overflow: {}", unbounded.total_chars());
    assert_eq!(unbounded.ceiling, Some(165_000));

    for window in [None, Some(200_000), Some(2_000_000)] {
        let built = oversized_builder()
            .with_max_inject_chars(5_000)
            .build_session_context(&SessionRequest { model_window: window, ..Default::default() });
        assert_eq!(built.ceiling, Some(5_000), "window {window:?}");
        assert!(built.total_chars() <= 5_000, "window {window:?}: {}", built.total_chars());
        assert_accounted(&built);
        // The lowest-priority sections go first; lessons and rules stay whole.
        assert!(built.text.starts_with("[CRITICAL RULES]"));
        assert!(!built.section(SectionName::Lessons).unwrap().truncated);
        assert!(!built.section(SectionName::Preamble).unwrap().truncated);
        assert!(built.text.contains("- lesson 04 "));
        // Daily history, the last section before the lessons, goes first:
        // cut at the ceiling, or left out with a notice when nothing of it fits.
        match built.section(SectionName::DailyHistory) {
            Some(history) => {
                assert!(history.truncated);
                let cut = format!("\n{}\n\n[Learned corrections]", constants::CEILING_MARKER);
                assert!(built.text.contains(&cut), "{}", built.text);
            }
            None => {
                let notice = "daily_history left out: the context reached its ceiling of 5000 characters";
                assert!(built.notices.iter().any(|text| text == notice), "{:?}", built.notices);
            }
        }
    }
}

#[test]
fn a_ceiling_above_the_window_changes_nothing() {
    let plain = oversized_builder()
        .build_session_context(&SessionRequest { model_window: Some(200_000), ..Default::default() });
    let roomy = oversized_builder()
        .with_max_inject_chars(1_000_000)
        .build_session_context(&SessionRequest { model_window: Some(200_000), ..Default::default() });
    assert_eq!(roomy, plain);
    assert_eq!(roomy.ceiling, Some(33_000), "the window's ceiling is the lower one");
}

#[test]
fn protected_sections_are_cut_last_and_then_only_as_far_as_needed() {
    // Lessons alone overflow: every other section is gone first, then the
    // lessons are cut at a line, their header kept.
    let builder = oversized_builder().with_lessons(Arc::new(long_lessons(50, 200))).with_max_inject_chars(2_000);
    let built = builder.build_session_context(&SessionRequest::default());
    assert!(built.total_chars() <= 2_000, "{}", built.total_chars());
    assert_accounted(&built);
    let names: Vec<SectionName> = built.sections.iter().map(|section| section.name).collect();
    assert_eq!(names, [SectionName::Preamble, SectionName::Lessons, SectionName::Separators]);
    assert!(built.section(SectionName::Lessons).unwrap().truncated);
    assert!(built.text.contains("[Learned corrections]\nALWAYS follow these."), "{}", built.text);
    assert!(built.text.ends_with(constants::CEILING_MARKER));
    for dropped in ["preferences", "projects", "daily_history"] {
        let notice = format!("{dropped} left out: the context reached its ceiling of 2000 characters");
        assert!(built.notices.contains(&notice), "{:?}", built.notices);
    }

    // A ceiling of nothing injects nothing.
    let nothing = oversized_builder().with_max_inject_chars(0).build_session_context(&SessionRequest::default());
    assert_eq!(nothing.text, "");
    assert!(nothing.sections.is_empty());
}

#[test]
fn the_absolute_ceiling_bounds_a_message_but_never_cuts_the_message() {
    let fragments: Vec<EpisodicFragment> = (0..8)
        .map(|index| EpisodicFragment { text: format!("fragment {index} {}", "z".repeat(1_400)), citation: None })
        .collect();
    let message = "m".repeat(3_000);
    let builder = ContextBuilder::new().with_episodic(Arc::new(RecalledFragments(fragments)));
    let request = MessageRequest { message: &message, first_in_session: true, interactive: true, ..Default::default() };

    let plain = builder.build_message(&request);
    assert_eq!(plain.ceiling, None, "no absolute ceiling, no message ceiling");
    assert!(plain.section(SectionName::Episodic).unwrap().chars > 1_500);

    let bounded = builder.clone().with_max_inject_chars(1_500).build_message(&request);
    assert_eq!(bounded.ceiling, Some(1_500));
    assert_accounted(&bounded);
    assert!(bounded.text.ends_with(&format!("\n\n{message}")), "the message is whole");
    let injected = bounded.total_chars() - message.len() - 2;
    assert!(injected <= 1_500, "{injected}");
    // The hint comes after the episodic block, so it went first.
    assert!(bounded.section(SectionName::OptionsHint).is_none());
    assert!(bounded.section(SectionName::Episodic).unwrap().truncated);
    assert_eq!(bounded.section(SectionName::Message).unwrap().chars, 3_000);
}
