//! How far a mirror's copy has got: the share of the source's records mirrored, a progress bar,
//! and the time left at the rate seen between two looks. `--describe` and `--start --wait`
//! print these.

use std::time::Duration;

/// Percentage of the source's offsets the destination holds (100 when the source is empty).
pub(crate) fn percent(mirrored: i64, source: i64) -> f64 {
    if source <= 0 {
        return 100.0;
    }
    (100.0 * mirrored.max(0) as f64 / source as f64).min(100.0)
}

/// The time to mirror `left` records at `per_second`, or None when nothing moved.
pub(crate) fn time_left(left: i64, per_second: f64) -> Option<Duration> {
    if left <= 0 {
        return Some(Duration::ZERO);
    }
    (per_second > 0.0).then(|| Duration::from_secs_f64(left as f64 / per_second))
}

/// A duration the way people read it: `45s`, `3m05s`, `2h04m`.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `[#########-----------]` for a percentage, `width` cells wide.
pub(crate) fn bar(percent: f64, width: usize) -> String {
    let filled = ((percent / 100.0) * width as f64).floor() as usize;
    let filled = filled.min(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_of_the_source() {
        assert_eq!(percent(50, 200), 25.0);
        assert_eq!(percent(0, 0), 100.0, "an empty source is all mirrored");
        assert_eq!(percent(-1, 10), 0.0, "unknown destination offset");
        assert_eq!(percent(12, 10), 100.0);
    }

    #[test]
    fn time_left_from_the_rate() {
        assert_eq!(time_left(100, 10.0), Some(Duration::from_secs(10)));
        assert_eq!(time_left(0, 0.0), Some(Duration::ZERO));
        assert_eq!(time_left(5, 0.0), None, "nothing moved: unknown");
    }

    #[test]
    fn readable_durations_and_bars() {
        assert_eq!(human(Duration::from_secs(45)), "45s");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
        assert_eq!(human(Duration::from_secs(7440)), "2h04m");
        assert_eq!(bar(50.0, 10), "[#####-----]");
        assert_eq!(bar(100.0, 4), "[####]");
        assert_eq!(bar(0.0, 3), "[---]");
    }
}
