//! Tidy: the workspace's structural rules, checked against the tree (after
//! rust-analyzer's `tidy.rs`).
//!
//! 1. The dependency edges ARCHITECTURE.md lists equal `cargo metadata`'s.
//! 2. No library crate reads the environment or the user's home directory,
//!    and none names rusqlite outside the SQLite backend.
//! 3. No crate has a cycle between its top-level modules.
//! 4. Every source file ARCHITECTURE.md names exists.
//! 5. No function of a crate's non-test code runs over
//!    [`MAX_FUNCTION_LINES`] lines.
//!
//! Each rule is a function over plain data (a document, a list of files),
//! so the tests at the bottom plant one violation of each and see it
//! reported. Violations the workspace still has are listed in [`DEBT`]; an
//! entry that no longer violates must be removed, so the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Known violations of rule 2, as (rule, file relative to the workspace
/// root): none left. A new one fails the test; the list stays for a
/// violation that must be recorded while it is taken apart.
const DEBT: &[(&str, &str)] = &[];

/// Known cycles between top-level modules (rule 3), per crate: none left.
/// A new one fails the test; the list stays for a cycle that must be
/// recorded while it is taken apart.
const CYCLE_DEBT: &[(&str, &[&str])] = &[];

/// The longest a non-test function may run, from its `fn` line to its
/// closing brace (rule 5).
const MAX_FUNCTION_LINES: usize = 100;

/// Known functions over [`MAX_FUNCTION_LINES`] (rule 5), as (file, name):
/// none left. A new one fails the test; the list stays for a function that
/// must be recorded while it is taken apart.
const LONG_FUNCTION_DEBT: &[(&str, &str)] = &[];

/// The folder of the SQLite backend: the only code that may name rusqlite.
const SQLITE_BACKEND: &str = "crates/memory-core/src/store/sqlite/";

/// The crate that is a binary: it owns the process, its environment and
/// its home directory.
const BINARY_CRATE: &str = "gateway-bin";

type Edge = (String, String);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every `.rs` file under `dir`, with its path relative to the workspace root.
fn rust_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let relative = path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
                out.push((relative, read(&path)));
            }
        }
    }
    out.sort();
    out
}

// ---- Rule 1: documented dependency edges ----------------------------------

/// The edges listed under `## Dependency edges`: lines `- `a` → `b`, `c``.
fn documented_edges(architecture: &str) -> BTreeSet<Edge> {
    let mut edges = BTreeSet::new();
    let mut inside = false;
    for line in architecture.lines() {
        if line.starts_with("## ") {
            inside = line.trim() == "## Dependency edges";
            continue;
        }
        let Some(rest) = line.strip_prefix("- `").filter(|_| inside) else { continue };
        let Some((from, targets)) = rest.split_once("` → ") else { continue };
        for target in targets.split(',') {
            let target = target.trim().trim_matches('`');
            if !target.is_empty() && target != "nothing" {
                edges.insert((from.to_owned(), target.to_owned()));
            }
        }
    }
    edges
}

/// The normal dependencies between the crates under `crates/`, from
/// `cargo metadata`, named without the `cairn-` prefix.
fn cargo_edges() -> BTreeSet<Edge> {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut edges = BTreeSet::new();
    for package in metadata["packages"].as_array().unwrap() {
        let manifest = package["manifest_path"].as_str().unwrap().replace('\\', "/");
        if !manifest.contains("/crates/") {
            continue;
        }
        let from = package["name"].as_str().unwrap().trim_start_matches("cairn-").to_owned();
        for dependency in package["dependencies"].as_array().unwrap() {
            let name = dependency["name"].as_str().unwrap();
            if dependency["kind"].is_null() && name.starts_with("cairn-") {
                edges.insert((from.clone(), name.trim_start_matches("cairn-").to_owned()));
            }
        }
    }
    edges
}

/// What differs between the documented and the actual edges.
fn edge_differences(documented: &BTreeSet<Edge>, actual: &BTreeSet<Edge>) -> Vec<String> {
    let missing = actual.difference(documented).map(|(a, b)| format!("{a} → {b} exists but is not documented"));
    let extra = documented.difference(actual).map(|(a, b)| format!("{a} → {b} is documented but does not exist"));
    missing.chain(extra).collect()
}

// ---- Rule 2: what library crates may not do --------------------------------

