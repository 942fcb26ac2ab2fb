"""Env registration under its old path: `rlx.env.registry` is `rlx.utils.registry` itself.

The name registry (env creators, ModelCatalog's tables, `import_object`) lives in the bottom
layer, `rlx.utils.registry`, so that every layer can reach it. This module makes the old name
the same module object, so `register_env`, `make_env_creator`, `registry_snapshot` and the
registry's state read and write the same tables whichever path imported them.
"""
import sys

from rlx.utils import registry as _registry

sys.modules[__name__] = _registry
