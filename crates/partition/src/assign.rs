//! Who gets which item: pure functions of the items and the party, the same in every worker.

use std::collections::BTreeSet;

/// kazoo's `SetPartitioner._partitioner`: `sorted(items)[i::len(workers)]`, `i` the index of the
/// first of `workers` (sorted, duplicates kept) equal to `identifier`. Python sorts `str` by code
/// point, as Rust sorts `str`. Empty if `identifier` is not among the workers.
pub(crate) fn kazoo_share(items: &[String], workers: &[String], identifier: &str) -> BTreeSet<String> {
    let mut sorted_items: Vec<&String> = items.iter().collect();
    sorted_items.sort();
    let mut sorted_workers: Vec<&String> = workers.iter().collect();
    sorted_workers.sort();
    let Some(index) = sorted_workers.iter().position(|worker| *worker == identifier) else {
        return BTreeSet::new();
    };
    sorted_items.into_iter().skip(index).step_by(sorted_workers.len()).cloned().collect()
}

/// Our layout's rule: balanced rendezvous hashing. Each worker (duplicates dropped, sorted) may
/// take `items / workers` items, the first `items % workers` of them one more; each item, in
/// sorted order, goes to the worker that scores it highest among those with room left. Exactly
/// balanced, and a join or leave moves few items beyond those it must.
pub(crate) fn balanced_share(items: &[String], workers: &[String], identifier: &str) -> BTreeSet<String> {
    let workers: Vec<&String> = workers.iter().collect::<BTreeSet<_>>().into_iter().collect();
    let Some(ours) = workers.iter().position(|worker| *worker == identifier) else {
        return BTreeSet::new();
    };
    let mut sorted_items: Vec<&String> = items.iter().collect();
    sorted_items.sort();
    let (base, extra) = (sorted_items.len() / workers.len(), sorted_items.len() % workers.len());
    let mut room: Vec<usize> = (0..workers.len()).map(|index| base + usize::from(index < extra)).collect();
    let mut share = BTreeSet::new();
    for item in sorted_items {
        let chosen = (0..workers.len())
            .filter(|index| room[*index] > 0)
            .max_by_key(|index| (score(workers[*index], item), std::cmp::Reverse(*index)))
            .expect("the rooms add up to the items");
        room[chosen] -= 1;
        if chosen == ours {
            share.insert(item.clone());
        }
    }
    share
}

/// A score of `(worker, item)` every process computes alike: FNV-1a over both names, a zero byte
/// between, then SplitMix64's finalizer to spread the bits.
fn score(worker: &str, item: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in worker.bytes().chain([0]).chain(item.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, count: usize) -> Vec<String> {
        (0..count).map(|index| format!("{prefix}{index:02}")).collect()
    }

    fn shares(
        rule: fn(&[String], &[String], &str) -> BTreeSet<String>,
        items: &[String],
        workers: &[String],
    ) -> Vec<BTreeSet<String>> {
        workers.iter().map(|worker| rule(items, workers, worker)).collect()
    }

    fn assert_partition(items: &[String], shares: &[BTreeSet<String>]) {
        let mut seen = BTreeSet::new();
        for share in shares {
            for item in share {
                assert!(seen.insert(item.clone()), "{item} assigned twice");
            }
        }
        assert_eq!(seen, items.iter().cloned().collect::<BTreeSet<_>>(), "every item assigned");
    }

    #[test]
    fn kazoo_rule_is_sorted_items_from_our_index_stepping_by_the_party_size() {
        let items: Vec<String> = ["d", "a", "c", "b", "e"].map(String::from).to_vec();
        let workers: Vec<String> = ["w2", "w1"].map(String::from).to_vec();
        assert_eq!(kazoo_share(&items, &workers, "w1"), ["a", "c", "e"].map(String::from).into());
        assert_eq!(kazoo_share(&items, &workers, "w2"), ["b", "d"].map(String::from).into());
        assert!(kazoo_share(&items, &workers, "w3").is_empty());
        // Python's sort of str: by code point, so "10" before "9".
        let items: Vec<String> = ["9", "10"].map(String::from).to_vec();
        assert_eq!(kazoo_share(&items, &["only".to_owned()], "only").len(), 2);
        assert_eq!(kazoo_share(&items, &["a".to_owned(), "b".to_owned()], "a"), ["10".to_owned()].into());
    }

    #[test]
    fn kazoo_rule_with_a_duplicate_identifier_gives_both_the_first_index() {
        let items = names("i", 6);
        let workers: Vec<String> = ["x", "x", "y"].map(String::from).to_vec();
        assert_eq!(kazoo_share(&items, &workers, "x"), ["i00", "i03"].map(String::from).into());
        assert_eq!(kazoo_share(&items, &workers, "y"), ["i02", "i05"].map(String::from).into());
    }

    #[test]
    fn balanced_rule_partitions_exactly_and_evenly() {
        for (item_count, worker_count) in [(64, 5), (10, 4), (3, 5), (1, 1), (100, 7)] {
            let items = names("item-", item_count);
            let workers = names("worker-", worker_count);
            let shares = shares(balanced_share, &items, &workers);
            assert_partition(&items, &shares);
            let sizes: Vec<usize> = shares.iter().map(BTreeSet::len).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{item_count} items over {worker_count}: {sizes:?}");
        }
    }

    #[test]
    fn balanced_rule_moves_few_items_when_a_worker_joins() {
        let items = names("item-", 64);
        let before = shares(balanced_share, &items, &names("w", 4));
        let after_workers = names("w", 5);
        let after = shares(balanced_share, &items, &after_workers);
        assert_partition(&items, &after);
        let moved: usize = before.iter().zip(&after).map(|(old, new)| old.difference(new).count()).sum();
        // The newcomer must get 12 or 13; round robin would move about 50.
        assert!(moved <= 24, "{moved} items moved");
    }

    #[test]
    fn balanced_rule_ignores_input_order_and_duplicate_workers() {
        let items = names("item-", 20);
        let mut reversed = items.clone();
        reversed.reverse();
        let workers: Vec<String> = ["b", "a", "b"].map(String::from).to_vec();
        assert_eq!(
            balanced_share(&items, &workers, "a"),
            balanced_share(&reversed, &["a".into(), "b".into()], "a")
        );
    }
}
