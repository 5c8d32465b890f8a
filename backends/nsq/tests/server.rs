//! The test server on the raw wire: the nsqd behaviours clients depend on, and each surprise
//! of the protocol notes §2.6, checked byte by byte with no client library in between. Tests on
//! `server` hold for any nsqd (or Youzan nsqd) with default options and run against an external
//! one too; `fixture_` tests set server options or check what only the test server does.

mod common;

use std::time::{Duration, Instant};

use common::*;
use msgstream_nsq_testd::{Extensions, Options, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Wire(TcpStream);

impl Wire {
    async fn open(server: &impl Nsqd, heartbeat_ms: i64) -> Wire {
        let mut s = TcpStream::connect(server.tcp_addr())
            .await
            .expect("connect");
        let identify = format!(
            r#"{{"feature_negotiation":true,"heartbeat_interval":{heartbeat_ms},"msg_timeout":1000}}"#
        );
        s.write_all(b"  V2IDENTIFY\n").await.expect("write");
        s.write_all(&(identify.len() as u32).to_be_bytes())
            .await
            .expect("write");
        s.write_all(identify.as_bytes()).await.expect("write");
        let mut wire = Wire(s);
        let (kind, data) = wire.frame().await.expect("identify reply");
        assert_eq!(kind, 0, "{}", String::from_utf8_lossy(&data));
        wire
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.expect("write");
    }

    /// The next frame, or `None` once the server closed the socket.
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

    /// The next frame that is not a heartbeat.
    async fn reply(&mut self) -> Option<(i32, Vec<u8>)> {
        loop {
            let frame = self.frame().await?;
            if frame.1 != b"_heartbeat_" {
                return Some(frame);
            }
            self.send(b"NOP\n").await;
        }
    }

    async fn error_code(&mut self) -> String {
        let (kind, data) = self.reply().await.expect("an error frame");
        assert_eq!(kind, 1, "{}", String::from_utf8_lossy(&data));
        let text = String::from_utf8_lossy(&data).into_owned();
        text.split(' ').next().unwrap_or_default().to_string()
    }

    async fn closed(&mut self) -> bool {
        self.reply().await.is_none()
    }
}

fn pub_cmd(topic: &str, partition: Option<u32>, body: &[u8]) -> Vec<u8> {
    let mut cmd = match partition {
        Some(p) => format!("PUB {topic} {p}\n").into_bytes(),
        None => format!("PUB {topic}\n").into_bytes(),
    };
    cmd.extend_from_slice(&(body.len() as u32).to_be_bytes());
    cmd.extend_from_slice(body);
    cmd
}

#[tokio::test]
async fn wrong_magic_is_refused_and_closed() {
    let s = server(Extensions::None).await;
    let mut raw = TcpStream::connect(s.tcp_addr()).await.expect("connect");
    raw.write_all(b"  V1").await.expect("write");
    let mut wire = Wire(raw);
    assert_eq!(wire.error_code().await, "E_BAD_PROTOCOL");
    assert!(wire.closed().await);
}

#[tokio::test]
async fn silent_clients_are_dropped_after_two_heartbeats() {
    let s = server(Extensions::None).await;
    let mut wire = Wire::open(&s, 1000).await;
    let start = Instant::now();
    let mut heartbeats = 0;
    while let Some((_, data)) = wire.frame().await {
        assert_eq!(data, b"_heartbeat_");
        heartbeats += 1;
    }
    let after = start.elapsed();
    // The heartbeat due at the second interval is due at the very moment of the close: nsqd
    // 1.3.0 sent it before closing in the recorded transcript (upstream-U1 25-27), but the two
    // are separate timers there, so a real server may close first.
    assert!(
        (1..=2).contains(&heartbeats),
        "{heartbeats} heartbeats, never answered"
    );
    assert!(
        after >= Duration::from_millis(1900) && after < Duration::from_secs(3),
        "{after:?}"
    );
}

#[tokio::test]
async fn fatal_and_non_fatal_errors() {
    let s = server(Extensions::None).await;
    let t = topic("t");
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(b"RDY 1\n").await;
    assert_eq!(wire.error_code().await, "E_INVALID", "RDY before SUB");
    assert!(wire.closed().await);

    let mut wire = Wire::open(&s, 5000).await;
    wire.send(format!("SUB {t} c\n").as_bytes()).await;
    assert_eq!(wire.reply().await.expect("OK").1, b"OK");
    for _ in 0..3 {
        wire.send(b"FIN 0123456789abcdef\n").await;
        assert_eq!(wire.error_code().await, "E_FIN_FAILED");
        wire.send(b"REQ 0123456789abcdef 0\n").await;
        assert_eq!(wire.error_code().await, "E_REQ_FAILED");
        wire.send(b"TOUCH 0123456789abcdef\n").await;
        assert_eq!(wire.error_code().await, "E_TOUCH_FAILED");
    }
    wire.send(format!("SUB {t} c\n").as_bytes()).await;
    assert_eq!(wire.error_code().await, "E_INVALID", "a second SUB");
    assert!(wire.closed().await);

    for (command, code) in [
        (pub_cmd("bad!topic", None, b"x"), "E_BAD_TOPIC"),
        (pub_cmd(&t, None, b""), "E_BAD_MESSAGE"),
        (format!("DPUB {t} 99999999999\n").into_bytes(), "E_INVALID"),
        (b"NOSUCHCMD\n".to_vec(), "E_INVALID"),
        (b"AUTH\n\0\0\0\x01x".to_vec(), "E_AUTH_DISABLED"),
    ] {
        let mut wire = Wire::open(&s, 5000).await;
        wire.send(&command).await;
        assert_eq!(
            wire.error_code().await,
            code,
            "{}",
            String::from_utf8_lossy(&command)
        );
        assert!(wire.closed().await, "{code} is fatal");
    }
}

#[tokio::test]
async fn fixture_rdy_is_never_exceeded_and_capped() {
    let s = fixture_server_with(Options {
        max_rdy_count: 5,
        ..Options::default()
    })
    .await;
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(b"SUB t c\n").await;
    wire.reply().await.expect("OK");
    for i in 0..4 {
        wire.send(&pub_cmd("t", None, format!("{i}").as_bytes()))
            .await;
        assert_eq!(wire.reply().await.expect("OK").1, b"OK");
    }
    wire.send(b"RDY 2\n").await;
    let first = wire.reply().await.expect("message");
    let second = wire.reply().await.expect("message");
    assert_eq!((first.0, second.0), (2, 2));
    // Nothing more until a FIN: a PUB's OK is the next frame.
    wire.send(&pub_cmd("t", None, b"probe")).await;
    assert_eq!(wire.reply().await.expect("OK").1, b"OK");
    let mut fin = b"FIN ".to_vec();
    fin.extend_from_slice(&first.1[10..26]);
    fin.push(b'\n');
    wire.send(&fin).await;
    assert_eq!(
        wire.reply().await.expect("message").0,
        2,
        "the FIN freed one slot"
    );
    wire.send(b"RDY 6\n").await;
    assert_eq!(wire.error_code().await, "E_INVALID", "over max_rdy_count");
    assert!(wire.closed().await);
}

/// A Youzan server and a new topic on it with partitions 0 and 1.
async fn youzan() -> (Server, String) {
    let s = server(Extensions::Partitions).await;
    let yz = topic("yz");
    create_two_partitions(&s, &yz).await;
    (s, yz)
}

/// A fresh test server with topic `yz` on partitions 0 and 1, for a `fixture_` test.
async fn youzan_fixture() -> TestServer {
    let s = fixture_server(Extensions::Partitions).await;
    create_two_partitions(&s, "yz").await;
    s
}

async fn create_two_partitions<S: Nsqd>(s: &S, topic: &str) {
    create_youzan_topic(s, topic, 2).await;
}

#[tokio::test]
async fn binary_ids_with_newlines_and_spaces_are_read_by_position() {
    let (s, yz) = youzan().await;
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(format!("SUB_ADVANCED {yz} c 1\n").as_bytes())
        .await;
    assert_eq!(wire.reply().await.expect("OK").1, b"OK");
    let mut producer = Wire::open(&s, 5000).await;
    let trace_id = u64::from_be_bytes(*b"\n \n \n \n ");
    let mut cmd = format!("PUB_TRACE {yz} 1\n").into_bytes();
    cmd.extend_from_slice(&13u32.to_be_bytes());
    cmd.extend_from_slice(&trace_id.to_be_bytes());
    cmd.extend_from_slice(b"hello");
    producer.send(&cmd).await;
    let (_, receipt) = producer.reply().await.expect("receipt");
    assert_eq!(&receipt[..2], b"OK");
    assert_eq!(receipt.len(), 30);
    wire.send(b"RDY 1\n").await;
    let (kind, message) = wire.reply().await.expect("message");
    assert_eq!(kind, 2);
    let id = &message[10..26];
    assert_eq!(&id[8..], b"\n \n \n \n ");
    let offset = u64::from_be_bytes(message[26..34].try_into().expect("8"));
    let raw_size = u32::from_be_bytes(message[34..38].try_into().expect("4"));
    assert_eq!((offset, raw_size), (0, 35));
    assert_eq!(&message[38..], b"hello");
    let mut touch = b"TOUCH ".to_vec();
    touch.extend_from_slice(id);
    touch.push(b'\n');
    let mut fin = b"FIN ".to_vec();
    fin.extend_from_slice(id);
    fin.push(b'\n');
    wire.send(&touch).await;
    wire.send(&fin).await;
    wire.send(&fin).await;
    assert_eq!(
        wire.error_code().await,
        "E_FIN_FAILED",
        "only the second FIN fails"
    );
    wire.send(b"FIN \0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\n").await;
    assert_eq!(
        wire.error_code().await,
        "E_INVALID",
        "a zero id is fatal in the fork"
    );
    assert!(wire.closed().await);
}

#[tokio::test]
async fn sub_advanced_with_an_offset_ignores_the_partition() {
    // Notes §2.6.1: with an offset the partition argument is not parsed.
    let (s, yz) = youzan().await;
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(format!("SUB_ADVANCED {yz} fromend 1 special:-1\n").as_bytes())
        .await;
    assert_eq!(wire.reply().await.expect("OK").1, b"OK");
    assert_ne!(
        channel_stats(&s, &yz, Some(0), "fromend").await,
        serde_json::Value::Null
    );
    assert_eq!(
        channel_stats(&s, &yz, Some(1), "fromend").await,
        serde_json::Value::Null
    );
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(format!("SUB_ADVANCED {yz} c 0 bogus:1\n").as_bytes())
        .await;
    assert_eq!(wire.error_code().await, "E_INVALID");
}

#[tokio::test]
async fn latest_skips_only_on_a_new_channel() {
    // Notes §2.6.3: `special:-1` does not skip what an existing channel already holds.
    let (s, yz) = youzan().await;
    let mut producer = Wire::open(&s, 5000).await;
    let mut first = Wire::open(&s, 5000).await;
    first.send(format!("SUB {yz} old 0\n").as_bytes()).await;
    first.reply().await.expect("OK");
    drop(first);
    producer.send(&pub_cmd(&yz, Some(0), b"before")).await;
    producer.reply().await.expect("OK");
    for (channel, expect) in [("old", &b"before"[..]), ("new", b"after")] {
        let mut wire = Wire::open(&s, 5000).await;
        wire.send(format!("SUB_ADVANCED {yz} {channel} 0 special:-1\n").as_bytes())
            .await;
        wire.reply().await.expect("OK");
        producer.send(&pub_cmd(&yz, Some(0), b"after")).await;
        producer.reply().await.expect("OK");
        wire.send(b"RDY 1\n").await;
        let (_, message) = wire.reply().await.expect("message");
        assert_eq!(&message[38..], expect, "channel {channel}");
    }
}

#[tokio::test]
async fn fixture_youzan_identify_and_topic_rules() {
    // Notes §2.6.4 and §2.1: the fork's IDENTIFY defaults; no auto-created topics; no DPUB.
    // The version is the one the test server emulates: fixture.
    let s = youzan_fixture().await;
    let mut raw = TcpStream::connect(s.tcp_addr()).await.expect("connect");
    raw.write_all(b"  V2IDENTIFY\n\0\0\0\x1c{\"feature_negotiation\":true}")
        .await
        .expect("write");
    let mut wire = Wire(raw);
    let (_, reply) = wire.reply().await.expect("reply");
    let json: serde_json::Value = serde_json::from_slice(&reply).expect("json");
    assert_eq!(json["output_buffer_size"], 100);
    assert_eq!(json["version"], "0.3.7-HA.1.13.0");
    wire.send(b"SUB missing c 0\n").await;
    assert_eq!(wire.error_code().await, "E_TOPIC_NOT_EXIST");
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(b"SUB yz c x\n").await;
    assert_eq!(wire.error_code().await, "E_BAD_PARTITION");
}

#[tokio::test]
async fn channels_start_where_nsqd_starts_them() {
    // Notes §2.6.2: a channel sees what is published after it exists; the first channel of a
    // topic also gets what was published while there was none. Tests create channels first.
    let s = server(Extensions::None).await;
    let t = topic("t");
    let mut producer = Wire::open(&s, 5000).await;
    producer.send(&pub_cmd(&t, None, b"early")).await;
    producer.reply().await.expect("OK");
    let mut first = Wire::open(&s, 5000).await;
    first.send(format!("SUB {t} first\n").as_bytes()).await;
    first.reply().await.expect("OK");
    let mut second = Wire::open(&s, 5000).await;
    second.send(format!("SUB {t} second\n").as_bytes()).await;
    second.reply().await.expect("OK");
    producer.send(&pub_cmd(&t, None, b"late")).await;
    producer.reply().await.expect("OK");
    for (wire, expect) in [(&mut first, &b"early"[..]), (&mut second, b"late")] {
        wire.send(b"RDY 1\n").await;
        let (_, message) = wire.reply().await.expect("message");
        assert_eq!(&message[26..], expect);
    }
}

#[tokio::test]
async fn http_api_pub_mpub_stats_and_deletes() {
    let s = server(Extensions::None).await;
    let h = topic("h");
    assert_eq!(
        http(s.http_addr(), "GET", "/ping", b"").await,
        (200, b"OK".to_vec())
    );
    assert_eq!(
        http(s.http_addr(), "POST", &format!("/pub?topic={h}"), b"one")
            .await
            .0,
        200
    );
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/mpub?topic={h}"),
            b"two\nthree\n"
        )
        .await
        .0,
        200
    );
    let binary = [
        &2u32.to_be_bytes()[..],
        &1u32.to_be_bytes(),
        b"4",
        &1u32.to_be_bytes(),
        b"5",
    ]
    .concat();
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/mpub?topic={h}&binary=true"),
            &binary
        )
        .await
        .0,
        200
    );
    assert_eq!(
        http(s.http_addr(), "GET", &format!("/pub?topic={h}"), b"x")
            .await
            .0,
        405
    );
    assert_eq!(
        http(s.http_addr(), "POST", &format!("/pub?topic={h}"), b"")
            .await
            .1,
        br#"{"message":"MSG_EMPTY"}"#
    );
    assert_eq!(http(s.http_addr(), "POST", "/pub", b"x").await.0, 400);
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/channel/create?topic={h}&channel=c"),
            b""
        )
        .await
        .0,
        200
    );
    assert_eq!(topic_stats(&s, &h).await["message_count"], 5);
    assert_eq!(
        channel_stats(&s, &h, None, "c").await["depth"],
        5,
        "the first channel gets the backlog"
    );
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/channel/delete?topic={h}&channel=c"),
            b""
        )
        .await
        .0,
        200
    );
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/channel/delete?topic={h}&channel=c"),
            b""
        )
        .await
        .0,
        404
    );
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/topic/delete?topic={h}"),
            b""
        )
        .await
        .0,
        200
    );
    assert_eq!(
        http(
            s.http_addr(),
            "POST",
            &format!("/topic/delete?topic={h}"),
            b""
        )
        .await
        .0,
        404
    );
}

