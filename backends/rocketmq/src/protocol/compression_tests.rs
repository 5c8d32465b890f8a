use std::io::Write;

use super::*;

fn sample(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
        .collect()
}

/// `body` compressed as the Java client's codec of that name writes it.
pub(crate) fn java_compress(codec: Codec, body: &[u8]) -> Vec<u8> {
    match codec {
        Codec::Zlib => zlib(body).expect("zlib").to_vec(),
        Codec::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(body).expect("lz4");
            encoder.finish().expect("lz4")
        }
        Codec::Zstd => {
            ruzstd::encoding::compress_to_vec(body, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

#[test]
fn sysflags_name_codecs_as_java_does() {
    assert_eq!(codec_of(0).expect("plain"), None);
    assert_eq!(codec_of(0x300).expect("type bits alone"), None);
    assert_eq!(codec_of(0x1).expect("4.x"), Some(Codec::Zlib));
    assert_eq!(codec_of(0x101).expect("lz4"), Some(Codec::Lz4));
    assert_eq!(codec_of(0x201).expect("zstd"), Some(Codec::Zstd));
    assert_eq!(codec_of(0x301).expect("zlib"), Some(Codec::Zlib));
    // Other bits (multi tags, transaction type, v6 hosts) do not change the codec.
    assert_eq!(
        codec_of(0x2 | 0xC | 0x30 | 0x201).expect("zstd"),
        Some(Codec::Zstd)
    );
    for bits in 4..8 {
        assert_eq!(
            codec_of(COMPRESSED_FLAG | (bits << 8)),
            Err(DecompressError::UnknownCodec(bits))
        );
    }
    for codec in [Codec::Zlib, Codec::Lz4, Codec::Zstd] {
        assert_eq!(codec_of(codec.sysflag()).expect("own flag"), Some(codec));
    }
}

#[test]
fn every_codec_round_trips_byte_identical() {
    for len in [0, 1, 4097, 10 * 1024, 1024 * 1024] {
        let body = sample(len);
        for codec in [Codec::Zlib, Codec::Lz4, Codec::Zstd] {
            let packed = Bytes::from(java_compress(codec, &body));
            let out = decompress(codec.sysflag(), packed.clone(), len).expect("decompress");
            assert_eq!(&out[..], &body[..], "{codec:?}, {len} bytes");
            if codec == Codec::Zlib {
                // What a 4.x producer writes: only the compressed bit.
                let legacy = decompress(COMPRESSED_FLAG, packed, len).expect("legacy zlib");
                assert_eq!(&legacy[..], &body[..]);
            }
        }
    }
    let plain = Bytes::from_static(b"not compressed");
    assert_eq!(decompress(0, plain.clone(), 1).expect("plain"), plain);
}

#[test]
fn damaged_bodies_are_errors() {
    let body = sample(20_000);
    for codec in [Codec::Zlib, Codec::Lz4, Codec::Zstd] {
        let packed = java_compress(codec, &body);
        for cut in [0, 1, packed.len() / 2, packed.len() - 1] {
            let out = decompress(
                codec.sysflag(),
                Bytes::copy_from_slice(&packed[..cut]),
                1 << 20,
            )
            .map(|b| b.len());
            assert!(
                matches!(out, Err(DecompressError::Malformed { .. })),
                "{codec:?} cut at {cut}: {out:?}"
            );
        }
        let garbage = Bytes::from(vec![0xA5; 64]);
        assert!(matches!(
            decompress(codec.sysflag(), garbage, 1 << 20).map(|b| b.len()),
            Err(DecompressError::Malformed { .. })
        ));
    }
    assert_eq!(
        decompress(0x401, Bytes::from_static(b"x"), 10),
        Err(DecompressError::UnknownCodec(4))
    );
}

#[test]
fn inflation_stops_at_the_limit() {
    let zeros = vec![0u8; 8 * 1024 * 1024];
    for codec in [Codec::Zlib, Codec::Lz4, Codec::Zstd] {
        let bomb = Bytes::from(java_compress(codec, &zeros));
        assert!(bomb.len() < 64 * 1024, "{codec:?}: {} bytes", bomb.len());
        assert_eq!(
            decompress(codec.sysflag(), bomb.clone(), 1024 * 1024),
            Err(DecompressError::TooLarge {
                codec,
                limit: 1024 * 1024
            })
        );
        let exact = decompress(codec.sysflag(), bomb, zeros.len()).expect("at the limit");
        assert_eq!(exact.len(), zeros.len());
    }
}
