//! Time as the state machines see it: a [`Millis`] handed in by the shell with every input.
//! Nothing here reads a clock, so tests run any schedule on a virtual clock.

use core::ops::Add;
use core::time::Duration;

/// A point in time on the shell's clock, in milliseconds: the browser's `Date.now()`, or
/// milliseconds since some start natively. Only differences matter to deadlines; the
/// client also checks header times against it, so there it is Unix time.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// The clock's zero.
    pub const ZERO: Millis = Millis(0);

    /// From a JavaScript number of milliseconds; NaN and negative times are 0, fractions
    /// are dropped.
    pub fn from_f64(ms: f64) -> Millis {
        if ms.is_finite() && ms > 0.0 {
            Millis(ms as u64)
        } else {
            Millis(0)
        }
    }

    /// As a JavaScript number.
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }

    /// Whole seconds (Unix time, when the clock is).
    pub fn as_secs(self) -> u64 {
        self.0 / 1000
    }

    /// How long after `earlier` this is (zero if it is not after).
    pub fn since(self, earlier: Millis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Millis {
    type Output = Millis;

    /// Saturating: a deadline far in the future stays far in the future.
    fn add(self, d: Duration) -> Millis {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Millis(self.0.saturating_add(ms))
    }
}

/// The earliest of two optional deadlines.
pub fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn arithmetic_saturates_and_javascript_numbers_are_clamped() {
        assert_eq!(Millis(5) + Duration::from_secs(1), Millis(1005));
        assert_eq!(Millis(u64::MAX - 1) + Duration::MAX, Millis(u64::MAX));
        assert_eq!(Millis(3).since(Millis(10)), Duration::ZERO);
        assert_eq!(Millis(10).since(Millis(3)), Duration::from_millis(7));
        assert_eq!(Millis::from_f64(f64::NAN), Millis(0));
        assert_eq!(Millis::from_f64(-5.0), Millis(0));
        assert_eq!(Millis::from_f64(1234.9), Millis(1234));
        assert_eq!(Millis(2_000_999).as_secs(), 2_000);
        assert_eq!(earliest(Some(Millis(3)), None), Some(Millis(3)));
        assert_eq!(earliest(Some(Millis(3)), Some(Millis(2))), Some(Millis(2)));
        assert_eq!(earliest(None, None), None);
    }
}
