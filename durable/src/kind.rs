//! [`JobKind`]: a typed job — a kind name and a serde payload — that
//! [`JobQueue::enqueue`](crate::JobQueue::enqueue) stores and a
//! [`Worker`](crate::Worker) handler receives.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::DurableError;

/// A job type: its kind (stored beside the payload, what a
/// [`Worker`](crate::Worker) dispatches on) and its fields (stored as JSON).
///
/// ```
/// use delayq_durable::JobKind;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct SendEmail { to: String, template: String }
///
/// impl JobKind for SendEmail {
///     const KIND: &'static str = "email.send";
/// }
/// ```
///
/// Renaming a kind strands the jobs already stored under the old name (the
/// worker moves them to the dead set as an unknown kind): keep the old name,
/// or register a handler for both. Changing the fields follows serde's rules
/// (`#[serde(default)]` for a new field); a stored payload that no longer
/// decodes goes to the dead set with the decoding error, not into a retry loop.
pub trait JobKind: Serialize + DeserializeOwned + Send + 'static {
    /// The kind's name: at most 255 bytes, no control characters.
    const KIND: &'static str;
}

/// `job` as JSON, refused if that JSON does not decode back (NaN and infinite
/// floats become `null`): nothing that cannot be handled is stored.
pub(crate) fn encode<K: JobKind>(job: &K) -> Result<Vec<u8>, DurableError> {
    let bytes = serde_json::to_vec(job).map_err(|e| DurableError::Codec(e.to_string()))?;
    if let Err(e) = serde_json::from_slice::<K>(&bytes) {
        return Err(DurableError::Codec(format!(
            "a {} would be stored as JSON that does not decode back (NaN and infinite floats become null): {e}",
            K::KIND
        )));
    }
    Ok(bytes)
}
