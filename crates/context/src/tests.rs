//! Unit tests of the builder live in `tests/`; this module checks the lessons overflow rendering.
