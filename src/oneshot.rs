//! One-shot replies from the enqueue proxy to a client waiting on a command
//! (`cancel`, `reschedule`, `peek_deadline`, `take_pending`).
//!
//! The client keeps the [`Reply`] and the proxy gets the [`Answer`]. If the proxy
//! drops the `Answer` unanswered (shutdown, or a proxy panic), the client is woken
//! with `None`: a waiting client can never hang on a lost command.

use crate::sync::{lock, Mutex, Parker};
use crate::waiters::ThreadWaker;
use std::sync::Arc;
use std::task::Waker;

struct Cell<R> {
    state: Mutex<State<R>>,
}

enum State<R> {
    Waiting(Option<Waker>),
    Ready(R),
    Abandoned,
}

/// The proxy's half: answer once, or drop to abandon.
pub(crate) struct Answer<R>(Option<Arc<Cell<R>>>);

/// The client's half: wait for the answer.
pub(crate) struct Reply<R>(Arc<Cell<R>>);

pub(crate) fn pair<R>() -> (Answer<R>, Reply<R>) {
    let cell = Arc::new(Cell { state: Mutex::new(State::Waiting(None)) });
    (Answer(Some(cell.clone())), Reply(cell))
}

impl<R> Answer<R> {
    pub(crate) fn send(mut self, r: R) {
        if let Some(cell) = self.0.take() {
            cell.finish(State::Ready(r));
        }
    }
}

impl<R> Drop for Answer<R> {
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.finish(State::Abandoned);
        }
    }
}

impl<R> Cell<R> {
    fn finish(&self, done: State<R>) {
        let prev = std::mem::replace(&mut *lock(&self.state), done);
        // Wake with the lock released.
        if let State::Waiting(Some(w)) = prev {
            crate::contain::wake(w);
        }
    }
}

impl<R> Reply<R> {
    /// Blocks until the proxy answers; `None` if it never will.
    pub(crate) fn wait(self) -> Option<R> {
        let parker = Parker::new();
        let waker = ThreadWaker::waker(&parker);
        loop {
            {
                let mut st = lock(&self.0.state);
                match std::mem::replace(&mut *st, State::Abandoned) {
                    State::Ready(r) => return Some(r),
                    State::Abandoned => return None,
                    // Register (under the lock the answerer takes), then park.
                    State::Waiting(_) => *st = State::Waiting(Some(waker.clone())),
                }
            }
            parker.park(None);
        }
    }
}
