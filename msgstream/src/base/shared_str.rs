//! [`SharedStr`]: an immutable string whose clones share one allocation.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

/// An immutable string that clones without allocating, used for the channel and group names
/// of [`crate::msg::MsgPosition`] and the channel of a received [`crate::mq::Message`].
///
/// Every message a stream delivers carries a position naming its channel and subscription; as
/// `String`s that was two allocations per message on the consumer task and two frees wherever
/// the application drops it, more than decoding a small message costs. A stream's consumer
/// now holds each name once and every position shares it.
///
/// Two kinds of sharing:
/// - [`SharedStr::interned`] keeps one copy of each distinct string for the rest of the process
///   and clones copy a pointer. Streams intern the names of the channels and subscriptions
///   they consume, and backends the channel names of their consumers and readers (a few dozen
///   bytes per distinct name, never freed), so a delivered message and its position cost no
///   shared reference count: two atomic operations per name and message, one where it is made
///   and one where it is dropped, often on another core.
/// - `into()` from `&str`, `String` or `Arc<str>` shares one allocation by a reference count
///   and frees it with the last clone: for names from anywhere else (decoded positions).
///
/// It reads like a `&str` (`Deref`, `as_str`, comparisons with `str`, `&str` and `String` in
/// both directions, `Display`), whichever kind it is. The empty string allocates nothing.
#[derive(Clone, Default)]
pub struct SharedStr(Repr);

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    Interned(&'static str),
    Counted(Arc<str>),
}

impl SharedStr {
    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Empty => "",
            Repr::Interned(s) => s,
            Repr::Counted(s) => s,
        }
    }

    /// `s`, interned: the process keeps one copy of each distinct string interned, for its
    /// whole life, and clones of the result copy a pointer. For names used again and again
    /// (a stream's channels and subscription), not for arbitrary input.
    pub fn interned(s: &str) -> SharedStr {
        static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
        if s.is_empty() {
            return SharedStr::default();
        }
        let mut names = crate::sync::lock(NAMES.get_or_init(Mutex::default));
        let name = match names.get(s) {
            Some(name) => *name,
            None => {
                let name: &'static str = Box::leak(Box::from(s));
                names.insert(name);
                name
            }
        };
        SharedStr(Repr::Interned(name))
    }
}

impl Deref for SharedStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for SharedStr {
    fn as_ref(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<Arc<str>> for SharedStr {
    fn from(s: Arc<str>) -> Self {
        if s.is_empty() {
            SharedStr(Repr::Empty)
        } else {
            SharedStr(Repr::Counted(s))
        }
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> Self {
        if s.is_empty() {
            SharedStr(Repr::Empty)
        } else {
            SharedStr(Repr::Counted(Arc::from(s)))
        }
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> Self {
        SharedStr::from(s.as_str())
    }
}

impl From<&String> for SharedStr {
    fn from(s: &String) -> Self {
        SharedStr::from(s.as_str())
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> Self {
        s.as_str().to_string()
    }
}

impl From<&SharedStr> for String {
    fn from(s: &SharedStr) -> Self {
        s.as_str().to_string()
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedStr {}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for SharedStr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `str` hashes, so that `Borrow<str>` lookups find it.
        self.as_str().hash(state);
    }
}

macro_rules! eq_both_ways {
    ($($other:ty),*) => {$(
        impl PartialEq<$other> for SharedStr {
            fn eq(&self, other: &$other) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }

        impl PartialEq<SharedStr> for $other {
            fn eq(&self, other: &SharedStr) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}

eq_both_ways!(str, &str, String, &String);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn reads_compares_and_hashes_like_a_str() {
        let name = SharedStr::from("ch");
        let copy = name.clone();
        assert_eq!(name, copy);
        assert_eq!(name, "ch");
        assert_eq!("ch", name);
        assert_eq!(name, "ch".to_string());
        assert_eq!("ch".to_string(), name);
        assert_eq!(name.as_str(), "ch");
        assert_eq!(name.len(), 2);
        assert_eq!(format!("{name} {name:?}"), "ch \"ch\"");
        let mut by_name = HashMap::new();
        by_name.insert(name, 1);
        assert_eq!(by_name.get("ch"), Some(&1));
        let (a, b) = (SharedStr::from("a"), SharedStr::from("b"));
        assert!(a < b);
    }

    #[test]
    fn clones_share_and_empty_is_default() {
        let name = SharedStr::from(Arc::<str>::from("topic"));
        let copy = name.clone();
        assert!(std::ptr::eq(name.as_str(), copy.as_str()));
        assert_eq!(SharedStr::from(""), SharedStr::default());
        assert_eq!(SharedStr::default(), "");
        assert!(matches!(SharedStr::from(String::new()).0, Repr::Empty));
        assert_eq!(String::from(copy), "topic");
    }

    #[test]
    fn interned_names_are_one_copy_and_compare_like_any_other() {
        let name = SharedStr::interned("interned-channel");
        let again = SharedStr::interned(&String::from("interned-channel"));
        assert!(std::ptr::eq(name.as_str(), again.as_str()));
        assert!(std::ptr::eq(name.as_str(), name.clone().as_str()));
        assert_eq!(name, SharedStr::from("interned-channel"));
        assert_eq!(name, "interned-channel");
        let mut by_name = HashMap::new();
        by_name.insert(SharedStr::from("interned-channel"), 1);
        assert_eq!(by_name.get(&name), Some(&1));
        assert!(matches!(SharedStr::interned("").0, Repr::Empty));
        assert_eq!(SharedStr::interned(""), SharedStr::default());
    }
}
