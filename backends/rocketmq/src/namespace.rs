//! Namespaces: resource names become `ns%name` on the broker, retry topics `%RETRY%ns%group`.

/// Prefix of a consumer group's retry topic.
pub const RETRY_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic.
pub const DLQ_PREFIX: &str = "%DLQ%";

/// Wraps and unwraps names with an optional namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespace(Option<String>);

impl Namespace {
    /// `ns`, or no namespace when empty.
    pub fn new(ns: &str) -> Self {
        Namespace((!ns.is_empty()).then(|| ns.to_owned()))
    }

    /// The broker-side name of a topic or group.
    pub fn wrap(&self, name: &str) -> String {
        match &self.0 {
            Some(ns) if !name.starts_with(&format!("{ns}%")) => format!("{ns}%{name}"),
            _ => name.to_owned(),
        }
    }

    /// The application-side name of a broker resource; `None` if it belongs to another
    /// namespace (or to none while this one is set).
    pub fn unwrap<'a>(&self, name: &'a str) -> Option<&'a str> {
        match &self.0 {
            Some(ns) => name.strip_prefix(ns.as_str())?.strip_prefix('%'),
            None => Some(name),
        }
    }

    /// The retry topic of `group` (an application-side group name).
    pub fn retry_topic(&self, group: &str) -> String {
        format!("{RETRY_PREFIX}{}", self.wrap(group))
    }

    /// The dead-letter topic of `group`.
    pub fn dlq_topic(&self, group: &str) -> String {
        format!("{DLQ_PREFIX}{}", self.wrap(group))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_and_unwrap() {
        let ns = Namespace::new("ns");
        assert_eq!(ns.wrap("t"), "ns%t");
        assert_eq!(ns.wrap("ns%t"), "ns%t");
        assert_eq!(ns.unwrap("ns%t"), Some("t"));
        assert_eq!(ns.unwrap("other%t"), None);
        assert_eq!(ns.unwrap("t"), None);
        assert_eq!(ns.retry_topic("g"), "%RETRY%ns%g");
        assert_eq!(ns.dlq_topic("g"), "%DLQ%ns%g");
        let none = Namespace::new("");
        assert_eq!(
            (none.wrap("t"), none.unwrap("t")),
            ("t".to_owned(), Some("t"))
        );
        assert_eq!(none.retry_topic("g"), "%RETRY%g");
    }
}
