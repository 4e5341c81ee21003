#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fetchgate::fuzzing::apt::apt_deb822(data));
