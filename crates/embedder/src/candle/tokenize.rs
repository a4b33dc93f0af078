//! Loading a model folder's `tokenizer.json` with Cairn's own truncation
//! and padding policy (the file's declared settings are overridden).

use std::path::Path;

use tokenizers::{Tokenizer, TruncationParams};

use crate::error::{EmbedError, Result};

/// Loads `tokenizer.json`, truncating at `max_tokens` and padding nothing
/// (batches are padded by the backend, after sorting by length).
pub(crate) fn load_tokenizer(dir: &Path, max_tokens: usize) -> Result<Tokenizer> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Err(EmbedError::model_files(&path, "missing tokenizer.json"));
    }
    let mut tokenizer = Tokenizer::from_file(&path)
        .map_err(|error| EmbedError::model_files(&path, format!("unreadable tokenizer: {error}")))?;
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: max_tokens, ..TruncationParams::default() }))
        .map_err(|error| EmbedError::model_files(&path, format!("bad truncation setting: {error}")))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// Token ids of every text, in input order.
pub(crate) fn encode_all(tokenizer: &Tokenizer, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
    if let [text] = texts {
        // One text: no batch machinery (and no thread pool) around it.
        let encoding =
            tokenizer.encode(*text, true).map_err(|error| EmbedError::Tokenizer { message: error.to_string() })?;
        return Ok(vec![encoding.get_ids().to_vec()]);
    }
    let encodings = tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|error| EmbedError::Tokenizer { message: error.to_string() })?;
    Ok(encodings.into_iter().map(|encoding| encoding.get_ids().to_vec()).collect())
}

/// Reads and parses a JSON file.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|source| EmbedError::io("reading", path, source))?;
    serde_json::from_slice(&bytes).map_err(|source| EmbedError::Json { path: path.to_path_buf(), source })
}
