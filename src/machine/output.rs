//! A connection's output, as Redis's reply list: the executor appends to it directly and the
//! event loop writes it. Every reply, push, wake-up and busy-script answer of a connection goes
//! through its one `OutBuf`, in the order it was produced.
//!
//! `OutBuf` is a chain: small output is copied into 16 KiB blocks; output of `BIG` bytes or
//! more is referenced (`Bytes`), never copied again, so a 1 MiB reply is copied once (when it
//! is encoded) and a huge unread one never asks for a doubled contiguous buffer. The writer
//! hands the kernel up to `MAX_IOV` pieces at once (`writev`).
//!
//! `ConnOut` is what the executor and the event loop share of a connection: both run on the
//! executor thread, so it is plain cells behind an `Rc`. Output that must wait (the fsync of
//! `appendfsync always`, a cluster commit or read barrier) stays behind the gate: the writer
//! stops at `gate` until the hold queue releases it (`exec::hold`).

use bytes::{Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::IoSlice;
use std::rc::Rc;
use tokio::sync::mpsc;

/// The size of a copied block (Redis's PROTO_REPLY_CHUNK_BYTES).
pub const BLOCK: usize = 16 * 1024;
/// The first block of a drained connection holds at least this much.
const FIRST_BLOCK: usize = 1024;
/// A drained connection keeps a block up to this size.
const KEEP_BLOCK: usize = 4096;
/// Output at least this large is referenced rather than copied.
pub const BIG: usize = crate::protocol::encode::REFERENCED;
/// Pieces handed to one `writev` (far below IOV_MAX; 1 MiB of 16 KiB blocks).
pub const MAX_IOV: usize = 64;

/// A buffer of at least `BIG` bytes' capacity that held written output or a large request,
/// if one is kept (protocol/pool.rs).
pub fn spare_buffer() -> Option<BytesMut> {
    crate::protocol::pool::take(BIG)
}

/// A chain of output blocks; see the module comment.
#[derive(Default)]
pub struct OutBuf {
    /// Full blocks and referenced large pieces, oldest first; all come before `tail`.
    sealed: VecDeque<Bytes>,
    /// The block being filled.
    tail: BytesMut,
    /// Bytes of the first piece (the front of `sealed`, or `tail` when `sealed` is empty)
    /// already written.
    sent: usize,
    /// Bytes not written yet.
    len: usize,
    /// Bytes ever appended: the stream offset of the end (gates are offsets).
    appended: u64,
}

impl OutBuf {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stream offset just past the last byte appended.
    pub fn end(&self) -> u64 {
        self.appended
    }

    /// The stream offset of the first byte not written.
    pub fn written(&self) -> u64 {
        self.appended - self.len as u64
    }

    /// Appends a copy of `data`; false, with nothing appended, when the memory for it cannot
    /// be had (only this client is lost then, never the process).
    pub fn extend(&mut self, data: &[u8]) -> bool {
        let room = self.tail.capacity() - self.tail.len();
        if data.len() <= room {
            self.tail.extend_from_slice(data);
            self.added(data.len());
            return true;
        }
        if data.len() >= BIG {
            let Some(copy) = try_copy(data) else {
                return false;
            };
            self.seal();
            self.sealed.push_back(copy);
            self.added(data.len());
            return true;
        }
        if self.tail.is_empty() {
            // A drained connection's block is small (its usual output is one short reply), so
            // thousands of connections hold little; output that accumulates gets full blocks.
            let cap = if self.len == 0 {
                data.len().max(FIRST_BLOCK).next_power_of_two().min(BLOCK)
            } else {
                BLOCK
            };
            let Some(mut next) = try_block(cap.max(data.len())) else {
                return false;
            };
            next.extend_from_slice(data);
            self.tail = next;
            self.added(data.len());
            return true;
        }
        // Fill the block, then start the next one.
        let Some(mut next) = try_block(BLOCK.max(data.len() - room)) else {
            return false;
        };
        let (now, rest) = data.split_at(room);
        self.tail.extend_from_slice(now);
        self.seal();
        next.extend_from_slice(rest);
        self.tail = next;
        self.added(data.len());
        true
    }

    /// Appends `data` by reference when it is large, else as a copy.
    pub fn put(&mut self, data: Bytes) -> bool {
        if data.len() < BIG {
            return self.extend(&data);
        }
        self.seal();
        self.added(data.len());
        self.sealed.push_back(data);
        true
    }

    /// Appends a batch's output: a large one is taken over (None), a small one is copied and
    /// handed back for reuse (Some, cleared). None also when the memory was not there; false
    /// says so.
    pub fn put_buf(&mut self, mut data: BytesMut) -> (bool, Option<BytesMut>) {
        if data.len() >= BIG {
            return (self.put(data.freeze()), None);
        }
        let ok = self.extend(&data);
        data.clear();
        (ok, Some(data))
    }

    /// Appends a batch's output with large values referenced where they belong: `pieces` are
    /// (offset in `data`, body) in offset order, each body going between `data[..offset]` and
    /// `data[offset..]`; it is emptied. The text around them is copied and `data` handed back
    /// for reuse. False, stopping there, when the memory was not there.
    pub fn put_with(
        &mut self,
        mut data: BytesMut,
        pieces: &mut Vec<(usize, Bytes)>,
    ) -> (bool, Option<BytesMut>) {
        if pieces.is_empty() {
            return self.put_buf(data);
        }
        let mut at = 0;
        let mut ok = true;
        for (offset, body) in pieces.drain(..) {
            let offset = offset.clamp(at, data.len());
            ok = self.extend_before_piece(&data[at..offset]) && self.put(body);
            at = offset;
            if !ok {
                break;
            }
        }
        ok = ok && self.extend(&data[at..]);
        pieces.clear();
        data.clear();
        (ok, Some(data))
    }

    /// Appends a copy of `data`, which a referenced piece follows: that piece seals the block
    /// `data` lands in, so a block opened for it is cut to its size rather than `BLOCK` (the
    /// text between the large values of an MGET, a few bytes each, would otherwise hold
    /// 16 KiB a value).
    fn extend_before_piece(&mut self, data: &[u8]) -> bool {
        if data.len() <= self.tail.capacity() - self.tail.len() || data.len() >= BIG {
            return self.extend(data);
        }
        let Some(copy) = try_copy(data) else {
            return false;
        };
        self.seal();
        self.sealed.push_back(copy);
        self.added(data.len());
        true
    }

    fn added(&mut self, n: usize) {
        self.len += n;
        self.appended += n as u64;
    }

    /// Closes the block being filled (it keeps its place in the chain).
    fn seal(&mut self) {
        if !self.tail.is_empty() {
            let t = std::mem::take(&mut self.tail).freeze();
            self.sealed.push_back(t);
        }
    }

    /// The unwritten bytes, at most `limit` of them, when they are one piece (the usual case:
    /// a connection's replies of one pass in its block); None when they span several.
    #[inline]
    pub fn single(&self, limit: usize) -> Option<&[u8]> {
        if !self.sealed.is_empty() {
            return None;
        }
        let n = limit.min(self.len);
        Some(&self.tail[self.sent..self.sent + n])
    }

    /// The unwritten bytes, at most `limit` of them, as pieces for `writev`; returns how many
    /// of `iov` it filled.
    pub fn slices<'a>(&'a self, limit: usize, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut left = limit.min(self.len);
        let mut skip = self.sent;
        let pieces = self
            .sealed
            .iter()
            .map(|b| &b[..])
            .chain(std::iter::once(&self.tail[..]));
        for p in pieces {
            if left == 0 || n == iov.len() {
                break;
            }
            let p = &p[skip..];
            skip = 0;
            if p.is_empty() {
                continue;
            }
            let take = p.len().min(left);
            iov[n] = IoSlice::new(&p[..take]);
            n += 1;
            left -= take;
        }
        n
    }

    /// `n` bytes were written.
    pub fn consume(&mut self, mut n: usize) {
        debug_assert!(n <= self.len);
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            match self.sealed.front_mut() {
                Some(front) => {
                    let rest = front.len() - self.sent;
                    if n >= rest {
                        n -= rest;
                        if let Some(done) = self.sealed.pop_front() {
                            if done.len() >= BIG {
                                crate::protocol::pool::keep(done);
                            }
                        }
                        self.sent = 0;
                    } else {
                        self.sent += n;
                        n = 0;
                    }
                }
                None => {
                    self.sent += n;
                    n = 0;
                }
            }
        }
        if self.sealed.is_empty() && self.sent == self.tail.len() {
            // All written: a small block stays for the next replies (no allocation per
            // request); a larger one goes, so an idle connection holds little.
            self.sent = 0;
            if self.tail.capacity() > KEEP_BLOCK {
                self.tail = BytesMut::new();
            } else {
                self.tail.clear();
            }
        }
    }

    /// Drops everything not written and the memory it held.
    pub fn clear(&mut self) {
        let n = self.len;
        self.consume(n);
        self.tail = BytesMut::new();
    }
}

