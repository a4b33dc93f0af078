//! Text and path safety for Cairn.
