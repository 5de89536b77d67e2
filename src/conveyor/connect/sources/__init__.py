"""Sources: what reads another system into Kafka for a source connector (PostgreSQL change
data capture through logical replication)."""
