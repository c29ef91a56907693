//! What a connection says before any request: Redis `AUTH [user] password` and `SELECT db`
//! (<https://redis.io/docs/latest/commands/auth/>, <https://redis.io/docs/latest/commands/select/>),
//! each only when the target gives it. The commands are encoded once ([`Setup::of`]); the
//! connections an engine starts with exchange them blocking, before the schedule ([`exchange`]:
//! over any `Read + Write` stream, so that a TLS stream can too); a reconnect writes them first
//! on its new connection (`Conn::send_setup`) and the loop checks their replies as they come
//! ([`Setup::check`]), never counting them as requests. A refusal names the command and says the
//! server's words — never the password.

use crate::protocol::{redis, Codec, Outcome, Parsed, Protocol};
use std::io::{self, Read, Write};

/// A connection's setup commands, encoded once, and which each reply answers. (Its bytes hold
/// the password: `Debug` names the commands only.)
#[derive(Clone)]
pub struct Setup {
    bytes: Vec<u8>,
    /// The command each reply answers, in order.
    commands: Vec<&'static str>,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup").field("commands", &self.commands).finish_non_exhaustive()
    }
}

/// A RESP array of bulk strings (RESP2: "Sending commands to a Redis server").
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Setup {
    /// The protocol's setup, None when it has nothing to say first.
    pub fn of(protocol: &Protocol) -> Option<Setup> {
        let Protocol::Redis { auth, db } = protocol else { return None };
        let (mut bytes, mut commands) = (Vec::new(), Vec::new());
        if let Some(a) = auth {
            match &a.user {
                Some(user) => command(&mut bytes, &[b"AUTH", user.as_bytes(), a.password.as_bytes()]),
                None => command(&mut bytes, &[b"AUTH", a.password.as_bytes()]),
            }
            commands.push("AUTH");
        }
        if let Some(db) = db {
            command(&mut bytes, &[b"SELECT", db.to_string().as_bytes()]);
            commands.push("SELECT");
        }
        (!commands.is_empty()).then_some(Setup { bytes, commands })
    }

    /// What to write first on a connection.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many replies to read before the first request's.
    pub fn replies(&self) -> usize {
        self.commands.len()
    }

    /// The `k`-th setup reply: any reply but an error is the command's success.
    pub fn check(&self, k: usize, outcome: Outcome) -> Result<(), Refused> {
        match outcome {
            Outcome::Error(said) => Err(Refused { command: self.commands[k], said }),
            _ => Ok(()),
        }
    }
}

/// The server refused a setup command, in its own words (`WRONGPASS …`, `NOAUTH …`, `ERR DB index
/// is out of range`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("redis refused {command}: {said}")]
pub struct Refused {
    pub command: &'static str,
    pub said: String,
}

impl Refused {
    pub fn remedy(&self) -> String {
        if self.command == "SELECT" && !self.said.starts_with("NOAUTH") {
            return "give a database the server has: /0 to /15 with redis-server's default `databases 16`".into();
        }
        if self.said.starts_with("NOAUTH") {
            return "the server requires a password: give it (redis://:PASSWORD@HOST:PORT, --redis-password-file or \
                    TAILWISE_REDIS_PASSWORD)"
                .into();
        }
        "check the user and the password (in the URL, --redis-password-file or TAILWISE_REDIS_PASSWORD, in that \
         order) against the server's requirepass or ACL"
            .into()
    }
}

