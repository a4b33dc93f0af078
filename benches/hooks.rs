//! Hooks benches: config-hook evaluation against 200 rules, and the
//! spawn-to-decision overhead of a trivial hook.
//!
//! Run: `cargo bench --bench hooks`

use std::hint::black_box;

use cairn_hooks::{ConfigHooks, HookEntry, HookEvent, HookInput, HookRunner, HookSet, HooksConfig, RunnerOptions};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// 200 rules: 50 approve, 50 deny, 40 auto-replies, 40 transforms, 20 context rules.
fn two_hundred_rules() -> ConfigHooks {
    let approve: Vec<String> = (0..50)
        .map(|index| match index % 3 {
            0 => format!("tool_{index}"),
            1 => format!("prefix_{index}_*"),
            _ => format!("@server_{index}/*"),
        })
        .collect();
    let deny: Vec<String> = (0..50)
        .map(|index| match index % 3 {
            0 => format!("danger_{index}"),
            1 => format!("*_suffix_{index}"),
            _ => format!("*contains_{index}*"),
        })
        .collect();
    let replies: serde_json::Map<String, serde_json::Value> =
        (0..40).map(|index| (format!("^canned question {index}$"), json!(format!("answer {index}")))).collect();
    let transforms: serde_json::Map<String, serde_json::Value> =
        (0..40).map(|index| (format!(r"\bproject{index}\b"), json!(format!("[project {index}] ")))).collect();
    let context: serde_json::Map<String, serde_json::Value> = (0..20)
        .map(|index| (format!("keyword{index}, alias{index}"), json!(format!("context text {index}"))))
        .collect();
    let config = json!({
        "auto_approve_tools": approve, "auto_deny_tools": deny,
        "auto_replies": replies, "transforms": transforms, "context_rules": context
    });
    let config = HooksConfig::from_json_str(&config.to_string()).unwrap();
    let (hooks, _) = ConfigHooks::compile(&config).unwrap();
    assert_eq!(hooks.rule_count(), 200);
    hooks
}

fn config_hooks(c: &mut Criterion) {
    let hooks = two_hundred_rules();
    let message = "Could you look at project17 and check whether keyword3 still applies to the release notes \
                   we wrote last week? The reviewers asked for a summary before Friday.";
    c.bench_function("config_hooks/200_rules/one_message_and_one_tool_call", |b| {
        b.iter(|| {
            let decision = hooks.tool_decision(black_box("@server_8/query"));
            let outcome = hooks.process_message(black_box(message));
            black_box((decision, outcome))
        })
    });
}

fn runner(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("true.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut set = HookSet::new();
    set.push(HookEvent::PreToolUse, HookEntry::new(script.to_str().unwrap()));
    let runner = HookRunner::new(&set, RunnerOptions::default()).unwrap();
    let input = HookInput::tool(HookEvent::PreToolUse, dir.path(), "fs_read", json!({"path": "README.md"}));
    let mut group = c.benchmark_group("hook_runner");
    group.sample_size(30);
    group.bench_function("spawn_to_decision/trivial_sh_hook", |b| b.iter(|| black_box(runner.fire(&input))));
    group.bench_function("peer/spawn_and_wait/bin_true", |b| {
        b.iter(|| black_box(std::process::Command::new("/bin/true").status().unwrap()))
    });
    group.finish();
}

criterion_group!(benches, config_hooks, runner);
criterion_main!(benches);
