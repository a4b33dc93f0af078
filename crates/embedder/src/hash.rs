//! [`HashEmbedder`]: a deterministic, model-free backend for tests.

use crate::backend::{EmbeddingBackend, l2_normalize};
use crate::error::Result;

/// Deterministic feature-hashing embedder: lower-cased words and character
/// trigrams are hashed (FNV-1a) into signed buckets, then the vector is
/// L2-normalised. Texts that share words get a high cosine, so it stands in
/// for a real model in other crates' tests. It is always ready and needs no
/// files; the same text gives the same vector on every platform.
///
/// ```
/// use cairn_embedder::{EmbeddingBackend, HashEmbedder};
/// let embedder = HashEmbedder::new(64);
/// let a = embedder.embed("the cat sat on the mat").unwrap();
/// assert_eq!(a.len(), 64);
/// assert_eq!(a, embedder.embed("the cat sat on the mat").unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    model_id: String,
    dim: usize,
}

impl HashEmbedder {
    /// A hash embedder producing `dim`-wide vectors, model id `hash-<dim>`.
    ///
    /// # Panics
    /// When `dim` is 0 (a programming error, not user input).
    pub fn new(dim: usize) -> Self {
        assert!(dim > 0, "HashEmbedder needs a non-zero dimension");
        Self { model_id: format!("hash-{dim}"), dim }
    }

    /// The same embedder under another model id (to simulate a model swap).
    pub fn with_model_id(mut self, model_id: impl Into<String>) -> Self {
        self.model_id = model_id.into();
        self
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dim];
        let lower = text.to_lowercase();
        let mut add = |feature: &[u8], weight: f32| {
            let hash = fnv1a(feature);
            let index = (hash % self.dim as u64) as usize;
            let sign = if (hash >> 63) & 1 == 1 { -1.0 } else { 1.0 };
            vector[index] += sign * weight;
        };
        for word in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            add(word.as_bytes(), 1.0);
            let chars: Vec<char> = format!(" {word} ").chars().collect();
            for window in chars.windows(3) {
                let gram: String = window.iter().collect();
                add(gram.as_bytes(), 0.5);
            }
        }
        if vector.iter().all(|x| *x == 0.0) {
            // Empty or symbol-only text: a fixed unit vector keeps the output normalised.
            vector[0] = 1.0;
        }
        l2_normalize(&mut vector);
        vector
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The backend of a model-free embedder: always ready, each text's vector
/// from its `vector` method.
macro_rules! model_free_backend {
    ($embedder:ty) => {
        impl EmbeddingBackend for $embedder {
            fn model_id(&self) -> &str {
                &self.model_id
            }

            fn dim(&self) -> usize {
                self.dim
            }

            fn is_ready(&self) -> bool {
                true
            }

            fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
                Ok(texts.iter().map(|text| self.vector(text)).collect())
            }

            fn embed(&self, text: &str) -> Result<Vec<f32>> {
                Ok(self.vector(text))
            }
        }
    };
}

model_free_backend!(HashEmbedder);

impl Default for HashEmbedder {
    fn default() -> Self {
        Self::new(crate::constants::DEFAULT_MODEL_DIM)
    }
}

/// Deterministic bag-of-words embedder: every lower-cased word is a fixed
/// pseudo-random direction (seeded by its FNV-1a hash) and a text is the
/// L2-normalised sum of its words. Texts with no word in common are nearly
/// orthogonal (cosine about ±0.05 at 384 dimensions) and texts sharing half
/// their words score about 0.5, the spread a sentence model shows, where
/// [`HashEmbedder`]'s shared character trigrams lift every pair of texts
/// in a small vocabulary well above the relevance gates. Benchmarks use it
/// to measure retrieval on a realistic score distribution without a model.
///
/// ```
/// use cairn_embedder::{EmbeddingBackend, WordVectorEmbedder, cosine};
/// let embedder = WordVectorEmbedder::new(384);
/// let a = embedder.embed("deploy the gateway on friday").unwrap();
/// let b = embedder.embed("deploy the gateway on monday").unwrap();
/// let c = embedder.embed("lunch with alice").unwrap();
/// assert!(cosine(&a, &b) > 0.6 && cosine(&a, &c).abs() < 0.3);
/// ```
#[derive(Debug, Clone)]
pub struct WordVectorEmbedder {
    model_id: String,
    dim: usize,
}

impl WordVectorEmbedder {
    /// A word-vector embedder producing `dim`-wide vectors, model id `words-<dim>`.
    ///
    /// # Panics
    /// When `dim` is 0 (a programming error, not user input).
    pub fn new(dim: usize) -> Self {
        assert!(dim > 0, "WordVectorEmbedder needs a non-zero dimension");
        Self { model_id: format!("words-{dim}"), dim }
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dim];
        for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            // xorshift64* from the word's hash: uniform in [-1, 1) per component.
            let mut state = fnv1a(word.as_bytes()) | 1;
            for component in &mut vector {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                let bits = state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
                *component += bits as f32 / (1u64 << 23) as f32 - 1.0;
            }
        }
        if vector.iter().all(|x| *x == 0.0) {
            vector[0] = 1.0;
        }
        l2_normalize(&mut vector);
        vector
    }
}

model_free_backend!(WordVectorEmbedder);
