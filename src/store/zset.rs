//! Sorted sets: members ordered by (score, member bytes), as Redis orders its skiplist.
//!
//! Structure: a hash map member → score for O(1) ZSCORE, plus an order-statistic *treap* (a
//! randomized binary search tree whose nodes also store their subtree size) for the order. The
//! treap gives expected O(log n) insert, delete, rank (ZRANK) and select-by-rank (ZRANGE start),
//! which are the same expected bounds as Redis's skiplist with spans. We chose it over a skiplist
//! because it needs no backward pointers (shared mutable links) and lives in one `Vec` arena with
//! `u32` indices in safe Rust; a `BTreeSet` would have needed an O(n) walk for ranks.
//! Range replies walk the tree in order from a rank with an explicit stack: O(log n + m).

use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::HashMap;

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

#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: HashMap<Bytes, f64, ahash::RandomState>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
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
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
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

    /// Splits `t` into (its first `k` nodes, the rest).
    fn split_at(&mut self, t: u32, k: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let left = self.nodes[t as usize].left;
        let ls = self.size(left);
        if k <= ls {
            let (a, b) = self.split_at(left, k);
            self.nodes[t as usize].left = b;
            self.fix(t);
            (a, t)
        } else {
            let right = self.nodes[t as usize].right;
            let (a, b) = self.split_at(right, k - ls - 1);
            self.nodes[t as usize].right = a;
            self.fix(t);
            (t, b)
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

    fn tree_insert(&mut self, score: f64, member: Bytes) {
        let (a, b) = self.split(self.root, score, &member);
        let n = self.alloc(score, member);
        let left = self.merge(a, n);
        self.root = self.merge(left, b);
    }

    fn tree_remove(&mut self, score: f64, member: &[u8]) {
        let (a, b) = self.split(self.root, score, member);
        let (mid, c) = self.split_at(b, 1);
        if mid != NIL {
            self.nodes[mid as usize].member = Bytes::new();
            self.free.push(mid);
        }
        self.root = self.merge(a, c);
        if self.root == NIL {
            // Give the arena back when the set empties (it is usually deleted right after).
            self.nodes.clear();
            self.free.clear();
        }
    }

    /// Sets `member`'s score. Returns the previous score (None: newly added).
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        // Redis's compact encoding stores "-0" as the integer 0, so -0 reads back as 0.
        let score = if score == 0.0 { 0.0 } else { score };
        if let Some(old) = self.scores.get_mut(&member[..]) {
            let prev = *old;
            if prev != score {
                *old = score;
                self.tree_remove(prev, &member);
                self.tree_insert(score, member);
            }
            return Some(prev);
        }
        self.scores.insert(member.clone(), score);
        self.tree_insert(score, member);
        None
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.scores.remove(member)?;
        self.tree_remove(score, member);
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
