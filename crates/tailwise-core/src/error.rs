//! Problems the data plane reports to its caller, typed.
//!
//! Every error a public function of this crate returns is an enum (`thiserror`) whose `Display`
//! is the problem in one line and which implements [`Problem`]: the remedy, and the kind of
//! problem it is. The PyO3 layer raises it as the matching `tailwise.errors` class carrying both,
//! so no caller, in Rust or Python, ever branches on a message's text.

/// Which kind of problem: it picks the Python exception (`tailwise.errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bad input: a flag, a distribution, a workload (`InputError`).
    Input,
    /// The target cannot be reached or stopped behaving (`TargetError`).
    Target,
    /// The host cannot do what was asked: a clock, a NIC, a permission (`HostError`).
    Host,
}

/// A problem with its remedy. `Display` says what went wrong; `remedy` what to do about it (empty
/// when there is nothing the user can do).
pub trait Problem: std::error::Error {
    fn kind(&self) -> Kind;
    fn remedy(&self) -> String;
}
