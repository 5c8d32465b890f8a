//! nsqd's output buffer on the raw wire: deliveries to a client with RDY to spare wait for the
//! connection's flush ticker (`output_buffer_timeout`, from IDENTIFY), a client without RDY left
//! or with `output_buffer_size: -1` gets them at once, and IDENTIFY answers the buffer in effect
//! or refuses a bad one. Holds for a real nsqd 1.3.0 too (run against one through
//! `MSGSTREAM_NSQ_*`).

mod common;

use std::time::{Duration, Instant};

use common::*;
use msgstream_nsq_testd::Extensions;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Wire(TcpStream);

impl Wire {
    /// Connects and sends IDENTIFY with `fields` added; the reply frame.
    async fn identify(server: &impl Nsqd, fields: &str) -> (Wire, i32, Vec<u8>) {
        let mut s = TcpStream::connect(server.tcp_addr())
            .await
            .expect("connect");
        let identify = format!(r#"{{"feature_negotiation":true,{fields}}}"#);
        s.write_all(b"  V2IDENTIFY\n").await.expect("write");
        s.write_all(&(identify.len() as u32).to_be_bytes())
            .await
            .expect("write");
        s.write_all(identify.as_bytes()).await.expect("write");
        let mut wire = Wire(s);
        let (kind, data) = wire.frame().await.expect("IDENTIFY answered");
        (wire, kind, data)
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.expect("write");
    }

    /// The next frame, `None` once the server closed the connection.
    async fn frame(&mut self) -> Option<(i32, Vec<u8>)> {
        let mut head = [0u8; 8];
        within("a frame", self.0.read_exact(&mut head)).await.ok()?;
        let size = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        let mut data = vec![0u8; size - 4];
        within("frame data", self.0.read_exact(&mut data))
            .await
            .ok()?;
        Some((kind, data))
    }

    async fn ok(&mut self) {
        let (kind, data) = self.frame().await.expect("a reply");
        assert_eq!((kind, data.as_slice()), (0, &b"OK"[..]));
    }
}

async fn answer(server: &impl Nsqd, fields: &str) -> Value {
    let (_, kind, data) = Wire::identify(server, fields).await;
    assert_eq!(kind, 0, "{}", String::from_utf8_lossy(&data));
    serde_json::from_slice(&data).expect("IDENTIFY answer")
}

fn buffer(answer: &Value) -> (u64, u64) {
    (
        answer["output_buffer_size"].as_u64().expect("size"),
        answer["output_buffer_timeout"].as_u64().expect("timeout"),
    )
}

#[tokio::test]
async fn identify_answers_the_output_buffer_in_effect_and_refuses_bad_ones() {
    let server = server(Extensions::None).await;
    assert_eq!(
        buffer(&answer(&server, r#""msg_timeout":0"#).await),
        (16384, 250)
    );
    let off = r#""output_buffer_size":-1,"output_buffer_timeout":-1"#;
    assert_eq!(buffer(&answer(&server, off).await), (1, 0));
    let asked = r#""output_buffer_size":64,"output_buffer_timeout":25"#;
    assert_eq!(buffer(&answer(&server, asked).await), (64, 25));
    for (fields, refusal) in [
        (
            r#""output_buffer_timeout":10"#,
            "E_BAD_BODY IDENTIFY output buffer timeout (10) is invalid",
        ),
        (
            r#""output_buffer_size":63"#,
            "E_BAD_BODY IDENTIFY output buffer size (63) is invalid",
        ),
    ] {
        let (mut wire, kind, data) = Wire::identify(&server, fields).await;
        assert_eq!(
            (kind, String::from_utf8_lossy(&data).as_ref()),
            (1, refusal)
        );
        assert!(wire.frame().await.is_none(), "closed after {refusal}");
    }
}

/// Subscribes with `identify` fields and `rdy`, publishes one message, and returns how long
/// after the IDENTIFY answer it arrived.
async fn lone_delivery_after(fields: &str, rdy: u32) -> Duration {
    let server = server(Extensions::None).await;
    let topic = topic("outbuf");
    let (mut consumer, kind, _) = Wire::identify(&server, fields).await;
    let identified = Instant::now();
    assert_eq!(kind, 0);
    consumer.send(format!("SUB {topic} c\n").as_bytes()).await;
    consumer.ok().await;
    consumer.send(format!("RDY {rdy}\n").as_bytes()).await;
    let (mut producer, _, _) = Wire::identify(&server, r#""msg_timeout":0"#).await;
    producer
        .send(format!("PUB {topic}\n\0\0\0\x04lone").as_bytes())
        .await;
    producer.ok().await;
    let (kind, data) = consumer.frame().await.expect("the delivery");
    assert_eq!(kind, 2, "{}", String::from_utf8_lossy(&data));
    assert_eq!(&data[26..], b"lone");
    identified.elapsed()
}

#[tokio::test]
async fn a_lone_delivery_waits_for_the_flush_while_the_client_has_rdy_to_spare() {
    // The flush ticker starts at IDENTIFY: the message goes out on its first tick.
    let waited = lone_delivery_after(r#""output_buffer_timeout":1000"#, 5).await;
    assert!(
        waited >= Duration::from_millis(800) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[tokio::test]
async fn a_delivery_that_uses_up_rdy_or_an_unbuffered_one_goes_out_at_once() {
    for (fields, rdy) in [
        (r#""output_buffer_timeout":1000"#, 1),
        (r#""output_buffer_size":-1,"output_buffer_timeout":-1"#, 5),
    ] {
        let waited = lone_delivery_after(fields, rdy).await;
        assert!(
            waited < Duration::from_millis(500),
            "{fields} RDY {rdy}: {waited:?}"
        );
    }
}
