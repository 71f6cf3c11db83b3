//! A busy session's batched creates and deletes, in layers.

use zk_recipes_model::batch::{BatchModel, BatchOp, BatchVariant};
use zk_recipes_model::check::check;

const TOKENS: &str = "under each parent, czxids strictly increase with sequences";
const ONCE: &str = "no call makes two nodes";

/// Three creates under one lock, one under another, a delete; a batch takes four, so one waits for
/// the next batch; one multi may fail or lose its answer; another session may create between
/// layers. Every queue order.
fn model(variant: BatchVariant) -> BatchModel {
    BatchModel {
        operations: vec![
            BatchOp::Create(0),
            BatchOp::Create(0),
            BatchOp::Create(0),
            BatchOp::Create(1),
            BatchOp::Delete,
        ],
        max_operations: 4,
        faults: if zk_recipes_model::bounds::deep() { 2 } else { 1 },
        other_creates: if zk_recipes_model::bounds::deep() { 2 } else { 1 },
        variant,
    }
}

#[test]
fn layers_keep_tokens_apart_and_settle_each_create_once() {
    let report = check(model(BatchVariant::Library));
    println!("batches: {}", report.summary());
    assert!(report.holds(), "{}", report.summary());
}

#[test]
fn negative_control_one_multi_per_batch_shares_a_token() {
    let report = check(model(BatchVariant::OneMultiPerBatch));
    println!("one multi per batch: {}", report.summary());
    println!("{}", report.trace(TOKENS).unwrap_or_default());
    assert!(report.trace(TOKENS).is_some(), "{}", report.summary());
}

#[test]
fn negative_control_a_blind_retry_makes_two_nodes() {
    let report = check(model(BatchVariant::BlindRetry));
    println!("blind retry: {}", report.summary());
    assert!(report.trace(ONCE).is_some(), "{}", report.summary());
}
