"""Data on disk and in memory: the RecordIO format and batch readers with shuffling and
background prefetch. Imports nothing of ours above `backend`."""
