//! Typed constructors for the common messages, so an application writes `TsMsg::insert(…)`
//! instead of assembling Milvus's wire types by hand. The wire types stay public for what these
//! do not cover (several rows, collection names, column-based inserts).

use bytes::Bytes;

use super::proto::{Blob, DeleteRequest, Ids, InsertRequest, MsgBase, MsgType};
use super::tsmsg::{MsgBody, TsMsg};
use super::MsgPack;

impl TsMsg {
    /// A one-row insert at `ts`: row id and header id `row_id`, the row's data `data`.
    ///
    /// It is routed by its row id (`row_id as u32 % channels`); [`TsMsg::with_hash_keys`]
    /// routes it otherwise.
    pub fn insert(row_id: i64, ts: u64, data: impl Into<Bytes>) -> Self {
        TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, row_id, ts)),
            timestamps: [ts].into(),
            row_ids: [row_id].into(),
            row_data: [Blob { value: data.into() }].into(),
            num_rows: 1,
            ..InsertRequest::default()
        }))
        .with_hash_keys(vec![route_key(row_id)])
    }

    /// A one-row delete at `ts` of the row whose integer primary key is `primary_key`
    /// (written in `primary_keys`, as Milvus 2.2 and later do), routed by that key.
    pub fn delete(primary_key: i64, ts: u64) -> Self {
        TsMsg::new(MsgBody::Delete(DeleteRequest {
            base: Some(MsgBase::new(MsgType::Delete as i32, primary_key, ts)),
            timestamps: vec![ts],
            primary_keys: Some(Ids::ints(vec![primary_key])),
            num_rows: 1,
            ..DeleteRequest::default()
        }))
        .with_hash_keys(vec![route_key(primary_key)])
    }

    /// A timetick at `ts`: the promise that this channel sends nothing at or below `ts` after
    /// it. Broadcast it ([`crate::tt::TtMsgStream::broadcast`]) so every channel makes it.
    pub fn timetick(ts: u64) -> Self {
        TsMsg::time_tick(ts)
    }

    /// The data of an insert's rows, in row order; empty for any other kind.
    pub fn row_data(&self) -> impl Iterator<Item = &[u8]> {
        let rows: &[Blob] = match self.body() {
            MsgBody::Insert(insert) => &insert.row_data,
            _ => &[],
        };
        rows.iter().map(|row| row.value.as_ref())
    }
}

/// The routing key of a row: its id's low 32 bits, as Milvus hashes integer keys to a u32.
fn route_key(id: i64) -> u32 {
    id as u32
}

impl MsgPack {
    /// A pack of `msgs` to produce or broadcast (the stream fills in the rest as it sends).
    pub fn new(msgs: impl IntoIterator<Item = TsMsg>) -> Self {
        MsgPack {
            msgs: msgs.into_iter().collect(),
            ..MsgPack::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{DecoderRegistry, IdField};

    #[test]
    fn an_insert_carries_its_row_and_routes_by_id() {
        let msg = TsMsg::insert(7, 42, "hello");
        assert_eq!((msg.id(), msg.begin_ts(), msg.end_ts()), (7, 42, 42));
        assert_eq!(msg.msg_type(), MsgType::Insert as i32);
        assert_eq!(msg.hash_keys, [7]);
        assert_eq!(msg.row_data().collect::<Vec<_>>(), [b"hello".as_slice()]);
        let MsgBody::Insert(insert) = msg.body() else {
            panic!("an insert: {msg:?}")
        };
        assert_eq!((insert.num_rows, &insert.row_ids[..]), (1, &[7][..]));
    }

    #[test]
    fn a_delete_names_its_key_the_way_milvus_2_2_does() {
        let msg = TsMsg::delete(-3, 9);
        assert_eq!((msg.id(), msg.end_ts()), (-3, 9));
        assert_eq!(msg.hash_keys, [(-3i64) as u32]);
        assert_eq!(msg.row_data().count(), 0);
        let MsgBody::Delete(delete) = msg.body() else {
            panic!("a delete: {msg:?}")
        };
        let ids = delete
            .primary_keys
            .as_ref()
            .and_then(|k| k.id_field.as_ref());
        assert!(matches!(ids, Some(IdField::IntId(keys)) if keys.data == [-3]));
    }

    #[test]
    fn built_messages_survive_the_wire() {
        let registry = DecoderRegistry::default();
        for msg in [
            TsMsg::insert(1, 2, vec![0u8, 255]),
            TsMsg::delete(5, 6),
            TsMsg::timetick(8),
        ] {
            let body = registry.decode(&msg.encode()).expect("decodes");
            assert_eq!(&body, msg.body());
        }
        assert!(TsMsg::timetick(8).is_time_tick());
    }

    #[test]
    fn a_pack_holds_the_messages_given() {
        let pack = MsgPack::new([TsMsg::insert(1, 1, ""), TsMsg::timetick(2)]);
        assert_eq!(pack.msgs.len(), 2);
        assert!(pack.end_positions.is_empty());
    }
}
