"""The Python quick start of README.md: submit a task to an agent and watch its
signed events. python quickstart.py http://127.0.0.1:8080 (with the generated
synapse.v1 modules on PYTHONPATH)."""

import sys

from synapse.v1.envelope_pb2 import MessageType
from synapse_kit import Client, Identity

with Client.connect(sys.argv[1], Identity.generate()) as client:
    sent = client.submit("text_analysis", {"text": "Agents talk. They sign."})
    for item in client.watch(sent.task_id):  # every event verified
        if item.kind == "event":
            print(item.sequence, MessageType.Name(item.event.type))
