//! Which tool calls a hook's matcher covers.
//!
//! Forms: no matcher or `*` (every tool); an exact tool name; a glob with
//! `*` or `?`; `@builtin` and `@builtin/<glob>` (built-in tools); `@mcp`
//! (every MCP tool); `@server` and `@server/<tool or glob>`;
//! `mcp__server__tool`; and the tags `read`, `write`, `shell`, `web`,
//! `subagent`. A built-in tool is known by its canonical id and its aliases
//! (`execute_bash`/`shell`, `fs_read`/`read`, `fs_write`/`write`, …), so a
//! matcher written for either name meets both.

use globset::{GlobBuilder, GlobMatcher};

use crate::error::{HooksError, Result};

/// Canonical built-in tool ids and their other names.
const ALIASES: &[(&str, &[&str])] = &[
    ("execute_bash", &["shell"]),
    ("fs_read", &["read"]),
    ("fs_write", &["write"]),
    ("use_aws", &["aws"]),
    ("use_subagent", &["subagent"]),
];

/// Built-in tools without aliases that matchers may name.
const OTHER_BUILTINS: &[&str] = &[
    "grep",
    "glob",
    "code",
    "web_fetch",
    "web_search",
    "introspect",
    "knowledge",
    "thinking",
    "todo_list",
    "delegate",
    "report_issue",
];

/// Tags and the canonical tools they cover.
const TAGS: &[(&str, &[&str])] = &[
    ("read", &["fs_read", "grep", "glob", "code"]),
    ("write", &["fs_write"]),
    ("shell", &["execute_bash"]),
    ("web", &["web_fetch", "web_search"]),
    ("subagent", &["use_subagent"]),
];

/// A tool call as matchers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolName {
    kind: ToolKind,
    /// Every name the tool goes by (as called, canonical, aliases; for MCP
    /// `@server/tool` and `mcp__server__tool`).
    names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ToolKind {
    Builtin { canonical: String },
    Mcp { server: String, tool: String },
}

impl ToolName {
    /// Parses a tool name as a host reports it: `@server/tool` and
    /// `mcp__server__tool` are MCP tools, anything else is built in.
    pub fn parse(name: &str) -> Self {
        if let Some((server, tool)) = split_mcp(name) {
            let names = vec![format!("@{server}/{tool}"), format!("mcp__{server}__{tool}")];
            return ToolName { kind: ToolKind::Mcp { server: server.to_owned(), tool: tool.to_owned() }, names };
        }
        let canonical = canonical_tool(name).to_owned();
        let mut names = vec![name.to_owned()];
        let push = |names: &mut Vec<String>, candidate: &str| {
            if !names.iter().any(|known| known == candidate) {
                names.push(candidate.to_owned());
            }
        };
        push(&mut names, &canonical);
        if let Some((_, aliases)) = ALIASES.iter().find(|(id, _)| *id == canonical) {
            for alias in *aliases {
                push(&mut names, alias);
            }
        }
        ToolName { kind: ToolKind::Builtin { canonical }, names }
    }

    /// Every name this tool is matched under.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// True for an MCP tool.
    pub fn is_mcp(&self) -> bool {
        matches!(self.kind, ToolKind::Mcp { .. })
    }
}

/// The canonical id of a built-in tool name (`shell` → `execute_bash`);
/// other names come back unchanged.
pub fn canonical_tool(name: &str) -> &str {
    ALIASES.iter().find(|(_, aliases)| aliases.contains(&name)).map_or(name, |(id, _)| id)
}

/// True when `name` is a built-in tool id or alias this crate knows.
pub fn is_known_builtin(name: &str) -> bool {
    ALIASES.iter().any(|(id, aliases)| *id == name || aliases.contains(&name)) || OTHER_BUILTINS.contains(&name)
}

fn split_mcp(name: &str) -> Option<(&str, &str)> {
    if let Some(rest) = name.strip_prefix('@') {
        let (server, tool) = rest.split_once('/')?;
        return (!server.is_empty() && !tool.is_empty()).then_some((server, tool));
    }
    let rest = name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// A compiled hook matcher.
#[derive(Debug, Clone)]
pub struct ToolMatcher {
    source: Option<String>,
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Any,
    Tag(&'static [&'static str]),
    Exact(String),
    Glob(GlobMatcher),
    Builtin,
    BuiltinGlob(GlobMatcher),
    AnyMcp,
    Server(String),
    ServerTool { server: String, tool: ToolPart },
}