/// A fresh block of `cap` bytes, or None without the memory.
fn try_block(cap: usize) -> Option<BytesMut> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(cap).ok()?;
    Some(BytesMut::from(Bytes::from(v)))
}

fn try_copy(data: &[u8]) -> Option<Bytes> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(data.len()).ok()?;
    v.extend_from_slice(data);
    Some(Bytes::from(v))
}

/// A chunk of output for a client without a connection of the event loop (the fuzzer's, a
/// unit test's), sent on its channel as soon as it may leave.
#[derive(Debug)]
pub struct Out {
    pub data: Bytes,
    /// The batch of commands the client sent is fully answered.
    pub batch_done: bool,
    /// The connection closes after `data`.
    pub close: bool,
}

/// The list of connections with something for the event loop to do (output to write, a batch
/// answered, a close): Redis's `clients_pending_write`. Shared by the loop and every
/// `ConnOut` of its connections.
pub type PendingList = Rc<RefCell<Vec<u64>>>;

/// What the executor and the event loop share of one connection (module comment).
pub struct ConnOut {
    pub id: u64,
    pub buf: RefCell<OutBuf>,
    /// Output from this stream offset on is held (u64::MAX: none is).
    gate: Cell<u64>,
    /// Hold-queue entries of this connection not released yet.
    held: Cell<u32>,
    /// The batch the connection sent is answered (and released): it may send the next.
    batch_done: Cell<bool>,
    /// Close once the output that may leave has left (QUIT, a dropped hold).
    close: Cell<bool>,
    /// Close now (CLIENT KILL, output limits): nothing more is waited for.
    killed: Cell<bool>,
    /// Closed without the output past the gate (`close_now_quietly`): the gate never moves on.
    dropped: Cell<bool>,
    /// Listed in `pending`.
    listed: Cell<bool>,
    pending: PendingList,
    /// A client without a connection: its output goes to this channel instead.
    sink: Option<mpsc::UnboundedSender<Out>>,
}

