//! Token buckets per key, the one rate limiter of the services: registrations and market
//! submissions per source address (one token a request), report bytes per GPU and per source
//! address (a token a byte).
//!
//! Each bucket holds at most `capacity` tokens (the burst) and refills evenly at `capacity`
//! per `period`. At most `max_keys` buckets are remembered: a full bucket carries no state and
//! is forgotten first; when every remembered bucket is in use, a new key is refused rather
//! than an old one forgotten (forgetting would refill an attacker's bucket), and the caller
//! says "crowded, retry later".

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Token buckets keyed by `K` ([module docs](self)).
pub struct TokenBuckets<K> {
    capacity: f64,
    period: Duration,
    max_keys: usize,
    buckets: HashMap<K, (f64, Instant)>,
}

impl<K: Hash + Eq + Clone> TokenBuckets<K> {
    /// Buckets of `capacity` tokens, refilled at `capacity` per `period`; at most `max_keys`
    /// remembered.
    pub fn new(capacity: f64, period: Duration, max_keys: usize) -> TokenBuckets<K> {
        TokenBuckets {
            capacity,
            period,
            max_keys,
            buckets: HashMap::new(),
        }
    }

    /// The burst, and the refill over one period.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// `tokens` refilled from `since` to `now`, at most the capacity.
    fn refilled(&self, tokens: f64, since: Instant, now: Instant) -> f64 {
        let rate = self.capacity / self.period.as_secs_f64();
        (tokens + now.duration_since(since).as_secs_f64() * rate).min(self.capacity)
    }

    /// The tokens `key` has at `now`, refilled; `None` when as many buckets as allowed are in
    /// use and `key` is not among them.
    fn tokens(&mut self, key: &K, now: Instant) -> Option<&mut f64> {
        if self.buckets.len() >= self.max_keys && !self.buckets.contains_key(key) {
            let full: Vec<K> = self
                .buckets
                .iter()
                .filter(|(_, (tokens, since))| self.refilled(*tokens, *since, now) >= self.capacity)
                .map(|(key, _)| key.clone())
                .collect();
            for key in full {
                self.buckets.remove(&key);
            }
            if self.buckets.len() >= self.max_keys {
                return None;
            }
        }
        let capacity = self.capacity;
        let (tokens, since) = *self.buckets.entry(key.clone()).or_insert((capacity, now));
        let refilled = self.refilled(tokens, since, now);
        let bucket = self.buckets.get_mut(key)?;
        *bucket = (refilled, now);
        Some(&mut bucket.0)
    }

    /// How long from `now` until `key` has `n` tokens (zero: it has them now); `None` when
    /// crowded (every remembered bucket in use, as the module docs say).
    pub fn wait(&mut self, key: &K, n: f64, now: Instant) -> Option<Duration> {
        let rate = self.capacity / self.period.as_secs_f64();
        let short = n - *self.tokens(key, now)?;
        Some(if short > 0.0 {
            Duration::from_secs_f64(short / rate)
        } else {
            Duration::ZERO
        })
    }

    /// Takes `n` tokens of `key`'s (after [`TokenBuckets::wait`] found them there).
    pub fn spend(&mut self, key: &K, n: f64, now: Instant) {
        if let Some(tokens) = self.tokens(key, now) {
            *tokens -= n;
        }
    }

    /// Takes one token of `key`'s if it has one: false when it has none, or when crowded.
    pub fn take_one(&mut self, key: &K, now: Instant) -> bool {
        match self.tokens(key, now) {
            Some(tokens) if *tokens >= 1.0 => {
                *tokens -= 1.0;
                true
            }
            _ => false,
        }
    }
}

/// Source addresses a [`PerSource`] limiter remembers at once; beyond this, those with full
/// buckets are forgotten, and a new one waits while all are active.
const MAX_TRACKED_SOURCES: usize = 100_000;

/// Requests per source address (an IPv4 address or IPv6 /64: [`crate::serve::source_key`])
/// per minute, a token each: registrations, market submissions.
pub struct PerSource(TokenBuckets<std::net::IpAddr>);

impl PerSource {
    /// Buckets of `per_minute` tokens (the burst too), refilled evenly over a minute.
    pub fn per_minute(per_minute: f64) -> PerSource {
        PerSource(TokenBuckets::new(
            per_minute.max(1.0),
            Duration::from_secs(60),
            MAX_TRACKED_SOURCES,
        ))
    }

    /// Takes a token for `source`; false when its bucket is empty, or when the limiter
    /// remembers as many sources as it may, all of them active.
    pub fn allow(&mut self, source: std::net::IpAddr) -> bool {
        self.0
            .take_one(&crate::serve::source_key(source), Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_burst_refill_say_when_and_refuse_new_keys_when_crowded() {
        let start = Instant::now();
        let mut b: TokenBuckets<u32> = TokenBuckets::new(10.0, Duration::from_secs(60), 2);
        for _ in 0..10 {
            assert!(b.take_one(&1, start));
        }
        assert!(!b.take_one(&1, start), "the burst is spent");
        // One token back every 6 s.
        assert_eq!(b.wait(&1, 1.0, start), Some(Duration::from_secs(6)));
        assert!(b.take_one(&1, start + Duration::from_secs(6)));
        // Two keys remembered, both in use: a third is refused, not an old one forgotten.
        assert!(b.take_one(&2, start));
        assert_eq!(b.wait(&3, 1.0, start), None);
        assert!(!b.take_one(&3, start));
        // Once key 2's bucket is full again it carries nothing and makes room.
        assert!(b.take_one(&3, start + Duration::from_secs(7)));
    }
}
