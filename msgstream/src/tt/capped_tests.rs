//! A channel the tt stream stopped reading at its cap still ends the stream when its consumer
//! ends: the end is reported, not waited past.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::mem::MemoryClient;
use crate::mq::{Client, InitialPosition};
use crate::msg::MsgPack;
use crate::stream::StreamOptions;
use crate::testkit::faults::{Call, FaultyClient};
use crate::testkit::insert;
use crate::tt::TtMsgStream;
use crate::Error;

/// Longer than anything here takes; a hang fails the test instead of stalling CI.
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_channel_whose_consumer_ends_ends_the_stream() {
    // The consumer's first receive takes all ten messages (no tick among them); every later
    // receive fails for good, so the channel ends right after them.
    let receives = Arc::new(AtomicUsize::new(0));
    let counted = receives.clone();
    let client: Arc<dyn Client> = Arc::new(FaultyClient::new(
        Arc::new(MemoryClient::new()),
        move |call| {
            (matches!(call, Call::Receive(_)) && counted.fetch_add(1, Ordering::SeqCst) > 0)
                .then_some(Error::Closed("test consumer"))
        },
    ));
    let mut out = TtMsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&["a"]).await.expect("producer");
    out.produce(&MsgPack {
        msgs: (1..=10).map(|i| insert(i, i as u64, 0)).collect(),
        ..MsgPack::default()
    })
    .await
    .expect("produce");
    // Capped at four held messages: the stream stops reading the channel with six more queued.
    let options = StreamOptions::default()
        .with_buffer(16)
        .with_max_held_per_channel(4);
    let mut stream = TtMsgStream::new(client.clone(), options);
    stream
        .as_consumer(&["a"], "sub", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    match tokio::time::timeout(WAIT, stream.next_pack()).await {
        Ok(Some(Err(Error::Closed(_)))) => {}
        Ok(other) => panic!("expected the consumer's end as an error, got {other:?}"),
        Err(_) => panic!("next_pack hung on a capped channel whose consumer ended"),
    }
    let end = tokio::time::timeout(WAIT, stream.next_pack()).await;
    assert!(matches!(end, Ok(None)), "the stream ended: {end:?}");
    tokio::time::timeout(WAIT, stream.close())
        .await
        .expect("close returns");
}
