"""The version of rlx (re-exported as `rlx.__version__`; written into checkpoints)."""

__version__ = "0.1.0"
