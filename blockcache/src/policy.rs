//! S3-FIFO admission and eviction (Yang et al., "FIFO queues are all you need for cache
//! eviction", SOSP 2023), weighted by bytes.
//!
//! New entries go to a small FIFO (10% of the capacity). An entry read again while there is
//! promoted to the main FIFO when it reaches the head; one that was not is evicted and its key
//! remembered in a ghost FIFO, so if it comes back soon it goes straight to main. A large
//! sequential scan therefore passes through the small queue only and cannot flush the hot set
//! in main. The byte bound is strict: `insert` evicts before it admits, and refuses entries
//! larger than the whole cache.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

/// Reads after which an entry survives one more pass through main (as in the paper).
const MAX_FREQ: u8 = 3;
/// Share of the capacity for the small FIFO, in percent.
const SMALL_PERCENT: u64 = 10;
/// Ghost keys remembered at most (they cost a key each, no data).
const MAX_GHOSTS: usize = 200_000;

#[derive(Debug)]
struct Slot {
    weight: u64,
    freq: u8,
    in_main: bool,
    generation: u64,
}

#[derive(Debug)]
pub struct S3Fifo<K> {
    capacity: u64,
    small_capacity: u64,
    small: VecDeque<(K, u64)>,
    main: VecDeque<(K, u64)>,
    slots: HashMap<K, Slot>,
    small_bytes: u64,
    main_bytes: u64,
    ghosts: VecDeque<K>,
    ghost_set: HashSet<K>,
    next_generation: u64,
}

/// What `insert` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission<K> {
    /// Admitted; these keys were evicted to make room (the caller drops their data).
    Admitted(Vec<K>),
    /// Already present.
    Present,
    /// Larger than the whole cache.
    TooLarge,
}

impl<K: Hash + Eq + Clone> S3Fifo<K> {
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            small_capacity: capacity * SMALL_PERCENT / 100,
            small: VecDeque::new(),
            main: VecDeque::new(),
            slots: HashMap::new(),
            small_bytes: 0,
            main_bytes: 0,
            ghosts: VecDeque::new(),
            ghost_set: HashSet::new(),
            next_generation: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn used(&self) -> u64 {
        self.small_bytes + self.main_bytes
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.slots.contains_key(key)
    }

    /// Records a read; returns whether the key is present.
    pub fn touch(&mut self, key: &K) -> bool {
        match self.slots.get_mut(key) {
            Some(s) => {
                s.freq = (s.freq + 1).min(MAX_FREQ);
                true
            }
            None => false,
        }
    }

