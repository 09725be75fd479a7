//! Sorted sets: members ordered by (score, member bytes), as Redis orders its skiplist.
//!
//! Structure: an order-statistic *treap* (a randomized binary search tree whose nodes also store
//! their subtree size) in a `Vec` arena, plus a hash index of node ids by member for O(1) ZSCORE.
//! The index holds 4-byte ids, not copies of members and scores, which keeps a member's overhead
//! near Redis's dict + skiplist. The
//! treap gives expected O(log n) insert, delete, rank (ZRANK) and select-by-rank (ZRANGE start),
//! which are the same expected bounds as Redis's skiplist with spans. We chose it over a skiplist
//! because it needs no backward pointers (shared mutable links) and lives in one `Vec` arena with
//! `u32` indices in safe Rust; a `BTreeSet` would have needed an O(n) walk for ranks.
//! Range replies walk the tree in order from a rank with an explicit stack: O(log n + m).

use bytes::Bytes;
use hashbrown::HashTable;
use std::cmp::Ordering;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Node {
    score: f64,
    member: Bytes,
    left: u32,
    right: u32,
    prio: u32,
    size: u32,
}

#[derive(Clone, Default)]
pub struct ZSet {
    /// Node ids, hashed by their member.
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    /// The most members and the longest member this set has held: Redis converts a listpack to
    /// a skiplist past its limits and never back (store/encoding.rs).
    peak_len: u32,
    longest: u32,
}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZSet").field("len", &self.len()).finish()
    }
}

/// Compares (score, member) pairs the way Redis's skiplist does: score first, then memcmp.
#[inline]
fn cmp_key(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    match s1.partial_cmp(&s2) {
        Some(Ordering::Equal) | None => m1.cmp(m2),
        Some(o) => o,
    }
}

impl ZSet {
    pub fn new() -> ZSet {
        ZSet {
            root: NIL,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hasher.hash_one(member);
        self.index
            .find(h, |&i| self.nodes[i as usize].member == member)
            .copied()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|i| self.nodes[i as usize].score)
    }

    #[inline]
    fn size(&self, n: u32) -> u32 {
        if n == NIL {
            0
        } else {
            self.nodes[n as usize].size
        }
    }

    #[inline]
    fn fix(&mut self, n: u32) {
        let (l, r) = {
            let node = &self.nodes[n as usize];
            (node.left, node.right)
        };
        self.nodes[n as usize].size = 1 + self.size(l) + self.size(r);
    }

