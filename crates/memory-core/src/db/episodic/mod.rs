//! The episodic layer's methods on [`MemoryDb`](crate::MemoryDb): writing,
//! searching, the vector and keyword indexes and the context block. The
//! types, rules and row operations they use are in [`crate::episodic`].

mod context;
mod index;
mod keyword;
mod search;
mod write;
