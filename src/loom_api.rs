//! Crate internals re-exported for the loom model checks (`loom-tests/`), only
//! under `--cfg delayq_loom`. Not a public API.
