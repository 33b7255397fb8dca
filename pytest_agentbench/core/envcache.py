"""A content-keyed cache of post-setup environments, so a re-run skips its setup.

Setup installs into the attempt's env dir (mounted at /env). After a successful, clean setup that
directory is copied to `<root>/<key>/`; the next attempt with the same key copies it back instead
of running the setup commands. The key covers everything that decides the result: the setup
commands, the network policy, the resolved repo commit, the runner image id and the layout
version. Never the run id. (SWE-bench's env/instance images are the model; a directory copy
is the same idea without an image build.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from pytest_agentbench.paths.trees import copy_tree

LAYOUT_VERSION = 1


def cache_key(commands: list[str], network_policy: str, commit: str, image_id: str) -> str:
    blob = json.dumps(
        {
            "commands": commands,
            "network": network_policy,
            "commit": commit,
            "image": image_id,
            "layout": LAYOUT_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class EnvCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def restore(self, key: str, env_dir: Path) -> bool:
        """Fill env_dir from the snapshot; False when there is none."""
        snap = self.root / key
        if not (snap / ".complete").is_file():
            return False
        copy_tree(snap, env_dir)
        (env_dir / ".complete").unlink(missing_ok=True)
        return True

    def save(self, key: str, env_dir: Path) -> None:
        """Publish env_dir atomically; a concurrent worker's identical snapshot wins the race."""
        final = self.root / key
        if final.exists():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{key}.{uuid.uuid4().hex[:8]}"
        copy_tree(env_dir, tmp)
        (tmp / ".complete").write_text("1\n")
        try:
            os.rename(tmp, final)
        except OSError:  # someone else published first
            shutil.rmtree(tmp, ignore_errors=True)