#[tokio::test]
async fn fixture_touch_cannot_hold_a_message_past_max_msg_timeout() {
    let s = fixture_server_with(Options {
        max_msg_timeout: Duration::from_millis(1500),
        ..Options::default()
    })
    .await;
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(b"SUB t c\n").await;
    wire.reply().await.expect("OK");
    wire.send(&pub_cmd("t", None, b"held")).await;
    wire.reply().await.expect("OK");
    wire.send(b"RDY 2\n").await;
    let (_, first) = wire.reply().await.expect("message");
    let delivered = Instant::now();
    let mut touch = b"TOUCH ".to_vec();
    touch.extend_from_slice(&first[10..26]);
    touch.push(b'\n');
    // Touch every 200 ms (the message timeout is 1 s): it still comes back once 1.5 s passed.
    let again = loop {
        tokio::select! {
            frame = wire.reply() => break frame.expect("redelivery"),
            _ = tokio::time::sleep(Duration::from_millis(200)) => wire.send(&touch).await,
        }
    };
    let held = delivered.elapsed();
    assert_eq!(u16::from_be_bytes([again.1[8], again.1[9]]), 2);
    assert!(
        held >= Duration::from_millis(1400) && held < Duration::from_millis(2500),
        "{held:?}"
    );
}

#[tokio::test]
async fn ephemeral_channels_go_with_their_last_client() {
    let s = server(Extensions::None).await;
    let t = topic("t");
    let mut wire = Wire::open(&s, 5000).await;
    wire.send(format!("SUB {t} c#ephemeral\n").as_bytes()).await;
    wire.reply().await.expect("OK");
    assert_ne!(
        channel_stats(&s, &t, None, "c#ephemeral").await,
        serde_json::Value::Null
    );
    drop(wire);
    eventually("the channel is gone", async || {
        channel_stats(&s, &t, None, "c#ephemeral").await == serde_json::Value::Null
    })
    .await;
}

