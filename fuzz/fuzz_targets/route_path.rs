#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fetchgate::fuzzing::route::route_path(data));
