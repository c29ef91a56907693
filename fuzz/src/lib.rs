//! Drivers shared by the fuzz targets: feed the input to a client codec the way the engine does
//! and check the invariants every parser owes it.

use tailwise_core::protocol::{Codec, Outcome, Parsed};

/// Reasons and error texts are for humans and logs: short whatever the input.
const MAX_MESSAGE: usize = 1024;

/// The replies parsed, and whether the stream ended malformed (rather than incomplete).
type Run = (Vec<(usize, Option<u64>, Outcome)>, bool);

fn check_outcome(o: &Outcome) {
    if let Outcome::Error(text) = o {
        assert!(text.len() <= MAX_MESSAGE, "error text of {} bytes", text.len());
    }
}

/// Reads of `step` bytes appended to a buffer, `parse` until `Incomplete` after each, replies
/// consumed; stops at the first `Malformed` (the engine closes the connection).
fn run(codec: &mut dyn Codec, input: &[u8], step: usize) -> Run {
    let mut got = Vec::new();
    let (mut pos, mut avail) = (0, 0);
    while avail < input.len() {
        avail = (avail + step).min(input.len());
        while pos < avail {
            match codec.parse(&input[pos..avail]) {
                Parsed::Incomplete => break,
                Parsed::Reply { len, id, outcome } => {
                    assert!(len >= 1 && len <= avail - pos, "reply of {len} bytes with {} available", avail - pos);
                    check_outcome(&outcome);
                    got.push((len, id, outcome));
                    pos += len;
                }
                Parsed::Malformed { reason } => {
                    assert!(!reason.is_empty() && reason.len() <= MAX_MESSAGE, "reason of {} bytes", reason.len());
                    return (got, true);
                }
            }
        }
    }
    (got, false)
}

/// A stream codec: the first byte picks the read size; the input after it, fed in reads of that
/// size, must parse exactly as it does in one read (same replies, same malformed verdict).
pub fn stream(make: impl Fn() -> Box<dyn Codec>, data: &[u8]) {
    let Some((&k, input)) = data.split_first() else { return };
    let whole = run(&mut *make(), input, input.len().max(1));
    let step = if k == 0 { 1 } else { k as usize };
    let split = run(&mut *make(), input, step);
    assert_eq!(whole, split, "one read vs reads of {step} bytes");
}

/// A datagram codec: the input is a sequence of (u16 little-endian length, datagram); every reply
/// is the whole datagram.
pub fn datagrams(codec: &mut dyn Codec, data: &[u8]) {
    let mut rest = data;
    while rest.len() >= 2 {
        let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let d = &rest[2..2 + n];
        rest = &rest[2 + n..];
        match codec.parse(d) {
            Parsed::Reply { len, outcome, .. } => {
                assert_eq!(len, d.len());
                check_outcome(&outcome);
            }
            Parsed::Malformed { reason } => assert!(!reason.is_empty() && reason.len() <= MAX_MESSAGE),
            Parsed::Incomplete => {}
        }
    }
}
