"""`rlx hub push CHECKPOINT REPO_ID` and `rlx hub download REPO_ID`: share checkpoints on the
Hugging Face Hub (needs the `huggingface_hub` package, the `hub` extra; see rlx.utils.hub)."""
from __future__ import annotations

import argparse

from rlx.cli.evaluate import read_checkpoint_metadata
from rlx.utils.hub import download_checkpoint, push_checkpoint


def run_hub_command(args: argparse.Namespace) -> int:
    """Run `rlx hub push` / `rlx hub download` with parsed arguments; returns the exit status."""
    if args.hub_command == "push":
        read_checkpoint_metadata(args.checkpoint)  # names the checkpoints inside a trial directory
        url = push_checkpoint(args.checkpoint, args.repo_id, token=args.token, private=args.private or None,
                              commit_message=args.message)
        print(f"Pushed {args.checkpoint} to {url}")
        return 0
    folder = download_checkpoint(args.repo_id, revision=args.revision, token=args.token, local_dir=args.out)
    print(f"Downloaded {args.repo_id} to {folder} (load it with Algorithm.from_checkpoint or rlx evaluate)")
    return 0
