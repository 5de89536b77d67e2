"""Making the topics a connect cluster needs: several workers may start at once, so a topic
another one made in the meantime is not an error."""

from __future__ import annotations

from collections.abc import Mapping

from conveyor.admin import Admin
from conveyor.errors import KafkaError

__all__ = ["ensure_topic"]


def ensure_topic(
    admin: Admin,
    name: str,
    partitions: int,
    replication_factor: int | None = None,
    config: Mapping[str, str] | None = None,
) -> int:
    """Create ``name`` unless it exists; its partition count (the existing topic's, when it
    existed: every worker must agree on it).

    Raises:
        KafkaError: Kafka refused the creation for another reason than a topic of that name.
    """
    have = admin.partition_counts().get(name)
    if have is not None:
        return have
    try:
        admin.create_topic(name, partitions, replication_factor, config=config)
    except KafkaError as error:
        if error.name != "TOPIC_ALREADY_EXISTS" and "TOPIC_ALREADY_EXISTS" not in str(error):
            raise  # (made by another worker meanwhile: fine)
        return admin.partition_counts().get(name, partitions)
    return partitions