    pub fn insert(&mut self, key: K, weight: u64) -> Admission<K> {
        if self.slots.contains_key(&key) {
            self.touch(&key);
            return Admission::Present;
        }
        if weight > self.capacity {
            return Admission::TooLarge;
        }
        let mut evicted = Vec::new();
        while self.used() + weight > self.capacity {
            match self.evict_one() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        let to_main = self.ghost_set.remove(&key);
        if to_main {
            self.main.push_back((key.clone(), generation));
            self.main_bytes += weight;
        } else {
            self.small.push_back((key.clone(), generation));
            self.small_bytes += weight;
        }
        self.slots.insert(key, Slot { weight, freq: 0, in_main: to_main, generation });
        Admission::Admitted(evicted)
    }

    /// Removes an entry (dropped as corrupt, purged, ...). Returns its weight.
    pub fn remove(&mut self, key: &K) -> Option<u64> {
        let slot = self.slots.remove(key)?;
        if slot.in_main {
            self.main_bytes -= slot.weight;
        } else {
            self.small_bytes -= slot.weight;
        }
        // Its queue position goes stale and is skipped when reached.
        Some(slot.weight)
    }

    pub fn clear(&mut self) -> Vec<K> {
        let keys: Vec<K> = self.slots.keys().cloned().collect();
        *self = Self::new(self.capacity);
        keys
    }

    fn is_live(&self, key: &K, generation: u64, main: bool) -> bool {
        self.slots.get(key).is_some_and(|s| s.generation == generation && s.in_main == main)
    }

    fn remember_ghost(&mut self, key: K) {
        if self.ghost_set.insert(key.clone()) {
            self.ghosts.push_back(key);
        }
        while self.ghosts.len() > MAX_GHOSTS.min(self.slots.len().max(64) * 2) {
            if let Some(old) = self.ghosts.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }

    fn evict_one(&mut self) -> Option<K> {
        loop {
            let from_small = self.small_bytes > self.small_capacity || self.main_bytes == 0;
            if from_small {
                let (key, generation) = self.small.pop_front()?;
                if !self.is_live(&key, generation, false) {
                    continue;
                }
                let slot = self.slots.get_mut(&key)?;
                if slot.freq > 0 {
                    // Read while on probation: it earns a place in main.
                    slot.freq = 0;
                    slot.in_main = true;
                    let w = slot.weight;
                    self.small_bytes -= w;
                    self.main_bytes += w;
                    self.main.push_back((key, generation));
                    continue;
                }
                let w = self.slots.remove(&key).map_or(0, |s| s.weight);
                self.small_bytes -= w;
                self.remember_ghost(key.clone());
                return Some(key);
            }
            let (key, generation) = self.main.pop_front()?;
            if !self.is_live(&key, generation, true) {
                continue;
            }
            let slot = self.slots.get_mut(&key)?;
            if slot.freq > 0 {
                slot.freq -= 1;
                self.main.push_back((key, generation));
                continue;
            }
            let w = self.slots.remove(&key).map_or(0, |s| s.weight);
            self.main_bytes -= w;
            return Some(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_exceeds_capacity() {
        let mut c = S3Fifo::new(1000);
        for i in 0..10_000u64 {
            let w = 1 + (i * 37) % 200;
            c.insert(i, w);
            assert!(c.used() <= 1000, "used {} after inserting {i}", c.used());
            if i % 3 == 0 {
                c.touch(&(i / 2));
            }
        }
        assert_eq!(c.insert(99_999, 1001), Admission::TooLarge);
    }

    #[test]
    fn a_scan_does_not_flush_the_hot_set() {
        let mut c = S3Fifo::new(100);
        // Hot set: 50 entries, each read several times.
        for k in 0..50u64 {
            c.insert(k, 1);
        }
        for _ in 0..3 {
            for k in 0..50u64 {
                c.touch(&k);
            }
        }
        // A scan of 10,000 one-time entries.
        for k in 1000..11_000u64 {
            c.insert(k, 1);
            // The hot set keeps being read now and then.
            if k % 50 == 0 {
                for h in 0..50u64 {
                    c.touch(&h);
                }
            }
        }
        let hot_left = (0..50u64).filter(|k| c.contains(k)).count();
        assert!(hot_left >= 45, "only {hot_left} of 50 hot entries survived the scan");
    }

    #[test]
    fn remove_and_clear_keep_accounting_right() {
        let mut c = S3Fifo::new(100);
        c.insert("a", 30);
        c.insert("b", 30);
        assert_eq!(c.remove(&"a"), Some(30));
        assert_eq!(c.used(), 30);
        c.insert("a", 30);
        assert_eq!(c.used(), 60);
        let mut keys = c.clear();
        keys.sort();
        assert_eq!(keys, vec!["a", "b"]);
        assert_eq!(c.used(), 0);
    }

    #[test]
    fn ghost_hits_go_to_main() {
        let mut c = S3Fifo::new(10);
        c.insert(1u32, 5);
        c.insert(2, 5);
        c.insert(3, 5); // evicts 1 (never read) into the ghosts
        assert!(!c.contains(&1));
        c.insert(1, 5);
        assert!(c.slots.get(&1).is_some_and(|s| s.in_main));
    }
}
