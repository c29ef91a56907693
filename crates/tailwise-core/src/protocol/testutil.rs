//! Test helpers shared by the codec tests: feed a codec the way the engine does (reads of any size
//! appended to a buffer, `parse` until `Incomplete`), and proptest strategies for keys and values.

use super::{Codec, Outcome, Parsed};
use proptest::prelude::*;

/// What a well-formed reply parsed to: (len, id, outcome).
pub type Got = (usize, Option<u64>, Outcome);

/// Feed `stream` to `codec` as reads ending at each of `cuts` (then the rest), parsing after every
/// read until `Incomplete`, as the engine does. Panics on `Malformed`, on a reply longer than the
/// bytes available and on bytes left over at the end.
pub fn drive(codec: &mut dyn Codec, stream: &[u8], cuts: &[usize]) -> Vec<Got> {
    let mut got = Vec::new();
    let mut pos = 0;
    let ends = cuts.iter().copied().filter(|&c| c < stream.len()).chain([stream.len()]);
    for avail in ends {
        loop {
            if pos >= avail {
                break;
            }
            match codec.parse(&stream[pos..avail]) {
                Parsed::Incomplete => break,
                Parsed::Reply { len, id, outcome } => {
                    assert!(len >= 1 && pos + len <= avail, "reply of {len} bytes with {} available", avail - pos);
                    got.push((len, id, outcome));
                    pos += len;
                }
                Parsed::Malformed { reason } => panic!("malformed at byte {pos} of {avail} read: {reason}"),
            }
        }
    }
    assert_eq!(pos, stream.len(), "bytes left unparsed: {:?}", stream[pos..].escape_ascii().to_string());
    got
}

/// `stream` parses to `want` (id, outcome) whole, split at every byte boundary, and byte by byte.
pub fn check_all_splits(make: &dyn Fn() -> Box<dyn Codec>, stream: &[u8], want: &[(Option<u64>, Outcome)]) {
    let strip = |g: Vec<Got>| g.into_iter().map(|(_, id, o)| (id, o)).collect::<Vec<_>>();
    assert_eq!(strip(drive(&mut *make(), stream, &[])), want, "whole");
    for cut in 1..stream.len() {
        assert_eq!(strip(drive(&mut *make(), stream, &[cut])), want, "split at {cut}");
    }
    let every: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(strip(drive(&mut *make(), stream, &every)), want, "byte by byte");
}

/// Arbitrary input fed as reads ending at `cuts`: whatever `parse` says, it must not panic, and a
/// reply must be 1..=available bytes long. Stops at the first `Malformed` (the engine closes).
pub fn no_panic_stream(codec: &mut dyn Codec, input: &[u8], cuts: &[usize]) {
    let mut pos = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    cuts.sort_unstable();
    for avail in cuts.into_iter().chain([input.len()]) {
        while pos < avail {
            match codec.parse(&input[pos..avail]) {
                Parsed::Incomplete => break,
                Parsed::Reply { len, .. } => {
                    assert!(len >= 1 && len <= avail - pos, "reply of {len} bytes with {} available", avail - pos);
                    pos += len;
                }
                Parsed::Malformed { .. } => return,
            }
        }
    }
}

/// Arbitrary datagrams: never a panic, and a reply is always the whole datagram.
pub fn no_panic_datagrams(codec: &mut dyn Codec, datagrams: &[Vec<u8>]) {
    for d in datagrams {
        if let Parsed::Reply { len, .. } = codec.parse(d) {
            assert_eq!(len, d.len());
        }
    }
}

/// memcached-style keys: 1..=250 printable bytes without spaces.
pub fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 1..=250)
}

/// Values: any bytes, mostly short, sometimes a few KiB.
pub fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => proptest::collection::vec(any::<u8>(), 0..5000),
    ]
}

/// Arbitrary bytes with the read boundaries to feed them at.
pub fn bytes_and_cuts() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    (proptest::collection::vec(any::<u8>(), 0..512), proptest::collection::vec(0usize..512, 0..4))
}

/// Random single-byte edits (position taken modulo the length) to turn a valid stream into a
/// nearly valid one, which reaches deeper into a parser than random bytes do.
pub fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4)
}

pub fn apply_edits(mut stream: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
    if !stream.is_empty() {
        for &(i, b) in edits {
            let n = stream.len();
            stream[i % n] = b;
        }
    }
    stream
}
