//! A decoder that panics ends its channel with an error item, however little room the queue
//! has.

use std::sync::Arc;
use std::time::Duration;

use crate::mem::MemoryClient;
use crate::mq::{Client, InitialPosition};
use crate::msg::{CustomMsg, DecoderRegistry, MsgBase, MsgBody, MsgHeader, MsgPack, TsMsg};
use crate::stream::{MsgStream, StreamOptions};
use crate::testkit::insert;
use crate::tt::TtMsgStream;

/// Longer than anything here takes; a hang fails the test instead of stalling CI.
const WAIT: Duration = Duration::from_secs(10);

/// A message kind whose decoder panics.
const BOOM: i32 = 9001;

/// A memory backend whose channel `a` holds `good` inserts and then a message of kind
/// [`BOOM`], and stream options with `buffer` whose registry panics on that kind.
pub(crate) async fn setup(good: i64, buffer: usize) -> (Arc<dyn Client>, StreamOptions) {
    let client: Arc<dyn Client> = Arc::new(MemoryClient::new());
    let mut out = MsgStream::new(client.clone(), StreamOptions::default());
    out.as_producer(&["a"]).await.expect("producer");
    let header = MsgHeader {
        base: Some(MsgBase::new(BOOM, 1, 5)),
    };
    let boom = CustomMsg::from_payload(prost::Message::encode_to_vec(&header)).expect("custom");
    let mut msgs: Vec<TsMsg> = (1..=good).map(|i| insert(i, i as u64, 0)).collect();
    msgs.push(TsMsg::new(MsgBody::Custom(boom)).with_hash_keys(vec![0]));
    out.produce(&MsgPack {
        msgs,
        ..MsgPack::default()
    })
    .await
    .expect("produce");
    let mut registry = DecoderRegistry::default();
    registry.register(BOOM, |_| panic!("decoder bug"));
    let options = StreamOptions::default()
        .with_buffer(buffer)
        .with_registry(Arc::new(registry));
    (client, options)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_reported_through_a_queue_of_one() {
    // The panic's ending (the error, then the end) is two deliveries; the queue holds one.
    let (client, options) = setup(0, 1).await;
    let mut plain = MsgStream::new(client.clone(), options.clone());
    plain
        .as_consumer(&["a"], "plain", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    match tokio::time::timeout(WAIT, plain.next_pack()).await {
        Ok(Some(Err(e))) => assert!(e.to_string().contains("panicked"), "{e}"),
        Ok(other) => panic!("expected the panic as an error item, got {other:?}"),
        Err(_) => panic!("the panic never reached a stream whose queue holds one message"),
    }
    let end = tokio::time::timeout(WAIT, plain.next_pack()).await;
    assert!(matches!(end, Ok(None)), "the stream ended: {end:?}");
    tokio::time::timeout(WAIT, plain.close())
        .await
        .expect("close returns");

    let mut tt = TtMsgStream::new(client, options);
    tt.as_consumer(&["a"], "tt", InitialPosition::Earliest)
        .await
        .expect("as_consumer");
    match tokio::time::timeout(WAIT, tt.next_pack()).await {
        Ok(Some(Err(e))) => assert!(e.to_string().contains("panicked"), "{e}"),
        Ok(other) => panic!("expected the panic as an error item, got {other:?}"),
        Err(_) => panic!("the panic never reached a tt stream whose queue holds one message"),
    }
    tokio::time::timeout(WAIT, tt.close())
        .await
        .expect("close returns");
}
