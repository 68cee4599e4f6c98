"""One broker process: a broker, a controller, or both (KRaft's
`process.roles`). A combined node's broker talks to its own controller
in-process; a broker-only node reaches its controller over the wire."""

from __future__ import annotations

from reference_broker.broker import Broker
from reference_broker.config import BrokerConfig
from reference_broker.controller.service import ControllerService
from reference_broker.controller_link import RemoteController
from reference_broker.protocol.dispatch import versions_for


class Node:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.versions = versions_for(config.process_roles)
        self.controller: ControllerService | None = None
        self.broker: Broker | None = None
        self._remote: RemoteController | None = None

    async def start(self) -> None:
        """Open the controller's log, then register the broker and wait
        until it is unfenced: from then on the node may serve."""
        if "controller" in self.config.process_roles:
            self.controller = ControllerService(self.config)
            self.controller.open()
            self.controller.start()
        if "broker" in self.config.process_roles:
            link = self.controller
            if link is None:
                host, port = self.config.controller
                link = self._remote = RemoteController(
                    host, port, self.node_id, lambda topic: self._topic_id(topic))
            self.broker = Broker(self.config, link)
            await self.broker.start()

    def _topic_id(self, topic: str) -> str | None:
        info = self.broker.image.topics.get(topic)
        return None if info is None else info.topic_id

    async def close(self) -> None:
        if self.broker is not None:
            await self.broker.close()
        if self._remote is not None:
            self._remote.close()
        if self.controller is not None:
            await self.controller.close()
