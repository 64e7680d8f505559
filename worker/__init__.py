"""The worker process: executors of a topology's tasks exchanging tuples over ZeroMQ.

:mod:`.worker` is the process and its main loop, :mod:`.executor` the
executor threads, :mod:`.collector` the collectors user code emits through,
:mod:`.transfer` and :mod:`.receiver` the ZeroMQ edges, :mod:`.frame` the
wire format and :mod:`.queue` the water-marked receive queues.
"""
