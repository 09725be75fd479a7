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
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct CountingAlloc;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

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
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
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
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
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
            if new_size > layout.size() {
                ALLOCATED.fetch_add(new_size - layout.size(), Ordering::Relaxed);
            } else {
                ALLOCATED.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
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
    // SAFETY: plain option setters, valid at any time.
    unsafe {
        mi::mi_option_set(PURGE_DELAY, 0);
        mi::mi_option_set(ARENA_EAGER_COMMIT, 0);
    }
}

/// Bytes currently allocated on the Rust heap (Lua's allocations go through it too).
pub fn used_memory() -> usize {
    let used = ALLOCATED.load(Ordering::Relaxed);
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
