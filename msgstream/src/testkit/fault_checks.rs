//! Checks with faults injected around a real backend's consumers ([`super::faults`]): what no
//! broker does on demand, every backend must survive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::faults::{Call, FaultyClient};
use super::stream_checks::{consumer, next_msg, pack, producer};
use super::{insert, row_id, unique};
use crate::mq::{Client, InitialPosition};
use crate::msg::MsgPosition;
use crate::Error;

/// A seek whose consumer moved and then failed (the backend stored the new position, and its
/// answer was lost) changes nothing once the consumer says so ([`Error::SeekMoved`]): the
/// stream puts that channel back, and the channels moved before it, and both go on right
/// after the last message the application had: nothing again, nothing skipped. The puts-back
/// are real seeks of the backend under test.
pub async fn seek_failing_after_the_consumer_moved(client: Arc<dyn Client>) {
    let names = [unique("seekmoved-a"), unique("seekmoved-b")];
    let armed = Arc::new(AtomicBool::new(false));
    let (failing, fault_armed) = (names[1].clone(), armed.clone());
    let client: Arc<dyn Client> = Arc::new(FaultyClient::new(client, move |call| {
        (call == Call::Sought(&failing) && fault_armed.swap(false, Ordering::SeqCst)).then(|| {
            Error::SeekMoved {
                channel: failing.clone(),
                source: Box::new(Error::transient("test", "the answer to the seek was lost")),
            }
        })
    }));
    for (c, name) in names.iter().enumerate() {
        let out = producer(&client, &[name.as_str()]).await;
        out.produce(&pack(
            (0..6)
                .map(|i| insert(100 * c as i64 + i, 10 + i as u64, 0))
                .collect(),
        ))
        .await
        .expect("produce");
    }
    let channels = [names[0].as_str(), names[1].as_str()];
    let mut stream = consumer(&client, &channels, InitialPosition::Earliest).await;
    // Per channel: the rows handed over, and the first position (the seek target).
    let mut rows: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    let mut first: [Option<MsgPosition>; 2] = [None, None];
    while rows[0].len() < 2 || rows[1].len() < 2 {
        let msg = next_msg(&mut stream).await;
        let position = msg.position.clone().expect("position");
        let c = usize::from(position.channel_name == names[1]);
        rows[c].push(row_id(&msg));
        first[c].get_or_insert(position);
    }
    let targets: Vec<MsgPosition> = first.iter().flatten().cloned().collect();
    if !client.capabilities().seek {
        assert!(matches!(
            stream.seek_inclusive(&targets).await,
            Err(Error::Unsupported { .. })
        ));
        return;
    }
    armed.store(true, Ordering::SeqCst);
    let refused = stream.seek_inclusive(&targets).await;
    assert!(
        matches!(
            refused,
            Err(Error::Backend {
                transient: true,
                ..
            })
        ),
        "the seek's failure is reported: {refused:?}"
    );
    assert!(!armed.load(Ordering::SeqCst), "the fault fired");
    while rows[0].len() < 6 || rows[1].len() < 6 {
        let msg = next_msg(&mut stream).await;
        let c = usize::from(msg.position.as_ref().expect("position").channel_name == names[1]);
        rows[c].push(row_id(&msg));
    }
    for (c, got) in rows.iter().enumerate() {
        let want: Vec<i64> = (0..6).map(|i| 100 * c as i64 + i).collect();
        assert_eq!(
            got, &want,
            "channel {c}: as if the seek had not been asked for"
        );
    }
    // A seek that goes through still works.
    stream.seek_inclusive(&targets).await.expect("seek");
    let again = next_msg(&mut stream).await;
    assert!(
        [0, 100].contains(&row_id(&again)),
        "back at a first message: {}",
        row_id(&again)
    );
    stream.close().await;
}
