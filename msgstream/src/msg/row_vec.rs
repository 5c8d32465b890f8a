//! `RowVec`: the per-row values of an insert, with a single row kept inline.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};

/// The per-row values of an [`InsertRequest`](crate::msg::InsertRequest) (its timestamps, row
/// ids and row blobs): a vector that keeps a single value inline.
///
/// Why: an insert of one row is the most common message of a data channel, and as three
/// `Vec`s it cost three allocations on the consumer's thread and three frees on the
/// application's, where packs are dropped (glibc frees a block allocated by another thread
/// on a slower path). Inline, decoding such an insert allocates nothing and reading its
/// timestamps touches no other cache line.
///
/// It reads like a `Vec` (it derefs to a slice) and compares with one by value: a `RowVec`
/// equals any `Vec`, slice or array holding the same values, whichever way it is stored.
/// Build one from an array (`[ts].into()`: one value allocates nothing), a `Vec` (kept as it
/// is), an iterator, or with [`RowVec::push`]; [`RowVec::into_vec`] gives the `Vec` back.
#[derive(Clone)]
pub struct RowVec<T>(Repr<T>);

#[derive(Clone)]
enum Repr<T> {
    /// Exactly one value, inline.
    One(T),
    /// Any number of values; none allocates nothing.
    Many(Vec<T>),
}

impl<T> RowVec<T> {
    /// An empty vector (no allocation).
    pub const fn new() -> Self {
        RowVec(Repr::Many(Vec::new()))
    }

    /// An empty vector with room for `capacity` values; room for one is inline.
    pub fn with_capacity(capacity: usize) -> Self {
        if capacity <= 1 {
            Self::new()
        } else {
            RowVec(Repr::Many(Vec::with_capacity(capacity)))
        }
    }

    /// Appends a value: the first one of an empty, never-allocated vector stays inline.
    pub fn push(&mut self, value: T) {
        // Each case writes only what changes: moving the whole representation out and back
        // (one `mem::replace`) would copy it on every row the insert decoder pushes.
        match &mut self.0 {
            Repr::Many(values) if values.capacity() > 0 => values.push(value),
            Repr::Many(_) => self.0 = Repr::One(value),
            Repr::One(_) => {
                if let Repr::One(first) = std::mem::replace(&mut self.0, Repr::Many(Vec::new())) {
                    let mut values = Vec::with_capacity(4);
                    values.push(first);
                    values.push(value);
                    self.0 = Repr::Many(values);
                }
            }
        }
    }

    /// How many values it holds without allocating more (1 for an inline value).
    pub fn capacity(&self) -> usize {
        match &self.0 {
            Repr::One(_) => 1,
            Repr::Many(values) => values.capacity(),
        }
    }

    /// Whether its one value is held inline (no allocation behind it).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::One(_))
    }

    /// Removes every value.
    pub fn clear(&mut self) {
        match &mut self.0 {
            Repr::One(_) => self.0 = Repr::Many(Vec::new()),
            Repr::Many(values) => values.clear(),
        }
    }

    /// The values as a slice.
    pub fn as_slice(&self) -> &[T] {
        match &self.0 {
            Repr::One(value) => std::slice::from_ref(value),
            Repr::Many(values) => values,
        }
    }

    /// The values as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.0 {
            Repr::One(value) => std::slice::from_mut(value),
            Repr::Many(values) => values,
        }
    }

    /// The values as a `Vec` (allocating for an inline value).
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::One(value) => vec![value],
            Repr::Many(values) => values,
        }
    }
}

