//! The integration tests of `persist`, linked as one binary (one link instead of 5); each
//! module is one former test file, its tests named `<module>::<test>`.

mod cold_start;
mod convert;
mod handler;
mod lifecycle;
mod s3_calls;
mod safety;
mod schema_race;
mod stream;
mod tenants;
