//! Nothing here: the tests are in `tests/`. This package exists so that the
//! executors they need stay out of `delayq`'s own dependencies.
