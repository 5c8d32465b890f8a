//! Where upstream nsqd puts a message it delivers again, on the raw wire: at the back of the
//! channel's queue, behind what was published before it came back; and a consumer that
//! disconnects without FIN gives nothing back until the msg_timeout (transcript
//! `upstream-U3`). Both hold for a real nsqd too (run against one through `MSGSTREAM_NSQ_*`).

mod common;

use common::*;
use msgstream_nsq_testd::Extensions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One raw connection, identified with a 1 s message timeout.
struct Wire(TcpStream);

/// A delivery: timestamp, attempts, id, body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Delivery {
    timestamp: i64,
    attempts: u16,
    id: Vec<u8>,
    body: String,
}

impl Wire {
    async fn open(server: &impl Nsqd) -> Wire {
        let mut s = TcpStream::connect(server.tcp_addr())
            .await
            .expect("connect");
        let identify =
            br#"{"feature_negotiation":true,"heartbeat_interval":30000,"msg_timeout":1000}"#;
        s.write_all(b"  V2IDENTIFY\n").await.expect("write");
        s.write_all(&(identify.len() as u32).to_be_bytes())
            .await
            .expect("write");
        s.write_all(identify).await.expect("write");
        let mut wire = Wire(s);
        assert_eq!(wire.frame().await.0, 0, "IDENTIFY answered");
        wire
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.expect("write");
    }

    async fn frame(&mut self) -> (i32, Vec<u8>) {
        let mut head = [0u8; 8];
        within("a frame", self.0.read_exact(&mut head))
            .await
            .expect("frame head");
        let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let mut data = vec![0u8; size - 4];
        within("frame data", self.0.read_exact(&mut data))
            .await
            .expect("frame data");
        (kind, data)
    }

    /// The next frame that is not a heartbeat, which is answered.
    async fn reply(&mut self) -> (i32, Vec<u8>) {
        loop {
            let frame = self.frame().await;
            if frame.1 != b"_heartbeat_" {
                return frame;
            }
            self.send(b"NOP\n").await;
        }
    }

    async fn ok(&mut self) {
        let (kind, data) = self.reply().await;
        assert_eq!((kind, data.as_slice()), (0, &b"OK"[..]));
    }

    async fn publish(&mut self, topic: &str, body: &str) {
        let mut cmd = format!("PUB {topic}\n").into_bytes();
        cmd.extend_from_slice(&(body.len() as u32).to_be_bytes());
        cmd.extend_from_slice(body.as_bytes());
        self.send(&cmd).await;
        self.ok().await;
    }

    async fn subscribe(&mut self, topic: &str, channel: &str) {
        self.send(format!("SUB {topic} {channel}\n").as_bytes())
            .await;
        self.ok().await;
    }

    async fn delivery(&mut self) -> Delivery {
        let (kind, data) = self.reply().await;
        assert_eq!(kind, 2, "a message: {}", String::from_utf8_lossy(&data));
        Delivery {
            timestamp: i64::from_be_bytes(data[..8].try_into().expect("timestamp")),
            attempts: u16::from_be_bytes([data[8], data[9]]),
            id: data[10..26].to_vec(),
            body: String::from_utf8_lossy(&data[26..]).into_owned(),
        }
    }

    async fn answer(&mut self, command: &str, id: &[u8], rest: &str) {
        let mut cmd = format!("{command} ").into_bytes();
        cmd.extend_from_slice(id);
        cmd.extend_from_slice(rest.as_bytes());
        cmd.push(b'\n');
        self.send(&cmd).await;
    }
}

fn bodies(deliveries: &[Delivery]) -> Vec<(&str, u16)> {
    deliveries
        .iter()
        .map(|d| (d.body.as_str(), d.attempts))
        .collect()
}

/// `REQ id 0` puts the message behind the two already waiting in the channel (nsqd's
/// `Channel.put`), with attempts 2.
#[tokio::test]
async fn a_requeued_message_goes_behind_what_waits_in_the_channel() {
    let server = server(Extensions::None).await;
    let topic = topic("req-order");
    let mut consumer = Wire::open(&server).await;
    consumer.subscribe(&topic, "c").await;
    consumer.send(b"RDY 1\n").await;
    let mut producer = Wire::open(&server).await;
    for body in ["m1", "m2", "m3"] {
        producer.publish(&topic, body).await;
    }
    let first = consumer.delivery().await;
    assert_eq!(bodies(std::slice::from_ref(&first)), [("m1", 1)]);
    // m2 and m3 wait in the channel: RDY 1 is used up by m1.
    eventually("m2 and m3 queued", async || {
        channel_stats(&server, &topic, None, "c").await["depth"] == 2
    })
    .await;
    consumer.answer("REQ", &first.id, " 0").await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let delivery = consumer.delivery().await;
        consumer.answer("FIN", &delivery.id, "").await;
        got.push(delivery);
    }
    assert_eq!(bodies(&got), [("m2", 1), ("m3", 1), ("m1", 2)]);
    assert_eq!(got[2].timestamp, first.timestamp, "the original timestamp");
}

/// U3 with a 1 s msg_timeout: A takes three messages and disconnects without FIN; they stay in
/// flight (no client left) until the timeout, then queue behind the three published after A
/// left, and come with attempts 2 and their original timestamps.
#[tokio::test]
async fn a_dropped_consumers_messages_come_back_at_their_timeout_behind_newer_ones() {
    let server = server(Extensions::None).await;
    let topic = topic("drop-order");
    let mut producer = Wire::open(&server).await;
    let mut a = Wire::open(&server).await;
    a.subscribe(&topic, "c").await;
    a.send(b"RDY 5\n").await;
    for body in ["m1", "m2", "m3"] {
        producer.publish(&topic, body).await;
    }
    let mut taken = Vec::new();
    for _ in 0..3 {
        taken.push(a.delivery().await);
    }
    drop(a);
    // nsqd notices A left only when its connection's read fails; until then A's message pump
    // still takes what is published (a real nsqd put m4 in flight to the dead A and timed it
    // out with the others), so m4..m6 go out once nsqd let A go.
    eventually("nsqd let A go", async || {
        client_count(&channel_stats(&server, &topic, None, "c").await) == 0
    })
    .await;
    for body in ["m4", "m5", "m6"] {
        producer.publish(&topic, body).await;
    }
    let mut b = Wire::open(&server).await;
    b.subscribe(&topic, "c").await;
    // B asks for nothing until A's three timed out (so they were in flight until then, not
    // put back when A left) and queued behind m4..m6.
    eventually("A's three timed out, A gone", async || {
        let stats = channel_stats(&server, &topic, None, "c").await;
        stats["timeout_count"] == 3 && client_count(&stats) == 1 && stats["depth"] == 6
    })
    .await;
    b.send(b"RDY 10\n").await;
    let mut got = Vec::new();
    for _ in 0..6 {
        let delivery = b.delivery().await;
        b.answer("FIN", &delivery.id, "").await;
        got.push(delivery);
    }
    assert_eq!(
        bodies(&got),
        [
            ("m4", 1),
            ("m5", 1),
            ("m6", 1),
            ("m1", 2),
            ("m2", 2),
            ("m3", 2)
        ]
    );
    for (again, first) in got[3..].iter().zip(&taken) {
        assert_eq!((&again.id, again.timestamp), (&first.id, first.timestamp));
    }
}
