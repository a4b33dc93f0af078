//! The audit trail: every memory change and refusal is a row, bounded to
//! the newest [`MAX_AUDIT_EVENTS`] in the same transaction that adds one.

use crate::clock::now_ms;
use crate::constants::MAX_AUDIT_EVENTS;
use crate::error::{MemoryError, Result};
use crate::store::{EventRecord, StoreTx, StoredEvent};
use crate::types::{MemoryAuditAction, MemoryAuditEvent};

/// Appends an audit row and trims the trail to its cap in the same transaction.
pub(crate) fn insert_event(tx: &mut dyn StoreTx, record: &EventRecord<'_>) -> Result<()> {
    tx.append_event(now_ms(), record, MAX_AUDIT_EVENTS)
}

/// The public form of a stored audit row.
pub(crate) fn audit_event(row: StoredEvent) -> Result<MemoryAuditEvent> {
    let action = MemoryAuditAction::parse(&row.action).ok_or_else(|| MemoryError::CorruptRow {
        table: "memory_events",
        reason: format!("unknown action {:?} in row {}", row.action, row.id),
    })?;
    Ok(MemoryAuditEvent {
        id: row.id,
        at: row.at,
        memory_type: row.memory_type,
        action,
        key: row.key,
        old_value: row.old_value,
        new_value: row.new_value,
        source: row.source,
        confidence: row.confidence,
        detail: row.detail,
    })
}
