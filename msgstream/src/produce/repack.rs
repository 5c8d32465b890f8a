//! Repacking: which producer channel each message of a pack goes to
//! (`shared/protocols/message-model.md`, "repacking").

use std::sync::Arc;

use crate::msg::{DeleteRequest, InsertRequest, MsgBase, MsgBody, MsgType, TsMsg};
use crate::{Error, Result};

/// A caller-supplied repack function: `(messages, channel count)` → one message list per channel
/// (the outer `Vec` has exactly `channel count` entries). It replaces the default rules entirely.
pub type RepackFn = Arc<dyn Fn(Vec<TsMsg>, usize) -> Result<Vec<Vec<TsMsg>>> + Send + Sync>;

/// The default rules: Insert and Delete are split per row and each row goes to the channel of
/// its hash key; any other message goes to the channel of its first hash key.
pub fn default_repack(msgs: Vec<TsMsg>, channels: usize) -> Result<Vec<Vec<TsMsg>>> {
    if channels == 0 {
        return Err(Error::InvalidArgument("no producer channels".into()));
    }
    let mut out = vec![Vec::new(); channels];
    let route = |key: u32| key as usize % channels;
    for (index, msg) in msgs.into_iter().enumerate() {
        match msg.body() {
            MsgBody::Insert(request) => {
                for (key, row) in split_insert(index, request, &msg.hash_keys)? {
                    out[route(key)].push(row_msg(MsgBody::Insert(row), key, &msg));
                }
            }
            MsgBody::Delete(request) => {
                for (key, row) in split_delete(index, request, &msg.hash_keys)? {
                    out[route(key)].push(row_msg(MsgBody::Delete(row), key, &msg));
                }
            }
            _ => {
                let key = *msg.hash_keys.first().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "message {index} (msg_type {}) has no hash key to route by",
                        msg.msg_type()
                    ))
                })?;
                out[route(key)].push(msg);
            }
        }
    }
    Ok(out)
}

/// One row of `msg` split off into a message of its own, routed by `key`.
fn row_msg(body: MsgBody, key: u32, msg: &TsMsg) -> TsMsg {
    let mut row = TsMsg::new(body).with_hash_keys(vec![key]);
    row.properties = msg.properties.clone();
    row
}

fn row_base(base: &Option<MsgBase>, msg_type: MsgType, timestamp: u64) -> Option<MsgBase> {
    let mut base = base.clone().unwrap_or_default();
    base.msg_type = msg_type as i32;
    base.timestamp = timestamp;
    Some(base)
}

fn check_len(index: usize, what: &str, len: usize, rows: usize) -> Result<()> {
    if len == rows {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "message {index}: {what} has {len} entries but the message has {rows} rows"
        )))
    }
}

fn split_insert(
    index: usize,
    m: &InsertRequest,
    keys: &[u32],
) -> Result<Vec<(u32, InsertRequest)>> {
    let rows = usize::try_from(m.num_rows)
        .map_err(|_| Error::InvalidArgument(format!("message {index}: num_rows too large")))?;
    check_len(index, "hash_keys", keys.len(), rows)?;
    check_len(index, "timestamps", m.timestamps.len(), rows)?;
    check_len(index, "row_ids", m.row_ids.len(), rows)?;
    if !m.row_data.is_empty() {
        check_len(index, "row_data", m.row_data.len(), rows)?;
    }
    if !m.fields_data.is_empty() && rows != 1 {
        return Err(Error::InvalidArgument(format!(
            "message {index}: column data cannot be split per row; use a custom repack function"
        )));
    }
    Ok((0..rows)
        .map(|row| {
            let one = InsertRequest {
                base: row_base(&m.base, MsgType::Insert, m.timestamps[row]),
                timestamps: [m.timestamps[row]].into(),
                row_ids: [m.row_ids[row]].into(),
                row_data: m.row_data.get(row).cloned().into_iter().collect(),
                num_rows: 1,
                ..m.clone()
            };
            (keys[row], one)
        })
        .collect())
}

