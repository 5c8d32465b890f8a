//! Message body compression as RocketMQ producers write it, decided by the stored sysflag
//! (`MessageSysFlag`): bit 0 (`COMPRESSED_FLAG`) says the body is compressed, bits 8-10 say
//! with what (5.x: `0b001` LZ4, `0b010` ZSTD, `0b011` ZLIB; `0` is zlib too, as every 4.x
//! producer wrote it). LZ4 is the LZ4 *frame* format (Java's `LZ4FrameOutputStream`), ZSTD a
//! standard zstd frame, ZLIB a zlib stream (`java.util.zip.Deflater`).
//!
//! Decoding is bounded: a body that inflates past the caller's limit is refused after reading
//! one byte more than the limit, never held whole (no zip bomb).

use std::io::{Read, Write};

use bytes::Bytes;

/// Sysflag bit: the body is compressed.
pub const COMPRESSED_FLAG: i32 = 0x1;
/// Sysflag bits 8-10: which codec (meaningful only with [`COMPRESSED_FLAG`]).
const CODEC_MASK: i32 = 0x7 << 8;

/// A codec a sysflag can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// zlib (codec bits 0 or 3).
    Zlib,
    /// LZ4 frame format (codec bits 1).
    Lz4,
    /// Zstandard (codec bits 2).
    Zstd,
}

impl Codec {
    /// The sysflag bits a 5.x producer sets for this codec, [`COMPRESSED_FLAG`] included.
    pub fn sysflag(self) -> i32 {
        let bits = match self {
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
            Codec::Zlib => 3,
        };
        COMPRESSED_FLAG | (bits << 8)
    }
}

/// Why a compressed body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecompressError {
    /// The sysflag names a codec this client does not know (values 4-7).
    #[error("unknown compression type {0} in sysflag")]
    UnknownCodec(i32),
    /// The codec rejected the bytes (corrupt or truncated).
    #[error("{codec:?} body does not decompress: {detail}")]
    Malformed {
        /// The codec the sysflag named.
        codec: Codec,
        /// The codec's complaint.
        detail: String,
    },
    /// The body inflates past the limit.
    #[error("{codec:?} body inflates past the {limit}-byte limit")]
    TooLarge {
        /// The codec the sysflag named.
        codec: Codec,
        /// The limit.
        limit: usize,
    },
}

/// The codec of a stored message's sysflag; `None` for an uncompressed body.
pub fn codec_of(sysflag: i32) -> Result<Option<Codec>, DecompressError> {
    if sysflag & COMPRESSED_FLAG == 0 {
        return Ok(None);
    }
    match (sysflag & CODEC_MASK) >> 8 {
        0 | 3 => Ok(Some(Codec::Zlib)),
        1 => Ok(Some(Codec::Lz4)),
        2 => Ok(Some(Codec::Zstd)),
        other => Err(DecompressError::UnknownCodec(other)),
    }
}

/// The body as the producer gave it: `body` decompressed per `sysflag`, at most `limit` bytes.
pub fn decompress(sysflag: i32, body: Bytes, limit: usize) -> Result<Bytes, DecompressError> {
    let Some(codec) = codec_of(sysflag)? else {
        return Ok(body);
    };
    let malformed = |detail: String| DecompressError::Malformed { codec, detail };
    // No codec writes an empty stream (LZ4's frame reader would call it an empty body).
    if body.is_empty() {
        return Err(malformed("empty compressed body".into()));
    }
    let reader: Box<dyn Read + '_> = match codec {
        Codec::Zlib => Box::new(flate2::read::ZlibDecoder::new(&body[..])),
        Codec::Lz4 => {
            // The frame reader takes input ending between two blocks for a shorter body.
            lz4_frame_is_whole(&body).map_err(|e| malformed(e.into()))?;
            Box::new(lz4_flex::frame::FrameDecoder::new(&body[..]))
        }
        Codec::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(&body[..])
                .map_err(|e| malformed(e.to_string()))?,
        ),
    };
    let mut out = Vec::with_capacity(body.len().saturating_mul(2).min(limit));
    reader
        .take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| malformed(e.to_string()))?;
    if out.len() > limit {
        return Err(DecompressError::TooLarge { codec, limit });
    }
    Ok(Bytes::from(out))
}

/// Checks that `body` is whole LZ4 frames: each with header, blocks, end mark and the
/// checksums its flags announce, nothing missing.
fn lz4_frame_is_whole(body: &[u8]) -> Result<(), &'static str> {
    const MAGIC: u32 = 0x184D_2204;
    let word = |at: usize| -> Result<u32, &'static str> {
        body.get(at..at.saturating_add(4))
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(u32::from_le_bytes)
            .ok_or("truncated LZ4 frame")
    };
    let mut at = 0;
    while at < body.len() {
        if word(at)? != MAGIC {
            return Err("not an LZ4 frame");
        }
        let flags = *body.get(at + 4).ok_or("truncated LZ4 frame")?;
        let optional = |bit: u8, len: usize| if flags & bit != 0 { len } else { 0 };
        // Magic, FLG, BD, content size and dictionary id if flagged, header checksum.
        at += 6 + optional(0x08, 8) + optional(0x01, 4) + 1;
        loop {
            let size = word(at)?;
            at += 4;
            if size == 0 {
                at += optional(0x04, 4);
                break;
            }
            at = at
                .saturating_add((size & 0x7FFF_FFFF) as usize)
                .saturating_add(optional(0x10, 4));
        }
    }
    if at > body.len() {
        return Err("truncated LZ4 frame");
    }
    Ok(())
}

/// Java's default compression level for message bodies (`compressLevel`).
const JAVA_LEVEL: u32 = 5;

/// `body` as a zlib stream, as Java 4.x producers send it.
pub fn zlib(body: &[u8]) -> std::io::Result<Bytes> {
    let mut encoder = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2),
        flate2::Compression::new(JAVA_LEVEL),
    );
    encoder.write_all(body)?;
    Ok(Bytes::from(encoder.finish()?))
}

#[cfg(test)]
#[path = "compression_tests.rs"]
pub(crate) mod tests;
