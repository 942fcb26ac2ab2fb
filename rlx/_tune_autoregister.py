"""The Tune auto-register hook under its old path: `rlx._tune_autoregister` is
`rlx.utils.import_hooks` itself (the same module object, so its state is shared)."""
import sys

from rlx.utils import import_hooks as _import_hooks

sys.modules[__name__] = _import_hooks
