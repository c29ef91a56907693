//! NIC hardware timestamps: when a packet left or reached the wire, on the NIC's own clock.
//!
//! How to Measure the Killer Microsecond (KBNets'17, Table 1) finds NIC stamps within a µs of
//! ground truth to p99.99, where software stamps carry the stack's own delays; Lancet (ATC'19, §5)
//! times TCP RPCs with them. Three things are needed, and each can be refused:
//!
//! 1. a driver that stamps *every* packet: `ETHTOOL_GET_TS_INFO` lists what it can do — transmit
//!    and receive stamps in hardware (`RAW_HARDWARE`), the `HWTSTAMP_TX_ON` transmit type, the
//!    `HWTSTAMP_FILTER_ALL` receive filter (NICs built for PTP alone stamp only PTP packets) — and
//!    the index of its PTP hardware clock (PHC). lo, veth and virtio list software stamps only
//!    (and answer `SIOCGHWTSTAMP` with EOPNOTSUPP, as this module's tests see on lo); a socket option
//!    alone is accepted silently and no stamp ever comes, so only the driver can tell;
//! 2. the interface switched to stamp (`SIOCSHWTSTAMP`, which needs CAP_NET_ADMIN) unless it
//!    already does; [`NicStamping`] puts the previous setting back when it is dropped;
//! 3. per socket, SO_TIMESTAMPING with `TX_HARDWARE | RX_HARDWARE | RAW_HARDWARE` (stamp/enable.rs): the
//!    stamp is then the third timespec of SCM_TIMESTAMPING, on the PHC's time scale.
//!
//! The PHC is not CLOCK_MONOTONIC: it runs free or follows PTP. Its offset to the host's clock is
//! measured as phc2sys does, by bracketed reads of `/dev/ptpN` through its dynamic POSIX clock id
//! ([`PhcClock::offset_ns`]); the engine re-reads it every 10 ms (a free-running crystal drifts by
//! at most ~100 ppm: ≤ 1 µs in that time).

use crate::error::{Kind, Problem};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
const SIOCGHWTSTAMP: libc::c_ulong = 0x89b1;
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GET_TS_INFO: u32 = 0x41;
/// linux/net_tstamp.h: `hwtstamp_config.tx_type` and `.rx_filter` values.
const HWTSTAMP_TX_ON: libc::c_int = 1;
const HWTSTAMP_FILTER_ALL: libc::c_int = 1;
/// linux/net_tstamp.h: what `ethtool_ts_info.so_timestamping` must hold for hardware stamps.
pub(crate) const SOF_TIMESTAMPING_TX_HARDWARE: u32 = 1 << 0;
pub(crate) const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
pub(crate) const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
const HARDWARE: u32 = SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;

/// linux/net_tstamp.h `struct hwtstamp_config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct HwtstampConfig {
    flags: libc::c_int,
    tx_type: libc::c_int,
    rx_filter: libc::c_int,
}

/// linux/ethtool.h `struct ethtool_ts_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

#[repr(C)]
struct Ifreq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// An ioctl on `ifname` whose `ifr_data` points at `data`.
fn if_ioctl<T>(ifname: &str, request: libc::c_ulong, data: &mut T) -> io::Result<()> {
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("interface name {ifname} is too long")));
    }
    let mut req = Ifreq { name: [0; libc::IFNAMSIZ], data: data as *mut T as *mut libc::c_void, _pad: [0; 16] };
    for (d, s) in req.name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
    // SAFETY: a valid ifreq whose data points at a live value of the type the request expects.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), request as _, &mut req as *mut Ifreq) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why an interface cannot stamp every packet in hardware for this process; `Display` is in words
