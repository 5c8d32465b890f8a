//! The spool on disk: what a restart finds after acks, crashes mid-write, damage and rewrites.

use super::*;

fn id(n: u8) -> [u8; 16] {
    // Binary ids, spaces and newlines included, as nsqd's may be.
    let mut id = [b' '; 16];
    id[0] = n;
    id[15] = b'\n';
    id
}

/// Opens the test spool; returns it with its unacked messages.
fn open(dir: &Path) -> (Spool, Vec<Spooled>) {
    let spool = Spool::open(dir, "t", "s", SpoolSync::Buffered).expect("open");
    let pending = spool.read_from(0, usize::MAX).expect("read");
    (spool, pending)
}

fn bodies(pending: &[Spooled]) -> Vec<&[u8]> {
    pending.iter().map(|m| m.body.as_ref()).collect()
}

fn file(dir: &Path) -> PathBuf {
    dir.join("t@s.spool")
}

#[test]
fn a_reopened_spool_returns_the_unacked_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut spool, pending) = open(dir.path());
        assert!(pending.is_empty());
        let a = spool.append(id(1), None, b"a").expect("a");
        let b = spool.append(id(2), Some((35, 35)), b"b").expect("b");
        spool.append(id(3), None, b"c").expect("c");
        spool.ack(&[b, a, 99]).expect("ack");
        spool.append(id(4), None, b"d").expect("d");
        assert_eq!(spool.unacked.len(), 2);
    }
    let (spool, pending) = open(dir.path());
    assert_eq!(bodies(&pending), [&b"c"[..], b"d"]);
    assert!(spool.holds(&id(3)) && spool.holds(&id(4)));
    // New messages are numbered after the old ones, so acks never mix them up.
    assert!(pending[0].seq < pending[1].seq && spool.next_seq() > pending[1].seq);
    // Reading on from a seq skips what lies before it.
    let later = spool.read_from(pending[1].seq, 10).expect("read");
    assert_eq!(bodies(&later), [&b"d"[..]]);
    assert_eq!(spool.read_from(0, 1).expect("read").len(), 1);
}

#[test]
fn positions_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    open(dir.path())
        .0
        .append(id(1), Some((70, 35)), b"x")
        .expect("append");
    let (_, pending) = open(dir.path());
    assert_eq!(pending[0].position, Some((70, 35)));
    assert_eq!(pending[0].nsq_id, id(1));
}

#[test]
fn acking_everything_cuts_the_file_back_to_its_magic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut spool, _) = open(dir.path());
    let seqs: Vec<u64> = (0..10)
        .map(|n| spool.append(id(n), None, &[n; 100]).expect("append"))
        .collect();
    spool.ack(&seqs[..5]).expect("ack half");
    assert!(Spool::exists_with_data(dir.path(), "t", "s"));
    spool.ack(&seqs[5..]).expect("ack rest");
    assert_eq!(
        std::fs::metadata(file(dir.path())).expect("meta").len(),
        HEADER
    );
    assert!(!Spool::exists_with_data(dir.path(), "t", "s"));
    assert!(!spool.holds(&id(1)));
}

#[test]
fn a_record_cut_short_by_a_crash_is_dropped_and_the_rest_kept() {
    for cut in [1, 10, 20] {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let (mut spool, _) = open(dir.path());
            spool.append(id(1), None, b"kept").expect("append");
            spool.append(id(2), None, b"torn record").expect("append");
        }
        let f = OpenOptions::new()
            .write(true)
            .open(file(dir.path()))
            .expect("open");
        let len = f.metadata().expect("meta").len();
        f.set_len(len - cut).expect("cut");
        drop(f);
        let (mut spool, pending) = open(dir.path());
        assert_eq!(bodies(&pending), [&b"kept"[..]], "cut {cut} bytes");
        assert!(!spool.holds(&id(2)));
        // What comes next is written after the good records, not after the torn bytes.
        spool.append(id(3), None, b"next").expect("append");
        drop(spool);
        let (_, pending) = open(dir.path());
        assert_eq!(bodies(&pending), [&b"kept"[..], b"next"]);
    }
}

