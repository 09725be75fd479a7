use bytes::Bytes;

/// A reply, independent of the protocol version: the encoder decides how each variant looks in
/// RESP2 (maps flatten to arrays, null becomes `$-1` or `*-1`, doubles become bulk strings).
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Simple(Bytes),
    /// The whole error line without the leading `-`, e.g. `ERR syntax error`.
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// A missing bulk string: `$-1` in RESP2.
    Null,
    /// A missing array: `*-1` in RESP2.
    NullArray,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Double(f64),
    /// A double with the text Redis prints for it when that is not `%.17g` (GEOPOS's
    /// coordinates: `addReplyHumanLongDouble`): `,text` in RESP3, a bulk string in RESP2.
    DoubleText(f64, Bytes),
    Boolean(bool),
    /// A big number's digits (a Lua script's `{big_number = …}`): `(text` in RESP3, a bulk
    /// string in RESP2 (Redis's addReplyBigNum).
    BigNumber(Bytes),
    /// Text with a format hint (`=` in RESP3, a bulk string in RESP2); INFO uses it.
    Verbatim(Bytes),
    Push(Vec<Frame>),
    /// RESP3 attributes (`|n` then pairs) ahead of the reply they annotate; RESP2 clients get
    /// the reply alone, as Redis's addReplyAttributeLen writes nothing for them.
    Attribute(Vec<(Frame, Frame)>, Box<Frame>),
}

impl Frame {
    pub const fn ok() -> Frame {
        Frame::Simple(Bytes::from_static(b"OK"))
    }

    pub const fn simple(s: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(s.as_bytes()))
    }

    pub fn bulk_from(s: impl Into<Vec<u8>>) -> Frame {
        Frame::Bulk(Bytes::from(s.into()))
    }

    pub const fn bulk_static(s: &'static str) -> Frame {
        Frame::Bulk(Bytes::from_static(s.as_bytes()))
    }

    pub fn opt_bulk(v: Option<Bytes>) -> Frame {
        match v {
            Some(b) => Frame::Bulk(b),
            None => Frame::Null,
        }
    }

    /// A HELP reply: one status line per entry, as Redis's `addReplyHelp`.
    pub fn help(lines: &[&'static str]) -> Frame {
        Frame::Array(lines.iter().map(|l| Frame::simple(l)).collect())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }
}
