//! Random (v4) UUIDs for node markers, drawn from the operating system's generator in batches.
//!
//! Every protected create names its node with a fresh v4 UUID (Curator's `_c_<uuid>-`). Drawing
//! each one from the operating system would cost a `getrandom` system call per create; a lock
//! cycle makes only three requests, so that call would be a visible part of it. Each thread
//! keeps a small pool of the operating system's random bytes instead and refills it when it runs
//! out: one system call per [`IDS_PER_REFILL`] ids, the same bytes otherwise.
//!
//! Bytes are handed out once and cleared as they are. Like any userspace pool, it does not
//! survive `fork` without `exec` (the child would draw the parent's remaining bytes); a process
//! running an async runtime cannot fork that way anyway.

use std::cell::RefCell;

/// How many ids one refill of a thread's pool yields.
const IDS_PER_REFILL: usize = 64;
const ID_LEN: usize = 16;

struct Pool {
    bytes: [u8; IDS_PER_REFILL * ID_LEN],
    /// How many bytes have been handed out since the last refill.
    used: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool { bytes: [0; IDS_PER_REFILL * ID_LEN], used: IDS_PER_REFILL * ID_LEN })
    };
}

/// A fresh random (version 4) UUID.
///
/// # Panics
/// If the operating system's random generator fails, as `uuid::Uuid::new_v4` does.
pub(crate) fn fresh_v4() -> uuid::Uuid {
    POOL.with_borrow_mut(|pool| {
        if pool.used == pool.bytes.len() {
            getrandom::fill(&mut pool.bytes)
                .unwrap_or_else(|err| panic!("the operating system's random generator failed: {err}"));
            pool.used = 0;
        }
        let drawn = &mut pool.bytes[pool.used..pool.used + ID_LEN];
        let mut id = [0; ID_LEN];
        id.copy_from_slice(drawn);
        drawn.fill(0);
        pool.used += ID_LEN;
        uuid::Builder::from_random_bytes(id).into_uuid()
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_v4_and_distinct_across_refills_and_threads() {
        let draw = || (0..IDS_PER_REFILL * 5 + 3).map(|_| fresh_v4()).collect::<Vec<_>>();
        let here = draw();
        let there = std::thread::spawn(draw).join().expect("the other thread");
        let mut seen = HashSet::new();
        for id in here.iter().chain(&there) {
            assert_eq!(id.get_version(), Some(uuid::Version::Random), "{id}");
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert!(seen.insert(*id), "{id} drawn twice");
        }
    }

    #[test]
    fn drawn_bytes_are_cleared_from_the_pool() {
        fresh_v4();
        POOL.with_borrow(|pool| {
            assert!(pool.used >= ID_LEN);
            assert!(pool.bytes[..pool.used].iter().all(|byte| *byte == 0), "handed-out bytes are kept");
        });
    }
}
