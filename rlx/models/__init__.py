"""Model configuration defaults, observation preprocessors and the old API's custom models
(RLlib's `ray.rllib.models` path): `ModelCatalog`, `ModelV2`, `MODEL_DEFAULTS`.

PyTorch model classes are at RLlib's paths in `rlx.models.torch`. This package is the old API's
compat layer: ModelCatalog is a facade, and the models, the model builder and ModelV2RLModule live
in the core (`rlx.core.models.v2`, `rlx.core.modelv2`), which the other modules here re-export.
Importing this package imports torch (the models ModelCatalog builds are torch modules);
`import rlx` and the algorithm configs do not import it."""
from rlx.models.catalog import ModelCatalog
from rlx.models.model_defaults import MODEL_DEFAULTS
from rlx.models.modelv2 import ModelV2

__all__ = ["MODEL_DEFAULTS", "ModelCatalog", "ModelV2"]
