//! Results go to standard output one write at a time through a locked handle, and a reader that
//! goes away (`msgstream consume … | head -3`) is [`Error::OutputClosed`], a quiet stop, rather
//! than the panic `println!` gives on a broken pipe.

use std::io::Write;

use crate::error::{Error, Result};

/// Writes `text` and a newline to standard output and flushes it, so that once this returns
/// `Ok` the line has left the process (a caller commits what it showed only then).
pub fn line(text: impl std::fmt::Display) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(output_error)
}

fn output_error(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Error::OutputClosed
    } else {
        Error::Output(e)
    }
}
