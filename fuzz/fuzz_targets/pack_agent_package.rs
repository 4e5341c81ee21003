#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fetchgate::fuzzing::pack::pack_agent_package(data));
