//! RDY arithmetic (go-nsq's model), pure so it can be tested without sockets.
//!
//! The invariant every function here keeps: the sum of RDY over all connections never exceeds
//! `max_in_flight`, and no connection's RDY exceeds its server's `max_rdy_count`. When there are
//! more connections than in-flight budget, some connections hold RDY 0 and
//! [`redistribute`] rotates the budget among them so none starves.

use std::time::Duration;

/// The RDY each connection gets when not in backoff: an even share, at least 1.
pub fn per_conn(max_in_flight: u32, conns: usize) -> u32 {
    let conns = u32::try_from(conns.max(1)).unwrap_or(u32::MAX);
    (max_in_flight / conns).clamp(1, max_in_flight.max(1))
}

/// The RDY a connection may be given when it wants `wanted`: capped by its server's
/// `max_rdy` and by what the other connections leave of `max_in_flight`.
pub fn grant(wanted: u32, max_rdy: u32, current: u32, total: u32, max_in_flight: u32) -> u32 {
    let others = total.saturating_sub(current);
    wanted
        .min(max_rdy)
        .min(max_in_flight.saturating_sub(others))
}

/// What [`redistribute`] needs to know of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnView {
    /// RDY it holds.
    pub rdy: u32,
    /// Time since it last received a message (or got its RDY).
    pub idle: Duration,
    /// Its server's `max_rdy_count`.
    pub max_rdy: u32,
}

/// New RDY counts when connections outnumber the budget (or in backoff with several
/// connections): connections idle longer than `idle_timeout` give their RDY back, then the free
/// budget goes out as RDY 1 to zero-RDY connections, starting at `start` (rotated by the caller
/// so every connection gets its turn).
pub fn redistribute(
    conns: &[ConnView],
    max_in_flight: u32,
    idle_timeout: Duration,
    start: usize,
) -> Vec<u32> {
    let mut rdy: Vec<u32> = conns
        .iter()
        .map(|c| if c.idle > idle_timeout { 0 } else { c.rdy })
        .collect();
    let mut free = max_in_flight.saturating_sub(rdy.iter().sum());
    let n = conns.len();
    for step in 0..n {
        if free == 0 {
            break;
        }
        let i = (start + step) % n;
        if rdy[i] == 0 && conns[i].rdy == 0 && conns[i].max_rdy > 0 {
            rdy[i] = 1;
            free -= 1;
        }
    }
    rdy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_even_and_at_least_one() {
        assert_eq!(per_conn(200, 3), 66);
        assert_eq!(per_conn(1, 5), 1);
        assert_eq!(per_conn(10, 0), 10);
    }

    #[test]
    fn grants_never_overshoot() {
        assert_eq!(grant(100, 2500, 0, 150, 200), 50);
        assert_eq!(grant(100, 40, 0, 0, 200), 40);
        assert_eq!(grant(1, 2500, 0, 1, 1), 0);
        assert_eq!(grant(5, 2500, 5, 5, 5), 5);
    }

    #[test]
    fn budget_rotates_to_starved_connections() {
        let busy = ConnView {
            rdy: 1,
            idle: Duration::from_secs(20),
            max_rdy: 2500,
        };
        let fresh = ConnView {
            rdy: 1,
            idle: Duration::ZERO,
            max_rdy: 2500,
        };
        let starved = ConnView {
            rdy: 0,
            idle: Duration::ZERO,
            max_rdy: 2500,
        };
        let plan = redistribute(
            &[busy, fresh, starved, starved],
            2,
            Duration::from_secs(10),
            0,
        );
        assert_eq!(plan, [0, 1, 1, 0]);
        assert!(plan.iter().sum::<u32>() <= 2);
        let next = redistribute(&[fresh, starved, starved], 2, Duration::from_secs(10), 2);
        assert_eq!(next, [1, 0, 1]);
    }
}
