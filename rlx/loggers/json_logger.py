"""JsonLogger: params.json once, then one JSON object per result in result.json."""
from __future__ import annotations

import json
import os
from typing import Any

from rlx.loggers.logger import Logger, json_safe

PARAMS_FILE = "params.json"
RESULT_FILE = "result.json"


def config_as_dict(config: Any) -> dict[str, Any]:
    """A trial config (AlgorithmConfig or dict) as a plain dict."""
    if config is None:
        return {}
    to_dict = getattr(config, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(config)


class JsonLogger(Logger):
    """Writes the config to `params.json` and appends each result to `result.json`
    (one JSON object per line, flushed at once so a crash loses nothing already reported).

    NaN and infinite values are written as `null`, keeping the file valid JSON.
    """

    def _init(self) -> None:
        self.update_config(self.config)
        self._file = open(os.path.join(self.logdir, RESULT_FILE), "a", encoding="utf-8")

    def update_config(self, config: Any) -> None:
        """Write `config` to params.json."""
        self.config = config
        path = os.path.join(self.logdir, PARAMS_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(json_safe(config_as_dict(config)), f, indent=2, sort_keys=True)

    def on_result(self, result: dict[str, Any]) -> None:
        """Append `result` as one line."""
        self._file.write(json.dumps(json_safe(result), allow_nan=False) + "\n")
        self._file.flush()

    def flush(self) -> None:
        """Flush result.json."""
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        """Close result.json."""
        if not self._file.closed:
            self._file.close()
