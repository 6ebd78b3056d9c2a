//! A client-go style work queue on top of the delay queue (issue 5: in progress).
