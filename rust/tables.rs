// SPDX-License-Identifier: GPL-2.0

//! The global tables: `KVec`s in statics, which are never dropped.

use kernel::prelude::*;

/// Frees a global table's buffer, at unload. The table is empty by then (its
/// users are gone), so nothing else drops under its lock.
pub(crate) fn free_table<T>(table: &mut KVec<T>) {
    *table = KVec::new();
}
