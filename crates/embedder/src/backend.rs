//! The [`EmbeddingBackend`] seam and small vector helpers.

use crate::error::Result;

/// Turns text into fixed-width, L2-normalised vectors.
///
/// Object safe and `Send + Sync`: consumers hold an
/// `Arc<dyn EmbeddingBackend>`. Real backends live behind the `candle`
/// feature ([`crate::CandleBert`], [`crate::Qwen3Embedder`]); [`crate::HashEmbedder`]
/// is the deterministic stand-in for tests.
pub trait EmbeddingBackend: Send + Sync {
    /// Identifies the vector space: two backends with the same id and
    /// [`dim`](Self::dim) produce comparable vectors.
    fn model_id(&self) -> &str;

    /// Width of every vector this backend returns.
    fn dim(&self) -> usize;

    /// True when the model is resident and `embed` will not answer
    /// [`crate::EmbedError::NotReady`].
    fn is_ready(&self) -> bool;

    /// Embeds every text; the output has the input's length and order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// Embeds one text.
    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        let mut vectors = self.embed_batch(&[text])?;
        vectors.pop().ok_or_else(|| crate::EmbedError::InvalidInput {
            reason: "backend returned no vector for one input".to_owned(),
        })
    }

    /// Releases the model's memory. The default does nothing; lazy backends
    /// reload on the next use.
    fn close(&self) {}
}

/// Scales `vector` to unit length in place (a zero vector stays zero).
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}

/// Cosine similarity of two vectors of the same length (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    (dot / (na.sqrt() * nb.sqrt())) as f32
}
