"""`rlx export CHECKPOINT --format onnx|torchscript`: write a checkpoint's policy as a model file
that runs without rlx (TorchScript for `torch.jit.load`, ONNX for onnxruntime), with the
`export_info.json` that names its inputs and outputs (see rlx.env.policy_export)."""
from __future__ import annotations

import argparse
from pathlib import Path

from rlx.cli.env_source import import_modules, rebuild_env_source
from rlx.cli.evaluate import read_checkpoint_metadata
from rlx.env.policy_export import DEFAULT_ONNX_OPSET
from rlx.policy.policy import Policy
from rlx.utils.errors import CheckpointError

#: Where `rlx export` writes unless --out says otherwise (relative to the current directory).
DEFAULT_OUT = "exported_model"


def run_export_command(args: argparse.Namespace) -> int:
    """Run `rlx export` with parsed arguments; prints the written files, returns the exit status."""
    meta = read_checkpoint_metadata(args.checkpoint)
    import_modules(list(args.imports or []))
    rebuild_env_source(meta, args.checkpoint)
    stored = meta.get("policy_ids") or ["default_policy"]
    if args.policy_id not in stored:
        raise CheckpointError(f"Checkpoint {args.checkpoint} has no policy {args.policy_id!r}; it has "
                              f"{', '.join(stored)} (pass one with --policy-id).")
    policy = Policy.from_checkpoint(args.checkpoint, policy_ids=[args.policy_id])[args.policy_id]
    out = Path(args.out)
    onnx = (args.opset or DEFAULT_ONNX_OPSET) if args.format == "onnx" else None
    policy.export_model(str(out), onnx=onnx)
    name = "model.onnx" if onnx else "model.pt"
    print(f"Exported policy {args.policy_id!r} of {args.checkpoint} as {args.format}: {out / name} "
          f"(inputs and outputs: {out / 'export_info.json'})")
    return 0
