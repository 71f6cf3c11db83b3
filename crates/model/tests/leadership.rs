//! The leader selector's step-down against session expiry, in discrete time.

use zk_recipes_model::check::check;
use zk_recipes_model::leadership::{LeadershipModel, LeadershipVariant};

const TWO_LEADERS: &str = "no tick with two leaders";

#[test]
fn the_expiry_clock_ends_a_leadership_before_the_server_may_expire_it() {
    let mut model = LeadershipModel::new();
    if zk_recipes_model::bounds::deep() {
        model.answer_delay_ticks = 5;
        model.horizon_ticks = 50;
    }
    let report = check(model);
    println!("leadership: {}", report.summary());
    assert!(report.holds(), "{}", report.summary());
}

/// The assumption stated: the stop timer fires less than the margin (two ticks) late. At the
/// margin, the checker finds two leaders.
#[test]
fn a_stop_timer_late_by_the_whole_margin_makes_two_leaders() {
    let late = LeadershipModel { timer_lateness_ticks: 2, ..LeadershipModel::new() };
    let report = check(late);
    println!("leadership, timer two ticks late: {}", report.summary());
    assert!(report.trace(TWO_LEADERS).is_some(), "{}", report.summary());
}

#[test]
fn negative_control_without_the_expiry_clock_two_lead() {
    let bad = LeadershipModel { variant: LeadershipVariant::NoExpiryClock, ..LeadershipModel::new() };
    let report = check(bad);
    println!("leadership without the expiry clock: {}", report.summary());
    println!("{}", report.trace(TWO_LEADERS).unwrap_or_default());
    assert!(report.trace(TWO_LEADERS).is_some(), "{}", report.summary());
}

#[test]
fn negative_control_a_clock_that_counts_from_the_answer_lets_two_lead() {
    let bad = LeadershipModel { variant: LeadershipVariant::CountFromAnswer, ..LeadershipModel::new() };
    let report = check(bad);
    println!("leadership counted from answers: {}", report.summary());
    println!("{}", report.trace(TWO_LEADERS).unwrap_or_default());
    assert!(report.trace(TWO_LEADERS).is_some(), "{}", report.summary());
}
