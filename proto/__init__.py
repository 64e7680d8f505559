"""Protocol Buffers messages of Squall, generated from the ``*.proto`` files in
this folder (``topology.proto``: the serialized topology a submitter ships and
a worker reads back). Regenerate the ``*_pb2.py``/``*_pb2.pyi`` modules with
``bash proto/generate.sh``; do not edit them by hand.
"""
