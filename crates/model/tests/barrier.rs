//! The double barrier's leave with our members and Curator's mixed, every order of names.

use zk_recipes_model::barrier::{BarrierModel, BarrierVariant, MemberKind};
use zk_recipes_model::check::check;

const EARLY_EXIT: &str = "no member leaves while another has not called leave";

/// Every assignment of kinds to three and four members (member 0 has the lowest name).
fn mixes(count: u32) -> impl Iterator<Item = Vec<MemberKind>> {
    (0..1u32 << count).map(move |bits| {
        (0..count)
            .map(|member| if bits >> member & 1 == 1 { MemberKind::Curator } else { MemberKind::Ours })
            .collect()
    })
}

#[test]
fn every_mix_of_our_members_and_curators_leaves_in_order() {
    let counts: &[u32] = if zk_recipes_model::bounds::deep() { &[3, 4, 5] } else { &[3, 4] };
    for &count in counts {
        for members in mixes(count) {
            let report = check(BarrierModel { members: members.clone(), variant: BarrierVariant::Library });
            println!("{members:?}: {}", report.summary());
            for property in report.counterexamples.keys() {
                println!("{property}:\n{}", report.trace(property).unwrap_or_default());
            }
            assert!(report.holds(), "{members:?}: {}", report.summary());
        }
    }
}

#[test]
fn negative_control_our_lowest_member_deleting_its_node_at_once_lets_curators_out_early() {
    let members = vec![MemberKind::Ours, MemberKind::Curator, MemberKind::Curator];
    let report = check(BarrierModel { members, variant: BarrierVariant::DeleteAtOnce });
    println!("delete at once: {}", report.summary());
    let trace = report.trace(EARLY_EXIT);
    println!("{}", trace.clone().unwrap_or_default());
    assert!(trace.is_some(), "{}", report.summary());
}