/// Splits a delete per row. Its keys are in `primary_keys` (Milvus ≥ 2.2, integer or string),
/// in `int64_primary_keys` (older writers), or in both; every form present must hold one key per
/// row, and each row's message carries its key in the same form(s).
fn split_delete(
    index: usize,
    m: &DeleteRequest,
    keys: &[u32],
) -> Result<Vec<(u32, DeleteRequest)>> {
    let rows = usize::try_from(m.num_rows)
        .map_err(|_| Error::InvalidArgument(format!("message {index}: negative num_rows")))?;
    check_len(index, "hash_keys", keys.len(), rows)?;
    check_len(index, "timestamps", m.timestamps.len(), rows)?;
    if let Some(ids) = &m.primary_keys {
        check_len(index, "primary_keys", ids.len(), rows)?;
    }
    if m.primary_keys.is_none() || !m.int64_primary_keys.is_empty() {
        check_len(
            index,
            "int64_primary_keys",
            m.int64_primary_keys.len(),
            rows,
        )?;
    }
    let template = DeleteRequest {
        timestamps: Vec::new(),
        int64_primary_keys: Vec::new(),
        primary_keys: None,
        ..m.clone()
    };
    Ok((0..rows)
        .map(|row| {
            let one = DeleteRequest {
                base: row_base(&m.base, MsgType::Delete, m.timestamps[row]),
                timestamps: vec![m.timestamps[row]],
                int64_primary_keys: m.int64_primary_keys.get(row).copied().into_iter().collect(),
                primary_keys: m.primary_keys.as_ref().and_then(|ids| ids.row(row)),
                num_rows: 1,
                ..template.clone()
            };
            (keys[row], one)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::Ids;

    fn insert(keys: Vec<u32>, ts: Vec<u64>, rows: u64) -> TsMsg {
        let n = ts.len();
        TsMsg::new(MsgBody::Insert(InsertRequest {
            base: Some(MsgBase::new(MsgType::Insert as i32, 1, 0)),
            timestamps: ts.into(),
            row_ids: (0..n as i64).collect(),
            num_rows: rows,
            ..Default::default()
        }))
        .with_hash_keys(keys)
    }

    #[test]
    fn insert_is_split_per_row_by_key() {
        let out = default_repack(vec![insert(vec![1, 3], vec![10, 11], 2)], 2).expect("repack");
        assert!(out[0].is_empty());
        assert_eq!(out[1].len(), 2);
        for (msg, (ts, row)) in out[1].iter().zip([(10, 0), (11, 1)]) {
            let MsgBody::Insert(m) = msg.body() else {
                panic!("insert expected")
            };
            assert_eq!(
                (m.num_rows, m.timestamps.clone(), m.row_ids.clone()),
                (1, [ts].into(), [row].into())
            );
            assert_eq!(msg.base().timestamp, ts);
        }
    }

    #[test]
    fn row_count_mismatch_names_the_field() {
        let err = default_repack(vec![insert(vec![1], vec![10, 11], 2)], 2).expect_err("mismatch");
        assert!(err.to_string().contains("hash_keys has 1 entries"), "{err}");
        let err =
            default_repack(vec![insert(vec![1, 2], vec![10, 11], 3)], 2).expect_err("mismatch");
        assert!(err.to_string().contains("has 3 rows"), "{err}");
    }

    #[test]
    fn delete_split_and_default_routing() {
        let delete = TsMsg::new(MsgBody::Delete(DeleteRequest {
            timestamps: vec![5, 6, 7],
            int64_primary_keys: vec![100, 101, 102],
            num_rows: 3,
            ..Default::default()
        }))
        .with_hash_keys(vec![0, 1, 2]);
        let out = default_repack(vec![delete, TsMsg::time_tick(9).with_hash_keys(vec![5])], 3)
            .expect("repack");
        assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 2]);
        assert!(out[2][1].is_time_tick());
    }

    fn delete(ids: Option<Ids>, legacy: Vec<i64>) -> TsMsg {
        TsMsg::new(MsgBody::Delete(DeleteRequest {
            base: Some(MsgBase::new(MsgType::Delete as i32, 4, 0)),
            timestamps: vec![5, 6],
            int64_primary_keys: legacy,
            primary_keys: ids,
            num_rows: 2,
            segment_id: 77,
            ..Default::default()
        }))
        .with_hash_keys(vec![2, 5])
    }

    fn deletes(out: &[Vec<TsMsg>]) -> Vec<(usize, DeleteRequest)> {
        let mut rows = Vec::new();
        for (channel, msgs) in out.iter().enumerate() {
            for msg in msgs {
                let MsgBody::Delete(m) = msg.body() else {
                    panic!("delete expected")
                };
                assert_eq!((m.num_rows, m.segment_id), (1, 77));
                rows.push((channel, m.clone()));
            }
        }
        rows
    }

    #[test]
    fn delete_rows_keep_their_key_form() {
        let strings = vec!["a".to_string(), "b".to_string()];
        let out = default_repack(vec![delete(Some(Ids::strings(strings)), vec![])], 2)
            .expect("string keys");
        let rows = deletes(&out);
        assert_eq!(rows.len(), 2);
        for ((channel, m), (want_channel, key, ts)) in rows.iter().zip([(0, "a", 5), (1, "b", 6)]) {
            assert_eq!(*channel, want_channel);
            assert_eq!(m.primary_keys, Some(Ids::strings(vec![key.to_string()])));
            assert!(m.int64_primary_keys.is_empty());
            assert_eq!(m.timestamps, vec![ts]);
        }
        let out = default_repack(vec![delete(Some(Ids::ints(vec![8, 9])), vec![8, 9])], 2)
            .expect("both forms");
        let rows = deletes(&out);
        assert_eq!(rows[0].1.primary_keys, Some(Ids::ints(vec![8])));
        assert_eq!(rows[0].1.int64_primary_keys, vec![8]);
        assert_eq!(rows[1].1.primary_keys, Some(Ids::ints(vec![9])));
        assert_eq!(rows[1].1.int64_primary_keys, vec![9]);
    }

    #[test]
    fn delete_key_count_mismatch_names_the_form() {
        let err = default_repack(vec![delete(Some(Ids::ints(vec![1])), vec![])], 2)
            .expect_err("one key, two rows");
        assert!(
            err.to_string().contains("primary_keys has 1 entries"),
            "{err}"
        );
        let err = default_repack(vec![delete(Some(Ids::ints(vec![1, 2])), vec![3])], 2)
            .expect_err("legacy keys short");
        assert!(
            err.to_string().contains("int64_primary_keys has 1"),
            "{err}"
        );
        let err = default_repack(vec![delete(None, vec![])], 2).expect_err("no keys at all");
        assert!(
            err.to_string().contains("int64_primary_keys has 0"),
            "{err}"
        );
    }

    #[test]
    fn message_without_keys_is_an_error() {
        let err = default_repack(vec![TsMsg::time_tick(1)], 2).expect_err("no key");
        assert!(
            matches!(err, Error::InvalidArgument(ref m) if m.contains("no hash key")),
            "{err}"
        );
    }
}
