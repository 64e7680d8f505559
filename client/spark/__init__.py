"""Spark bridge: a bolt that hands batches of its input stream to ``fn(df, batch_id)``.

Like Structured Streaming's ``foreachBatch``. :mod:`.batcher` decides when batches close
and which tuples to ack or fail (pure, no IO, no clock); :mod:`.schema` turns a batch's
rows into a ``pyarrow.Table`` column by column, from the stream's declared fields. pyspark
is an optional extra: nothing in this package imports it at module level.
"""
