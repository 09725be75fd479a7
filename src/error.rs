//! Command errors. `Display` is the exact text Redis puts on the wire after the `-`; the first
//! word is the error code clients switch on (and what INFO errorstats counts).

use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CmdError {
    /// Full command name as Redis prints it (`get`, `client|setname`).
    WrongArity(String),
    UnknownCommand {
        name: Vec<u8>,
        args: Vec<Vec<u8>>,
    },
    /// (subcommand, COMMAND in upper case).
    UnknownSubcommand(Vec<u8>, &'static str),
    Syntax,
    NotInteger,
    NotFloat,
    /// Command name for `invalid expire time in '%s' command`.
    InvalidExpire(&'static str),
    WrongType,
    NoSuchKey,
    Overflow,
    /// Any other text, complete with its code (`ERR …`, `NOSCRIPT …`).
    Other(Cow<'static, str>),
}

pub type CmdResult<T = crate::protocol::Frame> = Result<T, CmdError>;

impl CmdError {
    pub fn err(text: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Other(text.into())
    }

    /// `ERR <text>` built at run time.
    pub fn erf(text: String) -> CmdError {
        CmdError::Other(Cow::Owned(format!("ERR {text}")))
    }

    /// Turns an `ERR …` text into Redis's `MISCONF …`.
    pub fn into_misconf(self) -> CmdError {
        let text = self.to_string();
        CmdError::Other(Cow::Owned(format!(
            "MISCONF {}",
            text.strip_prefix("ERR ").unwrap_or(&text)
        )))
    }
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// What C's `%.<max>s` prints of `b`: up to the first NUL, at most `max` bytes.
fn c_str(b: &[u8], max: usize) -> &[u8] {
    let b = &b[..b.len().min(max)];
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// `sdsmapchars(err, "\r\n", "  ", 2)`: user bytes must not end the error line.
fn no_newlines(mut b: Vec<u8>) -> Vec<u8> {
    for c in b.iter_mut() {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
    b
}

/// `unknown subcommand '%.128s'. Try %s HELP.` with the client's raw bytes.
fn unknown_subcommand(sub: &[u8], cmd_upper: &str) -> Vec<u8> {
    let mut out = b"ERR unknown subcommand '".to_vec();
    out.extend_from_slice(c_str(sub, 128));
    out.extend_from_slice(format!("'. Try {cmd_upper} HELP.").as_bytes());
    no_newlines(out)
}

impl CmdError {
    /// The exact error line (without `-` and CRLF). Unlike `Display`, which must be UTF-8, the
    /// client's own bytes are echoed raw, as Redis does: `unknown command '%.128s', with args
    /// beginning with: ` then `'%.*s' ` per argument while fewer than 128 bytes were written,
    /// each clipped to what is left of the 128 (and at a NUL, as C strings are).
    /// `ERR unknown command` for a request: copies no more of it than the reply can echo
    /// (128 bytes of name and of arguments, as Redis's processCommand prints them).
    pub fn unknown_command(argv: &[bytes::Bytes]) -> CmdError {
        let clip = |a: &bytes::Bytes| a[..a.len().min(129)].to_vec();
        CmdError::UnknownCommand {
            name: argv.first().map(clip).unwrap_or_default(),
            args: argv.iter().skip(1).take(129).map(clip).collect(),
        }
    }

    /// The code INFO errorstats counts this reply under: the first word of its text, found
    /// without formatting it.
    pub fn code(&self) -> &str {
        match self {
            CmdError::WrongType => "WRONGTYPE",
            CmdError::Other(text) => text.split(' ').next().unwrap_or_default(),
            _ => "ERR",
        }
    }

    /// The error reply, not counted (`dispatch::error_frame` counts it).
    pub fn to_frame(&self) -> crate::protocol::Frame {
        crate::protocol::Frame::Error(bytes::Bytes::from(self.to_bytes()))
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            CmdError::UnknownCommand { name, args } => {
                let mut out = b"ERR unknown command '".to_vec();
                out.extend_from_slice(c_str(name, 128));
                out.extend_from_slice(b"', with args beginning with: ");
                let mut list = Vec::new();
                for a in args {
                    if list.len() >= 128 {
                        break;
                    }
                    let room = 128 - list.len();
                    list.push(b'\'');
                    list.extend_from_slice(c_str(a, room));
                    list.extend_from_slice(b"' ");
                }
                out.extend_from_slice(&list);
                no_newlines(out)
            }
            CmdError::UnknownSubcommand(sub, cmd) => unknown_subcommand(sub, cmd),
            other => other.to_string().into_bytes(),
        }
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::UnknownCommand { .. } | CmdError::UnknownSubcommand(..) => {
                f.write_str(&lossy(&self.to_bytes()))
            }
            CmdError::Syntax => f.write_str("ERR syntax error"),
            CmdError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            CmdError::NotFloat => f.write_str("ERR value is not a valid float"),
            CmdError::InvalidExpire(cmd) => write!(f, "ERR invalid expire time in '{cmd}' command"),
            CmdError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CmdError::NoSuchKey => f.write_str("ERR no such key"),
            CmdError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            CmdError::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CmdError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(argv: &[&[u8]]) -> Vec<u8> {
        CmdError::UnknownCommand {
            name: argv[0].to_vec(),
            args: argv[1..].iter().map(|a| a.to_vec()).collect(),
        }
        .to_bytes()
    }

    /// INFO errorstats counts a reply under the first word of its text.
    #[test]
    fn code_is_the_first_word_of_the_reply() {
        let errors = [
            CmdError::WrongArity("get".into()),
            CmdError::UnknownCommand {
                name: b"nosuch".to_vec(),
                args: vec![b"a b".to_vec()],
            },
            CmdError::UnknownSubcommand(b"x".to_vec(), "CLIENT"),
            CmdError::Syntax,
            CmdError::NotInteger,
            CmdError::NotFloat,
            CmdError::InvalidExpire("set"),
            CmdError::WrongType,
            CmdError::NoSuchKey,
            CmdError::Overflow,
            CmdError::err("NOSCRIPT No matching script."),
            CmdError::err("BUSYKEY Target key name already exists."),
            CmdError::err("NOSPACE"),
            CmdError::err(""),
        ];
        for e in errors {
            let text = e.to_bytes();
            let first = text.split(|&b| b == b' ').next().unwrap_or_default();
            assert_eq!(e.code().as_bytes(), first, "{e}");
            assert_eq!(e.to_frame(), crate::protocol::Frame::Error(text.into()));
        }
    }

    /// Expected bytes are redis-server 7.0.15's replies (without `-` and CRLF).
    #[test]
    fn unknown_command_echoes_raw_bytes_like_redis() {
        let x = vec![b'x'; 200];
        let mut want = b"ERR unknown command '".to_vec();
        want.extend_from_slice(&x[..128]);
        want.extend_from_slice(b"', with args beginning with: '");
        want.extend_from_slice(&[b'a'; 50]);
        want.extend_from_slice(b"' '");
        want.extend_from_slice(&[b'b'; 50]);
        want.extend_from_slice(b"' '");
        want.extend_from_slice(&[b'c'; 22]);
        want.extend_from_slice(b"' ");
        assert_eq!(
            unknown(&[&x, &[b'a'; 50], &[b'b'; 50], &[b'c'; 50], b"d"]),
            want
        );

        let ff = vec![0xffu8; 130];
        let mut want = b"ERR unknown command 'n  x', with args beginning with: 'a' '".to_vec();
        want.extend_from_slice(&ff[..124]);
        want.extend_from_slice(b"' ");
        assert_eq!(unknown(&[b"n\r\nx", b"a\x00b", &ff]), want);

        assert_eq!(
            unknown(&[b"a\x00b"]),
            b"ERR unknown command 'a', with args beginning with: ".to_vec()
        );
        let crlf = b"\r\n".repeat(100);
        let mut want = b"ERR unknown command 'q', with args beginning with: '".to_vec();
        want.extend_from_slice(&[b' '; 128]);
        want.extend_from_slice(b"' ");
        assert_eq!(unknown(&[b"q", &crlf]), want);

        assert_eq!(
            CmdError::UnknownSubcommand(b"nosuch\xff\r\x00z".to_vec(), "SCRIPT").to_bytes(),
            b"ERR unknown subcommand 'nosuch\xff '. Try SCRIPT HELP.".to_vec()
        );
        // Display (logs, Lua) is the same text, lossily.
        assert_eq!(
            CmdError::UnknownCommand {
                name: b"f\xffo".to_vec(),
                args: vec![]
            }
            .to_string(),
            "ERR unknown command 'f\u{fffd}o', with args beginning with: "
        );
    }
}
