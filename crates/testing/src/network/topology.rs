//! Which member pairs a partition cuts, decided without I/O: from groups, a ring or a bridge, as a
//! set of unordered index pairs. The namespaces floor turns the set into routes.

use std::collections::BTreeSet;

use crate::error::{Result, TestingError};

/// An unordered pair of member indices, smaller first.
pub(crate) type Pair = (usize, usize);

/// The pair `a`–`b`, smaller index first.
pub(crate) fn pair(a: usize, b: usize) -> Pair {
    (a.min(b), a.max(b))
}

/// The pairs cut when `groups` cannot talk to each other; members of `0..size` named in no group
/// form one more group of their own.
///
/// # Errors
/// [`TestingError::NoSuchMember`] for an index out of range; [`TestingError::InvalidArgument`] for
/// a member named twice.
pub(crate) fn groups_cuts(size: usize, groups: &[&[usize]]) -> Result<BTreeSet<Pair>> {
    let mut group_of = vec![None; size];
    for (group, members) in groups.iter().enumerate() {
        for &index in *members {
            let slot = group_of.get_mut(index).ok_or(TestingError::NoSuchMember { index, size })?;
            if slot.is_some() {
                return Err(TestingError::InvalidArgument(format!(
                    "member {index} is named in more than one group of the partition"
                )));
            }
            *slot = Some(group);
        }
    }
    // The members named nowhere: one more group.
    let rest = groups.len();
    let group_of: Vec<usize> = group_of.into_iter().map(|group| group.unwrap_or(rest)).collect();
    Ok(all_pairs(size).filter(|&(a, b)| group_of[a] != group_of[b]).collect())
}

/// The pairs cut in a ring: every member keeps only its two neighbours (`i - 1` and `i + 1`,
/// modulo `size`).
pub(crate) fn ring_cuts(size: usize) -> BTreeSet<Pair> {
    all_pairs(size).filter(|&(a, b)| b - a != 1 && !(a == 0 && b == size - 1)).collect()
}

/// The pairs cut by a bridge through `middle`: the members below it and those above it cannot
/// talk to each other, and every member still talks to `middle`.
pub(crate) fn bridge_cuts(size: usize, middle: usize) -> BTreeSet<Pair> {
    all_pairs(size).filter(|&(a, b)| a < middle && b > middle).collect()
}

/// Every unordered pair of `0..size`.
fn all_pairs(size: usize) -> impl Iterator<Item = Pair> {
    (0..size).flat_map(move |a| (a + 1..size).map(move |b| (a, b)))
}

/// Whether `member` still has a link to `other` under `cuts`.
pub(crate) fn linked(cuts: &BTreeSet<Pair>, member: usize, other: usize) -> bool {
    member == other || !cuts.contains(&pair(member, other))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cut_every_pair_across_groups_and_the_rest_is_a_group() {
        let cuts = groups_cuts(5, &[&[0, 1], &[2]]).expect("valid");
        // {0,1} | {2} | {3,4} (the rest)
        let expected: BTreeSet<Pair> =
            [(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4)].into_iter().collect();
        assert_eq!(cuts, expected);
        assert!(linked(&cuts, 3, 4) && linked(&cuts, 1, 0) && !linked(&cuts, 2, 4));
    }

    #[test]
    fn one_named_member_is_isolated() {
        let cuts = groups_cuts(3, &[&[1]]).expect("valid");
        assert_eq!(cuts, [(0, 1), (1, 2)].into_iter().collect());
    }

    #[test]
    fn groups_reject_bad_indices_and_repeats() {
        assert!(matches!(groups_cuts(3, &[&[3]]), Err(TestingError::NoSuchMember { index: 3, size: 3 })));
        assert!(matches!(groups_cuts(3, &[&[0], &[0, 1]]), Err(TestingError::InvalidArgument(_))));
        assert!(groups_cuts(3, &[&[0, 1, 2]]).expect("valid").is_empty());
    }

    #[test]
    fn a_ring_keeps_only_neighbours() {
        let cuts = ring_cuts(5);
        for member in 0..5 {
            let reachable: Vec<usize> =
                (0..5).filter(|&other| other != member && linked(&cuts, member, other)).collect();
            let (left, right) = ((member + 4) % 5, (member + 1) % 5);
            assert_eq!(
                reachable,
                {
                    let mut both = vec![left, right];
                    both.sort();
                    both
                },
                "member {member}"
            );
        }
        assert!(ring_cuts(3).is_empty(), "in a ring of three everyone is a neighbour");
    }

    #[test]
    fn a_bridge_joins_two_sides_through_the_middle() {
        let cuts = bridge_cuts(5, 2);
        let expected: BTreeSet<Pair> = [(0, 3), (0, 4), (1, 3), (1, 4)].into_iter().collect();
        assert_eq!(cuts, expected);
        assert!((0..5).all(|member| linked(&cuts, member, 2)));
    }
}
