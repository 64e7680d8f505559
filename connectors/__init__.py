"""Sources and sinks for external systems, as Storm's ``external/`` modules.

One package per system, named after the Storm module it follows (``kafka`` for
storm-kafka-client). A connector imports :mod:`squall.client` and below only, and its
client library is an extra of its own (``pip install 'squall[kafka]'``): importing a
connector without it raises :class:`~squall.client.extras.MissingExtra` naming the extra,
and a topology using it is refused at submit on a cluster that lacks it.
"""
