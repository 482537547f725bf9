//! The one way the services take a `std::sync::Mutex`: a panic while a lock was held (a bug)
//! must not turn every later request into a panic of its own. The state is taken as the
//! panic left it: every critical section here changes its state in steps that each leave it
//! valid (an insert, a remove, a counter), so there is nothing half-made to recover from.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`] that takes a poisoned lock's state as it is.
pub trait Locked<T> {
    /// The guard, whether or not a panic poisoned the lock.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken() {
        let shared = std::sync::Arc::new(Mutex::new(1));
        let poisoner = shared.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.lock().unwrap();
            panic!("a bug while the lock is held");
        })
        .join();
        assert!(shared.is_poisoned());
        *shared.locked() += 1;
        assert_eq!(*shared.locked(), 2);
    }
}
