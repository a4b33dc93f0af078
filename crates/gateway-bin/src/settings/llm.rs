//! `llm`: the chat-completions endpoint consolidation calls.

use serde::Serialize;
use serde_json::Value;

use super::reader::{Resolver, invalid};
use super::{ConfigError, DEFAULT_LLM_RETRIES, DEFAULT_LLM_TIMEOUT_SECS, Source, env};

/// `llm`: the OpenAI-compatible chat-completions endpoint for consolidation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LlmSection {
    pub(crate) base_url: Option<String>,
    pub(crate) model: Option<String>,
    #[serde(skip)]
    pub(crate) api_key: Option<String>,
    pub(crate) timeout_secs: u64,
    pub(crate) max_retries: u32,
}

pub(super) fn resolve(r: &mut Resolver<'_>) -> Result<LlmSection, ConfigError> {
    let mut section = r.section("llm")?;
    let nonempty = |value: &Option<String>| value.clone().filter(|text| !text.trim().is_empty());
    let base_url = r.recorder.pick(
        "llm.base_url",
        nonempty(&r.flags.llm_base_url).map(Some),
        r.environment.get(env::LLM_BASE_URL).map(|url| Some(url.to_owned())),
        section.string("base_url")?.map(Some),
        None,
    );
    if let Some(url) = &base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(invalid(r.path, "llm.base_url", format!("must be an http:// or https:// URL (got {url:?})")));
    }
    let model = r.recorder.pick(
        "llm.model",
        nonempty(&r.flags.llm_model).map(Some),
        r.environment.get(env::LLM_MODEL).map(|model| Some(model.to_owned())),
        section.string("model")?.map(Some),
        None,
    );
    let (api_key, api_key_source) = match (
        nonempty(&r.flags.llm_api_key),
        r.environment.get(env::LLM_API_KEY).map(str::to_owned),
        section.string("api_key")?,
    ) {
        (Some(key), _, _) => (Some(key), Source::Flag),
        (None, Some(key), _) => (Some(key), Source::Env),
        (None, None, Some(key)) => (Some(key), Source::File),
        (None, None, None) => (None, Source::Default),
    };
    r.recorder.record(
        "llm.api_key",
        if api_key.is_some() { Value::String("(set)".to_owned()) } else { Value::Null },
        api_key_source,
    );
    let llm = LlmSection {
        base_url,
        model,
        api_key,
        timeout_secs: r.recorder.pick(
            "llm.timeout_secs",
            None,
            None,
            section.u64("timeout_secs", 1, 3_600)?,
            DEFAULT_LLM_TIMEOUT_SECS,
        ),
        max_retries: r.recorder.pick(
            "llm.max_retries",
            None,
            None,
            section.u64("max_retries", 0, 10)?,
            DEFAULT_LLM_RETRIES,
        ) as u32,
    };
    r.finish(&section);
    Ok(llm)
}
