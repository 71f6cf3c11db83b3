//! A busy session's creates and deletes sent in batches, cut into layers (one multi each) by the
//! library's `batch_layers`: a multi applied, failed as a whole (each operation then sent on its
//! own), or with its outcome unknown (each create then finds its node by its marker, or makes it
//! alone); another session's creates may land between layers.
//!
//! Invariants: under each parent, nodes in sequence order have strictly increasing czxids (no two
//! holders of one lock share a fencing token, and tokens grow with the queue); every create is
//! settled exactly once (never two nodes for one call, and one at the end).
//! Negative controls: one multi per batch; a create of unknown outcome sent again without looking.

use stateright::{Model, Property};
use zk_recipes_framework::decisions::batch_layers;

/// One queued operation.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum BatchOp {
    /// A sequential create under this parent.
    Create(u8),
    /// A delete (of a node made earlier, outside the model).
    Delete,
}

/// A known-bad variant the checker must catch, or the library as it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum BatchVariant {
    /// The library's layers and settling.
    Library,
    /// The whole batch in one multi, whatever the parents.
    OneMultiPerBatch,
    /// A create whose multi's outcome is unknown is sent again without looking for its node.
    BlindRetry,
}

/// A bounded configuration of the batch model.
#[derive(Clone, Debug)]
pub struct BatchModel {
    /// The operations queued, each its own call; the checker tries every order.
    pub operations: Vec<BatchOp>,
    /// How many operations one batch takes at most.
    pub max_operations: usize,
    /// How many multis may fail or lose their answer.
    pub faults: u8,
    /// How many creates of another session may land between layers.
    pub other_creates: u8,
    /// The protocol checked.
    pub variant: BatchVariant,
}

/// A node the model's server made.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct BatchNode {
    /// Its parent.
    pub parent: u8,
    /// Its sequence under the parent.
    pub sequence: u32,
    /// Its czxid.
    pub czxid: u32,
    /// The call that made it; `None` for another session's.
    pub call: Option<u8>,
}

/// The batch model's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct BatchState {
    /// Calls waiting for a batch, in queue order.
    pub queue: Vec<u8>,
    /// The current batch's layers not yet sent.
    pub layers: Vec<Vec<u8>>,
    /// Calls to send on their own (their multi failed, or its outcome is unknown).
    pub alone: Vec<u8>,
    /// Calls whose multi's outcome is unknown: they look for their node first.
    pub unknown: Vec<u8>,
    /// The nodes made.
    pub nodes: Vec<BatchNode>,
    /// Each parent's sequence counter.
    pub counters: Vec<u32>,
    /// The server's transaction counter.
    pub zxid: u32,
    /// Whether each call has its answer.
    pub settled: Vec<bool>,
    /// Faults still to come.
    pub faults: u8,
    /// Other sessions' creates still to come.
    pub other_creates: u8,
}

/// A step of the batch model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum BatchAction {
    /// The batcher takes the next batch off the queue, in layers.
    TakeBatch,
    /// The next layer's multi is applied.
    LayerApplied,
    /// The next layer's multi fails as a whole: nothing applied.
    LayerFailed,
    /// The next layer's multi's answer is lost; `applied` says whether the server ran it.
    LayerUnknown {
        /// Whether the server ran it.
        applied: bool,
    },
    /// A call whose multi failed or is unknown settles on its own.
    Alone(u8),
    /// Another session creates a node under this parent.
    OtherCreate(u8),
}

impl Model for BatchModel {
    type State = BatchState;
    type Action = BatchAction;

    fn init_states(&self) -> Vec<BatchState> {
        let parents = self
            .operations
            .iter()
            .filter_map(|op| match op {
                BatchOp::Create(parent) => Some(usize::from(*parent) + 1),
                BatchOp::Delete => None,
            })
            .max()
            .unwrap_or(0);
        let calls = self.operations.len() as u8;
        permutations((0..calls).collect())
            .into_iter()
            .map(|queue| BatchState {
                queue,
                layers: Vec::new(),
                alone: Vec::new(),
                unknown: Vec::new(),
                nodes: Vec::new(),
                counters: vec![0; parents],
                zxid: 1,
                settled: vec![false; self.operations.len()],
                faults: self.faults,
                other_creates: self.other_creates,
            })
            .collect()
    }

    fn actions(&self, state: &BatchState, actions: &mut Vec<BatchAction>) {
        if !state.layers.is_empty() {
            actions.push(BatchAction::LayerApplied);
            if state.faults > 0 {
                actions.push(BatchAction::LayerFailed);
                actions.push(BatchAction::LayerUnknown { applied: true });
                actions.push(BatchAction::LayerUnknown { applied: false });
            }
            if state.other_creates > 0 {
                for parent in 0..state.counters.len() as u8 {
                    actions.push(BatchAction::OtherCreate(parent));
                }
            }
        } else if state.alone.is_empty() && !state.queue.is_empty() {
            actions.push(BatchAction::TakeBatch);
        }
        for &call in &state.alone {
            actions.push(BatchAction::Alone(call));
        }
    }

