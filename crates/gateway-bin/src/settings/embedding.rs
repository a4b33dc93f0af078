//! `embedding`: where the model comes from and the embed pool's size.

use std::path::PathBuf;

use serde::Serialize;

use super::reader::{Resolver, given};
use super::{ConfigError, DEFAULT_POOL_QUEUE, DEFAULT_POOL_WORKERS, env};

/// `embedding`: where the model comes from and the embed pool's size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct EmbeddingSection {
    pub(crate) model_path: Option<PathBuf>,
    /// The model path came from a flag or the environment (it wins over a
    /// model chosen through the API).
    pub(crate) model_path_explicit: bool,
    pub(crate) model_url: Option<String>,
    pub(crate) skip_download: bool,
    pub(crate) pool_workers: usize,
    pub(crate) pool_queue: usize,
}

/// `legacy_model_path` and `legacy_model_url`: the `memory` section's older
/// names for the model's path and URL, used when this section sets neither.
pub(super) fn resolve(
    r: &mut Resolver<'_>,
    legacy_model_path: Option<String>,
    legacy_model_url: Option<String>,
) -> Result<EmbeddingSection, ConfigError> {
    let mut section = r.section("embedding")?;
    let file_model_path = section.string("model_path")?.or(legacy_model_path).map(PathBuf::from);
    let env_model_path = r.environment.get(env::EMBED_MODEL_PATH).map(PathBuf::from);
    let model_path_explicit = r.flags.model_path.is_some() || env_model_path.is_some();
    let model_path = r.recorder.pick(
        "embedding.model_path",
        r.flags.model_path.clone().map(Some),
        env_model_path.map(Some),
        file_model_path.map(Some),
        None,
    );
    let file_model_url = section.string("model_url")?.or(legacy_model_url);
    let model_url = r.recorder.pick(
        "embedding.model_url",
        r.flags.model_url.clone().filter(|url| !url.trim().is_empty()).map(Some),
        r.environment.get(env::EMBED_MODEL_URL).map(|url| Some(url.to_owned())),
        file_model_url.map(Some),
        None,
    );
    let embedding = EmbeddingSection {
        model_path,
        model_path_explicit,
        model_url,
        skip_download: r.recorder.pick(
            "embedding.skip_download",
            given(r.flags.skip_download),
            r.environment.flag(env::SKIP_MODEL_DOWNLOAD)?,
            section.bool("skip_download")?,
            false,
        ),
        pool_workers: r.recorder.pick(
            "embedding.pool_workers",
            None,
            None,
            section.u64("pool_workers", 1, 64)?,
            DEFAULT_POOL_WORKERS,
        ) as usize,
        pool_queue: r.recorder.pick(
            "embedding.pool_queue",
            None,
            None,
            section.u64("pool_queue", 0, 100_000)?,
            DEFAULT_POOL_QUEUE,
        ) as usize,
    };
    r.finish(&section);
    Ok(embedding)
}
