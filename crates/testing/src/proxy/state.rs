//! The proxy's shared state: its counters, open connections, the black hole, the faults armed
//! for coming requests and the watch notifications to drop, with the operations on them that the
//! handle and the connections share.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};

use super::matching::RequestMatch;
use super::reports::{CutReply, HeldRequest};
use super::wire::{is_watch_event, Piece, Request};

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) target: SocketAddr,
    pub(super) state: Mutex<State>,
    pub(super) black_hole: watch::Sender<bool>,
    pub(super) accepted: AtomicU64,
    pub(super) cut: AtomicU64,
    pub(super) bytes_to_server: AtomicU64,
    pub(super) writes_to_server: AtomicU64,
    pub(super) bytes_to_client: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) watch_events: WatchEventDrop,
    /// [`FaultProxy::delay_replies`](crate::FaultProxy::delay_replies): how long the server's
    /// bytes are held before they are forwarded, in nanoseconds; 0 is off.
    pub(super) reply_delay_nanos: AtomicU64,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) next_connection: u64,
    /// Dropping a sender closes its connection.
    pub(super) connections: HashMap<u64, oneshot::Sender<()>>,
    pub(super) black_holed: bool,
    pub(super) black_hole_generation: u64,
    /// [`FaultProxy::black_hole_requests`](crate::FaultProxy::black_hole_requests): what clients
    /// send is dropped, what the server sends still forwarded.
    pub(super) requests_black_holed: bool,
    pub(super) requests_black_hole_generation: u64,
    /// In the order armed; each waits for the next request it matches.
    pub(super) armed_cuts: VecDeque<ArmedCut>,
    /// In the order armed; each starts a black hole at the next request it matches.
    pub(super) armed_black_holes: VecDeque<ArmedBlackHole>,
    /// Requests that close their connection
    /// ([`FaultProxy::refuse_requests`](crate::FaultProxy::refuse_requests)).
    pub(super) refused: Vec<RequestMatch>,
    pub(super) closed: bool,
}

#[derive(Debug)]
pub(super) struct ArmedBlackHole {
    pub(super) matcher: RequestMatch,
    pub(super) duration: Duration,
    pub(super) sender: oneshot::Sender<HeldRequest>,
}

#[derive(Debug)]
pub(super) struct ArmedCut {
    pub(super) matcher: RequestMatch,
    pub(super) sender: oneshot::Sender<CutReply>,
    /// A black hole to start at the cut, before the client can reconnect.
    pub(super) then_black_hole: Option<Duration>,
}

/// [`FaultProxy::drop_watch_events`](crate::FaultProxy::drop_watch_events): the probability of
/// dropping a watch notification, the seeded generator that decides, in the order notifications
/// pass the proxy (on all its connections), and how many it dropped. Lock-free: the forwarding
/// path pays one atomic load per read from the server while the mode is off.
#[derive(Debug, Default)]
pub(super) struct WatchEventDrop {
    /// The probability's `f64` bits; 0 (the bits of `0.0`) is off.
    probability: AtomicU64,
    /// A splitmix64 state: each decision advances it by [`GOLDEN_GAMMA`].
    generator: AtomicU64,
    pub(super) dropped: AtomicU64,
}

/// splitmix64's increment.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl WatchEventDrop {
    /// Drops each notification from now on with `probability` (checked by the caller to be in
    /// `0.0..=1.0`), the decisions drawn from a generator started at `seed`; `0.0` turns it off.
    pub(super) fn set(&self, probability: f64, seed: u64) {
        self.generator.store(seed, Ordering::Relaxed);
        // `-0.0` too is off.
        let bits = if probability == 0.0 { 0 } else { probability.to_bits() };
        self.probability.store(bits, Ordering::Relaxed);
    }

    /// Whether `piece` (from the server) is a watch notification to drop; counts the ones it is.
    pub(super) fn drops(&self, piece: &Piece) -> bool {
        let bits = self.probability.load(Ordering::Relaxed);
        if bits == 0 || !is_watch_event(piece) {
            return false;
        }
        let state = self.generator.fetch_add(GOLDEN_GAMMA, Ordering::Relaxed).wrapping_add(GOLDEN_GAMMA);
        // 53 random bits as a fraction in [0, 1): below 1.0 always, so 1.0 drops every one.
        let draw = (splitmix64(state) >> 11) as f64 / (1_u64 << 53) as f64;
        let drop = draw < f64::from_bits(bits);
        if drop {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        drop
    }
}

