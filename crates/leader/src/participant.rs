//! Who takes part in an election, as Curator's `Participant`.

/// One contender of an election, read from its node: Curator's `Participant`.
///
/// The id is the node's data as UTF-8 (invalid bytes replaced), as Curator reads it; a Curator
/// latch without an id has an empty one, a selector without an id shows its host address.
///
/// ```no_run
/// # async fn demo(latch: zk_recipes_leader::LeaderLatch) -> zk_recipes_leader::Result<()> {
/// for participant in latch.participants().await? {
///     println!("{} leader={} ({})", participant.id, participant.is_leader, participant.node_path);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Participant {
    /// The participant's id (its node's data as UTF-8).
    pub id: String,
    /// Whether its node sorts first: by definition the leader (or the one about to lead).
    pub is_leader: bool,
    /// The full path of its node.
    pub node_path: String,
}

/// Participants from `(path, data)` pairs in election order (the first leads).
pub(crate) fn from_nodes(nodes: Vec<(String, Vec<u8>)>) -> Vec<Participant> {
    nodes
        .into_iter()
        .enumerate()
        .map(|(index, (node_path, data))| Participant { id: id_of(&data), is_leader: index == 0, node_path })
        .collect()
}

/// A participant's id from its node's data: UTF-8, invalid bytes replaced (as Curator reads it).
pub(crate) fn id_of(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_node_leads_and_ids_are_utf8() {
        let participants = from_nodes(vec![
            ("/e/_c_a-latch-0000000001".into(), b"alpha".to_vec()),
            ("/e/_c_b-latch-0000000002".into(), vec![0xff, b'b']),
            ("/e/_c_c-latch-0000000003".into(), Vec::new()),
        ]);
        assert_eq!(participants.len(), 3);
        assert!(participants[0].is_leader);
        assert_eq!(participants[0].id, "alpha");
        assert!(!participants[1].is_leader);
        assert_eq!(participants[1].id, "\u{fffd}b");
        assert_eq!(participants[2].id, "");
        assert!(from_nodes(Vec::new()).is_empty());
    }
}
