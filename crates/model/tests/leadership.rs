//! The latch's and the selector's step-down against session expiry, in discrete time.

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

/// The latch: after a step-down by the clock it leads again with the same node whenever a late
/// answer moves the clock on, never while the server may have expired its session.
#[test]
fn a_latch_that_leads_again_when_the_clock_allows_never_overlaps_the_next_leader() {
    let mut model = LeadershipModel { reclaim: true, ..LeadershipModel::new() };
    if zk_recipes_model::bounds::deep() {
        model.answer_delay_ticks = 5;
        model.horizon_ticks = 50;
    }
    let report = check(model);
    println!("leadership, latch: {}", report.summary());
    assert!(report.holds(), "{}", report.summary());
}

/// A latch that claims again by a clock counted from the answers' arrival leads beside the next
/// leader.
#[test]
fn negative_control_a_latch_claiming_again_by_a_clock_counted_from_answers_lets_two_lead() {
    let bad = LeadershipModel {
        reclaim: true,
        variant: LeadershipVariant::CountFromAnswer,
        ..LeadershipModel::new()
    };
    let report = check(bad);
    println!("leadership, latch counted from answers: {}", report.summary());
    assert!(report.trace(TWO_LEADERS).is_some(), "{}", report.summary());
}

/// A close lets the leadership run on through its grace (here four ticks), the clock's rule still
/// applying, and ends the session only once it stopped: the next leader never starts early. A
/// shorter horizon (30 ticks, a session timeout and a half) keeps the close at every tick cheap.
#[test]
fn a_closed_leadership_ends_before_the_next_leader_starts() {
    for reclaim in [false, true] {
        let model = LeadershipModel {
            close_grace_ticks: Some(4),
            reclaim,
            horizon_ticks: 30,
            ..LeadershipModel::new()
        };
        let report = check(model);
        println!("leadership, closed (reclaim {reclaim}): {}", report.summary());
        assert!(report.holds(), "{}", report.summary());
    }
}

#[test]
fn negative_control_a_close_that_ends_the_session_before_the_leadership_lets_two_lead() {
    let bad = LeadershipModel {
        close_grace_ticks: Some(4),
        variant: LeadershipVariant::CloseEndsSessionFirst,
        ..LeadershipModel::new()
    };
    let report = check(bad);
    println!("leadership, session ended at the close: {}", report.summary());
    assert!(report.trace(TWO_LEADERS).is_some(), "{}", report.summary());
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
