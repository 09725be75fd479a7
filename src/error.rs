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

    /// The error code (first word), as INFO errorstats reports it.
    pub fn code(&self) -> String {
        let text = self.to_string();
        text.split(' ').next().unwrap_or("ERR").to_string()
    }
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// Redis truncates with `%.128s` and turns CR/LF into spaces in error replies.
fn clip(b: &[u8], max: usize) -> String {
    let s = lossy(&b[..b.len().min(max)]).into_owned();
    s.replace(['\r', '\n'], " ")
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::UnknownCommand { name, args } => {
                write!(
                    f,
                    "ERR unknown command '{}', with args beginning with: ",
                    clip(name, 128)
                )?;
                let mut used = 0usize;
                for a in args {
                    if used >= 128 {
                        break;
                    }
                    let s = clip(a, 128 - used);
                    used += s.len() + 3;
                    write!(f, "'{s}' ")?;
                }
                Ok(())
            }
            CmdError::UnknownSubcommand(sub, cmd) => {
                write!(
                    f,
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    clip(sub, 128),
                    cmd
                )
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
