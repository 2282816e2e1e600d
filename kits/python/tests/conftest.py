"""Test setup: the generated synapse.v1 modules and the vectors.

The kit ships no generated code, so the tests generate proto/synapse/v1 into
tests/.gen with grpc_tools (the same command the README gives users) unless
synapse.v1 is importable already. SYNAPSE_PROTO and SYNAPSE_VECTORS override
where proto/ and test/vectors are (default: this repository's)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROTO = Path(os.environ.get("SYNAPSE_PROTO", ROOT / "proto"))
VECTORS = Path(os.environ.get("SYNAPSE_VECTORS", ROOT / "test" / "vectors"))


def _generate() -> None:
    try:
        importlib.import_module("synapse.v1.confidential_pb2")
        return
    except ImportError:
        pass
    from grpc_tools import protoc

    out = HERE / ".gen"
    out.mkdir(exist_ok=True)
    files = sorted(str(p) for p in (PROTO / "synapse" / "v1").glob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    if protoc.main(["grpc_tools.protoc", f"-I{PROTO}", f"-I{include}", f"--python_out={out}", *files]) != 0:
        raise RuntimeError(f"could not generate the stubs from {PROTO}")
    sys.path.insert(0, str(out))
    importlib.invalidate_caches()


_generate()


@pytest.fixture(scope="session")
def vectors() -> Path:
    """The directory of the language-neutral vectors."""
    if not (VECTORS / "envelopes.json").is_file():
        pytest.fail(f"no vectors in {VECTORS} (set SYNAPSE_VECTORS)")
    return VECTORS
