//! The registrar: the one background task that writes a discovery's instance nodes.
//!
//! It keeps what this discovery registered (the *registry*: per instance id, the bytes its node
//! must hold) and makes the server agree with it:
//! - `register`, `update` and `unregister` are commands it runs one at a time, each within its
//!   caller's deadline, so a cancelled call still runs to its end and the registry stays true;
//! - after a **new session** (a connection event of a session other than the one a node was
//!   written on) it writes every instance again, with the bytes last given (CURATOR-146/181);
//!   a reconnection of the same session writes nothing (CURATOR-320);
//! - what failed with an unknown outcome (a timeout, a lost connection) is tried again in the
//!   background, with the framework's [`Backoff`] between rounds;
//! - on close it deletes every node but `PERMANENT` ones (CURATOR-94), waiting for the deletes;
//! - with `watch_instances`, it adopts what another writer sets on its nodes (`watch.rs`).
//!
//! From the floor up: `state.rs` (the commands, the registry, the task's state), `nodes.rs`
//! (writing one node), `commands.rs` and `sessions.rs` (serving commands; following sessions),
//! `watch.rs` (following our nodes' data), and here the task's loop.

mod commands;
mod nodes;
mod sessions;
mod state;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::mpsc;
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::{ConnectionEvents, Framework};

pub(crate) use nodes::sequential_node_id;
use state::State;
pub(crate) use state::{Command, RegisteredPaths, Registration};

pub(crate) struct Registrar {
    pub(crate) framework: Framework,
    pub(crate) base_path: String,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) events: ConnectionEvents,
    pub(crate) paths: RegisteredPaths,
    pub(crate) watch_instances: bool,
}

impl Registrar {
    /// The background loop: serves commands, follows connection events, retries what failed.
    /// Ends with `close` or when the discovery is dropped (then its nodes are deleted by the
    /// framework's cleanup worker).
    pub(crate) async fn run(self) {
        let Registrar { framework, base_path, mut commands, events, paths, watch_instances } = self;
        let mut state = State {
            framework,
            base_path,
            entries: BTreeMap::new(),
            removals: BTreeSet::new(),
            paths,
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(10)),
            retry_at: None,
            watch_instances,
            watch: None,
        };
        let mut events = Some(events);
        loop {
            let retry_at = state.retry_at;
            let retry = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = async {
                match events.as_mut() {
                    Some(events) => events.next().await,
                    None => std::future::pending().await,
                }
            };
            let watched = async {
                match state.watch.as_mut() {
                    Some(watch) => watch.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                command = commands.recv() => match command {
                    None => return state.dropped(),
                    Some(Command::Close { deadline, reply }) => {
                        let _ = reply.send(state.close(deadline).await);
                        return;
                    }
                    Some(command) => state.serve(command).await,
                },
                update = event => match update {
                    // The framework is closed: commands still get their (closed) answers.
                    None => events = None,
                    Some(update) => state.on_connection(update).await,
                },
                event = watched => state.on_watch(event).await,
                () = retry => {
                    state.retry_at = None;
                    state.reconcile().await;
                }
            }
        }
    }
}
