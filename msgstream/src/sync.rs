//! [`lock`]: the one way msgstream and its backends take a `std::sync::Mutex`.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, ignoring poisoning.
///
/// A mutex is poisoned when a thread panicked while holding it; such a panic is a bug. The
/// critical sections guarded this way are short updates of whole values (insert, remove, swap,
/// take), so a panic leaves at worst an update not made, never a torn value; returning the
/// guard anyway keeps one panicking task from turning every later ack, publish or close of the
/// same client into a panic of its own. It does not undo or finish what the panicking thread
/// left unfinished.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_mutex_is_still_locked_with_its_data() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let held = mutex.clone();
        let panicked = std::thread::spawn(move || {
            let mut value = held.lock().unwrap_or_else(PoisonError::into_inner);
            *value = 2;
            panic!("poisoning the mutex on purpose");
        })
        .join();
        assert!(panicked.is_err());
        assert!(mutex.is_poisoned());
        assert_eq!(*lock(&mutex), 2);
    }
}
