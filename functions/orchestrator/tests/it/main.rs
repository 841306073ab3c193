//! The integration tests of `orchestrator`, linked as one binary (one link instead of 4); each
//! module is one former test file, its tests named `<module>::<test>`.

mod athena_rows;
mod call_policy;
mod common;
mod cursor;
mod fanout;
#[cfg(feature = "lambda")]
mod fanout_moto;
mod handler;
