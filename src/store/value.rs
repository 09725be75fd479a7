use bytes::Bytes;

pub use super::hash::HashValue;

/// Set members: O(1) membership plus O(1) random access by index (SPOP, SRANDMEMBER, SSCAN).
pub use super::set::SetValue;

/// A stored value. Keys and members are owned copies (never slices of a network buffer, which
/// would keep a whole read buffer alive).
#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(HashValue),
    List(std::collections::VecDeque<Bytes>),
    Set(Box<SetValue>),
    ZSet(Box<super::zset::ZSet>),
    Stream(Box<super::stream::Stream>),
}

impl Value {
    /// An empty list, set, sorted set or hash: Redis never keeps one, so the key is deleted.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // An empty stream is kept (XADD MAXLEN 0, XDEL of the last entry, MKSTREAM).
            Value::Stream(_) => false,
        }
    }

    pub fn as_list_mut(&mut self) -> Option<&mut std::collections::VecDeque<Bytes>> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_set_mut(&mut self) -> Option<&mut SetValue> {
        match self {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_zset_mut(&mut self) -> Option<&mut super::zset::ZSet> {
        match self {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }

    pub fn as_stream_mut(&mut self) -> Option<&mut super::stream::Stream> {
        match self {
            Value::Stream(s) => Some(s),
            _ => None,
        }
    }

    /// The name TYPE prints.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    /// The value's own bytes, for a prefetch: a string's bytes, a small hash's packed fields;
    /// empty for the rest (their first line is a header, not what is read).
    #[inline]
    pub fn own_bytes(&self) -> &[u8] {
        match self {
            Value::Str(b) => b,
            Value::Hash(h) => h.packed_bytes(),
            _ => &[],
        }
    }

    /// Rough payload size, for memory-related decisions that need no exact figure.
    pub fn approx_size(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Hash(h) => h.iter().map(|(k, v)| k.len() + v.len() + 48).sum(),
            Value::List(l) => l.iter().map(|v| v.len() + 16).sum(),
            Value::Set(s) => s.iter().map(|v| v.len() + 32).sum(),
            Value::ZSet(z) => z.iter_from(0).map(|(m, _)| 2 * m.len() + 64).sum(),
            Value::Stream(s) => s.approx_size(),
        }
    }
}

/// The text of integer `v` as a stored value. 0..=9999 are shared, as Redis shares the objects
/// of those integers (OBJ_SHARED_INTEGERS): each is a static slice of one buffer made on first
/// use, so a counter in that range is stored without an allocation and replaced without a
/// free; other values get a block of their own (`own`).
pub fn integer_text(v: i64) -> Bytes {
    const SHARED: usize = 10_000;
    static TEXTS: std::sync::OnceLock<(&'static [u8], Vec<u32>)> = std::sync::OnceLock::new();
    let Some(i) = usize::try_from(v).ok().filter(|&i| i < SHARED) else {
        return own(itoa::Buffer::new().format(v).as_bytes());
    };
    let (all, starts) = TEXTS.get_or_init(|| {
        let mut all = Vec::new();
        let mut starts = Vec::with_capacity(SHARED + 1);
        for n in 0..SHARED {
            starts.push(all.len() as u32);
            all.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        starts.push(all.len() as u32);
        (Vec::leak(all), starts)
    });
    Bytes::from_static(&all[starts[i] as usize..starts[i + 1] as usize])
}

/// A small value's bytes and the reference count `Bytes` keeps for them, in one block:
/// `Bytes::from_owner` puts the count in front of the owner. `N + 1 + 8` is a size class.
struct Small<const N: usize> {
    bytes: [u8; N],
    len: u8,
}

impl<const N: usize> AsRef<[u8]> for Small<N> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

fn small<const N: usize>(b: &[u8]) -> Bytes {
    let mut bytes = [0; N];
    bytes[..b.len()].copy_from_slice(b);
    Bytes::from_owner(Small {
        bytes,
        len: b.len() as u8,
    })
}

/// Copies a network argument into its own allocation before it is stored.
///
/// Up to 55 bytes (lock tokens, counters, Redisson's `uuid:thread`) the count shares the
/// block and cache line with the bytes. A plain copy (`copy_from_slice`) is a Vec that `Bytes`
/// turns into a separate 24-byte shared header on its first clone, which every GET makes: one
/// more allocation for the first read of each key, and one more cache line on every read and
/// free after it.
pub fn own(b: impl AsRef<[u8]>) -> Bytes {
    let b = b.as_ref();
    match b.len() {
        0 => Bytes::new(),
        1..=23 => small::<23>(b),
        24..=39 => small::<39>(b),
        40..=55 => small::<55>(b),
        _ => Bytes::copy_from_slice(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_copies_are_equal_and_independent_at_every_size() {
        for len in [0, 1, 22, 23, 24, 36, 39, 40, 55, 56, 200] {
            let src: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
            let net = Bytes::from(src.clone());
            let stored = own(&net);
            drop(net);
            assert_eq!(&stored[..], &src[..], "len {len}");
            let read = stored.clone();
            drop(stored);
            assert_eq!(&read[..], &src[..], "len {len}");
            // A stored value can still become a growable buffer (APPEND, SETRANGE).
            let mut v = Vec::from(read);
            v.push(1);
            assert_eq!(v.len(), len + 1);
        }
        assert_eq!(std::mem::size_of::<Small<23>>() + 8, 32);
        assert_eq!(std::mem::size_of::<Small<39>>() + 8, 48);
        assert_eq!(std::mem::size_of::<Small<55>>() + 8, 64);
    }

    #[test]
    fn integer_texts_are_the_decimal_text_shared_or_not() {
        for v in [
            0,
            1,
            9,
            10,
            99,
            100,
            4321,
            9999,
            10_000,
            123_456,
            -1,
            -9999,
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(&integer_text(v)[..], v.to_string().as_bytes(), "{v}");
        }
        // The shared range lies in the one static buffer: the same bytes each time.
        assert_eq!(integer_text(42).as_ptr(), integer_text(42).as_ptr());
    }

    #[test]
    fn entries_stay_small() {
        // One map entry per key: keep the value enum at a Bytes plus its tag.
        assert!(
            std::mem::size_of::<Value>() <= 40,
            "{}",
            std::mem::size_of::<Value>()
        );
    }
}
