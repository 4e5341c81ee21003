#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fetchgate::fuzzing::gomod::go_escape(data));
