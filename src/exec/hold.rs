//! The one hold queue: output that may not leave before the log says so. Under `appendfsync
//! always` a batch that wrote waits for the fsync of the round; in a cluster a leader's batch
//! waits for its entries to commit on a majority, or, when it logged nothing, for a read
//! barrier, in each Raft group its units went to: a batch over several groups waits for all
//! of them (one watermark each), and one connection's replies may wait on different logs and
//! still leave in order. The output itself is already in the connection's `OutBuf`, behind
//! its gate; an entry here says when the gate may move (`Server::release_held`).

use crate::machine::output::ConnOut;
use crate::replication::group::GroupId;
use std::collections::VecDeque;
use std::rc::Rc;

/// What a held batch waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watermark {
    /// The fsync of the append-only file that follows the round.
    Fsynced,
    /// Nothing: output that waits for no log but follows held output of its connection that
    /// closes after it (QUIT), so the close waits for the output before it.
    Ordered,
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
    /// A batch whose units went to several Raft groups waits for each one's watermark too
    /// (empty, and not allocated, for one). Reached ones are removed as they are reached.
    rest: Vec<Watermark>,
    batch_done: bool,
    close: bool,
}

#[derive(Default)]
pub struct Holds {
    queue: VecDeque<Held>,
    /// Connections with an entry that waits in the pass being made: their later entries wait
    /// too, so a connection's output leaves in order.
    stalled: Vec<u64>,
    /// Connections whose held output was dropped while some of their entries are still
    /// queued: those never release (their output lies past the dropped one's, which must not
    /// leave), they go with it.
    dropped: Vec<u64>,
}

impl Holds {
    /// Holds what `append` appends to `out` until `watermark` and every one of `rest` are
    /// reached (dropped as soon as one of them never will be).
    pub fn hold(
        &mut self,
        out: &Rc<ConnOut>,
        watermark: Watermark,
        rest: Vec<Watermark>,
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
            rest,
            batch_done,
            close,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Releases (or drops) what `verdict` says is decided; true if anything was. An entry is
    /// released once all its watermarks are reached and no earlier entry of its connection
    /// waits; it is dropped as soon as one of them never will be, wherever it stands in its
    /// connection's order (a waiting entry before it must not keep a deposed group's output
    /// queued forever), and the connection's later entries go with it.
    pub fn settle(&mut self, mut verdict: impl FnMut(&Watermark) -> Verdict) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let before = self.queue.len();
        let Holds {
            queue,
            stalled,
            dropped,
        } = self;
        queue.retain_mut(|h| {
            if !dropped.is_empty() && dropped.contains(&h.out.id) {
                return false;
            }
            let mut wait = false;
            let mut i = 0;
            while i < h.rest.len() {
                match verdict(&h.rest[i]) {
                    Verdict::Wait => {
                        wait = true;
                        i += 1;
                    }
                    Verdict::Release => {
                        h.rest.swap_remove(i);
                    }
                    Verdict::Drop => return drop_held(h, dropped),
                }
            }
            match verdict(&h.watermark) {
                Verdict::Wait => wait = true,
                Verdict::Release => {
                    // Reached: what is left to wait for, if anything, takes its place.
                    if let Some(w) = h.rest.pop() {
                        h.watermark = w;
                    }
                }
                Verdict::Drop => return drop_held(h, dropped),
            }
            if wait || stalled.contains(&h.out.id) {
                if !stalled.contains(&h.out.id) {
                    stalled.push(h.out.id);
                }
                return true;
            }
            h.out.release(h.to, h.batch_done, h.close);
            false
        });
        stalled.clear();
        if !dropped.is_empty() {
            dropped.retain(|id| queue.iter().any(|h| h.out.id == *id));
        }
        self.queue.len() != before
    }
}

