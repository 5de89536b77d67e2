"""Administration (Karafka::Admin): topics, configs, groups and lags, data, cluster; declarative
topics from the routes (plan, migrate, align)."""

from conveyor.admin.admin import (
    Admin,
    BrokerInfo,
    ClusterInfo,
    ConfigChange,
    ConfigValue,
    GroupInfo,
    GroupMember,
    Lag,
    PartitionInfo,
    PartitionLoad,
    Replication,
    TopicInfo,
)
from conveyor.admin.declarative import Change, align, migrate, plan

__all__ = [
    "Admin",
    "BrokerInfo",
    "Change",
    "ClusterInfo",
    "ConfigChange",
    "ConfigValue",
    "GroupInfo",
    "GroupMember",
    "Lag",
    "PartitionInfo",
    "PartitionLoad",
    "Replication",
    "TopicInfo",
    "align",
    "migrate",
    "plan",
]