/// A file's non-test code: test files are skipped and a file's text stops
/// at its first `#[cfg(test)]`; `//` comments are dropped (a `//` inside a
/// string cuts the line short, which can only hide a match).
fn production_lines(path: &str, text: &str) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if path.contains("/tests/") || name == "tests.rs" || name.ends_with("_tests.rs") {
        return Vec::new();
    }
    let code = |line: &str| line.split_once("//").map_or(line, |(code, _)| code).to_owned();
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push(code(line));
            continue;
        }
        // A test module ends the file's production code; any other item
        // under the attribute (a test-only function, say) is skipped to
        // its end, and what follows it counts again.
        if lines.peek().is_some_and(|next| next.trim_start().starts_with("mod ")) {
            break;
        }
        let mut depth = 0i32;
        for item in lines.by_ref() {
            let item = code(item);
            depth += item.matches('{').count() as i32 - item.matches('}').count() as i32;
            let trimmed = item.trim_end();
            if depth <= 0 && (trimmed.ends_with('}') || trimmed.ends_with(';')) {
                break;
            }
        }
    }
    out
}

/// The rule-2 violations of one file of a library crate: (rule, path).
fn library_violations(path: &str, text: &str) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    for line in production_lines(path, text) {
        if ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("].iter().any(|call| line.contains(call)) {
            found.insert(("environment".to_owned(), path.to_owned()));
        }
        if line.contains("home_dir(") {
            found.insert(("home-directory".to_owned(), path.to_owned()));
        }
        if line.contains("rusqlite") && !path.starts_with(SQLITE_BACKEND) {
            found.insert(("rusqlite-outside-backend".to_owned(), path.to_owned()));
        }
    }
    found
}

/// The crate a path under `crates/` belongs to.
fn crate_of(path: &str) -> &str {
    path.trim_start_matches("crates/").split('/').next().unwrap_or("")
}

// ---- Rule 3: module cycles --------------------------------------------------

/// The top-level module a file of a crate's `src/` belongs to (`None` for
/// the crate root).
fn top_module(src_relative: &str) -> Option<String> {
    let first = src_relative.split('/').next()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(module, "lib" | "main")).then(|| module.to_owned())
}

