//! Live heap: the bytes this process has allocated and not yet freed, counted by a global
//! allocator that wraps the system's. Unlike RSS it does not depend on what the heap held before
//! (freed pages the allocator keeps, fragmentation), so a delta measures what a structure holds.
//!
//! A bench that wants it installs the allocator in its own binary:
//! `#[global_allocator] static ALLOCATOR: support::live_heap::CountingAllocator = support::live_heap::CountingAllocator;`
//! then reads [`live_heap_bytes`] before and after. In a bench that does not, it stays at 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator plus a counter of live bytes.
pub struct CountingAllocator;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

/// Bytes allocated and not yet freed (0 unless the bench installed [`CountingAllocator`]).
pub fn live_heap_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

#[allow(unsafe_code)]
// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        moved
    }
}
