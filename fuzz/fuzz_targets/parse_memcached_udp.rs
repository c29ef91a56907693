#![no_main]

use libfuzzer_sys::fuzz_target;
use tailwise_core::protocol::memcached::udp;

fuzz_target!(|data: &[u8]| {
    tailwise_fuzz::datagrams(&mut udp::Client::new(), data);
});