/// The partition's end (`backend_depth`) of the fork's `/stats`.
async fn partition_end(server: &impl Nsqd, topic: &str, partition: u32) -> u64 {
    let (_, body) = http(server.http_addr(), "GET", "/stats?format=json", b"").await;
    let stats = unwrap_data(serde_json::from_slice(&body).expect("stats json"));
    stats["topics"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| {
            t["topic_name"] == topic
                && t["topic_partition"].as_str() == Some(partition.to_string().as_str())
        })
        .and_then(|t| t["backend_depth"].as_u64())
        .expect("backend_depth")
}

#[tokio::test]
async fn confirmed_offset_and_a_reset_forgetting_in_flight() {
    // The fork: a channel's `depth_size` is the partition end minus its confirmed offset (the
    // lowest unfinished), and setting a consume offset starts a new in-flight queue (with the
    // coordinator: a standalone nsqd refuses `virtual_queue:`, Y8 73).
    let yz = topic("yz");
    let cluster = offsets_cluster(&yz, 1).await;
    let s = &cluster.nsqds()[0];
    let mut wire = Wire::open(s, 5000).await;
    wire.send(format!("SUB_ADVANCED {yz} c 0\n").as_bytes())
        .await;
    wire.reply().await.expect("OK");
    let mut producer = Wire::open(s, 5000).await;
    for body in [&b"one"[..], b"two", b"three"] {
        producer.send(&pub_cmd(&yz, Some(0), body)).await;
        producer.reply().await.expect("OK");
    }
    let end = partition_end(s, &yz, 0).await;
    assert_eq!(end, 33 + 33 + 35, "raw sizes 4 + 26 + body");
    wire.send(b"RDY 3\n").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (kind, message) = wire.reply().await.expect("message");
        assert_eq!(kind, 2);
        ids.push(message[10..26].to_vec());
    }
    let fin = |id: &[u8]| [&b"FIN "[..], id, b"\n"].concat();
    let depth_size = async || channel_stats(s, &yz, Some(0), "c").await["depth_size"].as_u64();
    assert_eq!(depth_size().await, Some(end), "nothing finished");
    wire.send(&fin(&ids[1])).await;
    eventually("the second FIN processed", async || {
        channel_stats(s, &yz, Some(0), "c").await["in_flight_count"] == 2
    })
    .await;
    assert_eq!(
        depth_size().await,
        Some(end),
        "the first is still unfinished"
    );
    wire.send(&fin(&ids[0])).await;
    eventually("confirmed past the first two", async || {
        depth_size().await == Some(35)
    })
    .await;
    drop(wire);
    eventually("the dead client forgotten", async || {
        client_count(&channel_stats(s, &yz, Some(0), "c").await) == 0
    })
    .await;
    assert_eq!(
        channel_stats(s, &yz, Some(0), "c").await["in_flight_count"],
        0,
        "the fork puts a closed connection's unfinished message back at once (Y4 218, Y8 127)"
    );
    assert_eq!(
        depth_size().await,
        Some(35),
        "still unfinished: the confirmed offset stays"
    );
    let (status, _) = http(
        s.http_addr(),
        "POST",
        &format!("/channel/setoffset?topic={yz}&channel=c&partition=0"),
        format!("virtual_queue:{}", end - 35).as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        channel_stats(s, &yz, Some(0), "c").await["in_flight_count"],
        0,
        "a reset forgets what was in flight"
    );
    let mut again = Wire::open(s, 5000).await;
    again
        .send(format!("SUB_ADVANCED {yz} c 0\n").as_bytes())
        .await;
    again.reply().await.expect("OK");
    again.send(b"RDY 3\n").await;
    let (_, message) = again.reply().await.expect("message");
    assert_eq!(&message[38..], b"three", "resumed at the confirmed offset");
}

