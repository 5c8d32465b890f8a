//! What an nsqd tells its lookupds: `REGISTER` when a topic or channel appears, `UNREGISTER`
//! when it goes. The store's topics and channels are compared with what was last announced
//! each time the store's lock is released (see [`crate::StoreGuard`]), so every change is
//! announced, in order, whichever code path made it; a test lookupd reads the log from its own
//! position, as if the nsqd were connected to it from the start.

use std::collections::{BTreeMap, BTreeSet};

use crate::store::Topic;

/// One announcement; `channel` is `None` for the topic itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Announcement {
    Register {
        topic: String,
        channel: Option<String>,
    },
    Unregister {
        topic: String,
        channel: Option<String>,
    },
}

/// The announcements so far and what they add up to.
#[derive(Default)]
pub(crate) struct Announcer {
    announced: BTreeMap<String, BTreeSet<String>>,
    pub log: Vec<Announcement>,
}

impl Announcer {
    /// Announces the difference between `topics` and what was announced before: channels go
    /// before their topic, topics come before their channels (nsqd's order).
    pub fn sync(&mut self, topics: &BTreeMap<String, Topic>) {
        let now: BTreeMap<&String, BTreeSet<&String>> = topics
            .iter()
            .map(|(name, t)| {
                let channels = t.partitions.values().flat_map(|p| p.channels.keys());
                (name, channels.collect())
            })
            .collect();
        let same = now.len() == self.announced.len()
            && now.iter().zip(&self.announced).all(|((t, cs), (at, acs))| {
                *t == at && cs.len() == acs.len() && cs.iter().zip(acs).all(|(c, ac)| *c == ac)
            });
        if same {
            return;
        }
        for (topic, channels) in &self.announced {
            let kept = now.get(topic);
            for channel in channels {
                if !kept.is_some_and(|k| k.contains(channel)) {
                    self.log.push(Announcement::Unregister {
                        topic: topic.clone(),
                        channel: Some(channel.clone()),
                    });
                }
            }
            if kept.is_none() {
                self.log.push(Announcement::Unregister {
                    topic: topic.clone(),
                    channel: None,
                });
            }
        }
        for (topic, channels) in &now {
            let before = self.announced.get(*topic);
            if before.is_none() {
                self.log.push(Announcement::Register {
                    topic: (*topic).clone(),
                    channel: None,
                });
            }
            for channel in channels {
                if !before.is_some_and(|b| b.contains(*channel)) {
                    self.log.push(Announcement::Register {
                        topic: (*topic).clone(),
                        channel: Some((*channel).clone()),
                    });
                }
            }
        }
        self.announced = now
            .into_iter()
            .map(|(t, cs)| (t.clone(), cs.into_iter().cloned().collect()))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(spec: &[(&str, &[&str])]) -> BTreeMap<String, Topic> {
        spec.iter()
            .map(|(name, channels)| {
                let mut topic = Topic::default();
                let part = topic.partitions.entry(0).or_default();
                for c in *channels {
                    part.channel(c);
                }
                (name.to_string(), topic)
            })
            .collect()
    }

    fn reg(topic: &str, channel: Option<&str>) -> Announcement {
        Announcement::Register {
            topic: topic.into(),
            channel: channel.map(Into::into),
        }
    }

    fn unreg(topic: &str, channel: Option<&str>) -> Announcement {
        Announcement::Unregister {
            topic: topic.into(),
            channel: channel.map(Into::into),
        }
    }

    #[test]
    fn changes_are_announced_once_in_nsqds_order() {
        let mut a = Announcer::default();
        a.sync(&topics(&[("t", &["c"])]));
        a.sync(&topics(&[("t", &["c"])]));
        assert_eq!(a.log, vec![reg("t", None), reg("t", Some("c"))]);
        a.sync(&topics(&[("t", &["c", "d"]), ("u", &[])]));
        a.sync(&topics(&[("u", &[])]));
        assert_eq!(
            a.log[2..],
            [
                reg("t", Some("d")),
                reg("u", None),
                unreg("t", Some("c")),
                unreg("t", Some("d")),
                unreg("t", None)
            ]
        );
    }
}