/// for "IFACE cannot stamp in hardware: …".
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    #[error("its driver cannot stamp packets in hardware (EOPNOTSUPP)")]
    NotSupported,
    #[error("asking its driver what it stamps failed: {0}")]
    Ask(#[source] io::Error),
    #[error("its driver stamps packets in software only, not in hardware (ethtool -T shows what it can)")]
    SoftwareOnly,
    #[error("its driver cannot stamp packets it sends (no HWTSTAMP_TX_ON)")]
    NoTransmitStamps,
    #[error("its NIC stamps only some received packets, such as PTP's, not every one (no HWTSTAMP_FILTER_ALL)")]
    NotEveryPacket,
    #[error("it has no PTP hardware clock to read its stamps against")]
    NoClock,
    /// Not switched yet, and this process may not switch it (`ifname`: it could be switched first).
    #[error("switching it to stamp every packet needs CAP_NET_ADMIN")]
    NeedsNetAdmin { ifname: Option<String> },
    #[error("its driver refused to stamp every packet: {0}")]
    Refused(#[source] io::Error),
    #[error("its driver applied rx filter {0} instead of every packet")]
    Filter(libc::c_int),
    #[error("cannot read its clock {path}: {err}")]
    Clock { path: String, err: io::Error },
}

impl Problem for NicError {
    fn kind(&self) -> Kind {
        Kind::Host
    }

    fn remedy(&self) -> String {
        match self {
            NicError::NeedsNetAdmin { ifname: Some(i) } => {
                format!("run as root, or switch it first (hwstamp_ctl -i {i} -t 1 -r 1)")
            }
            NicError::NeedsNetAdmin { ifname: None } => "run as root".into(),
            _ => String::new(),
        }
    }
}

/// Whether the driver of `ifname` can stamp every packet in hardware against a clock tailwise can
/// read, and how it is set now: `(its setting, if the driver says, the PTP clock's index)`, else
/// why not. The capabilities come first (`ETHTOOL_GET_TS_INFO`): drivers before Linux 6.6 may
/// not answer `SIOCGHWTSTAMP` though they take `SIOCSHWTSTAMP`.
fn capabilities(ifname: &str) -> Result<(Option<HwtstampConfig>, u32), NicError> {
    let mut info = EthtoolTsInfo { cmd: ETHTOOL_GET_TS_INFO, ..Default::default() };
    if let Err(e) = if_ioctl(ifname, SIOCETHTOOL, &mut info) {
        return Err(if e.raw_os_error() == Some(libc::EOPNOTSUPP) { NicError::NotSupported } else { NicError::Ask(e) });
    }
    let phc = judge(&info)?;
    let mut cfg = HwtstampConfig::default();
    Ok((if_ioctl(ifname, SIOCGHWTSTAMP, &mut cfg).ok().map(|()| cfg), phc))
}

/// The index of the PTP hardware clock a driver described by `info` stamps every packet against,
/// or why it cannot.
fn judge(info: &EthtoolTsInfo) -> Result<u32, NicError> {
    if info.so_timestamping & HARDWARE != HARDWARE {
        return Err(NicError::SoftwareOnly);
    }
    if info.tx_types & (1 << HWTSTAMP_TX_ON) == 0 {
        return Err(NicError::NoTransmitStamps);
    }
    if info.rx_filters & (1 << HWTSTAMP_FILTER_ALL) == 0 {
        return Err(NicError::NotEveryPacket);
    }
    u32::try_from(info.phc_index).map_err(|_| NicError::NoClock)
}

/// Can `ifname` stamp every packet in hardware, and may this process switch it to (or find it
/// already switched) and read its clock? `Err` says why not, in words for "IFACE cannot stamp in
/// hardware: …".
pub fn hardware_timestamping(ifname: &str) -> Result<(), NicError> {
    let (cfg, phc) = capabilities(ifname)?;
    if !cfg.is_some_and(|c| stamps_everything(&c)) && !has_net_admin() {
        return Err(NicError::NeedsNetAdmin { ifname: Some(ifname.into()) });
    }
    PhcClock::open(phc).map(|_| ())
}

/// Whether this process holds CAP_NET_ADMIN (bit 12 of its effective capabilities), which
/// SIOCSHWTSTAMP needs. Read, not tried: a trial setting would touch the NIC.
fn has_net_admin() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

fn stamps_everything(cfg: &HwtstampConfig) -> bool {
    cfg.tx_type == HWTSTAMP_TX_ON && cfg.rx_filter == HWTSTAMP_FILTER_ALL
}

/// `ifname` stamping every packet for as long as this lives, with its clock open; the previous
/// setting comes back on drop.
pub struct NicStamping {
    ifname: String,
    previous: Option<HwtstampConfig>,
    pub phc: PhcClock,
}

impl NicStamping {
    pub fn enable(ifname: &str) -> Result<NicStamping, NicError> {
        let (cfg, phc_index) = capabilities(ifname)?;
        let phc = PhcClock::open(phc_index)?;
        let mut previous = None;
        if !cfg.is_some_and(|c| stamps_everything(&c)) {
            // A driver that does not say how it is set is put back to stamping nothing.
            let cfg = cfg.unwrap_or_default();
            let mut want = HwtstampConfig { flags: 0, tx_type: HWTSTAMP_TX_ON, rx_filter: HWTSTAMP_FILTER_ALL };
            if let Err(e) = if_ioctl(ifname, SIOCSHWTSTAMP, &mut want) {
                return Err(if e.raw_os_error() == Some(libc::EPERM) {
                    NicError::NeedsNetAdmin { ifname: None }
                } else {
                    NicError::Refused(e)
                });
            }
            // The driver writes back what it applied; a narrower filter would leave replies unstamped.
            if !stamps_everything(&want) {
                let _ = if_ioctl(ifname, SIOCSHWTSTAMP, &mut { cfg });
                return Err(NicError::Filter(want.rx_filter));
            }
            previous = Some(cfg);
        }
        Ok(NicStamping { ifname: ifname.to_string(), previous, phc })
    }
}

impl Drop for NicStamping {
    fn drop(&mut self) {
        if let Some(mut cfg) = self.previous {
            let _ = if_ioctl(&self.ifname, SIOCSHWTSTAMP, &mut cfg);
        }
    }
}

/// A PTP hardware clock, read through its character device's dynamic POSIX clock id.
pub struct PhcClock {
    file: File,
}

impl PhcClock {
    pub fn open(index: u32) -> Result<PhcClock, NicError> {
        let path = format!("/dev/ptp{index}");
        let file = File::open(&path).map_err(|err| NicError::Clock { path: path.clone(), err })?;
        let c = PhcClock { file };
        c.read().map_err(|err| NicError::Clock { path, err })?;
        Ok(c)
    }

    /// include/linux/posix-timers.h `FD_TO_CLOCKID`.
    fn clock_id(fd: RawFd) -> libc::clockid_t {
        ((!(fd as libc::clockid_t)) << 3) | 3
    }

    fn read(&self) -> io::Result<u64> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid timespec pointer; the clock id names a descriptor this value keeps open.
        if unsafe { libc::clock_gettime(Self::clock_id(self.file.as_raw_fd()), &mut ts) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// PHC − CLOCK_MONOTONIC in ns, from the tightest of three bracketed reads (a PHC read crosses
    /// the PCIe bus: ~1 µs, so the error is ~0.5 µs). 0 if the clock cannot be read (it could when
    /// opened; a device that went away leaves its stamps unconverted rather than stopping the run).
    pub fn offset_ns(&self) -> i64 {
        crate::time::clock::offset_to_monotonic_ns(|| self.read().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(so: u32, tx: u32, rx: u32, phc: i32) -> EthtoolTsInfo {
        EthtoolTsInfo { cmd: 0, so_timestamping: so, phc_index: phc, tx_types: tx, rx_filters: rx, ..Default::default() }
    }

    #[test]
    fn only_a_driver_that_stamps_every_packet_against_a_clock_will_do() {
        let all = (1 << HWTSTAMP_TX_ON) | 1;
        assert_eq!(judge(&info(HARDWARE | 0x1a, all, 1 << HWTSTAMP_FILTER_ALL, 2)).ok(), Some(2));
        // Software stamps only (what lo, veth and virtio report).
        assert!(judge(&info(0x1a, 0, 0, -1)).unwrap_err().to_string().contains("software only"));
        // A PTP-only NIC: its receive filters stop at PTP events (HWTSTAMP_FILTER_PTP_V2_EVENT = 12).
        assert!(judge(&info(HARDWARE, all, 1 << 12, 0)).unwrap_err().to_string().contains("not every one"));
        assert!(judge(&info(HARDWARE, 1, 1 << HWTSTAMP_FILTER_ALL, 0)).unwrap_err().to_string().contains("HWTSTAMP_TX_ON"));
        assert!(judge(&info(HARDWARE, all, 1 << HWTSTAMP_FILTER_ALL, -1)).unwrap_err().to_string().contains("no PTP hardware clock"));
    }

    #[test]
    fn loopback_cannot_stamp_in_hardware_and_says_why() {
        let e = hardware_timestamping("lo").unwrap_err().to_string();
        assert!(e.contains("EOPNOTSUPP") || e.contains("software only"), "{e}");
        assert!(NicStamping::enable("lo").is_err());
        assert!(hardware_timestamping("no-such-interface-x").is_err());
        assert!(hardware_timestamping("a-name-longer-than-ifnamsiz").unwrap_err().to_string().contains("too long"));
    }

    #[test]
    fn net_admin_is_read_from_the_effective_capabilities() {
        // Root holds every capability (unless dropped: the calibrate test's setpriv); a user none.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(!has_net_admin());
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap();
        assert_eq!(has_net_admin(), u64::from_str_radix(eff.trim(), 16).unwrap() & (1 << 12) != 0);
    }

    #[test]
    fn a_dynamic_clock_id_is_the_kernels() {
        // FD_TO_CLOCKID(3) = (~3 << 3) | 3 = -29.
        assert_eq!(PhcClock::clock_id(3), -29);
    }
}
