//! `msgstream-nsq-testd`: the test server as a process, for non-Rust clients.
//!
//! ```text
//! msgstream-nsq-testd [--tcp 127.0.0.1:0] [--http 127.0.0.1:0] [--extensions none|partitions]
//! ```
//! Prints `tcp=<addr> http=<addr>` on one line once listening, then serves until Ctrl-C
//! (SIGINT) or SIGTERM, and exits 0. Stdin is not read, so `msgstream-nsq-testd … &` keeps
//! serving in the background.

use msgstream_nsq_testd::{Extensions, Options, TestServer};

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
    // Installed before the address is printed: a script that reads the line and at once
    // sends SIGTERM gets a clean exit, not the default action's.
    let stop = match Stop::install() {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("msgstream-nsq-testd: cannot handle stop signals: {e}");
            std::process::exit(1)
        }
    };
    println!("tcp={} http={}", server.tcp_addr(), server.http_addr());
    stop.wait().await;
    drop(server);
}

/// The signals that stop the server: SIGINT (Ctrl-C) and SIGTERM; Ctrl-C elsewhere.
struct Stop {
    #[cfg(unix)]
    signals: [tokio::signal::unix::Signal; 2],
}

impl Stop {
    fn install() -> std::io::Result<Stop> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Stop {
                signals: [
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                ],
            })
        }
        #[cfg(not(unix))]
        Ok(Stop {})
    }

    async fn wait(self) {
        #[cfg(unix)]
        {
            let [mut int, mut term] = self.signals;
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            // Without a handler there is nothing to wait for; the default action stops us.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
