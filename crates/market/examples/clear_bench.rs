//! How fast the book clears: fills books with random orders for one GPU class and times
//! `Book::clear` with each mechanism, printing orders cleared per second (the orders the
//! clearing considered, divided by its wall time; issue 15 asks for at least 100,000). For
//! comparison it also times the rule alone (`uniform_price` or `mcafee` on the orders, with
//! their input checks), without the book's bookkeeping.
//!
//! `cargo run --release -p pog-market --example clear_bench [ORDERS] [ROUNDS]`
//! (defaults: 200,000 orders, half bids and half asks, best of 5 rounds).

use std::time::{Duration, Instant};

use pog_market::{
    mcafee, uniform_price, Book, GpuClass, Mechanism, Order, OrderId, Price, Side,
    MAX_ORDER_LIFETIME_MS,
};

/// SplitMix64: a small, seeded, reproducible generator (no dependency needed).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`, near enough for a benchmark.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// `n` random orders for `class`: bids around $2.00–$3.00 and asks around $1.80–$2.80 per
/// GPU-hour (so about half of each side trades), 1 to 8 GPU-hours each, 64 owners.
fn random_orders(n: usize, class: &GpuClass, seed: u64) -> Vec<Order> {
    let mut rng = SplitMix(seed);
    (0..n)
        .map(|i| {
            let side = if i % 2 == 0 { Side::Bid } else { Side::Ask };
            let base = if side == Side::Bid {
                2_000_000
            } else {
                1_800_000
            };
            Order::new(
                OrderId::new(format!("order-{i}")).expect("a valid id"),
                format!("{:064x}", rng.between(1, 64)),
                side,
                class.clone(),
                rng.between(1, 8),
                Price::from_micro_usd(rng.between(base, base + 1_000_000)).expect("in range"),
            )
            .expect("a valid order")
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(200_000, |a| a.parse().expect("ORDERS"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let class = GpuClass::new("H200 SXM").expect("a valid class");
    let orders = random_orders(n, &class, 0x5eed);
    let (bids, asks): (Vec<&Order>, Vec<&Order>) =
        orders.iter().partition(|o| o.side() == Side::Bid);
    println!("{n} orders (half bids, half asks), one class; best of {rounds} rounds");
    for mechanism in [Mechanism::UniformPrice, Mechanism::McAfee] {
        let mut rule_best = Duration::MAX;
        for _ in 0..rounds {
            let start = Instant::now();
            let clearing = match mechanism {
                Mechanism::UniformPrice => uniform_price(&bids, &asks),
                Mechanism::McAfee => mcafee(&bids, &asks),
            };
            rule_best = rule_best.min(start.elapsed());
            clearing.expect("one class, sides right, ids distinct");
        }
        let mut best = Duration::MAX;
        let mut submit_best = Duration::MAX;
        let mut last = None;
        for _ in 0..rounds {
            let mut book = Book::new([class.clone()]);
            let start = Instant::now();
            for order in orders.iter().cloned() {
                book.submit(order, MAX_ORDER_LIFETIME_MS, 0)
                    .expect("accepted");
            }
            submit_best = submit_best.min(start.elapsed());
            let start = Instant::now();
            let record = book.clear(&class, mechanism, 0).expect("a traded class");
            best = best.min(start.elapsed());
            last = Some((
                record.clearing.units,
                record.clearing.trades.len(),
                book.len(),
            ));
        }
        let (units, trades, left) = last.expect("at least one round");
        let per_second = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "{mechanism:>13}: book clear {:>7.1} ms = {:>9.0} orders/s ({units} GPU-hours in \
             {trades} trades, {left} orders left open); rule alone {:>9.0} orders/s; submit \
             {:>9.0} orders/s",
            best.as_secs_f64() * 1e3,
            per_second(best),
            per_second(rule_best),
            per_second(submit_best),
        );
    }
}
