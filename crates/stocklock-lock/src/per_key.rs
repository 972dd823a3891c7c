//! One value per key, shared by everyone using that key right now and gone
//! with its last user: lock waiters' notifiers, local mutexes. Ever new keys
//! (SKUs are user input) then leave nothing behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The values in use, by key.
///
/// ```
/// use stocklock_lock::per_key::PerKey;
///
/// let mutexes: PerKey<tokio::sync::Mutex<()>> = PerKey::default();
/// {
///     let first = mutexes.use_key("sku-1");
///     let second = mutexes.use_key("sku-1");
///     assert!(std::sync::Arc::ptr_eq(first.shared(), second.shared())); // one per key
///     assert_eq!(mutexes.len(), 1);
/// }
/// assert!(mutexes.is_empty()); // gone with its last user
/// ```
pub struct PerKey<T> {
    map: Mutex<HashMap<String, Arc<T>>>,
}

impl<T> Default for PerKey<T> {
    fn default() -> Self {
        Self {
            map: Mutex::default(),
        }
    }
}

impl<T: Default> PerKey<T> {
    /// The value of `key` (made if nobody uses it), held until the returned
    /// use is dropped.
    pub fn use_key<'a>(&'a self, key: &'a str) -> InUse<'a, T> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let value = map.entry(key.to_owned()).or_default().clone();
        InUse {
            owner: self,
            key,
            value,
        }
    }
}

impl<T> PerKey<T> {
    /// The value of `key`, if someone uses it.
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Every value in use.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// How many keys are in use.
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no key has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One user's hold on a key's value; the last one to leave removes it.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use stocklock_lock::per_key::PerKey;
///
/// let counts: PerKey<AtomicU32> = PerKey::default();
/// let in_use = counts.use_key("sku-1");
/// in_use.fetch_add(1, Ordering::Relaxed); // derefs to the shared value
/// assert_eq!(counts.get("sku-1").map(|n| n.load(Ordering::Relaxed)), Some(1));
/// drop(in_use);
/// assert!(counts.get("sku-1").is_none());
/// ```
pub struct InUse<'a, T> {
    owner: &'a PerKey<T>,
    key: &'a str,
    value: Arc<T>,
}

impl<T> InUse<'_, T> {
    /// The shared value itself (to compare or count its users).
    pub fn shared(&self) -> &Arc<T> {
        &self.value
    }
}

impl<T> std::ops::Deref for InUse<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for InUse<'_, T> {
    fn drop(&mut self) {
        let mut map = self
            .owner
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The map's and ours: nobody else uses it (new users clone under
        // this same lock, so none can appear meanwhile).
        if Arc::strong_count(&self.value) == 2 {
            map.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_goes_with_its_last_user() {
        let per_key: PerKey<u8> = PerKey::default();
        {
            let first = per_key.use_key("a");
            let second = per_key.use_key("a");
            assert!(Arc::ptr_eq(first.shared(), second.shared()), "one per key");
            drop(second);
            assert_eq!(per_key.len(), 1, "still in use by the first");
        }
        assert!(per_key.is_empty());
        for key in 0..1000 {
            let key = key.to_string();
            let _in_use = per_key.use_key(&key);
        }
        assert!(per_key.is_empty(), "ever new keys leave nothing behind");
    }
}
