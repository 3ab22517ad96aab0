"""Policy files that passed `read_contract`'s full check, remembered by their bytes, so that reading the
same file again needs no onnx: importing onnx costs about 0.4 s of CPU (ml_dtypes nearly all of it),
a fifth of the policy node's start.

A verdict is the file <folder>/<key>.json, holding the metadata read from the policy; <key> is the
SHA-256 of the policy file's bytes together with the onnx and protobuf versions and the source of this
package (`checks_identity`): the same bytes under the same checks, which would pass again with the same
metadata. Only a file that is exactly the model that was checked is remembered (its bytes are the
model's own serialization: nothing read from beside it, no external data).

onnxruntime, which opens the policy anyway, is no substitute for the check: it opens models that
onnx's checker refuses, e.g. one with a metadata key twice (two contracts in one file), or an IR 3
graph with an initializer missing from its inputs.
"""
import functools
import hashlib
import json
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Dict, Optional, Union

from bcg.atomic_file import write_text_atomic

from .cache import cache_dir

FOLDER_NAME = "checked_policies"
"""The verdicts' folder in the cache folder (`cache.cache_dir`)."""
CHECKERS = ("onnx", "protobuf")
"""The distributions whose versions decide what the full check parses and refuses."""


@functools.lru_cache(maxsize=1)
def checks_identity() -> bytes:
    """What a verdict holds under: the CHECKERS' versions and the source of this package (the graph
    check and the contract's reading are in it): a change of either leaves every verdict unused."""
    identity = hashlib.sha256()
    for name in CHECKERS:
        try:
            identity.update(f"{name}=={package_metadata.version(name)}\n".encode())
        except package_metadata.PackageNotFoundError:
            identity.update(f"{name} absent\n".encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        identity.update(source.name.encode() + b"\n" + source.read_bytes())
    return identity.digest()


class CheckedPolicies:
    """The verdicts in `folder` (default: `FOLDER_NAME` in the cache folder)."""

    def __init__(self, folder: Optional[Union[str, Path]] = None):
        self.folder = Path(folder) if folder else cache_dir() / FOLDER_NAME

    def path(self, data: bytes) -> Path:
        """The verdict file of a policy file whose bytes are `data`."""
        return self.folder / f"{hashlib.sha256(checks_identity() + data).hexdigest()}.json"

    def metadata(self, data: bytes) -> Optional[Dict[str, str]]:
        """The metadata of the policy file with these bytes when it passed the check before, else None
        (no verdict, or one that cannot be read: the file is then checked in full)."""
        try:
            doc = json.loads(self.path(data).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            return None
        return meta

    def remember(self, data: bytes, metadata: Dict[str, str]) -> None:
        """Record that the policy file with these bytes passed, with this metadata. A folder that cannot
        be written is no error: the file is checked in full again next time."""
        try:
            write_text_atomic(self.path(data), json.dumps({"metadata": metadata}, sort_keys=True))
        except OSError:
            pass
