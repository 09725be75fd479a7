//! Set values: an insertion-ordered hash set (O(1) membership and random access by index for
//! SPOP, SRANDMEMBER and SSCAN) with what the set has held at its largest. Redis converts an
//! intset to a hash table once a member is not an integer or there are more members than
//! `set-max-intset-entries`, and never back; OBJECT ENCODING and DUMP judge a set by this
//! history (store/encoding.rs).

use bytes::Bytes;

type Inner = indexmap::IndexSet<Bytes, ahash::RandomState>;

#[derive(Debug, Clone, Default)]
pub struct SetValue {
    set: Inner,
    peak_len: u32,
    held_non_integer: bool,
}

impl SetValue {
    /// Adds a member; true if it was new. Shadows the inner set's `insert` (and `extend`
    /// below shadows its `extend`), so every addition is recorded.
    pub fn insert(&mut self, member: Bytes) -> bool {
        let int = self.held_non_integer || crate::protocol::number::parse_i64(&member).is_some();
        if !self.set.insert(member) {
            return false;
        }
        self.held_non_integer |= !int;
        self.peak_len = self
            .peak_len
            .max(self.set.len().min(u32::MAX as usize) as u32);
        true
    }

    /// (most members held, whether a member was ever not an integer).
    pub fn history(&self) -> (u32, bool) {
        (self.peak_len, self.held_non_integer)
    }
}

impl std::ops::Deref for SetValue {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.set
    }
}

impl std::ops::DerefMut for SetValue {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.set
    }
}

impl IntoIterator for SetValue {
    type Item = Bytes;
    type IntoIter = indexmap::set::IntoIter<Bytes>;
    fn into_iter(self) -> Self::IntoIter {
        self.set.into_iter()
    }
}

impl Extend<Bytes> for SetValue {
    fn extend<I: IntoIterator<Item = Bytes>>(&mut self, iter: I) {
        for m in iter {
            self.insert(m);
        }
    }
}

impl FromIterator<Bytes> for SetValue {
    fn from_iter<I: IntoIterator<Item = Bytes>>(iter: I) -> Self {
        let mut s = SetValue::default();
        for m in iter {
            s.insert(m);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_outlives_removals() {
        let mut s: SetValue = ["1", "2"].map(Bytes::from).into_iter().collect();
        assert_eq!(s.history(), (2, false));
        s.extend([Bytes::from("3")]);
        assert!(s.swap_remove(&b"3"[..]));
        assert_eq!(s.history(), (3, false));
        assert!(s.insert(Bytes::from("x")));
        assert!(!s.insert(Bytes::from("x")));
        assert!(s.swap_remove(&b"x"[..]));
        assert_eq!(s.len(), 2);
        assert_eq!(s.history(), (3, true));
    }
}
