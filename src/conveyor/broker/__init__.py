"""The development broker: a real Apache Kafka (KRaft) fetched with Maven and run as a background JVM.

``conveyor broker start|stop|status|logs`` is the command-line face of this part;
:class:`DevelopmentBroker` is the same in Python (the test suite uses it).
"""

from conveyor.broker.maven import KAFKA_VERSION, ensure_kafka_jars
from conveyor.broker.probe import ClusterMetadata, probe_metadata
from conveyor.broker.process import BrokerStatus, DevelopmentBroker, StartOutcome

__all__ = [
    "KAFKA_VERSION",
    "BrokerStatus",
    "ClusterMetadata",
    "DevelopmentBroker",
    "StartOutcome",
    "ensure_kafka_jars",
    "probe_metadata",
]
