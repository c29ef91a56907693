//! The requests kept raw: one 64-byte [`Sample`] each, in a chunked [`SampleStore`], written out
//! as little-endian rows whose layout ([`SAMPLE_FIELDS`]) Python reads through `_core`.

/// One kept request: 64 bytes. Times are ns since the engine's start.
///
/// Layout change (issue 36): bytes 48–51 were `flags: u32`; they are now `flags: u16` and
/// `request: u16` (the flags never used the upper half: an older row reads as request 0, its
/// flags the same). `thread` stays 32 bits: a coordinator numbers its agents' threads apart
/// above 65,535 (python/tailwise/agents/merge.py).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Sample {
    pub intended_ns: u64,
    /// Last actual send time, the user-space clock before the write (0: never sent).
    pub sent_ns: u64,
    /// The kernel's transmit stamp of that send (flag `KERNEL_TX`; 0: none).
    pub tx_ns: u64,
    /// The user-space clock after the read that completed the reply (0: no reply). The reply
    /// time the latency counts to is this, or the kernel's receive stamp (flag `KERNEL_RX`).
    pub rx_user_ns: u64,
    /// Reply time − intended send time; for a censored sample, the time outstanding so far.
    pub latency_ns: u64,
    /// The latest instant at or before the intended time at which the whole client (every thread
    /// of its engine) was certified idle: nothing before it can have delayed this request at a
    /// FIFO target serving only this client (engine/busy.rs).
    pub busy_from_ns: u64,
    /// [`crate::record::flags`], every one below bit 16 (the row gives them 16 bits: `request`
    /// took the upper half of what was a `u32` flags field, issue 36).
    pub flags: u16,
    /// Which request it was: its index in the run's requests (http:// with several, in their
    /// order); 0 for protocols with one request. Gets and sets are told by the flag `SET`.
    pub request: u16,
    /// For `INFLATED`: how much of the latency may be the engine's own stall (saturating).
    pub inflation_ns: u32,
    /// The engine thread that sent it.
    pub thread: u32,
    /// How long it was due but every slot of its thread was held (or down): the target's part of
    /// its send lag, never more (saturating; 0 in packet mode).
    pub slot_wait_ns: u32,
}

/// 1024 samples (64 KiB) a chunk: small enough to come from malloc's free lists, not fresh pages,
/// when a thread starts a new store after handing one over.
const CHUNK: usize = 1024;

/// Append-only store of samples in fixed chunks: no doubling, so memory stays at
/// `size_of::<Sample>()` (64 bytes) per sample plus one partly filled chunk.
#[derive(Default)]
pub struct SampleStore {
    chunks: Vec<Vec<Sample>>,
    len: usize,
}

impl Sample {
    /// Its flags as the engine's `u32` flag constants ([`crate::record::flags`]).
    #[inline]
    pub fn flags(&self) -> u32 {
        u32::from(self.flags)
    }
}

impl SampleStore {
    #[inline]
    pub fn push(&mut self, s: Sample) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(s),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(s);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = &Sample> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
    /// Keep only the samples `f` keeps, in their order (into fresh chunks, the old ones freed).
    pub fn retain(&mut self, mut f: impl FnMut(&Sample) -> bool) {
        let mut out = SampleStore::default();
        for c in std::mem::take(&mut self.chunks) {
            for s in c.iter().filter(|s| f(s)) {
                out.push(*s);
            }
        }
        *self = out;
    }
    /// Bytes allocated for samples.
    pub fn allocated_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity() * std::mem::size_of::<Sample>()).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Sample>>()
    }
    /// Little-endian rows of 64 bytes: intended_ns, sent_ns, tx_ns, rx_user_ns, latency_ns,
    /// busy_from_ns (u64), flags, request (u16), inflation_ns, thread, slot_wait_ns (u32).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        samples_to_le_bytes(self.iter())
    }
}

/// The row [`samples_to_le_bytes`] writes, field by field: (name, byte offset, NumPy type code).
/// `tailwise._core.SAMPLE_FIELDS` exports it and Python's `SAMPLE_DTYPE` is built from it; the
/// tests hold the struct and the writer to it.
pub const SAMPLE_FIELDS: [(&str, usize, &str); 11] = [
    ("intended_ns", std::mem::offset_of!(Sample, intended_ns), "<u8"),
    ("sent_ns", std::mem::offset_of!(Sample, sent_ns), "<u8"),
    ("tx_ns", std::mem::offset_of!(Sample, tx_ns), "<u8"),
    ("rx_user_ns", std::mem::offset_of!(Sample, rx_user_ns), "<u8"),
    ("latency_ns", std::mem::offset_of!(Sample, latency_ns), "<u8"),
    ("busy_from_ns", std::mem::offset_of!(Sample, busy_from_ns), "<u8"),
    ("flags", std::mem::offset_of!(Sample, flags), "<u2"),
    ("request", std::mem::offset_of!(Sample, request), "<u2"),
    ("inflation_ns", std::mem::offset_of!(Sample, inflation_ns), "<u4"),
    ("thread", std::mem::offset_of!(Sample, thread), "<u4"),
    ("slot_wait_ns", std::mem::offset_of!(Sample, slot_wait_ns), "<u4"),
];
/// Bytes per row.
pub const SAMPLE_BYTES: usize = std::mem::size_of::<Sample>();
const _: () = assert!(SAMPLE_BYTES == 64, "one kept request is 64 bytes, without padding");

