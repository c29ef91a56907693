//! The target's reachability, as one thread sees it: the last reply, the failures the target
//! caused since (the first and the latest), whether it closed a connection meanwhile — and the
//! verdicts that end a run: unreachable for too long, or no reply at all.

use super::problem::{Abort, Failure, NoReply};

pub(crate) struct Reach {
    /// Replies of any kind (answers and error replies), and when the latest came.
    pub replies: u64,
    last_reply: u64,
    first: Option<Failure>,
    last: Option<Failure>,
    closed: bool,
}

impl Reach {
    /// From the schedule's start: a target that never replies is unreachable from there.
    pub fn new(start_ns: u64) -> Reach {
        Reach { replies: 0, last_reply: start_ns, first: None, last: None, closed: false }
    }

    /// A reply at `t`: the target is there.
    #[inline]
    pub fn replied(&mut self, t: u64) {
        self.replies += 1;
        self.last_reply = t;
        self.first = None;
        self.closed = false;
    }

    /// A failure the target caused (a refusal, a close before any reply).
    pub fn failure(&mut self, f: Failure) {
        if self.first.is_none() {
            self.first = Some(f.clone());
        }
        self.last = Some(f);
    }

    /// The target closed a connection.
    pub fn closed(&mut self) {
        self.closed = true;
    }

    /// At `now`: the run ends if the target has failed since its last reply, which is longer ago
    /// than `unreachable_ns`.
    pub fn verdict(&self, now: u64, unreachable_ns: u64) -> Option<Abort> {
        if self.first.is_none() || now - self.last_reply <= unreachable_ns {
            return None;
        }
        let secs = (now - self.last_reply) as f64 / 1e9;
        let replies = self.replies;
        let last = self.last.clone()?;
        Some(if last.closed_before_reply() {
            Abort::ClosedEvery { secs, replies }
        } else {
            Abort::Unreachable { last, closed: self.closed, secs, replies }
        })
    }

    /// At the end: `sent` requests and no reply to any, why (the first failure since, else the
    /// first error reason); None if there was a reply.
    pub fn none_answered(&self, sent: u64, first_reason: Option<&str>) -> Option<Abort> {
        if self.replies > 0 || sent == 0 {
            return None;
        }
        let why = match (&self.first, first_reason) {
            (Some(f), _) => NoReply::Failure(f.clone()),
            (None, Some(r)) => NoReply::Reason(r.to_string()),
            (None, None) => NoReply::Silent,
        };
        Some(Abort::NoneAnswered { sent, why })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::problem::Lost;
    use crate::error::Problem;
    use std::net::SocketAddr;

    const S: u64 = 1_000_000_000;

    fn refused() -> Failure {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        Failure::Reconnect { addr, err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into() }
    }

    #[test]
    fn a_target_is_unreachable_only_after_a_failure_and_the_time_without_replies() {
        let mut r = Reach::new(0);
        assert!(r.verdict(100 * S, 2 * S).is_none(), "a slow target is not an unreachable one");
        r.failure(refused());
        assert!(r.verdict(2 * S, 2 * S).is_none());
        let a = r.verdict(3 * S, 2 * S).unwrap();
        assert!(a.to_string().starts_with("the target stays unreachable (cannot reconnect to 127.0.0.1:9: "), "{a}");
        assert!(a.to_string().ends_with(") for 3.0 s (0 replies received before)"), "{a}");
        // A reply forgives everything before it.
        r.replied(3 * S);
        assert!(r.verdict(10 * S, 2 * S).is_none());
        assert_eq!(r.replies, 1);
    }

    #[test]
    fn the_verdict_names_what_the_target_did_last() {
        let mut r = Reach::new(0);
        r.closed();
        r.failure(Failure::LostBeforeReply(Lost::Closed));
        let a = r.verdict(3 * S, 2 * S).unwrap();
        assert_eq!(a.to_string(), "the target closed every connection before replying for 3.0 s (0 replies received before)");
        r.failure(refused());
        let a = r.verdict(3 * S, 2 * S).unwrap();
        assert!(a.to_string().starts_with("the target closed the connection and stays unreachable (cannot reconnect"), "{a}");
        assert_eq!(a.remedy(), "");
    }

    #[test]
    fn no_reply_at_all_names_the_first_failure_else_the_first_reason() {
        let mut r = Reach::new(0);
        assert!(r.none_answered(0, None).is_none(), "nothing sent: nothing to say");
        let a = r.none_answered(5, Some("no reply within 100 ms")).unwrap();
        assert_eq!(a.to_string(), "the target answered none of the 5 requests sent (no reply within 100 ms)");
        assert!(r.none_answered(5, None).unwrap().to_string().ends_with("(no reply)"));
        r.failure(refused());
        r.failure(Failure::LostBeforeReply(Lost::Reset));
        let a = r.none_answered(5, Some("other")).unwrap().to_string();
        assert!(a.contains("sent (cannot reconnect to 127.0.0.1:9: "), "{a}");
        r.replied(1);
        assert!(r.none_answered(5, None).is_none());
    }
}
