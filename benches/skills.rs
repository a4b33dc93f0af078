//! The skill catalog's hot paths over 500 generated skills: the per-message
//! trigger pass, a warm listing, a listing that re-stats every file, and the
//! lazy-load session index under a 24,750-character budget.

use std::hint::black_box;

use cairn_skills::{SkillCatalog, SkillsConfig};
use criterion::{Criterion, criterion_group, criterion_main};

const WORDS: &[&str] = &[
    "deploy",
    "release",
    "rollback",
    "kubernetes",
    "terraform",
    "postgres",
    "migration",
    "backup",
    "restore",
    "invoice",
    "billing",
    "refund",
    "customer",
    "ticket",
    "incident",
    "pager",
    "alert",
    "metric",
    "dashboard",
    "grafana",
    "log",
    "search",
    "grep",
    "trace",
    "latency",
    "cache",
    "redis",
    "queue",
    "kafka",
    "worker",
    "cron",
    "schedule",
    "report",
    "export",
    "import",
    "csv",
    "excel",
    "chart",
    "slide",
    "deck",
    "brand",
    "color",
    "font",
    "review",
    "lint",
    "test",
    "coverage",
    "benchmark",
    "profile",
    "memory",
    "leak",
    "thread",
    "lock",
    "async",
    "docker",
    "image",
    "registry",
    "secret",
    "rotate",
    "certificate",
    "dns",
    "proxy",
    "firewall",
    "vpn",
    "email",
    "calendar",
    "meeting",
    "notes",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1_000_003) as usize
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }
}

fn build(dir: &std::path::Path, skills: usize) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for index in 0..skills {
        let name = format!("group-{}/skill-{index}", index % 10);
        let skill_dir = dir.join("skills").join(&name);
        std::fs::create_dir_all(&skill_dir).unwrap();
        let triggers = format!("{} {}, {}, !{}", rng.word(), rng.word(), rng.word(), rng.word());
        let description: Vec<&str> = (0..18).map(|_| rng.word()).collect();
        let body: Vec<&str> = (0..300).map(|_| rng.word()).collect();
        let always = if index % 100 == 0 { "always: true\n" } else { "" };
        let text = format!(
            "---\nname: skill-{index}\ndescription: {}\ntriggers: {triggers}\n{always}---\n# Skill {index}\n\n{}\n",
            description.join(" "),
            body.join(" ")
        );
        std::fs::write(skill_dir.join("SKILL.md"), text).unwrap();
    }
}

fn catalog(home: &std::path::Path, lazy: bool, ttl_millis: u64) -> SkillCatalog {
    let mut config = SkillsConfig::new(home);
    config.persist_usage = false;
    config.lazy_load = lazy;
    config.cache_ttl_millis = ttl_millis;
    SkillCatalog::open(config)
}

fn bench(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    build(home.path(), 500);
    let warm = catalog(home.path(), true, u64::MAX);
    assert_eq!(warm.list_skills().len(), 500);
    let mut rng = Rng(42);
    let message: String = (0..40).map(|_| rng.word()).collect::<Vec<_>>().join(" ");
    let message = format!("Can you help me? {message} thanks!");

    let mut group = c.benchmark_group("skills_500");
    group.bench_function("trigger_pass_one_message", |b| b.iter(|| black_box(warm.triggered(black_box(&message)))));
    group.bench_function("list_skills_warm", |b| b.iter(|| black_box(warm.list_skills())));
    group.bench_function("session_index_24750_chars", |b| b.iter(|| black_box(warm.session_view(24_750))));
    let restat = catalog(home.path(), true, 0);
    restat.list_skills();
    group.bench_function("list_skills_restat_all_files", |b| b.iter(|| black_box(restat.list_skills())));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
