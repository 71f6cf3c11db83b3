//! How a batch of a session's creates and deletes is cut into layers, one multi each: the
//! batcher's ([`super::batch`]) decision, without I/O.

use std::collections::HashMap;

/// The layer (one multi each) of each queued operation in a batch, in queue order, or `None` for
/// those left to the next batch: `operations` are `(parent, size)` for a create under `parent`,
/// `(None, size)` for a delete. The batch takes operations from the front while it holds fewer
/// than `max_operations` and `max_bytes` (the first always); the first create of each parent goes
/// in layer 0 with every delete, the second in layer 1, and so on: a multi is one transaction with
/// one zxid, and two creates of one parent in it would share their `czxid`, a hold's fencing token.
///
/// The decision `take_batch` acts on, without I/O.
///
/// ```
/// use zk_recipes_framework::decisions::batch_layers;
///
/// let queued = [(Some("/a"), 10), (Some("/a"), 10), (None, 5), (Some("/b"), 10), (Some("/a"), 10)];
/// assert_eq!(batch_layers(queued, 4, 1024), [Some(0), Some(1), Some(0), Some(0), None]);
/// ```
pub fn batch_layers<'a>(
    operations: impl IntoIterator<Item = (Option<&'a str>, usize)>,
    max_operations: usize,
    max_bytes: usize,
) -> Vec<Option<usize>> {
    let mut layer_of = Vec::new();
    let mut bytes = 0;
    let mut creates_per_parent: HashMap<&str, usize> = HashMap::new();
    let mut full = false;
    for (index, (parent, size)) in operations.into_iter().enumerate() {
        // `index` operations are taken so far.
        full = full || (index > 0 && (index == max_operations || bytes + size > max_bytes));
        if full {
            layer_of.push(None);
            continue;
        }
        layer_of.push(Some(match parent {
            Some(parent) => {
                let count = creates_per_parent.entry(parent).or_default();
                *count += 1;
                *count - 1
            }
            None => 0,
        }));
        bytes += size;
    }
    layer_of
}
