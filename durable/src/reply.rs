//! A one-shot reply from the writer thread to the caller waiting on a group commit.
//!
//! The caller parks on a condvar until the writer fills the slot. If the writer
//! drops a `Reply` without filling it (it panicked, or shut down with the op
//! still queued), the drop fills it with [`DurableError::Closed`], so a caller
//! can never wait forever on a reply that will not come.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::error::DurableError;

type Outcome<T> = Result<T, DurableError>;

struct Slot<T> {
    value: Mutex<Option<Outcome<T>>>,
    filled: Condvar,
}

/// The writer's half: fill it once.
pub(crate) struct Reply<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The caller's half: wait for the value.
pub(crate) struct Waiting<T> {
    slot: Arc<Slot<T>>,
}

pub(crate) fn reply<T>() -> (Reply<T>, Waiting<T>) {
    let slot = Arc::new(Slot { value: Mutex::new(None), filled: Condvar::new() });
    (Reply { slot: Some(slot.clone()) }, Waiting { slot })
}

impl<T> Reply<T> {
    pub(crate) fn send(mut self, value: Outcome<T>) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, value);
        }
    }
}

fn fill<T>(slot: &Slot<T>, value: Outcome<T>) {
    let mut guard = slot.value.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_none() {
        *guard = Some(value);
    }
    drop(guard);
    slot.filled.notify_one();
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, Err(DurableError::Closed));
        }
    }
}

impl<T> Waiting<T> {
    pub(crate) fn wait(self) -> Outcome<T> {
        let mut guard = self.slot.value.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(value) = guard.take() {
                return value;
            }
            guard = self.slot.filled.wait(guard).unwrap_or_else(PoisonError::into_inner);
        }
    }
}
