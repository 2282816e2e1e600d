"""The generated modules of proto/synapse/v1, which the user generates.

The kit ships no generated code: it imports the modules that ``grpc_tools.protoc``
or ``buf generate`` write for proto/synapse/v1 (``synapse/v1/*_pb2.py``), from
wherever they are on ``sys.path``. Protoc fixes their package to ``synapse.v1``
(the proto files' path), so there is exactly one copy in a program, the
user's, and the kit's messages are the user's classes.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

PACKAGE = "synapse.v1"

GENERATE_HINT = (
    "synapse_kit needs the Python modules generated from proto/synapse/v1, importable as "
    "synapse.v1 (for example: python -m grpc_tools.protoc -I proto --python_out=gen --pyi_out=gen "
    "proto/synapse/v1/*.proto, then put gen on sys.path or PYTHONPATH)"
)


class StubsMissing(ImportError):
    """The generated synapse.v1 modules are not importable."""


@cache
def module(name: str) -> ModuleType:
    """The generated module synapse.v1.<name>_pb2 (e.g. "envelope")."""
    try:
        return importlib.import_module(f"{PACKAGE}.{name}_pb2")
    except ImportError as error:
        raise StubsMissing(f"{GENERATE_HINT}: {error}") from error


def envelope() -> ModuleType:
    """synapse.v1.envelope_pb2: Envelope, Header, Signature, AgentRef, MessageType."""
    return module("envelope")


def payloads() -> ModuleType:
    """synapse.v1.payloads_pb2: the payload messages and TaskState."""
    return module("payloads")


def p2p() -> ModuleType:
    """synapse.v1.p2p_pb2: P2PService's requests and responses."""
    return module("p2p")


def capabilities() -> ModuleType:
    """synapse.v1.capabilities_pb2: AgentCapabilities and CapabilitiesService's messages."""
    return module("capabilities")


def confidential() -> ModuleType:
    """synapse.v1.confidential_pb2: ConfidentialSuite, EncryptionKeyBinding, SignedEncryptionKey,
    WrappedKey and Confidentiality (PROTOCOL.md §9)."""
    return module("confidential")


def errors() -> ModuleType:
    """synapse.v1.errors_pb2: ErrorCode and ErrorDetail."""
    return module("errors")


def registry() -> ModuleType:
    """synapse.v1.registry_pb2: RegistryService's messages."""
    return module("registry")
