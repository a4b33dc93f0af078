//! Agent spec discovery: listing and parsing a directory of 200 specs (a
//! mix of JSON and Markdown, as a user's `~/.kiro/agents` holds), and the
//! metadata-keyed cache serving the same unchanged directory again.

use std::hint::black_box;
use std::path::Path;

use cairn_agent_spec::{AgentCatalog, AgentDirs, CatalogCache, Pins};
use cairn_guard::SensitivePaths;
use criterion::{Criterion, criterion_group, criterion_main};

const SPECS: usize = 200;

/// Writes `SPECS` specs: three in four JSON, the rest Markdown, each with
/// tools, resources, hooks, MCP servers and settings like real files.
fn write_specs(dir: &Path) {
    for index in 0..SPECS {
        let name = format!("agent-{index:03}");
        if index % 4 == 3 {
            let text = format!(
                "---\nname: {name}\ndescription: Markdown agent {index}\ntools: read, grep, @git\nallowedTools:\n  - fs_read\nresources:\n  - file://.kiro/steering/**/*.md\n  - skill://.kiro/skills/*/SKILL.md\nhooks:\n  agentSpawn:\n    - command: git status --short\n---\n\n# {name}\n\nYou review changes for agent {index} and explain each finding.\n"
            );
            std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
        } else {
            let spec = serde_json::json!({
                "name": name,
                "description": format!("JSON agent {index}"),
                "prompt": format!("You are agent {index}. Read the code before changing it, and test each change."),
                "tools": ["fs_read", "fs_write", "execute_bash", "grep", "glob", "@git", "@docs/search"],
                "allowedTools": ["fs_read", "grep", "@git/git_status"],
                "mcpServers": {
                    "git": { "command": "git-mcp", "args": ["--repo", "."], "timeout": 5000 },
                    "docs": { "url": "https://docs.example/mcp" }
                },
                "resources": ["file://README.md", "skill://~/skills/*/SKILL.md"],
                "hooks": { "preToolUse": [{ "command": "audit.sh", "matcher": "execute_bash", "timeout_ms": 2000 }] },
                "toolsSettings": { "shell": { "allowedCommands": ["git status", "cargo test .*"] },
                                   "subagent": { "availableAgents": ["agent-*"] } },
                "includeMcpJson": false
            });
            std::fs::write(dir.join(format!("{name}.json")), serde_json::to_string_pretty(&spec).unwrap()).unwrap();
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    write_specs(dir.path());
    let dirs = AgentDirs::user(dir.path());
    let sensitive = SensitivePaths::default();
    let pins = Pins::new();

    c.bench_function("agent_spec/discover_and_parse_200", |b| {
        b.iter(|| {
            let catalog = AgentCatalog::load(black_box(&dirs), &sensitive).unwrap();
            black_box(catalog.resolve("agent-150", &pins).unwrap());
        });
    });

    let mut cache = CatalogCache::new(dirs.clone(), sensitive.clone());
    cache.catalog().unwrap();
    c.bench_function("agent_spec/cached_unchanged_200", |b| {
        b.iter(|| black_box(cache.catalog().unwrap()));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
