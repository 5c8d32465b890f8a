//! [`MessageId`]: the id of one message in one channel.

use std::fmt;

use bytes::Bytes;

/// The id of one message in one channel.
///
/// Opaque bytes to the core. Every backend encodes its ids so that **byte order is channel order**
/// (big-endian integers), so `Ord` on `MessageId` is the backend's order within one channel; ids of
/// different channels are not comparable in any useful way. `to_bytes` and
/// [`crate::mq::Client::message_id_from_bytes`] round-trip.
///
/// Ids of up to 23 bytes (every backend here: 8 for rocksmq and the in-memory backend, 16 for
/// NSQ) are stored inline: making, cloning and dropping one allocates nothing, which matters
/// at millions of messages per second.
#[derive(Clone)]
pub struct MessageId(Repr);

/// Inline capacity: 23 bytes and the length fit beside the niche of `Bytes`' vtable pointer, so
/// an id is 32 bytes with no separate tag.
const INLINE: usize = 23;

const _: () = assert!(std::mem::size_of::<MessageId>() == 32);

#[derive(Clone)]
enum Repr {
    Inline(InlineId),
    Heap(Bytes),
}

/// An inline id's bytes and length as one 8-byte-aligned block of 24 bytes.
///
/// Aligned, so that every move of a `Message` or `MsgPosition` copies an id as three whole
/// words rather than through unaligned stores that a following read stalls on.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct InlineId {
    bytes: [u8; INLINE],
    len: u8,
}

impl MessageId {
    /// Wraps backend-encoded bytes. Backends call this; applications use
    /// `Client::message_id_from_bytes`, which validates.
    pub fn from_backend_bytes(bytes: impl AsRef<[u8]>) -> Self {
        let bytes = bytes.as_ref();
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= INLINE => {
                let mut inline = [0; INLINE];
                inline[..bytes.len()].copy_from_slice(bytes);
                MessageId(Repr::Inline(InlineId { bytes: inline, len }))
            }
            _ => MessageId(Repr::Heap(Bytes::copy_from_slice(bytes))),
        }
    }

    /// The 8-byte big-endian form used by backends whose ids are one `u64`.
    #[inline]
    pub fn from_u64(id: u64) -> Self {
        let mut bytes = [0; INLINE];
        bytes[..8].copy_from_slice(&id.to_be_bytes());
        MessageId(Repr::Inline(InlineId { bytes, len: 8 }))
    }

    /// Reads back the `u64` of an id made by [`MessageId::from_u64`].
    pub fn as_u64(&self) -> Option<u64> {
        <[u8; 8]>::try_from(self.as_bytes())
            .ok()
            .map(u64::from_be_bytes)
    }

    /// The serialized form, stable across processes.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }

    /// Borrowed serialized form.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(InlineId { bytes, len }) => &bytes[..usize::from(*len)],
            Repr::Heap(bytes) => bytes,
        }
    }

    /// Whether it has no bytes: the [`Default`] id, which no backend gives a message (a
    /// position without an id, say).
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

impl Default for MessageId {
    /// The empty id (no bytes).
    fn default() -> Self {
        MessageId(Repr::Inline(InlineId {
            bytes: [0; INLINE],
            len: 0,
        }))
    }
}

impl PartialEq for MessageId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for MessageId {}

impl PartialOrd for MessageId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MessageId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::hash::Hash for MessageId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_u64() {
            Some(id) => write!(f, "MessageId({id})"),
            None => write!(f, "MessageId(0x")
                .and_then(|_| {
                    self.as_bytes()
                        .iter()
                        .try_for_each(|b| write!(f, "{b:02x}"))
                })
                .and_then(|_| write!(f, ")")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_ids_live_on_the_heap_and_compare_by_bytes() {
        let long = MessageId::from_backend_bytes(vec![7u8; 40]);
        assert_eq!(long.as_bytes(), &[7u8; 40][..]);
        assert!(MessageId::from_backend_bytes(vec![7u8; 3]) < long);
        assert_eq!(long.to_bytes().len(), 40);
        assert_eq!(
            MessageId::from_backend_bytes(8u64.to_be_bytes()),
            MessageId::from_u64(8)
        );
    }

    #[test]
    fn u64_ids_order_as_bytes() {
        let ids: Vec<MessageId> = [0u64, 1, 255, 256, u64::MAX]
            .into_iter()
            .map(MessageId::from_u64)
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids[3].as_u64(), Some(256));
        assert_eq!(MessageId::from_backend_bytes(vec![1, 2]).as_u64(), None);
        assert_eq!(
            format!("{:?}", MessageId::from_backend_bytes(vec![1, 2])),
            "MessageId(0x0102)"
        );
    }
}
