"""Entry point of the Python interop client for Synapse over Connect, built on
the kit (synapse_kit) and the modules generated from proto/:
  python synapse_interop.py [--gen DIR] [--cli MAIN_JS] URL VECTORS_DIR
runs the vector checks, the live checks against the server at URL, a gRPC-only
agent that registers there and receives callbacks, and the kit's own agent
serving a task to the kit's client and (with --cli) to the TypeScript command
line, and the A2A checks with the official a2a-sdk client against the
server's A2A face (JSON-RPC and gRPC), and confidential tasks (PROTOCOL.md §9)
both ways. It prints "PASS <name>" or "FAIL <name>: <why>" for each check and exits
1 if any check failed (2 for a usage error)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("vectors", type=Path, help="the directory of the test vectors (test/vectors)")
    parser.add_argument("--gen", type=Path, default=Path(__file__).resolve().parent / "gen",
                        help="the directory grpc_tools.protoc generated into")
    parser.add_argument("--cli", help="the TypeScript command line (dist/src/cli/main.js) to submit to the kit's agent")
    parser.add_argument("--verbose", action="store_true", help="print tracebacks of unexpected errors to stderr")
    args = parser.parse_args(argv)

    if not (args.gen / "synapse" / "v1" / "envelope_pb2.py").is_file():
        print(f"no generated code in {args.gen}; run interop/python/run.sh", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.gen))
    sys.path.insert(1, str(Path(__file__).resolve().parent))

    # Imported only now: they import the generated synapse.v1 modules.
    import a2a_checks
    import agent_checks
    import confidential_checks
    import live_checks
    import vector_checks
    from report import Reporter

    report = Reporter(verbose=args.verbose)
    vector_checks.run(report, args.vectors)
    live_checks.run(report, args.url)
    agent_checks.run(report, args.url)
    agent_checks.run_own_agent(report, args.cli)
    a2a_checks.run(report, args.url)
    confidential_checks.run(report, args.url)
    confidential_checks.run_own_agent(report, args.cli)
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