#[derive(Debug, Clone)]
enum ToolPart {
    Exact(String),
    Glob(GlobMatcher),
}

impl ToolMatcher {
    /// The matcher for a hook without one: every tool.
    pub fn any() -> Self {
        ToolMatcher { source: None, rule: Rule::Any }
    }

    /// Compiles a matcher string.
    pub fn parse(matcher: &str) -> Result<Self> {
        let invalid =
            |reason: &str| HooksError::InvalidMatcher { matcher: matcher.to_owned(), reason: reason.to_owned() };
        if matcher.is_empty() {
            return Err(invalid("empty matcher"));
        }
        let rule = if matcher == "*" {
            Rule::Any
        } else if let Some((_, tools)) = TAGS.iter().find(|(tag, _)| *tag == matcher) {
            Rule::Tag(tools)
        } else if matcher == "@builtin" {
            Rule::Builtin
        } else if let Some(pattern) = matcher.strip_prefix("@builtin/") {
            if pattern.is_empty() {
                return Err(invalid("`@builtin/` needs a tool name or glob"));
            }
            Rule::BuiltinGlob(glob(pattern).map_err(|reason| invalid(&reason))?)
        } else if matcher == "@mcp" {
            Rule::AnyMcp
        } else if let Some(rest) = matcher.strip_prefix('@') {
            let (server, tool) = match rest.split_once('/') {
                Some((server, tool)) => (server, Some(tool)),
                None => (rest, None),
            };
            if server.is_empty() {
                return Err(invalid("`@` needs a server name"));
            }
            if has_wildcard(server) {
                return Err(invalid("the server part of `@server/tool` must be a literal name"));
            }
            match tool {
                None => Rule::Server(server.to_owned()),
                Some("") => return Err(invalid("`@server/` needs a tool name or glob")),
                Some(tool) if has_wildcard(tool) => Rule::ServerTool {
                    server: server.to_owned(),
                    tool: ToolPart::Glob(glob(tool).map_err(|reason| invalid(&reason))?),
                },
                Some(tool) => Rule::ServerTool { server: server.to_owned(), tool: ToolPart::Exact(tool.to_owned()) },
            }
        } else if has_wildcard(matcher) {
            Rule::Glob(glob(matcher).map_err(|reason| invalid(&reason))?)
        } else {
            Rule::Exact(canonical_tool(matcher).to_owned())
        };
        Ok(ToolMatcher { source: Some(matcher.to_owned()), rule })
    }

    /// Compiles an optional matcher (`None` covers every tool).
    pub fn parse_optional(matcher: Option<&str>) -> Result<Self> {
        matcher.map_or_else(|| Ok(Self::any()), Self::parse)
    }

    /// The matcher as written, if any.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// True when the matcher names a built-in tool this crate does not know
    /// (kept, but worth a warning: it may be a typo or a renamed tool).
    pub fn names_unknown_tool(&self) -> bool {
        match &self.rule {
            Rule::Exact(name) => split_mcp(name).is_none() && !is_known_builtin(name),
            _ => false,
        }
    }

    /// Whether this matcher covers a call of `tool`.
    pub fn matches(&self, tool: &ToolName) -> bool {
        match (&self.rule, &tool.kind) {
            (Rule::Any, _) => true,
            (Rule::Tag(tools), ToolKind::Builtin { canonical }) => tools.contains(&canonical.as_str()),
            (Rule::Tag(_), ToolKind::Mcp { .. }) => false,
            (Rule::Exact(name), _) => tool.names.iter().any(|known| known == name),
            (Rule::Glob(glob), _) => tool.names.iter().any(|known| glob.is_match(known)),
            (Rule::Builtin, kind) => matches!(kind, ToolKind::Builtin { .. }),
            (Rule::BuiltinGlob(glob), ToolKind::Builtin { .. }) => tool.names.iter().any(|known| glob.is_match(known)),
            (Rule::BuiltinGlob(_), ToolKind::Mcp { .. }) => false,
            (Rule::AnyMcp, kind) => matches!(kind, ToolKind::Mcp { .. }),
            (Rule::Server(server), ToolKind::Mcp { server: called, .. }) => server == called,
            (Rule::ServerTool { server, tool: part }, ToolKind::Mcp { server: called_server, tool: called_tool }) => {
                server == called_server
                    && match part {
                        ToolPart::Exact(name) => name == called_tool,
                        ToolPart::Glob(glob) => glob.is_match(called_tool),
                    }
            }
            (Rule::Server(_) | Rule::ServerTool { .. }, ToolKind::Builtin { .. }) => false,
        }
    }
}

