//! Support for tributary's end-to-end tests that needs the AWS SDK or the
//! readers' Python: the AWS emulator ([`emulator`]) and the independent
//! readers ([`readers`]); the stream small-file rule ([`windows`]). Fake vendors and lake read-back come from the
//! `test-support` crate. The tests live in `tests/tests/`.

pub mod emulator;
pub mod readers;
pub mod windows;
