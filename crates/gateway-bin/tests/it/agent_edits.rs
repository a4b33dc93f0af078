//! Edits of agent state by several `cairn` processes: parallel `cairn agent
//! pin` all land (the pins are re-read under `config.json`'s edit lock),
//! and an agent spec kept as a symbolic link (a dotfiles checkout) is
//! edited in the file it points at, the link left in place (probe L4).

use std::path::Path;

use serde_json::{Value, json};

use crate::issue_42::{Env, succeeded, text};

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn parallel_agent_pins_are_all_kept_with_the_other_config_keys() {
    let env = Env::new();
    let agents = 8;
    for index in 0..agents {
        for variant in ["a", "b"] {
            env.write(
                &format!("user/.kiro/agents/{variant}-agent{index}.json"),
                &json!({"name": format!("agent{index}"), "prompt": variant}).to_string(),
            );
        }
    }
    env.write("cairn/config.json", "{\n  \"llm\": {\n    \"model\": \"m-1\"\n  }\n}\n");
    let children: Vec<_> = (0..agents)
        .map(|index| {
            let name = format!("agent{index}");
            let file = format!("b-agent{index}.json");
            env.spawn(&["agent", "pin", &name, &file])
        })
        .collect();
    // A config edit of another key at the same time.
    let config_set = env.run(&["config", "set", "skills.max_triggered", "3"]);
    assert!(config_set.status.success(), "{}", text(&config_set));
    for child in children {
        succeeded(child);
    }
    let config = read_json(&env.path("cairn/config.json"));
    let expected: serde_json::Map<String, Value> =
        (0..agents).map(|index| (format!("agent{index}"), json!(format!("b-agent{index}.json")))).collect();
    assert_eq!(config["agent"]["spec_pins"], Value::Object(expected), "a pin was lost: {config:#}");
    assert_eq!((&config["llm"]["model"], &config["skills"]["max_triggered"]), (&json!("m-1"), &json!(3)));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(env.path("cairn/config.json")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "config.json stays owner-only");
    }
    // The pins resolve: the ambiguous name now means the pinned file.
    let shown = env.run(&["agent", "show", "agent3", "--json"]);
    assert!(shown.status.success(), "{}", text(&shown));
    let view: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(view["prompt"]["text"], "b");
}

#[test]
fn a_pin_refuses_a_config_file_whose_pins_are_not_names_to_files() {
    let env = Env::new();
    env.write("user/.kiro/agents/dev.json", &json!({"name": "dev", "prompt": "p"}).to_string());
    let before = "{\"agent\": {\"spec_pins\": {\"other\": 3}}}\n";
    env.write("cairn/config.json", before);
    let output = env.run(&["agent", "pin", "dev", "dev.json"]);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("agent.spec_pins"), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(env.path("cairn/config.json")).unwrap(), before, "nothing was written");
}

#[cfg(unix)]
#[test]
fn mcp_enable_on_a_symlinked_spec_edits_the_linked_file_and_keeps_the_link() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    env.write_mcp_servers(4);
    let target = env.write_dev_spec("user/dotfiles/kiro/dev.json");
    let link = env.path("user/.kiro/agents/dev.json");
    // A relative link, as GNU stow makes them.
    std::os::unix::fs::symlink("../../dotfiles/kiro/dev.json", &link).unwrap();

    // Concurrent edits through the link: all land in the linked file.
    let children: Vec<_> =
        (0..4).map(|index| env.spawn(&["mcp", "enable", &format!("s{index}"), "--agent", "dev"])).collect();
    for child in children {
        succeeded(child);
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("../../dotfiles/kiro/dev.json"));
    let spec = read_json(&target);
    let mut tools: Vec<String> = serde_json::from_value(spec["tools"].clone()).unwrap();
    tools.sort();
    assert_eq!(tools, ["@s0", "@s1", "@s2", "@s3", "fs_read"], "{spec}");
    assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o644, "the mode is kept");

    let disabled = env.run(&["mcp", "disable", "s0", "--agent", "dev"]);
    assert!(disabled.status.success(), "{}", text(&disabled));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(!read_json(&target)["tools"].as_array().unwrap().contains(&json!("@s0")));
}
