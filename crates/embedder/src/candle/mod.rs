//! In-process backends on candle (CPU): [`CandleBert`] and [`Qwen3Embedder`].

mod bert;
mod kernels;
mod matmul;
mod qwen3;
mod team;
pub(crate) mod tokenize;

pub use bert::{CandleBert, CandleBertOptions, Pooling};
pub use qwen3::{Qwen3Embedder, Qwen3Options, format_query};
