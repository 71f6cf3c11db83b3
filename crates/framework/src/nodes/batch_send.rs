//! How a batch goes to the server: the queue taken in layers (`batch_layers`), each layer one
//! multi (or, alone, its one request), every caller answered from its result, and a failed multi
//! sent again one request at a time. When a write waits and what a batch takes are in `batch.rs`.

use std::collections::HashSet;

use futures::future::join_all;
use tokio::sync::oneshot;
use tracing::trace;
use zookeeper_client::{MultiReadResult, MultiWriteError, MultiWriteResult, Stat};

use super::batch::{batcher_of, is_sequential, Batcher, CreateAnswer, ListingAnswer, Queued, QueuedCreate};
use crate::session::{Error, Session};

impl Batcher {
    /// Starts a batch task for `session`'s queue on `runtime`: it takes the queue when its turn
    /// comes and sends it.
    pub(super) fn spawn_batch(runtime: &tokio::runtime::Handle, session: &Session) {
        runtime.spawn(run_batch(PendingBatch { session: session.clone(), armed: true }));
    }
}

/// A batch task, from its spawning until it has taken the queue. Dropped before that (its future
/// never ran, or its runtime shut down), it fails the queued calls with a connection loss, which
/// their retries handle, and lets the next call start a batch again: nothing waits for a batch
/// that will not come.
struct PendingBatch {
    session: Session,
    armed: bool,
}

impl Drop for PendingBatch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let queued = {
            let mut state = batcher_of(&self.session).state.lock();
            state.batch_waiting = false;
            std::mem::take(&mut state.queued)
        };
        let batcher = batcher_of(&self.session);
        for queued in queued {
            queued.fail(zookeeper_client::Error::ConnectionLoss, batcher);
        }
    }
}

/// One batch: waits for a slot, takes what is queued, sends it, answers each caller.
async fn run_batch(mut pending: PendingBatch) {
    let session = pending.session.clone();
    let batcher = batcher_of(&session);
    let mut slot = batcher.slot_for_batch().await;
    // Until every caller of the batch is answered (or its node handed to the cleanup worker),
    // `Framework::wait_for_cleanups` waits for the batch too.
    let _settling = batcher.cleanup.settling();
    let layers = batcher.take_batch(&session, &mut slot);
    pending.armed = false;
    // Each layer's request is sent when its future is first polled: all go back to back.
    join_all(layers.into_iter().map(|layer| {
        let session = &session;
        async move {
            match layer.len() {
                0 => {}
                1 => one_by_one(session, layer).await,
                operations => {
                    trace!(operations, "sending a batch of writes as one multi");
                    send_multi(session, layer).await;
                }
            }
        }
    }))
    .await;
}

/// The create options of a queued create on `session`.
fn options_of<'a>(session: &'a Session, create: &QueuedCreate) -> zookeeper_client::CreateOptions<'a> {
    let options = session.create_options_for(&create.path, create.mode);
    match create.ttl {
        Some(ttl) => options.with_ttl(ttl),
        None => options,
    }
}

async fn send_multi(session: &Session, batch: Vec<Queued>) {
    let mut writer = session.client().new_multi_writer();
    let mut sent = Vec::with_capacity(batch.len());
    for queued in batch {
        let added = match &queued {
            Queued::Create(create, _, _) => {
                writer.add_create(&create.path, &create.data, &options_of(session, create))
            }
            Queued::Delete(path, _) => writer.add_delete(path, None),
        };
        match added {
            Ok(()) => sent.push(queued),
            Err(err) => queued.fail(err, batcher_of(session)),
        }
    }
    match writer.commit().await {
        Ok(results) => answer_multi(session, sent, results).await,
        // One operation failed and the others were not applied: each goes again on its own, and
        // gets its own answer.
        Err(MultiWriteError::OperationFailed { index, source }) => {
            trace!(index, %source, "a batched write failed: sending the batch one by one");
            one_by_one(session, sent).await;
        }
        // Nothing is known of the batch: each caller handles the error as its own (a create looks
        // for its node by its marker, a delete tries again on the same session).
        Err(MultiWriteError::RequestFailed { source }) => {
            // A create's node may be there (a reply lost on the way): answered as a connection
            // loss, so that its caller looks for it; unless the session is gone (expired or
            // closed), which each create alone would have been told too: then no node of the
            // session is left to look for (an ephemeral one went with it; one that outlives its
            // session is looked for on the next), and the caller starts over on the next session.
            let create_error = match Error::ZooKeeper(source.clone()).is_session_lost() {
                true => source.clone(),
                false => zookeeper_client::Error::ConnectionLoss,
            };
            let batcher = batcher_of(session);
            for queued in sent {
                let err = match &queued {
                    Queued::Create(..) => create_error.clone(),
                    Queued::Delete(..) => source.clone(),
                };
                queued.fail(err, batcher);
            }
        }
    }
}

/// A create of a successful multi, and what it still needs: its stat read, its parent listed.
struct CreatedInBatch {
    create: QueuedCreate,
    reply: oneshot::Sender<(CreateAnswer, ListingAnswer)>,
    path: String,
    /// Its stat, once known.
    stat: Option<Stat>,
    /// Where its stat is in the multi-read's answers.
    stat_read: Option<usize>,
    /// Where its listing is in the multi-read's answers (the first create of a parent only).
    listing_read: Option<usize>,
}

