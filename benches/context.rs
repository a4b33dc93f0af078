//! context: `build_message` and `build_session_context` on a realistic
//! home (10,000 episodic rows and 1,000 semantic entries with 384-dim
//! word vectors (`WordVectorEmbedder`: unrelated texts near-orthogonal, as
//! with a sentence model), 50 lessons, 180 days of history, 200 skills, a full channel
//! buffer, hooks), next to the same
//! sources called directly without assembly (the peer: what the builder
//! adds on top of its sources).
//!
//! `cargo bench --bench context`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use cairn_context::{
    AgentContext, Authorization, ChannelConfig, ChannelHistory, ContextBuilder, EpisodicMemory, ManualChannelClock,
    MessageRequest, RecallQuery, RuntimeIdentity, SectionName, SessionRequest, Surface, ThreadMessage, resolve_caps,
};
use cairn_embedder::{EmbeddingBackend, WordVectorEmbedder};
use cairn_hooks::{ConfigHooks, HooksConfig};
use cairn_memory_core::{
    FilesContextCaps, LessonCategory, ManualZonedClock as FilesClock, MemoryConfig, MemoryDb, MemoryFiles, NewEpisode,
    Source,
};
use cairn_skills::{SkillCatalog, SkillsConfig};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const EPISODIC_ROWS: usize = 10_000;
const SEMANTIC_ENTRIES: usize = 1_000;
const LESSONS: usize = 50;
const HISTORY_DAYS: i64 = 180;
const ENTRIES_PER_DAY: usize = 4;
const SKILLS: usize = 200;
const WORDS: &[&str] = &[
    "editor", "theme", "dark", "light", "rust", "python", "deploy", "friday", "review", "tests", "cargo", "branch",
    "release", "docs", "terminal", "shell", "fish", "helix", "tabs", "spaces", "format", "lint", "coffee", "meeting",
    "timezone", "berlin", "project", "gateway", "memory", "skills", "hooks", "latency", "budget", "prompt",
];
const MESSAGE: &str = "can we deploy the gateway release on friday after the review?";

