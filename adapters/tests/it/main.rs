//! The integration tests of `adapters`, linked as one binary (one link instead of 2); each
//! module is one former test file, its tests named `<module>::<test>`.

mod athena_engine;
mod aws_adapters;
