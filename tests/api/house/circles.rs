//! Circles between the submodules of any module, at any depth: the graph
//! of their imports and its strongly connected groups.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::module_of;
use super::scan::Import;

/// Submodule circles inside every module with children, at any depth:
/// the graph of imports between `p::a` and `p::b` (files of `p::a/**`
/// count as `p::a`; `p`'s own items are left out, since every child may
/// use its parent, and so is `p`'s own file using its children). An
/// import belongs to the module where the importer's path and the
/// target's part: `crate::explore::run` imported in `src/explore/strike.rs`
/// is an edge `strike -> run` inside `explore`.
pub(super) fn circles(src: &Path, imports: &[Import]) -> Vec<String> {
    let root = src.parent().expect("src has a parent");
    let mut edges: BTreeMap<(String, String, String), Vec<&Import>> = BTreeMap::new();
    for import in imports {
        let Some(from) = module_of(src, &root.join(&import.file)) else {
            continue;
        };
        let to = &import.target;
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        let (Some(from_child), Some(to_child)) = (from.get(common), to.get(common)) else {
            continue;
        };
        let parent = &from[..common];
        let folder = parent
            .iter()
            .fold(src.to_path_buf(), |dir, part| dir.join(part));
        let is_child = folder.join(format!("{to_child}.rs")).is_file()
            || folder.join(to_child).join("mod.rs").is_file();
        // (The top level's order is the numbered list's rule.)
        if common == 0 || !is_child {
            continue;
        }
        edges
            .entry((parent.join("::"), from_child.clone(), to_child.clone()))
            .or_default()
            .push(import);
    }
    let mut found = Vec::new();
    let parents: BTreeSet<&String> = edges.keys().map(|(parent, _, _)| parent).collect();
    for top in parents {
        let graph: BTreeMap<&str, Vec<&str>> = edges.keys().filter(|(t, _, _)| t == top).fold(
            BTreeMap::new(),
            |mut graph, (_, from, to)| {
                graph.entry(from.as_str()).or_default().push(to.as_str());
                graph
            },
        );
        for group in strongly_connected(&graph) {
            let mut lines = vec![format!(
                "a circle inside `{top}`: {}",
                group
                    .iter()
                    .map(|n| format!("{top}::{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )];
            for ((_, from, to), sites) in edges.iter().filter(|((t, from, to), _)| {
                t == top && group.contains(&from.as_str()) && group.contains(&to.as_str())
            }) {
                for site in sites {
                    lines.push(format!(
                        "  {}:{}: `{}` ({from} -> {to})",
                        site.file, site.line, site.written
                    ));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    found
}

/// The groups of two or more nodes that reach each other (Tarjan's SCCs).
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'g> {
        graph: &'g BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        groups: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            for &next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let from = self.stack.iter().rposition(|&n| n == node).unwrap();
                let mut group = self.stack.split_off(from);
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        groups: Vec::new(),
    };
    for &node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.groups
}
