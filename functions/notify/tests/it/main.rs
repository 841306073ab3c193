//! The integration tests of `notify`, linked as one binary (one link instead of 2); each
//! module is one former test file, its tests named `<module>::<test>`.

mod archive;
mod handler;
mod stream;
