#![no_main]

use libfuzzer_sys::fuzz_target;
use tailwise_core::protocol::echo;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the echo size.
    let Some((&size, rest)) = data.split_first() else { return };
    tailwise_fuzz::datagrams(&mut echo::Client::new(size as usize), rest);
});
