#![no_main]

use libfuzzer_sys::fuzz_target;
use tailwise_core::protocol::{self, Codec};

fuzz_target!(|data: &[u8]| {
    tailwise_fuzz::stream(|| Box::new(protocol::http::Client::new("localhost", "/")) as Box<dyn Codec>, data);
});
