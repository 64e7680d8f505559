"""Kafka in and out: storm-kafka-client for Squall, on confluent-kafka (``squall[kafka]``).

- :class:`KafkaSpout` with :class:`KafkaSpoutConfig`: Storm's ``KafkaSpout`` and its
  processing guarantees, commit rules, first-poll strategies, retry back-off and
  ``max_uncommitted_offsets`` (``spout.py``, the pure parts in ``offsets.py``);
- record translators (``translator.py``): Storm's ``RecordTranslator`` family;
- :class:`KafkaBolt`: Storm's ``KafkaBolt`` (``bolt.py``);
- Trident (``trident.py``): :class:`KafkaTridentSpoutTransactional`,
  :class:`KafkaTridentSpoutOpaque` and :class:`KafkaStateFactory`, whose batches are Kafka
  transactions (exactly once for a ``read_committed`` reader);
- :class:`TransactionalKafkaBolt` (``exactly_once.py``): each checkpoint's output one Kafka
  transaction, committed with the checkpoint (barrier checkpointing).
"""

from .config import (FirstPollOffsetStrategy, KafkaSpoutConfig, OnBadRecord,
                     ProcessingGuarantee, RetryBackoff)
from .translator import (ByTopicRecordTranslator, DefaultRecordTranslator, KafkaConfigError,
                         KafkaRecord,
                         KafkaTuple, RecordTranslator, SimpleRecordTranslator,
                         json_deserializer, string_deserializer)
from .bolt import (DefaultTopicSelector, FieldNameBasedTupleToKafkaMapper,
                   FieldNameTopicSelector, KafkaBolt)
from .exactly_once import TransactionalKafkaBolt
from .spout import KafkaSpout
from .trident import (KafkaPartition, KafkaState, KafkaStateFactory, KafkaStateUpdater,
                      KafkaTridentSpoutConfig, KafkaTridentSpoutOpaque,
                      KafkaTridentSpoutTransactional)

__all__ = [
    "ByTopicRecordTranslator", "DefaultRecordTranslator", "DefaultTopicSelector",
    "FieldNameBasedTupleToKafkaMapper", "FieldNameTopicSelector", "FirstPollOffsetStrategy",
    "KafkaBolt", "KafkaConfigError", "KafkaPartition", "KafkaRecord", "KafkaSpout",
    "KafkaSpoutConfig", "KafkaState", "KafkaStateFactory", "KafkaStateUpdater",
    "KafkaTridentSpoutConfig", "KafkaTridentSpoutOpaque", "KafkaTridentSpoutTransactional",
    "KafkaTuple", "OnBadRecord",
    "ProcessingGuarantee", "RecordTranslator", "TransactionalKafkaBolt", "RetryBackoff", "SimpleRecordTranslator",
    "json_deserializer", "string_deserializer",
]
