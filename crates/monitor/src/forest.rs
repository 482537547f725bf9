//! An isolation forest (Liu, Ting and Zhou, ICDM 2008): random trees that split on a random
//! feature at a random value; points unlike the training data are isolated in few splits, so
//! a short mean path means an anomaly. Deterministic for a given seed.

/// Why a forest could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForestError {
    /// No training rows.
    #[error("an isolation forest needs at least 2 training rows, got {0}")]
    TooFewRows(usize),
    /// Rows of different lengths, or no features.
    #[error("training row {row} has {got} features where the first has {expected}")]
    Ragged {
        /// Index of the offending row.
        row: usize,
        /// Its length.
        got: usize,
        /// The first row's length.
        expected: usize,
    },
    /// A NaN or infinite feature.
    #[error("training row {row}, feature {feature} is not finite")]
    NotFinite {
        /// Index of the row.
        row: usize,
        /// Index of the feature.
        feature: usize,
    },
}

/// A small deterministic generator (SplitMix64), enough for random splits.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in [0, n); `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[derive(Debug, Clone)]
enum Node {
    Leaf {
        size: usize,
    },
    Split {
        feature: usize,
        threshold: f64,
        left: usize,
        right: usize,
    },
}

#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
}

/// A trained isolation forest.
#[derive(Debug, Clone)]
pub struct IsolationForest {
    trees: Vec<Tree>,
    features: usize,
    sample_size: usize,
}

/// The average path length of an unsuccessful search in a binary search tree of `n` points:
/// the normalizer of isolation depths.
fn average_path(n: usize) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => 1.0,
        _ => {
            let n = n as f64;
            2.0 * ((n - 1.0).ln() + 0.577_215_664_901_532_9) - 2.0 * (n - 1.0) / n
        }
    }
}

impl IsolationForest {
    /// Builds `trees` trees, each on `sample_size` rows drawn without replacement (fewer when
    /// there are fewer rows), to a depth of ⌈log2 sample_size⌉.
    pub fn fit(
        rows: &[Vec<f64>],
        trees: usize,
        sample_size: usize,
        seed: u64,
    ) -> Result<IsolationForest, ForestError> {
        if rows.len() < 2 {
            return Err(ForestError::TooFewRows(rows.len()));
        }
        let features = rows[0].len();
        for (i, row) in rows.iter().enumerate() {
            if row.len() != features || features == 0 {
                return Err(ForestError::Ragged {
                    row: i,
                    got: row.len(),
                    expected: features,
                });
            }
            if let Some(f) = row.iter().position(|v| !v.is_finite()) {
                return Err(ForestError::NotFinite { row: i, feature: f });
            }
        }
        let sample_size = sample_size.clamp(2, rows.len());
        let depth_limit = (sample_size as f64).log2().ceil() as usize;
        let mut rng = SplitMix::new(seed);
        let mut built = Vec::with_capacity(trees);
        let mut all: Vec<usize> = (0..rows.len()).collect();
        for _ in 0..trees.max(1) {
            // Partial Fisher–Yates: the first sample_size entries are a random subset.
            for i in 0..sample_size {
                let j = i + rng.below(all.len() - i);
                all.swap(i, j);
            }
            let mut tree = Tree { nodes: Vec::new() };
            let picked = all[..sample_size].to_vec();
            grow(&mut tree, rows, picked, 0, depth_limit, &mut rng);
            built.push(tree);
        }
        Ok(IsolationForest {
            trees: built,
            features,
            sample_size,
        })
    }

    /// The number of features a row must have.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The anomaly score of `row` in (0, 1]: about 0.5 or less for rows like the training
    /// data, towards 1 for rows easy to isolate. A row of the wrong length scores 1.
    pub fn score(&self, row: &[f64]) -> f64 {
        if row.len() != self.features {
            return 1.0;
        }
        let mean: f64 = self
            .trees
            .iter()
            .map(|tree| path_length(tree, row))
            .sum::<f64>()
            / self.trees.len() as f64;
        2f64.powf(-mean / average_path(self.sample_size))
    }
}

