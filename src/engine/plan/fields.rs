//! How the plan's optional fields read: a null as missing, or a null as present.

use serde::{Deserialize, Deserializer};

/// A field that may be null or missing: its default then.
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// A field whose presence counts, a null included: present gives `Some` (`Some(Null)` for a null).
pub(crate) fn present<'de, D>(d: D) -> Result<Option<serde_json::Value>, D::Error>
where
    D: Deserializer<'de>,
{
    serde_json::Value::deserialize(d).map(Some)
}
