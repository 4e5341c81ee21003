#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fetchgate::fuzzing::oci::oci_reference(data));
