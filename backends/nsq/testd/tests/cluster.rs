//! The cluster mode against what the recorded Youzan cluster does (Y1, Y2, Y7): topics only
//! through the lookupd, refused on nsqd, leaders after a delay, partitions spread over nodes.

use std::net::SocketAddr;
use std::time::Duration;

use msgstream_nsq_testd::{ClusterOptions, TestCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP exchange: status and body.
async fn http(addr: SocketAddr, method: &str, target: &str, bare: bool) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let accept = if bare {
        "Accept: application/vnd.nsq; version=1.0\r\n"
    } else {
        ""
    };
    let head =
        format!("{method} {target} HTTP/1.1\r\nHost: x\r\n{accept}Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text[9..12].parse().expect("status");
    let body = text.split_once("\r\n\r\n").expect("head").1.to_string();
    (status, body)
}

/// A protocol V2 connection after the magic.
async fn nsq(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"  V2").await.expect("magic");
    stream
}

/// The next frame as `RESPONSE x` / `ERROR x`, or `EOF`; `None` when nothing came in 300 ms.
async fn frame(stream: &mut TcpStream) -> Option<String> {
    let mut size = [0u8; 4];
    match tokio::time::timeout(Duration::from_millis(300), stream.read_exact(&mut size)).await {
        Err(_) => return None,
        Ok(Err(_)) => return Some("EOF".into()),
        Ok(Ok(_)) => {}
    }
    let mut data = vec![0u8; u32::from_be_bytes(size) as usize];
    stream.read_exact(&mut data).await.expect("frame");
    let kind = if data[3] == 1 { "ERROR" } else { "RESPONSE" };
    Some(format!("{kind} {}", String::from_utf8_lossy(&data[4..])))
}

fn publish(topic: &str, partition: u32, body: &[u8]) -> Vec<u8> {
    let mut cmd = format!("PUB {topic} {partition}\n").into_bytes();
    cmd.extend_from_slice(&(body.len() as u32).to_be_bytes());
    cmd.extend_from_slice(body);
    cmd
}

/// PUB on a fresh connection: the answer and whether the server then closed the connection.
async fn probe(addr: SocketAddr, topic: &str, partition: u32) -> (String, bool) {
    let mut c = nsq(addr).await;
    c.write_all(&publish(topic, partition, b"probe"))
        .await
        .expect("pub");
    let answer = frame(&mut c).await.expect("an answer");
    let closed = frame(&mut c).await.as_deref() == Some("EOF");
    (answer, closed)
}

#[tokio::test]
async fn topics_are_created_through_the_lookupd_only() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("cluster");
    let nsqd = &cluster.nsqds()[0];
    let mut c = nsq(nsqd.tcp_addr()).await;
    c.write_all(b"INTERNAL_CREATE_TOPIC t_y1 0\n")
        .await
        .expect("write");
    assert_eq!(
        frame(&mut c).await.as_deref(),
        Some("ERROR E_CREATE_TOPIC_FAILED CREATE_TOPIC is not allowed here while cluster feature enabled.")
    );
    assert_eq!(frame(&mut c).await, None, "non-fatal: the connection stays");
    c.write_all(b"INTERNAL_CREATE_TOPIC bad!name 0\n")
        .await
        .expect("write");
    assert_eq!(
        frame(&mut c).await.as_deref(),
        Some("ERROR E_BAD_TOPIC topic name \"bad!name\" is not valid")
    );
    assert_eq!(frame(&mut c).await.as_deref(), Some("EOF"));
    let create = "/topic/create?topic=t_y1&partition_num=2&replicator=1";
    assert_eq!(
        http(nsqd.http_addr(), "POST", create, false).await,
        (404, r#"{"message":"NOT_FOUND"}"#.into())
    );
    let lookupd = cluster.lookupd_http_addr();
    for (target, status, body) in [
        (
            "/topic/create?topic=t_y1",
            400,
            r#"{"message":"MISSING_ARG_TOPIC_PARTITION_NUM"}"#,
        ),
        (
            "/topic/create?topic=t_y1&partition_num=2",
            400,
            r#"{"message":"MISSING_ARG_TOPIC_REPLICATOR"}"#,
        ),
        (
            "/topic/create?topic=bad!name&partition_num=2&replicator=1",
            400,
            r#"{"message":"INVALID_ARG_TOPIC"}"#,
        ),
        (
            "/topic/create?topic=t_y1&partition_num=2&replicator=3",
            400,
            r#"{"message":"ErrType:9 ErrCode:1 : No node is available for topic"}"#,
        ),
        (
            "/topic/create?topic=t_y1&partition_num=3&replicator=1",
            400,
            r#"{"message":"ErrType:9 ErrCode:1 : No node is available for topic"}"#,
        ),
        (create, 200, ""),
        (create, 200, ""),
        (
            "/topic/create?topic=t_y1&partition_num=4&replicator=1&multipart=true",
            400,
            r#"{"message":"already exist"}"#,
        ),
    ] {
        assert_eq!(
            http(lookupd, "POST", target, false).await,
            (status, body.to_string()),
            "{target}"
        );
    }
    // Partition p on node p mod 2.
    assert_eq!(cluster.leader_of("t_y1", 0), Some(0));
    assert_eq!(cluster.leader_of("t_y1", 1), Some(1));
    assert_eq!(
        probe(nsqd.tcp_addr(), "t_y1", 0).await,
        ("RESPONSE OK".into(), false)
    );
    assert_eq!(
        probe(nsqd.tcp_addr(), "t_y1", 1).await,
        ("ERROR E_TOPIC_NOT_EXIST ".into(), true)
    );
    assert_eq!(
        probe(cluster.nsqds()[1].tcp_addr(), "t_y1", 1).await,
        ("RESPONSE OK".into(), false)
    );
}

