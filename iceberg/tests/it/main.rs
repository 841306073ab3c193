//! The integration tests of `iceberg`, linked as one binary (one link instead of 2); each
//! module is one former test file, its tests named `<module>::<test>`.

#[cfg(feature = "glue")]
mod optimizers;
mod overwrite;
mod persist;
mod spike;
