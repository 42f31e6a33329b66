//! `DurableRelay`: reports the durability of puts to JavaScript in batches.
//!
//! Waiting on each durable put with a native promise costs, per put, a threadsafe function
//! created and released and a Tokio task spawned (waking a worker): more JavaScript-thread time
//! than the insert itself, and with many clients that, not the disk, bounded the put rate. A
//! relay is one task and one threadsafe function per writer: every durable put (the binding's
//! one `put`) hands it the put's watcher under an id chosen by `lib/durable.ts`, and each WAL
//! append's outcomes come back as one callback.
//!
//! A put that asked for its cost (`put(rows, { cost: true })`) is reported in the callback's
//! fourth argument instead of the first, with what its WAL entry cost; without such a put the
//! argument is `null`, so the default path builds nothing more.

use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use memwal_core::{DurableWatcher, WalEntryCost};
use napi::Status;
use napi::bindgen_prelude::{FnArgs, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use tokio::sync::mpsc;

use crate::error::tagged;

/// The arguments of the JavaScript callback: durable ids, failed ids, their tagged messages,
/// and the durable puts that asked for their cost, five numbers each (id, WAL position,
/// requests, bytes, puts; see `memwal_core::WalEntryCost`), or `null` if none did.
pub type Args = FnArgs<(Vec<f64>, Vec<f64>, Vec<String>, Option<Vec<f64>>)>;

/// Weak: a writer with no put waiting must not keep the process alive (`lib/durable.ts` holds
/// the event loop open while a relayed put waits).
type Callback = ThreadsafeFunction<Settled, (), Args, Status, false, true>;

/// Outcomes collected for one callback.
#[derive(Default)]
struct Settled {
    ok: Vec<f64>,
    failed: Vec<f64>,
    messages: Vec<String>,
    costs: Option<Vec<f64>>,
}

impl Settled {
    fn add(&mut self, id: f64, outcome: memwal_core::Result<Option<WalEntryCost>>) {
        match outcome {
            Ok(Some(c)) => self.costs.get_or_insert_default().extend([
                id,
                c.position as f64,
                c.requests as f64,
                c.bytes as f64,
                c.puts as f64,
            ]),
            Ok(None) => self.ok.push(id),
            Err(e) => {
                self.failed.push(id);
                self.messages.push(tagged(&e));
            }
        }
    }
}

/// The writer's side of the relay: the task ends once this is dropped and every watcher it
/// was handed has settled (and been reported).
#[derive(Debug, Clone)]
pub struct DurableRelay {
    tx: mpsc::UnboundedSender<(f64, DurableWatcher, bool)>,
}

impl DurableRelay {
    /// Starts the relay task, reporting to `callback`. On the JavaScript thread.
    pub fn start(callback: &Function<Args, ()>) -> napi::Result<Self> {
        let callback: Callback = callback
            .build_threadsafe_function::<Settled>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(|ctx| {
                let v = ctx.value;
                Ok((v.ok, v.failed, v.messages, v.costs).into())
            })?;
        let (tx, rx) = mpsc::unbounded_channel();
        napi::bindgen_prelude::spawn(relay(rx, callback));
        Ok(DurableRelay { tx })
    }

    /// Hands `watcher` to the relay under `id` (`cost`: report what its WAL entry cost); gives
    /// it back if the relay task is gone.
    pub fn watch(&self, id: f64, watcher: DurableWatcher, cost: bool) -> Option<DurableWatcher> {
        self.tx.send((id, watcher, cost)).err().map(|e| e.0.1)
    }
}

async fn relay(mut rx: mpsc::UnboundedReceiver<(f64, DurableWatcher, bool)>, callback: Callback) {
    let mut waiting = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            msg = rx.recv(), if open => match msg {
                Some((id, watcher, cost)) => waiting.push(async move {
                    let outcome = if cost {
                        watcher.wait_cost().await
                    } else {
                        watcher.wait().await.map(|()| None)
                    };
                    (id, outcome)
                }),
                None => open = false,
            },
            Some((id, outcome)) = waiting.next(), if !waiting.is_empty() => {
                // One WAL append settles all its puts at once: report the ones ready together.
                let mut settled = Settled::default();
                settled.add(id, outcome);
                while let Some(Some((id, outcome))) = waiting.next().now_or_never() {
                    settled.add(id, outcome);
                }
                // Fails only while the environment is torn down, when no one is left to tell.
                let _ = callback.call(settled, ThreadsafeFunctionCallMode::NonBlocking);
            }
            else => return,
        }
    }
}
