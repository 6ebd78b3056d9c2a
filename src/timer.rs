//! Scheduled callbacks on top of the delay queue (issue 5: in progress).
