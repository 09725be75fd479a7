//! The one hold queue: output that may not leave before the log says so. Under `appendfsync
//! always` a batch that wrote waits for the fsync of the round; in a cluster a leader's batch
//! waits for its entries to commit on a majority, or, when it logged nothing, for a read
//! barrier, in the Raft group its units went to (with several groups, one connection's
//! replies may wait on different logs and still leave in order). The output itself is already in the connection's `OutBuf`, behind its gate; an
//! entry here says when the gate may move (`Server::release_held`).

use crate::machine::output::ConnOut;
use crate::replication::group::GroupId;
use std::collections::VecDeque;
use std::rc::Rc;

/// What a held batch waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watermark {
    /// The fsync of the append-only file that follows the round.
    Fsynced,
    /// `group`'s log has committed `index` and its read barrier `read` is confirmed, while
    /// this node still leads that group in `term`. `index` and `read` 0: nothing (RAFT
    /// TRANSFER's OK).
    Committed {
        group: GroupId,
        index: u64,
        read: u64,
        term: u64,
    },
}

/// What the log says of a watermark now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Wait,
    Release,
    /// It will never be reached (a deposed leader): the connection closes without the output,
    /// its client learns nothing, as if the node had died.
    Drop,
}

struct Held {
    out: Rc<ConnOut>,
    /// The stream offset just past the held output.
    to: u64,
    watermark: Watermark,
    batch_done: bool,
    close: bool,
}

#[derive(Default)]
pub struct Holds {
    queue: VecDeque<Held>,
    /// Connections with an entry that waits in the pass being made: their later entries wait
    /// too, so a connection's output leaves in order.
    stalled: Vec<u64>,
}

impl Holds {
    /// Holds what `append` appends to `out` until `watermark` is reached.
    pub fn hold(
        &mut self,
        out: &Rc<ConnOut>,
        watermark: Watermark,
        batch_done: bool,
        close: bool,
        append: impl FnOnce(&ConnOut),
    ) {
        out.hold();
        append(out);
        let to = out.buf.borrow().end();
        self.queue.push_back(Held {
            out: out.clone(),
            to,
            watermark,
            batch_done,
            close,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Releases (or drops) what `verdict` says is decided; true if anything was.
    pub fn settle(&mut self, mut verdict: impl FnMut(&Watermark) -> Verdict) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let before = self.queue.len();
        let stalled = &mut self.stalled;
        self.queue.retain(|h| {
            if stalled.contains(&h.out.id) {
                return true;
            }
            match verdict(&h.watermark) {
                Verdict::Wait => {
                    stalled.push(h.out.id);
                    true
                }
                Verdict::Release => {
                    h.out.release(h.to, h.batch_done, h.close);
                    false
                }
                Verdict::Drop => {
                    h.out.close_now_quietly();
                    false
                }
            }
        });
        stalled.clear();
        self.queue.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::output::{ConnOut, Out};
    use tokio::sync::mpsc;

    fn conn(id: u64) -> (Rc<ConnOut>, mpsc::UnboundedReceiver<Out>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (ConnOut::channel(id, tx), rx)
    }

    fn received(rx: &mut mpsc::UnboundedReceiver<Out>) -> (Vec<u8>, bool, bool) {
        let (mut data, mut done, mut close) = (Vec::new(), false, false);
        while let Ok(o) = rx.try_recv() {
            data.extend_from_slice(&o.data);
            done |= o.batch_done;
            close |= o.close;
        }
        (data, done, close)
    }

    fn at(index: u64) -> Watermark {
        Watermark::Committed {
            group: GroupId::HOME,
            index,
            read: 0,
            term: 1,
        }
    }

    #[test]
    fn output_leaves_when_its_watermark_is_reached_and_in_each_connections_order() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        let (b, mut rb) = conn(2);
        holds.hold(&a, at(5), false, false, |o| o.extend(b"+a1\r\n"));
        // A push between two held parts of a's output waits behind the first.
        a.extend(b">push\r\n");
        holds.hold(&a, at(3), true, false, |o| o.extend(b"+a2\r\n"));
        holds.hold(&b, at(4), true, false, |o| o.extend(b"+b\r\n"));
        assert_eq!(received(&mut ra).0, b"");
        // Commit 4: b's leaves; a's second (index 3) waits behind its first (index 5).
        assert!(holds.settle(|wm| match *wm {
            Watermark::Committed { index, .. } if index <= 4 => Verdict::Release,
            _ => Verdict::Wait,
        }));
        assert_eq!(received(&mut ra).0, b"");
        assert_eq!(received(&mut rb), (b"+b\r\n".to_vec(), true, false));
        holds.settle(|_| Verdict::Release);
        assert_eq!(
            received(&mut ra),
            (b"+a1\r\n>push\r\n+a2\r\n".to_vec(), true, false)
        );
        assert!(holds.is_empty());
    }

    #[test]
    fn each_groups_verdict_releases_its_own_and_a_connection_keeps_its_order() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        let (b, mut rb) = conn(2);
        let in_group = |g, index| Watermark::Committed {
            group: GroupId(g),
            index,
            read: 0,
            term: 1,
        };
        holds.hold(&a, in_group(1, 9), false, false, |o| o.extend(b"+a1\r\n"));
        holds.hold(&a, in_group(0, 2), true, false, |o| o.extend(b"+a2\r\n"));
        holds.hold(&b, in_group(0, 3), true, false, |o| o.extend(b"+b\r\n"));
        // Group 0 committed 3, group 1 nothing yet: b's leaves, a's second waits behind its
        // first.
        let group0 = |wm: &Watermark| match *wm {
            Watermark::Committed { group, index, .. } if group == GroupId(0) && index <= 3 => {
                Verdict::Release
            }
            _ => Verdict::Wait,
        };
        holds.settle(group0);
        assert_eq!(received(&mut rb), (b"+b\r\n".to_vec(), true, false));
        assert_eq!(received(&mut ra).0, b"");
        // Group 1 deposed: what waits on it is dropped and its connection closes; nothing of
        // the connection after it leaves.
        holds.settle(|wm| match *wm {
            Watermark::Committed {
                group: GroupId(1), ..
            } => Verdict::Drop,
            _ => Verdict::Wait,
        });
        assert_eq!(received(&mut ra), (Vec::new(), true, true));
    }

    #[test]
    fn dropped_output_never_leaves_and_the_connection_closes() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        a.extend(b"+earlier\r\n");
        holds.hold(&a, Watermark::Fsynced, true, false, |o| {
            o.extend(b"+held\r\n")
        });
        holds.settle(|_| Verdict::Drop);
        assert_eq!(received(&mut ra), (b"+earlier\r\n".to_vec(), true, true));
        a.extend(b"+later\r\n");
        assert_eq!(received(&mut ra).0, b"");
    }
}