impl<T> Default for RowVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deref for RowVec<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> DerefMut for RowVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T> AsRef<[T]> for RowVec<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: fmt::Debug> fmt::Debug for RowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq<U>, U> PartialEq<RowVec<U>> for RowVec<T> {
    fn eq(&self, other: &RowVec<U>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq> Eq for RowVec<T> {}

impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for RowVec<T> {
    fn eq(&self, other: &Vec<U>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: PartialEq<U>, U> PartialEq<[U]> for RowVec<T> {
    fn eq(&self, other: &[U]) -> bool {
        self.as_slice() == other
    }
}

impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for RowVec<T> {
    fn eq(&self, other: &[U; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Hash> Hash for RowVec<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl<T> From<Vec<T>> for RowVec<T> {
    /// Keeps the `Vec` as it is (no copy), except that a single value moves inline.
    fn from(mut values: Vec<T>) -> Self {
        if values.len() == 1 {
            if let Some(value) = values.pop() {
                return RowVec(Repr::One(value));
            }
        }
        RowVec(Repr::Many(values))
    }
}

impl<T, const N: usize> From<[T; N]> for RowVec<T> {
    fn from(values: [T; N]) -> Self {
        values.into_iter().collect()
    }
}

impl<T> From<RowVec<T>> for Vec<T> {
    fn from(values: RowVec<T>) -> Self {
        values.into_vec()
    }
}

impl<T> FromIterator<T> for RowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut iter = iter.into_iter();
        let Some(first) = iter.next() else {
            return Self::new();
        };
        let Some(second) = iter.next() else {
            return RowVec(Repr::One(first));
        };
        let mut values = Vec::with_capacity(iter.size_hint().0.saturating_add(2));
        values.push(first);
        values.push(second);
        values.extend(iter);
        RowVec(Repr::Many(values))
    }
}

impl<T> Extend<T> for RowVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for value in iter {
            self.push(value);
        }
    }
}

/// The owning iterator of a [`RowVec`].
#[derive(Debug)]
pub struct RowVecIntoIter<T>(IntoIterRepr<T>);

#[derive(Debug)]
enum IntoIterRepr<T> {
    One(std::option::IntoIter<T>),
    Many(std::vec::IntoIter<T>),
}

impl<T> Iterator for RowVecIntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match &mut self.0 {
            IntoIterRepr::One(value) => value.next(),
            IntoIterRepr::Many(values) => values.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IntoIterRepr::One(value) => value.size_hint(),
            IntoIterRepr::Many(values) => values.size_hint(),
        }
    }
}

impl<T> DoubleEndedIterator for RowVecIntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        match &mut self.0 {
            IntoIterRepr::One(value) => value.next_back(),
            IntoIterRepr::Many(values) => values.next_back(),
        }
    }
}

impl<T> ExactSizeIterator for RowVecIntoIter<T> {}

impl<T> IntoIterator for RowVec<T> {
    type Item = T;
    type IntoIter = RowVecIntoIter<T>;

    fn into_iter(self) -> RowVecIntoIter<T> {
        RowVecIntoIter(match self.0 {
            Repr::One(value) => IntoIterRepr::One(Some(value).into_iter()),
            Repr::Many(values) => IntoIterRepr::Many(values.into_iter()),
        })
    }
}

impl<'a, T> IntoIterator for &'a RowVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T> IntoIterator for &'a mut RowVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_is_inline_and_more_move_to_the_heap_in_order() {
        let mut values = RowVec::new();
        assert!(values.is_empty());
        values.push(7u64);
        assert!(matches!(values.0, Repr::One(7)));
        values.push(8);
        values.push(9);
        assert!(matches!(&values.0, Repr::Many(v) if v == &[7, 8, 9]));
        assert_eq!(values, [7, 8, 9]);
        assert_eq!(values.iter().rev().copied().collect::<Vec<_>>(), [9, 8, 7]);
        assert_eq!(values.clone().into_iter().collect::<Vec<_>>(), [7, 8, 9]);
        values.clear();
        assert!(values.is_empty());
        values.push(1);
        assert_eq!(values.into_vec(), vec![1]);
    }

    #[test]
    fn equality_and_hashing_look_at_the_values_not_at_how_they_are_stored() {
        use std::collections::hash_map::DefaultHasher;
        let inline: RowVec<u64> = vec![5].into();
        let heap = RowVec(Repr::Many(vec![5u64]));
        assert!(matches!(inline.0, Repr::One(5)));
        assert_eq!(inline, heap);
        assert_eq!(inline, vec![5]);
        let hash = |v: &RowVec<u64>| {
            let mut h = DefaultHasher::new();
            v.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&inline), hash(&heap));
        assert_ne!(inline, RowVec::from(vec![5, 5]));
        assert_eq!(format!("{inline:?}"), "[5]");
    }

    #[test]
    fn building_from_iterators_arrays_and_vecs_keeps_every_value() {
        let empty: RowVec<i64> = std::iter::empty().collect();
        assert!(matches!(&empty.0, Repr::Many(v) if v.capacity() == 0));
        let one: RowVec<i64> = std::iter::once(3).collect();
        assert!(matches!(one.0, Repr::One(3)));
        let many: RowVec<i64> = (0..5).collect();
        assert_eq!(many, [0, 1, 2, 3, 4]);
        assert_eq!(RowVec::from([1, 2]), vec![1, 2]);
        let mut extended = RowVec::from(vec![1]);
        extended.extend([2, 3]);
        assert_eq!(Vec::from(extended), vec![1, 2, 3]);
        let mut doubled = RowVec::from([1, 2, 3]);
        for value in &mut doubled {
            *value *= 2;
        }
        assert_eq!(doubled, [2, 4, 6]);
    }

    #[test]
    fn a_row_vec_takes_no_more_room_than_a_vec_for_row_ids_and_timestamps() {
        assert_eq!(std::mem::size_of::<RowVec<u64>>(), 24);
        assert_eq!(std::mem::size_of::<RowVec<i64>>(), 24);
    }
}
