"""Start-up cost: seconds from process start to `import rlx`, to a built PPO on
CartPole-v1, and to its first train() result. Each figure is measured in a fresh process."""
from __future__ import annotations

import json
import subprocess
import sys
import time

CHILD = """
import json, sys, time
t0 = float(sys.argv[1])
import rlx
t_import = time.time() - t0
from rlx.algorithms.ppo import PPOConfig
algo = PPOConfig().environment("CartPole-v1").build()
t_build = time.time() - t0
algo.train()
t_first = time.time() - t0
print(json.dumps({"import_rlx_s": round(t_import, 3), "build_s": round(t_build, 3), "first_result_s": round(t_first, 3)}))
"""

BASELINE = """
import json, sys, time
t0 = float(sys.argv[1])
import torch
print(json.dumps({"import_torch_s": round(time.time() - t0, 3)}))
"""


def measure(code: str) -> dict:
    """Run `code` in a new interpreter, handing it the wall time just before the spawn."""
    out = subprocess.run([sys.executable, "-c", code, repr(time.time())], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rlx_runs = [measure(CHILD) for _ in range(runs)]
    torch_runs = [measure(BASELINE) for _ in range(runs)]
    best = {k: min(r[k] for r in rlx_runs) for k in rlx_runs[0]}
    best["import_torch_s"] = min(r["import_torch_s"] for r in torch_runs)
    print(json.dumps({"benchmark": "startup", "runs": runs, "best": best, "all": rlx_runs}))


if __name__ == "__main__":
    main()
