use super::*;
use crate::conn::Conn;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// The bytes of one server frame.
fn frame(kind: i32, data: &[u8]) -> Vec<u8> {
    let mut f = (4 + data.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(&kind.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// `read_frame` over an in-memory stream that carries `bytes` and then ends.
async fn frames_then_eof(bytes: &[u8]) -> (Vec<Frame>, Result<Option<Frame>>) {
    let (mut server, mut client) = tokio::io::duplex(64 * 1024);
    server.write_all(bytes).await.expect("write");
    drop(server);
    let (_failed, mut write_failed) = watch::channel(None);
    let (config, mut buf, mut frames) = (ConnConfig::default(), BytesMut::new(), Vec::new());
    loop {
        match read_frame("test", &mut client, &mut buf, &config, &mut write_failed).await {
            Ok(Some(frame)) => frames.push(frame),
            end => return (frames, end),
        }
    }
}

#[tokio::test]
async fn an_end_between_frames_is_a_clean_close() {
    let mut wire = frame(0, b"OK");
    wire.extend_from_slice(&frame(1, b"E_FIN_FAILED FIN x failed"));
    let (frames, end) = frames_then_eof(&wire).await;
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0], Frame::Response(bytes::Bytes::from_static(b"OK")));
    assert!(matches!(end, Ok(None)), "{end:?}");
    let (frames, end) = frames_then_eof(b"").await;
    assert!(frames.is_empty());
    assert!(matches!(end, Ok(None)), "{end:?}");
}

#[tokio::test]
async fn an_end_in_the_middle_of_a_frame_is_a_truncated_frame() {
    let whole = frame(0, b"_heartbeat_");
    for cut in 1..whole.len() {
        let mut wire = frame(0, b"OK");
        wire.extend_from_slice(&whole[..cut]);
        let (frames, end) = frames_then_eof(&wire).await;
        assert_eq!(frames.len(), 1, "the whole frame before the cut is read");
        let needed = if cut < 4 { 4 } else { whole.len() };
        match end {
            Err(Error::Codec {
                source: CodecError::Truncated { needed: n, got, .. },
                ..
            }) => assert_eq!((n, got), (needed, cut), "cut {cut}"),
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

/// A server that answers the magic and IDENTIFY with `OK`, then sends `tail` and closes.
async fn server_sending(tail: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        // Magic, "IDENTIFY\n", size, JSON.
        let mut head = [0u8; 4 + 9 + 4];
        socket.read_exact(&mut head).await.expect("identify");
        let size = u32::from_be_bytes([head[13], head[14], head[15], head[16]]);
        let mut body = vec![0u8; size as usize];
        socket.read_exact(&mut body).await.expect("identify body");
        socket.write_all(&frame(0, b"OK")).await.expect("OK");
        socket.write_all(&tail).await.expect("tail");
    });
    addr
}

/// What the sink of a connection to a server sending `tail` hears as the connection ends.
async fn closed_after(tail: Vec<u8>) -> Option<Error> {
    let addr = server_sending(tail).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = Conn::connect(
        &addr,
        &ConnConfig::default(),
        None,
        false,
        move |event, _| {
            let _ = tx.send(event);
        },
    )
    .await
    .expect("connect");
    loop {
        match rx.recv().await.expect("an event") {
            Event::Closed(end) => {
                drop(conn);
                return end;
            }
            Event::Response(data) => assert_eq!(data.as_ref(), b"late"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn the_sink_hears_a_truncated_frame_as_an_error_and_a_clean_end_as_none() {
    let whole = frame(0, b"late");
    assert!(closed_after(whole.clone()).await.is_none());
    let mut cut = whole.clone();
    cut.extend_from_slice(&whole[..6]);
    assert!(matches!(
        closed_after(cut).await,
        Some(Error::Codec {
            source: CodecError::Truncated { .. },
            ..
        })
    ));
}