#[test]
fn a_torn_last_record_with_its_full_length_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut spool, _) = open(dir.path());
        spool.append(id(1), None, b"kept").expect("append");
        spool.append(id(2), None, b"zeroed").expect("append");
    }
    let mut bytes = std::fs::read(file(dir.path())).expect("read");
    let n = bytes.len();
    bytes[n - 3..].fill(0);
    std::fs::write(file(dir.path()), &bytes).expect("write");
    let (_, pending) = open(dir.path());
    assert_eq!(bodies(&pending), [&b"kept"[..]]);
}

#[test]
fn damage_before_the_last_record_is_an_error_naming_the_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut spool, _) = open(dir.path());
        spool.append(id(1), None, b"first").expect("append");
        spool.append(id(2), None, b"second").expect("append");
    }
    let mut bytes = std::fs::read(file(dir.path())).expect("read");
    bytes[HEADER as usize + FRAME + 12] ^= 0xff;
    std::fs::write(file(dir.path()), &bytes).expect("write");
    let err = Spool::open(dir.path(), "t", "s", SpoolSync::Buffered)
        .err()
        .expect("damaged spool");
    let text = err.to_string();
    assert!(
        text.contains("byte 8") && text.contains("checksum"),
        "{text}"
    );
}

#[test]
fn a_foreign_file_or_another_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for content in [&b"MSNQSPL2"[..], b"something else entirely"] {
        std::fs::write(file(dir.path()), content).expect("write");
        let err = Spool::open(dir.path(), "t", "s", SpoolSync::Buffered)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("another version"), "{err}");
    }
    // A magic cut short by a crash is an empty spool.
    std::fs::write(file(dir.path()), b"MSNQ").expect("write");
    let (_, pending) = open(dir.path());
    assert!(pending.is_empty());
}

#[test]
fn a_spool_has_one_holder_and_cannot_be_removed_while_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut spool, _) = open(dir.path());
    spool.append(id(1), None, b"x").expect("append");
    let busy = |r: Result<()>| matches!(r, Err(Error::SubscriptionBusy { .. }));
    assert!(matches!(
        Spool::open(dir.path(), "t", "s", SpoolSync::Buffered),
        Err(Error::SubscriptionBusy { .. })
    ));
    assert!(busy(Spool::remove(dir.path(), "t", "s")));
    assert!(busy(Spool::remove_topic(dir.path(), "t")));
    // Another subscription, and a topic whose name extends this one, are not this spool.
    let _other = Spool::open(dir.path(), "t", "s2", SpoolSync::Buffered).expect("other");
    Spool::remove_topic(dir.path(), "t.x").expect("other topic");
    drop(spool);
    drop(_other);
    Spool::remove_topic(dir.path(), "t").expect("remove");
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
    let (_, pending) = open(dir.path());
    assert!(pending.is_empty());
}

#[test]
fn a_large_mostly_acked_spool_is_rewritten_with_the_unacked_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut spool, _) = open(dir.path());
    let body = vec![7u8; 64 << 10];
    let keep = spool.append(id(0), None, b"oldest unacked").expect("keep");
    let mut acked = Vec::new();
    for n in 1..=140u8 {
        acked.push(spool.append(id(n), None, &body).expect("append"));
    }
    let tail = spool
        .append(id(200), None, b"newest unacked")
        .expect("tail");
    spool.ack(&acked).expect("ack");
    let len = std::fs::metadata(file(dir.path())).expect("meta").len();
    assert!(len < 1024, "rewritten to the unacked: {len} bytes");
    spool.append(id(201), None, b"after").expect("append");
    drop(spool);
    let (mut spool, pending) = open(dir.path());
    assert_eq!(
        bodies(&pending),
        [&b"oldest unacked"[..], b"newest unacked", b"after"]
    );
    assert_eq!((pending[0].seq, pending[1].seq), (keep, tail));
    spool.ack(&[keep, tail, pending[2].seq]).expect("ack");
    assert!(!Spool::exists_with_data(dir.path(), "t", "s"));
}

#[test]
fn synced_spools_read_back_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut spool = Spool::open(dir.path(), "t", "s", SpoolSync::SyncData).expect("open");
        spool.append(id(1), None, b"synced").expect("append");
    }
    let (_, pending) = open(dir.path());
    assert_eq!(bodies(&pending), [&b"synced"[..]]);
}
