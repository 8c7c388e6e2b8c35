//! A vector of slots addressed by dense ids, reusing the ids of removed
//! entries.
//!
//! The index numbers its predicates, conjunctions, subscriptions and
//! attributes with dense ids so that the per-message scratch can keep one
//! counter or stamp per id in a plain array. Reusing freed ids keeps those
//! arrays as small as the largest number of live entries, not the number
//! ever inserted.

/// Entries addressed by dense `usize` ids; removed ids are reused.
#[derive(Debug, Clone)]
pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { slots: Vec::new(), free: Vec::new(), len: 0 }
    }
}

impl<T> Slab<T> {
    /// Stores `value` and returns its id.
    pub(crate) fn insert(&mut self, value: T) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(id) => {
                self.slots[id] = Some(value);
                id
            }
            None => {
                self.slots.push(Some(value));
                self.slots.len() - 1
            }
        }
    }

    /// Takes the entry out, freeing its id.
    pub(crate) fn remove(&mut self, id: usize) -> Option<T> {
        let value = self.slots.get_mut(id)?.take()?;
        self.free.push(id);
        self.len -= 1;
        Some(value)
    }

    /// The entry with this id, if live.
    pub(crate) fn get(&self, id: usize) -> Option<&T> {
        self.slots.get(id)?.as_ref()
    }

    /// The entry with this id, if live, for changing.
    pub(crate) fn get_mut(&mut self, id: usize) -> Option<&mut T> {
        self.slots.get_mut(id)?.as_mut()
    }

    /// The number of live entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// One more than the largest id handed out: the length an array indexed
    /// by these ids needs.
    pub(crate) fn id_bound(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_reused() {
        let mut slab = Slab::default();
        let first = slab.insert("a");
        let second = slab.insert("b");
        assert_eq!((first, second), (0, 1));
        assert_eq!(slab.remove(first), Some("a"));
        assert_eq!(slab.remove(first), None);
        assert_eq!(slab.get(first), None);
        assert_eq!(slab.insert("c"), first);
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.id_bound(), 2);
        assert_eq!((slab.get(first), slab.get(second)), (Some(&"c"), Some(&"b")));
        if let Some(value) = slab.get_mut(second) {
            *value = "d";
        }
        assert_eq!(slab.get(second), Some(&"d"));
    }
}