async fn answer_multi(session: &Session, sent: Vec<Queued>, results: Vec<MultiWriteResult>) {
    let mut reader = session.client().new_multi_reader();
    let mut reads = 0;
    let mut next_read = || {
        reads += 1;
        reads - 1
    };
    let mut listed: HashSet<String> = HashSet::new();
    let mut created = Vec::new();
    for (queued, result) in sent.into_iter().zip(results) {
        match (queued, result) {
            (Queued::Create(create, _, reply), MultiWriteResult::Create { path, stat }) => {
                let stat = (!stat.is_invalid()).then_some(stat);
                let stat_read = match stat {
                    None if reader.add_get_data(&path).is_ok() => Some(next_read()),
                    _ => None,
                };
                let listing_read = match &create.list {
                    Some(parent) if !listed.contains(parent) && reader.add_get_children(parent).is_ok() => {
                        listed.insert(parent.clone());
                        Some(next_read())
                    }
                    _ => None,
                };
                created.push(CreatedInBatch { create, reply, path, stat, stat_read, listing_read });
            }
            (Queued::Delete(_, reply), MultiWriteResult::Delete) => drop(reply.send(Ok(()))),
            (queued, other) => {
                // The multi was applied: a create's node is there, so its caller looks for it.
                let err = match &queued {
                    Queued::Create(..) => zookeeper_client::Error::ConnectionLoss,
                    Queued::Delete(..) => zookeeper_client::Error::UnexpectedError(format!(
                        "a batched delete answered {other:?}"
                    )),
                };
                queued.fail(err, batcher_of(session));
            }
        }
    }
    if created.is_empty() {
        return;
    }
    // A failed multi-read leaves every read to be done on its own; a server without multi-read
    // (before 3.6, which drops the connection on one) is never sent one ([`crate::session::features`]).
    let batcher = batcher_of(session);
    let multi_read = reads > 0 && session.features().multi_read(batcher.runtime.as_ref()).await;
    let mut answers: Vec<Option<MultiReadResult>> = match multi_read {
        false => (0..reads).map(|_| None).collect(),
        true => match reader.commit().await {
            Ok(answers) if answers.len() == reads => answers.into_iter().map(Some).collect(),
            _ => (0..reads).map(|_| None).collect(),
        },
    };
    for created in &mut created {
        if let Some(MultiReadResult::Data { stat, .. }) = created.stat_read.and_then(|at| answers[at].take())
        {
            created.stat = Some(stat);
        }
    }
    // A stat the multi-read did not give (no READ permission, a failed multi-read) is read on its
    // own: `exists` needs no permission.
    let client = session.client();
    let stats = created.iter().map(|created| {
        let missing = created.stat.is_none().then(|| client.check_stat(&created.path));
        async move {
            match missing {
                Some(check) => check.await.ok().flatten(),
                None => None,
            }
        }
    });
    let stats = join_all(stats).await;
    for (mut created, read) in created.into_iter().zip(stats) {
        let listing = match created.listing_read.and_then(|at| answers[at].take()) {
            Some(MultiReadResult::Children { children }) => Some(Ok(children)),
            Some(MultiReadResult::Error { err }) => Some(Err(err)),
            _ => None,
        };
        // The node is there. Without its stat or sequence the caller gets a connection loss, and
        // finds it again by its marker: never an answer that would have it forget the node.
        let answer = match (created.stat.or(read), sequence_of(&created.create, &created.path)) {
            (Some(stat), Some(sequence)) => Ok((stat, sequence)),
            _ => Err(zookeeper_client::Error::ConnectionLoss),
        };
        if created.reply.send((answer, listing)).is_err() {
            batcher.clean_up(std::mem::take(&mut created.path));
        }
    }
}

/// The sequence the server appended to a queued create's path (`-1` for a plain node); `None` if
/// the path does not have one where it should.
fn sequence_of(create: &QueuedCreate, created_path: &str) -> Option<i64> {
    if !is_sequential(create.mode) {
        return Some(-1);
    }
    created_path.strip_prefix(create.path.as_str())?.parse().ok()
}

/// Sends every request of a batch on its own, pipelined (creates first, then the listings behind
/// them), and answers each caller. A create whose caller is gone is not sent.
async fn one_by_one(session: &Session, batch: Vec<Queued>) {
    let client = session.client();
    let mut creates = Vec::new();
    let mut deletes = Vec::new();
    for queued in batch {
        match queued {
            Queued::Create(_, _, reply) if reply.is_closed() => {}
            Queued::Create(create, _, reply) => creates.push((create, reply)),
            Queued::Delete(path, reply) => deletes.push((path, reply)),
        }
    }
    // Sent in this order as the futures are made: creates, deletes, then the listings.
    let created: Vec<_> = creates
        .iter()
        .map(|(create, _)| client.create(&create.path, &create.data, &options_of(session, create)))
        .collect();
    let deleted: Vec<_> = deletes.iter().map(|(path, _)| client.delete(path, None)).collect();
    let listed: Vec<_> = creates
        .iter()
        .map(|(create, _)| {
            let listing = create.list.as_deref().map(|parent| client.list_children(parent));
            async move {
                match listing {
                    Some(listing) => Some(listing.await),
                    None => None,
                }
            }
        })
        .collect();
    let (created, deleted, listed) = futures::join!(join_all(created), join_all(deleted), join_all(listed));
    for (((mut create, reply), answer), listing) in creates.into_iter().zip(created).zip(listed) {
        let answer = answer.map(|(stat, sequence)| (stat, sequence.into_i64()));
        let made = answer.as_ref().ok().map(|(_, sequence)| *sequence);
        if reply.send((answer, listing)).is_err() {
            match made {
                Some(sequence) => {
                    if is_sequential(create.mode) {
                        crate::path::push_sequence(&mut create.path, sequence);
                    }
                    batcher_of(session).clean_up(create.path);
                }
                None => batcher_of(session).clean_up_unknown(&create),
            }
        }
    }
    for ((_, reply), answer) in deletes.into_iter().zip(deleted) {
        let _ = reply.send(answer);
    }
}
