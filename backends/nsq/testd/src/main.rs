//! `msgstream-nsq-testd`: the test server as a process, for non-Rust clients.
//!
//! ```text
//! msgstream-nsq-testd [--tcp 127.0.0.1:0] [--http 127.0.0.1:0] [--extensions none|partitions]
//! ```
//! Prints `tcp=<addr> http=<addr>` on one line once listening, then serves until stdin closes
//! or Ctrl-C.

use msgstream_nsq_testd::{Extensions, Options, TestServer};
use tokio::io::AsyncReadExt;

fn usage() -> ! {
    eprintln!(
        "usage: msgstream-nsq-testd [--tcp ADDR] [--http ADDR] [--extensions none|partitions]"
    );
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut tcp = "127.0.0.1:0".to_string();
    let mut http = "127.0.0.1:0".to_string();
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--tcp" => tcp = value,
            "--http" => http = value,
            "--extensions" => {
                options.extensions = match value.as_str() {
                    "none" => Extensions::None,
                    "partitions" => Extensions::Partitions,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    let server = match TestServer::bind(options, &tcp, &http).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("msgstream-nsq-testd: {e}");
            std::process::exit(1)
        }
    };
    println!("tcp={} http={}", server.tcp_addr(), server.http_addr());
    let mut stdin = tokio::io::stdin();
    let mut sink = [0u8; 256];
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { while matches!(stdin.read(&mut sink).await, Ok(n) if n > 0) {} } => {}
    }
    drop(server);
}
