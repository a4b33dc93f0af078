//! Unit tests over the public surface, one file per feature.

mod config;
mod merge;
mod projection;
mod runner;
