//! memcached protocols: the text protocol (`ascii`: client, and the server side used by
//! `tailwise serve` so that mutilate, memtier_benchmark and memcslap can be pointed at it), the
//! binary protocol (`binary`) and the UDP frame around the text protocol (`udp`).

pub mod ascii;
pub mod binary;
pub mod udp;