fn grow(
    tree: &mut Tree,
    rows: &[Vec<f64>],
    picked: Vec<usize>,
    depth: usize,
    depth_limit: usize,
    rng: &mut SplitMix,
) -> usize {
    let index = tree.nodes.len();
    tree.nodes.push(Node::Leaf { size: picked.len() });
    if depth >= depth_limit || picked.len() <= 1 {
        return index;
    }
    let features = rows[0].len();
    let range = |f: usize| {
        picked
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &i| {
                (lo.min(rows[i][f]), hi.max(rows[i][f]))
            })
    };
    // A random feature that varies here; a leaf when none does.
    let start = rng.below(features);
    let Some((feature, lo, hi)) = (0..features)
        .map(|k| (start + k) % features)
        .map(|f| {
            let (lo, hi) = range(f);
            (f, lo, hi)
        })
        .find(|(_, lo, hi)| hi > lo)
    else {
        return index;
    };
    let threshold = lo + rng.unit() * (hi - lo);
    let (left, right): (Vec<usize>, Vec<usize>) = picked
        .into_iter()
        .partition(|&i| rows[i][feature] < threshold);
    let left = grow(tree, rows, left, depth + 1, depth_limit, rng);
    let right = grow(tree, rows, right, depth + 1, depth_limit, rng);
    tree.nodes[index] = Node::Split {
        feature,
        threshold,
        left,
        right,
    };
    index
}

fn path_length(tree: &Tree, row: &[f64]) -> f64 {
    let mut node = 0;
    let mut depth = 0.0;
    loop {
        match tree.nodes[node] {
            Node::Leaf { size } => return depth + average_path(size),
            Node::Split {
                feature,
                threshold,
                left,
                right,
            } => {
                node = if row[feature] < threshold {
                    left
                } else {
                    right
                };
                depth += 1.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(n: usize, rng: &mut SplitMix) -> Vec<Vec<f64>> {
        (0..n)
            .map(|_| vec![10.0 + rng.unit(), 20.0 + rng.unit(), 5.0 * rng.unit()])
            .collect()
    }

    #[test]
    fn outliers_score_higher_than_inliers() {
        let mut rng = SplitMix::new(7);
        let rows = cluster(500, &mut rng);
        let forest = IsolationForest::fit(&rows, 100, 256, 1).unwrap();
        let inlier = forest.score(&[10.5, 20.5, 2.5]);
        let one_feature_off = forest.score(&[14.0, 20.5, 2.5]);
        let all_off = forest.score(&[20.0, 30.0, 20.0]);
        assert!(inlier < 0.5, "inlier {inlier}");
        assert!(
            one_feature_off > inlier + 0.05,
            "{one_feature_off} vs {inlier}"
        );
        assert!(
            all_off > 0.6 && all_off > one_feature_off,
            "outlier {all_off}"
        );
        assert_eq!(forest.score(&[1.0]), 1.0);
    }

    #[test]
    fn fitting_is_deterministic_and_checks_its_input() {
        let mut rng = SplitMix::new(3);
        let rows = cluster(100, &mut rng);
        let a = IsolationForest::fit(&rows, 20, 64, 9).unwrap();
        let b = IsolationForest::fit(&rows, 20, 64, 9).unwrap();
        assert_eq!(a.score(&[11.0, 21.0, 9.0]), b.score(&[11.0, 21.0, 9.0]));
        assert_eq!(
            IsolationForest::fit(&rows[..1], 10, 8, 0).unwrap_err(),
            ForestError::TooFewRows(1)
        );
        let ragged = vec![vec![1.0, 2.0], vec![1.0]];
        assert!(matches!(
            IsolationForest::fit(&ragged, 10, 8, 0),
            Err(ForestError::Ragged { row: 1, .. })
        ));
        let nan = vec![vec![1.0], vec![f64::NAN]];
        assert!(matches!(
            IsolationForest::fit(&nan, 10, 8, 0),
            Err(ForestError::NotFinite { row: 1, feature: 0 })
        ));
    }

    #[test]
    fn constant_data_builds_leaves() {
        let rows = vec![vec![1.0, 1.0]; 10];
        let forest = IsolationForest::fit(&rows, 5, 8, 0).unwrap();
        assert!(forest.score(&[1.0, 1.0]) <= 1.0);
    }
}
