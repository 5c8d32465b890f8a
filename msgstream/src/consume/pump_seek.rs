//! Seeking several channels as one: a failure midway puts back the channels moved before it.

use super::Pumps;
use crate::consume::runs::Runs;
use crate::mq::MessageId;
use crate::Error;

/// Where to put a channel back if a seek of a later channel fails.
pub(crate) type Rewind = Option<(MessageId, bool)>;

/// A multi-channel seek that failed: the error, and the channels that had moved and were put
/// back to their rewind points (their deliveries restart from there, in a new generation).
pub(crate) struct SeekFailed {
    pub(crate) error: Error,
    pub(crate) restored: Vec<usize>,
}

impl<R: Runs> Pumps<R> {
    /// Seeks every target (channel index, id, inclusive) in turn, so that a failure changes
    /// nothing: when one channel's seek fails, the channels moved before it are sought back to the point `rewind` names for
    /// each (given the first id its pump had received since it last moved), and so is the
    /// failing channel itself if its consumer says it moved before failing
    /// ([`Error::SeekMoved`]). Checks that can fail before anything moves belong to the
    /// caller; this covers a backend call failing midway. If a channel cannot be put back,
    /// the error says which and why.
    pub(crate) async fn seek_all(
        &mut self,
        targets: &[(usize, MessageId, bool)],
        mut rewind: impl FnMut(usize, Option<MessageId>) -> Rewind,
    ) -> std::result::Result<(), SeekFailed> {
        let mut moved: Vec<(usize, Rewind)> = Vec::with_capacity(targets.len());
        for (index, id, inclusive) in targets {
            let error = match self.seek(*index, id, *inclusive).await {
                Ok((first, Ok(()))) => {
                    moved.push((*index, rewind(*index, first)));
                    continue;
                }
                Ok((first, Err(Error::SeekMoved { source, .. }))) => {
                    moved.push((*index, rewind(*index, first)));
                    *source
                }
                Ok((_, Err(error))) | Err(error) => error,
            };
            let mut restored = Vec::with_capacity(moved.len());
            let mut stuck = Vec::new();
            for (back_index, back) in moved {
                let channel = self
                    .slots
                    .get(back_index)
                    .map(|s| s.channel.clone())
                    .unwrap_or_default();
                let outcome = match back {
                    Some((back_id, back_inclusive)) => {
                        match self.seek(back_index, &back_id, back_inclusive).await {
                            Ok((_, outcome)) => outcome,
                            Err(e) => Err(e),
                        }
                    }
                    None => Err(Error::InvalidArgument(
                        "nothing was received from it since it last moved".into(),
                    )),
                };
                match outcome {
                    Ok(()) => restored.push(back_index),
                    Err(e) => stuck.push(format!("{channel:?} ({e})")),
                }
            }
            let error = if stuck.is_empty() {
                error
            } else {
                Error::backend(
                    "msgstream",
                    format!(
                        "seek failed ({error}), and channels moved before the failure could not be put back, so they now read from their seek targets: {}",
                        stuck.join(", ")
                    ),
                )
            };
            return Err(SeekFailed { error, restored });
        }
        Ok(())
    }
}
