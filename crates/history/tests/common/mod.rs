//! Helpers shared by the integration tests.

#![allow(dead_code)]

use zk_recipes_history::{Completion, History, Model, OperationId, Outcome};

pub type Checked = Result<(), zk_recipes_history::HistoryError>;

/// Asserts `outcome` is linearizable and that its witness really is one: every `Ok` operation is
/// in it exactly once, no `Fail` operation is, no operation comes after one that completed before
/// it was invoked, and replaying the model in that order gives every recorded answer. Returns the
/// order.
pub fn assert_witness<M: Model>(
    history: &History<M::Input, M::Output>,
    model: &M,
    outcome: &Outcome,
) -> Vec<OperationId> {
    let order = match outcome {
        Outcome::Linearizable(linearization) => linearization.order().to_vec(),
        other => panic!("expected linearizable, got {other}"),
    };
    let mut seen = vec![false; history.len()];
    for id in &order {
        assert!(!seen[id.index()], "{id} twice in the witness");
        seen[id.index()] = true;
    }
    for (id, operation) in history.iter() {
        match operation.completion() {
            Completion::Ok(_) => assert!(seen[id.index()], "the ok operation {id} is missing"),
            Completion::Fail => assert!(!seen[id.index()], "the failed operation {id} took effect"),
            Completion::Info => {}
        }
    }
    for (position, earlier) in order.iter().enumerate() {
        for later in &order[position + 1..] {
            let later_completed = history[*later].completed();
            let precedes = matches!(history[*later].completion(), Completion::Ok(_))
                && later_completed.is_some_and(|completed| completed < history[*earlier].invoked());
            assert!(!precedes, "{later} completed before {earlier} was invoked but comes after it");
        }
    }
    let mut state = model.init();
    for id in &order {
        let (next, answer) = model.step(&state, history[*id].input());
        if let Completion::Ok(recorded) = history[*id].completion() {
            assert_eq!(&answer, recorded, "{id} in the witness answers otherwise");
        }
        state = next;
    }
    order
}
