//! A counting wrapper around mimalloc: INFO's `used_memory` and `maxmemory` read real heap
//! usage instead of an estimate.
//!
//! mimalloc rather than glibc's malloc for speed, as Redis ships jemalloc. Its aligned entry
//! points are slow (and may over-allocate) when a block of the size class is not already
//! aligned, so: alignment up to 8, which every mimalloc block has, takes the plain calls; Lua's
//! 16-byte-aligned requests (mlua's SYS_MIN_ALIGN) are rounded up to a multiple of 16, whose
//! size classes are 16-aligned, so the aligned call takes its fast path.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

pub struct CountingAlloc;

/// Bytes allocated, as of the last flush of every thread's `PENDING`.
static ALLOCATED: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// How far a thread's unflushed count may drift before it is added to `ALLOCATED`. A locked
/// read-modify-write per allocation and per free cost ~20 cycles each, several times per
/// request (`__rust_dealloc` 8 % of a pipelined SET run); a thread-local add costs
/// one. The total is off by at most this much per thread (a handful of threads), far below
/// anything maxmemory or INFO resolves.
const FLUSH_AT: isize = 64 * 1024;

thread_local! {
    /// This thread's allocations minus its frees since its last flush. A `const` Cell with no
    /// destructor: reachable from the allocator at any time, even while the thread exits.
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

#[inline]
fn count(delta: isize) {
    // `try_with`: the slot outlives every use in practice (no destructor), but a failure must
    // never panic inside the allocator; the change then goes straight to the total.
    let flushed = PENDING.try_with(|p| {
        let v = p.get() + delta;
        if (-FLUSH_AT..=FLUSH_AT).contains(&v) {
            p.set(v);
        } else {
            p.set(0);
            ALLOCATED.fetch_add(v, Ordering::Relaxed);
        }
    });
    if flushed.is_err() {
        ALLOCATED.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Every mimalloc block is aligned to a word.
const PLAIN_ALIGN: usize = 8;

fn padded(size: usize, align: usize) -> usize {
    if align == 16 {
        size.next_multiple_of(16)
    } else {
        size
    }
}

type Plain = unsafe extern "C" fn(usize) -> *mut c_void;
type Aligned = unsafe extern "C" fn(usize, usize) -> *mut c_void;

/// One allocation through the plain or the aligned entry point (see the module comment).
///
/// # Safety
/// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
unsafe fn counted(layout: Layout, plain: Plain, aligned: Aligned) -> *mut u8 {
    // SAFETY: mimalloc returns null or a block of at least the size, with the alignment
    // (plain calls only for alignments every block has).
    let p = unsafe {
        if layout.align() <= PLAIN_ALIGN {
            plain(layout.size())
        } else {
            aligned(padded(layout.size(), layout.align()), layout.align())
        }
    } as *mut u8;
    if !p.is_null() {
        count(layout.size() as isize);
    }
    p
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { counted(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (mimalloc frees any of its blocks alike).
        unsafe { mi::mi_free(ptr as *mut c_void) };
        count(-(layout.size() as isize));
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { counted(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`'s alignment, kept on resize.
        let p = unsafe {
            if layout.align() <= PLAIN_ALIGN {
                mi::mi_realloc(ptr as *mut c_void, new_size)
            } else {
                mi::mi_realloc_aligned(
                    ptr as *mut c_void,
                    padded(new_size, layout.align()),
                    layout.align(),
                )
            }
        } as *mut u8;
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Memory goes back to the system as soon as it is free, instead of mimalloc's default delay and
/// eager arena commits: a lock server's RSS should follow its keys (measured, 100 k lock keys:
/// 210 -> 169 B per key, against Redis's 202 B). Called once at start-up.
pub fn configure() {
    // mimalloc v2's `mi_option_e` (mimalloc.h); the -sys crate names only some of them.
    const ARENA_EAGER_COMMIT: mi::mi_option_t = 4;
    const PURGE_DELAY: mi::mi_option_t = 15;
    const ALLOW_THP: mi::mi_option_t = 37;
    // SAFETY: plain option setters, valid at any time.
    unsafe {
        mi::mi_option_set(PURGE_DELAY, 0);
        mi::mi_option_set(ARENA_EAGER_COMMIT, 0);
        mi::mi_option_set(ALLOW_THP, 0);
    }
    // No transparent huge pages, as Redis (`disable-thp`): mimalloc asks for them on its
    // regions, and the first write to each 2 MiB page then zeroes (and may compact) memory
    // inside whatever request touched it. Loading 3 M keys showed 4-5 ms stalls every ~4 MiB
    // of new entries and a dozen in a row when the key index doubled (a 32 MiB table);
    // PING's worst round trip while loading 2 M keys was 86-131 ms with them.
    // SAFETY: prctl with this option only sets a flag on the calling process.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Bytes currently allocated on the Rust heap (Lua's allocations go through it too), with the
/// calling thread's unflushed count (other threads' are within `FLUSH_AT` each).
/// The allocator as INFO's `mem_allocator` and `deadbolt -v` name it (Redis: `jemalloc-5.3.0`).
pub fn allocator_name() -> String {
    // SAFETY: mi_version only returns a compile-time constant.
    let v = unsafe { mi::mi_version() };
    // MI_MALLOC_VERSION: major, 2 digits minor, 2 digits patch since 2.2 (20302); one digit
    // each before (217).
    if v >= 10000 {
        format!("mimalloc-{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    } else {
        format!("mimalloc-{}.{}.{}", v / 100, (v / 10) % 10, v % 10)
    }
}

pub fn used_memory() -> usize {
    let own = PENDING.try_with(Cell::get).unwrap_or(0);
    let used = (ALLOCATED.load(Ordering::Relaxed) + own).max(0) as usize;
    if used > PEAK.load(Ordering::Relaxed) {
        PEAK.store(used, Ordering::Relaxed);
    }
    used
}

pub fn peak_memory() -> usize {
    PEAK.load(Ordering::Relaxed).max(used_memory())
}

/// Resident set size from /proc (0 where unavailable).
pub fn rss_bytes() -> usize {
    let page = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<usize>().ok())
        })
        .map(|pages| pages * page)
        .unwrap_or(0)
}

/// Memory mimalloc holds read/write for the process, free space in its pages included (an upper
/// bound for INFO's `allocator_active`: on Linux it counts reserved arena memory not yet touched).
pub fn allocator_committed() -> usize {
    let mut commit = 0usize;
    // SAFETY: every out-parameter but one is null, which mi_process_info allows; `commit` is a
    // valid, writable usize for the duration of the call.
    unsafe {
        mi::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    commit
}

/// Returns freed pages to the system now (MEMORY PURGE, as Redis's jemalloc_purge).
pub fn purge() {
    // SAFETY: mi_collect only walks the allocator's own free lists; valid at any time.
    unsafe { mi::mi_collect(true) }
}

/// The allocator's own statistics report (MEMORY MALLOC-STATS; Redis prints jemalloc's).
pub fn stats_text() -> String {
    unsafe extern "C" fn collect(msg: *const std::ffi::c_char, arg: *mut c_void) {
        if msg.is_null() || arg.is_null() {
            return;
        }
        // SAFETY: `arg` is the `String` passed below, alive and exclusively ours for the call;
        // mimalloc passes a NUL-terminated message.
        unsafe {
            let out = &mut *(arg as *mut String);
            out.push_str(&std::ffi::CStr::from_ptr(msg).to_string_lossy());
        }
    }
    let mut out = String::new();
    // SAFETY: the callback only appends to `out`, which outlives the call.
    unsafe { mi::mi_stats_print_out(Some(collect), &mut out as *mut String as *mut c_void) };
    out
}
