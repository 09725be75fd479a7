//! I/O threads (`io-threads N`), as Redis 7.0's: the executor's loop polls, and in a pass
//! with enough connections to read or write it hands the socket work out to N-1 threads and
//! takes a share itself, then waits until every share is done. Nothing else happens while a
//! fan-out runs: the executor runs no command and touches no connection it handed out, so
//! commands, MULTI blocks and scripts stay on one thread, in the order they are today, and a
//! connection is only ever touched by one thread at a time.
//!
//! The pool knows nothing of connections: `Worker::work` is called with each item of a
//! `Pool::run`, item `i` on thread `i % N` (thread 0 being the caller). Between fan-outs the
//! threads sleep on their condition variable; an idle server spends no CPU on them.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// What one thread does with each item it is given.
pub trait Worker: Send + 'static {
    type Item;
    /// What the fan-out is for (read or write, and the pass's clock).
    type Phase: Copy + Send + 'static;
    fn work(&mut self, item: &mut Self::Item, phase: Self::Phase);
}

/// A pointer to an item, sent to the thread whose share it is in (see `Pool::run`).
struct Ptr<I>(*mut I);

// SAFETY: a `Ptr` is only dereferenced by the one thread it was posted to, during the
// fan-out it was posted for, while the posting thread waits and touches the item through no
// other path (`Pool::run`'s contract).
unsafe impl<I> Send for Ptr<I> {}

struct Post<W: Worker> {
    /// Bumped for each fan-out this thread has a share in.
    gen: u64,
    phase: Option<W::Phase>,
    items: Vec<Ptr<W::Item>>,
    stop: bool,
}

struct Slot<W: Worker> {
    post: Mutex<Post<W>>,
    cv: Condvar,
}

/// Shares of the current fan-out not finished yet.
struct Done {
    left: Mutex<usize>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A worker that panicked aborted the process (`serve`); a poisoned lock holds nothing
    // half-changed that matters.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Pool<W: Worker> {
    slots: Vec<Arc<Slot<W>>>,
    done: Arc<Done>,
    handles: Vec<JoinHandle<()>>,
}

