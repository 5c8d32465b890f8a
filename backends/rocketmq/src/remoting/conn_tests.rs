//! The connection against a scripted peer on loopback: multiplexing, server requests,
//! timeouts, oversized frames, and the pool's backoff.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::*;
use crate::protocol::codes;
use crate::remoting::codec::{frame_len, MAX_FRAME};
use crate::remoting::liveness::Health;
use crate::remoting::{Remoting, RemotingOptions};

async fn read_command(stream: &mut TcpStream) -> Command {
    let mut word = [0u8; 4];
    stream.read_exact(&mut word).await.expect("length");
    let len = frame_len(&word, MAX_FRAME).expect("sane length");
    let mut frame = vec![0u8; len];
    stream.read_exact(&mut frame).await.expect("frame");
    Command::decode(frame.into()).expect("decode")
}

async fn write_command(stream: &mut TcpStream, command: &Command) {
    let mut buf = BytesMut::new();
    command.encode(&mut buf).expect("encode");
    stream.write_all(&buf).await.expect("write");
}

async fn peer() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    (listener, addr)
}

const T: Duration = Duration::from_secs(5);

fn options(max_frame: usize) -> RemotingOptions {
    RemotingOptions {
        connect_timeout: T,
        max_frame,
        ..RemotingOptions::default()
    }
}

#[tokio::test]
async fn responses_match_requests_out_of_order() {
    let (listener, addr) = peer().await;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let (a, b) = (read_command(&mut s).await, read_command(&mut s).await);
        for request in [b, a] {
            let mut response = Command::response(0, request.opaque, "");
            response.ext.insert("echo".into(), request.code.to_string());
            write_command(&mut s, &response).await;
        }
        s
    });
    let conn = Connection::connect(&addr, &options(MAX_FRAME), None, None)
        .await
        .expect("connect");
    let (a, b) = tokio::join!(
        conn.invoke(Command::request(101, []), T),
        conn.invoke(Command::request(102, []), T)
    );
    assert_eq!(a.expect("a").field("echo"), Some("101"));
    assert_eq!(b.expect("b").field("echo"), Some("102"));
    drop(server.await.expect("server"));
}

#[tokio::test]
async fn server_requests_are_forwarded_or_refused() {
    let (listener, addr) = peer().await;
    let (notices_tx, mut notices) = mpsc::unbounded_channel();
    let conn = Connection::connect(&addr, &options(MAX_FRAME), Some(notices_tx), None)
        .await
        .expect("connect");
    let (mut s, _) = listener.accept().await.expect("accept");
    let mut notify = Command::request(
        codes::NOTIFY_CONSUMER_IDS_CHANGED,
        [("consumerGroup", "g".to_owned())],
    );
    notify.flag = FLAG_ONEWAY;
    write_command(&mut s, &notify).await;
    let mut unknown = Command::request(307, []);
    unknown.opaque = 42;
    write_command(&mut s, &unknown).await;
    let answer = read_command(&mut s).await;
    assert!(answer.is_response());
    assert_eq!(
        (answer.code, answer.opaque),
        (codes::REQUEST_CODE_NOT_SUPPORTED, 42)
    );
    assert_eq!(
        notices.recv().await,
        Some(ServerRequest::ConsumerIdsChanged { group: "g".into() })
    );
    conn.oneway(Command::request(5, [])).await.expect("oneway");
    assert!(read_command(&mut s).await.is_oneway());
}

#[tokio::test]
async fn timeouts_oversized_frames_and_closed_peers() {
    let (listener, addr) = peer().await;
    let conn = Connection::connect(&addr, &options(1024), None, None)
        .await
        .expect("connect");
    let (mut s, _) = listener.accept().await.expect("accept");
    let slow = conn
        .invoke(Command::request(1, []), Duration::from_millis(50))
        .await;
    assert!(matches!(slow, Err(Error::Timeout { code: 1, .. })));
    let _ = read_command(&mut s).await;
    // A frame over the limit ends the connection; waiting callers learn at once.
    let waiting = conn.invoke(Command::request(2, []), T);
    let attack = async {
        let _ = read_command(&mut s).await;
        s.write_all(&(1_000_000_i32).to_be_bytes())
            .await
            .expect("write");
    };
    let (result, ()) = tokio::join!(waiting, attack);
    assert!(
        matches!(result, Err(Error::Disconnected { .. })),
        "{result:?}"
    );
    assert!(conn.is_dead());
}

