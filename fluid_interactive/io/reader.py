"""Batch readers over RecordIO files or in-memory arrays."""
