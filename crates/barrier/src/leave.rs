//! The double barrier's leave order as a pure function: what a leaving member does with one
//! listing of the members. The leave loop ([`crate::Entered::leave`]) drives it, and the
//! repository's `crates/model` checks it beside Curator's order.

/// What a leaving member does after one listing of the barrier's members (the `ready` node left
/// out).
///
/// ```
/// use zk_recipes_barrier::decisions::{leave_step, LeaveStep};
///
/// // The lowest member keeps its node while others are there: Curator's members wait on it.
/// assert_eq!(leave_step(&["a", "b"], "a"), LeaveStep { delete_own_node: false, everyone_left: false });
/// assert_eq!(leave_step(&["a", "b"], "b"), LeaveStep { delete_own_node: true, everyone_left: false });
/// assert_eq!(leave_step(&["a"], "a"), LeaveStep { delete_own_node: true, everyone_left: true });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaveStep {
    /// Delete our node now (a node already gone is fine).
    pub delete_own_node: bool,
    /// No other member is left: the round is over once our node is gone.
    pub everyone_left: bool,
}

/// Curator's order: a member whose name is not the lowest of those listed deletes its node at
/// once; the lowest keeps its node until every other member is gone. Curator 5.4's members take
/// the lowest node's going for the end of the round, so a lowest member that left first would let
/// them out while others had not.
pub fn leave_step<S: AsRef<str>>(members: &[S], our_name: &str) -> LeaveStep {
    let others_remain = members.iter().any(|member| member.as_ref() != our_name);
    let we_are_lowest = members.iter().map(AsRef::as_ref).min() == Some(our_name);
    LeaveStep { delete_own_node: !others_remain || !we_are_lowest, everyone_left: !others_remain }
}
