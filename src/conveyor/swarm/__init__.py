"""The swarm: a supervisor that runs N ``conveyor server`` processes of one app (see
:mod:`conveyor.swarm.supervisor`) and the heartbeat each node sends it."""

from conveyor.swarm.heartbeat import start_heartbeat
from conveyor.swarm.supervisor import Supervisor

__all__ = ["Supervisor", "start_heartbeat"]
