//! cairn-memory-vector
