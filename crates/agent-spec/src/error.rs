//! Errors of the agent-spec crate.

use std::fmt;
use std::path::PathBuf;

use crate::constants::PIN_COMMAND;

/// What went wrong while reading, resolving or using an agent spec.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentSpecError {
    /// The spec file could not be read (missing, sensitive, not UTF-8).
    #[error("cannot read agent spec {path}")]
    Read {
        /// The file that was read.
        path: PathBuf,
        /// Why the guarded read failed.
        #[source]
        source: cairn_guard::GuardError,
    },
    /// The file's text is not an agent spec in either serialisation.
    #[error("{} is not readable as an agent spec: {problem}", display_path(path.as_ref()))]
    Syntax {
        /// The file, when the text came from one.
        path: Option<PathBuf>,
        /// What exactly is wrong, with its position where known.
        problem: SyntaxProblem,
    },
    /// Two spellings of one field are both present, which kiro-cli
    /// reports as a duplicate field.
    #[error("`{first}` and `{second}` are the same field; set only one")]
    DuplicateSpelling {
        /// The spelling read first.
        first: &'static str,
        /// The other spelling.
        second: &'static str,
    },
    /// No agents directory holds a spec of that name.
    #[error("no agent named `{name}` in {}", join_paths(searched))]
    NotFound {
        /// The requested name.
        name: String,
        /// The directories that were searched.
        searched: Vec<PathBuf>,
    },
    /// Several files declare the name with different content and no pin
    /// picks one.
    #[error(
        "agent `{name}` is declared by {} files with different content: {}; pin one with {}",
        files.len(),
        join_paths(files),
        pin_commands(name, files)
    )]
    Ambiguous {
        /// The requested name.
        name: String,
        /// Every file that declares it.
        files: Vec<PathBuf>,
    },
    /// A pin names a file that does not declare the agent.
    #[error(
        "agent `{name}` is pinned to `{pinned}`, which is not one of the files declaring it ({}); fix the pin with {}",
        join_paths(claimants),
        pin_commands(name, claimants)
    )]
    PinMismatch {
        /// The requested name.
        name: String,
        /// The pinned file name.
        pinned: String,
        /// The files that do declare the name.
        claimants: Vec<PathBuf>,
    },
    /// The only file that could hold the agent cannot be read as a spec.
    #[error("agent `{name}` is in {}, which cannot be used: {problem}", path.display())]
    Broken {
        /// The requested name.
        name: String,
        /// The unreadable file.
        path: PathBuf,
        /// Why it cannot be read.
        problem: String,
    },
    /// A pin must be a bare file name of a spec in an agents directory.
    #[error("a pin is a bare spec file name ending in .json or .md, not `{pinned}`")]
    InvalidPin {
        /// The rejected value.
        pinned: String,
    },
    /// The prompt file is a credential, governance or kernel location.
    #[error("prompt of {} points at a sensitive location {path} ({reason}); refusing to read it", spec.display())]
    SensitivePrompt {
        /// The spec whose prompt this is.
        spec: PathBuf,
        /// The resolved prompt path.
        path: PathBuf,
        /// Why the guard classified it as sensitive.
        reason: &'static str,
    },
    /// A spec from a project checkout points its prompt outside its own
    /// agents directory.
    #[error("prompt `{uri}` of project spec {} is refused: {reason}", spec.display())]
    UntrustedPrompt {
        /// The spec whose prompt this is.
        spec: PathBuf,
        /// The `file://` URI as written.
        uri: String,
        /// Which containment rule it breaks.
        reason: &'static str,
    },
    /// An agents directory exists but cannot be listed.
    #[error("cannot list agents directory {path}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = AgentSpecError> = std::result::Result<T, E>;

/// Why a text is not an agent spec. Positions are 1-based lines.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyntaxProblem {
    /// The JSON does not parse.
    Json {
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The top level is not an object.
    NotAnObject {
        /// What it is instead (`array`, `string`, ...).
        found: &'static str,
    },
    /// A Markdown spec does not open with a `---` fence.
    MissingFrontmatter,
    /// The frontmatter's closing `---` fence is missing.
    UnterminatedFrontmatter,
    /// The YAML does not parse.
    Yaml {
        /// Line of the error.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A YAML anchor (`&name`): JSON has no references.
    YamlAnchor {
        /// Line of the anchor.
        line: usize,
    },
    /// A YAML alias (`*name`): JSON has no references.
    YamlAlias {
        /// Line of the alias.
        line: usize,
    },
    /// A YAML tag (`!!binary`, `!custom`): JSON has no tags.
    YamlTag {
        /// The tag as written.
        tag: String,
        /// Line of the construct.
        line: usize,
    },
    /// A mapping key that is not a string (`1:`, `true:`, a list).
    NonStringKey {
        /// Line of the key.
        line: usize,
    },
    /// `.inf`, `-.inf` or `.nan`: JSON numbers are finite.
    NonFiniteNumber {
        /// The scalar as written.
        text: String,
        /// Line of the scalar.
        line: usize,
    },
    /// The same key twice in one mapping.
    DuplicateKey {
        /// The key.
        key: String,
        /// Line of the second occurrence.
        line: usize,
    },
    /// More than one YAML document in the frontmatter.
    MultipleDocuments,
}

impl fmt::Display for SyntaxProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json { line, column, message } => {
                write!(f, "invalid JSON at line {line}, column {column}: {message}")
            }
            Self::NotAnObject { found } => write!(f, "the top level must be an object, found {found}"),
            Self::MissingFrontmatter => {
                f.write_str("a Markdown agent spec must open with a `---` line starting its YAML frontmatter")
            }
            Self::UnterminatedFrontmatter => f.write_str("the YAML frontmatter has no closing `---` line"),
            Self::Yaml { line, message } => write!(f, "invalid YAML frontmatter at line {line}: {message}"),
            Self::YamlAnchor { line } => {
                write!(f, "line {line} defines a YAML anchor (`&name`), which has no JSON form; remove it")
            }
            Self::YamlAlias { line } => write!(
                f,
                "line {line} uses a YAML alias (`*name`), which has no JSON form; write the value out in full"
            ),
            Self::YamlTag { tag, line } => {
                write!(f, "line {line} uses the YAML tag `{tag}`, which has no JSON form; remove the tag")
            }
            Self::NonStringKey { line } => {
                write!(f, "line {line} has a mapping key that is not a string; quote the key")
            }
            Self::NonFiniteNumber { text, line } => {
                write!(
                    f,
                    "line {line} has the number `{text}`, which JSON cannot hold; quote it or use a finite number"
                )
            }
            Self::DuplicateKey { key, line } => write!(f, "line {line} repeats the key `{key}`"),
            Self::MultipleDocuments => f.write_str("the frontmatter holds more than one YAML document"),
        }
    }
}

fn display_path(path: Option<&PathBuf>) -> String {
    path.map_or_else(|| "text".to_owned(), |path| path.display().to_string())
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn pin_commands(name: &str, files: &[PathBuf]) -> String {
    files
        .iter()
        .filter_map(|file| file.file_name())
        .map(|file| format!("`{PIN_COMMAND} {name} {}`", file.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" or ")
}
