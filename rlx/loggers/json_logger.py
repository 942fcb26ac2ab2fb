"""JsonLogger: params.json once, then one JSON object per result in result.json."""
from __future__ import annotations

import json
import os
from typing import Any

from rlx.loggers.logger import Logger, close_quietly, json_safe

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

    NaN and infinite values are written as `null`, keeping the file valid JSON. A failed
    write (e.g. a full disk) logs one warning and stops the logger; training goes on.
    """

    def _init(self) -> None:
        self._file: Any = None
        self.update_config(self.config)
        with self._writing(RESULT_FILE):
            if not self.write_failed:
                self._file = open(os.path.join(self.logdir, RESULT_FILE), "a", encoding="utf-8")

    def update_config(self, config: Any) -> None:
        """Write `config` to params.json."""
        self.config = config
        if self.write_failed:
            return
        path = os.path.join(self.logdir, PARAMS_FILE)
        with self._writing(PARAMS_FILE), open(path, "w", encoding="utf-8") as f:
            json.dump(json_safe(config_as_dict(config)), f, indent=2, sort_keys=True)

    def on_result(self, result: dict[str, Any]) -> None:
        """Append `result` as one line."""
        if self._file is None:
            return
        line = json.dumps(json_safe(result), allow_nan=False) + "\n"
        with self._writing(RESULT_FILE):
            self._file.write(line)
            self._file.flush()

    def flush(self) -> None:
        """Flush result.json."""
        if self._file is not None:
            with self._writing(RESULT_FILE):
                self._file.flush()

    def close(self) -> None:
        """Close result.json."""
        if self._file is not None:
            with self._writing(RESULT_FILE):
                self._file.close()
            self._file = None

    def _discard(self) -> None:
        file, self._file = self._file, None
        close_quietly(file)