#[tokio::test]
async fn fixture_message_get_by_count_offset_and_id_agrees_with_stats() {
    // The fork's `/message/get`: a count index below `/stats` `message_count` finds a message
    // whose `offset` + raw size is the next one's offset, the last ending at `backend_depth`.
    // Its ids are the test server's (every one of partition 0): fixture.
    let s = youzan_fixture().await;
    let get = async |query: &str| {
        let (status, body) = http(
            s.http_addr(),
            "GET",
            &format!("/message/get?topic=yz&{query}"),
            b"",
        )
        .await;
        let json: serde_json::Value = serde_json::from_slice(&body).expect("json reply");
        (status, json)
    };
    let count = async || {
        let (_, body) = http(s.http_addr(), "GET", "/stats?format=json&topic=yz", b"").await;
        let stats = unwrap_data(serde_json::from_slice(&body).expect("stats json"));
        stats["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["topic_partition"] == "1")
            .and_then(|t| t["message_count"].as_u64())
            .expect("message_count")
    };
    assert_eq!(count().await, 0);
    let (status, json) = get("partition=1&search_mode=count&search_pos=0").await;
    assert_eq!(status, 404, "an empty partition has no message 0: {json}");
    assert!(json["message"].is_string());
    let mut producer = Wire::open(&s, 5000).await;
    for body in [&b"one"[..], b"two", b"three"] {
        producer.send(&pub_cmd("yz", Some(1), body)).await;
        producer.reply().await.expect("OK");
    }
    producer.send(&pub_cmd("yz", Some(0), b"elsewhere")).await;
    producer.reply().await.expect("OK");
    assert_eq!(count().await, 3);
    let end = partition_end(&s, "yz", 1).await;
    let (status, last) = get("partition=1&search_mode=count&search_pos=2").await;
    assert_eq!(status, 200, "{last}");
    assert_eq!(last["body"], "three");
    assert_eq!(last["queue_cnt_index"], 2);
    assert_eq!(last["offset"], 66);
    assert_eq!(
        end - 66,
        35,
        "backend_depth - offset is the raw size of the last"
    );
    for field in ["id", "trace_id", "timestamp", "attempts"] {
        assert!(last[field].is_u64(), "{field} in {last}");
    }
    assert_eq!(last["ext"], "");
    let (_, inside) = get("partition=1&search_mode=virtual_offset&search_pos=70").await;
    assert_eq!(
        inside["queue_cnt_index"], 2,
        "the message covering offset 70"
    );
    let (_, first) = get("partition=1&search_mode=virtual_offset&search_pos=0").await;
    assert_eq!(first["body"], "one");
    let id = last["id"].as_u64().expect("id");
    let (status, by_id) = get(&format!("search_mode=id&search_pos={id}")).await;
    // Ids carry their partition in bits 50..60, as the fork's do: the id finds partition 1.
    assert_eq!(id >> 50, 1, "partition 1's id {id}");
    assert_eq!((status, &by_id["body"]), (200, &serde_json::json!("three")));
    let (_, elsewhere) = get("partition=0&search_mode=count&search_pos=0").await;
    let other = elsewhere["id"].as_u64().expect("id");
    let (status, by_id) = get(&format!("search_mode=id&search_pos={other}")).await;
    assert_eq!(
        (status, &by_id["body"]),
        (200, &serde_json::json!("elsewhere"))
    );
    for (query, want) in [
        ("partition=1&search_mode=count&search_pos=3", 404),
        ("partition=1&search_mode=virtual_offset&search_pos=101", 404),
        ("partition=1&search_mode=count&search_pos=-1", 404),
        ("partition=7&search_mode=count&search_pos=0", 404),
        ("partition=1&search_mode=count&search_pos=x", 400),
        ("partition=1&search_mode=count", 400),
        ("partition=1&search_mode=bogus&search_pos=0", 400),
        ("search_mode=count&search_pos=0", 400),
    ] {
        let (status, json) = get(query).await;
        assert_eq!(status, want, "{query}: {json}");
        assert!(json["message"].is_string(), "{query}: {json}");
    }
    let (status, _) = http(
        s.http_addr(),
        "POST",
        "/message/get?topic=yz&partition=1&search_mode=count&search_pos=0",
        b"",
    )
    .await;
    assert_eq!(status, 405);
}
