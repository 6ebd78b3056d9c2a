//! The commands that cross the ingress, from a client to the enqueue proxy. The
//! ingress keeps each client's commands in the order it issued them, so a
//! `cancel` never overtakes its own `send`.

use crate::oneshot::Answer;

/// A request from a client to the enqueue proxy. Deadlines are ticks
/// (`clock::Ticks`); keys are the queue's sequence numbers.
pub(crate) enum Cmd<T> {
    Insert {
        key: u64,
        deadline: u64,
        item: T,
    },
    Cancel {
        key: u64,
        answer: Answer<Option<T>>,
    },
    /// A cancel nobody waits for: the item, if pending, is dropped on the proxy.
    Discard {
        key: u64,
    },
    Reschedule {
        key: u64,
        deadline: u64,
        answer: Answer<bool>,
    },
    /// The earliest deadline not yet received.
    Peek {
        answer: Answer<Option<u64>>,
    },
    /// Every item not yet received, in `(deadline, key)` order.
    TakePending {
        answer: Answer<Vec<(u64, T)>>,
    },
    /// Answered once every earlier command is applied (a mock clock's flush).
    Sync {
        answer: Answer<()>,
    },
}