/// A conversation fragment over a 3,000-word vocabulary (so rows are not
/// near-duplicates of each other), sprinkled with the common words.
fn fragment(rng: &mut StdRng) -> String {
    (0..rng.random_range(15..40))
        .map(|index| {
            if index % 4 == 0 {
                WORDS[rng.random_range(0..WORDS.len())].to_owned()
            } else {
                format!("w{}", rng.random_range(0..3_000))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn sentence(rng: &mut StdRng, words: usize) -> String {
    (0..words).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
}

struct Fixture {
    _home: tempfile::TempDir,
    builder: ContextBuilder,
    database: Arc<MemoryDb>,
    files: Arc<MemoryFiles>,
    skills: Arc<SkillCatalog>,
    hooks: Arc<ConfigHooks>,
    channels: Arc<ChannelHistory>,
    episodic_text: String,
    agent: AgentContext,
    runtime: RuntimeIdentity,
    thread: Vec<ThreadMessage>,
    query_vector: Vec<f32>,
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let embedder = Arc::new(WordVectorEmbedder::new(384));

    let database =
        Arc::new(MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap().with_embedder(embedder.clone()));
    let prefixes = ["pref", "project", "user"];
    for index in 0..SEMANTIC_ENTRIES {
        let key = format!("{}.{}_{index}", prefixes[index % 3], WORDS[index % WORDS.len()]);
        let words = rng.random_range(3..12);
        database.write_semantic(&key, &json!(sentence(&mut rng, words)), 1.0, Source::UserExplicit).unwrap();
    }
    for index in 0..LESSONS {
        let rule = format!("prefer tool{index}a over tool{index}b when task{index}c needs flag{index}d");
        database.write_lesson(&rule, None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    }
    assert_eq!(database.get_lessons(100).unwrap().len(), LESSONS);
    let day = 86_400_000;
    let start = 1_767_225_600_000; // 2026-01-01
    let mut episodic_text = String::new();
    let mut inserted = 0;
    for index in 0..EPISODIC_ROWS * 2 {
        if inserted == EPISODIC_ROWS {
            break;
        }
        let text = fragment(&mut rng);
        let episode = NewEpisode::new(&text)
            .created_at(start + (index as i64 % 180) * day)
            .importance(rng.random_range(0.0..1.0))
            .source_ref(format!("conv-{}", index / 20));
        if let cairn_memory_core::EpisodicOutcome::Inserted { .. } = database.write_episodic(&episode).unwrap() {
            inserted += 1;
            if inserted == 4_321 {
                episodic_text = text;
            }
        }
    }
    assert_eq!(inserted, EPISODIC_ROWS);

    let clock = Arc::new(FilesClock::new("2026-01-01T09:00:00+00:00[UTC]".parse().unwrap()));
    let files = MemoryFiles::open(home.path()).unwrap().with_clock(clock.clone());
    files.write_preferences(&format!("# Preferences\n\n{}\n", sentence(&mut rng, 60))).unwrap();
    files.write_projects(&format!("# Projects\n\n{}\n", sentence(&mut rng, 120))).unwrap();
    for _day in 0..HISTORY_DAYS {
        for _entry in 0..ENTRIES_PER_DAY {
            files.append_history(&sentence(&mut rng, 30)).unwrap();
            clock.advance(jiff::SignedDuration::from_hours(2));
        }
        clock.advance(jiff::SignedDuration::from_hours(24 - 2 * ENTRIES_PER_DAY as i64));
    }
    let files = Arc::new(files);

    let skills_dir = home.path().join("skills");
    for index in 0..SKILLS {
        let dir = skills_dir.join(format!("skill-{index:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        let triggers = format!("{}, {} {}", WORDS[index % WORDS.len()], WORDS[(index * 7) % WORDS.len()], index);
        let always = if index < 3 { "always: true\n" } else { "" };
        let inject = if index % 5 == 0 { "inject_on_trigger: false\n" } else { "" };
        let body: String = (0..20).map(|_| format!("- {}\n", sentence(&mut rng, 12))).collect();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: skill-{index:03}\ndescription: {}\ntriggers: {triggers}\n{always}{inject}---\n{body}",
                sentence(&mut rng, 14)
            ),
        )
        .unwrap();
    }
    let mut skills_config = SkillsConfig::new(home.path());
    skills_config.persist_usage = false;
    let skills = Arc::new(SkillCatalog::open(skills_config));

    let (hooks, _) = ConfigHooks::compile(
        &HooksConfig::from_json_str(
            r#"{"auto_replies": {"^ping$": "pong"},
                "transforms": {"^urgent": "Priority: "},
                "context_rules": {"deploy, release": "Releases go out on Tuesdays.", "review": "Two approvals."}}"#,
        )
        .unwrap(),
    )
    .unwrap();
    let hooks = Arc::new(hooks);

    let channels = Arc::new(ChannelHistory::new(
        home.path(),
        ChannelConfig::default(),
        Arc::new(ManualChannelClock::new(1_780_000_000_000)),
    ));
    for index in 0..60 {
        channels
            .record("C1", &format!("user{}", index % 5), &sentence(&mut rng, 25), Authorization::Authorized)
            .unwrap();
    }

    let builder = ContextBuilder::new()
        .with_markdown(files.clone())
        .with_semantic(database.clone())
        .with_lessons(database.clone())
        .with_episodic(database.clone())
        .with_skills(skills.clone())
        .with_hooks(hooks.clone())
        .with_channels(channels.clone());
    let agent = AgentContext::new("bench", sentence(&mut rng, 300));
    let mut runtime = RuntimeIdentity::new(Surface::Slack);
    runtime.channel = Some("C1".into());
    runtime.date = Some("2026-06-29".into());
    let thread = (0..30).map(|_| ThreadMessage::user(sentence(&mut rng, 80))).collect();
    // The message's vector, from a message that retells one stored fragment.
    let query_vector = embedder.embed(&format!("{MESSAGE} {episodic_text}")).unwrap();
    Fixture {
        _home: home,
        builder,
        database,
        files,
        skills,
        hooks,
        channels,
        episodic_text,
        agent,
        runtime,
        thread,
        query_vector,
    }
}

fn bench(c: &mut Criterion) {
    let fixture = fixture();
    let mut group = c.benchmark_group("context");
    group.sample_size(60);
    group.measurement_time(Duration::from_secs(8));

    let message = MessageRequest {
        model_window: Some(200_000),
        message: MESSAGE,
        query_vector: Some(&fixture.query_vector),
        channel_id: Some("C1"),
        first_in_session: true,
        interactive: true,
        runtime: Some(&fixture.runtime),
        preview: false,
        agent: None,
        surface: None,
        scopes: None,
    };
    let first = fixture.builder.build_message(&message);
    assert!(
        first.section(SectionName::Episodic).is_some() && first.text.contains(&fixture.episodic_text),
        "the retold fragment is recalled"
    );
    group.bench_function("build_message_first", |b| b.iter(|| black_box(fixture.builder.build_message(&message))));
    // A new query each time, embedded first (no cache in front of the model):
    // all-MiniLM-L6-v2 when installed, else the fixture's word vectors. The
    // stored rows keep their word vectors, so this times the embedding plus
    // the search and assembly, not what a MiniLM query would recall.
    let minilm = dirs::data_dir()
        .map(|data| data.join("cairn/models/all-MiniLM-L6-v2"))
        .filter(|dir| dir.join("model.safetensors").is_file())
        .map(|dir| cairn_embedder::CandleBert::load(dir).unwrap());
    let query_model: &dyn EmbeddingBackend = match &minilm {
        Some(model) => model,
        None => &WordVectorEmbedder::new(384),
    };
    let label = if minilm.is_some() { "build_message_first_new_query_minilm" } else { "build_message_first_new_query" };
    let mut query_rng = StdRng::seed_from_u64(99);
    let queries: Vec<String> = (0..64).map(|_| sentence(&mut query_rng, 12)).collect();
    let mut next = 0;
    group.bench_function(label, |b| {
        b.iter(|| {
            next = (next + 1) % queries.len();
            let vector = query_model.embed(&queries[next]).unwrap();
            black_box(fixture.builder.build_message(&MessageRequest { query_vector: Some(&vector), ..message }))
        })
    });
    let follow_up = MessageRequest { first_in_session: false, ..message };
    group
        .bench_function("build_message_follow_up", |b| b.iter(|| black_box(fixture.builder.build_message(&follow_up))));
    // Peer: the per-message sources alone, no assembly, neutralisation or accounting.
    group.bench_function("message_sources_only", |b| {
        b.iter(|| {
            let hooks = fixture.hooks.process_message(MESSAGE);
            let channel = fixture.channels.entries("C1");
            let episodic = fixture
                .database
                .recall(&RecallQuery { text: MESSAGE, vector: Some(&fixture.query_vector), limit: 8, scopes: None })
                .unwrap();
            let skills = fixture.skills.match_message(MESSAGE);
            black_box((hooks, channel, episodic, skills))
        })
    });

    let session = SessionRequest {
        model_window: Some(200_000),
        query: MESSAGE,
        agent: Some(&fixture.agent),
        runtime: Some(&fixture.runtime),
        thread: &fixture.thread,
        ..Default::default()
    };
    black_box(fixture.builder.build_session_context(&session)); // warm the caches
    group.bench_function("build_session_context_warm", |b| {
        b.iter(|| black_box(fixture.builder.build_session_context(&session)))
    });
    let caps = resolve_caps(Some(200_000));
    group.bench_function("session_sources_only", |b| {
        b.iter(|| {
            let files = fixture
                .files
                .get_context(&FilesContextCaps {
                    preferences: caps.preferences,
                    projects: caps.projects,
                    history: caps.daily_history,
                    ..FilesContextCaps::default()
                })
                .unwrap();
            let semantic = fixture.database.semantic_context(MESSAGE, caps.semantic).unwrap();
            let lessons = fixture.database.get_lessons(50).unwrap();
            let view = fixture.skills.session_view(caps.skills);
            black_box((files, semantic, lessons, view))
        })
    });
    group.bench_function("resolve_caps_cached", |b| b.iter(|| black_box(resolve_caps(black_box(Some(200_000))))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
