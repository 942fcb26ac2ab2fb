"""Utilities shared across rlx: schedules, filters, checkpoints, errors."""