/// splitmix64's output function.
fn splitmix64(state: u64) -> u64 {
    let mut mixed = state;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

impl State {
    /// The oldest live cut armed for `request`, disarmed (dropped handles are forgotten).
    pub(super) fn take_armed_cut(&mut self, request: &Request) -> Option<ArmedCut> {
        self.armed_cuts.retain(|armed| !armed.sender.is_closed());
        let index = self.armed_cuts.iter().position(|armed| armed.matcher.matches(request))?;
        self.armed_cuts.remove(index)
    }
}

impl Shared {
    /// Starts a black hole that ends (closing every connection open during it) after `duration`,
    /// unless a later one replaced it. The caller holds the state lock.
    pub(super) fn start_black_hole(self: &Arc<Self>, state: &mut State, duration: Duration) {
        state.black_holed = true;
        state.black_hole_generation += 1;
        let generation = state.black_hole_generation;
        self.black_hole.send_replace(true);
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            shared.end_black_hole(Some(generation));
        });
    }

    /// Starts the black hole armed for `request`, if one is: returns whether it did.
    pub(super) fn black_hole_if_armed(self: &Arc<Self>, request: &Request) -> bool {
        let mut state = self.state.lock();
        state.armed_black_holes.retain(|armed| !armed.sender.is_closed());
        let Some(index) = state.armed_black_holes.iter().position(|armed| armed.matcher.matches(request))
        else {
            return false;
        };
        let armed = state.armed_black_holes.remove(index).expect("the index was just found");
        self.start_black_hole(&mut state, armed.duration);
        drop(state);
        tracing::debug!(op_code = request.op_code, path = %request.path, "fault proxy black hole at a request");
        let _ = armed.sender.send(HeldRequest {
            op_code: request.op_code,
            xid: request.xid,
            path: request.path.clone(),
            ops: request.ops.clone(),
        });
        true
    }

    /// Starts a one-way black hole (requests dropped, replies forwarded) that ends, closing every
    /// connection open then, after `duration`, unless a later one replaced it.
    pub(super) fn start_requests_black_hole(self: &Arc<Self>, duration: Duration) {
        let generation = {
            let mut state = self.state.lock();
            state.requests_black_holed = true;
            state.requests_black_hole_generation += 1;
            state.requests_black_hole_generation
        };
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            shared.end_requests_black_hole(Some(generation));
        });
    }

    /// Ends the one-way black hole (the one of `generation`, or any): every connection open now
    /// lost requests during it, and is closed.
    pub(super) fn end_requests_black_hole(&self, generation: Option<u64>) {
        let mut state = self.state.lock();
        if !state.requests_black_holed
            || generation.is_some_and(|generation| generation != state.requests_black_hole_generation)
        {
            return;
        }
        state.requests_black_holed = false;
        self.cut_all(&mut state);
    }

    /// How long the server's bytes are held before they are forwarded (zero: not at all).
    pub(super) fn reply_delay(&self) -> Duration {
        Duration::from_nanos(self.reply_delay_nanos.load(Ordering::Relaxed))
    }

    pub(super) fn cut_all(&self, state: &mut State) -> usize {
        let count = state.connections.len();
        state.connections.clear();
        self.cut.fetch_add(count as u64, Ordering::Relaxed);
        count
    }

    pub(super) fn end_black_hole(&self, generation: Option<u64>) {
        let mut state = self.state.lock();
        if !state.black_holed
            || generation.is_some_and(|generation| generation != state.black_hole_generation)
        {
            return;
        }
        state.black_holed = false;
        // Every connection open now was open during the black hole: close them all.
        self.cut_all(&mut state);
        self.black_hole.send_replace(false);
    }
}
