"""Time in Conveyor: scheduled messages (``producer.produce_at``, ``app.schedules``) and
recurring tasks (``app.recurring``), on Kafka topics rather than a database."""
