//! Stamps on responses: timestamps (Unix seconds, RFC 3339), response ids, and the digests
//! that name models.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Now as RFC 3339 UTC with nanoseconds (`2024-07-01T12:34:56.123456789Z`), as Ollama writes
/// `created_at`.
pub(crate) fn rfc3339_now() -> String {
    rfc3339(SystemTime::now())
}

/// `t` as RFC 3339 UTC with nanoseconds.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's civil-from-days method).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A fresh id with `prefix` (`chatcmpl-…`, `call_…`): 24 hex digits, unique per process and
/// unpredictable across processes.
pub(crate) fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let h = std::collections::hash_map::RandomState::new().hash_one(n);
    format!("{prefix}{h:016x}{:08x}", n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let t = UNIX_EPOCH + Duration::new(951_782_400, 5); // 2000-02-29
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000000005Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.000000000Z");
    }

    #[test]
    fn ids_differ() {
        let a = new_id("call_");
        let b = new_id("call_");
        assert_ne!(a, b);
        assert!(a.starts_with("call_") && a.len() == 5 + 24);
    }
}

/// 64 hex digits naming `key` (FNV-1a, four salts).
pub(crate) fn digest_of(key: &str) -> String {
    (0u64..4)
        .map(|salt| {
            let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64 ^ salt, |h, x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3));
            format!("{h:016x}")
        })
        .collect()
}
