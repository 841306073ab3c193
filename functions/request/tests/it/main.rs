//! The integration tests of `request`, linked as one binary (one link instead of 7); each
//! module is one former test file, its tests named `<module>::<test>`.

mod auth;
mod common;
mod guard;
mod handler;
mod memory;
mod paging;
mod retries;
mod rules;
mod scrub;
mod tenants;
mod trust;
