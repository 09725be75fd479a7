//! The one hold queue: output that may not leave before the log says so. Under `appendfsync
//! always` a batch that wrote waits for the fsync of the round; in a cluster a leader's batch
//! waits for its entries to commit on a majority, or, when it logged nothing, for a read
//! barrier. The output itself is already in the connection's `OutBuf`, behind its gate; an
//! entry here says when the gate may move (`Server::release_held`).

use crate::machine::output::ConnOut;
use std::collections::VecDeque;
use std::rc::Rc;

/// What a held batch waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watermark {
    /// The fsync of the append-only file that follows the round.
    Fsynced,
    /// The cluster log has committed `index` and the read barrier `read` is confirmed, while
    /// this node still leads in `term`. `index` and `read` 0: nothing (RAFT TRANSFER's OK).
    Committed { index: u64, read: u64, term: u64 },
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