/// A held entry that will never be released: its connection closes without it.
fn drop_held(h: &Held, dropped: &mut Vec<u64>) -> bool {
    h.out.close_now_quietly();
    if !dropped.contains(&h.out.id) {
        dropped.push(h.out.id);
    }
    false
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
        holds.hold(&a, at(5), vec![], false, false, |o| o.extend(b"+a1\r\n"));
        // A push between two held parts of a's output waits behind the first.
        a.extend(b">push\r\n");
        holds.hold(&a, at(3), vec![], true, false, |o| o.extend(b"+a2\r\n"));
        holds.hold(&b, at(4), vec![], true, false, |o| o.extend(b"+b\r\n"));
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
        holds.hold(&a, in_group(1, 9), vec![], false, false, |o| {
            o.extend(b"+a1\r\n")
        });
        holds.hold(&a, in_group(0, 2), vec![], true, false, |o| {
            o.extend(b"+a2\r\n")
        });
        holds.hold(&b, in_group(0, 3), vec![], true, false, |o| {
            o.extend(b"+b\r\n")
        });
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

    fn in_group(g: u32, index: u64) -> Watermark {
        Watermark::Committed {
            group: GroupId(g),
            index,
            read: 0,
            term: 1,
        }
    }

    /// Group `g` has committed up to `commit`; a group missing here waits.
    fn committed(commits: &[(u32, u64)]) -> impl FnMut(&Watermark) -> Verdict + '_ {
        move |wm| match *wm {
            Watermark::Committed { group, index, .. } => {
                match commits.iter().find(|c| GroupId(c.0) == group) {
                    Some(&(_, c)) if index <= c => Verdict::Release,
                    _ => Verdict::Wait,
                }
            }
            Watermark::Fsynced => Verdict::Wait,
            Watermark::Ordered => Verdict::Release,
        }
    }

    #[test]
    fn output_of_a_batch_over_several_groups_leaves_once_every_group_reached_its_watermark() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        let (b, mut rb) = conn(2);
        holds.hold(&a, in_group(0, 4), vec![in_group(1, 7)], true, false, |o| {
            o.extend(b"+OK\r\n+OK\r\n")
        });
        holds.hold(&b, in_group(1, 2), vec![], true, false, |o| {
            o.extend(b"+b\r\n")
        });
        // Group 0 at 4, group 1 at 6: b's leaves, a's waits for group 1.
        holds.settle(committed(&[(0, 4), (1, 6)]));
        assert_eq!(received(&mut rb), (b"+b\r\n".to_vec(), true, false));
        assert_eq!(received(&mut ra).0, b"");
        // Group 1 reaches 7 while group 0 no longer confirms anything (a reached watermark is
        // not asked again): a's leaves.
        holds.settle(committed(&[(1, 7)]));
        assert_eq!(received(&mut ra), (b"+OK\r\n+OK\r\n".to_vec(), true, false));
        assert!(holds.is_empty());
    }

    #[test]
    fn output_over_several_groups_is_dropped_when_any_one_drops_even_behind_a_waiting_entry() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        holds.hold(&a, in_group(0, 9), vec![], false, false, |o| {
            o.extend(b"+a1\r\n")
        });
        holds.hold(
            &a,
            in_group(0, 3),
            vec![in_group(1, 3)],
            false,
            false,
            |o| o.extend(b"+a2\r\n"),
        );
        holds.hold(&a, in_group(0, 4), vec![], true, false, |o| {
            o.extend(b"+a3\r\n")
        });
        // Group 1 deposed while a's first entry still waits on group 0: the second is dropped,
        // the connection closes, and nothing of it after the first may ever leave.
        holds.settle(|wm| match *wm {
            Watermark::Committed {
                group: GroupId(1), ..
            } => Verdict::Drop,
            _ => Verdict::Wait,
        });
        holds.settle(committed(&[(0, 10)]));
        let (data, _, close) = received(&mut ra);
        assert!(close);
        assert!(
            !data.windows(3).any(|w| w == b"+a2" || w == b"+a3"),
            "{data:?}"
        );
        assert!(holds.is_empty());
        assert!(holds.dropped.is_empty());
    }

    #[test]
    fn dropped_output_never_leaves_and_the_connection_closes() {
        let mut holds = Holds::default();
        let (a, mut ra) = conn(1);
        a.extend(b"+earlier\r\n");
        holds.hold(&a, Watermark::Fsynced, vec![], true, false, |o| {
            o.extend(b"+held\r\n")
        });
        holds.settle(|_| Verdict::Drop);
        assert_eq!(received(&mut ra), (b"+earlier\r\n".to_vec(), true, true));
        a.extend(b"+later\r\n");
        assert_eq!(received(&mut ra).0, b"");
    }
}
