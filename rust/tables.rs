// SPDX-License-Identifier: GPL-2.0

//! The global tables: `KVec`s and red-black trees in statics, which are
//! never dropped.

use kernel::{
    prelude::*,
    rbtree::{
        CursorMut,
        RBTree, //
    },
};

/// Frees a global table's buffer, at unload. The table is empty by then (its
/// users are gone), so nothing else drops under its lock.
pub(crate) fn free_table<T>(table: &mut KVec<T>) {
    *table = KVec::new();
}

/// Removes, from the key `from` on and while `within` holds of the key, the
/// entries for which `keep` returns false, dropping them under the caller's
/// lock. A namespace's entries are one range of each tree keyed by
/// namespace first.
pub(crate) fn retain_range<K: Ord + Copy, V>(
    tree: &mut RBTree<K, V>,
    from: Option<&K>,
    within: impl Fn(&K) -> bool,
    mut keep: impl FnMut(&K, &mut V) -> bool,
) {
    let mut cursor = match from {
        Some(from) => tree.cursor_lower_bound_mut(from),
        None => tree.cursor_front_mut(),
    };
    while let Some(mut c) = cursor {
        let (key, value) = c.current_mut();
        if !within(key) {
            break;
        }
        if keep(key, value) {
            cursor = c.move_next();
            continue;
        }
        let key = *key;
        let (next, removed) = c.remove_current();
        drop(removed);
        // `remove_current` moves back when it removed the last node.
        cursor = next.filter(|c: &CursorMut<'_, K, V>| *c.current().0 > key);
    }
}
