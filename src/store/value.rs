use bytes::Bytes;
use indexmap::IndexMap;

/// Hash fields keep insertion order, as Redis's listpack encoding shows them for small hashes.
pub type HashValue = IndexMap<Bytes, Bytes, ahash::RandomState>;

/// A stored value. Keys and members are owned copies (never slices of a network buffer, which
/// would keep a whole read buffer alive).
#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(HashValue),
}

impl Value {
    /// The name TYPE prints.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
        }
    }

    /// Rough payload size, for memory-related decisions that need no exact figure.
    pub fn approx_size(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Hash(h) => h.iter().map(|(k, v)| k.len() + v.len() + 48).sum(),
        }
    }
}

/// Copies a network argument into its own allocation before it is stored.
pub fn own(b: &Bytes) -> Bytes {
    Bytes::copy_from_slice(b)
}
