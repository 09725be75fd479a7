use bytes::Bytes;

pub use super::hash::HashValue;

/// Set members: O(1) membership plus O(1) random access by index (SPOP, SRANDMEMBER, SSCAN).
pub type SetValue = indexmap::IndexSet<Bytes, ahash::RandomState>;

/// A stored value. Keys and members are owned copies (never slices of a network buffer, which
/// would keep a whole read buffer alive).
#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(HashValue),
    List(std::collections::VecDeque<Bytes>),
    Set(Box<SetValue>),
    ZSet(Box<super::zset::ZSet>),
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

    /// The name TYPE prints.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
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
        }
    }
}

/// Copies a network argument into its own allocation before it is stored.
pub fn own(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn entries_stay_small() {
        // One map entry per key: keep the value enum at a Bytes plus its tag.
        assert!(
            std::mem::size_of::<super::Value>() <= 40,
            "{}",
            std::mem::size_of::<super::Value>()
        );
    }
}