    /// Splits `t` into (nodes before (score, member), nodes at or after it).
    fn split(&mut self, t: u32, score: f64, member: &[u8]) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let node = &self.nodes[t as usize];
        if cmp_key(node.score, &node.member, score, member) == Ordering::Less {
            let right = node.right;
            let (a, b) = self.split(right, score, member);
            self.nodes[t as usize].right = a;
            self.fix(t);
            (t, b)
        } else {
            let left = node.left;
            let (a, b) = self.split(left, score, member);
            self.nodes[t as usize].left = b;
            self.fix(t);
            (a, t)
        }
    }

    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.fix(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.fix(b);
            b
        }
    }

    fn alloc(&mut self, score: f64, member: Bytes) -> u32 {
        let node = Node {
            score,
            member,
            left: NIL,
            right: NIL,
            prio: fastrand::u32(..),
            size: 1,
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Links node `n` (a detached single node) into the tree at its place. A treap insert: walk
    /// down while the path's priorities are higher, counting `n` in each subtree on the way, and
    /// split only the small subtree where `n` becomes the root.
    fn attach(&mut self, n: u32) {
        let (score, member, prio) = {
            let node = &self.nodes[n as usize];
            (node.score, node.member.clone(), node.prio)
        };
        let mut parent = NIL;
        let mut went_left = false;
        let mut t = self.root;
        while t != NIL && self.nodes[t as usize].prio >= prio {
            let node = &mut self.nodes[t as usize];
            node.size += 1;
            parent = t;
            went_left = cmp_key(score, &member, node.score, &node.member) == Ordering::Less;
            t = if went_left { node.left } else { node.right };
        }
        let (a, b) = self.split(t, score, &member);
        let node = &mut self.nodes[n as usize];
        node.left = a;
        node.right = b;
        self.fix(n);
        if parent == NIL {
            self.root = n;
        } else if went_left {
            self.nodes[parent as usize].left = n;
        } else {
            self.nodes[parent as usize].right = n;
        }
    }

    /// Unlinks the node holding (score, member) from the tree; returns its id. Walks down to
    /// it (uncounting it on the way) and replaces it by the merge of its children.
    fn detach(&mut self, score: f64, member: &[u8]) -> u32 {
        // The caller knows the member is in the tree, so every node on the path loses one.
        let mut parent = NIL;
        let mut went_left = false;
        let mut t = self.root;
        while t != NIL {
            let node = &mut self.nodes[t as usize];
            match cmp_key(score, member, node.score, &node.member) {
                Ordering::Equal => break,
                o => {
                    node.size -= 1;
                    parent = t;
                    went_left = o == Ordering::Less;
                    t = if went_left { node.left } else { node.right };
                }
            }
        }
        if t == NIL {
            return NIL;
        }
        let (l, r) = {
            let node = &self.nodes[t as usize];
            (node.left, node.right)
        };
        let m = self.merge(l, r);
        if parent == NIL {
            self.root = m;
        } else if went_left {
            self.nodes[parent as usize].left = m;
        } else {
            self.nodes[parent as usize].right = m;
        }
        let node = &mut self.nodes[t as usize];
        node.left = NIL;
        node.right = NIL;
        node.size = 1;
        t
    }

    /// Sets `member`'s score. Returns the previous score (None: newly added).
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        // Redis's compact encoding stores "-0" as the integer 0, so -0 reads back as 0.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(i) = self.find(&member) {
            let prev = self.nodes[i as usize].score;
            if prev != score {
                let n = self.detach(prev, &member);
                self.nodes[n as usize].score = score;
                self.attach(n);
            }
            return Some(prev);
        }
        let h = self.hasher.hash_one(&member[..]);
        let n = self.alloc(score, member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(h, n, |&i| hasher.hash_one(&nodes[i as usize].member[..]));
        let len = self.nodes[n as usize].member.len().min(u32::MAX as usize) as u32;
        self.longest = self.longest.max(len);
        self.attach(n);
        self.peak_len = self.peak_len.max(self.len().min(u32::MAX as usize) as u32);
        None
    }

    /// (most members, longest member) this set has held.
    pub fn history(&self) -> (u32, u32) {
        (self.peak_len, self.longest)
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let h = self.hasher.hash_one(member);
        let nodes = &self.nodes;
        let entry = self
            .index
            .find_entry(h, |&i| nodes[i as usize].member == member)
            .ok()?;
        let (i, _) = entry.remove();
        let score = self.nodes[i as usize].score;
        let n = self.detach(score, member);
        if n != NIL {
            self.nodes[n as usize].member = Bytes::new();
            self.free.push(n);
        }
        if self.root == NIL {
            // Give the arena back when the set empties (it is usually deleted right after).
            self.nodes = Vec::new();
            self.free = Vec::new();
        }
        Some(score)
    }

    /// 0-based position of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.count_before(|s, m| cmp_key(s, m, score, member) == Ordering::Less))
    }

    /// How many elements satisfy `before`, which must hold for a prefix of the order.
    pub fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut n = self.root;
        let mut count = 0usize;
        while n != NIL {
            let node = &self.nodes[n as usize];
            if before(node.score, &node.member) {
                count += self.size(node.left) as usize + 1;
                n = node.right;
            } else {
                n = node.left;
            }
        }
        count
    }

    /// Elements in ascending order starting at rank `start`.
    pub fn iter_from(&self, start: usize) -> Iter<'_> {
        let mut stack = Vec::new();
        let mut n = self.root;
        let mut k = start as u32;
        while n != NIL {
            let node = &self.nodes[n as usize];
            let ls = self.size(node.left);
            match k.cmp(&ls) {
                Ordering::Less => {
                    stack.push(n);
                    n = node.left;
                }
                Ordering::Equal => {
                    stack.push(n);
                    break;
                }
                Ordering::Greater => {
                    k -= ls + 1;
                    n = node.right;
                }
            }
        }
        Iter {
            z: self,
            stack,
            rev: false,
        }
    }

    /// Elements in descending order starting at ascending rank `start` (going down).
    pub fn iter_rev_from(&self, start: usize) -> Iter<'_> {
        let mut stack = Vec::new();
        let mut n = self.root;
        let mut k = start as u32;
        while n != NIL {
            let node = &self.nodes[n as usize];
            let ls = self.size(node.left);
            match k.cmp(&ls) {
                Ordering::Less => n = node.left,
                Ordering::Equal => {
                    stack.push(n);
                    break;
                }
                Ordering::Greater => {
                    stack.push(n);
                    k -= ls + 1;
                    n = node.right;
                }
            }
        }
        Iter {
            z: self,
            stack,
            rev: true,
        }
    }

    /// Checks the treap invariants (sizes, heap order of priorities); returns the node count.
    #[cfg(test)]
    fn validate(&self, t: u32) -> u32 {
        if t == NIL {
            return 0;
        }
        let n = &self.nodes[t as usize];
        for c in [n.left, n.right] {
            if c != NIL {
                assert!(self.nodes[c as usize].prio <= n.prio, "heap order");
            }
        }
        let size = 1 + self.validate(n.left) + self.validate(n.right);
        assert_eq!(size, n.size, "subtree size");
        size
    }

    /// Arena slots ever used (live or free): ZSCAN's cursor space.
    pub fn slots(&self) -> usize {
        self.nodes.len()
    }

    /// The element in arena slot `i`, if that slot is live. A member keeps its slot for as
    /// long as it stays in the set (a score update relinks the same node), which is what lets
    /// ZSCAN walk slots without missing members present for the whole iteration.
    pub fn slot(&self, i: usize) -> Option<(&Bytes, f64)> {
        let node = self.nodes.get(i)?;
        (self.find(&node.member) == Some(i as u32)).then_some((&node.member, node.score))
    }

    /// The element at rank `k`.
    pub fn at(&self, k: usize) -> Option<(&Bytes, f64)> {
        self.iter_from(k).next()
    }
}

