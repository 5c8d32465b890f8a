//! What travels inside remoting frames: codes, routes, properties and stored messages.

pub mod codes;
pub mod compression;
pub mod properties;
pub mod route;
pub mod stored;

/// Java's `String.hashCode`: what brokers compare tags by (consume-queue tag codes), and what
/// Java producers select a queue by key with, so keyed messages land on the same queue from
/// either client.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn java_string_hash() {
        assert_eq!(super::java_hash(""), 0);
        assert_eq!(super::java_hash("TagA"), 2_598_919);
        assert_eq!(super::java_hash("hello world"), 1_794_106_052);
    }
}
