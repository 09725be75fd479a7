//! The network facade's wire format. Knows nothing of the server: the decoder turns bytes into
//! argument vectors, the encoder turns reply frames into RESP2 or RESP3 bytes.

pub mod decode;
pub mod encode;
pub mod frame;
pub mod number;
pub mod pool;

pub use decode::{DecodeLimits, Decoded, Decoder, ProtocolError};
pub use frame::Frame;
