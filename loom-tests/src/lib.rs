//! Loom model checks for delayq live in `tests/`.