/// Why a blocking setup exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Refused(Refused),
    #[error("no reply to {command}: {err}")]
    Io { command: &'static str, err: io::Error },
    #[error("the server closed the connection before replying to {0}")]
    Closed(&'static str),
    #[error("malformed reply to {command}: {reason}")]
    Malformed { command: &'static str, reason: String },
}

impl SetupError {
    pub fn remedy(&self) -> String {
        match self {
            SetupError::Refused(r) => r.remedy(),
            SetupError::Io { err, .. } if matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                "check that the target is a Redis server, or give a longer --connect-timeout".into()
            }
            _ => "check that the target is a Redis server".into(),
        }
    }
}

/// Write the setup commands on a blocking `stream` and read their replies (the stream's own
/// timeouts bound the wait): Ok once every command succeeded. Nothing else is read: no request
/// has been sent yet.
pub fn exchange<S: Read + Write>(stream: &mut S, setup: &Setup) -> Result<(), SetupError> {
    let first = setup.commands[0];
    stream.write_all(&setup.bytes).map_err(|err| SetupError::Io { command: first, err })?;
    stream.flush().map_err(|err| SetupError::Io { command: first, err })?;
    let mut codec = redis::Client::new();
    let (mut buf, mut chunk, mut pos) = (Vec::new(), [0u8; 4096], 0);
    for (k, &cmd) in setup.commands.iter().enumerate() {
        loop {
            match codec.parse(&buf[pos..]) {
                Parsed::Reply { len, outcome, .. } => {
                    pos += len;
                    setup.check(k, outcome).map_err(SetupError::Refused)?;
                    break;
                }
                Parsed::Malformed { reason } => return Err(SetupError::Malformed { command: cmd, reason }),
                Parsed::Incomplete => match stream.read(&mut chunk) {
                    Ok(0) => return Err(SetupError::Closed(cmd)),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(err) => return Err(SetupError::Io { command: cmd, err }),
                },
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RedisAuth;

    fn redis(user: Option<&str>, password: Option<&str>, db: Option<u64>) -> Protocol {
        let auth = password.map(|p| RedisAuth { user: user.map(Into::into), password: p.into() });
        Protocol::Redis { auth, db }
    }

    #[test]
    fn the_commands_are_resp_arrays_of_what_was_given() {
        assert!(Setup::of(&redis(None, None, None)).is_none());
        assert!(Setup::of(&Protocol::MemcachedAscii).is_none());
        let s = Setup::of(&redis(None, Some("pw"), None)).unwrap();
        assert_eq!((s.bytes(), s.replies()), (&b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..], 1));
        let s = Setup::of(&redis(Some("app"), Some("p w\r\n"), Some(3))).unwrap();
        let want = b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$5\r\np w\r\n\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n";
        assert_eq!((s.bytes(), s.replies()), (&want[..], 2));
        let s = Setup::of(&redis(None, None, Some(12))).unwrap();
        assert_eq!(s.bytes(), b"*2\r\n$6\r\nSELECT\r\n$2\r\n12\r\n");
    }

    /// A stream that replies with `replies` and records what was written.
    struct Fake {
        written: Vec<u8>,
        replies: io::Cursor<Vec<u8>>,
    }

    impl Read for Fake {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            // One byte at a time: replies split anywhere.
            let n = buf.len().min(1);
            self.replies.read(&mut buf[..n])
        }
    }

    impl Write for Fake {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn run(p: Protocol, replies: &[u8]) -> (Result<(), SetupError>, Vec<u8>) {
        let s = Setup::of(&p).unwrap();
        let mut f = Fake { written: Vec::new(), replies: io::Cursor::new(replies.to_vec()) };
        (exchange(&mut f, &s), f.written)
    }

    #[test]
    fn an_exchange_succeeds_on_ok_and_names_the_refused_command_without_the_password() {
        let (r, written) = run(redis(Some("u"), Some("secret"), Some(3)), b"+OK\r\n+OK\r\n");
        assert!(r.is_ok() && written.ends_with(b"SELECT\r\n$1\r\n3\r\n"));
        let (r, _) = run(redis(None, Some("secret"), Some(1)), b"-WRONGPASS invalid username-password pair\r\n");
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), "redis refused AUTH: WRONGPASS invalid username-password pair");
        assert!(e.remedy().contains("--redis-password-file") && !e.to_string().contains("secret"));
        let (r, _) = run(redis(None, Some("secret"), Some(99)), b"+OK\r\n-ERR DB index is out of range\r\n");
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), "redis refused SELECT: ERR DB index is out of range");
        assert!(e.remedy().contains("/0 to /15"), "{}", e.remedy());
        let (r, _) = run(redis(None, None, Some(1)), b"-NOAUTH Authentication required.\r\n");
        assert!(r.unwrap_err().remedy().contains("requires a password"));
        let (r, _) = run(redis(None, Some("x"), None), b"+O");
        assert_eq!(r.unwrap_err().to_string(), "the server closed the connection before replying to AUTH");
        let (r, _) = run(redis(None, Some("x"), None), b"HTTP/1.1 400\r\n");
        assert!(matches!(r, Err(SetupError::Malformed { command: "AUTH", .. })));
    }

    #[test]
    fn the_password_is_never_in_a_debug_form() {
        let p = redis(Some("app"), Some("hunter2"), Some(2));
        let shown = format!("{p:?} {:?}", Setup::of(&p));
        assert!(!shown.contains("hunter2") && shown.contains("***"), "{shown}");
    }
}