    fn next_state(&self, state: &BatchState, action: BatchAction) -> Option<BatchState> {
        let mut next = state.clone();
        match action {
            BatchAction::TakeBatch => self.take_batch(&mut next),
            BatchAction::LayerApplied => {
                let layer = next.layers.remove(0);
                self.apply_layer(&mut next, &layer);
                for call in layer {
                    next.settled[usize::from(call)] = true;
                }
            }
            BatchAction::LayerFailed => {
                next.faults -= 1;
                let layer = next.layers.remove(0);
                next.alone.extend(layer);
            }
            BatchAction::LayerUnknown { applied } => {
                next.faults -= 1;
                let layer = next.layers.remove(0);
                if applied {
                    self.apply_layer(&mut next, &layer);
                }
                next.unknown.extend(layer.iter().copied());
                next.alone.extend(layer);
            }
            BatchAction::Alone(call) => {
                next.alone.retain(|other| *other != call);
                let unknown = next.unknown.contains(&call);
                next.unknown.retain(|other| *other != call);
                let made = next.nodes.iter().any(|node| node.call == Some(call));
                let looks_first = unknown && self.variant != BatchVariant::BlindRetry;
                // A delete retried finds its node gone or deletes it: one effect either way.
                let is_create = matches!(self.operations[usize::from(call)], BatchOp::Create(_));
                if is_create && !(looks_first && made) {
                    let zxid = next.zxid;
                    self.create(&mut next, call, zxid);
                    next.zxid += 1;
                }
                next.settled[usize::from(call)] = true;
            }
            BatchAction::OtherCreate(parent) => {
                next.other_creates -= 1;
                let sequence = next.counters[usize::from(parent)];
                next.counters[usize::from(parent)] += 1;
                next.nodes.push(BatchNode { parent, sequence, czxid: next.zxid, call: None });
                next.zxid += 1;
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "under each parent, czxids strictly increase with sequences",
                |_, state: &BatchState| {
                    (0..state.counters.len() as u8).all(|parent| {
                        let mut under: Vec<&BatchNode> =
                            state.nodes.iter().filter(|node| node.parent == parent).collect();
                        under.sort_by_key(|node| node.sequence);
                        under.windows(2).all(|pair| pair[0].czxid < pair[1].czxid)
                    })
                },
            ),
            Property::always("no call makes two nodes", |_, state: &BatchState| {
                (0..state.settled.len() as u8)
                    .all(|call| state.nodes.iter().filter(|node| node.call == Some(call)).count() <= 1)
            }),
            Property::always("at quiescence every create settled with its node", |model: &Self, state| {
                let mut actions = Vec::new();
                model.actions(state, &mut actions);
                !actions.is_empty()
                    || model.operations.iter().enumerate().all(|(call, op)| {
                        state.settled[call]
                            && (*op == BatchOp::Delete
                                || state.nodes.iter().any(|node| node.call == Some(call as u8)))
                    })
            }),
            Property::sometimes("a batch has two layers", |_, state: &BatchState| state.layers.len() >= 2),
        ]
    }
}

impl BatchModel {
    /// The library's layers for the queue (or one multi, in the bad variant).
    fn take_batch(&self, state: &mut BatchState) {
        let operations = state.queue.iter().map(|&call| match self.operations[usize::from(call)] {
            BatchOp::Create(parent) => (Some(parent_name(parent)), 1),
            BatchOp::Delete => (None, 1),
        });
        let operations: Vec<(Option<&str>, usize)> = operations.collect();
        let mut layer_of = batch_layers(operations, self.max_operations, usize::MAX);
        if self.variant == BatchVariant::OneMultiPerBatch {
            layer_of = layer_of.into_iter().map(|layer| layer.map(|_| 0)).collect();
        }
        let count = layer_of.iter().flatten().max().map_or(0, |last| last + 1);
        let mut layers = vec![Vec::new(); count];
        let mut rest = Vec::new();
        for (&call, layer) in state.queue.iter().zip(layer_of) {
            match layer {
                Some(layer) => layers[layer].push(call),
                None => rest.push(call),
            }
        }
        state.layers = layers;
        state.queue = rest;
    }

    /// A layer's multi runs: one transaction, one zxid for all its creates.
    fn apply_layer(&self, state: &mut BatchState, layer: &[u8]) {
        let zxid = state.zxid;
        for &call in layer {
            if matches!(self.operations[usize::from(call)], BatchOp::Create(_)) {
                self.create(state, call, zxid);
            }
        }
        state.zxid += 1;
    }

    fn create(&self, state: &mut BatchState, call: u8, czxid: u32) {
        let BatchOp::Create(parent) = self.operations[usize::from(call)] else { return };
        let sequence = state.counters[usize::from(parent)];
        state.counters[usize::from(parent)] += 1;
        state.nodes.push(BatchNode { parent, sequence, czxid, call: Some(call) });
    }
}

/// A parent's path, for the library's layering.
fn parent_name(parent: u8) -> &'static str {
    ["/lock-a", "/lock-b", "/lock-c", "/lock-d"][usize::from(parent)]
}

/// Every order of `items`.
fn permutations(items: Vec<u8>) -> Vec<Vec<u8>> {
    if items.len() <= 1 {
        return vec![items];
    }
    let mut all = Vec::new();
    for index in 0..items.len() {
        let mut rest = items.clone();
        let first = rest.remove(index);
        for mut tail in permutations(rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}
