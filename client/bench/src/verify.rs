//! The data every target holds, generated from a seed so each read can be checked: the
//! BLAKE3 of the bytes read must equal the BLAKE3 of the bytes written at that place.

use std::sync::atomic::{AtomicBool, Ordering};

use rand::{RngCore, SeedableRng};

use crate::error::{Error, Result};

/// Test hook: with `NIMBUS_BENCH_INJECT_CORRUPTION=1`, one byte of one read is flipped before
/// it is checked, so a test can prove a wrong answer fails the run.
pub const INJECT_ENV: &str = "NIMBUS_BENCH_INJECT_CORRUPTION";

static INJECTED: AtomicBool = AtomicBool::new(false);

/// The content of one data set: a large file and small files of each size the job reads.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub large: Vec<u8>,
    /// (file size, contents of each file).
    pub small: Vec<(u64, Vec<Vec<u8>>)>,
}

impl Dataset {
    pub fn generate(seed: u64, file_size: u64, small_sizes: &[u64], small_files: u64) -> Self {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut large = vec![0u8; file_size as usize];
        rng.fill_bytes(&mut large);
        let small = small_sizes
            .iter()
            .map(|&size| {
                let files = (0..small_files)
                    .map(|_| {
                        let mut f = vec![0u8; size as usize];
                        rng.fill_bytes(&mut f);
                        f
                    })
                    .collect();
                (size, files)
            })
            .collect();
        Dataset { large, small }
    }

    pub fn small_files(&self, size: u64) -> Option<&[Vec<u8>]> {
        self.small.iter().find(|(s, _)| *s == size).map(|(_, f)| f.as_slice())
    }
}

/// Name of small file `i` of `size` bytes, relative to the data folder.
pub fn small_name(size: u64, i: u64) -> String {
    format!("small-{size}/f{i:06}")
}

pub const LARGE_NAME: &str = "large.bin";

/// Checks `got` against `expected`; `what` names the read in the error.
pub fn check(target: &str, what: impl FnOnce() -> String, expected: &[u8], got: &mut [u8]) -> Result<()> {
    if std::env::var_os(INJECT_ENV).is_some_and(|v| v == "1")
        && !got.is_empty()
        && !INJECTED.swap(true, Ordering::SeqCst)
    {
        got[0] ^= 0xff;
    }
    let want = blake3::hash(expected);
    let have = blake3::hash(got);
    if want == have {
        Ok(())
    } else {
        Err(Error::Verify {
            target: target.into(),
            what: what(),
            got: have.to_hex().to_string(),
            expected: want.to_hex().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_data_and_mismatch_is_caught() {
        let a = Dataset::generate(3, 10_000, &[4096], 3);
        let b = Dataset::generate(3, 10_000, &[4096], 3);
        let c = Dataset::generate(4, 10_000, &[4096], 3);
        assert_eq!(a.large, b.large);
        assert_ne!(a.large, c.large);
        assert_eq!(a.small_files(4096).map(<[_]>::len), Some(3));
        let mut good = a.large[100..200].to_vec();
        assert!(check("disk", || "x".into(), &a.large[100..200], &mut good).is_ok());
        let mut bad = good.clone();
        bad[5] ^= 1;
        let err = check("disk", || "large.bin @100".into(), &a.large[100..200], &mut bad).expect_err("mismatch");
        assert!(err.to_string().contains("large.bin @100"), "{err}");
    }
}