impl ConnOut {
    /// The output of connection `id` of the event loop whose list `pending` is.
    pub fn looped(id: u64, pending: PendingList) -> Rc<ConnOut> {
        Rc::new(ConnOut::new(id, pending, None))
    }

    /// The output of a client that has a channel instead of a connection.
    pub fn channel(id: u64, tx: mpsc::UnboundedSender<Out>) -> Rc<ConnOut> {
        Rc::new(ConnOut::new(id, Default::default(), Some(tx)))
    }

    fn new(id: u64, pending: PendingList, sink: Option<mpsc::UnboundedSender<Out>>) -> ConnOut {
        ConnOut {
            id,
            buf: Default::default(),
            gate: Cell::new(u64::MAX),
            held: Cell::new(0),
            batch_done: Cell::new(false),
            close: Cell::new(false),
            killed: Cell::new(false),
            dropped: Cell::new(false),
            listed: Cell::new(false),
            pending,
            sink,
        }
    }

    /// Bytes not written yet, held ones included (what output limits count).
    pub fn len(&self) -> usize {
        self.buf.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stream offsets (appended, written) of this connection's output.
    pub fn offsets(&self) -> (u64, u64) {
        let b = self.buf.borrow();
        (b.end(), b.written())
    }

    /// Bytes that may be written now (those before the gate).
    pub fn writable(&self) -> usize {
        let b = self.buf.borrow();
        let before_gate = self.gate.get().saturating_sub(b.written());
        (b.len() as u64).min(before_gate) as usize
    }

    /// Appends a copy of `data`.
    pub fn extend(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let ok = self.buf.borrow_mut().extend(data);
        self.appended(ok);
    }

    /// Appends `data`, by reference when large.
    pub fn put(&self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        let ok = self.buf.borrow_mut().put(data);
        self.appended(ok);
    }

    /// Appends a batch's output (`OutBuf::put_buf`); hands a small buffer back for reuse.
    pub fn put_buf(&self, data: BytesMut) -> Option<BytesMut> {
        if data.is_empty() {
            return Some(data);
        }
        let (ok, back) = self.buf.borrow_mut().put_buf(data);
        self.appended(ok);
        back
    }

    /// Appends a batch's output and its by-reference bodies (`OutBuf::put_with`).
    pub fn put_with(&self, data: BytesMut, pieces: &mut Vec<(usize, Bytes)>) -> Option<BytesMut> {
        if pieces.is_empty() {
            return self.put_buf(data);
        }
        let (ok, back) = self.buf.borrow_mut().put_with(data, pieces);
        self.appended(ok);
        back
    }

    fn appended(&self, ok: bool) {
        if !ok {
            // No memory for it: only this client goes, as Redis closes a client past its
            // output limit; every other client keeps being served.
            tracing::warn!(
                "Client id={} closed: no memory for its output buffer ({} bytes queued)",
                self.id,
                self.len()
            );
            self.kill();
            return;
        }
        self.mark();
    }

    /// The batch is answered (its output, if any, appended before).
    pub fn batch_done(&self, close: bool) {
        self.batch_done.set(true);
        if close {
            self.close.set(true);
        }
        self.mark();
    }

    /// Closes the connection after the output that may leave, without this batch's.
    pub fn close_now_quietly(&self) {
        self.batch_done.set(true);
        self.close.set(true);
        self.dropped.set(true);
        // Nothing appended from here on leaves.
        let end = self.buf.borrow().end();
        self.gate.set(self.gate.get().min(end));
        self.held.set(self.held.get() + 1);
        self.mark();
    }

    /// CLIENT KILL, output limits: the connection closes at once.
    pub fn kill(&self) {
        self.killed.set(true);
        self.mark();
    }

    pub fn killed(&self) -> bool {
        self.killed.get()
    }

    /// Whether some of its output waits behind a hold.
    pub fn is_held(&self) -> bool {
        self.held.get() > 0
    }

    /// Holds everything appended from now on until `release`; returns the offset it starts at.
    pub fn hold(&self) -> u64 {
        let from = self.buf.borrow().end();
        if self.held.get() == 0 {
            self.gate.set(from);
        }
        self.held.set(self.held.get() + 1);
        from
    }

    /// Releases the oldest hold of this connection: output up to `to` (the end of what it
    /// held) may leave, or all of it when no other hold is left.
    pub fn release(&self, to: u64, batch_done: bool, close: bool) {
        let left = self.held.get().saturating_sub(1);
        self.held.set(left);
        if !self.dropped.get() {
            self.gate.set(if left == 0 { u64::MAX } else { to });
        }
        if batch_done {
            self.batch_done.set(true);
        }
        if close {
            self.close.set(true);
        }
        self.mark();
    }

    /// Tells the loop (or the channel) something changed.
    fn mark(&self) {
        if let Some(tx) = &self.sink {
            self.forward(tx);
            return;
        }
        if !self.listed.replace(true) {
            self.pending.borrow_mut().push(self.id);
        }
    }

    /// A channel client's output leaves as soon as it may.
    fn forward(&self, tx: &mpsc::UnboundedSender<Out>) {
        let n = self.writable();
        let mut data = BytesMut::with_capacity(n);
        {
            let mut b = self.buf.borrow_mut();
            while data.len() < n {
                let before = data.len();
                {
                    let mut iov = [IoSlice::new(&[]); MAX_IOV];
                    let k = b.slices(n - data.len(), &mut iov);
                    for s in &iov[..k] {
                        data.extend_from_slice(s);
                    }
                }
                b.consume(data.len() - before);
            }
        }
        let batch_done = self.batch_done.replace(false);
        let close = self.close.get() || self.killed.get();
        if !data.is_empty() || batch_done || close {
            let _ = tx.send(Out {
                data: data.freeze(),
                batch_done,
                close,
            });
        }
    }

    /// The loop took this connection off the pending list.
    pub fn unlist(&self) {
        self.listed.set(false);
    }

    /// Takes the "batch answered" signal.
    pub fn take_batch_done(&self) -> bool {
        self.batch_done.replace(false)
    }

    pub fn closing(&self) -> bool {
        self.close.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(b: &mut OutBuf, limit: usize) -> Vec<u8> {
        let mut got = Vec::new();
        loop {
            let before = got.len();
            {
                let mut iov = [IoSlice::new(&[]); MAX_IOV];
                let k = b.slices(limit - got.len(), &mut iov);
                for s in &iov[..k] {
                    got.extend_from_slice(s);
                }
            }
            if got.len() == before {
                return got;
            }
            b.consume(got.len() - before);
        }
    }

    #[test]
    fn keeps_order_across_blocks_and_references() {
        let mut b = OutBuf::default();
        let mut want = Vec::new();
        for i in 0..2000u32 {
            let s = format!("+reply {i}\r\n");
            assert!(b.extend(s.as_bytes()));
            want.extend_from_slice(s.as_bytes());
            if i % 500 == 0 {
                let big = Bytes::from(vec![b'a' + (i % 26) as u8; BIG * 3 + 7]);
                want.extend_from_slice(&big);
                assert!(b.put(big));
            }
        }
        assert_eq!(b.len(), want.len());
        assert_eq!(b.end(), want.len() as u64);
        // Partial writes at odd sizes.
        let mut got = Vec::new();
        while !b.is_empty() {
            let mut iov = [IoSlice::new(&[]); 3];
            let k = b.slices(usize::MAX, &mut iov);
            let chunk: Vec<u8> = iov[..k].iter().flat_map(|s| s.iter().copied()).collect();
            let n = chunk.len().min(5000);
            got.extend_from_slice(&chunk[..n]);
            b.consume(n);
        }
        assert_eq!(got, want);
        assert_eq!(b.written(), want.len() as u64);
    }

    #[test]
    fn large_pieces_are_referenced_not_copied() {
        let mut b = OutBuf::default();
        let big = Bytes::from(vec![7u8; 1 << 20]);
        let ptr = big.as_ptr();
        b.extend(b"$1048576\r\n");
        b.put(big);
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let k = b.slices(usize::MAX, &mut iov);
        assert_eq!(k, 2);
        assert_eq!(iov[1].as_ptr(), ptr);
        // A small batch buffer is copied and handed back; a large one is taken over.
        let (ok, back) = b.put_buf(BytesMut::from(&b"+OK\r\n"[..]));
        assert!(ok && back.is_some_and(|r| r.is_empty()));
        let (ok, back) = b.put_buf(BytesMut::from(&vec![1u8; BIG][..]));
        assert!(ok && back.is_none());
    }

    #[test]
    fn batch_output_with_referenced_bodies_keeps_their_places() {
        let mut b = OutBuf::default();
        let one = Bytes::from(vec![b'x'; BIG * 2]);
        let two = Bytes::from(vec![b'y'; BIG]);
        let (p1, p2) = (one.as_ptr(), two.as_ptr());
        let mut data = BytesMut::new();
        data.extend_from_slice(b"+OK\r\n$32768\r\n");
        let mut pieces = vec![(data.len(), one.clone())];
        data.extend_from_slice(b"\r\n:1\r\n$16384\r\n");
        pieces.push((data.len(), two.clone()));
        data.extend_from_slice(b"\r\n+PONG\r\n");
        let (ok, back) = b.put_with(data, &mut pieces);
        assert!(ok && pieces.is_empty() && back.is_some_and(|r| r.is_empty()));
        let mut want = b"+OK\r\n$32768\r\n".to_vec();
        want.extend_from_slice(&one);
        want.extend_from_slice(b"\r\n:1\r\n$16384\r\n");
        want.extend_from_slice(&two);
        want.extend_from_slice(b"\r\n+PONG\r\n");
        assert_eq!(b.len(), want.len());
        let mut iov = [IoSlice::new(&[]); MAX_IOV];
        let k = b.slices(usize::MAX, &mut iov);
        // The bodies are the stored bytes themselves.
        assert!(iov[..k].iter().any(|s| s.as_ptr() == p1));
        assert!(iov[..k].iter().any(|s| s.as_ptr() == p2));
        let got: Vec<u8> = iov[..k].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_written_batch_buffer_is_kept_for_the_next_large_output() {
        while spare_buffer().is_some() {}
        let mut b = OutBuf::default();
        let data = BytesMut::from(&vec![5u8; BIG * 2][..]);
        let cap = data.capacity();
        let (ok, back) = b.put_buf(data);
        assert!(ok && back.is_none());
        assert!(spare_buffer().is_none(), "not before it is written");
        drain(&mut b, usize::MAX);
        let spare = spare_buffer().expect("kept");
        assert!(spare.is_empty() && spare.capacity() == cap);
        // A piece something else still refers to is not taken.
        let shared = Bytes::from(vec![1u8; BIG]);
        b.put(shared.clone());
        drain(&mut b, usize::MAX);
        assert!(spare_buffer().is_none());
    }

    #[test]
    fn limit_stops_at_the_gate_and_reuses_the_block() {
        let mut b = OutBuf::default();
        b.extend(b"+one\r\n");
        b.extend(b"+two\r\n");
        assert_eq!(drain(&mut b, 6), b"+one\r\n");
        assert_eq!(drain(&mut b, usize::MAX), b"+two\r\n");
        assert!(b.is_empty());
        let cap = b.tail.capacity();
        assert!(cap > 0 && cap <= KEEP_BLOCK, "{cap}");
        b.extend(b"+three\r\n");
        assert_eq!(b.tail.capacity(), cap, "the written block is reused");
        // A drained connection does not keep a large block.
        b.extend(&[b'x'; BLOCK - 1]);
        drain(&mut b, usize::MAX);
        assert!(b.tail.capacity() <= KEEP_BLOCK);
    }

    #[test]
    fn holds_gate_the_channel_until_released() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let c = ConnOut::channel(1, tx);
        c.extend(b"+before\r\n");
        assert_eq!(&rx.try_recv().unwrap().data[..], b"+before\r\n");
        let _ = c.hold();
        c.extend(b"+held\r\n");
        assert!(rx.try_recv().is_err());
        let to = c.buf.borrow().end();
        c.release(to, true, false);
        let out = rx.try_recv().unwrap();
        assert_eq!(&out.data[..], b"+held\r\n");
        assert!(out.batch_done);
    }
}
