"""Upkeep of the lake: garbage collection and its retention rules, fsck, refs dumps."""