/// Cycles between the top-level modules of one crate, from its files
/// (paths relative to `src/`, text): module A depends on B when A's
/// non-test code names `crate::B`.
fn module_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    let modules: BTreeSet<String> = files.iter().filter_map(|(path, _)| top_module(path)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let Some(from) = top_module(path) else { continue };
        for line in production_lines(&format!("src/{path}"), text) {
            for (index, _) in line.match_indices("crate::") {
                let before = line[..index].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                    continue;
                }
                let target: String =
                    line[index + 7..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if target != from && modules.contains(&target) {
                    graph.entry(from.clone()).or_default().insert(target);
                }
            }
        }
    }
    strongly_connected(&modules, &graph).into_iter().filter(|component| component.len() > 1).collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(nodes: &BTreeSet<String>, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for target in graph.get(node).into_iter().flatten() {
            if !state.index.contains_key(target.as_str()) {
                visit(state, target);
                let low = state.low[node].min(state.low[target.as_str()]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target.as_str()) {
                let low = state.low[node].min(state.index[target.as_str()]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            component.sort();
            state.out.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in nodes {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.out
}

// ---- Rule 4: files the map names --------------------------------------------

/// Source files ARCHITECTURE.md names in backticks (`.rs`, `.py`, `.sh`,
/// `.toml`, or any path with a directory): none of them may be missing.
fn named_files(architecture: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (index, piece) in architecture.split('`').enumerate() {
        // Odd pieces are inside backticks.
        if index % 2 == 0 || piece.is_empty() {
            continue;
        }
        let is_path = piece.chars().all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
        let source = [".rs", ".py", ".sh", ".toml"].iter().any(|extension| piece.ends_with(extension));
        let has_extension = piece.rsplit('/').next().is_some_and(|name| name.contains('.'));
        if is_path
            && !piece.starts_with('/')
            && !piece.starts_with('.')
            && (source || (piece.contains('/') && has_extension))
        {
            named.insert(piece.to_owned());
        }
    }
    named
}

/// The named files no repository file matches (a name matches a file whose
/// path is the name or ends with `/name`).
fn missing_files(named: &BTreeSet<String>, files: &BTreeSet<String>) -> Vec<String> {
    named
        .iter()
        .filter(|name| !files.iter().any(|file| file == *name || file.ends_with(&format!("/{name}"))))
        .cloned()
        .collect()
}

/// The repository's files, relative to the root (build output and version
/// control left out).
fn repository_files() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !matches!(name.to_str(), Some("target" | ".git" | "node_modules")) {
                    stack.push(path);
                }
            } else {
                out.insert(path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

// ---- Rule 5: function length ---------------------------------------------------

/// The name of the function a line declares (`pub(crate) async fn name(`).
fn declared_function(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// A line with its string and character literals emptied, so braces and
/// quotes in text do not count.
fn without_strings(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let (mut at, mut in_string) = (0, false);
    while at < chars.len() {
        let c = chars[at];
        if in_string {
            match c {
                '\\' => at += 1,
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '\'' && chars.get(at + 1) == Some(&'\\') {
            // `'\n'`, `'\''`, `'\u{7b}'`: skipped to the closing quote.
            at += 2;
            while at < chars.len() && !(chars[at] == '\'' && chars[at - 1] != '\\') {
                at += 1;
            }
        } else if c == '\'' && chars.get(at + 2) == Some(&'\'') {
            at += 2; // `'{'`
        } else {
            out.push(c);
        }
        at += 1;
    }
    out
}

/// The non-test functions of one file that run over [`MAX_FUNCTION_LINES`]
/// lines, as (name, lines).
fn long_functions(path: &str, text: &str) -> Vec<(String, usize)> {
    let lines = production_lines(path, text);
    let mut found = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some(name) = declared_function(&lines[at]) else {
            at += 1;
            continue;
        };
        let (mut depth, mut opened, mut end) = (0i32, false, at);
        while end < lines.len() {
            let line = without_strings(&lines[end]);
            for c in line.chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            // A declaration without a body (a trait method) ends at its `;`.
            if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
                break;
            }
            end += 1;
        }
        let length = end - at + 1;
        if opened && length > MAX_FUNCTION_LINES {
            found.push((name.to_owned(), length));
        }
        // Functions inside this one are counted with it.
        at = end + 1;
    }
    found
}

// ---- The workspace ------------------------------------------------------------

#[test]
fn documented_dependency_edges_are_cargos() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let documented = documented_edges(&architecture);
    assert!(!documented.is_empty(), "ARCHITECTURE.md has no `## Dependency edges` list");
    let differences = edge_differences(&documented, &cargo_edges());
    assert!(differences.is_empty(), "ARCHITECTURE.md's dependency edges:\n{}", differences.join("\n"));
}

#[test]
fn libraries_read_no_environment_no_home_and_name_rusqlite_only_in_the_backend() {
    let mut found = BTreeSet::new();
    for (path, text) in rust_files(&root().join("crates")) {
        if crate_of(&path) != BINARY_CRATE && path.contains("/src/") {
            found.extend(library_violations(&path, &text));
        }
    }
    let debt: BTreeSet<(String, String)> =
        DEBT.iter().map(|(rule, path)| ((*rule).to_owned(), (*path).to_owned())).collect();
    let new: Vec<_> = found.difference(&debt).collect();
    assert!(new.is_empty(), "library code breaks the rules: {new:#?}");
    let stale: Vec<_> = debt.difference(&found).collect();
    assert!(stale.is_empty(), "these no longer violate; remove them from DEBT: {stale:#?}");
}

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = std::fs::read_dir(root().join("crates")).unwrap();
    let mut cycles = BTreeSet::new();
    for entry in crates.flatten() {
        let src = entry.path().join("src");
        let files: Vec<(String, String)> = rust_files(&src)
            .into_iter()
            .map(|(path, text)| {
                let relative = path.split_once("/src/").map_or(path.clone(), |(_, rest)| rest.to_owned());
                (relative, text)
            })
            .collect();
        for cycle in module_cycles(&files) {
            cycles.insert(format!("{}: {}", entry.file_name().to_string_lossy(), cycle.join(" ↔ ")));
        }
    }
    let debt: BTreeSet<String> =
        CYCLE_DEBT.iter().map(|(krate, modules)| format!("{krate}: {}", modules.join(" ↔ "))).collect();
    let new: Vec<_> = cycles.difference(&debt).collect();
    assert!(new.is_empty(), "module cycles: {new:#?}");
    let stale: Vec<_> = debt.difference(&cycles).collect();
    assert!(stale.is_empty(), "these cycles are gone; remove them from CYCLE_DEBT: {stale:#?}");
}

#[test]
fn every_file_the_map_names_exists() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let named = named_files(&architecture);
    assert!(named.len() > 10, "the map names files: {named:?}");
    let missing = missing_files(&named, &repository_files());
    assert!(missing.is_empty(), "ARCHITECTURE.md names files that do not exist: {missing:#?}");
}

#[test]
fn no_function_runs_over_a_hundred_lines() {
    let mut found = BTreeSet::new();
    let mut lengths = BTreeMap::new();
    for (path, text) in rust_files(&root().join("crates")) {
        if path.contains("/src/") {
            for (name, length) in long_functions(&path, &text) {
                lengths.insert((path.clone(), name.clone()), length);
                found.insert((path.clone(), name));
            }
        }
    }
    let debt: BTreeSet<(String, String)> =
        LONG_FUNCTION_DEBT.iter().map(|(path, name)| ((*path).to_owned(), (*name).to_owned())).collect();
    let new: Vec<_> = found.difference(&debt).map(|key| (key, lengths[key])).collect();
    assert!(new.is_empty(), "functions over {MAX_FUNCTION_LINES} lines (split them): {new:#?}");
    let stale: Vec<_> = debt.difference(&found).collect();
    assert!(stale.is_empty(), "these are no longer long; remove them from LONG_FUNCTION_DEBT: {stale:#?}");
}

// ---- Each rule catches a planted violation -------------------------------------

#[test]
fn a_planted_undocumented_or_phantom_edge_is_reported() {
    let documented = documented_edges(
        "## Crates\n- `x` → `y`\n## Dependency edges\n- `context` → `guard`, `skills`\n- `guard` → nothing\n## Next\n",
    );
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(documented, BTreeSet::from([pair("context", "guard"), pair("context", "skills")]));
    let actual = BTreeSet::from([pair("context", "guard"), pair("skills", "guard")]);
    assert_eq!(
        edge_differences(&documented, &actual),
        ["skills → guard exists but is not documented", "context → skills is documented but does not exist"]
    );
}

#[test]
fn a_planted_environment_home_or_rusqlite_use_is_reported() {
    let text = "use std::path::Path;\n\
                // std::env::var(\"IN_A_COMMENT\") is fine\n\
                fn f() { let _ = std::env::var(\"CAIRN_X\"); let _ = dirs::home_dir(); }\n\
                fn g(c: &rusqlite::Connection) {}\n\
                #[cfg(test)]\nmod tests { fn t() { std::env::var_os(\"T\"); } }\n";
    let rules: Vec<String> =
        library_violations("crates/skills/src/lib.rs", text).into_iter().map(|(rule, _)| rule).collect();
    assert_eq!(rules, ["environment", "home-directory", "rusqlite-outside-backend"]);
    assert!(library_violations(SQLITE_BACKEND, "use rusqlite::Connection;").is_empty());
    assert!(library_violations("crates/skills/src/tests.rs", "std::env::var(\"X\")").is_empty());
    assert!(
        library_violations("crates/skills/src/lib.rs", "fn f() {}\n#[cfg(test)]\nfn t() { std::env::var(\"X\"); }")
            .is_empty()
    );
}

#[test]
fn a_planted_module_cycle_is_reported() {
    let files = |extra: &str| {
        vec![
            ("lib.rs".to_owned(), "mod a; mod b; mod c;".to_owned()),
            ("a.rs".to_owned(), "use crate::b::thing;".to_owned()),
            ("b/mod.rs".to_owned(), format!("use crate::c::Other;\n{extra}")),
            ("c.rs".to_owned(), "pub struct Other; // crate::a in a comment is fine".to_owned()),
        ]
    };
    assert!(module_cycles(&files("")).is_empty());
    assert_eq!(module_cycles(&files("fn f() { crate::a::go() }")), [vec!["a".to_owned(), "b".to_owned()]]);
    assert!(module_cycles(&files("#[cfg(test)]\nuse crate::a::go;")).is_empty());
    // A test-only item hides itself, not the production code after it.
    let after_a_test_item = "#[cfg(test)]\nfn helper() {\n    crate::a::go();\n}\nfn f() { crate::a::go() }";
    assert_eq!(module_cycles(&files(after_a_test_item)), [vec!["a".to_owned(), "b".to_owned()]]);
    assert!(module_cycles(&files("#[cfg(test)]\nmod tests {\n}\nfn f() { crate::a::go() }")).is_empty());
}

#[test]
fn a_planted_missing_file_is_reported() {
    let named = named_files(
        "The map: `episodic/search.rs`, `scripts/eval_locomo.py`, `<home>/memory.db`, `memory.db`, \
         `/etc/shadow`, `src/nowhere.rs`, `config.json`, `cargo test`.",
    );
    assert_eq!(
        named,
        BTreeSet::from(["episodic/search.rs", "scripts/eval_locomo.py", "src/nowhere.rs"].map(str::to_owned))
    );
    let files = BTreeSet::from(
        ["crates/memory-core/src/episodic/search.rs", "scripts/eval_locomo.py", "README.md"].map(str::to_owned),
    );
    assert_eq!(missing_files(&named, &files), ["src/nowhere.rs"]);
}

#[test]
fn a_planted_long_function_is_reported() {
    let body = |lines: usize| (0..lines).map(|line| format!("    let _ = \"{{{line}\";\n")).collect::<String>();
    let text = format!(
        "pub(crate) async fn long(x: u8) -> u8 {{\n{}    x\n}}\n\
         fn short() {{ let _ = ['{{', '\\'', '\\u{{7b}}']; }}\n\
         trait T {{\n    fn declared(&self);\n}}\n\
         fn just_fits() {{\n{}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
        body(100),
        body(98),
        body(200),
    );
    assert_eq!(long_functions("crates/x/src/lib.rs", &text), [("long".to_owned(), 103)]);
    assert!(long_functions("crates/x/src/tests.rs", &text).is_empty());
}
