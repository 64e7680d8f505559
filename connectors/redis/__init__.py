"""Redis bolts: Storm's storm-redis (``RedisLookupBolt``, ``RedisStoreBolt``,
``RedisFilterBolt`` and their mappers) on redis-py, against one server or a Redis Cluster;
and a reliable spout on a Redis stream (``RedisStreamSpout``, a consumer group per topology).

Needs the ``redis`` extra (``pip install 'squall[redis]'``). The bolts read their server
from the topology conf's ``trident.redis.*`` keys, the same as Trident's Redis map states,
unless a :class:`RedisConfig` says otherwise.
"""

from ...client import extras

extras.require("redis", "squall.connectors.redis")

from .bolt import RedisFilterBolt, RedisLookupBolt, RedisStoreBolt  # noqa: E402
from .config import RedisConfig  # noqa: E402
from .streams import EntryTranslator, RedisStreamSpout  # noqa: E402
from .mapper import (FieldFilterMapper, FieldLookupMapper, FieldStoreMapper,  # noqa: E402
                     MappingError, RedisDataType, RedisDataTypeDescription, RedisFilterMapper,
                     RedisLookupMapper, RedisStoreMapper)

__all__ = ["EntryTranslator", "RedisStreamSpout", "FieldFilterMapper", "FieldLookupMapper", "FieldStoreMapper", "MappingError",
           "RedisConfig", "RedisDataType", "RedisDataTypeDescription", "RedisFilterBolt",
           "RedisFilterMapper", "RedisLookupBolt", "RedisLookupMapper", "RedisStoreBolt",
           "RedisStoreMapper"]