/// Rows as [`SampleStore::to_le_bytes`] writes them ([`SAMPLE_FIELDS`]).
pub fn samples_to_le_bytes<'a>(samples: impl Iterator<Item = &'a Sample>) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        out.extend_from_slice(&s.intended_ns.to_le_bytes());
        out.extend_from_slice(&s.sent_ns.to_le_bytes());
        out.extend_from_slice(&s.tx_ns.to_le_bytes());
        out.extend_from_slice(&s.rx_user_ns.to_le_bytes());
        out.extend_from_slice(&s.latency_ns.to_le_bytes());
        out.extend_from_slice(&s.busy_from_ns.to_le_bytes());
        out.extend_from_slice(&s.flags.to_le_bytes());
        out.extend_from_slice(&s.request.to_le_bytes());
        out.extend_from_slice(&s.inflation_ns.to_le_bytes());
        out.extend_from_slice(&s.thread.to_le_bytes());
        out.extend_from_slice(&s.slot_wait_ns.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_fields_describe_the_rows_written() {
        // The fields tile the row in order, with no gap, each as wide as its type code says.
        let width = |code: &str| code[2..].parse::<usize>().unwrap();
        let mut end = 0;
        for (name, offset, code) in SAMPLE_FIELDS {
            assert_eq!(offset, end, "{name}");
            assert!(code.starts_with("<u"), "{name}: {code}");
            end += width(code);
        }
        assert_eq!(end, SAMPLE_BYTES);
        // Every field written where the table says, little-endian.
        let s = Sample {
            intended_ns: 0x0102_0304_0506_0708,
            sent_ns: 0x1112_1314_1516_1718,
            tx_ns: 0x2122_2324_2526_2728,
            rx_user_ns: 0x3132_3334_3536_3738,
            latency_ns: 0x4142_4344_4546_4748,
            busy_from_ns: 0x5152_5354_5556_5758,
            flags: 0x6162,
            request: 0x6364,
            inflation_ns: 0x7172_7374,
            thread: 0x8182_8384,
            slot_wait_ns: 0x9192_9394,
        };
        let row = samples_to_le_bytes([s, s].iter());
        assert_eq!(row.len(), 2 * SAMPLE_BYTES);
        for (name, offset, code) in SAMPLE_FIELDS {
            let mut le = [0u8; 8];
            le[..width(code)].copy_from_slice(&row[SAMPLE_BYTES + offset..SAMPLE_BYTES + offset + width(code)]);
            let want = match name {
                "intended_ns" => s.intended_ns,
                "sent_ns" => s.sent_ns,
                "tx_ns" => s.tx_ns,
                "rx_user_ns" => s.rx_user_ns,
                "latency_ns" => s.latency_ns,
                "busy_from_ns" => s.busy_from_ns,
                "flags" => s.flags as u64,
                "request" => s.request as u64,
                "inflation_ns" => s.inflation_ns as u64,
                "thread" => s.thread as u64,
                "slot_wait_ns" => s.slot_wait_ns as u64,
                other => panic!("field {other} not in Sample"),
            };
            assert_eq!(u64::from_le_bytes(le), want, "{name}");
        }
    }

    #[test]
    fn store_costs_64_bytes_a_sample() {
        let mut st = SampleStore::default();
        let n = 100 * CHUNK;
        for i in 0..n as u64 {
            st.push(Sample {
                intended_ns: i,
                sent_ns: i + 1,
                tx_ns: i + 2,
                rx_user_ns: i + 3,
                latency_ns: 2 * i,
                busy_from_ns: i / 2,
                flags: 5,
                request: 4,
                inflation_ns: 7,
                thread: 3,
                slot_wait_ns: 9,
            });
        }
        assert_eq!(st.len(), n);
        let per = st.allocated_bytes() as f64 / n as f64;
        assert!(per <= 65.0, "{per} bytes per sample");
        let bytes = st.to_le_bytes();
        assert_eq!(bytes.len(), n * 64);
        // Row 3: intended 3, sent 4, tx 5, rx_user 6, latency 6, busy_from 1; flags 5,
        // request 4, inflation 7, thread 3, slot wait 9.
        let row = &bytes[3 * 64..4 * 64];
        let u64_at = |o: usize| u64::from_le_bytes(row[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(row[o..o + 4].try_into().unwrap());
        let u16_at = |o: usize| u16::from_le_bytes(row[o..o + 2].try_into().unwrap());
        assert_eq!([u64_at(0), u64_at(8), u64_at(16), u64_at(24), u64_at(32), u64_at(40)], [3, 4, 5, 6, 6, 1]);
        assert_eq!([u16_at(48), u16_at(50)], [5, 4]);
        assert_eq!([u32_at(52), u32_at(56), u32_at(60)], [7, 3, 9]);
    }
}
