//! The integration tests of `orchestrator`, linked as one binary (one link instead of 3); each
//! module is one former test file, its tests named `<module>::<test>`.

mod athena_rows;
mod common;
mod cursor;
mod handler;
