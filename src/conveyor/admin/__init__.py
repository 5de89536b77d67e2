"""Administration: topics, partitions, watermarks, cluster information (Karafka::Admin)."""

from conveyor.admin.admin import Admin, BrokerInfo, ClusterInfo, PartitionInfo, TopicInfo

__all__ = ["Admin", "BrokerInfo", "ClusterInfo", "PartitionInfo", "TopicInfo"]
