//! Dev-only helpers shared by tributary's tests (the end-to-end tests in
//! `tests/`, the functions' and the CLI's integration tests): fake vendor
//! APIs on a free loopback port ([`vendor`]) and the lake read back as JSON
//! rows ([`lake`]).
//!
//! Helpers panic instead of returning errors: they run in tests only.

pub mod lake;
pub mod vendor;
