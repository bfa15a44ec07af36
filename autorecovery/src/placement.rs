//! Where a copy of a lost fragment goes: `replaceBookie` of the ensemble placement policy the
//! configuration names (`ensemblePlacementPolicy`, Java's default
//! `RackawareEnsemblePlacementPolicy`). Only writable bookies are candidates, never one already
//! in the ensemble or one excluded (the lost bookies, the targets chosen for the fragment).
//!
//! Rack-aware, as Java: a bookie in the replaced bookie's rack; else one in a rack the rest of
//! the ensemble does not use; else any (unless `enforceMinNumRacksPerWriteQuorum`). Racks come
//! from Pulsar's `/bookies` znode when `reppDnsResolverClass` is Pulsar's mapping; a bookie with
//! no rack is in `/default-rack` (so with no rack data the choice is random, as in Java).
//! Default policy: any candidate at random.

use std::collections::{BTreeMap, BTreeSet};

pub const DEFAULT_RACK: &str = "/default-rack";

/// A small deterministic generator (xorshift64*), so a simulated run replays.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }

    fn pick<'a>(&mut self, v: &[&'a String]) -> Option<&'a String> {
        (!v.is_empty()).then(|| v[self.below(v.len())])
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `DefaultEnsemblePlacementPolicy`.
    Random,
    /// `RackawareEnsemblePlacementPolicy` (and the region/zone-aware ones, whose rack step
    /// this is).
    RackAware { enforce_min_racks: bool },
}

impl Policy {
    /// The policy a class name of `ensemblePlacementPolicy` means.
    pub fn from_class(class: Option<&str>, enforce_min_racks: bool) -> Policy {
        match class.map(str::trim) {
            Some(c) if c.ends_with(".DefaultEnsemblePlacementPolicy") => Policy::Random,
            _ => Policy::RackAware { enforce_min_racks },
        }
    }
}

#[derive(Clone, Debug)]
pub struct Placement {
    pub policy: Policy,
    racks: BTreeMap<String, String>,
}

impl Placement {
    pub fn new(policy: Policy, racks: Vec<(String, String)>) -> Placement {
        Placement {
            policy,
            racks: racks.into_iter().collect(),
        }
    }

    pub fn rack(&self, bookie: &str) -> &str {
        self.racks.get(bookie).map_or(DEFAULT_RACK, String::as_str)
    }

    /// A writable bookie to hold index `old`'s copies of `ensemble`'s fragment.
    pub fn replace(
        &self,
        ensemble: &[String],
        old: usize,
        excluded: &BTreeSet<String>,
        writable: &BTreeSet<String>,
        rng: &mut Rng,
    ) -> Option<String> {
        let candidates: Vec<&String> = writable
            .iter()
            .filter(|b| !ensemble.contains(b) && !excluded.contains(*b))
            .collect();
        let chosen = match &self.policy {
            Policy::Random => rng.pick(&candidates),
            Policy::RackAware { enforce_min_racks } => {
                let rack = self.rack(&ensemble[old]);
                let same: Vec<&String> = candidates
                    .iter()
                    .copied()
                    .filter(|b| self.rack(b) == rack)
                    .collect();
                let used: BTreeSet<&str> = ensemble
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != old)
                    .map(|(_, b)| self.rack(b))
                    .collect();
                let other_rack: Vec<&String> = candidates
                    .iter()
                    .copied()
                    .filter(|b| !used.contains(self.rack(b)))
                    .collect();
                rng.pick(&same)
                    .or_else(|| rng.pick(&other_rack))
                    .or_else(|| {
                        (!enforce_min_racks)
                            .then(|| rng.pick(&candidates))
                            .flatten()
                    })
            }
        };
        chosen.cloned()
    }
}

/// Pulsar's rack mapping (`BookieRackAffinityMapping`): the JSON of the `/bookies` znode,
/// `{"<group>": {"<bookie id>": {"rack": "/r1", "hostname": "…"}}}`.
pub fn parse_pulsar_racks(json: &[u8]) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(groups)) = serde_json::from_slice::<serde_json::Value>(json)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (_, bookies) in groups {
        let serde_json::Value::Object(bookies) = bookies else {
            continue;
        };
        for (id, info) in bookies {
            if let Some(rack) = info.get("rack").and_then(|r| r.as_str()) {
                let rack = if rack.starts_with('/') {
                    rack.to_string()
                } else {
                    format!("/{rack}")
                };
                out.push((id, rack));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn ens(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn never_a_member_an_excluded_or_a_read_only_bookie() {
        let p = Placement::new(Policy::Random, Vec::new());
        let mut rng = Rng::new(1);
        for _ in 0..100 {
            let got = p
                .replace(
                    &ens(&["a", "b", "c"]),
                    1,
                    &set(&["d"]),
                    &set(&["a", "c", "d", "e", "f"]),
                    &mut rng,
                )
                .unwrap();
            assert!(got == "e" || got == "f", "{got}");
        }
        assert_eq!(
            p.replace(&ens(&["a", "b"]), 0, &set(&[]), &set(&["a", "b"]), &mut rng),
            None
        );
    }

    #[test]
    fn rack_aware_prefers_the_rack_then_a_new_rack() {
        let racks = vec![
            ("a".into(), "/r1".into()),
            ("b".into(), "/r2".into()),
            ("c".into(), "/r3".into()),
            ("d".into(), "/r2".into()),
            ("e".into(), "/r1".into()),
            ("f".into(), "/r4".into()),
        ];
        let p = Placement::new(
            Policy::RackAware {
                enforce_min_racks: false,
            },
            racks,
        );
        let mut rng = Rng::new(7);
        let e = ens(&["a", "b", "c"]);
        for _ in 0..50 {
            assert_eq!(
                p.replace(&e, 1, &set(&[]), &set(&["d", "e", "f"]), &mut rng)
                    .as_deref(),
                Some("d")
            );
            // no bookie left in /r2: a rack the others do not use (/r4), not /r1
            assert_eq!(
                p.replace(&e, 1, &set(&[]), &set(&["e", "f"]), &mut rng)
                    .as_deref(),
                Some("f")
            );
        }
        assert_eq!(
            p.replace(&e, 1, &set(&[]), &set(&["e"]), &mut rng)
                .as_deref(),
            Some("e")
        );
        let strict = Placement::new(
            Policy::RackAware {
                enforce_min_racks: true,
            },
            p.racks.clone().into_iter().collect(),
        );
        assert_eq!(
            strict.replace(&e, 1, &set(&[]), &set(&["e"]), &mut rng),
            None
        );
        assert_eq!(
            Policy::from_class(
                Some("org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy"),
                false
            ),
            Policy::Random
        );
    }

    #[test]
    fn pulsars_rack_json() {
        let json = br#"{"default":{"10.0.0.1:3181":{"rack":"/rack1","hostname":"bk1"},"10.0.0.2:3181":{"rack":"rack2"}},"other":{"b:1":{"hostname":"x"}}}"#;
        let mut r = parse_pulsar_racks(json);
        r.sort();
        assert_eq!(
            r,
            vec![
                ("10.0.0.1:3181".into(), "/rack1".into()),
                ("10.0.0.2:3181".into(), "/rack2".into())
            ]
        );
        assert!(parse_pulsar_racks(b"not json").is_empty());
    }
}
