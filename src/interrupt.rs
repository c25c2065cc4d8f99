//! Stopping a long computation from outside: a check that every forward pass makes before each layer and before
//! the output logits.
//!
//! The check belongs to the calling thread, for the duration of one call ([`with_check`]): the Python package
//! runs each engine call with a check that asks the interpreter whether Ctrl-C was pressed, so a pass running
//! with the GIL released stops within one layer instead of at its end. A pass that finds the check true returns
//! [`Error::Interrupted`]; outputs are written whole or not at all, so nothing half-written is left. The command
//! line installs a check that SIGINT or SIGTERM sets, in the commands that run forward passes (`cli::main`), so
//! that they remove their staged output and exit 130. Passes on other threads are not affected.

use crate::error::{Error, Result};
use std::cell::Cell;

thread_local! {
    static CHECK: Cell<Option<fn() -> bool>> = const { Cell::new(None) };
}

/// Runs `f` with `check` installed on this thread (the previous check, if any, is restored afterwards).
pub fn with_check<R>(check: fn() -> bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<fn() -> bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CHECK.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CHECK.with(|c| c.replace(Some(check))));
    f()
}

/// [`Error::Interrupted`] when this thread's check says to stop.
pub fn check() -> Result<()> {
    match CHECK.with(Cell::get) {
        Some(f) if f() => Err(Error::Interrupted),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_holds_for_one_call_on_its_thread() {
        fn stop() -> bool {
            true
        }
        assert!(check().is_ok());
        with_check(stop, || {
            assert!(matches!(check(), Err(Error::Interrupted)));
            std::thread::spawn(|| assert!(check().is_ok()))
                .join()
                .unwrap();
        });
        assert!(check().is_ok());
    }
}
