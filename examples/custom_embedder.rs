//! Plugging your own embedding model into Cairn.
//!
//! Anything that turns text into vectors can back Cairn's memory: implement
//! [`EmbeddingBackend`] (model id, dimension, readiness, a batch call) and
//! pass it to [`Config::embedder`]. Here the "model" is feature hashing of
//! lower-cased words into 256 buckets, which needs no download; a real host
//! would call its own model server or library in `embed_batch`.
//!
//! ```sh
//! cargo run --example custom_embedder
//! ```

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_embedder::{EmbedError, EmbeddingBackend};
use cairn_host::{Cairn, Config};

const DIM: usize = 256;

/// Bag of hashed words, L2-normalised; counts the texts it embedded.
#[derive(Default)]
struct HashedWords {
    embedded: AtomicUsize,
}

impl EmbeddingBackend for HashedWords {
    fn model_id(&self) -> &str {
        "example/hashed-words-256"
    }

    fn dim(&self) -> usize {
        DIM
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0f32; DIM];
                for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| word.len() > 2) {
                    let mut hasher = DefaultHasher::new();
                    word.to_lowercase().hash(&mut hasher);
                    vector[(hasher.finish() % DIM as u64) as usize] += 1.0;
                }
                cairn_embedder::l2_normalize(&mut vector);
                vector
            })
            .collect())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = tempfile::tempdir()?;
    let embedder = Arc::new(HashedWords::default());
    let cairn = Cairn::open(Config::new(home.path()).embedder(embedder.clone()))?;

    for text in [
        "The billing service moved to Postgres 16 on Monday.",
        "Ada prefers tea over coffee in the afternoon.",
        "The search cluster runs on three nodes in Frankfurt.",
    ] {
        cairn.note(text)?;
    }
    let hits = cairn.search("which postgres version does billing use", 3)?;
    for hit in &hits {
        println!("{:.3} cosine {:?}  {}", hit.score.score, hit.score.cosine, hit.text);
    }
    println!("the backend embedded {} texts", embedder.embedded.load(Ordering::Relaxed));

    assert!(hits[0].text.contains("Postgres 16"), "the closest fragment ranks first");
    assert!(hits[0].score.cosine.is_some(), "ranked with the plugged-in vectors");
    assert!(embedder.embedded.load(Ordering::Relaxed) >= 4, "three fragments and the query");
    Ok(())
}
