//! The checks a topology file passes before anything uses it: broker names
//! valid and distinct, links between known and distinct brokers with a cost
//! of at least 1, each pair linked once, and variants that remove only
//! existing links and add only new ones.

use std::collections::HashMap;

use sift_net::BROKER_NAME_BYTES_MAX;

use super::{TopologyError, TopologyFile, TopologyLink};

/// Checks every rule, reporting the first broken one.
pub(super) fn check(file: &TopologyFile) -> Result<(), TopologyError> {
    let known = check_brokers(file)?;
    let mut linked = LinkedPairs::default();
    for (position, link) in file.links.iter().enumerate() {
        linked.add(&known, link, format!("links entry {}", position + 1))?;
    }
    for (name, variant) in &file.variants {
        let mut changed = linked.clone();
        for (position, removed) in variant.remove.iter().enumerate() {
            let place = format!("variant {name:?}, remove entry {}", position + 1);
            changed.remove(&known, &removed.between, place)?;
        }
        for (position, link) in variant.add.iter().enumerate() {
            changed.add(&known, link, format!("variant {name:?}, add entry {}", position + 1))?;
        }
    }
    Ok(())
}

/// Checks the brokers and returns each name with the place it is listed at.
fn check_brokers(file: &TopologyFile) -> Result<HashMap<&str, String>, TopologyError> {
    if file.brokers.is_empty() {
        return Err(TopologyError::NoBrokers);
    }
    let mut known: HashMap<&str, String> = HashMap::new();
    for (position, broker) in file.brokers.iter().enumerate() {
        let place = format!("brokers entry {}", position + 1);
        let name = broker.name.as_str();
        if name.is_empty() || name.len() > BROKER_NAME_BYTES_MAX {
            return Err(TopologyError::BadBrokerName { place, name: name.to_string() });
        }
        if let Some(first) = known.get(name) {
            return Err(TopologyError::DuplicateBroker { name: name.to_string(), first: first.clone(), second: place });
        }
        known.insert(name, place);
    }
    Ok(known)
}

/// The pairs linked so far, each (smaller name, larger name) with the place
/// of its link, so that a pair given twice in either order is caught.
#[derive(Debug, Clone, Default)]
struct LinkedPairs {
    places: HashMap<(String, String), String>,
}

impl LinkedPairs {
    /// Checks `link` against the known brokers and the pairs linked so far,
    /// then records it.
    fn add(&mut self, known: &HashMap<&str, String>, link: &TopologyLink, place: String) -> Result<(), TopologyError> {
        let pair = check_ends(known, &link.between, &place)?;
        let [left, right] = link.between.clone();
        if link.cost == 0 {
            return Err(TopologyError::ZeroCost { place, left, right });
        }
        if let Some(first) = self.places.get(&pair) {
            return Err(TopologyError::DuplicateLink { place, first: first.clone(), left, right });
        }
        self.places.insert(pair, place);
        Ok(())
    }

    /// Checks that `between` is a recorded pair, then forgets it.
    fn remove(
        &mut self,
        known: &HashMap<&str, String>,
        between: &[String; 2],
        place: String,
    ) -> Result<(), TopologyError> {
        let pair = check_ends(known, between, &place)?;
        if self.places.remove(&pair).is_none() {
            let [left, right] = between.clone();
            return Err(TopologyError::NotALink { place, left, right });
        }
        Ok(())
    }
}

/// Checks that both ends are known and distinct; returns them in name order.
fn check_ends(
    known: &HashMap<&str, String>,
    between: &[String; 2],
    place: &str,
) -> Result<(String, String), TopologyError> {
    for name in between {
        if !known.contains_key(name.as_str()) {
            return Err(TopologyError::UnknownBroker { place: place.to_string(), name: name.clone() });
        }
    }
    let [left, right] = between.clone();
    if left == right {
        return Err(TopologyError::SelfLink { place: place.to_string(), name: left });
    }
    Ok(if left < right { (left, right) } else { (right, left) })
}
