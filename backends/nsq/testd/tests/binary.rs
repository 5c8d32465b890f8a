//! The `msgstream-nsq-testd` process: it serves with its stdin closed (started in the
//! background by a script) and stops cleanly, exit status 0, on SIGTERM or SIGINT.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for the process to exit after the signal.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Starts the binary with stdin closed; returns it and its HTTP address.
fn start() -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_msgstream-nsq-testd"))
        .args(["--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the address line");
    let http = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("http="))
        .unwrap_or_else(|| panic!("no http= in {line:?}"))
        .to_string();
    (child, http)
}

/// `GET /ping` must answer `OK`.
fn ping(http: &str) -> String {
    let mut stream = TcpStream::connect(http).expect("the HTTP port accepts");
    stream
        .write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("request sent");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("reply read");
    reply
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} failed");
}

/// Waits for the exit; a process still running after [`EXIT_WAIT`] is killed and fails the test.
fn exit_status(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + EXIT_WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running {EXIT_WAIT:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn serves_with_stdin_closed_until(signal_name: &str) {
    let (mut child, http) = start();
    let reply = ping(&http);
    assert!(reply.ends_with("\r\n\r\nOK"), "{reply}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the server exited on its own"
    );
    assert!(ping(&http).ends_with("OK"));
    signal(&child, signal_name);
    let status = exit_status(&mut child);
    assert_eq!(status.code(), Some(0), "{status}");
}

#[test]
fn serves_with_stdin_closed_until_sigterm_then_exits_0() {
    serves_with_stdin_closed_until("TERM");
}

#[test]
fn ctrl_c_stops_it_with_exit_status_0() {
    serves_with_stdin_closed_until("INT");
}