#[tokio::test]
async fn partitions_refuse_until_their_leader_is_elected() {
    let delay = Duration::from_millis(800);
    let cluster = TestCluster::start(ClusterOptions {
        leader_delay: delay,
        ..ClusterOptions::default()
    })
    .await
    .expect("cluster");
    let lookupd = cluster.lookupd_http_addr();
    let created = std::time::Instant::now();
    let (status, _) = http(
        lookupd,
        "POST",
        "/topic/create?topic=t_wait&partition_num=2&replicator=1",
        false,
    )
    .await;
    assert_eq!(status, 200);
    let [a, b] = [cluster.nsqds()[0].tcp_addr(), cluster.nsqds()[1].tcp_addr()];
    // The future leader refuses without closing; the other node does not know the partition.
    assert_eq!(
        probe(a, "t_wait", 0).await,
        ("ERROR E_FAILED_ON_NOT_LEADER ".into(), false)
    );
    assert_eq!(
        probe(b, "t_wait", 0).await,
        ("ERROR E_TOPIC_NOT_EXIST ".into(), true)
    );
    let mut sub = nsq(b).await;
    sub.write_all(b"SUB t_wait c 1\n").await.expect("sub");
    assert_eq!(
        frame(&mut sub).await.as_deref(),
        Some("ERROR E_FAILED_ON_NOT_LEADER ")
    );
    assert_eq!(
        frame(&mut sub).await.as_deref(),
        Some("EOF"),
        "fatal for SUB"
    );
    assert!(
        created.elapsed() < delay,
        "the checks above ran within the delay"
    );
    tokio::time::sleep(delay.saturating_sub(created.elapsed())).await;
    assert_eq!(probe(a, "t_wait", 0).await, ("RESPONSE OK".into(), false));
    assert_eq!(probe(b, "t_wait", 1).await, ("RESPONSE OK".into(), false));
}