#[tokio::test]
async fn the_pool_redials_and_backs_off() {
    let (listener, addr) = peer().await;
    let options = RemotingOptions {
        min_backoff: Duration::from_secs(30),
        ..RemotingOptions::default()
    };
    let pool = Remoting::new(options, None);
    let serve_one = |listener: TcpListener| async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let request = read_command(&mut s).await;
        write_command(&mut s, &Command::response(0, request.opaque, "")).await;
        listener
    };
    let (listener, first) = tokio::join!(
        serve_one(listener),
        pool.call(&addr, Command::request(1, []), T)
    );
    first.expect("first call");
    // The peer closed that connection (its socket was dropped); the pool redials. A request
    // racing the close may still fail with a transient error, as it would in real life.
    let retried = async {
        let mut last = None;
        for _ in 0..3 {
            match pool.call(&addr, Command::request(1, []), T).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_transient() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("an error"))
    };
    let (listener, second) = tokio::join!(serve_one(listener), retried);
    second.expect("a call on a new connection");
    drop(listener);
    let refused = pool.call(&addr, Command::request(1, []), T).await;
    assert!(
        refused.as_ref().is_err_and(Error::is_transient),
        "{refused:?}"
    );
    let backing_off = pool.call(&addr, Command::request(1, []), T).await;
    assert!(
        matches!(&backing_off, Err(Error::Disconnected { reason, .. }) if reason.contains("reconnecting")),
        "{backing_off:?}"
    );
}

fn quick(heartbeat: Duration) -> RemotingOptions {
    RemotingOptions {
        heartbeat_interval: heartbeat,
        probe_timeout: Duration::from_millis(200),
        write_timeout: Duration::from_millis(200),
        queued_frames: 2,
        ..options(MAX_FRAME)
    }
}

fn body(text: &str) -> HeartbeatBody {
    std::sync::Arc::new(std::sync::Mutex::new(bytes::Bytes::from(text.to_owned())))
}

#[tokio::test]
async fn brokers_get_periodic_heartbeats_and_stay_healthy_when_answered() {
    let (listener, addr) = peer().await;
    let hb = body("hello");
    let conn = Connection::connect(&addr, &quick(Duration::from_millis(50)), None, Some(hb))
        .await
        .expect("connect");
    let (mut s, _) = listener.accept().await.expect("accept");
    for _ in 0..3 {
        let beat = read_command(&mut s).await;
        assert_eq!(beat.code, codes::HEART_BEAT);
        assert_eq!(beat.body.as_ref(), b"hello");
        write_command(&mut s, &Command::response(0, beat.opaque, "")).await;
    }
    assert_eq!(conn.health(), Health::Healthy);
}

#[tokio::test]
async fn a_silent_peer_makes_a_timeout_suspect_and_the_failed_probe_closes() {
    let (listener, addr) = peer().await;
    // A long heartbeat period: only the timeout triggers the probe.
    let conn = Connection::connect(
        &addr,
        &quick(Duration::from_secs(600)),
        None,
        Some(body("")),
    )
    .await
    .expect("connect");
    let (mut s, _) = listener.accept().await.expect("accept");
    let timed_out = conn
        .invoke(Command::request(1, []), Duration::from_millis(100))
        .await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    assert_eq!(conn.health(), Health::Suspect);
    let _request = read_command(&mut s).await;
    let probe = read_command(&mut s).await;
    assert_eq!(
        probe.code,
        codes::HEART_BEAT,
        "a suspect connection is probed"
    );
    // Unanswered, the probe times out and the connection is closed: waiting callers learn.
    let waiting = conn.invoke(Command::request(2, []), T).await;
    assert!(
        matches!(waiting, Err(Error::Disconnected { .. })),
        "{waiting:?}"
    );
    assert!(conn.is_dead());
}

#[tokio::test]
async fn a_name_server_connection_closes_at_the_second_timeout() {
    let (listener, addr) = peer().await;
    let conn = Connection::connect(&addr, &quick(Duration::from_millis(50)), None, None)
        .await
        .expect("connect");
    let (_s, _) = listener.accept().await.expect("accept");
    let short = Duration::from_millis(100);
    assert!(conn.invoke(Command::request(1, []), short).await.is_err());
    assert_eq!(
        conn.health(),
        Health::Suspect,
        "no probes without a heartbeat"
    );
    assert!(conn.invoke(Command::request(1, []), short).await.is_err());
    assert!(conn.is_dead());
}

#[tokio::test]
async fn a_stalled_socket_fills_the_bounded_queue_and_the_write_timeout_closes() {
    let (listener, addr) = peer().await;
    let conn = Connection::connect(&addr, &quick(Duration::from_secs(600)), None, None)
        .await
        .expect("connect");
    // The peer accepts and never reads: the socket buffers fill, then writes stall.
    let (_s, _) = listener.accept().await.expect("accept");
    let big = Command::request(5, []).with_body(vec![0u8; 1 << 20]);
    let failed = within_secs(20, async {
        let mut sent = 0;
        loop {
            match conn.oneway(big.clone()).await {
                Ok(()) => sent += 1,
                Err(e) => return (sent, e),
            }
        }
    })
    .await;
    assert!(failed.1.is_transient(), "{failed:?}");
    assert!(
        failed.0 < 200,
        "memory stays bounded: failed after {} MiB",
        failed.0
    );
    // A sender can give up waiting for room just before the writer's own timeout fires (the
    // writer's clock restarts with each frame it gets through).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while !conn.is_dead() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled write did not close the connection"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn within_secs<T>(secs: u64, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("in time")
}