impl<W: Worker> Pool<W> {
    /// Starts `threads - 1` threads (the caller is thread 0), each with its worker.
    pub fn start(threads: usize, mut make: impl FnMut() -> W) -> std::io::Result<Pool<W>> {
        let done = Arc::new(Done {
            left: Mutex::new(0),
            cv: Condvar::new(),
        });
        let mut pool = Pool {
            slots: Vec::new(),
            done: done.clone(),
            handles: Vec::new(),
        };
        for i in 1..threads.max(1) {
            let slot = Arc::new(Slot {
                post: Mutex::new(Post {
                    gen: 0,
                    phase: None,
                    items: Vec::new(),
                    stop: false,
                }),
                cv: Condvar::new(),
            });
            let worker = make();
            let (s, d) = (slot.clone(), done.clone());
            let handle = std::thread::Builder::new()
                .name(format!("io_thd_{i}"))
                .spawn(move || serve(worker, &s, &d))?;
            pool.slots.push(slot);
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Threads that share a fan-out, the caller included.
    pub fn threads(&self) -> usize {
        self.slots.len() + 1
    }

    /// Calls `work` on every item, item `i` on thread `i % threads()`, `local` doing the
    /// caller's share; returns once all are done.
    ///
    /// # Safety
    /// Every pointer is valid and distinct, and until this returns nothing else reads or
    /// writes the items (the items may hold `Rc`s and `Cell`s: the workers must not clone or
    /// drop those, and no other thread may use them meanwhile).
    pub unsafe fn run(&self, items: &[*mut W::Item], phase: W::Phase, local: &mut W) {
        let n = self.threads();
        let busy = self.slots.len().min(items.len().saturating_sub(1));
        *lock(&self.done.left) = busy;
        for (t, slot) in self.slots.iter().enumerate().take(busy) {
            let mut post = lock(&slot.post);
            post.items.clear();
            post.items
                .extend(items.iter().skip(t + 1).step_by(n).map(|p| Ptr(*p)));
            post.phase = Some(phase);
            post.gen += 1;
            drop(post);
            slot.cv.notify_one();
        }
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            for p in items.iter().step_by(n) {
                // SAFETY: the caller's contract; this share is only touched here.
                local.work(unsafe { &mut **p }, phase);
            }
        }));
        if ran.is_err() {
            // Unwinding now would free the connections while the workers still hold pointers
            // to them: as a worker's panic, this aborts.
            tracing::error!("The executor panicked during an I/O fan-out; aborting");
            std::process::abort();
        }
        let mut left = lock(&self.done.left);
        while *left > 0 {
            left = self.done.cv.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl<W: Worker> Drop for Pool<W> {
    fn drop(&mut self) {
        for slot in &self.slots {
            lock(&slot.post).stop = true;
            slot.cv.notify_one();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// An I/O thread: sleeps until its share of a fan-out is posted, does it, says so.
fn serve<W: Worker>(mut worker: W, slot: &Slot<W>, done: &Done) {
    let mut seen = 0;
    let mut post = lock(&slot.post);
    loop {
        while post.gen == seen && !post.stop {
            post = slot.cv.wait(post).unwrap_or_else(|e| e.into_inner());
        }
        if post.stop {
            return;
        }
        seen = post.gen;
        if let Some(phase) = post.phase {
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
                for p in &post.items {
                    // SAFETY: `Pool::run`'s contract: posted to this thread only, and the
                    // poster waits below until this share is done.
                    worker.work(unsafe { &mut *p.0 }, phase);
                }
            }));
            if ran.is_err() {
                // The executor waits for this share and the connections may be half
                // changed: nothing sound is left to do.
                tracing::error!("An I/O thread panicked; aborting");
                std::process::abort();
            }
        }
        post.items.clear();
        let mut left = lock(&done.left);
        *left -= 1;
        if *left == 0 {
            done.cv.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Add(u64);
    impl Worker for Add {
        type Item = (u64, std::thread::ThreadId);
        type Phase = u64;
        fn work(&mut self, item: &mut Self::Item, phase: u64) {
            self.0 += 1;
            item.0 += phase;
            item.1 = std::thread::current().id();
        }
    }

    #[test]
    fn every_item_once_spread_over_the_threads() {
        let pool = Pool::start(4, || Add(0)).unwrap();
        assert_eq!(pool.threads(), 4);
        let me = std::thread::current().id();
        let mut local = Add(0);
        for round in 1..50u64 {
            let mut items: Vec<(u64, std::thread::ThreadId)> =
                (0..round).map(|i| (i, me)).collect();
            let ptrs: Vec<*mut _> = items.iter_mut().map(|x| x as *mut _).collect();
            // SAFETY: distinct, live, and untouched until `run` returns.
            unsafe { pool.run(&ptrs, 1000, &mut local) };
            for (i, x) in items.iter().enumerate() {
                assert_eq!(x.0, i as u64 + 1000);
                // Item i ran on thread i % 4; thread 0 is this one.
                assert_eq!(x.1 == me, i % 4 == 0, "item {i} of {round}");
            }
        }
    }

    #[test]
    fn one_thread_is_the_caller_alone() {
        let pool = Pool::start(1, || Add(0)).unwrap();
        assert_eq!(pool.threads(), 1);
        let mut items = [(1u64, std::thread::current().id()); 3];
        let ptrs: Vec<*mut _> = items.iter_mut().map(|x| x as *mut _).collect();
        let mut local = Add(0);
        // SAFETY: as above.
        unsafe { pool.run(&ptrs, 1, &mut local) };
        assert_eq!(local.0, 3);
        assert!(items.iter().all(|x| x.0 == 2));
    }
}