#[tokio::test]
async fn lookupd_answers_as_the_youzan_one() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("cluster");
    let lookupd = cluster.lookupd_http_addr();
    assert_eq!(
        http(lookupd, "GET", "/lookup?topic=t_l&access=w", false).await,
        (
            500,
            r#"{"status_code":500,"status_txt":"Key not found","data":null}"#.into()
        )
    );
    assert_eq!(
        http(lookupd, "GET", "/lookup?topic=t_l&access=r", false).await,
        (200, r#"{"status_code":200,"status_txt":"OK","data":{"channels":[],"partitions":{},"producers":[]}}"#.into())
    );
    http(
        lookupd,
        "POST",
        "/topic/create?topic=t_l&partition_num=2&replicator=1",
        false,
    )
    .await;
    let (status, body) = http(
        lookupd,
        "GET",
        "/lookup?topic=t_l&access=r&metainfo=true",
        true,
    )
    .await;
    assert_eq!(status, 200);
    let reply: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        reply["meta"],
        serde_json::json!({"disable_channel_auto_create":false,"extend_support":false,"multi_part":false,"ordered":false,"partition_num":2,"replica":1})
    );
    for (pid, node) in [("0", 0), ("1", 1)] {
        assert_eq!(
            reply["partitions"][pid]["tcp_port"],
            cluster.nsqds()[node].tcp_addr().port()
        );
    }
    assert!(body.starts_with(r#"{"channels":[],"meta":"#), "{body}");
    assert!(
        body.contains(r#"{"id":""#),
        "peer fields in the real order: {body}"
    );
    let no_channel = "Topic has no channel, should init at least one for the new topic";
    assert_eq!(
        http(lookupd, "GET", "/lookup?topic=t_l&access=w", true).await,
        (404, format!(r#"{{"message":"{no_channel}"}}"#))
    );
    // A channel on partition 1's leader makes the topic writable in lookups.
    let mut sub = nsq(cluster.nsqds()[1].tcp_addr()).await;
    sub.write_all(b"SUB t_l c1 1\n").await.expect("sub");
    assert_eq!(frame(&mut sub).await.as_deref(), Some("RESPONSE OK"));
    let (status, body) = http(lookupd, "GET", "/lookup?topic=t_l&access=w", false).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""channels":["c1"]"#), "{body}");
    assert_eq!(
        http(lookupd, "GET", "/channels?topic=t_l", false).await.1,
        r#"{"status_code":200,"status_txt":"OK","data":{"channels":["c1"]}}"#
    );
    assert_eq!(
        http(lookupd, "GET", "/topics", false).await.1,
        r#"{"status_code":200,"status_txt":"OK","data":{"topics":["t_l"]}}"#
    );
    assert_eq!(
        http(lookupd, "GET", "/info", false).await.1,
        r#"{"status_code":200,"status_txt":"OK","data":{"version":"0.3.7-HA.1.13.0","ha_support":true}}"#
    );
    let nodes = http(lookupd, "GET", "/nodes", true).await.1;
    assert!(nodes.contains(r#""partitions":{"t_l":["0"]}"#), "{nodes}");
    assert!(nodes.contains(r#""partitions":{"t_l":["1"]}"#), "{nodes}");
}

#[tokio::test]
async fn topics_are_deleted_through_the_lookupd_with_every_partition() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("cluster");
    let lookupd = cluster.lookupd_http_addr();
    http(
        lookupd,
        "POST",
        "/topic/create?topic=t_d&partition_num=2&replicator=1",
        false,
    )
    .await;
    let nsqd = cluster.nsqds()[0].http_addr();
    assert_eq!(
        http(nsqd, "POST", "/topic/delete?topic=t_d", false).await.0,
        404
    );
    for (target, status, body) in [
        (
            "/topic/delete?topic=t_d&partition=0",
            400,
            r#"{"message":"REMOVE_SINGLE_PARTITION_NOT_ALLOWED"}"#,
        ),
        (
            "/topic/delete?topic=t_d",
            400,
            r#"{"message":"MISSING_ARG_TOPIC_PARTITION"}"#,
        ),
        (
            "/topic/delete?topic=t_never&partition=**",
            500,
            r#"{"message":"Key not found"}"#,
        ),
        ("/topic/delete?topic=t_d&partition=**", 200, ""),
    ] {
        assert_eq!(
            http(lookupd, "POST", target, false).await,
            (status, body.to_string()),
            "{target}"
        );
    }
    for (node, partition) in [(0, 0), (1, 1)] {
        let addr = cluster.nsqds()[node].tcp_addr();
        assert_eq!(
            probe(addr, "t_d", partition).await,
            ("ERROR E_TOPIC_NOT_EXIST ".into(), true)
        );
    }
    assert_eq!(
        http(
            lookupd,
            "POST",
            "/topic/create?topic=t_d&partition_num=2&replicator=1",
            false
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn followers_refuse_and_a_moved_leader_takes_the_data() {
    let cluster = TestCluster::start(ClusterOptions::default())
        .await
        .expect("cluster");
    let lookupd = cluster.lookupd_http_addr();
    http(
        lookupd,
        "POST",
        "/topic/create?topic=t_r&partition_num=1&replicator=2",
        false,
    )
    .await;
    let [a, b] = [cluster.nsqds()[0].tcp_addr(), cluster.nsqds()[1].tcp_addr()];
    assert_eq!(
        probe(b, "t_r", 0).await,
        ("ERROR E_FAILED_ON_NOT_LEADER ".into(), false)
    );
    let follower_http = cluster.nsqds()[1].http_addr();
    assert_eq!(
        http(
            follower_http,
            "POST",
            "/channel/delete?topic=t_r&channel=c&partition=0",
            false
        )
        .await,
        (400, r#"{"message":"E_FAILED_ON_NOT_LEADER"}"#.into())
    );
    let mut sub = nsq(a).await;
    sub.write_all(b"SUB t_r c 0\n").await.expect("sub");
    assert_eq!(frame(&mut sub).await.as_deref(), Some("RESPONSE OK"));
    assert_eq!(probe(a, "t_r", 0).await.0, "RESPONSE OK");
    cluster.move_leader("t_r", 0, 1).expect("move");
    assert_eq!(
        frame(&mut sub).await.as_deref(),
        Some("EOF"),
        "the old leader's consumer is dropped"
    );
    assert_eq!(
        probe(a, "t_r", 0).await,
        ("ERROR E_FAILED_ON_NOT_LEADER ".into(), false)
    );
    // The message published before the move is delivered by the new leader.
    let mut sub = nsq(b).await;
    sub.write_all(b"SUB t_r c 0\nRDY 1\n").await.expect("sub");
    assert_eq!(frame(&mut sub).await.as_deref(), Some("RESPONSE OK"));
    let message = frame(&mut sub).await.expect("the message");
    assert!(message.ends_with("probe"), "{message}");
}
