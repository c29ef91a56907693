//! memcached protocols. `ascii` holds the text protocol's server side, used by `tailwise serve`
//! so that mutilate, memtier_benchmark and memcslap can be pointed at the synthetic server.

pub mod ascii;
