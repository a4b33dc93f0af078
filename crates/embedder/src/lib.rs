//! cairn-embedder
