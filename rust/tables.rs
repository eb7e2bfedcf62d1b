// SPDX-License-Identifier: GPL-2.0

//! The global tables: `KVec`s and red-black trees in statics, which are
//! never dropped, and the walks and sort their users share.

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

/// Sorts `v` in place (heapsort: O(n log n), no allocation). core's slice
/// sorts end in a panic objtool does not know never returns, so it warns
/// that they fall through into the next function.
pub(crate) fn sort<T: Ord>(v: &mut [T]) {
    let len = v.len();
    for root in (0..len / 2).rev() {
        sift_down(v, root, len);
    }
    for end in (1..len).rev() {
        v.swap(0, end);
        sift_down(v, 0, end);
    }
}

/// Moves `v[root]` down the max-heap in `v[..len]` until its children are
/// no greater.
fn sift_down<T: Ord>(v: &mut [T], mut root: usize, len: usize) {
    loop {
        let mut child = 2 * root + 1;
        if child >= len {
            return;
        }
        if child + 1 < len && v[child] < v[child + 1] {
            child += 1;
        }
        if v[root] >= v[child] {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}

#[kunit_tests(rrds_tables)]
mod tests {
    use super::*;

    #[test]
    fn sort_orders_any_input_and_keeps_every_element() -> Result {
        // Empty, one, sorted, reversed, duplicates, and pseudo-random runs of
        // every length up to 40 (heapsort's shape depends on the length).
        let mut seed = 0x2545_f491u32;
        for len in 0..40u32 {
            for pattern in 0..4u32 {
                let mut v = KVec::new();
                for i in 0..len {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let x = match pattern {
                        0 => i,
                        1 => len - i,
                        2 => i % 3,
                        _ => seed >> 16,
                    };
                    v.push(x, GFP_KERNEL)?;
                }
                let sum: u64 = v.iter().map(|&x| u64::from(x)).sum();
                let xor = v.iter().fold(0u32, |a, &x| a ^ x.rotate_left(x % 32));
                sort(&mut v);
                assert!(v.windows(2).all(|w| w[0] <= w[1]));
                assert_eq!(v.len(), len as usize);
                assert_eq!(v.iter().map(|&x| u64::from(x)).sum::<u64>(), sum);
                assert_eq!(v.iter().fold(0u32, |a, &x| a ^ x.rotate_left(x % 32)), xor);
            }
        }
        Ok(())
    }
}