pub struct Iter<'a> {
    z: &'a ZSet,
    stack: Vec<u32>,
    rev: bool,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a Bytes, f64);

    fn next(&mut self) -> Option<Self::Item> {
        let n = self.stack.pop()?;
        let nodes = &self.z.nodes;
        let node = &nodes[n as usize];
        let mut c = if self.rev { node.left } else { node.right };
        while c != NIL {
            self.stack.push(c);
            let cn = &nodes[c as usize];
            c = if self.rev { cn.right } else { cn.left };
        }
        Some((&node.member, node.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn order_rank_and_iteration_match_a_sorted_vec() {
        let mut z = ZSet::new();
        let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
        for i in 0..3000u32 {
            let m = format!("m{}", fastrand::u32(0..500));
            let s = (fastrand::u32(0..50) as f64) / 2.0;
            if i % 3 == 2 {
                let removed = z.remove(m.as_bytes()).is_some();
                let before = model.len();
                model.retain(|(_, mm)| mm != m.as_bytes());
                assert_eq!(removed, before != model.len());
            } else {
                z.insert(b(&m), s);
                model.retain(|(_, mm)| mm != m.as_bytes());
                model.push((s, m.into_bytes()));
            }
        }
        model.sort_by(|a, b| cmp_key(a.0, &a.1, b.0, &b.1));
        assert_eq!(z.len(), model.len());
        assert_eq!(z.validate(z.root) as usize, model.len());
        let all: Vec<_> = z.iter_from(0).map(|(m, s)| (s, m.to_vec())).collect();
        assert_eq!(all, model);
        for (i, (_, m)) in model.iter().enumerate() {
            assert_eq!(z.rank(m), Some(i));
        }
        let start = model.len() / 2;
        let rev: Vec<_> = z.iter_rev_from(start).map(|(m, _)| m.to_vec()).collect();
        let expect: Vec<_> = model[..=start].iter().rev().map(|x| x.1.clone()).collect();
        assert_eq!(rev, expect);
        assert!(z.iter_from(model.len()).next().is_none());
        let below_5 = z.count_before(|s, _| s < 5.0);
        assert_eq!(below_5, model.iter().filter(|x| x.0 < 5.0).count());
    }

    #[test]
    fn same_score_orders_by_member_and_update_moves() {
        let mut z = ZSet::new();
        z.insert(b("b"), 1.0);
        z.insert(b("a"), 1.0);
        z.insert(b("c"), 0.0);
        let order: Vec<_> = z.iter_from(0).map(|(m, _)| m.clone()).collect();
        assert_eq!(order, vec![b("c"), b("a"), b("b")]);
        assert_eq!(z.insert(b("c"), 2.0), Some(0.0));
        assert_eq!(z.rank(b"c"), Some(2));
        assert_eq!(z.at(0).map(|(m, s)| (m.clone(), s)), Some((b("a"), 1.0)));
        z.remove(b"a");
        z.remove(b"b");
        z.remove(b"c");
        assert!(z.is_empty());
        assert!(z.iter_from(0).next().is_none());
    }
}
