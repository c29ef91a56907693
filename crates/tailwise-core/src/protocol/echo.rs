//! STUB: to be written.

use super::{Codec, Parsed, Request};

pub struct Client;

impl Client {
    pub fn new(_size: usize) -> Client {
        Client
    }
}

impl Codec for Client {
    fn encode(&mut self, _req: &Request, _out: &mut Vec<u8>) {}
    fn parse(&mut self, _buf: &[u8]) -> Parsed {
        Parsed::Malformed { reason: "not implemented".into() }
    }
}
