//! Carrier package for the workspace's top-level `examples/` and `benches/`.
//! It exports nothing; see the `cairn-*` crates.
