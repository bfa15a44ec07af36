//! Where a ledger's entries live: BookKeeper's round-robin distribution schedule. Entry `e` of
//! an ensemble of `E` bookies with write quorum `W` goes to the `W` bookies at indexes
//! `e mod E, e+1 mod E, …`.

/// The ensemble indexes entry `entry` is written to.
pub fn write_set(entry: i64, ensemble: usize, write_quorum: usize) -> Vec<usize> {
    assert!(ensemble > 0 && write_quorum > 0 && write_quorum <= ensemble);
    let start = entry.rem_euclid(ensemble as i64) as usize;
    (0..write_quorum).map(|i| (start + i) % ensemble).collect()
}

/// Whether ensemble index `index` stores entry `entry`.
pub fn stores(index: usize, entry: i64, ensemble: usize, write_quorum: usize) -> bool {
    debug_assert!(index < ensemble);
    let start = entry.rem_euclid(ensemble as i64) as usize;
    (index + ensemble - start) % ensemble < write_quorum
}

/// The entries of `first..=last` that index `index` stores, first to last (empty when none).
pub fn stored(
    index: usize,
    first: i64,
    last: i64,
    ensemble: usize,
    write_quorum: usize,
) -> Vec<i64> {
    (first..=last)
        .filter(|&e| stores(index, e, ensemble, write_quorum))
        .collect()
}

/// The first and last entries of `first..=last` that index `index` stores.
pub fn stored_bounds(
    index: usize,
    first: i64,
    last: i64,
    ensemble: usize,
    write_quorum: usize,
) -> Option<(i64, i64)> {
    if last < first {
        return None;
    }
    // Within any E consecutive entries an index stores W of them: look at most E from each end.
    let span = ensemble as i64;
    let lo =
        (first..=last.min(first + span)).find(|&e| stores(index, e, ensemble, write_quorum))?;
    let hi = (last.saturating_sub(span).max(first)..=last)
        .rev()
        .find(|&e| stores(index, e, ensemble, write_quorum))?;
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin() {
        assert_eq!(write_set(0, 3, 2), vec![0, 1]);
        assert_eq!(write_set(2, 3, 2), vec![2, 0]);
        assert_eq!(write_set(5, 5, 3), vec![0, 1, 2]);
        for e in 0..30 {
            for i in 0..5 {
                assert_eq!(
                    stores(i, e, 5, 3),
                    write_set(e, 5, 3).contains(&i),
                    "{e} {i}"
                );
            }
        }
        assert_eq!(stored(1, 0, 8, 3, 2), vec![0, 1, 3, 4, 6, 7]);
        assert_eq!(stored_bounds(1, 0, 8, 3, 2), Some((0, 7)));
        assert_eq!(stored_bounds(2, 0, 0, 3, 2), None);
        assert_eq!(stored_bounds(0, 0, -1, 3, 3), None);
        for (first, last) in [(0, 100), (7, 9), (13, 13), (40, 1000)] {
            for i in 0..4 {
                let all = stored(i, first, last, 4, 2);
                let want = all.first().copied().zip(all.last().copied());
                assert_eq!(
                    stored_bounds(i, first, last, 4, 2),
                    want,
                    "{first} {last} {i}"
                );
            }
        }
    }
}
