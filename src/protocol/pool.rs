//! Large wire buffers kept for reuse on the executor thread: a written reply's batch buffer
//! and a read buffer a large request was decoded from go here once nothing else refers to
//! them, and the next large reply or large argument takes one. Memory the process touched
//! before costs no page faults, where a fresh 1 MiB allocation faulted 256 pages in (the
//! allocator returns freed large blocks to the system): a fifth of the server's time serving
//! pipelined 1 MiB GETs.

use bytes::{Bytes, BytesMut};
use std::cell::RefCell;

/// Buffers of less than this are not worth keeping (output of this size is copied anyway).
pub const MIN: usize = 16 * 1024;
/// Larger buffers are freed, not kept.
const MAX: usize = 4 << 20;
/// How many are kept at most (at most 16 MiB idle).
const KEPT: usize = 4;

thread_local! {
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for at least `min` bytes, if one is kept.
pub fn take(min: usize) -> Option<BytesMut> {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        // `try_reclaim`: room from the allocation's start (no copy: the buffers are empty).
        let i = p.iter_mut().position(|b| b.try_reclaim(min))?;
        Some(p.swap_remove(i))
    })
}

/// Keeps the memory of `b` when nothing else refers to it and its size is worth it.
pub fn keep(b: Bytes) {
    let Ok(mut m) = b.try_into_mut() else {
        return;
    };
    m.clear();
    // Sizes are those of the whole allocation, from its start (a read buffer's view may
    // begin near its end).
    if !m.try_reclaim(MIN) || m.try_reclaim(MAX + 1) {
        return;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEPT {
            p.push(m);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_unshared_buffers_whole_and_only_those() {
        while take(0).is_some() {}
        let mut b = BytesMut::with_capacity(64 * 1024);
        b.extend_from_slice(&[1u8; 40 * 1024]);
        let head = b.split_to(39 * 1024).freeze();
        // The tail still shares the allocation with `head`: nothing is kept.
        let tail = b.freeze();
        keep(tail.clone());
        assert!(take(0).is_none());
        drop(head);
        keep(tail);
        let got = take(60 * 1024).expect("the whole allocation, reclaimed");
        assert!(got.is_empty() && got.capacity() >= 64 * 1024);
        keep(Bytes::from(vec![0u8; 100]));
        assert!(take(0).is_none(), "too small to keep");
    }
}
