//! The integration tests of `core`, linked as one binary (one link instead of 4); each
//! module is one former test file, its tests named `<module>::<test>`.

mod batch;
mod ledger;
mod state;
mod tables;
