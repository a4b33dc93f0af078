//! Every `--help` of the `cairn` binary: each subcommand a `Commands:`
//! list names answers `--help`, and a command group's own description
//! names no subcommand it does not have; where it enumerates its
//! subcommands, it names them all.

use std::collections::BTreeSet;

use crate::cairn;

/// `cairn <path> --help`'s standard output; it must succeed.
fn help(path: &[String]) -> String {
    let output = cairn().args(path).arg("--help").env_remove("CAIRN_HOME").output().unwrap();
    assert!(
        output.status.success(),
        "cairn {} --help failed: {}",
        path.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The names of the `Commands:` section (no section: a leaf command).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line[2..].starts_with(' '))
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// The description above `Usage:`, on one line.
fn description(help: &str) -> String {
    let text = help.split("\nUsage:").next().unwrap_or_default();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A word that could be a subcommand name: `set-inject`, `list`.
fn is_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// What a description claims as subcommand names: the one-word items of
/// each list (after the last `:` of a `;` clause, or inside parentheses)
/// and every backticked word. The flag says it enumerates them: some list
/// is two or more one-word items and nothing else.
fn claims(description: &str) -> (BTreeSet<String>, bool) {
    let mut lists = Vec::new();
    let mut outside = String::new();
    let mut rest = description;
    while let Some((before, after)) = rest.split_once('(') {
        outside.push_str(before);
        let (inside, after) = after.split_once(')').unwrap_or((after, ""));
        lists.push(inside.to_owned());
        rest = after;
    }
    outside.push_str(rest);
    for clause in outside.split(';') {
        if let Some((_, list)) = clause.rsplit_once(':') {
            lists.push(list.to_owned());
        }
    }
    let mut claimed = BTreeSet::new();
    let mut enumerates = false;
    for list in &lists {
        let items: Vec<&str> = list
            .split(',')
            .flat_map(|item| item.split(" and "))
            .flat_map(|item| item.split(" or "))
            .map(|item| item.trim().trim_start_matches("and ").trim_start_matches("or ").trim())
            .filter(|item| !item.is_empty())
            .map(|item| match item.strip_prefix('`').and_then(|inner| inner.strip_suffix('`')) {
                Some(inner) => inner,
                None => item.trim_end_matches('.'),
            })
            .collect();
        let names: Vec<&str> = items.iter().copied().filter(|item| is_name(item)).collect();
        enumerates |= names.len() >= 2 && names.len() == items.len();
        claimed.extend(names.into_iter().map(str::to_owned));
    }
    for (index, quoted) in description.split('`').enumerate() {
        if index % 2 == 1 && is_name(quoted) {
            claimed.insert(quoted.to_owned());
        }
    }
    (claimed, enumerates)
}

/// Checks the group at `path` and every command under it; the problems.
fn walk(path: &mut Vec<String>, problems: &mut Vec<String>, visited: &mut usize) {
    let text = help(path);
    *visited += 1;
    let names = subcommands(&text);
    if names.is_empty() {
        return;
    }
    let shown = if path.is_empty() { "cairn".to_owned() } else { format!("cairn {}", path.join(" ")) };
    let own_name = path.last().map_or("cairn", String::as_str);
    let real: BTreeSet<&str> = names.iter().map(String::as_str).filter(|name| *name != "help").collect();
    let description = description(&text);
    let (claimed, enumerates) = claims(&description);
    for word in &claimed {
        if word != own_name && !real.contains(word.as_str()) {
            problems
                .push(format!("`{shown}` says {word:?}, which is not one of its subcommands {real:?}: {description}"));
        }
    }
    if enumerates {
        for name in &real {
            if !claimed.contains(*name) {
                problems.push(format!("`{shown}` lists its subcommands but leaves out {name:?}: {description}"));
            }
        }
    }
    for name in real {
        path.push(name.to_owned());
        walk(path, problems, visited);
        path.pop();
    }
}

#[test]
fn every_help_names_only_subcommands_that_exist_and_each_answers_help() {
    let mut problems = Vec::new();
    let mut visited = 0;
    walk(&mut Vec::new(), &mut problems, &mut visited);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(visited > 60, "only {visited} commands were walked");
}

#[test]
fn the_description_check_catches_what_the_audit_found() {
    let check = |description: &str| claims(description);
    // `cairn skills` promised `edit`; `cairn agent` left out `project` and `export`.
    let (claimed, enumerates) = check("The skill catalog: list, search, edit, lint, and what a message would trigger");
    assert!(claimed.contains("edit") && !enumerates, "{claimed:?}");
    let (claimed, enumerates) = check("Agent spec files: list, show, pin, check");
    assert!(enumerates && claimed.len() == 4, "{claimed:?}");
    // `cairn mcp` described only the stdio server, in tool nouns.
    let (claimed, _) = check("The MCP server over stdio (memory, lessons, skills and history as tools)");
    assert!(claimed.contains("memory") && claimed.contains("lessons"), "{claimed:?}");
    // Prose, key names and flags are not claims.
    for prose in [
        "Settings: every effective value and where it came from; change one",
        "Structured facts under `pref.`, `project.`, `user.` (and `lesson.`) keys",
        "Add Cairn's MCP server and hooks to Claude Code or kiro-cli config (or remove them)",
    ] {
        assert_eq!(check(prose), (BTreeSet::new(), false), "{prose}");
    }
}
