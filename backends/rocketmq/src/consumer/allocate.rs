//! Average queue allocation: the group's sorted consumers split the sorted queues into
//! contiguous ranges whose sizes differ by at most one (Java `AllocateMessageQueueAveragely`).

/// The queues `me` gets. Empty if `me` is not among `consumers`.
pub fn allocate_average<Q: Clone>(queues: &[Q], consumers: &[String], me: &str) -> Vec<Q> {
    let Some(index) = consumers.iter().position(|c| c == me) else {
        return Vec::new();
    };
    let (n, c) = (queues.len(), consumers.len());
    let base = n / c;
    let extra = n % c;
    let start = index * base + index.min(extra);
    let len = base + usize::from(index < extra);
    queues[start..start + len].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn splits_evenly_and_covers_everything_once() {
        for queues in 0..10usize {
            for consumers in 1..5 {
                let q: Vec<usize> = (0..queues).collect();
                let all: Vec<usize> = ids(consumers)
                    .iter()
                    .flat_map(|me| allocate_average(&q, &ids(consumers), me))
                    .collect();
                assert_eq!(all, q, "{queues} queues over {consumers}");
            }
        }
        assert_eq!(allocate_average(&[1, 2, 3], &ids(2), "c0"), vec![1, 2]);
        assert_eq!(allocate_average(&[1, 2, 3], &ids(2), "c1"), vec![3]);
        assert!(allocate_average(&[1], &ids(2), "stranger").is_empty());
        assert!(allocate_average(&[1], &ids(2), "c1").is_empty());
    }
}