fn has_wildcard(text: &str) -> bool {
    text.contains(['*', '?'])
}

fn glob(pattern: &str) -> std::result::Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(false)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| error.kind().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expect` lists, for each tool, whether the matcher covers it.
    #[track_caller]
    fn check(matcher: &str, expect: &[(&str, bool)]) {
        let compiled = ToolMatcher::parse(matcher).unwrap();
        for (tool, expected) in expect {
            assert_eq!(compiled.matches(&ToolName::parse(tool)), *expected, "matcher {matcher:?} on tool {tool:?}");
        }
    }

    #[test]
    fn star_and_none_match_everything() {
        check("*", &[("fs_read", true), ("@git/status", true), ("anything", true)]);
        let any = ToolMatcher::parse_optional(None).unwrap();
        assert!(any.matches(&ToolName::parse("mcp__x__y")));
    }

    #[test]
    fn exact_names_meet_their_aliases() {
        check("execute_bash", &[("execute_bash", true), ("shell", true), ("fs_read", false)]);
        check("fs_write", &[("write", true), ("fs_write", true), ("fs_read", false)]);
        check("fs_read", &[("read", true), ("grep", false)]);
        check("use_aws", &[("aws", true)]);
        check("grep", &[("grep", true), ("glob", false)]);
    }

    #[test]
    fn tags_cover_their_tool_families() {
        check(
            "read",
            &[("fs_read", true), ("read", true), ("grep", true), ("glob", true), ("code", true), ("fs_write", false)],
        );
        check("write", &[("fs_write", true), ("write", true), ("fs_read", false)]);
        check("shell", &[("execute_bash", true), ("shell", true), ("@srv/shell", false)]);
        check("web", &[("web_fetch", true), ("web_search", true), ("fs_read", false)]);
        check("subagent", &[("use_subagent", true), ("subagent", true), ("execute_bash", false)]);
    }

    #[test]
    fn globs_with_star_and_question_mark() {
        check("fs_*", &[("fs_read", true), ("read", true), ("shell", false)]);
        check("execute_*", &[("shell", true)]);
        check("fs_?rite", &[("fs_write", true), ("fs_read", false)]);
        check("*query", &[("@postgres/query", true), ("fs_read", false)]);
    }

    #[test]
    fn builtin_and_mcp_selectors() {
        check("@builtin", &[("fs_read", true), ("shell", true), ("@git/status", false), ("mcp__git__status", false)]);
        check("@builtin/fs_*", &[("fs_write", true), ("shell", false), ("@fs_x/fs_y", false)]);
        check("@mcp", &[("@git/status", true), ("mcp__git__status", true), ("fs_read", false)]);
    }

    #[test]
    fn server_forms() {
        check("@git", &[("@git/status", true), ("mcp__git__log", true), ("@gitlab/status", false), ("fs_read", false)]);
        check("@git/status", &[("@git/status", true), ("mcp__git__status", true), ("@git/log", false)]);
        check("@git/get_*", &[("@git/get_log", true), ("@git/set_log", false), ("@other/get_log", false)]);
        check("mcp__git__status", &[("@git/status", true), ("mcp__git__status", true), ("@git/log", false)]);
        check("mcp__git__*", &[("@git/log", true), ("@gits/log", false)]);
    }

    #[test]
    fn refused_matchers() {
        for (matcher, reason) in [
            ("", "empty"),
            ("@", "server name"),
            ("@*/tool", "literal"),
            ("@git/", "tool name"),
            ("@builtin/", "tool name"),
            ("fs_*[read", "unclosed"),
        ] {
            let error = ToolMatcher::parse(matcher).unwrap_err();
            assert!(
                matches!(&error, HooksError::InvalidMatcher { reason: got, .. } if got.to_lowercase().contains(reason)),
                "{matcher:?}: {error}"
            );
        }
    }

    #[test]
    fn unknown_tool_names_are_flagged() {
        assert!(ToolMatcher::parse("fs_raed").unwrap().names_unknown_tool());
        assert!(!ToolMatcher::parse("fs_read").unwrap().names_unknown_tool());
        assert!(!ToolMatcher::parse("shell").unwrap().names_unknown_tool());
        assert!(!ToolMatcher::parse("mcp__a__b").unwrap().names_unknown_tool());
        assert!(!ToolMatcher::parse("fs_*").unwrap().names_unknown_tool());
    }
}
